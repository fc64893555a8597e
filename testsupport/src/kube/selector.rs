//! Label and field selectors as the list and watch query parameters spell them:
//! `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a`, `!a`, and comma for "and".

use serde_json::Value;

use super::status::{ApiError, Result};

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, get: &impl Fn(&str) -> Option<String>) -> bool {
        match self {
            Requirement::Equals(k, v) => get(k).as_deref() == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k).as_deref() != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|got| vs.contains(&got)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|got| !vs.contains(&got)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        }
    }
}

/// A parsed selector: all requirements must hold. The empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

/// Splits at commas outside parentheses.
fn split_terms(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

fn parse_set(key: &str, rest: &str, what: &str) -> Result<Vec<String>> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "unable to parse requirement: {what} for key {key:?} needs a parenthesised set"
            ))
        })?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect())
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn parse_term(term: &str, param: &str) -> Result<Requirement> {
    let term = term.trim();
    let bad = |why: &str| ApiError::bad_request(format!("invalid {param} {term:?}: {why}"));
    if let Some(key) = term.strip_prefix('!') {
        let key = key.trim();
        return valid_key(key)
            .then(|| Requirement::DoesNotExist(key.to_owned()))
            .ok_or_else(|| bad("bad key"));
    }
    if let Some((key, value)) = term.split_once("!=") {
        return Ok(Requirement::NotEquals(
            key.trim().to_owned(),
            value.trim().to_owned(),
        ));
    }
    if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
        let key = key.trim();
        if !valid_key(key) {
            return Err(bad("bad key"));
        }
        return Ok(Requirement::Equals(key.to_owned(), value.trim().to_owned()));
    }
    let mut words = term.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or_default().trim();
    let rest = words.next().unwrap_or_default().trim_start();
    if !valid_key(key) {
        return Err(bad("bad key"));
    }
    if rest.is_empty() {
        return Ok(Requirement::Exists(key.to_owned()));
    }
    if let Some(set) = rest.strip_prefix("notin") {
        return Ok(Requirement::NotIn(
            key.to_owned(),
            parse_set(key, set, "notin")?,
        ));
    }
    if let Some(set) = rest.strip_prefix("in") {
        return Ok(Requirement::In(key.to_owned(), parse_set(key, set, "in")?));
    }
    Err(bad("expected =, ==, !=, in, notin or a bare key"))
}

impl Selector {
    /// Parses a selector; `param` names the query parameter in error messages.
    pub fn parse(text: &str, param: &str) -> Result<Self> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let requirements = split_terms(text)
            .into_iter()
            .map(|term| parse_term(term, param))
            .collect::<Result<_>>()?;
        Ok(Self { requirements })
    }

    /// Whether the object's labels satisfy the selector.
    pub fn matches_labels(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let get = |key: &str| {
            labels
                .and_then(|l| l.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        self.requirements.iter().all(|r| r.matches(&get))
    }

    /// Whether the object's fields (dotted paths, e.g. `metadata.name`, `spec.nodeName`)
    /// satisfy the selector; a missing field reads as the empty string, as in Kubernetes.
    pub fn matches_fields(&self, object: &Value) -> bool {
        let get = |path: &str| {
            let pointer = format!("/{}", path.replace('.', "/"));
            Some(match object.pointer(&pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            })
        };
        self.requirements.iter().all(|r| r.matches(&get))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Selector;

    #[test]
    fn label_selectors() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=web,tier=back", false),
            ("app in (web, db)", true),
            ("app notin (web,db)", false),
            ("app notin (db)", true),
            ("missing notin (db)", true),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("missing in (x)", false),
            ("tier in (front),app", true),
        ];
        for (selector, want) in cases {
            let parsed = Selector::parse(selector, "labelSelector").expect(selector);
            assert_eq!(parsed.matches_labels(&obj), want, "{selector}");
        }
    }

    #[test]
    fn bad_selectors_are_rejected() {
        for selector in ["app in web", "a b c", "=x", "app notin web"] {
            assert!(
                Selector::parse(selector, "labelSelector").is_err(),
                "{selector}"
            );
        }
    }

    #[test]
    fn field_selectors() {
        let obj = json!({"metadata": {"name": "a", "namespace": "ns"}, "spec": {"nodeName": "n"}});
        let cases = [
            ("metadata.name=a", true),
            ("metadata.name!=a", false),
            ("metadata.namespace=ns,spec.nodeName=n", true),
            ("spec.nodeName=", false),
            ("status.phase=", true),
        ];
        for (selector, want) in cases {
            let parsed = Selector::parse(selector, "fieldSelector").expect(selector);
            assert_eq!(parsed.matches_fields(&obj), want, "{selector}");
        }
    }
}
