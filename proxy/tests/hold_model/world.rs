//! The model: a stored sandbox, a lagging directory, the proxy's routing-table slot and its
//! connections, each step driven through the proxy's pure machines.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use rouse_proxy::RouteState;
use rouse_proxy::hold::{
    self, Cycle, CycleAction, CycleEvent, Hold, HoldAction, HoldEvent, Observed, Refusal,
    Suspension,
};

use crate::sandbox::{Op, Sandbox};

/// The wake deadline of the model (connections and wake cycles).
pub const DEADLINE: Duration = Duration::from_secs(60);
/// How far one `Tick` moves the model's clock.
pub const TICK: Duration = Duration::from_secs(7);

/// The proxy's routing-table slot of the sandbox.
#[derive(Debug)]
pub struct Slot {
    pub id: u32,
    pub route: RouteState,
    pub suspension: Suspension,
    pub cycle: Cycle,
    pub held: usize,
}

#[derive(Debug)]
pub struct Conn {
    pub slot: u32,
    pub hold: Hold,
    pub counted: bool,
    pub arrived: Instant,
    pub end: Option<Result<(), Refusal>>,
}

pub struct World {
    pub t0: Instant,
    pub now: Instant,
    pub sandbox: Sandbox,
    /// Store events the directory has not seen yet (watch lag).
    pub pending: VecDeque<RouteState>,
    /// The directory's last sent state (it drops repeats, as `StoreDirectory` does).
    pub known: RouteState,
    pub slot: Option<Slot>,
    pub next_slot: u32,
    pub conns: Vec<Conn>,
    /// Wakes asked for by connections, not yet seen by the slot's cycle: (slot, suspension).
    pub wants: VecDeque<(u32, Suspension)>,
    /// Wake calls in flight: (slot, suspension).
    pub wakes: VecDeque<(u32, Suspension)>,
    /// When each (slot, suspension) wake was last sent and not given up.
    pub sent: HashMap<(u32, Suspension), Instant>,
}

impl World {
    pub fn new() -> Self {
        let t0 = Instant::now();
        let sandbox = Sandbox {
            exists: true,
            suspended: true,
            generation: 1,
            uid: 1,
            ready: false,
            endpoint: false,
        };
        let mut world = World {
            t0,
            now: t0,
            sandbox,
            pending: VecDeque::new(),
            known: RouteState::Missing,
            slot: None,
            next_slot: 0,
            conns: Vec::new(),
            wants: VecDeque::new(),
            wakes: VecDeque::new(),
            sent: HashMap::new(),
        };
        world.relist();
        world
    }

    /// Changes the stored sandbox; the watch reports it later.
    pub fn store(&mut self, change: impl FnOnce(&mut Sandbox)) {
        let before = self.sandbox.route();
        change(&mut self.sandbox);
        let after = self.sandbox.route();
        if before != after {
            self.pending.push_back(after);
        }
    }

    pub fn deliver(&mut self) {
        if let Some(state) = self.pending.pop_front() {
            self.directory_sends(state);
        }
    }

    pub fn relist(&mut self) {
        self.pending.clear();
        self.directory_sends(self.sandbox.route());
    }

    pub fn directory_sends(&mut self, state: RouteState) {
        if state == self.known {
            return;
        }
        self.known = state.clone();
        self.apply(state);
    }

    /// `RouteTable::apply`, then the held connections of the slot look at the new state.
    pub fn apply(&mut self, state: RouteState) {
        let now = self.now;
        if state == RouteState::Missing {
            if let Some(mut slot) = self.slot.take() {
                slot.cycle = hold::step_cycle(
                    slot.cycle,
                    CycleEvent::Observed {
                        suspension: slot.suspension,
                        suspended: false,
                        now,
                    },
                )
                .0;
                self.slot = Some(Slot {
                    route: RouteState::Missing,
                    ..slot
                });
                self.notify();
                self.slot = None;
            }
            return;
        }
        let slot = self.slot.get_or_insert_with(|| {
            self.next_slot += 1;
            Slot {
                id: self.next_slot,
                route: RouteState::Missing,
                suspension: 0,
                cycle: Cycle::NEW,
                held: 0,
            }
        });
        slot.suspension = hold::number_suspension(slot.suspension, &slot.route, &state);
        let event = CycleEvent::Observed {
            suspension: slot.suspension,
            suspended: state.is_wakeable(),
            now,
        };
        slot.route = state;
        slot.cycle = hold::step_cycle(slot.cycle, event).0;
        self.notify();
    }

