//! What a failed upstream exchange of the full path means: the proxy's own error, the
//! client's (its request body failed: 400), a connection lost before any response (worth
//! sending a safe request again), or the sandbox's (502 naming what failed).

use std::error::Error as StdError;

use super::body::ClientBodyError;
use super::sticky::StickyError;
use crate::directory::SandboxKey;
use crate::error::ProxyError;

/// Whether the request failed because the upstream connection closed or reset before any
/// response — not a connect error (those went through hold-and-wake already) and not a
/// proxy decision.
pub(super) fn connection_lost(err: &(dyn StdError + 'static)) -> bool {
    if let Some(pool) = err.downcast_ref::<hyper_util::client::legacy::Error>()
        && pool.is_connect()
    {
        return false;
    }
    if let Some(StickyError::Connect(_)) = err.downcast_ref::<StickyError>() {
        return false;
    }
    let mut source: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = source {
        if e.downcast_ref::<ProxyError>().is_some() {
            return false;
        }
        if let Some(hyper) = e.downcast_ref::<hyper::Error>()
            && (hyper.is_incomplete_message() || hyper.is_canceled())
        {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
            return matches!(io.kind(), ConnectionReset | ConnectionAborted | BrokenPipe);
        }
        source = e.source();
    }
    false
}

/// The proxy error of a failed upstream exchange: the proxy's own error when there is one in
/// the chain, a 400 when the client's request body failed (bad chunked framing, a hang-up:
/// the client's fault, not the sandbox's), else a 502 naming what failed.
pub(super) fn classify(key: &SandboxKey, err: &(dyn StdError + 'static)) -> ProxyError {
    if let Some(StickyError::Connect(proxy)) = err.downcast_ref::<StickyError>() {
        return proxy.clone();
    }
    let mut source: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(proxy) = e.downcast_ref::<ProxyError>() {
            return proxy.clone();
        }
        if let Some(body) = e.downcast_ref::<ClientBodyError>() {
            return ProxyError::BadRequest(format!(
                "the request body could not be read: {}",
                chain(&body.0)
            ));
        }
        source = e.source();
    }
    ProxyError::UpstreamProtocol {
        key: key.clone(),
        message: chain(err),
    }
}

pub(super) fn chain(err: &dyn StdError) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}
