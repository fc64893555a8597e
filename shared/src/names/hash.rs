//! The value of the `agents.x-k8s.io/sandbox-name-hash` label.
//!
//! The controller stamps this label on every Pod and Service it owns for a sandbox, and the
//! sandbox's headless Service and `status.selector` select on it. It must be the exact value the
//! upstream Go controller (`kubernetes-sigs/agent-sandbox`) computes, so that objects created by
//! either controller, and manifests or tools written against upstream, select the same pods.
//!
//! Upstream (`controllers/sandbox_controller.go`, functions `GetNumericHash` and `NameHash`)
//! hashes the bytes of the sandbox name with Go's `hash/fnv` 32-bit FNV-1a (`fnv.New32a`) and
//! writes the 32-bit sum as exactly eight lower-case hexadecimal digits, zero-padded (earlier
//! versions via `fmt.Sprintf("%08x", ..)`, later with a hand-unrolled hex table; same output).
//! There is no truncation, salt or namespace in the input. FNV-1a is tiny and stable, so it is
//! implemented here rather than pulled in as a dependency. The label key itself is
//! `api::keys::SANDBOX_NAME_HASH`.

/// FNV-1a 32-bit offset basis.
const FNV32_OFFSET_BASIS: u32 = 0x811c_9dc5;
/// FNV-1a 32-bit prime.
const FNV32_PRIME: u32 = 0x0100_0193;

/// The label value for a sandbox name: FNV-1a 32-bit of its UTF-8 bytes, as 8 lower-case hex digits.
///
/// # Example
/// ```
/// use rouse_shared::names::sandbox_name_hash;
///
/// assert_eq!(sandbox_name_hash("my-sandbox"), "374de8f5");
/// ```
pub fn sandbox_name_hash(name: &str) -> String {
    format!("{:08x}", fnv1a_32(name.as_bytes()))
}

/// FNV-1a 32-bit hash of `bytes` (upstream's `GetNumericHash`).
pub fn fnv1a_32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(FNV32_OFFSET_BASIS, |hash, &b| {
        (hash ^ u32::from(b)).wrapping_mul(FNV32_PRIME)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Case {
        name: &'static str,
        input: &'static str,
        want: &'static str,
    }

    /// Expected values were computed independently with a Python FNV-1a implementation
    /// (`h = 0x811c9dc5; for b in s.encode(): h = ((h ^ b) * 0x01000193) & 0xffffffff`,
    /// then `'%08x' % h`); `a` and `foobar` also match the published FNV test vectors.
    #[test]
    fn sandbox_name_hash_matches_upstream() {
        let cases = [
            Case {
                name: "empty",
                input: "",
                want: "811c9dc5",
            },
            Case {
                name: "one char",
                input: "a",
                want: "e40c292c",
            },
            Case {
                name: "fnv vector",
                input: "foobar",
                want: "bf9cf968",
            },
            Case {
                name: "upstream e2e name",
                input: "my-sandbox",
                want: "374de8f5",
            },
            Case {
                name: "plain name",
                input: "alice",
                want: "872213e7",
            },
            Case {
                name: "digits",
                input: "sandbox-0123456789",
                want: "458029d0",
            },
            Case {
                name: "zero padded",
                input: "sb-1141",
                want: "00106f32",
            },
            Case {
                name: "zero padded 2",
                input: "sb-2513",
                want: "00bffd4a",
            },
        ];
        for Case { name, input, want } in cases {
            let got = sandbox_name_hash(input);
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn hash_is_eight_hex_digits() {
        for input in [
            "",
            "x",
            "a-very-long-sandbox-name-that-is-still-a-valid-dns-label-0123",
        ] {
            let got = sandbox_name_hash(input);
            assert_eq!(got.len(), 8, "{input}");
            assert!(
                got.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
                "{input}"
            );
        }
    }
}