    /// Every waiting connection of the current slot sees its state.
    pub fn notify(&mut self) {
        let Some(id) = self.slot.as_ref().map(|s| s.id) else {
            return;
        };
        for i in 0..self.conns.len() {
            let conn = &self.conns[i];
            if conn.slot == id && conn.end.is_none() && conn.hold != Hold::Arrived {
                let event = self.look();
                self.drive(i, event);
            }
        }
    }

    pub fn look(&self) -> HoldEvent {
        let observed = match self.slot.as_ref().map(|s| (&s.route, s.suspension)) {
            None | Some((RouteState::Missing, _)) => Observed::Missing,
            Some((RouteState::Failed { .. }, _)) => Observed::Failed,
            Some((RouteState::Suspended { .. }, suspension)) => Observed::Suspended(suspension),
            Some((RouteState::Starting { endpoint: None }, _)) => Observed::Starting,
            Some(_) => Observed::Dialable { has_port: true },
        };
        HoldEvent::Route(observed)
    }

    pub fn connect(&mut self) {
        let Some(slot) = self.slot.as_ref() else {
            return; // 404 at once: nothing is held.
        };
        self.conns.push(Conn {
            slot: slot.id,
            hold: Hold::Arrived,
            counted: false,
            arrived: self.now,
            end: None,
        });
        let event = self.look();
        self.drive(self.conns.len() - 1, event);
    }

    /// Runs one connection's machine the way `route::connect::connect_slot` does.
    pub fn drive(&mut self, i: usize, event: HoldEvent) {
        let mut event = Some(event);
        while let Some(current) = event.take() {
            let (next, actions) = hold::step(self.conns[i].hold, current);
            self.conns[i].hold = next;
            for action in actions.iter() {
                match action {
                    HoldAction::Hold => {
                        let slot = self.slot.as_mut().expect("held on a live slot");
                        slot.held += 1;
                        self.conns[i].counted = true;
                    }
                    HoldAction::Wake(suspension) => {
                        let slot = self.conns[i].slot;
                        self.wants.push_back((slot, suspension));
                    }
                    HoldAction::Wait | HoldAction::Pause => {}
                    HoldAction::Dial => {
                        event = Some(if self.sandbox.listening() {
                            HoldEvent::Dialed
                        } else {
                            HoldEvent::DialFailed { retryable: true }
                        });
                    }
                    HoldAction::Serve => self.end(i, Ok(())),
                    HoldAction::Refuse(why) => self.end(i, Err(why)),
                }
            }
        }
    }

    pub fn end(&mut self, i: usize, how: Result<(), Refusal>) {
        let conn = &mut self.conns[i];
        conn.end = Some(how);
        if std::mem::take(&mut conn.counted) {
            let id = conn.slot;
            if let Some(slot) = self.slot.as_mut().filter(|s| s.id == id) {
                slot.held -= 1;
            }
        }
    }

    /// `route::connect::maybe_wake` for the oldest wake a connection asked for.
    pub fn want(&mut self) {
        let now = self.now;
        let Some((id, suspension)) = self.wants.pop_front() else {
            return;
        };
        let Some(slot) = self.slot.as_mut().filter(|s| s.id == id) else {
            return; // The connection's slot is gone (deleted): its gate goes with it.
        };
        let event = CycleEvent::Want {
            suspension,
            now,
            deadline: DEADLINE,
        };
        let (cycle, action) = hold::step_cycle(slot.cycle, event);
        slot.cycle = cycle;
        if let Some(CycleAction::SendWake(s)) = action {
            let key = (slot.id, s);
            if let Some(before) = self.sent.get(&key) {
                assert!(
                    now.duration_since(*before) >= DEADLINE,
                    "a second wake for suspension {s} within the deadline"
                );
            }
            self.sent.insert(key, now);
            self.wakes.push_back(key);
        }
    }

    /// The directory answers the oldest wake call.
    pub fn wake_answered(&mut self, ok: bool) {
        let Some((id, suspension)) = self.wakes.pop_front() else {
            return;
        };
        if ok && self.sandbox.exists {
            // The merge patch sets the desired mode Running (the generation moves if it was not).
            self.store(|sb| {
                if sb.suspended {
                    sb.suspended = false;
                    sb.generation += 1;
                }
            });
            return;
        }
        // Failed (or not found): retried while wanted, else given up.
        let Some(slot) = self.slot.as_mut().filter(|s| s.id == id) else {
            return;
        };
        let waking = matches!(slot.cycle, Cycle::Waking { suspension: s, .. } if s == suspension);
        if slot.held > 0 && waking {
            self.wakes.push_back((id, suspension));
        } else {
            slot.cycle = hold::step_cycle(slot.cycle, CycleEvent::GaveUp { suspension }).0;
            self.sent.remove(&(id, suspension));
        }
    }

