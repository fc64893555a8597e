//! The subset of the DNS wire format (RFC 1035) the cluster DNS needs: one question of a
//! query read, an answer of A records or an empty one written. Compression pointers, EDNS
//! options and every other record type are not parsed: a question with a pointer is a format
//! error, additional records (an EDNS `OPT`) are ignored, and answers carry no `OPT`, which
//! RFC 6891 allows.

use std::net::Ipv4Addr;

/// The largest UDP message read or written without EDNS (RFC 1035 §4.2.1).
pub const MAX_UDP: usize = 512;
/// The largest message read or written over TCP here; queries are far smaller.
pub const MAX_TCP: usize = 4096;
/// Record type A.
pub const TYPE_A: u16 = 1;
/// Record type AAAA.
pub const TYPE_AAAA: u16 = 28;
/// Class IN.
pub const CLASS_IN: u16 = 1;

const HEADER: usize = 12;
const QR: u16 = 0x8000;
const AA: u16 = 0x0400;
const TC: u16 = 0x0200;
const RD: u16 = 0x0100;
/// Bytes of one A record whose name is a pointer to the question (offset 12).
const A_RECORD: usize = 2 + 2 + 2 + 4 + 2 + 4;

/// A response code (RFC 1035 §4.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rcode {
    /// The name exists (with or without records of the type asked).
    NoError = 0,
    /// The query could not be read.
    FormErr = 1,
    /// The server cannot answer now (its records are not loaded yet).
    ServFail = 2,
    /// The name does not exist.
    NxDomain = 3,
    /// An opcode other than QUERY.
    NotImp = 4,
    /// A name outside the served domain, or a class other than IN.
    Refused = 5,
}

/// A query's question, read from a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The message id, echoed.
    pub id: u16,
    /// Recursion desired, echoed.
    pub recursion_desired: bool,
    /// The name's labels, ASCII-lowercased, without the root label.
    pub labels: Vec<String>,
    /// The record type asked for.
    pub qtype: u16,
    /// The class asked for.
    pub qclass: u16,
    /// The question section as received, echoed in the answer.
    question: Vec<u8>,
}

/// Why a message gets no parsed [`Query`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreadable {
    /// Not answered at all: shorter than a header, or a response (answering a response could
    /// loop between two servers).
    Drop,
    /// Answered with this code and no question (the id and RD bit echoed).
    Reply {
        /// The message id.
        id: u16,
        /// The RD bit.
        recursion_desired: bool,
        /// `FormErr` or `NotImp`.
        rcode: Rcode,
    },
}

/// Reads the header and the single question of a query message.
pub fn parse_query(message: &[u8]) -> Result<Query, Unreadable> {
    if message.len() < HEADER {
        return Err(Unreadable::Drop);
    }
    let word = |at: usize| u16::from_be_bytes([message[at], message[at + 1]]);
    let (id, flags) = (word(0), word(2));
    if flags & QR != 0 {
        return Err(Unreadable::Drop);
    }
    let recursion_desired = flags & RD != 0;
    let reply = |rcode| Unreadable::Reply {
        id,
        recursion_desired,
        rcode,
    };
    if (flags >> 11) & 0xf != 0 {
        return Err(reply(Rcode::NotImp));
    }
    // Exactly one question, no answers or authority; additional records (EDNS) are ignored.
    if word(4) != 1 || word(6) != 0 || word(8) != 0 {
        return Err(reply(Rcode::FormErr));
    }
    let mut at = HEADER;
    let mut labels = Vec::new();
    let mut name_len = 0usize;
    loop {
        let len = usize::from(*message.get(at).ok_or(reply(Rcode::FormErr))?);
        at += 1;
        if len == 0 {
            break;
        }
        // 0xC0: a compression pointer, 0x40/0x80: reserved label types; none in a question.
        if len > 63 {
            return Err(reply(Rcode::FormErr));
        }
        name_len += len + 1;
        if name_len > 255 {
            return Err(reply(Rcode::FormErr));
        }
        let label = message.get(at..at + len).ok_or(reply(Rcode::FormErr))?;
        labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
        at += len;
    }
    if message.len() < at + 4 {
        return Err(reply(Rcode::FormErr));
    }
    Ok(Query {
        id,
        recursion_desired,
        labels,
        qtype: word(at),
        qclass: word(at + 2),
        question: message[HEADER..at + 4].to_vec(),
    })
}

