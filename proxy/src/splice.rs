//! The one bidirectional copy of the proxy (L4 listeners, CONNECT tunnels and upgraded HTTP
//! connections): between a client and an upstream with byte accounting, half-close and an
//! optional idle timeout.
//!
//! One future drives both directions (no task or lock per direction, unlike `io::split`). When a
//! side sends FIN, the other side's write half is shut down and the opposite direction keeps
//! flowing until it ends too, so request/response protocols that half-close work. Buffers start
//! small and grow while reads fill them, so an idle tunnel costs little and a bulk one moves
//! large chunks. Bytes are reported as they move, so activity is seen while a tunnel is open.
//! `splice/pipe.rs` holds the zero-copy pipes used for bulk directions.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::metrics::hot::ZERO_COPY_BYTES;

mod pipe;
#[cfg(test)]
mod tests;

/// First buffer size per direction.
pub const INITIAL_BUFFER: usize = 8 * 1024;
/// Default largest buffer size per direction.
pub const DEFAULT_MAX_BUFFER: usize = 256 * 1024;

/// How a splice runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpliceOptions {
    /// End the splice after this long with no byte moving either way; `None` = never.
    pub idle_timeout: Option<Duration>,
    /// Largest buffer per direction; buffers grow from [`INITIAL_BUFFER`] up to this.
    pub max_buffer: usize,
    /// Between TCP streams ([`splice_tcp`]): move a direction that carries bulk (its buffer
    /// grew to `max_buffer`) to a kernel pipe of that size.
    pub zero_copy: bool,
}

impl Default for SpliceOptions {
    fn default() -> Self {
        Self {
            idle_timeout: None,
            max_buffer: DEFAULT_MAX_BUFFER,
            zero_copy: true,
        }
    }
}

/// Which end of a splice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client that connected to the proxy.
    Client,
    /// The sandbox the proxy dialled.
    Upstream,
}

/// Why a splice ended early.
#[derive(Debug, thiserror::Error)]
pub enum SpliceError {
    /// Reading from one side failed (a reset, usually).
    #[error("reading from the {side:?} side: {source}")]
    Read {
        /// The side read from.
        side: Side,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// Writing to one side failed.
    #[error("writing to the {side:?} side: {source}")]
    Write {
        /// The side written to.
        side: Side,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// No byte moved for the idle timeout.
    #[error("idle for {0:?}")]
    Idle(Duration),
}

impl SpliceError {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Read {
                side: Side::Client, ..
            }
            | Self::Write {
                side: Side::Client, ..
            } => "downstream_io",
            Self::Read {
                side: Side::Upstream,
                ..
            }
            | Self::Write {
                side: Side::Upstream,
                ..
            } => "upstream_io",
            Self::Idle(_) => "idle_timeout",
        }
    }

    /// Whether the failure was a connection reset (which the other side should see as one).
    pub fn is_reset(&self) -> bool {
        match self {
            Self::Read { source, .. } | Self::Write { source, .. } => matches!(
                source.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
            ),
            Self::Idle(_) => false,
        }
    }
}

/// Bytes moved by a finished splice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Transferred {
    /// Bytes from the client to the upstream.
    pub to_upstream: u64,
    /// Bytes from the upstream to the client.
    pub to_client: u64,
    /// Of both, the bytes that moved through a kernel pipe without entering user space.
    pub zero_copy: u64,
}

/// Copies both ways between `client` and `upstream` until both directions ended, calling
/// `on_bytes(to_upstream, to_client)` with the bytes moved as they move.
///
/// # Example
/// ```no_run
/// # async fn f(mut a: tokio::net::TcpStream, mut b: tokio::net::TcpStream) {
/// use rouse_proxy::splice::{splice, SpliceOptions};
///
/// let moved = splice(&mut a, &mut b, SpliceOptions::default(), |_, _| {}).await;
/// # }
/// ```
pub async fn splice<C, U>(
    client: &mut C,
    upstream: &mut U,
    options: SpliceOptions,
    on_bytes: impl FnMut(u64, u64),
) -> Result<Transferred, SpliceError>
where
    C: AsyncRead + AsyncWrite + Unpin + ?Sized,
    U: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    let max = options.max_buffer.max(INITIAL_BUFFER);
    drive(options, on_bytes, |cx, up, down| {
        let up_done = up.poll_copy(cx, Pin::new(&mut *client), Pin::new(&mut *upstream), max)?;
        let down_done =
            down.poll_copy(cx, Pin::new(&mut *upstream), Pin::new(&mut *client), max)?;
        Ok((up_done, down_done))
    })
    .await
}

