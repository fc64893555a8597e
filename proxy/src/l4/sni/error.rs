//! Why a ClientHello was rejected, with a fixed metric label per reason.

use std::io;

use super::MAX_RECORD_PAYLOAD;

/// Why a ClientHello was rejected or could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClientHelloError {
    /// The first byte is not a TLS handshake record.
    #[error("not a TLS handshake (first byte {first:#04x})")]
    NotTls {
        /// The first byte received.
        first: u8,
    },
    /// An SSL 2.0 ClientHello, which no supported TLS version accepts.
    #[error("SSL 2.0 client hello is not supported")]
    Sslv2,
    /// A record names a protocol version other than SSL 3.0 / TLS 1.x.
    #[error("unsupported record version {major}.{minor}")]
    RecordVersion {
        /// Major version byte.
        major: u8,
        /// Minor version byte.
        minor: u8,
    },
    /// A record is longer than TLS allows for plaintext.
    #[error("TLS record of {len} bytes exceeds the {MAX_RECORD_PAYLOAD} byte limit")]
    RecordTooLarge {
        /// The declared record length.
        len: usize,
    },
    /// A record other than a handshake arrived before the ClientHello was complete.
    #[error("unexpected record type {content_type} before the client hello was complete")]
    UnexpectedRecord {
        /// The record's content type.
        content_type: u8,
    },
    /// The first handshake message is not a ClientHello.
    #[error("first handshake message has type {handshake_type}, not client hello")]
    NotClientHello {
        /// The handshake message type received.
        handshake_type: u8,
    },
    /// A length or field of the ClientHello is inconsistent.
    #[error("malformed client hello: {what}")]
    Malformed {
        /// Which field or rule was broken.
        what: &'static str,
    },
    /// The server name extension names something other than a host name.
    #[error("server name of type {name_type} is not a host name")]
    NameNotHostname {
        /// The name type received (0 is host name).
        name_type: u8,
    },
    /// The server name is not a valid DNS host name.
    #[error("server name is not a valid DNS host name: {reason}")]
    InvalidName {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The ClientHello would be larger than the configured bound.
    #[error("client hello larger than {max} bytes")]
    TooLarge {
        /// The bound in bytes.
        max: usize,
    },
    /// The client did not send a complete ClientHello before the deadline.
    #[error("timed out waiting for the client hello")]
    Timeout,
    /// The client closed the connection before a complete ClientHello.
    #[error("connection closed before the client hello was complete")]
    Closed,
    /// Reading the socket failed.
    #[error("reading the client hello: {0}")]
    Io(#[source] io::Error),
}

impl ClientHelloError {
    /// A fixed label for the `reason` of `rouse_proxy_tls_rejected_total`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::NotTls { .. } => "not_tls",
            Self::Sslv2 => "sslv2",
            Self::RecordVersion { .. }
            | Self::RecordTooLarge { .. }
            | Self::UnexpectedRecord { .. }
            | Self::NotClientHello { .. }
            | Self::Malformed { .. } => "malformed",
            Self::NameNotHostname { .. } | Self::InvalidName { .. } => "invalid_sni",
            Self::TooLarge { .. } => "too_large",
            Self::Timeout => "timeout",
            Self::Closed => "closed",
            Self::Io(_) => "io",
        }
    }
}
