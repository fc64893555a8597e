//! `rouse logs NAME [-f] [--tail N]`: a sandbox's workload output.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use http_body_util::BodyExt;
use rouse_controller::api::Kind;

use super::client::{Client, Connection, block_on};

/// Arguments of `rouse logs`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Name of the sandbox.
    name: String,
    /// Keep printing output as it is written.
    #[arg(short, long)]
    follow: bool,
    /// Only the last N lines.
    #[arg(long, value_name = "N")]
    tail: Option<u64>,
    /// Namespace.
    #[arg(short, long, default_value = "default")]
    namespace: String,
    #[command(flatten)]
    connection: Connection,
}

/// Copies the log to standard output.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let client = args.connection.client()?;
    let mut path = format!(
        "{}/log?follow={}",
        Client::object(Kind::Sandbox, &args.namespace, &args.name),
        args.follow
    );
    if let Some(tail) = args.tail {
        path.push_str(&format!("&tailLines={tail}"));
    }
    block_on(async {
        let mut body = client.stream(&path).await?;
        let mut out = std::io::stdout().lock();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.context("reading the log")?.into_data() {
                out.write_all(&data)?;
                out.flush()?;
            }
        }
        Ok(ExitCode::SUCCESS)
    })?
}
