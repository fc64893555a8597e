//! TLS ClientHello parsing for routing by SNI without terminating TLS.
//!
//! The passthrough listener must learn the server name before it knows where to dial, yet must
//! forward the client's bytes untouched. So it peeks (never reads) the socket and hands the bytes
//! seen so far to [`parse_client_hello`], a pure function that either asks for more bytes, returns
//! the server name and ALPN list, or names what is wrong. The parser borrows the input and
//! allocates only for the result, plus one buffer when the ClientHello is split across records.
//! [`peek_client_hello`] drives it against a socket with a byte bound and a deadline.
//! Its error type is in `sni/error.rs`, the socket driver in `sni/peek.rs`.

use std::net::IpAddr;

mod error;
mod peek;
#[cfg(test)]
mod tests;

pub use error::ClientHelloError;
pub use peek::peek_client_hello;

/// Bytes in a TLS record header: content type, version, length.
pub const RECORD_HEADER_LEN: usize = 5;
/// Largest plaintext record payload TLS allows (2^14 bytes).
pub const MAX_RECORD_PAYLOAD: usize = 16_384;
/// Longest server name accepted (the DNS limit).
pub const MAX_SERVER_NAME_LEN: usize = 253;

const CONTENT_HANDSHAKE: u8 = 22;
const HANDSHAKE_CLIENT_HELLO: u8 = 1;
const EXT_SERVER_NAME: u16 = 0;
const EXT_ALPN: u16 = 16;
const NAME_TYPE_HOST: u8 = 0;

/// What the bytes seen so far amount to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// A valid prefix of a ClientHello; more bytes are needed.
    Incomplete {
        /// A lower bound on the total bytes the whole ClientHello takes, from the headers seen.
        at_least: usize,
    },
    /// A complete ClientHello.
    Complete(ClientHello),
}

/// What the router needs from a ClientHello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHello {
    /// The server name (SNI), lower-cased; `None` when the client sent none.
    pub sni: Option<String>,
    /// The ALPN protocol names offered, in the client's order (empty when none).
    pub alpn: Vec<Vec<u8>>,
    /// Bytes the ClientHello records occupy at the start of the stream.
    pub len: usize,
}

type Result<T, E = ClientHelloError> = std::result::Result<T, E>;

