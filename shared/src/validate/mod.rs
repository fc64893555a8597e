//! Validation of sandbox manifests: what `rouse validate` runs on every document.
//!
//! A document is checked in three passes: its `apiVersion`/`kind` against the kinds Rouse
//! serves, its structure against the OpenAPI schema of the generated CRD (reporting the unknown
//! fields an API server would silently prune), and the rules a schema cannot say (name syntax,
//! reserved label prefixes, references, cross-field constraints). Every problem is reported with
//! its field path; one bad field never hides the others.

mod far_time;
mod meta;
mod path;
mod pod;
mod quantity;
mod rules;
mod schema;
#[cfg(test)]
mod tests;
mod text;

use std::sync::OnceLock;

use serde_json::Value;

use crate::api::{EXTENSIONS_GROUP, GROUP};
pub use far_time::{LAST_TIME, clamp_far_times};
pub use path::FieldPath;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The document would be rejected or would not do what it says.
    Error,
    /// The document is accepted, but part of it is ignored or surprising.
    Warning,
}

/// One problem found in a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// Where in the document.
    pub path: FieldPath,
    /// What is wrong, in words a user can act on.
    pub message: String,
}

/// The verdict on one document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The document's `kind`, if it has one.
    pub kind: Option<String>,
    /// `metadata.namespace`, if set.
    pub namespace: Option<String>,
    /// `metadata.name`, or `metadata.generateName` followed by `*`.
    pub name: Option<String>,
    /// True when the document is not of a sandbox kind and was not checked.
    pub skipped: bool,
    /// Errors and warnings, in document order.
    pub findings: Vec<Finding>,
}

impl Report {
    /// True when no finding is an error.
    pub fn is_valid(&self) -> bool {
        !self.findings.iter().any(|f| f.severity == Severity::Error)
    }

    /// `Kind namespace/name` for display. A sandbox kind without a namespace shows `default`;
    /// a skipped kind, which may be cluster-scoped, shows just its name then.
    pub fn object_ref(&self) -> String {
        let kind = self
            .kind
            .as_deref()
            .map_or("(no kind)".to_owned(), text::clean);
        let name = self
            .name
            .as_deref()
            .map_or("(no name)".to_owned(), text::clean);
        match (self.namespace.as_deref(), self.skipped) {
            (Some(ns), _) => format!("{kind} {}/{name}", text::clean(ns)),
            (None, true) => format!("{kind} {name}"),
            (None, false) => format!("{kind} default/{name}"),
        }
    }
}

/// Validates one parsed document (a JSON value of any shape).
///
/// # Example
/// ```
/// let doc = serde_json::json!({
///     "apiVersion": "agents.x-k8s.io/v1beta1",
///     "kind": "Sandbox",
///     "metadata": {"name": "web"},
///     "spec": {"podTemplate": {"spec": {"containers": [{"name": "app", "image": "nginx"}]}}},
/// });
/// let report = rouse_shared::validate::validate(&doc);
/// assert!(report.is_valid(), "{:?}", report.findings);
/// ```
pub fn validate(doc: &Value) -> Report {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let meta = doc.get("metadata");
    let name = text(meta.and_then(|m| m.get("name")))
        .or_else(|| text(meta.and_then(|m| m.get("generateName"))).map(|g| format!("{g}*")));
    let mut out = Findings::default();
    let mut skipped = false;
    match doc.as_object() {
        None => out.error(
            &FieldPath::root(),
            format!("must be a mapping, got {}", schema::describe(doc)),
        ),
        Some(object) => match resolve_kind(object, &mut out) {
            Resolved::Known(kind) => check_known(doc, object, kind, &mut out),
            Resolved::Foreign => skipped = true,
            Resolved::Invalid => {}
        },
    }
    Report {
        kind: text(doc.get("kind")),
        namespace: text(meta.and_then(|m| m.get("namespace"))),
        name,
        skipped,
        findings: out.0,
    }
}

fn check_known(
    doc: &Value,
    object: &serde_json::Map<String, Value>,
    kind: &KindSchema,
    out: &mut Findings,
) {
    let root = FieldPath::root();
    for key in object.keys() {
        if !ROOT_FIELDS.contains(&key.as_str()) {
            out.error(&root.field(key), schema::unknown_field(key, &ROOT_FIELDS));
        }
    }
    let before = out.error_count();
    for part in ["spec", "status"] {
        if let (Some(value), Some(part_schema)) = (
            object.get(part),
            kind.schema.pointer(&format!("/properties/{part}")),
        ) {
            schema::check(value, part_schema, &root.field(part), out);
        }
    }
    if object.get("spec").is_none_or(Value::is_null) {
        out.error(&root.field("spec"), "required field is missing".to_owned());
    }
    // The rules read the typed object; after a structural error they would only repeat it.
    let structure_ok = out.error_count() == before;
    meta::check(object.get("metadata"), &kind.kind, out);
    if structure_ok {
        // The rules read the typed object, whose time type ends before year 9999 does; the
        // copy is made only for a document that has such a time.
        if far_time::mentions_year_9999(doc) {
            let mut clamped = doc.clone();
            clamp_far_times(&kind.kind, &mut clamped);
            rules::check(&clamped, &kind.kind, out);
        } else {
            rules::check(doc, &kind.kind, out);
        }
    }
}

