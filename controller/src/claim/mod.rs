//! The SandboxClaim reconciler: the pure [`plan`], the status it builds, the adoption patch,
//! and the generic [`reconcile_claim`] driver both modes call.

mod adopt;
mod plan;
mod reconcile;
mod reservations;
mod status;

pub use adopt::adoption_patch;
pub use plan::{
    Binding, ClaimObserved, ClaimPlan, ClaimStep, MISSING_REQUEUE, bound_name, cold_sandbox, plan,
};
pub use reconcile::{ClaimError, ClaimOutcome, reconcile_claim};
pub use reservations::{Reservation, Reservations};
pub use status::reason;

#[cfg(test)]
mod tests;
