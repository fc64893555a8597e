//! TLS termination and L4 end to end: TLS passthrough by SNI, CONNECT tunnels, static TCP and
//! HTTPS with ALPN h2, against real backends on 127.0.0.1, including wakes of suspended
//! sandboxes and bad input that must not disturb other connections.

mod https;
mod passthrough;
mod support;
mod tunnels;