/// Top-level fields of every Kubernetes object of these kinds.
const ROOT_FIELDS: [&str; 5] = ["apiVersion", "kind", "metadata", "spec", "status"];

/// A kind Rouse serves and its schema, taken from the generated CRD.
struct KindSchema {
    group: String,
    kind: String,
    versions: Vec<String>,
    schema: Value,
}

fn kinds() -> &'static [KindSchema] {
    static KINDS: OnceLock<Vec<KindSchema>> = OnceLock::new();
    KINDS.get_or_init(|| {
        crate::crds::all()
            .into_iter()
            .filter_map(|crd| {
                let version = crd.spec.versions.first()?;
                let schema = version.schema.as_ref()?.open_api_v3_schema.as_ref()?;
                Some(KindSchema {
                    group: crd.spec.group.clone(),
                    kind: crd.spec.names.kind.clone(),
                    versions: crd.spec.versions.iter().map(|v| v.name.clone()).collect(),
                    // Plain data: serializing a schema struct to a JSON value cannot fail.
                    schema: serde_json::to_value(schema).unwrap_or_default(),
                })
            })
            .collect()
    })
}

enum Resolved {
    Known(&'static KindSchema),
    Foreign,
    Invalid,
}

fn resolve_kind(object: &serde_json::Map<String, Value>, out: &mut Findings) -> Resolved {
    let root = FieldPath::root();
    let api_version = object.get("apiVersion");
    let kind = object.get("kind");
    let (Some(api_version), Some(kind)) = (
        api_version.and_then(Value::as_str),
        kind.and_then(Value::as_str),
    ) else {
        for (field, value) in [("apiVersion", api_version), ("kind", kind)] {
            match value {
                None | Some(Value::Null) => {
                    out.error(&root.field(field), "required field is missing".to_owned());
                }
                Some(v) if !v.is_string() => out.error(
                    &root.field(field),
                    format!("must be a string, got {}", schema::describe(v)),
                ),
                Some(_) => {}
            }
        }
        return Resolved::Invalid;
    };
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let ours = group == GROUP || group == EXTENSIONS_GROUP;
    // Another API group may have a kind of the same name; only the core group (a likely
    // mistake) and ours are held to Rouse's kinds.
    let by_kind = kinds()
        .iter()
        .find(|k| k.kind == kind)
        .filter(|_| ours || group.is_empty());
    match by_kind {
        Some(k) if k.group == group && k.versions.iter().any(|v| v == version) => {
            Resolved::Known(k)
        }
        Some(k) if k.group == group => {
            out.error(
                &root.field("apiVersion"),
                format!(
                    "version {version} of {kind} is not served; use apiVersion {}/{}",
                    k.group,
                    k.versions.join(", ")
                ),
            );
            Resolved::Invalid
        }
        Some(k) => {
            out.error(
                &root.field("apiVersion"),
                format!(
                    "{kind} belongs to group {}: use apiVersion {}/{}, not {api_version}",
                    k.group,
                    k.group,
                    k.versions.first().map(String::as_str).unwrap_or_default()
                ),
            );
            Resolved::Invalid
        }
        None if ours => {
            let in_group: Vec<&str> = kinds()
                .iter()
                .filter(|k| k.group == group)
                .map(|k| k.kind.as_str())
                .collect();
            let mut msg = format!("unknown kind {} in group {group}", text::quote(kind));
            if let Some(best) = suggest(kind, in_group.iter().copied()) {
                msg.push_str(&format!(" (did you mean \"{best}\"?)"));
            }
            msg.push_str(&format!("; known kinds: {}", in_group.join(", ")));
            out.error(&root.field("kind"), msg);
            Resolved::Invalid
        }
        None => Resolved::Foreign,
    }
}

/// Findings collected while walking a document.
#[derive(Debug, Default)]
struct Findings(Vec<Finding>);

impl Findings {
    fn error(&mut self, path: &FieldPath, message: String) {
        self.push(Severity::Error, path, message);
    }

    fn warn(&mut self, path: &FieldPath, message: String) {
        self.push(Severity::Warning, path, message);
    }

    fn push(&mut self, severity: Severity, path: &FieldPath, message: String) {
        self.0.push(Finding {
            severity,
            path: path.clone(),
            message,
        });
    }

    fn error_count(&self) -> usize {
        self.0
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count()
    }
}

/// The candidate closest to `word` (case-insensitive edit distance of at most 2, and less than
/// half the word), for "did you mean" hints.
fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (edit_distance(&lower, &c.to_ascii_lowercase()), c))
        .filter(|(d, _)| *d <= 2 && *d * 2 < word.len().max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}
