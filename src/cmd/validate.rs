//! `rouse validate`: check manifests and print one line per document.
//!
//! Output: `ok  Kind namespace/name` on stdout for every valid document of a sandbox kind,
//! `skip  Kind namespace/name` for documents of other kinds, and on stderr one
//! `error:`/`warning:` line per finding naming the file, the document (index and line) and the
//! field path. The exit status is 1 when any document or file failed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rouse_shared::manifest::{self, Document};
use rouse_shared::validate::{self, Report, Severity};

/// Arguments of `rouse validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Manifest files (YAML, multi-document, or JSON) or directories of them (`*.yaml`,
    /// `*.yml`, `*.json`, searched recursively, skipping hidden directories, `target/` and
    /// symbolic links to directories); `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Counts of what was checked, for the summary line.
#[derive(Debug, Default)]
struct Tally {
    ok: usize,
    failed: usize,
    skipped: usize,
    unreadable: usize,
}

/// Validates every document of every file.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mut tally = Tally::default();
    for arg in &args.files {
        for file in expand(arg, &mut tally) {
            check_file(&file, &mut tally);
        }
    }
    eprintln!(
        "{} valid, {} invalid, {} skipped{}",
        tally.ok,
        tally.failed,
        tally.skipped,
        match tally.unreadable {
            0 => String::new(),
            n => format!(", {n} unreadable"),
        }
    );
    Ok(if tally.failed + tally.unreadable > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The files an argument stands for: itself, or the manifests below a directory, sorted.
fn expand(arg: &Path, tally: &mut Tally) -> Vec<PathBuf> {
    if arg.as_os_str() == "-" || !arg.is_dir() {
        return vec![arg.to_owned()];
    }
    let mut found = Vec::new();
    let mut pending = vec![arg.to_owned()];
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) => {
                eprintln!("error: {}: cannot read directory: {e}", dir.display());
                tally.unreadable += 1;
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
        eprintln!(
            "warning: {}: no *.yaml, *.yml or *.json files",
            arg.display()
        );
    }
    found
}

fn check_file(path: &Path, tally: &mut Tally) {
    let (name, text) = match read(path) {
        Ok(read) => read,
        Err(e) => {
            eprintln!("error: {}: {e}", path.display());
            tally.unreadable += 1;
            return;
        }
    };
    let mut empty = true;
    for document in manifest::documents(&text) {
        empty = false;
        match document {
            Ok(doc) => report(&name, &doc, &validate::validate(&doc.value), tally),
            Err(e) => {
                eprintln!("error: {name}: {e}");
                tally.failed += 1;
            }
        }
    }
    if empty {
        eprintln!("warning: {name}: no documents");
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

fn report(file: &str, doc: &Document, report: &Report, tally: &mut Tally) {
    let item = doc.item.map(|i| format!(" items[{i}]")).unwrap_or_default();
    let location = format!("{file}: document {} (line {}){item}", doc.index, doc.line);
    let object = report.object_ref();
    for finding in &report.findings {
        let level = match finding.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        eprintln!(
            "{level}: {location}: {object}: {}: {}",
            finding.path, finding.message
        );
    }
    if report.skipped {
        println!("skip  {object} (not a sandbox kind)");
        tally.skipped += 1;
    } else if report.is_valid() {
        println!("ok  {object}");
        tally.ok += 1;
    } else {
        tally.failed += 1;
    }
}
