//! Quoting of user input in messages: manifests are untrusted, and a key or value holding a
//! newline or a terminal escape must not forge an output line or reach a terminal raw.

/// Most characters of one user value shown in a message.
const MAX_SHOWN: usize = 80;

/// `s` with control characters escaped and cut to a readable length.
pub(super) fn clean(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_SHOWN + 8));
    for (i, c) in s.chars().enumerate() {
        if i == MAX_SHOWN {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// `s` cleaned and in double quotes, for quoting a value in a message.
pub(super) fn quote(s: &str) -> String {
    format!("\"{}\"", clean(s))
}

#[cfg(test)]
mod tests {
    use super::{clean, quote};

    #[test]
    fn escapes_and_truncates() {
        assert_eq!(quote("web"), "\"web\"");
        assert_eq!(clean("a\nok  Sandbox x"), "a\\nok  Sandbox x");
        assert_eq!(clean("\u{1b}[31mred"), "\\u{1b}[31mred");
        let long = "x".repeat(200);
        assert_eq!(clean(&long).chars().count(), 81);
        assert!(clean(&long).ends_with('…'));
    }
}
