//! The `rouse` command line: one binary for every Rouse role and tool.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Agent sandboxes with a wake-on-connect ingress proxy.
#[derive(Debug, Parser)]
#[command(name = "rouse", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the Sandbox controller against a Kubernetes cluster.
    Controller(cmd::controller::Args),
    /// Print every CustomResourceDefinition as YAML, or write one file per CRD.
    Crds(cmd::crds::Args),
    /// Check manifests of the sandbox kinds; `-` reads standard input.
    Validate(cmd::validate::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Controller(args) => cmd::controller::run(&args),
        Command::Crds(args) => cmd::crds::run(&args),
        Command::Validate(args) => cmd::validate::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