/// Parses the ClientHello at the start of `buf`, which holds the bytes received so far.
///
/// Returns [`Progress::Incomplete`] while `buf` is a valid prefix, so the caller can wait for more
/// bytes; errors as soon as the bytes cannot begin a ClientHello. Bytes after the ClientHello's
/// records are ignored (they belong to the TLS session).
///
/// # Example
/// ```
/// use rouse_proxy::l4::sni::{parse_client_hello, Progress};
///
/// assert!(matches!(parse_client_hello(&[0x16, 3, 1]), Ok(Progress::Incomplete { .. })));
/// assert!(parse_client_hello(b"GET / HTTP/1.1\r\n").is_err());
/// ```
pub fn parse_client_hello(buf: &[u8]) -> Result<Progress> {
    let mut offset = 0;
    // The handshake message: borrowed from the first record when it fits there (the usual
    // case), joined from several records otherwise.
    let mut first: &[u8] = &[];
    let mut joined: Vec<u8> = Vec::new();
    let mut records = 0usize;
    loop {
        let header = &buf[offset.min(buf.len())..buf.len().min(offset + RECORD_HEADER_LEN)];
        check_record_header_prefix(header, records == 0)?;
        if header.len() < RECORD_HEADER_LEN {
            return Ok(Progress::Incomplete {
                at_least: at_least(offset + RECORD_HEADER_LEN, offset, first, &joined, records),
            });
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if len > MAX_RECORD_PAYLOAD {
            return Err(ClientHelloError::RecordTooLarge { len });
        }
        if len == 0 {
            return Err(ClientHelloError::Malformed {
                what: "empty handshake record",
            });
        }
        let start = offset + RECORD_HEADER_LEN;
        let end = start + len;
        let Some(payload) = buf.get(start..end) else {
            // Check what is there already so garbage fails fast.
            let partial = &buf[start.min(buf.len())..];
            if records == 0 {
                check_handshake_prefix(partial)?;
            }
            return Ok(Progress::Incomplete {
                at_least: at_least(end, offset, first, &joined, records),
            });
        };
        offset = end;
        records += 1;
        let message: &[u8] = if records == 1 {
            first = payload;
            first
        } else {
            if joined.is_empty() {
                joined.extend_from_slice(first);
            }
            joined.extend_from_slice(payload);
            &joined
        };
        check_handshake_prefix(message)?;
        if message.len() < 4 {
            continue;
        }
        let body_len = u24(&message[1..4]);
        if message.len() < 4 + body_len {
            continue;
        }
        if message.len() > 4 + body_len {
            return Err(ClientHelloError::Malformed {
                what: "handshake bytes after the client hello",
            });
        }
        let (sni, alpn) = parse_body(&message[4..])?;
        return Ok(Progress::Complete(ClientHello {
            sni,
            alpn,
            len: offset,
        }));
    }
}

/// The least total length the ClientHello can have given the record at `offset` ends at
/// `record_end` and the handshake header (if seen) declares the message length.
fn at_least(
    record_end: usize,
    offset: usize,
    first: &[u8],
    joined: &[u8],
    records: usize,
) -> usize {
    let message = if records > 1 { joined } else { first };
    if message.len() >= 4 {
        let missing = (4 + u24(&message[1..4])).saturating_sub(message.len());
        // At least the missing message bytes after the records seen, each record's header aside.
        record_end.max(offset + RECORD_HEADER_LEN + missing)
    } else {
        record_end
    }
}

/// Checks the bytes of a record header received so far.
fn check_record_header_prefix(header: &[u8], first_record: bool) -> Result<()> {
    let Some(&content_type) = header.first() else {
        return Ok(());
    };
    if content_type != CONTENT_HANDSHAKE {
        if !first_record {
            return Err(ClientHelloError::UnexpectedRecord { content_type });
        }
        // SSL 2.0: a two-byte length with the high bit set, then message type 1.
        if content_type & 0x80 != 0 {
            match header.get(2) {
                None => return Ok(()),
                Some(&HANDSHAKE_CLIENT_HELLO) => return Err(ClientHelloError::Sslv2),
                Some(_) => {}
            }
        }
        return Err(ClientHelloError::NotTls {
            first: content_type,
        });
    }
    if let Some(&major) = header.get(1) {
        let minor = header.get(2).copied().unwrap_or(0);
        if major != 3 || minor > 4 {
            return Err(ClientHelloError::RecordVersion { major, minor });
        }
    }
    Ok(())
}

/// Checks the handshake message bytes received so far.
fn check_handshake_prefix(message: &[u8]) -> Result<()> {
    match message.first() {
        Some(&t) if t != HANDSHAKE_CLIENT_HELLO => {
            Err(ClientHelloError::NotClientHello { handshake_type: t })
        }
        _ => Ok(()),
    }
}

fn u24(b: &[u8]) -> usize {
    (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2])
}

