//! Running a helper program (`ldd`, `cc`, `ctr`) with a deadline, its output collected.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{Error, Result};

/// At most this much of each output stream is kept (bytes); the rest is read and dropped so the
/// program never blocks on a full pipe.
const MAX_OUTPUT: usize = 4 << 20;

/// Runs `command` to completion within `deadline` and returns its output, killing it when the
/// deadline passes. `what` names it in errors. A non-zero exit is not an error here.
pub(crate) fn output_within(
    command: &mut Command,
    what: &str,
    deadline: Duration,
) -> Result<Output> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Command {
            program: what.to_owned(),
            detail: format!("cannot start {:?}: {e}", command.get_program()),
        })?;
    let stdout = child.stdout.take().map(drain);
    let stderr = child.stderr.take().map(drain);
    let end = Instant::now() + deadline;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::Deadline {
                    what: what.to_owned(),
                    deadline,
                });
            }
            Err(e) => {
                return Err(Error::Command {
                    program: what.to_owned(),
                    detail: format!("wait: {e}"),
                });
            }
        }
    };
    let join = |reader: Option<std::thread::JoinHandle<Vec<u8>>>| {
        reader.and_then(|r| r.join().ok()).unwrap_or_default()
    };
    Ok(Output {
        status,
        stdout: join(stdout),
        stderr: join(stderr),
    })
}

/// Like [`output_within`], but a non-zero exit is [`Error::Command`] with the output's end.
pub(crate) fn run_within(command: &mut Command, what: &str, deadline: Duration) -> Result<Output> {
    let output = output_within(command, what, deadline)?;
    if !output.status.success() {
        return Err(Error::Command {
            program: what.to_owned(),
            detail: format!("{}: {}", output.status, tail(&output)),
        });
    }
    Ok(output)
}

/// The last lines of a program's stderr and stdout, for an error message.
pub(crate) fn tail(output: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Reads a pipe to its end on a thread of its own, keeping the first [`MAX_OUTPUT`] bytes.
fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            let room = MAX_OUTPUT.saturating_sub(kept.len());
            kept.extend_from_slice(&buf[..n.min(room)]);
        }
        kept
    })
}
