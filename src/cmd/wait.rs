//! `rouse wait NAME --for=condition=Ready --timeout=30s`: wait, by watching, until an object
//! has a condition (or is deleted with `--for=delete`).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use http_body_util::BodyExt;
use rouse_controller::api::Kind;
use serde_json::Value;

use super::client::{Client, Connection, block_on, encode, kind_arg};
use super::table::condition;

/// Arguments of `rouse wait`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The object: a sandbox name, or `KIND/NAME` (`sandboxclaim/task-42`).
    target: String,
    /// `condition=NAME` (status True), `condition=NAME=VALUE`, or `delete`.
    #[arg(long = "for", value_name = "CONDITION")]
    wait_for: String,
    /// How long to wait.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Namespace.
    #[arg(short, long, default_value = "default")]
    namespace: String,
    #[command(flatten)]
    connection: Connection,
}

/// What is waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Goal {
    Condition { kind: String, status: String },
    Deleted,
}

impl Goal {
    fn parse(text: &str) -> anyhow::Result<Goal> {
        if text == "delete" {
            return Ok(Goal::Deleted);
        }
        let Some(rest) = text.strip_prefix("condition=") else {
            return Err(super::usage::usage(format!(
                "--for must be condition=NAME[=VALUE] or delete, got {text:?}"
            )));
        };
        let (kind, status) = rest.split_once('=').unwrap_or((rest, "True"));
        if kind.is_empty() {
            return Err(super::usage::usage(
                "--for=condition= needs a condition name",
            ));
        }
        Ok(Goal::Condition {
            kind: kind.to_owned(),
            status: status.to_owned(),
        })
    }

    fn met(&self, object: &Value) -> bool {
        match self {
            Goal::Condition { kind, status } => {
                condition(object, kind, "status").is_some_and(|s| s.eq_ignore_ascii_case(status))
            }
            Goal::Deleted => false,
        }
    }
}

/// Waits; exit status 1 on timeout or error.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let (kind, name) = match args.target.split_once('/') {
        Some((kind, name)) => (kind_arg(kind)?, name.to_owned()),
        None => (Kind::Sandbox, args.target.clone()),
    };
    let goal = Goal::parse(&args.wait_for)?;
    let client = args.connection.client()?;
    let waited = block_on(async {
        // The timer must be made inside the runtime.
        tokio::time::timeout(
            args.timeout,
            wait(&client, kind, &args.namespace, &name, &goal),
        )
        .await
    })?;
    match waited {
        Ok(Ok(())) => {
            let what = match goal {
                Goal::Deleted => "deleted",
                Goal::Condition { .. } => "condition met",
            };
            println!("{}/{name} {what}", kind.qualified_singular());
            Ok(ExitCode::SUCCESS)
        }
        Ok(Err(e)) => Err(e),
        Err(_) => {
            eprintln!(
                "error: timed out waiting for the condition on {}/{name}",
                kind.plural()
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The first pause before listing again after a watch failed or ended without an event.
const BACKOFF_MIN: Duration = Duration::from_millis(200);
/// The longest such pause.
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Lists the one object (by field selector) and watches from the list's resourceVersion,
/// which the server's watch history always holds, unlike an old object's own version (after
/// a restart of `rouse up` the history starts afresh). A watch that fails (`ERROR`, e.g. 410
/// Expired) or ends without an event is retried after a pause that doubles up to
/// [`BACKOFF_MAX`], so a broken watch never turns into a request loop.
async fn wait(
    client: &Client,
    kind: Kind,
    ns: &str,
    name: &str,
    goal: &Goal,
) -> anyhow::Result<()> {
    let selector = encode(&format!("metadata.name={name}"));
    let collection = Client::collection(kind, Some(ns));
    let mut backoff = BACKOFF_MIN;
    loop {
        let list = client
            .get(&format!("{collection}?fieldSelector={selector}"))
            .await?;
        match list["items"].as_array().and_then(|items| items.first()) {
            None if *goal == Goal::Deleted => return Ok(()),
            None => {
                return Err(super::client::ServerError {
                    code: http::StatusCode::NOT_FOUND,
                    reason: "NotFound".to_owned(),
                    message: format!("{} \"{name}\" not found", kind.plural()),
                }
                .into());
            }
            Some(object) if goal.met(object) => return Ok(()),
            Some(_) => {}
        }
        let version = list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        let path = format!(
            "{collection}?watch=true&resourceVersion={}&fieldSelector={selector}",
            encode(version),
        );
        match watch(client, &path, kind, name, goal).await? {
            WatchEnd::Met => return Ok(()),
            WatchEnd::Progressed => backoff = BACKOFF_MIN,
            WatchEnd::Failed => {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// How one watch ended.
enum WatchEnd {
    /// The goal was met.
    Met,
    /// It ended after at least one event: list again at once.
    Progressed,
    /// It failed (an `ERROR` event) or ended with no event: list again after a pause.
    Failed,
}

async fn watch(
    client: &Client,
    path: &str,
    kind: Kind,
    name: &str,
    goal: &Goal,
) -> anyhow::Result<WatchEnd> {
    let mut body = client.stream(path).await?;
    let mut buffer = Vec::new();
    let mut events = 0_u64;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.context("reading the watch")?.into_data() else {
            continue;
        };
        buffer.extend_from_slice(&data);
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let event: Value = serde_json::from_slice(&line).context("a watch event")?;
            match event["type"].as_str() {
                Some("DELETED") if *goal == Goal::Deleted => return Ok(WatchEnd::Met),
                Some("DELETED") => {
                    bail!("{}/{name} was deleted", kind.qualified_singular())
                }
                Some("ADDED" | "MODIFIED") if goal.met(&event["object"]) => {
                    return Ok(WatchEnd::Met);
                }
                Some("ERROR") => return Ok(WatchEnd::Failed),
                _ => events += 1,
            }
        }
    }
    Ok(if events > 0 {
        WatchEnd::Progressed
    } else {
        WatchEnd::Failed
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Goal;

    #[test]
    fn goals() {
        let ready = Goal::parse("condition=Ready").expect("parse");
        let not_ready = Goal::parse("condition=ready=false").expect("parse");
        let object = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert!(ready.met(&object));
        assert!(!not_ready.met(&object));
        assert!(!ready.met(&json!({})));
        assert_eq!(Goal::parse("delete").expect("parse"), Goal::Deleted);
        assert!(Goal::parse("Ready").is_err());
        assert!(Goal::parse("condition=").is_err());
    }
}
