//! Controller scenarios written once and run against the fake API server (with the fake
//! kubelet) and, when `ROUSE_E2E_KUBECONFIG` is set, against a real cluster.
//!
//! Each scenario gets an [`Env`]: a client, a namespace of its own and a way to start
//! controllers in process; it creates Sandboxes and waits on conditions with deadlines.

#![allow(dead_code)]

pub mod env;
pub mod fake;
pub mod lifecycle;
pub mod ownership;
pub mod snapshots;

#[allow(unused_imports)]
pub use env::{Env, RunningController, deadline, sandbox, wait_for};
