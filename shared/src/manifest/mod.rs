//! Reading Kubernetes manifests into documents for `rouse validate`.
//!
//! A manifest file is a multi-document YAML stream or JSON (one object, an array of objects, or
//! concatenated objects). [`read_documents`] splits the input into documents and parses each one
//! on its own, so a broken document is reported with its index and absolute line while the
//! documents around it still parse. `kind: List` documents, and typed lists such as
//! `SandboxList` with an `items` list, are expanded into their items.
//!
//! YAML is split much as kubectl's YAML reader does it: before `---` lines at column 0 (which may
//! carry a comment or content after a space) and after `...` lines. A `---` or `...` at column 0
//! ends any scalar, so this never cuts a document in half.
//! Each piece is then parsed with serde-saphyr using these choices:
//!
//! - duplicate mapping keys are an error;
//! - booleans follow YAML 1.1 as kubectl reads them: `yes`, `no`, `on`, `off`, `y` are
//!   booleans, so `value: yes` where a string belongs is reported the way kubectl would fail;
//! - integers with a leading zero are octal as in YAML 1.1 and kubectl (`defaultMode: 0644` is
//!   420); serde-saphyr would otherwise read `0644` as the *float* 644.0;
//! - `.inf` and `.nan` are errors, because JSON has no such numbers;
//! - a budget bounds nesting depth, node count and alias expansion, so alias bombs and deeply
//!   nested input fail fast instead of hanging or overflowing the stack.

mod json;
mod yaml;

use serde_json::Value;

#[cfg(test)]
mod tests;

/// One document of a manifest stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// 1-based position among the non-empty documents of the stream.
    pub index: usize,
    /// 1-based line where the document's content starts in the input.
    pub line: usize,
    /// For an item of a `kind: List` document, its position in `items` (0-based), else None.
    pub item: Option<usize>,
    /// The parsed document.
    pub value: Value,
}

/// A document that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("document {index} (line {line}{}): {message}", column_suffix(*.column))]
pub struct ParseError {
    /// 1-based position of the broken document among the non-empty documents of the stream.
    pub index: usize,
    /// 1-based line of the problem within the whole input.
    pub line: usize,
    /// 1-based column of the problem, when the parser reported one.
    pub column: Option<usize>,
    /// What is wrong, on one line.
    pub message: String,
}

/// Formats the optional column of a [`ParseError`] for its `Display`.
fn column_suffix(column: Option<usize>) -> String {
    column.map(|c| format!(", column {c}")).unwrap_or_default()
}

/// Splits a manifest (YAML stream or JSON) into documents, parsing each one separately.
///
/// The input is JSON if its first character after an optional BOM and whitespace is `{` or `[`,
/// else YAML.
///
/// Results are in input order; a document that fails to parse yields an `Err` and reading goes
/// on with the next document (except after a JSON syntax error, which JSON cannot recover from).
/// YAML documents are parsed as the iterator advances, so a long stream is never held parsed
/// in memory at once.
pub fn documents(text: &str) -> Box<dyn Iterator<Item = Result<Document, ParseError>> + '_> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    match text.trim_start_matches(json::WHITESPACE).chars().next() {
        Some('{' | '[') => {
            let mut out = Vec::new();
            json::read(text, &mut out);
            Box::new(out.into_iter())
        }
        _ => Box::new(yaml::documents(text)),
    }
}

/// [`documents`], collected.
#[must_use]
pub fn read_documents(text: &str) -> Vec<Result<Document, ParseError>> {
    documents(text).collect()
}

/// Which syntax a document came from, to name value types the way its users do.
#[derive(Clone, Copy)]
pub(crate) enum Syntax {
    /// YAML: mappings and sequences.
    Yaml,
    /// JSON: objects and arrays.
    Json,
}

/// Pushes a parsed top-level value: a mapping becomes a document, a `kind: List` becomes its
/// items, anything else is an error.
pub(crate) fn emit(
    out: &mut Vec<Result<Document, ParseError>>,
    syntax: Syntax,
    index: usize,
    line: usize,
    value: Value,
) {
    let error = |message: String| ParseError {
        index,
        line,
        column: None,
        message,
    };
    let Value::Object(mut map) = value else {
        out.push(Err(error(not_a_mapping(syntax, &value))));
        return;
    };
    // `kind: List` (what kubectl prints) and typed lists such as `SandboxList` (what the API
    // returns) both hold their objects in `items`.
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or_default();
    let typed_list = kind.len() > 4
        && kind.ends_with("List")
        && matches!(map.get("items"), Some(Value::Array(_)));
    if kind != "List" && !typed_list {
        out.push(Ok(Document {
            index,
            line,
            item: None,
            value: Value::Object(map),
        }));
        return;
    }
    let Some(Value::Array(items)) = map.remove("items") else {
        out.push(Err(error(format!(
            "kind: List must have an `items` {}",
            sequence_word(syntax)
        ))));
        return;
    };
    for (i, value) in items.into_iter().enumerate() {
        out.push(if value.is_object() {
            Ok(Document {
                index,
                line,
                item: Some(i),
                value,
            })
        } else {
            Err(error(format!(
                "items[{i}]: {}",
                not_a_mapping(syntax, &value)
            )))
        });
    }
}

/// The message for a document (or List item) that is not a mapping.
fn not_a_mapping(syntax: Syntax, value: &Value) -> String {
    let got = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => match syntax {
            Syntax::Yaml => "a sequence",
            Syntax::Json => "an array",
        },
        Value::Object(_) => "a mapping",
    };
    let want = match syntax {
        Syntax::Yaml => "a mapping",
        Syntax::Json => "an object",
    };
    format!("document must be {want} with apiVersion and kind, got {got}")
}

/// What a sequence is called in `syntax`.
fn sequence_word(syntax: Syntax) -> &'static str {
    match syntax {
        Syntax::Yaml => "sequence",
        Syntax::Json => "array",
    }
}
