//! A reference reading of chunked bodies for the `http_relay` target: the chunked grammar
//! (RFC 9112 §7.1) as the relay accepts it, read line by line and without the relay's length
//! bounds, to compare the relay's byte-by-byte scan with.

/// Lines well within the relay's bound on a chunk-size or trailer line (4 KiB).
const SHORT_LINE: usize = 4000;
/// Trailers well within the relay's bound on them (64 KiB).
const FEW_TRAILERS: usize = 60_000;
/// Most hex digits of a chunk size the relay reads after leading zeros (a `u64`).
const SIZE_DIGITS: usize = 16;

/// A chunked body read line by line after the grammar the relay accepts (RFC 9112 §7.1, with
/// bare LF line ends and whitespace before extensions), without its length bounds.
pub struct Reference {
    /// The body's bytes when its end was found, `None` when it needs more, or why it is
    /// malformed.
    pub end: Result<Option<usize>, &'static str>,
    /// The longest chunk-size or trailer line, line end left out.
    longest_line: usize,
    /// Trailer bytes, line ends included.
    trailers: usize,
}

impl Reference {
    /// Reads `body` from its start.
    pub fn read(body: &[u8]) -> Self {
        let mut reference = Self {
            end: Ok(None),
            longest_line: 0,
            trailers: 0,
        };
        reference.end = reference.chunks(body);
        reference
    }

    /// Whether the relay's bounds can play no part.
    pub fn within_bounds(&self) -> bool {
        self.longest_line <= SHORT_LINE && self.trailers <= FEW_TRAILERS
    }

    /// The chunks from the start of `body`, then the trailer section.
    fn chunks(&mut self, body: &[u8]) -> Result<Option<usize>, &'static str> {
        let mut at = 0;
        // Each chunk takes at least one byte, so this ends.
        loop {
            let (content, next) = line(body, at);
            self.longest_line = self.longest_line.max(content.len());
            let digits = content.iter().take_while(|b| b.is_ascii_hexdigit()).count();
            if digits == 0 && (!content.is_empty() || at + content.len() < body.len()) {
                return Err("chunk size missing");
            }
            // Leading zeros are allowed; the value must fit in a `u64`.
            let significant = content[..digits].iter().skip_while(|b| **b == b'0').count();
            if significant > SIZE_DIGITS {
                return Err("chunk size too large");
            }
            if content
                .get(digits)
                .is_some_and(|b| !matches!(b, b';' | b' ' | b'\t'))
            {
                return Err("invalid byte after chunk size");
            }
            let Some(next) = next? else {
                return Ok(None);
            };
            let hex = std::str::from_utf8(&content[..digits]).expect("hex digits are ASCII");
            let size = u64::from_str_radix(hex, 16).expect("at most 16 significant hex digits fit");
            if size == 0 {
                return self.trailer_section(body, next);
            }
            let Some(data_end) = usize::try_from(size).ok().and_then(|n| next.checked_add(n))
            else {
                return Ok(None);
            };
            at = match body.get(data_end..) {
                None | Some([]) | Some([b'\r']) => return Ok(None),
                Some([b'\r', b'\n', ..]) => data_end + 2,
                Some([b'\n', ..]) => data_end + 1,
                Some(_) => return Err("chunk data not followed by CRLF"),
            };
        }
    }

    /// The trailer lines from `at` up to the empty line that ends the body.
    fn trailer_section(
        &mut self,
        body: &[u8],
        mut at: usize,
    ) -> Result<Option<usize>, &'static str> {
        // Each trailer line takes at least one byte, so this ends.
        loop {
            let (content, next) = line(body, at);
            self.longest_line = self.longest_line.max(content.len());
            self.trailers += content.len() + 2;
            let Some(next) = next? else {
                return Ok(None);
            };
            if content.is_empty() {
                return Ok(Some(next));
            }
            at = next;
        }
    }
}

/// The line of `body` from `at`: its bytes up to a CR or LF, and where the next line starts
/// (`None` when its end is not in `body` yet; an error for a CR not followed by LF).
fn line(body: &[u8], at: usize) -> (&[u8], Result<Option<usize>, &'static str>) {
    let rest = &body[at..];
    let len = rest
        .iter()
        .position(|b| matches!(b, b'\r' | b'\n'))
        .unwrap_or(rest.len());
    let next = match &rest[len..] {
        [] | [b'\r'] => Ok(None),
        [b'\n', ..] => Ok(Some(at + len + 1)),
        [b'\r', b'\n', ..] => Ok(Some(at + len + 2)),
        _ => Err("CR without LF"),
    };
    (&rest[..len], next)
}
