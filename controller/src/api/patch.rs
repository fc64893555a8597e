//! What every write shares besides its body: the `dryRun`, `fieldManager` and `force` query
//! parameters, and the parsing of JSON patches (RFC 6902).

use std::collections::HashMap;

use super::{Failure, Reply};

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
            force: super::routes::flag(q, "force")?,
        })
    }
}

/// A JSON patch document, or 400.
pub(super) fn parse_json_patch(bytes: &[u8]) -> Reply<json_patch::Patch> {
    serde_json::from_slice(bytes)
        .map_err(|e| Failure::bad_request(format!("the request body is not a JSON patch: {e}")))
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
        assert!(super::parse_json_patch(b"[{\"op\":\"add\",\"path\":\"/a\",\"value\":1}]").is_ok());
        assert!(super::parse_json_patch(b"{}").is_err());
    }
}
