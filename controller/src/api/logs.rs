//! `GET .../sandboxes/{name}/log`: the workload's output file, whole or its last lines, and
//! with `?follow=true` the bytes appended to it until the client leaves, the stream's
//! deadline passes or the server shuts down.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::SeekFrom;
use std::path::PathBuf;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::{StreamExt, stream};
use rouse_shared::api::Sandbox;
use rouse_shared::store::Store;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::kinds::Kind;
use super::query::{QueryParams, flag, number, query};
use super::state::{ApiState, ApiStore};
use super::status::{Failure, Reply};
use super::target::Named;
use super::watch::{StreamGuard, deadline};

/// Largest chunk read from the log file at once.
const CHUNK: usize = 64 * 1024;

/// `GET .../sandboxes/{name}/log?tailLines=N&follow=true`.
pub(super) async fn log<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Named { kind, key }: Named,
    q: QueryParams,
) -> Reply<Response> {
    if kind != Kind::Sandbox {
        return Err(Failure::no_route(&format!(
            "{}/{}/log: only sandboxes have logs",
            kind.plural(),
            key.name
        )));
    }
    let q: HashMap<String, String> = query(q)?;
    let tail = number(&q, "tailLines")?;
    let follow = flag(&q, "follow")?;
    let timeout = number(&q, "timeoutSeconds")?.map(Duration::from_secs);
    // Names become path parts below the data dir: never let one climb out of it.
    let safe = |part: &str| {
        !part.is_empty()
            && !part.starts_with('.')
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'))
    };
    if !safe(&key.namespace) || !safe(&key.name) {
        return Err(Failure::not_found(super::status::Subject {
            kind,
            name: &key.name,
        }));
    }
    // The sandbox must exist, so a stale file of a deleted namesake is not served.
    let sandbox = Store::<Sandbox>::get(&state.store, &key)
        .await
        .map_err(|e| Failure::from_store(kind, &e))?;
    let path = rouse_shared::datadir::log_file(&state.config.data_dir, &key.namespace, &key.name);
    let start = match tail {
        Some(lines) => tail_offset(&path, lines)
            .await
            .map_err(|e| Failure::internal(format!("cannot read the log: {e}")))?,
        None => 0,
    };
    let guard = if follow {
        Some(StreamGuard::acquire(&state, "log")?)
    } else {
        None
    };
    let reader = Reader {
        path,
        position: start,
        follow,
        poll: state.config.log_poll_interval,
    };
    let stop = {
        let shutdown = state.shutdown.clone();
        let limit = deadline(&state, timeout);
        let gone = deleted(
            state.store.clone(),
            key.clone(),
            sandbox.metadata.uid.clone(),
        );
        async move {
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = tokio::time::sleep(limit) => {}
                // Following a sandbox ends with it, as `kubectl logs -f` ends with its pod.
                () = gone, if follow => {}
            }
        }
    };
    let body = stream::unfold(reader, |mut reader| async move {
        match reader.next_chunk().await {
            Ok(Some(bytes)) => Some((bytes, reader)),
            Ok(None) => None,
            Err(e) => {
                tracing::debug!(error = %e, "reading a sandbox log failed");
                None
            }
        }
    })
    .take_until(Box::pin(stop))
    .map(move |bytes| {
        // The guard lives as long as the stream, holding its permit.
        let _alive = &guard;
        Ok::<_, Infallible>(bytes)
    });
    Ok((
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        Body::from_stream(body),
    )
        .into_response())
}

/// How often a follower checks that its sandbox still exists.
const GONE_CHECK: Duration = Duration::from_millis(500);

/// Resolves once the sandbox with `uid` at `key` is gone (deleted, or replaced by a namesake).
async fn deleted<S: ApiStore>(store: S, key: rouse_shared::store::ObjectKey, uid: Option<String>) {
    loop {
        tokio::time::sleep(GONE_CHECK).await;
        match Store::<Sandbox>::get(&store, &key).await {
            Err(e) if e.is_not_found() => return,
            Ok(s) if s.metadata.uid != uid => return,
            // Still there, or the store is briefly unavailable: look again later.
            _ => {}
        }
    }
}

/// Reads a log file from a position, optionally waiting for more.
struct Reader {
    path: PathBuf,
    position: u64,
    follow: bool,
    poll: Duration,
}

impl Reader {
    /// The next bytes of the file; `None` at its end (when not following).
    async fn next_chunk(&mut self) -> std::io::Result<Option<Bytes>> {
        loop {
            match tokio::fs::File::open(&self.path).await {
                Ok(mut file) => {
                    let len = file.metadata().await?.len();
                    if len < self.position {
                        // Truncated or replaced: start over from its beginning.
                        self.position = 0;
                    }
                    if len > self.position {
                        file.seek(SeekFrom::Start(self.position)).await?;
                        let want = usize::try_from(len - self.position)
                            .unwrap_or(CHUNK)
                            .min(CHUNK);
                        let mut buf = vec![0; want];
                        let n = file.read(&mut buf).await?;
                        if n > 0 {
                            buf.truncate(n);
                            self.position += n as u64;
                            return Ok(Some(Bytes::from(buf)));
                        }
                    }
                }
                // The workload has not written anything yet.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            if !self.follow {
                return Ok(None);
            }
            tokio::time::sleep(self.poll).await;
        }
    }
}

/// Where the last `lines` lines of the file start (0 if it has fewer, or does not exist). A
/// final line without a newline counts as a line.
async fn tail_offset(path: &std::path::Path, lines: u64) -> std::io::Result<u64> {
    let mut file = match tokio::fs::File::open(path).await {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let len = file.metadata().await?.len();
    if lines == 0 {
        return Ok(len);
    }
    let mut end = len;
    let mut newlines = 0u64;
    let mut buf = vec![0u8; CHUNK];
    while end > 0 {
        let start = end.saturating_sub(CHUNK as u64);
        let size = usize::try_from(end - start).unwrap_or(CHUNK);
        file.seek(SeekFrom::Start(start)).await?;
        file.read_exact(&mut buf[..size]).await?;
        for i in (0..size).rev() {
            let at = start + i as u64;
            // The newline ending the file closes the last line; it does not start one.
            if buf[i] == b'\n' && at + 1 != len {
                newlines += 1;
                if newlines == lines {
                    return Ok(at + 1);
                }
            }
        }
        end = start;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::tail_offset;

    #[tokio::test]
    async fn tail_offsets() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.log");
        assert_eq!(tail_offset(&path, 3).await.expect("missing"), 0);
        let cases: [(&str, u64, &str); 6] = [
            ("a\nb\nc\n", 1, "c\n"),
            ("a\nb\nc\n", 2, "b\nc\n"),
            ("a\nb\nc\n", 5, "a\nb\nc\n"),
            ("a\nb\nc", 1, "c"),
            ("a\nb\nc", 0, ""),
            ("", 2, ""),
        ];
        for (text, lines, want) in cases {
            std::fs::write(&path, text).expect("write");
            let at = tail_offset(&path, lines).await.expect("tail");
            let at = usize::try_from(at).expect("small");
            assert_eq!(&text[at..], want, "{text:?} tail {lines}");
        }
        let long: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, &long).expect("write");
        let at = usize::try_from(tail_offset(&path, 15_000).await.expect("tail")).expect("small");
        assert!(long[at..].starts_with("line 5000\n"));
    }
}
