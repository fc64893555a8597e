//! The SandboxClaim reconciler: the pure [`plan`], the status it builds, the adoption patch,
//! the generic [`reconcile_claim`] driver both modes call, and [`reconcile_claims`], which
//! the standalone driver uses to adopt for many claims in one batch of writes.

mod adopt;
mod batch;
mod members;
mod plan;
mod reconcile;
mod reservations;
mod status;
mod writes;

pub use adopt::adoption_patch;
pub use batch::{BatchResult, reconcile_claims};
pub use members::MemberCache;
pub use plan::{
    Binding, ClaimObserved, ClaimPlan, ClaimStep, MISSING_REQUEUE, bound_name, cold_sandbox, plan,
};
pub use reconcile::{ClaimError, ClaimOutcome, reconcile_claim};
pub use reservations::{FreeMembers, Reservation, Reservations, SUPERSEDED_LIMIT};
pub use status::reason;
pub use writes::{Adoption, AdoptionStep, AdoptionWrites};

#[cfg(test)]
mod tests;
