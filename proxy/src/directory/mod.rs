//! Where routes come from: the [`Directory`] port gives the proxy a stream of route updates
//! (sandbox → [`RouteState`]), wakes sandboxes and takes activity reports.
//!
//! Two implementations: [`StoreDirectory`] on `Store<Sandbox>` (both modes) and
//! [`StaticDirectory`] from the config file (operators and tests).

mod contract;
mod derive;
mod static_routes;
mod store;

pub use contract::{
    ActivityReport, Directory, DirectoryError, Endpoint, PortMapping, Result, RouteState,
    RouteUpdate, SandboxKey,
};
pub use derive::route_state;
pub use static_routes::StaticDirectory;
pub use store::StoreDirectory;
