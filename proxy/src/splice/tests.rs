//! Splice tests over real loopback TCP: both directions, half-close, reset, idle timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::*;

async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
    (client.expect("connect"), accepted.expect("accept").0)
}

/// A client and a backend connected through a running splice; the splice's result and the
/// byte counts reported along the way come back from the handle.
struct Rig {
    client: TcpStream,
    backend: TcpStream,
    splice: JoinHandle<Result<Transferred, SpliceError>>,
    counted: Arc<(AtomicU64, AtomicU64)>,
}

async fn rig(options: SpliceOptions) -> Rig {
    let (client, mut proxy_client) = pair().await;
    let (mut proxy_upstream, backend) = pair().await;
    let counted = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let c = counted.clone();
    let splice = tokio::spawn(async move {
        splice_tcp(
            &mut proxy_client,
            &mut proxy_upstream,
            options,
            |up, down| {
                c.0.fetch_add(up, Ordering::Relaxed);
                c.1.fetch_add(down, Ordering::Relaxed);
            },
        )
        .await
    });
    Rig {
        client,
        backend,
        splice,
        counted,
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[tokio::test]
async fn half_close_keeps_the_other_direction_open() {
    let Rig {
        mut client,
        mut backend,
        splice,
        counted,
    } = rig(SpliceOptions::default()).await;
    client.write_all(b"request").await.expect("write");
    client.shutdown().await.expect("client fin");
    // The backend sees the request and then EOF, while it can still answer.
    let mut got = Vec::new();
    backend.read_to_end(&mut got).await.expect("read to eof");
    assert_eq!(got, b"request");
    backend
        .write_all(b"response after fin")
        .await
        .expect("write");
    backend.shutdown().await.expect("backend fin");
    let mut answer = Vec::new();
    client.read_to_end(&mut answer).await.expect("read answer");
    assert_eq!(answer, b"response after fin");
    let moved = splice.await.expect("join").expect("clean end");
    assert_eq!(
        moved,
        Transferred {
            to_upstream: 7,
            to_client: 18,
            zero_copy: 0,
        }
    );
    assert_eq!(counted.0.load(Ordering::Relaxed), 7);
    assert_eq!(counted.1.load(Ordering::Relaxed), 18);
}

/// Options under which a TCP direction moves to its pipe after its first read.
fn pipe_at_once() -> SpliceOptions {
    SpliceOptions {
        max_buffer: INITIAL_BUFFER,
        ..SpliceOptions::default()
    }
}

#[tokio::test]
async fn bulk_both_ways_at_once_arrives_intact() {
    let moved = bulk_both_ways(SpliceOptions::default()).await;
    assert_eq!(moved.to_upstream, moved.to_client);
}

#[tokio::test]
async fn bulk_with_zero_copy_off_is_copied() {
    let moved = bulk_both_ways(SpliceOptions {
        zero_copy: false,
        ..pipe_at_once()
    })
    .await;
    assert_eq!(moved.zero_copy, 0, "{moved:?}");
}

#[tokio::test]
async fn bulk_both_ways_through_pipes_arrives_intact() {
    let moved = bulk_both_ways(pipe_at_once()).await;
    assert!(
        moved.zero_copy > moved.to_upstream,
        "both directions moved through pipes: {moved:?}"
    );
}

/// 8 MiB each way at once through a splice with `options`; checks every byte.
async fn bulk_both_ways(options: SpliceOptions) -> Transferred {
    let Rig {
        client,
        backend,
        splice,
        counted,
    } = rig(options).await;
    const LEN: usize = 8 * 1024 * 1024;
    let echo_through = |mut stream: TcpStream, seed: u8| async move {
        let (mut r, mut w) = stream.split();
        let send = async {
            w.write_all(&pattern(LEN, seed)).await.expect("send");
            w.shutdown().await.expect("fin");
        };
        let mut got = Vec::with_capacity(LEN);
        let recv = r.read_to_end(&mut got);
        let ((), received) = tokio::join!(send, recv);
        received.expect("receive");
        got
    };
    let (at_backend, at_client) = tokio::join!(echo_through(backend, 1), echo_through(client, 2));
    assert!(at_backend == pattern(LEN, 2), "client bytes corrupted");
    assert!(at_client == pattern(LEN, 1), "backend bytes corrupted");
    let moved = splice.await.expect("join").expect("clean end");
    assert_eq!(moved.to_upstream, LEN as u64);
    assert_eq!(moved.to_client, LEN as u64);
    assert_eq!(counted.0.load(Ordering::Relaxed), LEN as u64);
    assert_eq!(counted.1.load(Ordering::Relaxed), LEN as u64);
    moved
}

#[tokio::test]
async fn a_half_close_after_bulk_through_the_pipe_keeps_the_answer_flowing() {
    let Rig {
        mut client,
        mut backend,
        splice,
        ..
    } = rig(pipe_at_once()).await;
    const LEN: usize = 4 * 1024 * 1024;
    let upload = async {
        client.write_all(&pattern(LEN, 7)).await.expect("send");
        client.shutdown().await.expect("fin");
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).await.expect("answer");
        answer
    };
    let serve = async {
        let mut got = Vec::with_capacity(LEN);
        backend.read_to_end(&mut got).await.expect("upload");
        backend.write_all(b"stored").await.expect("answer");
        backend.shutdown().await.expect("fin");
        got
    };
    let (answer, got) = tokio::join!(upload, serve);
    assert!(got == pattern(LEN, 7), "upload corrupted");
    assert_eq!(answer, b"stored");
    let moved = splice.await.expect("join").expect("clean end");
    assert_eq!((moved.to_upstream, moved.to_client), (LEN as u64, 6));
    assert!(
        moved.zero_copy > 0,
        "the upload went through a pipe: {moved:?}"
    );
}

#[tokio::test]
async fn a_reset_during_bulk_through_the_pipe_reaches_the_client() {
    let Rig {
        mut client,
        mut backend,
        splice,
        ..
    } = rig(pipe_at_once()).await;
    let writer = tokio::spawn(async move {
        let chunk = pattern(256 * 1024, 3);
        // Bounded: the reset ends it long before; 256 MiB if it never came.
        for _ in 0..1024 {
            if let Err(error) = client.write_all(&chunk).await {
                return Err(error.kind());
            }
        }
        let mut buf = [0u8; 8];
        client.read(&mut buf).await.map_err(|e| e.kind())
    });
    let mut seen = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    while seen < 2 * 1024 * 1024 {
        seen += backend.read(&mut buf).await.expect("bulk arrives");
    }
    backend.set_zero_linger().expect("linger");
    drop(backend);
    let err = splice.await.expect("join").expect_err("reset");
    assert!(err.is_reset(), "{err}");
    // The client writes on, so its next write (not a read) sees the reset.
    let seen = writer.await.expect("writer");
    assert_eq!(seen, Err(io::ErrorKind::ConnectionReset));
}

#[tokio::test]
async fn upstream_reset_reaches_the_client_as_a_reset() {
    let Rig {
        mut client,
        backend,
        splice,
        ..
    } = rig(SpliceOptions::default()).await;
    client.write_all(b"x").await.expect("write");
    backend.set_zero_linger().expect("linger");
    drop(backend);
    let err = splice.await.expect("join").expect_err("reset");
    assert!(err.is_reset(), "{err}");
    assert_eq!(err.metric_label(), "upstream_io");
    let mut buf = [0u8; 8];
    let read = client.read(&mut buf).await;
    assert_eq!(
        read.map_err(|e| e.kind()),
        Err(io::ErrorKind::ConnectionReset)
    );
}

#[tokio::test]
async fn client_reset_reaches_the_upstream_as_a_reset() {
    let Rig {
        client,
        mut backend,
        splice,
        ..
    } = rig(SpliceOptions::default()).await;
    client.set_zero_linger().expect("linger");
    drop(client);
    let err = splice.await.expect("join").expect_err("reset");
    assert_eq!(err.metric_label(), "downstream_io");
    let mut buf = [0u8; 8];
    let read = backend.read(&mut buf).await;
    assert_eq!(
        read.map_err(|e| e.kind()),
        Err(io::ErrorKind::ConnectionReset)
    );
}

#[tokio::test(start_paused = true)]
async fn idle_timeout_ends_a_quiet_splice_but_not_a_busy_one() {
    let Rig {
        mut client,
        mut backend,
        splice,
        ..
    } = rig(SpliceOptions {
        idle_timeout: Some(Duration::from_secs(30)),
        ..SpliceOptions::default()
    })
    .await;
    let started = Instant::now();
    // Traffic every 20 s keeps it open past the 30 s timeout.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(20)).await;
        client.write_all(b"tick").await.expect("write");
        let mut buf = [0u8; 4];
        backend.read_exact(&mut buf).await.expect("read");
    }
    assert!(!splice.is_finished());
    let err = splice.await.expect("join").expect_err("idle");
    assert!(matches!(err, SpliceError::Idle(_)), "{err}");
    assert!(started.elapsed() >= Duration::from_secs(90));
}
