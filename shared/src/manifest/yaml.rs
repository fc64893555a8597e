//! YAML manifest streams: split into documents at column-0 `---` and `...` lines, each parsed
//! on its own with serde-saphyr under a budget.

use serde_json::Value;

use super::{Document, ParseError, Syntax, emit};

/// Deepest nesting of YAML sequences and mappings accepted, the document itself included.
///
/// This is serde-saphyr's default. Deserializing costs about 20 KiB of stack per level in debug
/// builds (4 KiB in release), so 64 levels still fit a 2 MiB thread stack; real manifests, CRD
/// schemas included, stay well below. JSON has serde_json's own limit of 128.
const MAX_DEPTH: usize = 64;

/// Most nodes (scalars, sequences, mappings, alias expansions included) in one YAML document.
const MAX_NODES: usize = 250_000;

/// One document's worth of YAML text, cut out of the stream.
struct Chunk<'a> {
    /// The text, including its `---` marker line and any directives before it.
    text: &'a str,
    /// 1-based line of the chunk's first line in the input.
    first_line: usize,
    /// 1-based line of the first line with content, or None if the chunk is empty.
    content_line: Option<usize>,
}

/// Reads a YAML stream lazily, one chunk at a time, so only one document is held in memory.
pub(super) fn documents(text: &str) -> impl Iterator<Item = Result<Document, ParseError>> + '_ {
    let mut index = 0;
    split_yaml(text).into_iter().flat_map(move |chunk| {
        let mut out = Vec::new();
        let Some(line) = chunk.content_line else {
            return out;
        };
        match serde_saphyr::from_str_with_options::<Value>(chunk.text, yaml_options()) {
            Ok(Value::Null) => {}
            Ok(value) => {
                index += 1;
                emit(&mut out, Syntax::Yaml, index, line, value);
            }
            Err(err) => {
                index += 1;
                out.push(Err(yaml_error(&err, index, &chunk, line)));
            }
        }
        out
    })
}

/// serde-saphyr options for manifests; see the module documentation for the reasons.
fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: MAX_DEPTH,
            max_nodes: MAX_NODES,
        },
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error,
        legacy_octal_numbers: true,
        with_snippet: false,
    }
}

/// Converts a serde-saphyr error in `chunk` to a one-line [`ParseError`] with absolute lines.
fn yaml_error(
    err: &serde_saphyr::Error,
    index: usize,
    chunk: &Chunk<'_>,
    content_line: usize,
) -> ParseError {
    use serde_saphyr::Error;
    // The formatter wants the original error, without the alias and snippet wrappers.
    let mut inner = err;
    while let Error::AliasError { error, .. } | Error::WithSnippet { error, .. } = inner {
        inner = error;
    }
    // Messages can quote input text; escape control characters to keep them on one line.
    let mut message = String::new();
    for c in yaml_message(inner).chars() {
        if c.is_control() {
            message.extend(c.escape_debug());
        } else {
            message.push(c);
        }
    }
    // The location of `err` is where an alias was used, which is where the reader should look.
    let location = err.location().filter(|l| l.line() > 0);
    let (line, column) = match location {
        Some(l) => (
            chunk.first_line
                + usize::try_from(l.line())
                    .unwrap_or(usize::MAX)
                    .saturating_sub(1),
            usize::try_from(l.column()).ok().filter(|&c| c > 0),
        ),
        None => (content_line, None),
    };
    ParseError {
        index,
        line,
        column,
        message,
    }
}

/// The message for a serde-saphyr error, without location; a few are reworded for manifests.
fn yaml_message(err: &serde_saphyr::Error) -> std::borrow::Cow<'_, str> {
    use serde_saphyr::budget::BudgetBreach;
    use serde_saphyr::{Error, MessageFormatter, UserMessageFormatter};
    match err {
        Error::UnknownAnchor { .. } => "alias refers to an undefined anchor".into(),
        Error::Budget {
            breach: BudgetBreach::Depth { .. },
            ..
        } => format!("document nested too deeply (more than {MAX_DEPTH} levels)").into(),
        Error::Budget {
            breach: BudgetBreach::Nodes { .. },
            ..
        } => {
            format!("document too large (more than {MAX_NODES} nodes with aliases expanded)").into()
        }
        other => UserMessageFormatter.format_message(other),
    }
}

/// How a line of a YAML stream matters to splitting.
enum LineKind {
    /// `---` at column 0: starts a document; true if content follows on the same line.
    Start(bool),
    /// `...` at column 0: ends a document.
    End,
    /// Blank or comment only.
    Blank,
    /// A `%` directive, when it comes before any content.
    Directive,
    /// Anything else.
    Content,
}

/// Classifies one line (without its line break).
fn line_kind(line: &str) -> LineKind {
    let after = |marker: &str| {
        let rest = line.strip_prefix(marker)?;
        (rest.is_empty() || rest.starts_with([' ', '\t'])).then_some(rest)
    };
    let blank = |s: &str| {
        let s = s.trim_start_matches([' ', '\t']);
        s.is_empty() || s.starts_with('#')
    };
    if let Some(rest) = after("---") {
        LineKind::Start(!blank(rest))
    } else if after("...").is_some() {
        LineKind::End
    } else if blank(line) {
        LineKind::Blank
    } else if line.starts_with('%') {
        LineKind::Directive
    } else {
        LineKind::Content
    }
}

/// Splits a YAML stream into chunks of one document each.
fn split_yaml(text: &str) -> Vec<Chunk<'_>> {
    let mut chunks = Vec::new();
    // The chunk being built: where it starts, whether it has had its `---`, where content is.
    let (mut start, mut first_line) = (0, 1);
    let (mut started, mut content_line) = (false, None);
    let mut pos = 0;
    for (n, raw) in text.split_inclusive('\n').enumerate() {
        let lineno = n + 1;
        let line = raw.trim_end_matches(['\n', '\r']);
        let end = pos + raw.len();
        match line_kind(line) {
            LineKind::Start(has_content) => {
                // Directives, comments and blank lines before `---` belong to its document.
                if started || content_line.is_some() {
                    chunks.push(Chunk {
                        text: &text[start..pos],
                        first_line,
                        content_line,
                    });
                    (start, first_line) = (pos, lineno);
                }
                started = true;
                content_line = has_content.then_some(lineno);
            }
            LineKind::End => {
                chunks.push(Chunk {
                    text: &text[start..end],
                    first_line,
                    content_line,
                });
                (start, first_line) = (end, lineno + 1);
                (started, content_line) = (false, None);
            }
            LineKind::Blank => {}
            LineKind::Directive if !started && content_line.is_none() => {}
            LineKind::Directive | LineKind::Content => {
                content_line = content_line.or(Some(lineno));
            }
        }
        pos = end;
    }
    chunks.push(Chunk {
        text: &text[start..],
        first_line,
        content_line,
    });
    chunks
}
