//! The `rouse` command line: one binary for every Rouse role and tool.

mod cmd;
mod telemetry;

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
    /// Print every CustomResourceDefinition as YAML, or write one file per CRD.
    Crds(cmd::crds::Args),
    /// Check manifests of the sandbox kinds; `-` reads standard input.
    Validate(cmd::validate::Args),
    /// Run the wake-on-connect proxy from a config file, or check one.
    Proxy(cmd::proxy::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crds(args) => cmd::crds::run(&args),
        Command::Validate(args) => cmd::validate::run(&args),
        Command::Proxy(args) => cmd::proxy::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
