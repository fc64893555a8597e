//! Table tests of the hold and cycle machines; the random interleavings are in
//! `proxy/tests/hold_model/`.

use std::time::{Duration, Instant};

use super::*;

fn actions(state: Hold, event: HoldEvent) -> (Hold, Vec<HoldAction>) {
    let (next, out) = step(state, event);
    (next, out.iter().collect())
}

#[test]
fn a_suspended_sandbox_holds_and_wakes() {
    let (next, out) = actions(Hold::Arrived, HoldEvent::Route(Observed::Suspended(3)));
    assert_eq!(next, Hold::Held);
    assert_eq!(
        out,
        [HoldAction::Hold, HoldAction::Wake(3), HoldAction::Wait]
    );
    // Already held: a new suspension asks for its wake without counting the hold twice.
    let (next, out) = actions(Hold::Held, HoldEvent::Route(Observed::Suspended(4)));
    assert_eq!(next, Hold::Held);
    assert_eq!(out, [HoldAction::Wake(4), HoldAction::Wait]);
}

#[test]
fn terminal_observations_refuse_at_once() {
    for (observed, why) in [
        (Observed::Missing, Refusal::NotFound),
        (Observed::Failed, Refusal::Failed),
        (Observed::SuspendedNoWake, Refusal::Suspended),
        (Observed::Dialable { has_port: false }, Refusal::UnknownPort),
    ] {
        for state in [Hold::Arrived, Hold::Held, Hold::Backoff { waited: true }] {
            let (next, out) = actions(state, HoldEvent::Route(observed));
            assert_eq!(next, Hold::Done, "{state:?} + {observed:?}");
            assert_eq!(out, [HoldAction::Refuse(why)], "{state:?} + {observed:?}");
        }
    }
}

#[test]
fn a_refused_dial_pauses_held_and_a_served_dial_ends() {
    let (next, out) = actions(
        Hold::Arrived,
        HoldEvent::Route(Observed::Dialable { has_port: true }),
    );
    assert_eq!(
        (next, out.as_slice()),
        (
            Hold::Dialing {
                held: false,
                waited: false
            },
            &[HoldAction::Dial][..]
        )
    );
    let (next, out) = actions(next, HoldEvent::DialFailed { retryable: true });
    assert_eq!(next, Hold::Backoff { waited: false });
    assert_eq!(out, [HoldAction::Hold, HoldAction::Pause]);
    let (next, out) = actions(next, HoldEvent::Deadline);
    assert_eq!(next, Hold::Done);
    assert_eq!(
        out,
        [HoldAction::Refuse(Refusal::Deadline { waited: false })]
    );
    let dialing = Hold::Dialing {
        held: true,
        waited: true,
    };
    assert_eq!(
        actions(dialing, HoldEvent::Dialed),
        (Hold::Done, vec![HoldAction::Serve])
    );
    assert_eq!(
        actions(dialing, HoldEvent::DialFailed { retryable: false }),
        (Hold::Done, vec![HoldAction::Refuse(Refusal::Upstream)])
    );
}

#[test]
fn the_cycle_ends_on_any_desired_running_state_and_restarts_per_suspension() {
    let t0 = Instant::now();
    let deadline = Duration::from_secs(60);
    let want = |suspension, now| CycleEvent::Want {
        suspension,
        now,
        deadline,
    };
    let (cycle, action) = step_cycle(Cycle::NEW, want(1, t0));
    assert_eq!(action, Some(CycleAction::SendWake(1)));
    let (cycle, action) = step_cycle(cycle, want(1, t0 + Duration::from_secs(1)));
    assert_eq!(action, None, "single flight");
    let later = t0 + Duration::from_secs(2);
    let (cycle, action) = step_cycle(
        cycle,
        CycleEvent::Observed {
            suspension: 1,
            suspended: false,
            now: later,
        },
    );
    assert_eq!(cycle, Cycle::Idle { settled: 1 });
    assert_eq!(action, Some(CycleAction::Ended(Duration::from_secs(2))));
    let (cycle, action) = step_cycle(cycle, want(1, later));
    assert_eq!(
        action, None,
        "a connection that read suspension 1 before it ended wakes nothing"
    );
    let (cycle, action) = step_cycle(cycle, want(2, later));
    assert_eq!(action, Some(CycleAction::SendWake(2)), "a new suspension");
    let (cycle, action) = step_cycle(cycle, CycleEvent::GaveUp { suspension: 1 });
    assert_eq!((cycle, action), (cycle, None), "an old give-up is ignored");
    let (cycle, _) = step_cycle(cycle, CycleEvent::GaveUp { suspension: 2 });
    assert_eq!(cycle, Cycle::Idle { settled: 1 });
    let (_, action) = step_cycle(cycle, want(2, later));
    assert_eq!(
        action,
        Some(CycleAction::SendWake(2)),
        "a wake given up is sent again"
    );
}
