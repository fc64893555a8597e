//! [`Chunked`]: finds where a `Transfer-Encoding: chunked` body ends (RFC 9112 §7.1) while
//! its bytes pass through unchanged, so a kept-alive connection knows where the next message
//! starts without decoding the body.

/// Longest chunk-size line (size and extensions) or trailer line accepted, in bytes.
const MAX_LINE: usize = 4096;
/// Most trailer bytes accepted after the last chunk.
const MAX_TRAILERS: usize = 64 * 1024;

/// Where a chunked body's scan stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading the hex digits of a chunk size (`any`: at least one was read).
    Size { any: bool },
    /// Past the size: extensions up to the line's end.
    Extension,
    /// Expecting the LF of a chunk-size line.
    SizeLf { last: bool },
    /// Inside chunk data, this many bytes left.
    Data(u64),
    /// Expecting the CR after chunk data.
    DataCr,
    /// Expecting the LF after chunk data.
    DataLf,
    /// At the start of a trailer line (or the final empty line).
    TrailerStart,
    /// Inside a trailer line.
    Trailer,
    /// Expecting the LF of a trailer line (`empty`: the final empty line).
    TrailerLf { empty: bool },
    /// The body ended.
    Done,
}

/// A malformed chunked body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed chunked body: {0}")]
pub struct ChunkedError(&'static str);

/// The scan of one chunked body.
#[derive(Debug)]
pub struct Chunked {
    state: State,
    size: u64,
    /// Bytes of the current size or trailer line.
    line: usize,
    /// Bytes of trailers so far.
    trailers: usize,
}

impl Default for Chunked {
    fn default() -> Self {
        Self::new()
    }
}

impl Chunked {
    /// A scan at the start of a body.
    pub fn new() -> Self {
        Self {
            state: State::Size { any: false },
            size: 0,
            line: 0,
            trailers: 0,
        }
    }

    /// Whether the body ended.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Scans `bytes`, the next bytes of the body: how many of them belong to it (all of them
    /// until the end is found).
    pub fn scan(&mut self, bytes: &[u8]) -> Result<usize, ChunkedError> {
        let mut i = 0;
        while i < bytes.len() {
            // Chunk data is skipped in one step: the per-byte work is only for the framing.
            if let State::Data(left) = self.state {
                let take = left.min((bytes.len() - i) as u64);
                // `take` is at most `bytes.len() - i`, a `usize`.
                i += take as usize;
                self.state = if take == left {
                    State::DataCr
                } else {
                    State::Data(left - take)
                };
                continue;
            }
            let byte = bytes[i];
            i += 1;
            self.state = self.step(byte)?;
            if self.state == State::Done {
                return Ok(i);
            }
        }
        Ok(i)
    }

    /// The state after one framing byte.
    fn step(&mut self, byte: u8) -> Result<State, ChunkedError> {
        let next = match self.state {
            State::Size { any } => match hex(byte) {
                Some(value) => {
                    // Leading zeros are allowed (RFC 9112 §7.1), so the bound is on the value
                    // (it must fit in a `u64`) and on the line's length, not on the digits.
                    if self.size >> 60 != 0 {
                        return Err(ChunkedError("chunk size too large"));
                    }
                    self.line += 1;
                    if self.line > MAX_LINE {
                        return Err(ChunkedError("chunk size line too long"));
                    }
                    self.size = (self.size << 4) | u64::from(value);
                    State::Size { any: true }
                }
                None if !any => return Err(ChunkedError("chunk size missing")),
                None => self.after_size(byte)?,
            },
            State::Extension => {
                self.line += 1;
                if self.line > MAX_LINE {
                    return Err(ChunkedError("chunk extension too long"));
                }
                match byte {
                    b'\r' => State::SizeLf {
                        last: self.size == 0,
                    },
                    b'\n' => self.size_line_end(),
                    _ => State::Extension,
                }
            }
            State::SizeLf { .. } if byte == b'\n' => self.size_line_end(),
            State::SizeLf { .. } => return Err(ChunkedError("CR without LF after chunk size")),
            State::DataCr if byte == b'\r' => State::DataLf,
            State::DataCr | State::DataLf if byte == b'\n' => self.next_size(),
            State::DataCr | State::DataLf => {
                return Err(ChunkedError("chunk data not followed by CRLF"));
            }
            State::TrailerStart => match byte {
                b'\r' => State::TrailerLf { empty: true },
                b'\n' => State::Done,
                _ => self.trailer_byte(byte)?,
            },
            State::Trailer => self.trailer_byte(byte)?,
            State::TrailerLf { empty } if byte == b'\n' => {
                if empty {
                    State::Done
                } else {
                    self.line = 0;
                    State::TrailerStart
                }
            }
            State::TrailerLf { .. } => return Err(ChunkedError("CR without LF in trailers")),
            // `scan` handles data and stops at the end.
            State::Data(_) | State::Done => return Err(ChunkedError("bytes after the end")),
        };
        Ok(next)
    }

    /// The state after the first byte past a chunk size's digits.
    fn after_size(&mut self, byte: u8) -> Result<State, ChunkedError> {
        match byte {
            b'\r' => Ok(State::SizeLf {
                last: self.size == 0,
            }),
            b'\n' => Ok(self.size_line_end()),
            b';' | b' ' | b'\t' => {
                self.line += 1;
                Ok(State::Extension)
            }
            _ => Err(ChunkedError("invalid byte after chunk size")),
        }
    }

    /// The state after a chunk-size line: its data, or the trailers after the last chunk.
    fn size_line_end(&mut self) -> State {
        self.line = 0;
        if self.size == 0 {
            State::TrailerStart
        } else {
            State::Data(self.size)
        }
    }

    /// The state at the start of the next chunk-size line.
    fn next_size(&mut self) -> State {
        self.size = 0;
        self.line = 0;
        State::Size { any: false }
    }

    /// One byte of a trailer line.
    fn trailer_byte(&mut self, byte: u8) -> Result<State, ChunkedError> {
        self.trailers += 1;
        self.line += 1;
        if self.trailers > MAX_TRAILERS || self.line > MAX_LINE {
            return Err(ChunkedError("trailers too long"));
        }
        Ok(match byte {
            b'\r' => State::TrailerLf { empty: false },
            b'\n' => {
                self.line = 0;
                State::TrailerStart
            }
            _ => State::Trailer,
        })
    }
}

/// The value of a hex digit.
fn hex(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scans `body` split at every position: the end is found at the same byte either way.
    fn end_of(body: &[u8]) -> Result<Option<usize>, ChunkedError> {
        let mut whole = Chunked::new();
        let n = whole.scan(body)?;
        let expected = whole.is_done().then_some(n);
        for split in 0..=body.len() {
            let mut parts = Chunked::new();
            let first = parts.scan(&body[..split])?;
            let total = if parts.is_done() {
                first
            } else {
                first + parts.scan(&body[split..])?
            };
            assert_eq!(
                parts.is_done().then_some(total),
                expected,
                "split at {split}"
            );
        }
        Ok(expected)
    }

    #[test]
    fn finds_the_end_of_chunked_bodies() {
        let body = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\nNEXT";
        assert_eq!(end_of(body), Ok(Some(body.len() - 4)));
        let trailers = b"3\r\nabc\r\n0\r\nx-sum: 1\r\nx-more: 2\r\n\r\n";
        assert_eq!(end_of(trailers), Ok(Some(trailers.len())));
        let bare_lf = b"A\nabcdefghij\n0\n\n";
        assert_eq!(end_of(bare_lf), Ok(Some(bare_lf.len())));
        assert_eq!(end_of(b"5\r\nhel"), Ok(None));
    }

    #[test]
    fn bounds_each_trailer_line_not_their_sum() {
        // Short CRLF-ended trailer lines that together pass the line bound.
        let mut body = b"0\r\n".to_vec();
        let mut i = 0;
        while body.len() <= 2 * MAX_LINE {
            body.extend_from_slice(format!("x-t{i}: {}\r\n", "a".repeat(90)).as_bytes());
            i += 1;
        }
        body.extend_from_slice(b"\r\n");
        assert_eq!(end_of(&body), Ok(Some(body.len())));
    }

    #[test]
    fn accepts_leading_zeros_in_a_chunk_size() {
        let body = b"0000000000000000000005\r\nhello\r\n00000000000000000000\r\n\r\n";
        assert_eq!(end_of(body), Ok(Some(body.len())));
        // The largest size a u64 holds, after leading zeros, is a size, not an error.
        assert!(Chunked::new().scan(b"00ffffffffffffffff\r\n").is_ok());
    }

    #[test]
    fn rejects_malformed_framing() {
        assert!(end_of(b"x\r\n").is_err());
        assert!(end_of(b"\r\n").is_err());
        assert!(end_of(b"3\r\nabcd\r\n").is_err());
        assert!(end_of(b"3\rx").is_err());
        assert!(end_of(b"11111111111111111\r\n").is_err());
        let zeros = [&[b'0'; MAX_LINE + 1][..], b"\r\n"].concat();
        assert!(end_of(&zeros).is_err());
        let long_extension = [b"1;".as_slice(), &[b'a'; MAX_LINE + 1]].concat();
        assert!(end_of(&long_extension).is_err());
        let long_trailer = [b"0\r\n".as_slice(), &[b'a'; MAX_LINE + 1]].concat();
        assert!(end_of(&long_trailer).is_err());
    }
}
