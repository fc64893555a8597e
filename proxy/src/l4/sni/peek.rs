//! Peeking a ClientHello off a socket without consuming it, bounded in bytes and time.

use std::io;
use std::task::{Context, Poll, Waker};

use tokio::io::{Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::{ClientHello, ClientHelloError, Progress, RECORD_HEADER_LEN, parse_client_hello};

type Result<T, E = ClientHelloError> = std::result::Result<T, E>;

/// Waits until the start of `stream` holds a complete ClientHello and parses it, without
/// consuming any bytes: the caller forwards them untouched afterwards.
///
/// Bounded by `max_bytes` (a larger ClientHello is rejected) and by `deadline`.
pub async fn peek_client_hello(
    stream: &TcpStream,
    max_bytes: usize,
    deadline: Instant,
) -> Result<ClientHello> {
    // Most ClientHellos fit in 2 KiB; grow only when one does not.
    let mut buf = vec![0u8; max_bytes.clamp(RECORD_HEADER_LEN, 2048)];
    let mut seen = 0usize;
    loop {
        let n = tokio::time::timeout_at(deadline, peek_more(stream, &mut buf, seen))
            .await
            .map_err(|_| ClientHelloError::Timeout)?
            .map_err(ClientHelloError::Io)?;
        if n == 0 {
            return Err(ClientHelloError::Closed);
        }
        seen = n;
        match parse_client_hello(&buf[..n])? {
            Progress::Complete(hello) => return Ok(hello),
            Progress::Incomplete { at_least } if at_least > max_bytes => {
                return Err(ClientHelloError::TooLarge { max: max_bytes });
            }
            Progress::Incomplete { at_least } => {
                if n == buf.len() {
                    if n >= max_bytes {
                        return Err(ClientHelloError::TooLarge { max: max_bytes });
                    }
                    let grown = at_least.max(n * 2).min(max_bytes);
                    buf.resize(grown, 0);
                }
            }
        }
    }
}

/// Peeks into `buf` once more bytes than `seen` are queued and returns how many are queued from
/// the start of the stream; 0 when the peer closed without sending more.
///
/// A plain `peek` returns at once while any bytes are queued, so looping on it would spin. The
/// peek runs inside `try_io`, which clears the socket's readiness when the closure reports
/// `WouldBlock` (no new bytes), unless the reactor saw new data in the meantime; `readable()`
/// then sleeps until the next arrival.
async fn peek_more(stream: &TcpStream, buf: &mut [u8], seen: usize) -> io::Result<usize> {
    loop {
        let ready = stream.ready(Interest::READABLE).await?;
        // End of stream stays "ready" for ever: with no new bytes it means the peer is gone.
        let closed = ready.is_read_closed();
        let peeked = stream.try_io(Interest::READABLE, || {
            let mut read_buf = ReadBuf::new(buf);
            let mut cx = Context::from_waker(Waker::noop());
            match stream.poll_peek(&mut cx, &mut read_buf) {
                Poll::Ready(Ok(n)) if n > seen => Ok(n),
                Poll::Ready(Ok(_)) if closed => Ok(0),
                Poll::Ready(Ok(0)) => Ok(0),
                Poll::Ready(Ok(_)) | Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
                Poll::Ready(Err(e)) => Err(e),
            }
        });
        match peeked {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}
