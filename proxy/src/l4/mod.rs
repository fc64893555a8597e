//! Layer 4: TLS passthrough routed by SNI, HTTP CONNECT tunnels and static TCP listeners.

pub mod sni;
pub mod splice;
