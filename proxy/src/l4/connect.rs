//! HTTP `CONNECT host:port` tunnels to sandboxes.
//!
//! Tunnelling is not served yet: every CONNECT request gets 501 Not Implemented.

use std::net::SocketAddr;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;

use crate::l7::ProxyBody;
use crate::route::Router;

/// Answers a CONNECT request received on an L7 listener.
pub async fn handle(
    _router: Router,
    _req: Request<Incoming>,
    _peer: SocketAddr,
) -> Response<ProxyBody> {
    crate::l7::text_response(
        StatusCode::NOT_IMPLEMENTED,
        "CONNECT tunnels are not served by this proxy\n".to_owned(),
    )
}
