//! `rouse suspend NAME` and `rouse resume NAME`: set a sandbox's `spec.operatingMode`.

use std::process::ExitCode;

use http::Method;
use rouse_controller::api::Kind;

use super::client::{Client, Connection, block_on};

/// Arguments of `rouse suspend` and `rouse resume`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Names of the sandboxes.
    #[arg(required = true)]
    names: Vec<String>,
    /// Namespace.
    #[arg(short, long, default_value = "default")]
    namespace: String,
    #[command(flatten)]
    connection: Connection,
}

/// Which way the mode changes.
#[derive(Debug, Clone, Copy)]
pub enum Action {
    /// `spec.operatingMode: Suspended`.
    Suspend,
    /// `spec.operatingMode: Running`.
    Resume,
}

/// Suspends or resumes each sandbox; exit status 1 if any failed.
pub fn run(args: &Args, action: Action) -> anyhow::Result<ExitCode> {
    let client = args.connection.client()?;
    let (route, done) = match action {
        Action::Suspend => ("suspend", "suspended"),
        Action::Resume => ("resume", "resumed"),
    };
    block_on(async {
        let mut failed = false;
        for name in &args.names {
            let path = format!(
                "{}/{route}",
                Client::object(Kind::Sandbox, &args.namespace, name)
            );
            match client.call(Method::POST, &path, None).await {
                Ok(_) => println!("{}/{name} {done}", Kind::Sandbox.qualified_singular()),
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
