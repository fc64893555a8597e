//! Which state a list serves, from its `resourceVersion` and `resourceVersionMatch`, with
//! kube-apiserver's semantics (<https://kubernetes.io/docs/reference/using-api/api-concepts/#the-resourceversion-parameter>):
//!
//! | `resourceVersionMatch` | `resourceVersion` unset | `"0"` | `"N"` |
//! |---|---|---|---|
//! | unset, no `limit` | most recent | any | not older than N |
//! | unset, with `limit` | most recent | any | exact N |
//! | `NotOlderThan` | (422) | any | not older than N |
//! | `Exact` | (422) | (422) | exact N |
//!
//! "Not older than" a version the store has not reached waits for it up to 3 s, as the watch
//! cache waits (`waitUntilFreshAndBlock`), then answers `504 Timeout` "Too large resource
//! version" with `retryAfterSeconds: 1`. "Exact" is served when N is the version the list
//! reads; the embedded store keeps no older snapshots, so an older N is `410 Expired` ("The
//! resourceVersion for the provided list is too old.", as etcd answers a compacted revision)
//! and a newer one `504` at once (etcd's future-revision answer).

use std::collections::HashMap;

use rouse_shared::store::{ListParams, ObjectList, Store, StoreError, StoreObject};

use super::kinds::Kind;
use super::status::{Failure, Reply};

/// The state a list asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Freshness {
    /// The most recent state (no version, or `0`: the store's current state is both).
    Current,
    /// At least as new as this version.
    NotOlderThan(u64),
    /// Exactly this version.
    Exact(u64),
}

impl Freshness {
    /// What a list's query asks for, or the `422` (`400` for a version that is not a number)
    /// kube-apiserver answers for options it refuses.
    pub(super) fn from_query(q: &HashMap<String, String>) -> Reply<Self> {
        let version = q.get("resourceVersion").map_or("", String::as_str);
        let matching = q.get("resourceVersionMatch").map_or("", String::as_str);
        let paging = q.get("limit").is_some_and(|l| !l.is_empty() && l != "0");
        let continued = q.get("continue").is_some_and(|c| !c.is_empty());
        let mut causes = Vec::new();
        let forbid = |causes: &mut Vec<(String, String)>, why: &str| {
            causes.push((
                "resourceVersionMatch".to_owned(),
                format!("Forbidden: {why}"),
            ));
        };
        if !matching.is_empty() {
            if version.is_empty() {
                forbid(
                    &mut causes,
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                );
            }
            if continued {
                forbid(
                    &mut causes,
                    "resourceVersionMatch is forbidden when continue is provided",
                );
            }
            if !matches!(matching, "Exact" | "NotOlderThan") {
                causes.push((
                    "resourceVersionMatch".to_owned(),
                    format!(
                        "Unsupported value: {matching:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
                    ),
                ));
            }
            if matching == "Exact" && version == "0" {
                forbid(
                    &mut causes,
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                );
            }
        }
        if !causes.is_empty() {
            return Err(Failure::invalid_options("ListOptions", &causes));
        }
        if version.is_empty() || version == "0" {
            return Ok(Self::Current);
        }
        let Ok(n) = version.parse::<u64>() else {
            return Err(Failure::bad_request(format!(
                "invalid resourceVersion {version:?}: it must be a number as the server gave it"
            )));
        };
        if continued {
            return Err(Failure::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        Ok(match matching {
            "Exact" => Self::Exact(n),
            "" if paging => Self::Exact(n),
            _ => Self::NotOlderThan(n),
        })
    }
}

/// Lists `K` in the state `freshness` asks for: waits (bounded) for a version the store has
/// not reached yet, and refuses an exact version other than the one the list reads.
pub(super) async fn list_fresh<K: StoreObject, S: Store<K>>(
    store: &S,
    kind: Kind,
    params: &ListParams,
    freshness: Freshness,
) -> Reply<ObjectList<K>> {
    let fail = |e: StoreError| Failure::from_store(kind, &e);
    let list = store.list(params).await.map_err(fail)?;
    let current = version_of(&list)?;
    match freshness {
        Freshness::Current => Ok(list),
        Freshness::NotOlderThan(n) | Freshness::Exact(n) if n == current => Ok(list),
        Freshness::NotOlderThan(n) if n < current => Ok(list),
        Freshness::Exact(n) if n < current => Err(Failure::expired(
            "The resourceVersion for the provided list is too old.",
        )),
        Freshness::Exact(n) => Err(Failure::too_large_resource_version_now(n, current)),
        Freshness::NotOlderThan(n) => {
            // A watch from `n` is the store's wait for it (3 s at most, then "too large").
            match store.watch(params, &n.to_string()).await {
                Ok(stream) => drop(stream),
                Err(StoreError::Expired { .. }) => {}
                Err(e) => return Err(fail(e)),
            }
            let list = store.list(params).await.map_err(fail)?;
            let current = version_of(&list)?;
            if current < n {
                return Err(Failure::from_store(
                    kind,
                    &StoreError::TooLargeResourceVersion {
                        resource_version: n.to_string(),
                        current: current.to_string(),
                    },
                ));
            }
            Ok(list)
        }
    }
}

fn version_of<K>(list: &ObjectList<K>) -> Reply<u64> {
    list.resource_version.parse().map_err(|_| {
        Failure::internal(format!(
            "the store listed at version {:?}, which is not a number",
            list.resource_version
        ))
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::Freshness;

    #[test]
    fn query_to_freshness() {
        let q = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        type Case<'a> = (&'a [(&'a str, &'a str)], Option<Freshness>);
        let cases: [Case<'_>; 10] = [
            (&[], Some(Freshness::Current)),
            (&[("resourceVersion", "0")], Some(Freshness::Current)),
            (
                &[("resourceVersion", "7")],
                Some(Freshness::NotOlderThan(7)),
            ),
            (
                &[("resourceVersion", "7"), ("limit", "5")],
                Some(Freshness::Exact(7)),
            ),
            (
                &[("resourceVersion", "0"), ("limit", "5")],
                Some(Freshness::Current),
            ),
            (
                &[("resourceVersion", "7"), ("resourceVersionMatch", "Exact")],
                Some(Freshness::Exact(7)),
            ),
            (
                &[
                    ("resourceVersion", "7"),
                    ("resourceVersionMatch", "NotOlderThan"),
                    ("limit", "5"),
                ],
                Some(Freshness::NotOlderThan(7)),
            ),
            (&[("resourceVersionMatch", "NotOlderThan")], None),
            (&[("resourceVersion", "7"), ("continue", "x")], None),
            (&[("resourceVersion", "x")], None),
        ];
        for (query, want) in cases {
            let got = Freshness::from_query(&q(query)).ok();
            assert_eq!(got, want, "{query:?}");
        }
    }
}
