//! The query string of a request: its parameters (or 400), typed flags and numbers, and the
//! write options every write shares besides its body (`dryRun`, `fieldManager`, `force`).

use std::collections::HashMap;

use axum::extract::Query;
use axum::extract::rejection::QueryRejection;

use super::status::{Failure, Reply};

/// Query parameters, or axum's rejection of a malformed query string.
pub(super) type QueryParams = Result<Query<HashMap<String, String>>, QueryRejection>;

/// The query parameters, or 400.
pub(super) fn query(query: QueryParams) -> Reply<HashMap<String, String>> {
    query
        .map(|Query(q)| q)
        .map_err(|e| Failure::bad_request(format!("invalid query string: {e}")))
}

/// A boolean query parameter (`true`/`1`/`false`/`0`), or 400.
pub(super) fn flag(query: &HashMap<String, String>, name: &str) -> Reply<bool> {
    match query.get(name).map(String::as_str) {
        None | Some("false" | "0" | "") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(Failure::bad_request(format!(
            "query parameter {name} must be true or false, got {other:?}"
        ))),
    }
}

/// A whole-number query parameter, or 400.
pub(super) fn number(query: &HashMap<String, String>, name: &str) -> Reply<Option<u64>> {
    query
        .get(name)
        .map(|v| {
            v.parse::<u64>().map_err(|_| {
                Failure::bad_request(format!(
                    "query parameter {name} must be a non-negative integer, got {v:?}"
                ))
            })
        })
        .transpose()
}

/// The write options of a create, replace or patch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Options {
    /// `dryRun=All`: validate and answer, store nothing.
    pub dry_run: bool,
    /// `fieldManager`: who writes (server-side apply needs one).
    pub field_manager: Option<String>,
    /// `force=true`: server-side apply takes fields other managers own.
    pub force: bool,
}

impl Options {
    /// The options in a query string, or 400 for values Kubernetes rejects too.
    pub(super) fn from_query(q: &HashMap<String, String>) -> Reply<Self> {
        let dry_run = match q.get("dryRun").map(String::as_str) {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(Failure::bad_request(format!(
                    "dryRun must be All, got {other:?}"
                )));
            }
        };
        let field_manager = q.get("fieldManager").filter(|m| !m.is_empty()).cloned();
        if field_manager.as_ref().is_some_and(|m| m.len() > 128) {
            return Err(Failure::bad_request(
                "fieldManager must be at most 128 characters",
            ));
        }
        Ok(Self {
            dry_run,
            field_manager,
            force: flag(q, "force")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    #[test]
    fn options_from_query() {
        let q: HashMap<String, String> = [
            ("dryRun", "All"),
            ("fieldManager", "kubectl"),
            ("force", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let options = super::Options::from_query(&q).expect("valid");
        assert!(options.dry_run && options.force);
        assert_eq!(options.field_manager.as_deref(), Some("kubectl"));
        let bad: HashMap<String, String> = [("dryRun".to_owned(), "Some".to_owned())].into();
        assert!(super::Options::from_query(&bad).is_err());
    }
}