/// Runs both directions through `step` until both ended: reports the bytes, keeps the idle
/// timeout.
async fn drive(
    options: SpliceOptions,
    mut on_bytes: impl FnMut(u64, u64),
    mut step: impl FnMut(
        &mut Context<'_>,
        &mut Direction,
        &mut Direction,
    ) -> Result<(Poll<()>, Poll<()>), SpliceError>,
) -> Result<Transferred, SpliceError> {
    let mut up = Direction::new(Side::Client, Side::Upstream);
    let mut down = Direction::new(Side::Upstream, Side::Client);
    // Only `splice_tcp` ever makes a pipe; with zero copy off it never tries.
    (up.no_pipe, down.no_pipe) = (!options.zero_copy, !options.zero_copy);
    let mut idle = options
        .idle_timeout
        .map(|t| (t, Box::pin(tokio::time::sleep(t)), Instant::now()));
    let mut total = Transferred::default();
    poll_fn(|cx| {
        let (before_up, before_down) = (up.bytes, down.bytes);
        let piped_before = up.piped + down.piped;
        let (up_done, down_done) = step(cx, &mut up, &mut down)?;
        let moved = (up.bytes - before_up, down.bytes - before_down);
        if moved != (0, 0) {
            on_bytes(moved.0, moved.1);
            total.to_upstream += moved.0;
            total.to_client += moved.1;
            let piped = up.piped + down.piped - piped_before;
            if piped > 0 {
                ZERO_COPY_BYTES.increment(piped);
            }
        }
        if up_done.is_ready() && down_done.is_ready() {
            total.zero_copy = up.piped + down.piped;
            return Poll::Ready(Ok(total));
        }
        if let Some((timeout, sleep, last)) = &mut idle {
            // Progress moves a timestamp, not the timer: re-arming a timer per chunk would cost
            // more than the copy. The timer re-arms to the last progress when it fires early.
            if moved != (0, 0) || up.progressed || down.progressed {
                *last = Instant::now();
            }
            up.progressed = false;
            down.progressed = false;
            while sleep.as_mut().poll(cx).is_ready() {
                let due = *last + *timeout;
                if due <= Instant::now() {
                    return Poll::Ready(Err(SpliceError::Idle(*timeout)));
                }
                sleep.as_mut().reset(due);
            }
        }
        Poll::Pending
    })
    .await
}

/// [`splice`] between two TCP streams; a reset on one side is passed on as a reset to the other,
/// rather than a FIN that would look like a clean end. A direction that carries bulk moves
/// from the buffered copy to a kernel pipe (zero-copy `splice(2)`, see [`pipe`]).
pub async fn splice_tcp(
    client: &mut TcpStream,
    upstream: &mut TcpStream,
    options: SpliceOptions,
    on_bytes: impl FnMut(u64, u64),
) -> Result<Transferred, SpliceError> {
    let max = options.max_buffer.max(INITIAL_BUFFER);
    let result = drive(options, on_bytes, |cx, up, down| {
        let up_done = up.poll_tcp(cx, client, upstream, max)?;
        let down_done = down.poll_tcp(cx, upstream, client, max)?;
        Ok((up_done, down_done))
    })
    .await;
    if let Err(err) = &result
        && err.is_reset()
    {
        // Best effort: the stream is dropped right after, and a failure leaves a plain close.
        let _ = client.set_zero_linger();
        let _ = upstream.set_zero_linger();
    }
    result
}

/// One direction's state: reads from one side into a buffer, writes it to the other.
struct Direction {
    from: Side,
    to: Side,
    buf: Vec<u8>,
    pos: usize,
    cap: usize,
    read_done: bool,
    done: bool,
    needs_flush: bool,
    progressed: bool,
    bytes: u64,
    /// The zero-copy pipe, once this TCP direction carries bulk; `None` while it copies.
    pipe: Option<pipe::Pipe>,
    /// Zero copy is off, or a pipe could not be made (file descriptors exhausted): keep
    /// copying.
    no_pipe: bool,
    /// Of `bytes`, those moved through the pipe.
    piped: u64,
}

impl Direction {
    fn new(from: Side, to: Side) -> Self {
        Self {
            from,
            to,
            buf: Vec::new(),
            pos: 0,
            cap: 0,
            read_done: false,
            done: false,
            needs_flush: false,
            progressed: false,
            bytes: 0,
            pipe: None,
            no_pipe: false,
            piped: 0,
        }
    }

