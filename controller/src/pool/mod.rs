//! The SandboxWarmPool reconciler: the pure [`plan`], the [`Expectations`] of writes in
//! flight it counts, and the generic [`reconcile_pool`] driver both modes call.

mod expectations;
mod plan;
mod reconcile;

pub use expectations::{EXPECTATION_TIMEOUT, Expectations, InFlight};
pub use plan::{
    PoolObserved, PoolPlan, controlled_by, is_ready, member_prototype, member_selector,
    member_selector_string, plan,
};
pub use reconcile::{PoolError, PoolOutcome, reconcile_pool};

#[cfg(test)]
mod rollout_tests;
#[cfg(test)]
mod tests;
