//! Deserializers for the value forms the config file uses: `"250ms"` durations, `"off"`, and
//! `namespace/name` sandbox keys.

use std::net::SocketAddr;
use std::time::Duration;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

use rouse_shared::store::ObjectKey as SandboxKey;

/// The word that turns a listener or an optional timeout off.
const OFF: &str = "off";

/// A duration written like `250ms`, `5s`, `1m 30s`.
pub(super) fn duration<'de, D: Deserializer<'de>>(de: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(de)?;
    parse_duration(&text).map_err(D::Error::custom)
}

/// A duration, or `"off"` for none.
pub(super) fn optional_duration<'de, D: Deserializer<'de>>(
    de: D,
) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(de)?;
    if text.trim() == OFF {
        return Ok(None);
    }
    parse_duration(&text).map(Some).map_err(D::Error::custom)
}

/// A socket address like `127.0.0.1:8080` or `[::]:443`, or `"off"` for none.
pub(super) fn listen<'de, D: Deserializer<'de>>(de: D) -> Result<Option<SocketAddr>, D::Error> {
    let text = String::deserialize(de)?;
    if text.trim() == OFF {
        return Ok(None);
    }
    text.trim().parse().map(Some).map_err(|_| {
        D::Error::custom(format!(
            "{text:?} is not a socket address (like \"127.0.0.1:8080\" or \"[::]:443\") or \"off\""
        ))
    })
}

/// A sandbox written `namespace/name`.
pub(super) fn sandbox_key<'de, D: Deserializer<'de>>(de: D) -> Result<SandboxKey, D::Error> {
    let text = String::deserialize(de)?;
    parse_sandbox_key(&text).map_err(D::Error::custom)
}

/// Parses `namespace/name` (both non-empty, no further `/`).
pub(crate) fn parse_sandbox_key(text: &str) -> Result<SandboxKey, String> {
    match text.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(SandboxKey::new(ns, name))
        }
        _ => Err(format!("{text:?} is not a sandbox as \"namespace/name\"")),
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|err| {
        format!("{text:?} is not a duration like \"250ms\", \"5s\" or \"1m\": {err}")
    })
}
