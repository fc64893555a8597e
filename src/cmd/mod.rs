//! One module per subcommand: parse its arguments, do the work through the libraries, print.

pub mod apply;
pub mod cgroup_exec;
pub mod client;
pub mod cluster;
pub mod controller;
pub mod crds;
pub mod delete;
pub mod get;
pub mod kubeconfig;
pub mod logs;
pub mod merge_exec;
pub mod mode;
pub mod open_files;
pub mod proxy;
pub mod table;
pub mod up;
pub mod usage;
pub mod validate;
pub mod wait;
