//! One module per subcommand: parse its arguments, do the work through the libraries, print.

pub mod crds;
pub mod proxy;
pub mod validate;
