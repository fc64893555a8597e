//! A fake Kubernetes API server and kubelet, in process, for tests of the Kubernetes
//! adapters with the real `kube::Client`. See `testsupport/README.md` for what is faithful
//! to a real API server and what is not.

mod delete;
mod handler;
mod kubelet;
mod patch;
mod query;
mod registry;
mod rules;
mod scale;
mod selector;
mod server;
mod status;
mod storage;
mod watch;
mod write;

pub(crate) use kubelet::pod_status;
pub use kubelet::{FakeKubelet, KubeletOptions, PodDeletion, PodOutcome};
pub use registry::{RESOURCES, ResourceType};
pub use server::{FakeApiServer, FakeApiServerBuilder, RequestCounts};
pub use status::ApiError;

#[cfg(test)]
mod tests;
