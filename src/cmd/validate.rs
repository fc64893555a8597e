//! `rouse validate`: check manifests and report each document.
//!
//! Text output: `ok  Kind namespace/name` on stdout for every valid document of a sandbox kind,
//! `skip  Kind name` for documents of other kinds, and on stderr one `error:`/`warning:` line per
//! finding naming the file, the document (index and line) and the field path, then a summary.
//! `--output json` prints one JSON object per document instead (JSON Lines on stdout), then a
//! summary object. The exit status is 1 when any document or file failed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rouse_shared::manifest::{self, Document, ParseError};
use rouse_shared::validate::{self, Report, Severity};
use serde_json::{Value, json};

/// Arguments of `rouse validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Manifest files (YAML, multi-document, or JSON) or directories of them (`*.yaml`,
    /// `*.yml`, `*.json`, searched recursively, skipping hidden directories, `target/` and
    /// symbolic links to directories); `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Output format: `text` for people, `json` for one JSON object per document.
    #[arg(long, short, value_enum, default_value_t = Format::Text)]
    output: Format,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `ok`/`skip` lines on stdout, `error:`/`warning:` lines on stderr.
    Text,
    /// JSON Lines on stdout.
    Json,
}

/// Validates every document of every file.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mut printer = Printer {
        format: args.output,
        tally: Tally::default(),
    };
    for arg in &args.files {
        for file in expand(arg, &mut printer) {
            check_file(&file, &mut printer);
        }
    }
    Ok(printer.finish())
}

/// The files an argument stands for: itself, or the manifests below a directory, sorted.
fn expand(arg: &Path, printer: &mut Printer) -> Vec<PathBuf> {
    if arg.as_os_str() == "-" || !arg.is_dir() {
        return vec![arg.to_owned()];
    }
    let mut found = Vec::new();
    let mut pending = vec![arg.to_owned()];
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) => {
                printer.unreadable(
                    &dir.display().to_string(),
                    &format!("cannot read directory: {e}"),
                );
                continue;
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            // file_type() does not follow symbolic links, so a link loop cannot recurse.
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            let hidden = entry.file_name().to_string_lossy().starts_with('.');
            if file_type.is_dir() {
                if !hidden && entry.file_name() != "target" {
                    pending.push(path);
                }
            } else if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            ) {
                found.push(path);
            }
        }
    }
    found.sort();
    if found.is_empty() {
        printer.file_warning(
            &arg.display().to_string(),
            "no *.yaml, *.yml or *.json files",
        );
    }
    found
}

fn check_file(path: &Path, printer: &mut Printer) {
    let (name, text) = match read(path) {
        Ok(read) => read,
        Err(e) => {
            printer.unreadable(&path.display().to_string(), &e.to_string());
            return;
        }
    };
    let mut empty = true;
    for document in manifest::documents(&text) {
        empty = false;
        match document {
            Ok(doc) => printer.document(&name, &doc, &validate::validate(&doc.value)),
            Err(e) => printer.parse_error(&name, &e),
        }
    }
    if empty {
        printer.file_warning(&name, "no documents");
    }
}

fn read(path: &Path) -> std::io::Result<(String, String)> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        Ok(("<stdin>".to_owned(), text))
    } else {
        Ok((path.display().to_string(), std::fs::read_to_string(path)?))
    }
}

/// Counts of what was checked, for the summary.
#[derive(Debug, Default)]
struct Tally {
    valid: usize,
    invalid: usize,
    skipped: usize,
    unreadable: usize,
}

/// Prints results in the chosen format and counts them.
struct Printer {
    format: Format,
    tally: Tally,
}

impl Printer {
    fn document(&mut self, file: &str, doc: &Document, report: &Report) {
        let verdict = if report.skipped {
            self.tally.skipped += 1;
            Verdict::Skipped
        } else if report.is_valid() {
            self.tally.valid += 1;
            Verdict::Valid
        } else {
            self.tally.invalid += 1;
            Verdict::Invalid
        };
        match self.format {
            Format::Json => {
                let findings: Vec<Value> = report
                    .findings
                    .iter()
                    .map(|f| {
                        json!({
                            "severity": severity(f.severity),
                            "path": f.path.to_string(),
                            "message": f.message,
                        })
                    })
                    .collect();
                println!(
                    "{}",
                    json!({
                        "file": file,
                        "document": doc.index,
                        "line": doc.line,
                        "item": doc.item,
                        "kind": report.kind,
                        "namespace": report.namespace,
                        "name": report.name,
                                                "result": verdict.as_str(),
                        "findings": findings,
                    })
                );
            }
            Format::Text => {
                let item = doc.item.map(|i| format!(" items[{i}]")).unwrap_or_default();
                let location = format!("{file}: document {} (line {}){item}", doc.index, doc.line);
                let object = report.object_ref();
                for f in &report.findings {
                    eprintln!(
                        "{}: {location}: {object}: {}: {}",
                        severity(f.severity),
                        f.path,
                        f.message
                    );
                }
                match verdict {
                    Verdict::Skipped => println!("skip  {object} (not a sandbox kind)"),
                    Verdict::Valid => println!("ok  {object}"),
                    Verdict::Invalid => {}
                }
            }
        }
    }

    fn parse_error(&mut self, file: &str, error: &ParseError) {
        self.tally.invalid += 1;
        match self.format {
            Format::Json => println!(
                "{}",
                json!({
                    "file": file,
                    "document": error.index,
                    "line": error.line,
                    "column": error.column,
                    "result": "invalid",
                    "findings": [{"severity": "error", "path": "", "message": error.message}],
                })
            ),
            Format::Text => eprintln!("error: {file}: {error}"),
        }
    }

    fn unreadable(&mut self, file: &str, message: &str) {
        self.tally.unreadable += 1;
        match self.format {
            Format::Json => println!(
                "{}",
                json!({"file": file, "result": "unreadable", "message": message})
            ),
            Format::Text => eprintln!("error: {file}: {message}"),
        }
    }

    fn file_warning(&mut self, file: &str, message: &str) {
        match self.format {
            Format::Json => println!(
                "{}",
                json!({"file": file, "result": "empty", "message": message})
            ),
            Format::Text => eprintln!("warning: {file}: {message}"),
        }
    }

    /// Prints the summary and returns the exit status.
    fn finish(self) -> ExitCode {
        let t = &self.tally;
        match self.format {
            Format::Json => println!(
                "{}",
                json!({"summary": {
                    "valid": t.valid,
                    "invalid": t.invalid,
                    "skipped": t.skipped,
                    "unreadable": t.unreadable,
                }})
            ),
            Format::Text => eprintln!(
                "{} valid, {} invalid, {} skipped{}",
                t.valid,
                t.invalid,
                t.skipped,
                match t.unreadable {
                    0 => String::new(),
                    n => format!(", {n} unreadable"),
                }
            ),
        }
        if t.invalid + t.unreadable > 0 {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    }
}

/// What became of one document.
#[derive(Debug, Clone, Copy)]
enum Verdict {
    Valid,
    Invalid,
    Skipped,
}

impl Verdict {
    /// The `result` value of the JSON output.
    fn as_str(self) -> &'static str {
        match self {
            Verdict::Valid => "valid",
            Verdict::Invalid => "invalid",
            Verdict::Skipped => "skipped",
        }
    }
}

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}
