//! JSON manifests: one object, an array of objects, or concatenated objects, each located by
//! line so errors name the document they are in.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::{Document, ParseError, Syntax, emit};

/// The whitespace characters JSON allows between tokens.
pub(super) const WHITESPACE: [char; 4] = [' ', '\t', '\n', '\r'];

/// Reads JSON: a sequence of top-level values, where an array stands for its elements.
pub(super) fn read(text: &str, out: &mut Vec<Result<Document, ParseError>>) {
    let mut lines = LineCounter::new(text);
    let mut index = 0;
    let mut pos = skip_json_whitespace(text, 0);
    while pos < text.len() {
        if !text[pos..].starts_with('[') {
            index += 1;
            let Some(next) = read_value(&mut lines, out, pos, index) else {
                return;
            };
            pos = next;
            continue;
        }
        // A top-level array: read its elements one by one to know where each starts.
        pos = skip_json_whitespace(text, pos + 1);
        if text[pos..].starts_with(']') {
            pos = skip_json_whitespace(text, pos + 1);
            continue;
        }
        loop {
            index += 1;
            let Some(next) = read_value(&mut lines, out, pos, index) else {
                return;
            };
            pos = next;
            if text[pos..].starts_with(',') {
                pos = skip_json_whitespace(text, pos + 1);
            } else if text[pos..].starts_with(']') {
                pos = skip_json_whitespace(text, pos + 1);
                break;
            } else {
                let (line, column) = lines.locate(pos);
                let message = if pos < text.len() {
                    "expected `,` or `]` after array element"
                } else {
                    "EOF while parsing a list"
                };
                let message = message.to_owned();
                return out.push(Err(ParseError {
                    index: index + 1,
                    line,
                    column: Some(column),
                    message,
                }));
            }
        }
    }
}

/// Reads the document starting at byte `pos` into `out`; returns where the next token starts,
/// or None after a syntax error, which JSON cannot recover from.
fn read_value(
    lines: &mut LineCounter<'_>,
    out: &mut Vec<Result<Document, ParseError>>,
    pos: usize,
    index: usize,
) -> Option<usize> {
    match parse_json_value(lines, pos, index) {
        Ok((value, end)) => {
            emit(out, Syntax::Json, index, lines.locate(pos).0, value);
            Some(skip_json_whitespace(lines.text, end))
        }
        Err(err) => {
            out.push(Err(err));
            None
        }
    }
}

/// Parses the one JSON value starting at byte `pos`; returns it and the byte offset after it.
fn parse_json_value(
    lines: &mut LineCounter<'_>,
    pos: usize,
    index: usize,
) -> Result<(Value, usize), ParseError> {
    let rest = &lines.text[pos..];
    let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<StrictValue>();
    match stream.next() {
        Some(Ok(StrictValue(value))) => Ok((value, pos + stream.byte_offset())),
        Some(Err(err)) => {
            // serde_json counts from `rest`; shift its position to the whole input.
            let (base_line, base_column) = lines.locate(pos);
            let line = base_line + err.line().saturating_sub(1);
            let column = match err.column() {
                0 => None,
                c if err.line() <= 1 => Some(base_column + c - 1),
                c => Some(c),
            };
            let full = err.to_string();
            let suffix = format!(" at line {} column {}", err.line(), err.column());
            let message = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
            Err(ParseError {
                index,
                line,
                column,
                message,
            })
        }
        None => {
            let (line, column) = lines.locate(pos);
            let message = "EOF while parsing a value".to_owned();
            Err(ParseError {
                index,
                line,
                column: Some(column),
                message,
            })
        }
    }
}

/// The byte offset of the first non-whitespace character at or after `pos`.
fn skip_json_whitespace(text: &str, pos: usize) -> usize {
    let rest = &text[pos..];
    pos + rest.len() - rest.trim_start_matches(WHITESPACE).len()
}

/// Turns byte offsets into lines and columns, scanning the text once for increasing offsets.
struct LineCounter<'a> {
    /// The whole input.
    text: &'a str,
    /// Offset scanned up to.
    pos: usize,
    /// 1-based line of `pos`.
    line: usize,
    /// Offset where that line starts.
    line_start: usize,
}

impl<'a> LineCounter<'a> {
    /// A counter at the start of `text`.
    fn new(text: &'a str) -> Self {
        Self {
            text,
            pos: 0,
            line: 1,
            line_start: 0,
        }
    }

    /// The 1-based line and 1-based byte column of offset `pos`, as serde_json counts them.
    fn locate(&mut self, pos: usize) -> (usize, usize) {
        if pos < self.pos {
            *self = Self::new(self.text);
        }
        for (i, b) in self.text.as_bytes()[self.pos..pos].iter().enumerate() {
            if *b == b'\n' {
                self.line += 1;
                self.line_start = self.pos + i + 1;
            }
        }
        self.pos = pos;
        (self.line, pos - self.line_start + 1)
    }
}

/// A JSON value read with duplicate object keys rejected, as the API server's strict decoding
/// does (plain `serde_json::Value` keeps the last one silently).
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

/// Builds a [`Value`] like serde_json's own visitor, but fails on a repeated key.
struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("numbers must be finite"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if map.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key {}",
                    Value::String(key)
                )));
            }
            let StrictValue(value) = access.next_value()?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}
