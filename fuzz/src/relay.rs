//! The `http_relay` target's checks: what must hold of the HTTP/1.1 relay's parsers
//! (`rouse_proxy::l7::relay`) for any bytes a client or a sandbox sends. Besides no panic,
//! every head the relay forwards parses again as one whole head with the forwarding rules
//! applied, and a chunked body's end does not depend on how its bytes arrive.

use rouse_proxy::l7::relay::chunked::Chunked;
use rouse_proxy::l7::relay::request::{self, BODY_LIMIT, Forwarded, Parsed};
use rouse_proxy::l7::relay::response::{self, Framing, HEAD_LIMIT, Invalid};

use super::chunked_grammar::Reference;

/// Most messages followed through one input (pipelined requests, 1xx before a response).
const MAX_MESSAGES: usize = 16;
/// Room for the headers of a rewritten head: the relay's 100 and the few it adds.
const REPARSE_HEADERS: usize = 110;
/// Headers that describe one hop: never in a head the relay writes (but the `Connection:
/// close` it adds to a response, and a response's `Transfer-Encoding`, checked apart).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
];

/// The input's first byte: how the client connection looks; the next two: where a chunked
/// body is split; the rest: the bytes read from the client and, separately, from the sandbox.
pub struct Input<'a> {
    /// Upstream router headers honoured (bit 0).
    pub router_headers: bool,
    /// `https` (bit 1).
    pub https: bool,
    /// The request was `HEAD` (bit 2, for responses).
    pub head_method: bool,
    /// The client connection closes after the response (bit 3).
    pub close: bool,
    /// Where chunked bodies are split in two.
    pub split: usize,
    /// The bytes.
    pub bytes: &'a [u8],
}

impl<'a> Input<'a> {
    /// Splits the fuzzer's input; `None` when it is too short to hold the control bytes.
    pub fn new(data: &'a [u8]) -> Option<Self> {
        let (&[flags, lo, hi], bytes) = data.split_first_chunk::<3>()?;
        Some(Self {
            router_headers: flags & 1 != 0,
            https: flags & 2 != 0,
            head_method: flags & 4 != 0,
            close: flags & 8 != 0,
            split: usize::from(u16::from_le_bytes([lo, hi])),
            bytes,
        })
    }
}

/// The bytes as a client's: each pipelined request head the relay forwards, checked.
pub fn requests(input: &Input<'_>) {
    let forwarded = Forwarded {
        client: if input.https {
            "2001:db8::7"
        } else {
            "192.0.2.7"
        }
        .to_owned(),
        proto: if input.https { "https" } else { "http" },
        router_headers: input.router_headers,
    };
    let mut out = Vec::new();
    let mut rest = input.bytes;
    for _ in 0..MAX_MESSAGES {
        let Parsed::Ready(head) = request::prepare(rest, &forwarded, &mut out) else {
            return;
        };
        assert!(head.len <= rest.len(), "the head lies within the input");
        assert!(
            head.host.start < head.host.end && head.host.end <= head.len,
            "the host lies within the head"
        );
        assert!(head.body <= BODY_LIMIT, "the body is bounded");
        check_request(
            &rest[..head.len],
            &rest[head.host.clone()],
            &forwarded,
            &out,
        );
        let mut again = Vec::new();
        let cut = request::prepare(&rest[..head.len], &forwarded, &mut again);
        assert_eq!(
            cut,
            Parsed::Ready(head.clone()),
            "no byte past the head counts"
        );
        assert_eq!(again, out, "the same rewritten head");
        let Some(next) = usize::try_from(head.body)
            .ok()
            .and_then(|body| rest.get(head.len + body..))
        else {
            return;
        };
        rest = next;
    }
}

