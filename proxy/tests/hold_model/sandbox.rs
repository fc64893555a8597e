//! The stored sandbox of the model and the operations that happen to it and around it.

use proptest::prelude::*;
use rouse_proxy::RouteState;
use rouse_proxy::directory::{Endpoint, PortMapping};

/// One thing that happens.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    Suspend,
    Resume,
    Publish,
    Withdraw,
    Ready,
    NotReady,
    Delete,
    Recreate {
        suspended: bool,
    },
    /// The oldest wake asked for by a connection reaches its slot's cycle (a connection reads
    /// the route and asks for the wake in two steps, and the routing table may change the
    /// route in between).
    Want,
    WakeOk,
    WakeFail,
    Deliver,
    Relist,
    Connect,
    Cancel(usize),
    Tick,
}

pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Suspend),
        1 => Just(Op::Resume),
        1 => Just(Op::Publish),
        1 => Just(Op::Withdraw),
        1 => Just(Op::Ready),
        1 => Just(Op::NotReady),
        1 => Just(Op::Delete),
        1 => any::<bool>().prop_map(|suspended| Op::Recreate { suspended }),
        3 => Just(Op::Want),
        2 => Just(Op::WakeOk),
        1 => Just(Op::WakeFail),
        3 => Just(Op::Deliver),
        1 => Just(Op::Relist),
        3 => Just(Op::Connect),
        1 => (0usize..16).prop_map(Op::Cancel),
        1 => Just(Op::Tick),
    ]
}

/// The sandbox as stored (the truth the directory watches).
#[derive(Debug, Clone, Copy)]
pub struct Sandbox {
    pub exists: bool,
    pub suspended: bool,
    pub generation: u64,
    pub uid: u32,
    pub ready: bool,
    pub endpoint: bool,
}

impl Sandbox {
    /// The route state the directory derives (as `directory::route_state` does).
    pub fn route(&self) -> RouteState {
        match *self {
            Sandbox { exists: false, .. } => RouteState::Missing,
            Sandbox {
                suspended: true,
                generation,
                uid,
                ..
            } => RouteState::Suspended {
                wake_on_connect: true,
                generation,
                uid: uid.to_string(),
            },
            Sandbox {
                ready: true,
                endpoint: true,
                ..
            } => RouteState::Running {
                endpoint: endpoint_value(),
            },
            Sandbox { endpoint, .. } => RouteState::Starting {
                endpoint: endpoint.then_some(endpoint_value()),
            },
        }
    }

    /// Whether a dial to it succeeds now.
    pub fn listening(&self) -> bool {
        self.exists && !self.suspended && self.ready
    }
}

pub fn endpoint_value() -> Endpoint {
    Endpoint {
        address: "127.0.0.1".to_owned(),
        ports: vec![PortMapping {
            container_port: 80,
            port: 8080,
        }],
    }
}
