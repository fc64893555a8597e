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
    /// Run the Sandbox controller against a Kubernetes cluster.
    Controller(cmd::controller::Args),
    /// Print every CustomResourceDefinition as YAML, or write one file per CRD.
    Crds(cmd::crds::Args),
    /// Check manifests of the sandbox kinds; `-` reads standard input.
    Validate(cmd::validate::Args),
    /// Create or update objects from manifests.
    Apply(cmd::apply::Args),
    /// Show objects of a kind.
    Get(cmd::get::Args),
    /// Delete objects.
    Delete(cmd::delete::Args),
    /// Suspend sandboxes: stop the workload, keep the volumes.
    Suspend(cmd::mode::Args),
    /// Resume suspended sandboxes.
    Resume(cmd::mode::Args),
    /// Wait until an object has a condition, or is deleted.
    Wait(cmd::wait::Args),
    /// Print a sandbox's workload output.
    Logs(cmd::logs::Args),
    /// Run standalone mode: store, sandboxes, proxy and REST API in one process.
    Up(cmd::up::Args),
    /// Print the kubeconfig `rouse up` wrote (for kubectl and Kubernetes clients).
    Kubeconfig(cmd::kubeconfig::Args),
    /// Run the wake-on-connect proxy from a config file, or check one.
    Proxy(cmd::proxy::Args),
}

fn main() -> ExitCode {
    // The trampolines (memory sharing, cgroups) exec a workload: they parse nothing else and
    // start no runtime, so they come before the command line parser.
    let mut raw = std::env::args_os().skip(1);
    match raw.next() {
        Some(first) if first == rouse_controller::platform::local::MERGE_EXEC_COMMAND => {
            return cmd::merge_exec::run(raw);
        }
        Some(first) if first == rouse_controller::platform::local::CGROUP_EXEC_COMMAND => {
            return cmd::cgroup_exec::run(raw);
        }
        _ => {}
    }
    let cli = Cli::parse();
    let (result, error_code) = match cli.command {
        Command::Crds(args) => (cmd::crds::run(&args), 2),
        Command::Validate(args) => (cmd::validate::run(&args), 2),
        // The API commands exit 1 on any error, as kubectl does.
        Command::Apply(args) => (cmd::apply::run(&args), 1),
        Command::Get(args) => (cmd::get::run(&args), 1),
        Command::Delete(args) => (cmd::delete::run(&args), 1),
        Command::Suspend(args) => (cmd::mode::run(&args, cmd::mode::Action::Suspend), 1),
        Command::Resume(args) => (cmd::mode::run(&args, cmd::mode::Action::Resume), 1),
        Command::Wait(args) => (cmd::wait::run(&args), 1),
        Command::Logs(args) => (cmd::logs::run(&args), 1),
        Command::Proxy(args) => (cmd::proxy::run(&args), 2),
        Command::Up(args) => (cmd::up::run(&args), 1),
        Command::Kubeconfig(args) => (cmd::kubeconfig::run(&args), 1),
        Command::Controller(args) => (cmd::controller::run(&args), 1),
    };
    match result {
        Ok(code) => code,
        Err(err) if err.downcast_ref::<cmd::client::ServerError>().is_some() => {
            // With its context, if any (e.g. where a missing token was looked for).
            eprintln!("{err:#}");
            ExitCode::from(error_code)
        }
        Err(err) if err.downcast_ref::<cmd::usage::UsageError>().is_some() => {
            eprintln!("error: {err:#}\n\nFor more information, try '--help'.");
            ExitCode::from(2)
        }
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(error_code)
        }
    }
}