    /// Every connection pausing after a refused dial looks at the route again.
    pub fn end_pauses(&mut self) {
        for i in 0..self.conns.len() {
            if self.conns[i].end.is_none() && matches!(self.conns[i].hold, Hold::Backoff { .. }) {
                let event = self.look();
                self.drive(i, event);
            }
        }
    }

    pub fn tick(&mut self) {
        self.now += TICK;
        for i in 0..self.conns.len() {
            let conn = &self.conns[i];
            if conn.end.is_some() {
                continue;
            }
            if self.now >= conn.arrived + DEADLINE {
                self.drive(i, HoldEvent::Deadline);
            } else if matches!(conn.hold, Hold::Backoff { .. }) {
                let event = self.look();
                self.drive(i, event);
            }
        }
    }

    pub fn run(&mut self, op: Op) {
        match op {
            Op::Suspend => self.store(|sb| {
                if sb.exists && !sb.suspended {
                    sb.suspended = true;
                    sb.generation += 1;
                }
            }),
            Op::Resume => self.store(|sb| {
                if sb.exists && sb.suspended {
                    sb.suspended = false;
                    sb.generation += 1;
                }
            }),
            Op::Publish => self.store(|sb| sb.endpoint = sb.exists),
            Op::Withdraw => self.store(|sb| sb.endpoint = false),
            Op::Ready => self.store(|sb| sb.ready = sb.exists && !sb.suspended),
            Op::NotReady => self.store(|sb| sb.ready = false),
            Op::Delete => self.store(|sb| sb.exists = false),
            Op::Recreate { suspended } => self.store(|sb| {
                if !sb.exists {
                    *sb = Sandbox {
                        exists: true,
                        suspended,
                        generation: 1,
                        uid: sb.uid + 1,
                        ready: false,
                        endpoint: false,
                    };
                }
            }),
            Op::Want => self.want(),
            Op::WakeOk => self.wake_answered(true),
            Op::WakeFail => self.wake_answered(false),
            Op::Deliver => self.deliver(),
            Op::Relist => self.relist(),
            Op::Connect => self.connect(),
            Op::Cancel(n) => {
                let live: Vec<usize> = (0..self.conns.len())
                    .filter(|&i| self.conns[i].end.is_none())
                    .collect();
                if let Some(&i) = live.get(n % live.len().max(1)) {
                    self.drive(i, HoldEvent::Cancelled);
                }
            }
            Op::Tick => self.tick(),
        }
    }

    pub fn check(&self, when: &str) {
        let live = |c: &&Conn| c.end.is_none();
        for conn in self.conns.iter().filter(live) {
            assert_eq!(conn.counted, conn.hold.is_held(), "{when}: {conn:?}");
            assert!(
                self.now < conn.arrived + DEADLINE,
                "{when}: a connection outlived its deadline: {conn:?}"
            );
            assert!(
                self.slot.as_ref().is_some_and(|s| s.id == conn.slot),
                "{when}: a connection of a deleted sandbox is still open: {conn:?}"
            );
        }
        let Some(slot) = &self.slot else { return };
        let held = self
            .conns
            .iter()
            .filter(live)
            .filter(|c| c.slot == slot.id && c.counted)
            .count();
        assert_eq!(slot.held, held, "{when}: held count");
        let asked = self.wants.contains(&(slot.id, slot.suspension));
        if held > 0 && slot.route.is_wakeable() && !asked {
            assert!(
                matches!(slot.cycle, Cycle::Waking { suspension, .. } if suspension == slot.suspension),
                "{when}: {held} held for suspension {} and no wake: {:?}",
                slot.suspension,
                slot.cycle
            );
        }
    }

    /// The directory catches up, wake calls succeed and the controller starts what is desired
    /// Running, until nothing changes.
    pub fn settle(&mut self) {
        for _ in 0..64 {
            let before = (self.sandbox.route(), self.known.clone(), self.wakes.len());
            while !self.pending.is_empty() {
                self.deliver();
            }
            while !self.wants.is_empty() {
                self.want();
            }
            while !self.wakes.is_empty() {
                self.wake_answered(true);
            }
            self.store(|sb| {
                if sb.exists && !sb.suspended {
                    sb.ready = true;
                    sb.endpoint = true;
                }
            });
            // Pauses after a refused dial end (their timer), even with no route change.
            self.end_pauses();
            self.check("settling");
            if before == (self.sandbox.route(), self.known.clone(), self.wakes.len())
                && self.pending.is_empty()
                && self.wants.is_empty()
            {
                return;
            }
        }
        panic!("the model did not settle");
    }
}
