//! Model tests of hold-and-wake: random interleavings of sandbox lifecycle events (suspend,
//! resume, endpoint published/withdrawn, Ready/not Ready, delete, recreate with the same name),
//! directory behaviour (watch lag, relist, wake calls failing) and clients (connections
//! arriving, cancelling, deadlines), driven through the proxy's own pure machines
//! (`hold::step`, `hold::step_cycle`, `hold::number_suspension`), the way `route::connect` and
//! `route::table` drive them.
//!
//! Invariants, checked after every event and at the end:
//! - a wake is under way whenever a connection is held for a sandbox whose desired mode, as
//!   the proxy sees it, is Suspended;
//! - at most one wake per cycle (per slot and suspension, unless the previous one was given up
//!   or outlived the wake deadline);
//! - held counts match the held connections, and return to zero;
//! - connections of a deleted sandbox end at once;
//! - once the directory catches up and the controller does its work, every connection ends
//!   served or refused — none is left waiting for a wake that never comes.

use proptest::prelude::*;

mod sandbox;
mod world;

use sandbox::{Op, op};
use world::World;

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1500,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_lost_wake_under_any_interleaving(ops in proptest::collection::vec(op(), 1..80)) {
        let mut world = World::new();
        for (n, op) in ops.iter().enumerate() {
            world.run(*op);
            world.check(&format!("after op {n} ({op:?}) at {:?}", world.now - world.t0));
        }
        world.settle();
        for conn in &world.conns {
            prop_assert!(conn.end.is_some(), "left waiting after settling: {:?}", conn);
        }
        prop_assert_eq!(world.slot.as_ref().map_or(0, |s| s.held), 0);
    }
}

/// The repro, step by step: woken, suspended again before Ready, connect — a wake is
/// sent at once each time.
#[test]
fn a_suspend_before_ready_gets_a_wake_at_once() {
    let mut world = World::new();
    for cycle in 0..5 {
        world.run(Op::Connect);
        world.run(Op::Want);
        world.check("connected");
        assert_eq!(world.wakes.len(), 1, "cycle {cycle}: one wake sent");
        world.run(Op::WakeOk);
        world.run(Op::Deliver); // Starting: desired Running seen
        world.run(Op::Suspend); // before Ready
        world.run(Op::Deliver);
        world.run(Op::Want);
        world.check("suspended again");
        // The connection saw the new suspension and asked for its wake.
        assert_eq!(
            world.wakes.len(),
            1,
            "cycle {cycle}: the new suspension's wake"
        );
        world.settle();
        assert!(world.conns.iter().all(|c| c.end == Some(Ok(()))));
        // The controller suspends it for good: not Ready, endpoint withdrawn.
        for op in [Op::Suspend, Op::NotReady, Op::Withdraw, Op::Relist] {
            world.run(op);
        }
    }
}

/// A connection that read the suspension just before the routing table saw the wake land asks
/// for its wake after the cycle ended: nothing is sent again (the second PATCH that CI saw
/// once in `tests/kube_wake.rs`).
#[test]
fn a_want_read_before_the_resume_sends_no_second_wake() {
    let mut world = World::new();
    world.run(Op::Connect);
    world.run(Op::Want);
    assert_eq!(world.wakes.len(), 1, "the first connection's wake");
    world.run(Op::Connect); // reads Suspended(1) too; its want is still on its way
    world.run(Op::WakeOk);
    world.run(Op::Deliver); // desired Running seen: the cycle ends
    world.run(Op::Want); // the second connection's stale want
    assert!(world.wakes.is_empty(), "no second wake: {:?}", world.wakes);
    world.check("stale want");
    world.settle();
    assert!(world.conns.iter().all(|c| c.end == Some(Ok(()))));
    assert_eq!(world.sent.len(), 1, "one wake in all: {:?}", world.sent);
}
