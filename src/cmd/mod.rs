//! One module per subcommand: parse its arguments, do the work through the libraries, print.

pub mod controller;
pub mod crds;
pub mod validate;