/// A rewritten request head: one whole head, the request line kept, one host, exactly one of
/// each forwarding header with the relay's values, no hop-by-hop header.
fn check_request(original: &[u8], host: &[u8], forwarded: &Forwarded, out: &[u8]) {
    let mut headers = [httparse::EMPTY_HEADER; REPARSE_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let parsed = req.parse(out);
    assert_eq!(
        parsed,
        Ok(httparse::Status::Complete(out.len())),
        "the rewritten head is one whole head: {:?}",
        String::from_utf8_lossy(out)
    );
    let mut first = [httparse::EMPTY_HEADER; REPARSE_HEADERS];
    let mut before = httparse::Request::new(&mut first);
    assert!(before.parse(original).is_ok(), "the relay read this head");
    assert_eq!(
        (req.method, req.path, req.version),
        (before.method, before.path, Some(1)),
        "request line kept, as HTTP/1.1"
    );
    let values = |name: &str| -> Vec<&[u8]> {
        req.headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
            .collect()
    };
    assert_eq!(values("host"), [host], "one host, the client's");
    assert_eq!(values("x-forwarded-host"), [host]);
    assert_eq!(values("x-forwarded-proto"), [forwarded.proto.as_bytes()]);
    let xff = values("x-forwarded-for");
    assert_eq!(xff.len(), 1, "one x-forwarded-for");
    assert!(
        xff[0].ends_with(forwarded.client.as_bytes()),
        "the client's address last"
    );
    assert!(values("content-length").len() <= 1, "one content-length");
    for name in HOP_BY_HOP.iter().chain(&["transfer-encoding", "expect"]) {
        assert!(values(name).is_empty(), "{name} is not forwarded");
    }
    if forwarded.router_headers {
        assert!(values("x-sandbox-id").is_empty() && values("x-sandbox-timeout").is_empty());
    }
}

/// The bytes as a sandbox's: response heads (informational ones first) and their bodies, as
/// far as their framing says, each head checked; a chunked body's end checked by [`chunked`].
pub fn responses(input: &Input<'_>) {
    let mut out = Vec::new();
    let mut rest = input.bytes;
    for _ in 0..MAX_MESSAGES {
        let head = match response::prepare(rest, input.head_method, input.close, &mut out) {
            Ok(Some(head)) => head,
            Ok(None) => {
                assert!(rest.len() < HEAD_LIMIT, "a partial head is under the limit");
                return;
            }
            Err(Invalid::TooLarge) => {
                assert!(rest.len() >= HEAD_LIMIT, "too large only past the limit");
                return;
            }
            Err(_) => return,
        };
        assert!(head.len <= rest.len(), "the head lies within the input");
        check_response(&rest[..head.len], input, &head, &out);
        let mut again = Vec::new();
        let cut = response::prepare(
            &rest[..head.len],
            input.head_method,
            input.close,
            &mut again,
        );
        assert_eq!(cut, Ok(Some(head.clone())), "no byte past the head counts");
        assert_eq!(again, out, "the same rewritten head");
        let body = &rest[head.len..];
        let taken = match head.framing {
            Framing::Empty => Some(0),
            Framing::Length(n) => usize::try_from(n).ok().filter(|&n| n <= body.len()),
            Framing::Chunked => chunked(body, input.split),
            Framing::UntilClose => None,
        };
        let Some(taken) = taken else {
            return;
        };
        rest = &body[taken..];
    }
}

/// A rewritten response head: one whole head, the status kept, no hop-by-hop header but the
/// `Connection: close` added when either connection closes after it, framing headers that
/// say what the framing found.
fn check_response(original: &[u8], input: &Input<'_>, head: &response::Head, out: &[u8]) {
    let mut headers = [httparse::EMPTY_HEADER; REPARSE_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let parsed = resp.parse(out);
    assert_eq!(
        parsed,
        Ok(httparse::Status::Complete(out.len())),
        "the rewritten head is one whole head: {:?}",
        String::from_utf8_lossy(out)
    );
    assert_eq!((resp.code, resp.version), (Some(head.status), Some(1)));
    let values = |name: &str| -> Vec<&[u8]> {
        resp.headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
            .collect()
    };
    let informational = (100..200).contains(&head.status);
    let closes = (input.close || head.framing == Framing::UntilClose) && !informational;
    let connection: &[&[u8]] = if closes { &[b"close"] } else { &[] };
    assert_eq!(values("connection"), connection, "only the relay's close");
    for name in &HOP_BY_HOP[1..] {
        assert!(values(name).is_empty(), "{name} is not forwarded");
    }
    let informational = (100..200).contains(&head.status);
    let empty = input.head_method || informational || head.status == 204 || head.status == 304;
    assert_eq!(
        head.framing == Framing::Empty,
        empty,
        "no body exactly when"
    );
    match head.framing {
        Framing::Length(n) => {
            let lengths = values("content-length");
            assert!(!lengths.is_empty(), "a length is said");
            for value in lengths {
                let said = std::str::from_utf8(value.trim_ascii()).ok();
                assert_eq!(said.and_then(|s| s.parse::<u64>().ok()), Some(n));
            }
        }
        Framing::Chunked => {
            assert!(values("content-length").is_empty(), "chunked wins");
            assert!(!values("transfer-encoding").is_empty(), "chunked is said");
        }
        Framing::UntilClose => assert!(head.upstream_closes, "the sandbox ends the body"),
        Framing::Empty => {}
    }
    // Headers the sandbox's `Connection` named are hop-by-hop too (framing headers stay
    // with the body they describe).
    let mut first = [httparse::EMPTY_HEADER; REPARSE_HEADERS];
    let mut before = httparse::Response::new(&mut first);
    assert!(before.parse(original).is_ok(), "the relay read this head");
    let named = before
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .flat_map(|h| h.value.split(|b| *b == b','))
        .map(<[u8]>::trim_ascii);
    for option in named {
        // `close` and `keep-alive` are options, not names (RFC 9110 reserves `Close`).
        let not_names = [
            &b""[..],
            b"close",
            b"keep-alive",
            b"connection",
            b"content-length",
            b"transfer-encoding",
        ];
        if not_names.iter().any(|f| option.eq_ignore_ascii_case(f)) {
            continue;
        }
        let kept = resp
            .headers
            .iter()
            .any(|h| h.name.as_bytes().eq_ignore_ascii_case(option));
        assert!(
            !kept,
            "{:?} named by Connection",
            String::from_utf8_lossy(option)
        );
    }
}

/// Scans `body` as a chunked body three ways — whole, in two pieces split at `split`, a byte
/// at a time — and checks they agree; the bytes of the body when its end was found.
pub fn chunked(body: &[u8], split: usize) -> Option<usize> {
    let mut whole = Chunked::new();
    let result = whole.scan(body).map(|n| (n, whole.is_done()));
    let expected = match result {
        Ok((n, true)) => {
            assert!(n <= body.len() && n > 0, "the end lies within the bytes");
            assert_eq!(body[n - 1], b'\n', "a chunked body ends with a line end");
            Ok(Some(n))
        }
        Ok((n, false)) => {
            assert_eq!(n, body.len(), "all bytes belong to an unfinished body");
            Ok(None)
        }
        Err(_) => Err(()),
    };
    let reference = Reference::read(body);
    if let Ok(end) = expected {
        assert_eq!(
            reference.end,
            Ok(end),
            "the relay accepts what the grammar does"
        );
    }
    if reference.within_bounds() {
        assert_eq!(
            expected,
            reference.end.map_err(|_| ()),
            "within bounds, as the grammar"
        );
    }
    let split = split % (body.len() + 1);
    let in_two = scan_pieces(&[&body[..split], &body[split..]]);
    assert_eq!(in_two, expected, "split at {split}");
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(scan_pieces(&bytes), expected, "a byte at a time");
    expected.ok().flatten()
}

/// Scans `pieces` one after the other until the end: the bytes of the body when found.
fn scan_pieces(pieces: &[&[u8]]) -> Result<Option<usize>, ()> {
    let mut scan = Chunked::new();
    let mut total = 0;
    for piece in pieces {
        let n = scan.scan(piece).map_err(|_| ())?;
        assert!(n <= piece.len(), "no more bytes taken than given");
        total += n;
        if scan.is_done() {
            return Ok(Some(total));
        }
        assert_eq!(n, piece.len(), "an unfinished body takes every byte");
    }
    Ok(None)
}
