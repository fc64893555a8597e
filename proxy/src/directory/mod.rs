//! Where routes come from: the [`Directory`] port gives the proxy a stream of route updates
//! (sandbox → [`RouteState`]), wakes sandboxes and takes activity reports.
//!
//! Two implementations: [`StoreDirectory`] on `Store<Sandbox>` (both modes) and
//! [`StaticDirectory`] from the config file (operators and tests); [`DirectDirectory`] wraps
//! one to wake sandboxes through a runtime in the same process first (standalone mode).

mod contract;
mod derive;
mod direct;
mod static_routes;
mod store;

pub use contract::{
    ActivityReport, Directory, DirectoryError, Endpoint, PortMapping, Result, RouteState,
    RouteUpdate, SandboxKey,
};
pub use derive::{route_state, status_endpoint};
pub use direct::{DirectDirectory, DirectStart, DirectWake, Overrides, Woken};
pub use static_routes::StaticDirectory;
pub use store::StoreDirectory;
