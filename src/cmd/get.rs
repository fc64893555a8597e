//! `rouse get KIND [NAME...]`: objects as a table (kubectl-like columns), wide table, YAML,
//! JSON or `kind.group/name` lines.

use std::process::ExitCode;

use rouse_controller::api::Kind;
use serde_json::{Value, json};

use super::client::{Client, Connection, block_on, encode, kind_and_names};
use super::table;

/// Arguments of `rouse get`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kind: sandbox (sbx), sandboxtemplate (template), sandboxwarmpool (swp, pool),
    /// sandboxclaim (claim), sandboxsnapshot (sbxsnap), singular or plural; or `KIND/NAME`.
    kind: String,
    /// Names of objects; all objects when none is given.
    names: Vec<String>,
    /// Namespace.
    #[arg(short, long, default_value = "default")]
    namespace: String,
    /// List objects in all namespaces.
    #[arg(short = 'A', long, conflicts_with = "names")]
    all_namespaces: bool,
    /// Only objects whose labels match this selector (`app=web,tier!=db`).
    #[arg(short = 'l', long)]
    selector: Option<String>,
    /// Output format.
    #[arg(short, long, value_enum)]
    output: Option<Format>,
    #[command(flatten)]
    connection: Connection,
}

/// How objects are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// A table with more columns.
    Wide,
    /// YAML.
    Yaml,
    /// JSON.
    Json,
    /// `kind.group/name` per line.
    Name,
}

/// Fetches and prints the objects.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let (kind, names) = kind_and_names(&args.kind, &args.names)?;
    if args.all_namespaces && !names.is_empty() {
        return Err(super::usage::usage(
            "a name cannot be combined with --all-namespaces",
        ));
    }
    let client = args.connection.client()?;
    block_on(get(args, kind, &names, &client))?
}

async fn get(
    args: &Args,
    kind: Kind,
    names: &[String],
    client: &Client,
) -> anyhow::Result<ExitCode> {
    let mut objects = Vec::new();
    let mut failed = false;
    if names.is_empty() {
        let ns = (!args.all_namespaces).then_some(args.namespace.as_str());
        let mut path = Client::collection(kind, ns);
        if let Some(selector) = &args.selector {
            path.push_str(&format!("?labelSelector={}", encode(selector)));
        }
        let list = client.get(&path).await?;
        objects = list["items"].as_array().cloned().unwrap_or_default();
        if objects.is_empty() && matches!(args.output, None | Some(Format::Wide)) {
            match ns {
                Some(ns) => eprintln!("No resources found in {ns} namespace."),
                None => eprintln!("No resources found"),
            }
            return Ok(ExitCode::SUCCESS);
        }
    } else {
        for name in names {
            match client
                .get(&Client::object(kind, &args.namespace, name))
                .await
            {
                Ok(object) => objects.push(object),
                Err(e) => {
                    eprintln!("{e:#}");
                    failed = true;
                }
            }
        }
    }
    let single = names.len() == 1 && objects.len() == 1;
    print(args, kind, objects, single)?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn print(args: &Args, kind: Kind, objects: Vec<Value>, single: bool) -> anyhow::Result<()> {
    let as_document = |objects: Vec<Value>| {
        if single {
            objects.into_iter().next().unwrap_or(Value::Null)
        } else {
            json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": objects})
        }
    };
    match args.output {
        Some(Format::Json) => {
            println!("{}", serde_json::to_string_pretty(&as_document(objects))?);
        }
        Some(Format::Yaml) => print!("{}", serde_saphyr::to_string(&as_document(objects))?),
        Some(Format::Name) => {
            for object in &objects {
                let name = object["metadata"]["name"].as_str().unwrap_or_default();
                println!("{}/{name}", kind.qualified_singular());
            }
        }
        None | Some(Format::Wide) if objects.is_empty() => {}
        None | Some(Format::Wide) => {
            let wide = args.output == Some(Format::Wide);
            let now = jiff::Timestamp::now();
            let mut headers = table::headers(kind, wide);
            let mut rows: Vec<Vec<String>> = objects
                .iter()
                .map(|o| table::row(kind, o, wide, now))
                .collect();
            if args.all_namespaces {
                headers.insert(0, "NAMESPACE");
                for (row, object) in rows.iter_mut().zip(&objects) {
                    let ns = object["metadata"]["namespace"].as_str().unwrap_or_default();
                    row.insert(0, ns.to_owned());
                }
            }
            table::print(&headers, &rows);
        }
    }
    Ok(())
}
