//! `limit` and `continue`: lists in pages. The continue token names the list's
//! resourceVersion and the last key returned; the next page lists again and resumes after
//! that key (objects are listed in key order), reporting the first page's resourceVersion.

use std::collections::HashMap;

use base64::Engine;
use kube::ResourceExt;
use serde_json::{Value, json};

use super::status::{Failure, Reply};

/// What a list request asks of paging.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Paging {
    limit: Option<usize>,
    after: Option<(String, String)>,
    version: Option<String>,
}

impl Paging {
    /// `limit` and `continue` from the query, or 400 (410 for a token that cannot be read,
    /// as Kubernetes answers an expired one).
    pub(super) fn from_query(q: &HashMap<String, String>) -> Reply<Self> {
        let limit = super::query::number(q, "limit")?
            .filter(|l| *l > 0)
            .map(|l| usize::try_from(l).unwrap_or(usize::MAX));
        let mut paging = Paging {
            limit,
            ..Paging::default()
        };
        if let Some(token) = q.get("continue").filter(|t| !t.is_empty()) {
            let bad =
                || Failure::expired("the continue token is not valid; list again from the start");
            let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(token)
                .map_err(|_| bad())?;
            let value: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
            let field = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_owned);
            paging.version = Some(field("rv").ok_or_else(bad)?);
            paging.after = Some((
                field("ns").unwrap_or_default(),
                field("name").ok_or_else(bad)?,
            ));
        }
        Ok(paging)
    }
}

/// One page of a list.
pub(super) struct Page<'a, K> {
    /// The objects of this page.
    pub items: Vec<&'a K>,
    /// The resourceVersion to report.
    pub resource_version: String,
    /// The token for the next page, when there is one.
    pub continue_token: Option<String>,
    /// How many objects follow this page.
    pub remaining: usize,
}

impl<'a, K: kube::Resource> Page<'a, K> {
    /// The page of `items` (sorted by namespace and name here) that `paging` asks for.
    pub(super) fn select(items: &[&'a K], version: &str, paging: &Paging) -> Reply<Self> {
        let mut sorted: Vec<&'a K> = items.to_vec();
        sorted.sort_by_key(|o| (o.namespace().unwrap_or_default(), o.name_any()));
        if let Some(after) = &paging.after {
            sorted.retain(|o| (o.namespace().unwrap_or_default(), o.name_any()) > *after);
        }
        let version = paging.version.clone().unwrap_or_else(|| version.to_owned());
        let Some(limit) = paging.limit.filter(|l| *l < sorted.len()) else {
            return Ok(Page {
                items: sorted,
                resource_version: version,
                continue_token: None,
                remaining: 0,
            });
        };
        let remaining = sorted.len() - limit;
        sorted.truncate(limit);
        let last = sorted
            .last()
            .map(|o| (o.namespace().unwrap_or_default(), o.name_any()));
        let token = last.map(|(ns, name)| {
            let raw = json!({"rv": version, "ns": ns, "name": name}).to_string();
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
        });
        Ok(Page {
            items: sorted,
            resource_version: version,
            continue_token: token,
            remaining,
        })
    }
}