    /// [`Direction::poll_copy`] between TCP streams, moving to a kernel pipe once a read filled
    /// the largest buffer (bulk) and the buffer is drained.
    fn poll_tcp(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut TcpStream,
        writer: &mut TcpStream,
        max: usize,
    ) -> Poll<Result<(), SpliceError>> {
        if self.pipe.is_none()
            && !self.no_pipe
            && !self.done
            && !self.read_done
            && self.pos == self.cap
            && self.buf.len() >= max
        {
            match pipe::Pipe::new(max) {
                Ok(pipe) => {
                    self.pipe = Some(pipe);
                    self.buf = Vec::new();
                    (self.pos, self.cap) = (0, 0);
                }
                Err(error) => {
                    tracing::debug!(%error, "no pipe for a zero-copy splice; copying");
                    self.no_pipe = true;
                }
            }
        }
        let Some(pipe) = &mut self.pipe else {
            return self.poll_copy(cx, Pin::new(reader), Pin::new(writer), max);
        };
        if self.done {
            return Poll::Ready(Ok(()));
        }
        if !self.read_done {
            let before = self.bytes;
            let moved = pipe.poll_move(cx, reader, writer, &mut self.bytes);
            self.piped += self.bytes - before;
            match ready!(moved) {
                Err(pipe::Failed::Read(source)) => {
                    let side = self.from;
                    return Poll::Ready(Err(SpliceError::Read { side, source }));
                }
                Err(pipe::Failed::Write(source)) => {
                    let side = self.to;
                    return Poll::Ready(Err(SpliceError::Write { side, source }));
                }
                Ok(()) => self.read_done = true,
            }
        }
        self.poll_finish(cx, Pin::new(writer))
    }

    /// Once the reader ended and every byte was written: shuts the writer down and frees what
    /// the direction held (this direction is over, the other may run for hours).
    fn poll_finish<W: AsyncWrite + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        writer: Pin<&mut W>,
    ) -> Poll<Result<(), SpliceError>> {
        let side = self.to;
        ready!(writer.poll_shutdown(cx)).map_err(|source| SpliceError::Write { side, source })?;
        self.progressed = true;
        self.done = true;
        self.buf = Vec::new();
        self.pipe = None;
        Poll::Ready(Ok(()))
    }

    /// Moves bytes until the reader is pending or done; ready once the reader hit EOF, every
    /// byte was written and the writer was shut down.
    fn poll_copy<R, W>(
        &mut self,
        cx: &mut Context<'_>,
        mut reader: Pin<&mut R>,
        mut writer: Pin<&mut W>,
        max: usize,
    ) -> Poll<Result<(), SpliceError>>
    where
        R: AsyncRead + ?Sized,
        W: AsyncWrite + ?Sized,
    {
        let (from, to) = (self.from, self.to);
        let read_err = |source| SpliceError::Read { side: from, source };
        let write_err = |source| SpliceError::Write { side: to, source };
        if self.done {
            return Poll::Ready(Ok(()));
        }
        loop {
            if self.pos == self.cap && !self.read_done {
                if self.buf.is_empty() {
                    self.buf = vec![0; INITIAL_BUFFER];
                } else if self.cap == self.buf.len() && self.buf.len() < max {
                    // The last read filled the buffer: more is waiting, read bigger chunks.
                    let grown = (self.buf.len() * 2).min(max);
                    self.buf.resize(grown, 0);
                }
                let mut read_buf = ReadBuf::new(&mut self.buf);
                match reader.as_mut().poll_read(cx, &mut read_buf) {
                    Poll::Ready(Ok(())) => {
                        let n = read_buf.filled().len();
                        self.pos = 0;
                        self.cap = n;
                        if n == 0 {
                            self.read_done = true;
                        }
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(read_err(e))),
                    Poll::Pending => {
                        if self.needs_flush {
                            ready!(writer.as_mut().poll_flush(cx)).map_err(write_err)?;
                            self.needs_flush = false;
                        }
                        return Poll::Pending;
                    }
                }
            }
            while self.pos < self.cap {
                let n = ready!(
                    writer
                        .as_mut()
                        .poll_write(cx, &self.buf[self.pos..self.cap])
                )
                .map_err(write_err)?;
                if n == 0 {
                    return Poll::Ready(Err(write_err(io::ErrorKind::WriteZero.into())));
                }
                self.pos += n;
                self.bytes += n as u64;
                self.needs_flush = true;
            }
            if self.read_done {
                return self.poll_finish(cx, writer.as_mut());
            }
        }
    }
}
