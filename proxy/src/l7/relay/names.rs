//! Header names and values as the relay reads them from raw heads: names compared without
//! regard to case and without building `HeaderName`s, `Content-Length` and `Connection`
//! values parsed strictly.

/// What a header is to the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Name {
    /// `Host`.
    Host,
    /// `Content-Length`.
    ContentLength,
    /// `Transfer-Encoding`.
    TransferEncoding,
    /// `Connection`.
    Connection,
    /// `Upgrade`.
    Upgrade,
    /// `Expect`.
    Expect,
    /// Another hop-by-hop header (RFC 9110 §7.6.1): `Keep-Alive`, `Proxy-Connection`,
    /// `Proxy-Authenticate`, `Proxy-Authorization`, `TE`, `Trailer`.
    HopByHop,
    /// `X-Forwarded-For`.
    ForwardedFor,
    /// `X-Forwarded-Proto`.
    ForwardedProto,
    /// `X-Forwarded-Host`.
    ForwardedHost,
    /// `X-Sandbox-ID` or `X-Sandbox-Timeout`: a request routed or bounded by a router in front.
    RouterHeader,
    /// Any other header: end to end.
    Other,
}

/// What `name` is; one comparison per candidate of the same length.
pub(crate) fn classify(name: &str) -> Name {
    let is = |candidate: &str| name.eq_ignore_ascii_case(candidate);
    match name.len() {
        2 if is("te") => Name::HopByHop,
        4 if is("host") => Name::Host,
        6 if is("expect") => Name::Expect,
        7 if is("upgrade") => Name::Upgrade,
        7 if is("trailer") => Name::HopByHop,
        10 if is("connection") => Name::Connection,
        10 if is("keep-alive") => Name::HopByHop,
        12 if is("x-sandbox-id") => Name::RouterHeader,
        14 if is("content-length") => Name::ContentLength,
        15 if is("x-forwarded-for") => Name::ForwardedFor,
        16 if is("x-forwarded-host") => Name::ForwardedHost,
        16 if is("proxy-connection") => Name::HopByHop,
        17 if is("transfer-encoding") => Name::TransferEncoding,
        17 if is("x-forwarded-proto") => Name::ForwardedProto,
        17 if is("x-sandbox-timeout") => Name::RouterHeader,
        18 if is("proxy-authenticate") => Name::HopByHop,
        19 if is("proxy-authorization") => Name::HopByHop,
        _ => Name::Other,
    }
}

/// A `Content-Length` value: digits only (RFC 9110 §8.6), at most 18 of them so it fits.
pub(crate) fn content_length(value: &[u8]) -> Option<u64> {
    let value = value.trim_ascii();
    if value.is_empty() || value.len() > 18 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        value
            .iter()
            .fold(0_u64, |n, d| n * 10 + u64::from(d - b'0')),
    )
}

/// The options of a `Connection` header value.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionOptions {
    /// `close`.
    pub(crate) close: bool,
    /// `keep-alive`.
    pub(crate) keep_alive: bool,
    /// Anything else: an upgrade or the name of a header that is hop-by-hop on this message.
    pub(crate) other: bool,
}

/// Reads the options of one `Connection` header value.
pub(crate) fn connection_options(value: &[u8]) -> ConnectionOptions {
    let mut options = ConnectionOptions::default();
    for token in value.split(|b| *b == b',').map(<[u8]>::trim_ascii) {
        if token.is_empty() {
            continue;
        }
        if token.eq_ignore_ascii_case(b"close") {
            options.close = true;
        } else if token.eq_ignore_ascii_case(b"keep-alive") {
            options.keep_alive = true;
        } else {
            options.other = true;
        }
    }
    options
}

/// Whether a `Connection` value names `header` (an option naming a hop-by-hop header).
pub(crate) fn names_header(value: &[u8], header: &str) -> bool {
    value
        .split(|b| *b == b',')
        .any(|token| token.trim_ascii().eq_ignore_ascii_case(header.as_bytes()))
}

/// Appends `name: value` and its line end.
pub(crate) fn write_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The relay drops the same hop-by-hop headers as the full path (`headers.rs`).
    #[test]
    fn every_hop_by_hop_name_of_the_full_path_is_one_here() {
        for name in crate::l7::headers::hop_names() {
            let upper = name.to_ascii_uppercase();
            let kind = classify(&upper);
            assert!(
                !matches!(kind, Name::Other | Name::Host | Name::ContentLength),
                "{name}: {kind:?}"
            );
        }
        assert_eq!(classify("X-Kept"), Name::Other);
        assert_eq!(classify("HOST"), Name::Host);
    }

    #[test]
    fn parses_content_length_strictly() {
        assert_eq!(content_length(b" 42 "), Some(42));
        assert_eq!(content_length(b"0"), Some(0));
        for bad in [
            &b""[..],
            b"+1",
            b"-1",
            b"1,1",
            b"0x10",
            b"1 2",
            b"9999999999999999999",
        ] {
            assert_eq!(content_length(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn reads_connection_options() {
        let options = connection_options(b"Keep-Alive, CLOSE");
        assert!(options.close && options.keep_alive && !options.other);
        assert!(connection_options(b"upgrade").other);
        assert!(!connection_options(b" , ").other);
        assert!(names_header(b"close, X-Private", "x-private"));
        assert!(!names_header(b"close", "x-private"));
    }
}
