//! Kubernetes quantities (`1Gi`, `500M`, `1.5Gi`, `1e9`) as whole bytes, for the sizes CSI
//! drivers report in `VolumeSnapshot.status.restoreSize`.

/// The value of a quantity in whole bytes, rounded up as the API server's `Value()` does;
/// `None` for text that is no quantity, a negative one, or one beyond `u64`.
pub fn bytes(quantity: &str) -> Option<u64> {
    let q = quantity.trim();
    let q = q.strip_prefix('+').unwrap_or(q);
    let end = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    // value = digits / 10^scale * multiplier, all in integers.
    let digits: u128 = format!("{whole}{fraction}").parse().ok()?;
    let mut scale = u32::try_from(fraction.len()).ok()?;
    let mut multiplier: u128 = 1;
    match suffix {
        "" => {}
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            let power = match suffix {
                "Ki" => 1,
                "Mi" => 2,
                "Gi" => 3,
                "Ti" => 4,
                "Pi" => 5,
                _ => 6,
            };
            multiplier = 1024u128.pow(power);
        }
        "k" => multiplier = 10u128.pow(3),
        "M" => multiplier = 10u128.pow(6),
        "G" => multiplier = 10u128.pow(9),
        "T" => multiplier = 10u128.pow(12),
        "P" => multiplier = 10u128.pow(15),
        "E" => multiplier = 10u128.pow(18),
        "m" => scale += 3,
        "u" => scale += 6,
        "n" => scale += 9,
        exponent => {
            let e = exponent.strip_prefix(['e', 'E'])?;
            let e: i32 = e.parse().ok()?;
            if e >= 0 {
                multiplier = 10u128.checked_pow(u32::try_from(e).ok()?)?;
            } else {
                scale += e.unsigned_abs();
            }
        }
    }
    let value = digits.checked_mul(multiplier)?;
    let divisor = 10u128.checked_pow(scale)?;
    u64::try_from(value.div_ceil(divisor)).ok()
}

#[cfg(test)]
mod tests {
    use super::bytes;

    #[test]
    fn quantities_in_bytes() {
        for (text, want) in [
            ("0", Some(0)),
            ("1024", Some(1024)),
            ("1Ki", Some(1024)),
            ("1Gi", Some(1 << 30)),
            ("1.5Gi", Some(3 << 29)),
            ("10G", Some(10_000_000_000)),
            ("500M", Some(500_000_000)),
            ("1e3", Some(1000)),
            ("1500m", Some(2)),
            ("+2k", Some(2000)),
            ("", None),
            ("-1Gi", None),
            ("10GB", None),
            ("Gi", None),
            ("99999Ei", None),
        ] {
            assert_eq!(bytes(text), want, "{text}");
        }
    }
}
