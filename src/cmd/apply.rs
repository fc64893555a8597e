//! `rouse apply -f FILE|DIR|-`: validate each manifest document, then create the object or,
//! when it exists, merge its labels, annotations and spec into the stored one.
//!
//! Prints `sandbox.agents.x-k8s.io/web created|configured|unchanged` per object. Fields
//! removed from a manifest are not removed from the stored object (there is no record of what
//! was applied before); `rouse delete` and apply again for that.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use http::Method;
use rouse_controller::api::{Kind, merge_patch};
use rouse_shared::manifest;
use rouse_shared::validate::{self, Severity};
use serde_json::{Map, Value, json};

use super::client::{Client, Connection, block_on, is_already_exists};

/// Arguments of `rouse apply`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Manifest files, directories of `*.yaml`, `*.yml` and `*.json` files, or `-` for
    /// standard input.
    #[arg(short = 'f', long = "filename", required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Namespace for objects that name none.
    #[arg(short, long, default_value = "default")]
    namespace: String,
    #[command(flatten)]
    connection: Connection,
}

/// Applies every document of every file; exit status 1 if any failed.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let client = args.connection.client()?;
    block_on(apply_all(args, &client))
}

async fn apply_all(args: &Args, client: &Client) -> ExitCode {
    let mut failed = false;
    for file in args.files.iter().flat_map(|f| expand(f)) {
        let (name, text) = match read(&file) {
            Ok(read) => read,
            Err(e) => {
                eprintln!("error: {e:#}");
                failed = true;
                continue;
            }
        };
        for document in manifest::documents(&text) {
            let doc = match document {
                Ok(doc) => doc,
                Err(e) => {
                    eprintln!("error: {name}: {e}");
                    failed = true;
                    continue;
                }
            };
            if let Err(e) = apply_one(client, &args.namespace, doc.value).await {
                eprintln!("{}", describe(&e, &name, doc.index));
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// A server error as kubectl prints it; any other error with the file and document.
fn describe(err: &anyhow::Error, file: &str, index: usize) -> String {
    if err.downcast_ref::<super::client::ServerError>().is_some() {
        format!("{err}")
    } else {
        format!("error: {file}: document {index}: {err:#}")
    }
}

async fn apply_one(client: &Client, default_ns: &str, mut doc: Value) -> anyhow::Result<()> {
    let report = validate::validate(&doc);
    let errors: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| format!("{}: {}", f.path, f.message))
        .collect();
    if !errors.is_empty() {
        anyhow::bail!("{} is invalid: {}", report.object_ref(), errors.join("; "));
    }
    for warning in report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Warning)
    {
        eprintln!(
            "Warning: {}: {}: {}",
            report.object_ref(),
            warning.path,
            warning.message
        );
    }
    let kind = report
        .kind
        .as_deref()
        .and_then(Kind::from_kind)
        .filter(|_| !report.skipped)
        .with_context(|| {
            format!(
                "kind {} is not served by Rouse",
                report.kind.as_deref().unwrap_or("(none)")
            )
        })?;
    let ns = report
        .namespace
        .clone()
        .unwrap_or_else(|| default_ns.to_owned());
    strip_server_fields(&mut doc);
    doc["metadata"]["namespace"] = json!(ns);
    let name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let created = client
        .call(
            Method::POST,
            &Client::collection(kind, Some(&ns)),
            Some(("application/json", &doc)),
        )
        .await;
    let stored_name = match created {
        Ok(object) => {
            let stored = object["metadata"]["name"].as_str().unwrap_or_default();
            println!("{}/{stored} created", kind.qualified_singular());
            return Ok(());
        }
        Err(e) if is_already_exists(&e) && name.is_some() => name.unwrap_or_default(),
        Err(e) => return Err(e),
    };
    let path = Client::object(kind, &ns, &stored_name);
    let current = client.get(&path).await?;
    let patch = apply_patch(&doc);
    let mut merged = current.clone();
    merge_patch(&mut merged, &patch);
    if merged == current {
        println!("{}/{stored_name} unchanged", kind.qualified_singular());
        return Ok(());
    }
    client
        .call(
            Method::PATCH,
            &path,
            Some(("application/merge-patch+json", &patch)),
        )
        .await?;
    println!("{}/{stored_name} configured", kind.qualified_singular());
    Ok(())
}

/// Removes what the server sets, so the output of `rouse get -o yaml` applies anywhere.
fn strip_server_fields(doc: &mut Value) {
    if let Some(object) = doc.as_object_mut() {
        object.remove("status");
    }
    if let Some(Value::Object(meta)) = doc.get_mut("metadata") {
        for field in SERVER_FIELDS {
            meta.remove(field);
        }
    }
}

/// Metadata fields the server owns.
const SERVER_FIELDS: [&str; 7] = [
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
];

/// The merge patch a manifest stands for: its labels, annotations and spec.
fn apply_patch(doc: &Value) -> Value {
    let mut patch = Map::new();
    let mut meta = Map::new();
    for field in ["labels", "annotations"] {
        if let Some(v) = doc.pointer(&format!("/metadata/{field}")) {
            meta.insert(field.to_owned(), v.clone());
        }
    }
    if !meta.is_empty() {
        patch.insert("metadata".to_owned(), Value::Object(meta));
    }
    if let Some(spec) = doc.get("spec") {
        patch.insert("spec".to_owned(), spec.clone());
    }
    Value::Object(patch)
}

/// A file, the manifests directly in a directory (sorted), or `-`.
fn expand(arg: &Path) -> Vec<PathBuf> {
    if arg.as_os_str() == "-" || !arg.is_dir() {
        return vec![arg.to_owned()];
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(arg)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.is_file()
                        && matches!(
                            p.extension().and_then(|e| e.to_str()),
                            Some("yaml" | "yml" | "json")
                        )
                })
                .collect()
        })
        .unwrap_or_else(|_| vec![arg.to_owned()]);
    files.sort();
    files
}

fn read(path: &Path) -> anyhow::Result<(String, String)> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read standard input")?;
        return Ok(("<stdin>".to_owned(), text));
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok((path.display().to_string(), text))
}
