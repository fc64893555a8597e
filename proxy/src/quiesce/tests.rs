use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::Quiescer;
use crate::directory::SandboxKey;

const LIMIT: Duration = Duration::from_secs(5);

#[tokio::test]
async fn quiesce_resets_an_idle_upstream_and_holds_until_release() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let quiescer = std::sync::Arc::new(Quiescer::default());
    let key = SandboxKey::new("default", "box");
    let dialled = TcpStream::connect(addr).await.expect("dial");
    let (mut server, _) = listener.accept().await.expect("accept");
    let mut stream = quiescer.wrap(&key, dialled);
    stream
        .write_all(b"ping")
        .await
        .expect("write before quiesce");
    let mut buf = [0u8; 4];
    server.read_exact(&mut buf).await.expect("server reads");
    // Like an idle pooled connection: its owner waits in a read.
    let reader = tokio::spawn(async move {
        let mut byte = [0u8; 1];
        let result = stream.read(&mut byte).await;
        drop(stream);
        result
    });
    assert!(!quiescer.is_held(&key));
    assert!(quiescer.quiesce(&key, LIMIT).await, "every stream closed");
    assert!(quiescer.is_held(&key));
    let read = tokio::time::timeout(LIMIT, reader)
        .await
        .expect("reader ends")
        .expect("reader task");
    assert_eq!(
        read.expect_err("reset").kind(),
        std::io::ErrorKind::ConnectionReset
    );
    // The sandbox side sees a reset, not an orderly close.
    let mut rest = [0u8; 1];
    let server_read = tokio::time::timeout(LIMIT, server.read(&mut rest))
        .await
        .expect("server read ends");
    assert_eq!(
        server_read.expect_err("RST").kind(),
        std::io::ErrorKind::ConnectionReset
    );
    let deadline = tokio::time::Instant::now() + Duration::from_millis(50);
    assert!(
        !quiescer.wait_released(&key, deadline).await,
        "held until release"
    );
    let waiter = {
        let quiescer = std::sync::Arc::clone(&quiescer);
        let key = key.clone();
        tokio::spawn(async move {
            quiescer
                .wait_released(&key, tokio::time::Instant::now() + LIMIT)
                .await
        })
    };
    quiescer.release(&key);
    assert!(waiter.await.expect("waiter task"), "released");
    // Streams dialled after the quiesce carry the new token and work.
    let dialled = TcpStream::connect(addr).await.expect("dial again");
    let mut stream = quiescer.wrap(&key, dialled);
    stream
        .write_all(b"pong")
        .await
        .expect("write after release");
}

#[tokio::test]
async fn quiesce_of_an_unknown_sandbox_is_quiet_at_once() {
    let quiescer = Quiescer::default();
    let key = SandboxKey::new("default", "none");
    assert!(quiescer.quiesce(&key, LIMIT).await);
    quiescer.release(&key);
    assert!(!quiescer.is_held(&key));
}
