//! Parsing `?labelSelector=` (Kubernetes selector syntax) and the `metadata.name` and
//! `metadata.namespace` forms of
//! `?fieldSelector=`.

use std::collections::BTreeSet;

use kube::core::{Expression, Selector};

/// Parses `app=web,tier!=db,env in (a,b),!legacy` into a selector; the error says which
/// requirement is wrong.
pub fn parse_label_selector(text: &str) -> Result<Selector, String> {
    let mut expressions = Vec::new();
    for requirement in split_requirements(text)? {
        expressions.push(parse_requirement(requirement.trim())?);
    }
    Ok(Selector::from_iter(expressions))
}

/// Splits at commas outside parentheses.
fn split_requirements(text: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("unbalanced ')' in label selector {text:?}"))?;
            }
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced '(' in label selector {text:?}"));
    }
    parts.push(&text[start..]);
    if parts.len() == 1 && parts[0].trim().is_empty() {
        return Ok(Vec::new());
    }
    Ok(parts)
}

fn parse_requirement(req: &str) -> Result<Expression, String> {
    if req.is_empty() {
        return Err("empty requirement in label selector".to_owned());
    }
    if let Some(key) = req.strip_prefix('!') {
        return Ok(Expression::DoesNotExist(key_of(key.trim(), req)?));
    }
    for (op, not) in [(" notin ", true), (" in ", false)] {
        if let Some((key, set)) = req.split_once(op) {
            let key = key_of(key.trim(), req)?;
            let values = set_of(set.trim(), req)?;
            return Ok(if not {
                Expression::NotIn(key, values)
            } else {
                Expression::In(key, values)
            });
        }
    }
    for (op, not) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((key, value)) = req.split_once(op) {
            let key = key_of(key.trim(), req)?;
            let value = value_of(value.trim(), req)?;
            return Ok(if not {
                Expression::NotEqual(key, value)
            } else {
                Expression::Equal(key, value)
            });
        }
    }
    Ok(Expression::Exists(key_of(req, req)?))
}

fn set_of(set: &str, req: &str) -> Result<BTreeSet<String>, String> {
    let inner = set
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| format!("invalid requirement {req:?}: the values must be in parentheses"))?;
    inner.split(',').map(|v| value_of(v.trim(), req)).collect()
}

fn key_of(key: &str, req: &str) -> Result<String, String> {
    let (prefix, name) = key.rsplit_once('/').unwrap_or(("", key));
    let prefix_ok = prefix.is_empty() || prefix.split('.').all(valid_name);
    if name.is_empty() || name.len() > 63 || !valid_name(name) || !prefix_ok {
        return Err(format!("invalid label key {key:?} in requirement {req:?}"));
    }
    Ok(key.to_owned())
}

fn value_of(value: &str, req: &str) -> Result<String, String> {
    if value.len() > 63 || (!value.is_empty() && !valid_name(value)) {
        return Err(format!(
            "invalid label value {value:?} in requirement {req:?}"
        ));
    }
    Ok(value.to_owned())
}

/// Alphanumerics with `-`, `_`, `.` inside, as label names and values are.
fn valid_name(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
}

/// What `?fieldSelector=` may ask for: one object by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// `metadata.name=<name>`.
    pub name: Option<String>,
    /// `metadata.namespace=<namespace>`.
    pub namespace: Option<String>,
}

impl FieldSelector {
    /// Does the object with this namespace and name match?
    pub fn matches(&self, namespace: Option<&str>, name: &str) -> bool {
        self.name.as_deref().is_none_or(|n| n == name)
            && self
                .namespace
                .as_deref()
                .is_none_or(|n| Some(n) == namespace)
    }
}

/// Parses `metadata.name=x` (also `==`); other fields are a 400 naming the supported one.
pub fn parse_field_selector(text: &str) -> Result<FieldSelector, String> {
    let mut out = FieldSelector::default();
    for req in text.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        let (field, value) = req
            .split_once("==")
            .or_else(|| req.split_once('='))
            .ok_or_else(|| format!("invalid field selector requirement {req:?}"))?;
        match field.trim() {
            "metadata.name" => out.name = Some(value.trim().to_owned()),
            "metadata.namespace" => out.namespace = Some(value.trim().to_owned()),
            other => {
                return Err(format!(
                    "field selector {other:?} is not supported; only metadata.name and metadata.namespace"
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kube::core::SelectorExt;

    use super::{parse_field_selector, parse_label_selector};

    #[test]
    fn label_selectors() {
        let labels: BTreeMap<String, String> = [("app", "web"), ("tier", "front")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app=db", false),
            ("app!=db", true),
            ("app,tier", true),
            ("!legacy", true),
            ("!app", false),
            ("tier in (front, back)", true),
            ("tier notin (front)", false),
            ("app=web,tier in (back)", false),
            ("example.com/x", false),
        ];
        for (text, want) in cases {
            let selector = parse_label_selector(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(selector.matches(&labels), want, "{text}");
        }
        for bad in [
            "app=web,",
            "tier in front",
            "a b",
            "-x=y",
            "x=(",
            "x in (a",
            "k=v v",
        ] {
            assert!(
                parse_label_selector(bad).is_err(),
                "{bad} should be rejected"
            );
        }
    }

    #[test]
    fn field_selectors() {
        let sel = parse_field_selector("metadata.name=web").expect("parse");
        assert_eq!(sel.name.as_deref(), Some("web"));
        assert!(parse_field_selector("status.phase=Running").is_err());
        assert!(parse_field_selector("name").is_err());
    }
}
