//! Table output of `rouse get`: kubectl-like columns per kind, ages, aligned columns.

use rouse_controller::api::Kind;
use serde_json::Value;

/// The column headers of a kind's table.
pub fn headers(kind: Kind, wide: bool) -> Vec<&'static str> {
    let mut h = match kind {
        Kind::Sandbox => vec!["NAME", "READY", "REASON", "MODE", "AGE"],
        Kind::SandboxTemplate => vec!["NAME", "NETWORK POLICY", "AGE"],
        Kind::SandboxWarmPool => vec!["NAME", "READY", "DESIRED", "TEMPLATE", "AGE"],
        Kind::SandboxClaim => vec!["NAME", "READY", "SANDBOX", "REASON", "AGE"],
        Kind::SandboxSnapshot => vec!["NAME", "SANDBOX", "PHASE", "AGE"],
    };
    if wide {
        h.extend(match kind {
            Kind::Sandbox => &["POD IP", "ENDPOINT", "LAST ACTIVITY"][..],
            Kind::SandboxClaim => &["WARM POOL"][..],
            Kind::SandboxSnapshot => &["SIZE", "TAKEN"][..],
            Kind::SandboxTemplate | Kind::SandboxWarmPool => &[][..],
        });
    }
    h
}

/// One object's row, matching [`headers`].
pub fn row(kind: Kind, object: &Value, wide: bool, now: jiff::Timestamp) -> Vec<String> {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .map(|v| match v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "<none>".to_owned())
    };
    let ready =
        |field: &str| condition(object, "Ready", field).unwrap_or_else(|| "<none>".to_owned());
    let name = text("/metadata/name");
    let created = object
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .map_or_else(|| "<unknown>".to_owned(), |t| age(t, now));
    let mut r = match kind {
        Kind::Sandbox => vec![
            name,
            ready("status"),
            ready("reason"),
            object
                .pointer("/spec/operatingMode")
                .and_then(Value::as_str)
                .unwrap_or("Running")
                .to_owned(),
            created,
        ],
        Kind::SandboxTemplate => vec![
            name,
            object
                .pointer("/spec/networkPolicyManagement")
                .and_then(Value::as_str)
                .unwrap_or("Managed")
                .to_owned(),
            created,
        ],
        Kind::SandboxWarmPool => vec![
            name,
            object
                .pointer("/status/readyReplicas")
                .map_or_else(|| "0".to_owned(), Value::to_string),
            text("/spec/replicas"),
            text("/spec/sandboxTemplateRef/name"),
            created,
        ],
        Kind::SandboxClaim => vec![
            name,
            ready("status"),
            text("/status/sandbox/name"),
            ready("reason"),
            created,
        ],
        Kind::SandboxSnapshot => vec![
            name,
            text("/spec/sandboxName"),
            text("/status/phase"),
            created,
        ],
    };
    if wide {
        match kind {
            Kind::Sandbox => {
                let endpoint = object.pointer("/status/endpoint").map(|e| {
                    let address = e.get("address").and_then(Value::as_str).unwrap_or_default();
                    let ports: Vec<String> = e
                        .get("ports")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|p| p.get("port").map(Value::to_string))
                        .collect();
                    // A sandbox without declared ports has an address only.
                    if ports.is_empty() {
                        address.to_owned()
                    } else {
                        format!("{address}:{}", ports.join(","))
                    }
                });
                r.push(text("/status/podIPs/0"));
                r.push(endpoint.unwrap_or_else(|| "<none>".to_owned()));
                r.push(
                    object
                        .pointer("/status/lastActivityTime")
                        .and_then(Value::as_str)
                        .map_or_else(|| "<none>".to_owned(), |t| format!("{} ago", age(t, now))),
                );
            }
            Kind::SandboxClaim => r.push(text("/spec/warmPoolRef/name")),
            Kind::SandboxSnapshot => {
                r.push(text("/status/sizeBytes"));
                r.push(text("/status/takenAt"));
            }
            Kind::SandboxTemplate | Kind::SandboxWarmPool => {}
        }
    }
    r
}

/// A field (`status`, `reason`) of the condition of this type.
pub fn condition(object: &Value, kind: &str, field: &str) -> Option<String> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| {
            c.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.eq_ignore_ascii_case(kind))
        })?
        .get(field)?
        .as_str()
        .map(str::to_owned)
}

/// Time since an RFC 3339 timestamp, as kubectl prints ages (`45s`, `5m3s`, `3h`, `2d4h`).
pub fn age(time: &str, now: jiff::Timestamp) -> String {
    let Ok(then) = time.parse::<jiff::Timestamp>() else {
        return "<invalid>".to_owned();
    };
    let secs = (now.as_second() - then.as_second()).max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86_400);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{m}m{}s", s % 60),
        s if s < 3 * 3600 => format!("{m}m"),
        s if s < 8 * 3600 => format!("{h}h{}m", m % 60),
        s if s < 2 * 86_400 => format!("{h}h"),
        s if s < 8 * 86_400 => format!("{d}d{}h", h % 24),
        s if s < 365 * 86_400 => format!("{d}d"),
        _ => format!("{}y{}d", d / 365, d % 365),
    }
}

/// Prints rows under headers with columns padded by three spaces, as kubectl does.
pub fn print(headers: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}   "));
            }
        }
        println!("{}", out.trim_end());
    };
    line(headers.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

#[cfg(test)]
mod tests {
    use rouse_controller::api::Kind;
    use serde_json::json;

    use super::{age, row};

    #[test]
    fn the_wide_endpoint_of_a_portless_sandbox_is_its_address() {
        let now: jiff::Timestamp = "2026-01-10T12:00:00Z".parse().expect("time");
        let endpoint = |ports: serde_json::Value| {
            let sandbox = json!({
                "metadata": {"name": "a", "creationTimestamp": "2026-01-10T11:00:00Z"},
                "status": {"endpoint": {"address": "127.0.0.1", "ports": ports}},
            });
            let r = row(Kind::Sandbox, &sandbox, true, now);
            r[r.len() - 2].clone()
        };
        assert_eq!(endpoint(json!([])), "127.0.0.1");
        assert_eq!(
            endpoint(json!([{"containerPort": 80, "port": 4000}])),
            "127.0.0.1:4000"
        );
    }

    #[test]
    fn ages_like_kubectl() {
        let now: jiff::Timestamp = "2026-01-10T12:00:00Z".parse().expect("time");
        let cases = [
            ("2026-01-10T12:00:00Z", "0s"),
            ("2026-01-10T11:59:15Z", "45s"),
            ("2026-01-10T11:55:00Z", "5m0s"),
            ("2026-01-10T11:00:00Z", "60m"),
            ("2026-01-10T07:30:00Z", "4h30m"),
            ("2026-01-09T12:00:00Z", "24h"),
            ("2026-01-07T08:00:00Z", "3d4h"),
            ("2025-12-01T12:00:00Z", "40d"),
            ("2026-01-10T12:00:09Z", "0s"),
            ("garbage", "<invalid>"),
        ];
        for (time, want) in cases {
            assert_eq!(age(time, now), want, "{time}");
        }
    }
}
