//! Property-style test: formatting a sandbox host and parsing it back gives the same sandbox.

use super::*;

/// A small deterministic generator (xorshift64), so the property test needs no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A random valid DNS label; one in four looks like a port prefix (`123-abc`).
    fn label(&mut self) -> String {
        const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        const INNER: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-";
        if self.below(4) == 0 {
            return format!("{}-{}", self.below(100_000), self.short_word());
        }
        let len = 1 + self.below(63) as usize;
        (0..len)
            .map(|i| {
                let set = if i == 0 || i + 1 == len { ALNUM } else { INNER };
                char::from(set[self.below(set.len() as u64) as usize])
            })
            .collect()
    }

    fn short_word(&mut self) -> String {
        (0..1 + self.below(8))
            .map(|_| char::from(b'a' + self.below(26) as u8))
            .collect()
    }
}

#[test]
fn format_then_parse_round_trips() {
    let long_domain = format!("{}.{}", "d".repeat(62), "e".repeat(62));
    let all = domains(&[D, "eu.sandbox.localhost", &long_domain], Some("default"));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut formatted, mut refused) = (0, 0);
    for i in 0..5_000 {
        let want = SandboxHost {
            namespace: rng.label(),
            name: rng.label(),
            port: match rng.below(3) {
                0 => None,
                _ => Some(1 + rng.below(65_535) as u16),
            },
        };
        let domain = [
            "sandbox.localhost",
            "eu.sandbox.localhost",
            long_domain.as_str(),
        ][i % 3];
        // With overlapping domains `x.eu.sandbox.localhost` belongs to the longer one; skip the
        // (rare) triples that would be ambiguous, the overlap has its own test.
        if domain == D && (want.namespace == "eu" || want.name == "eu") {
            continue;
        }
        let Some(host) = want.to_host(domain) else {
            refused += 1;
            let port_shaped = want.port.is_none()
                && want.name.split('-').next().is_some_and(|p| {
                    !p.is_empty()
                        && p.bytes().all(|b| b.is_ascii_digit())
                        && want.name.len() > p.len()
                });
            let prefix = want.port.map_or(0, |p| p.to_string().len() + 1);
            let len = prefix + want.name.len() + want.namespace.len() + domain.len() + 2;
            let too_long = len > MAX_HOST_LEN || prefix + want.name.len() > MAX_LABEL_LEN;
            assert!(port_shaped || too_long, "to_host refused {want:?}");
            continue;
        };
        formatted += 1;
        for variant in [host.clone(), host.to_ascii_uppercase(), format!("{host}.")] {
            assert_eq!(all.parse(&variant), Ok(want.clone()), "{variant}");
        }
        let short = match want.port {
            Some(port) => format!("{port}-{}.{domain}", want.name),
            None => format!("{}.{domain}", want.name),
        };
        let want_short = SandboxHost {
            namespace: "default".into(),
            ..want.clone()
        };
        assert_eq!(all.parse(&short), Ok(want_short), "{short}");
    }
    assert!(
        formatted > 3_000 && refused > 100,
        "formatted {formatted}, refused {refused}"
    );
}
