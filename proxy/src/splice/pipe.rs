//! Zero-copy moving of one direction between two TCP sockets: `splice(2)` from the reading
//! socket into a kernel pipe and from the pipe into the writing socket, so a bulk stream's
//! bytes never enter user space (measured in docs/benchmarks.md, "L4 splice").
//!
//! A direction starts on the buffered copy and moves here only once it carries bulk (its
//! buffer grew to the largest size): an idle or chatty tunnel keeps costing no pipe and no
//! extra file descriptors.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::task::{Context, Poll, ready};

use nix::fcntl::{FcntlArg, OFlag, SpliceFFlags, fcntl, splice};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// The smallest pipe worth moving bulk through: the kernel's default size.
const MIN_CAPACITY: usize = 64 * 1024;

/// A kernel pipe between two sockets and the bytes waiting in it.
#[derive(Debug)]
pub(super) struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    /// Bytes in the pipe not yet written on.
    held: usize,
    /// The most one `splice` takes from the socket: the pipe's capacity.
    capacity: usize,
}

/// Which half of a pipe move failed.
#[derive(Debug)]
pub(super) enum Failed {
    /// Reading from the socket into the pipe.
    Read(io::Error),
    /// Writing from the pipe to the socket.
    Write(io::Error),
}

impl Pipe {
    /// A non-blocking pipe of about `size` bytes (at least [`MIN_CAPACITY`]); an error where the kernel gives a smaller
    /// one than [`MIN_CAPACITY`] (past the per-user limit on pipe memory it gives 8 KiB, which
    /// would move less per call than the copy it replaces).
    pub(super) fn new(size: usize) -> io::Result<Pipe> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)?;
        let wanted = i32::try_from(size.max(MIN_CAPACITY)).unwrap_or(i32::MAX);
        let capacity = fcntl(write.as_fd(), FcntlArg::F_SETPIPE_SZ(wanted))
            .or_else(|_| fcntl(write.as_fd(), FcntlArg::F_GETPIPE_SZ))?;
        let capacity = usize::try_from(capacity).unwrap_or(0);
        if capacity < MIN_CAPACITY {
            return Err(io::Error::other(format!(
                "the kernel gave a pipe of {capacity} bytes"
            )));
        }
        Ok(Pipe {
            read,
            write,
            held: 0,
            capacity,
        })
    }

    /// Moves bytes from `reader` through the pipe to `writer` until one of them is pending;
    /// ready once the reader ended and every byte was written. `moved` counts the bytes
    /// written on.
    pub(super) fn poll_move(
        &mut self,
        cx: &mut Context<'_>,
        reader: &TcpStream,
        writer: &TcpStream,
        moved: &mut u64,
    ) -> Poll<Result<(), Failed>> {
        let flags = SpliceFFlags::SPLICE_F_NONBLOCK | SpliceFFlags::SPLICE_F_MOVE;
        loop {
            while self.held > 0 {
                ready!(writer.poll_write_ready(cx)).map_err(Failed::Write)?;
                let wrote = writer.try_io(Interest::WRITABLE, || {
                    splice(&self.read, None, writer, None, self.held, flags)
                        .map_err(io::Error::from)
                });
                match wrote {
                    Ok(0) => {
                        return Poll::Ready(Err(Failed::Write(io::ErrorKind::WriteZero.into())));
                    }
                    Ok(n) => {
                        self.held -= n;
                        *moved += n as u64;
                    }
                    // The readiness was stale; `try_io` cleared it, the next poll waits.
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                    Err(error) => return Poll::Ready(Err(Failed::Write(error))),
                }
            }
            ready!(reader.poll_read_ready(cx)).map_err(Failed::Read)?;
            let read = reader.try_io(Interest::READABLE, || {
                splice(reader, None, &self.write, None, self.capacity, flags)
                    .map_err(io::Error::from)
            });
            match read {
                Ok(0) => return Poll::Ready(Ok(())),
                Ok(n) => self.held = n,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => return Poll::Ready(Err(Failed::Read(error))),
            }
        }
    }
}
