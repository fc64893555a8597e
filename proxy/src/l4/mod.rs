//! L4: connections proxied as byte streams — HTTP CONNECT tunnels, TLS passthrough by SNI and
//! static TCP listeners.

pub mod connect;
