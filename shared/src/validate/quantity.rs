//! Kubernetes quantity syntax (`500m`, `1.5Gi`, `1e3`), checked where resources and sizes are
//! given, so `10GB` is caught before the API server rejects the pod or claim.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::text::quote;
use super::{FieldPath, Findings};

/// Suffixes a quantity may end in: none, binary SI, decimal SI.
const SUFFIXES: [&str; 16] = [
    "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E",
];

/// Checks every quantity of a `limits` and a `requests` map.
pub(super) fn check_maps(
    limits: Option<&BTreeMap<String, Quantity>>,
    requests: Option<&BTreeMap<String, Quantity>>,
    path: &FieldPath,
    out: &mut Findings,
) {
    for (field, map) in [("limits", limits), ("requests", requests)] {
        for (name, q) in map.into_iter().flatten() {
            check(&q.0, &path.field(field).key(name), out);
        }
    }
}

/// Checks one quantity.
pub(super) fn check(q: &str, path: &FieldPath, out: &mut Findings) {
    let Err(problem) = parse(q) else {
        return;
    };
    let hint = match problem {
        Problem::Suffix => {
            " (binary units are Ki, Mi, Gi, Ti, Pi, Ei; decimal k, M, G, T, P, E; there is no B)"
        }
        Problem::Number => "",
    };
    out.error(
        path,
        format!(
            "{} is not a quantity such as 500m, 128Mi or 10Gi{hint}",
            quote(q)
        ),
    );
}

/// Which part of a quantity is wrong.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Problem {
    /// The number before the suffix.
    Number,
    /// The unit suffix or exponent.
    Suffix,
}

/// Parses `<sign><digits>[.<digits>]<suffix>` as the API server does.
pub(super) fn parse(q: &str) -> Result<(), Problem> {
    let unsigned = q.strip_prefix(['+', '-']).unwrap_or(q);
    let digits_end = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(digits_end);
    let valid_number = number.chars().filter(|c| *c == '.').count() <= 1
        && number.chars().any(|c| c.is_ascii_digit());
    if !valid_number {
        return Err(Problem::Number);
    }
    if SUFFIXES.contains(&suffix) {
        return Ok(());
    }
    // Decimal exponent: e|E followed by a signed integer.
    let exponent = suffix
        .strip_prefix(['e', 'E'])
        .map(|e| e.strip_prefix(['+', '-']).unwrap_or(e));
    match exponent {
        Some(e) if !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit()) => Ok(()),
        _ => Err(Problem::Suffix),
    }
}