/// The answer to `query`: `rcode`, and one A record per address with `ttl` seconds (for a
/// `NoError` to an A question). Records that do not fit in `limit` bytes are left out and the
/// TC bit set, so a UDP client asks again over TCP. Authoritative for every code but
/// `Refused` and `ServFail`.
pub fn answer(
    query: &Query,
    rcode: Rcode,
    addresses: &[Ipv4Addr],
    ttl: u32,
    limit: usize,
) -> Vec<u8> {
    let room = limit.saturating_sub(HEADER + query.question.len()) / A_RECORD;
    let fit = addresses.len().min(room);
    let mut flags = QR | rcode as u16;
    if query.recursion_desired {
        flags |= RD;
    }
    if !matches!(rcode, Rcode::Refused | Rcode::ServFail) {
        flags |= AA;
    }
    if fit < addresses.len() {
        flags |= TC;
    }
    let mut out = Vec::with_capacity(HEADER + query.question.len() + fit * A_RECORD);
    header(
        &mut out,
        query.id,
        flags,
        1,
        u16::try_from(fit).unwrap_or(u16::MAX),
    );
    out.extend_from_slice(&query.question);
    for address in &addresses[..fit] {
        // The name: a pointer to the question's name, right after the header.
        out.extend_from_slice(&[0xc0, HEADER as u8]);
        out.extend_from_slice(&TYPE_A.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&ttl.to_be_bytes());
        out.extend_from_slice(&4u16.to_be_bytes());
        out.extend_from_slice(&address.octets());
    }
    out
}

/// The answer to an [`Unreadable::Reply`]: its code, no question.
pub fn error_reply(id: u16, recursion_desired: bool, rcode: Rcode) -> Vec<u8> {
    let mut flags = QR | rcode as u16;
    if recursion_desired {
        flags |= RD;
    }
    let mut out = Vec::with_capacity(HEADER);
    header(&mut out, id, flags, 0, 0);
    out
}

fn header(out: &mut Vec<u8>, id: u16, flags: u16, questions: u16, answers: u16) {
    for word in [id, flags, questions, answers, 0, 0] {
        out.extend_from_slice(&word.to_be_bytes());
    }
}

/// A query message for `name` (dotted, no trailing dot needed) of type `qtype`, class IN:
/// what a stub resolver sends. For tests and probes.
pub fn query_message(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + name.len() + 6);
    header(&mut out, id, RD, 1, 0);
    for label in name
        .trim_end_matches('.')
        .split('.')
        .filter(|l| !l.is_empty())
    {
        out.push(label.len().min(63) as u8);
        out.extend_from_slice(&label.as_bytes()[..label.len().min(63)]);
    }
    out.push(0);
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    out
}

/// An answer read back: for tests and probes of the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The message id.
    pub id: u16,
    /// The response code.
    pub rcode: Rcode,
    /// The AA bit.
    pub authoritative: bool,
    /// The TC bit.
    pub truncated: bool,
    /// The A records' addresses and TTLs.
    pub addresses: Vec<(Ipv4Addr, u32)>,
}

/// Reads an answer this module wrote (names as pointers, A records only); `None` when it is
/// not one.
pub fn parse_reply(message: &[u8]) -> Option<Reply> {
    let word = |at: usize| -> Option<u16> {
        Some(u16::from_be_bytes([
            *message.get(at)?,
            *message.get(at + 1)?,
        ]))
    };
    let flags = word(2)?;
    if flags & QR == 0 {
        return None;
    }
    let rcode = match flags & 0xf {
        0 => Rcode::NoError,
        1 => Rcode::FormErr,
        2 => Rcode::ServFail,
        3 => Rcode::NxDomain,
        4 => Rcode::NotImp,
        5 => Rcode::Refused,
        _ => return None,
    };
    let mut at = HEADER;
    for _ in 0..word(4)? {
        while *message.get(at)? != 0 {
            at += usize::from(*message.get(at)?) + 1;
        }
        at += 5;
    }
    let mut addresses = Vec::new();
    for _ in 0..word(6)? {
        let ttl = u32::from(word(at + 6)?) << 16 | u32::from(word(at + 8)?);
        if word(at + 2)? != TYPE_A || word(at + 10)? != 4 {
            return None;
        }
        let octets: [u8; 4] = message.get(at + 12..at + 16)?.try_into().ok()?;
        addresses.push((Ipv4Addr::from(octets), ttl));
        at += A_RECORD;
    }
    Some(Reply {
        id: word(0)?,
        rcode,
        authoritative: flags & AA != 0,
        truncated: flags & TC != 0,
        addresses,
    })
}
