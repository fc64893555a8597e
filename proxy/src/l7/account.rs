//! The account phase's per-request counts (the phase list is in `l7/mod.rs`): every answer,
//! the sandbox's or the proxy's own, whichever codec wrote it, counted once in
//! `rouse_proxy_requests_total{code}`. Activity (open requests, bytes) is the exchange's
//! guard's.

use crate::metrics as m;

/// Counts one answered request with status `code`.
pub(super) fn answered(code: u16) {
    m::hot::REQUESTS_BY_CODE[status_label(code)].increment(1);
}

/// The position in `metrics::hot::REQUEST_CODE_LABELS` of a status code's bounded label:
/// common codes by number, others by class.
// The specific codes come first on purpose; the class ranges catch the rest.
#[allow(clippy::match_overlapping_arm)]
fn status_label(code: u16) -> usize {
    match code {
        101 => 0,
        200 => 1,
        201 => 2,
        204 => 3,
        301 => 4,
        302 => 5,
        304 => 6,
        400 => 7,
        401 => 8,
        403 => 9,
        404 => 10,
        429 => 11,
        431 => 12,
        500 => 13,
        501 => 14,
        502 => 15,
        503 => 16,
        504 => 17,
        100..=199 => 18,
        200..=299 => 19,
        300..=399 => 20,
        400..=499 => 21,
        _ => 22,
    }
}
