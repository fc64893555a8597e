//! `rouse delete KIND NAME...`: delete objects.

use std::process::ExitCode;

use http::Method;

use super::client::{Client, Connection, block_on, is_not_found, kind_and_names};

/// Arguments of `rouse delete`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kind (see `rouse get --help`), or `KIND/NAME`.
    kind: String,
    /// Names of the objects.
    names: Vec<String>,
    /// Namespace.
    #[arg(short, long, default_value = "default")]
    namespace: String,
    /// Succeed when an object does not exist.
    #[arg(long)]
    ignore_not_found: bool,
    /// What happens to owned objects: Background, Foreground or Orphan.
    #[arg(long, value_parser = ["Background", "Foreground", "Orphan"])]
    cascade: Option<String>,
    #[command(flatten)]
    connection: Connection,
}

/// Deletes each object; exit status 1 if any failed.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let (kind, names) = kind_and_names(&args.kind, &args.names)?;
    if names.is_empty() {
        return Err(super::usage::usage(
            "name what to delete: rouse delete KIND NAME...",
        ));
    }
    let client = args.connection.client()?;
    block_on(async {
        let mut failed = false;
        for name in &names {
            let mut path = Client::object(kind, &args.namespace, name);
            if let Some(policy) = &args.cascade {
                path.push_str(&format!("?propagationPolicy={policy}"));
            }
            match client.call(Method::DELETE, &path, None).await {
                Ok(_) => println!("{} \"{name}\" deleted", kind.qualified_singular()),
                Err(e) if args.ignore_not_found && is_not_found(&e) => {}
                Err(e) => {
                    eprintln!("{e:#}");
                    failed = true;
                }
            }
        }
        if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    })
}