/// A cursor over a byte slice whose reads fail with the field name.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(ClientHelloError::Malformed { what });
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &'static str) -> Result<u16> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u8_prefixed(&mut self, what: &'static str) -> Result<&'a [u8]> {
        let n = self.u8(what)?;
        self.take(usize::from(n), what)
    }

    fn u16_prefixed(&mut self, what: &'static str) -> Result<&'a [u8]> {
        let n = self.u16(what)?;
        self.take(usize::from(n), what)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Parses the ClientHello body (after the handshake header).
fn parse_body(body: &[u8]) -> Result<(Option<String>, Vec<Vec<u8>>)> {
    let mut r = Reader(body);
    r.take(2, "legacy version")?;
    r.take(32, "random")?;
    if r.u8_prefixed("session id")?.len() > 32 {
        return Err(ClientHelloError::Malformed {
            what: "session id longer than 32 bytes",
        });
    }
    let suites = r.u16_prefixed("cipher suites")?;
    if suites.is_empty() || suites.len() % 2 != 0 {
        return Err(ClientHelloError::Malformed {
            what: "cipher suites length",
        });
    }
    if r.u8_prefixed("compression methods")?.is_empty() {
        return Err(ClientHelloError::Malformed {
            what: "no compression methods",
        });
    }
    // Extensions are optional before TLS 1.3; no extensions means no server name.
    if r.is_empty() {
        return Ok((None, Vec::new()));
    }
    let mut exts = Reader(r.u16_prefixed("extensions")?);
    if !r.is_empty() {
        return Err(ClientHelloError::Malformed {
            what: "bytes after the extensions",
        });
    }
    let mut sni = None;
    let mut alpn = None;
    while !exts.is_empty() {
        let kind = exts.u16("extension type")?;
        let data = exts.u16_prefixed("extension data")?;
        match kind {
            EXT_SERVER_NAME if sni.is_some() => {
                return Err(ClientHelloError::Malformed {
                    what: "duplicate server name extension",
                });
            }
            EXT_SERVER_NAME => sni = Some(parse_server_name(data)?),
            EXT_ALPN if alpn.is_some() => {
                return Err(ClientHelloError::Malformed {
                    what: "duplicate ALPN extension",
                });
            }
            EXT_ALPN => alpn = Some(parse_alpn(data)?),
            _ => {}
        }
    }
    Ok((sni, alpn.unwrap_or_default()))
}

/// Parses the server_name extension (RFC 6066 section 3): exactly one host name.
fn parse_server_name(data: &[u8]) -> Result<String> {
    let mut outer = Reader(data);
    let mut list = Reader(outer.u16_prefixed("server name list")?);
    if !outer.is_empty() || list.is_empty() {
        return Err(ClientHelloError::Malformed {
            what: "server name list length",
        });
    }
    let mut host = None;
    while !list.is_empty() {
        let name_type = list.u8("server name type")?;
        let name = list.u16_prefixed("server name")?;
        if name_type != NAME_TYPE_HOST {
            return Err(ClientHelloError::NameNotHostname { name_type });
        }
        if host.is_some() {
            return Err(ClientHelloError::Malformed {
                what: "more than one host name",
            });
        }
        host = Some(name);
    }
    let name = host.ok_or(ClientHelloError::Malformed {
        what: "server name list length",
    })?;
    validate_host_name(name)?;
    // Validated as ASCII above, so this cannot fail; lower-case for routing.
    let name = std::str::from_utf8(name).map_err(|_| ClientHelloError::InvalidName {
        reason: "not ASCII",
    })?;
    Ok(name.to_ascii_lowercase())
}

/// Checks a DNS host name: LDH labels of 1..=63 bytes, at most 253 bytes, no trailing dot, no IP
/// literal (RFC 6066 forbids IP addresses in SNI).
fn validate_host_name(name: &[u8]) -> Result<()> {
    let invalid = |reason| Err(ClientHelloError::InvalidName { reason });
    if name.is_empty() {
        return invalid("empty");
    }
    if name.len() > MAX_SERVER_NAME_LEN {
        return invalid("longer than 253 bytes");
    }
    for label in name.split(|&b| b == b'.') {
        if label.is_empty() {
            return invalid("empty label");
        }
        if label.len() > 63 {
            return invalid("label longer than 63 bytes");
        }
        if !label
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
        {
            return invalid("characters other than letters, digits, '-' and '.'");
        }
        if label.first() == Some(&b'-') || label.last() == Some(&b'-') {
            return invalid("label starts or ends with '-'");
        }
    }
    let is_ip = std::str::from_utf8(name)
        .ok()
        .and_then(|s| s.parse::<IpAddr>().ok())
        .is_some();
    if is_ip {
        return invalid("an IP address");
    }
    Ok(())
}

/// Parses the ALPN extension (RFC 7301): a non-empty list of non-empty protocol names.
fn parse_alpn(data: &[u8]) -> Result<Vec<Vec<u8>>> {
    let mut outer = Reader(data);
    let mut list = Reader(outer.u16_prefixed("ALPN list")?);
    if !outer.is_empty() || list.is_empty() {
        return Err(ClientHelloError::Malformed {
            what: "ALPN list length",
        });
    }
    let mut names = Vec::new();
    while !list.is_empty() {
        let name = list.u8_prefixed("ALPN protocol name")?;
        if name.is_empty() {
            return Err(ClientHelloError::Malformed {
                what: "empty ALPN protocol name",
            });
        }
        names.push(name.to_vec());
    }
    Ok(names)
}
