//! Kubernetes name rules: DNS-1123 labels and subdomains, DNS-1035 labels, and the qualified
//! names used as label and annotation keys.
//!
//! Rouse stores the same objects as the Kubernetes API server, so a name that Rouse accepts must
//! be one the API server would accept too (and the other way round). The checks mirror
//! `k8s.io/apimachinery/pkg/util/validation` but are written by hand instead of with regular
//! expressions: they run on every object write, report the first offending character and its
//! position, and need no regex engine.

/// What a name check rejected; its `Display` text is meant for the user who chose the name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name (or the named part of it) is empty.
    #[error("{}must not be empty", .part.lead())]
    Empty {
        /// Which part of the name was empty.
        part: NamePart,
    },
    /// The name (or part) is longer than allowed.
    #[error("{}must be no more than {max} characters (got {got})", .part.lead())]
    TooLong {
        /// Which part of the name was too long.
        part: NamePart,
        /// The most characters allowed.
        max: usize,
        /// How many characters were given.
        got: usize,
    },
    /// A character is not allowed, or not allowed where it is.
    #[error("{}{rule} (found '{}' at position {position})", .part.lead(), .found.escape_debug())]
    InvalidChar {
        /// Which part of the name holds the character.
        part: NamePart,
        /// The rule the name breaks, in words.
        rule: &'static str,
        /// The offending character.
        found: char,
        /// Its position in the whole input, counted in characters from 0.
        position: usize,
    },
    /// A qualified name holds more than one '/'.
    #[error(
        "a qualified name must be a name with an optional DNS subdomain prefix and '/' \
         (e.g. 'example.com/MyName'), but found a second '/' at position {position}"
    )]
    ExtraSlash {
        /// Position of the second '/', counted in characters from 0.
        position: usize,
    },
}

/// The part of a name an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NamePart {
    /// The whole value.
    Whole,
    /// The DNS subdomain before the '/' of a qualified name.
    Prefix,
    /// The part after the '/' of a qualified name (or all of it when there is no '/').
    Name,
}

impl NamePart {
    /// The words that start a message about this part.
    fn lead(self) -> &'static str {
        match self {
            NamePart::Whole => "",
            NamePart::Prefix => "prefix part ",
            NamePart::Name => "name part ",
        }
    }
}

impl NameError {
    /// The user-facing message (the same text as `Display`).
    pub fn message(&self) -> String {
        self.to_string()
    }

    /// A fixed, short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            NameError::Empty { .. } => "empty",
            NameError::TooLong { .. } => "too_long",
            NameError::InvalidChar { .. } => "invalid_char",
            NameError::ExtraSlash { .. } => "extra_slash",
        }
    }
}

/// Longest DNS-1123 or DNS-1035 label.
pub const DNS1123_LABEL_MAX_LEN: usize = 63;
/// Longest DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX_LEN: usize = 253;
/// Longest name part of a qualified name, and longest label value.
pub const QUALIFIED_NAME_MAX_LEN: usize = 63;

const DNS1123_LABEL_RULE: &str = "must consist of lower case alphanumeric characters or '-', \
     and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_RULE: &str = "must consist of lower case alphanumeric characters, '-' \
     or '.', and each '.'-separated part must start and end with an alphanumeric character";
const DNS1035_LABEL_RULE: &str = "must consist of lower case alphanumeric characters or '-', \
     start with an alphabetic character, and end with an alphanumeric character";
const QUALIFIED_NAME_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', \
     and must start and end with an alphanumeric character";

/// Checks a DNS-1123 label: 1..=63 characters of `[a-z0-9-]`, starting and ending alphanumeric.
///
/// # Example
/// ```
/// use rouse_shared::names::validate_dns1123_label;
///
/// assert!(validate_dns1123_label("my-sandbox").is_ok());
/// let err = validate_dns1123_label("My-Sandbox").unwrap_err();
/// assert!(err.to_string().ends_with("(found 'M' at position 0)"));
/// ```
pub fn validate_dns1123_label(value: &str) -> Result<(), NameError> {
    check_len(value, NamePart::Whole, DNS1123_LABEL_MAX_LEN)?;
    check_dns_label(value, 0, NamePart::Whole, DNS1123_LABEL_RULE, false)
}

/// Checks a DNS-1123 subdomain: at most 253 characters of '.'-separated DNS-1123 labels.
pub fn validate_dns1123_subdomain(value: &str) -> Result<(), NameError> {
    check_subdomain(value, 0, NamePart::Whole)
}

/// Checks a DNS-1035 label: like a DNS-1123 label, but it must start with a letter.
pub fn validate_dns1035_label(value: &str) -> Result<(), NameError> {
    check_len(value, NamePart::Whole, DNS1123_LABEL_MAX_LEN)?;
    check_dns_label(value, 0, NamePart::Whole, DNS1035_LABEL_RULE, true)
}

/// Checks a label key: a qualified name, `[prefix/]name` with a DNS subdomain as prefix.
pub fn validate_label_key(key: &str) -> Result<(), NameError> {
    validate_qualified_name(key)
}

/// Checks an annotation key: the rules of a label key, applied (as the API server does) to the
/// lower-cased key, so `Example.COM/Key` is accepted.
pub fn validate_annotation_key(key: &str) -> Result<(), NameError> {
    validate_qualified_name(&key.to_ascii_lowercase())
}

/// Checks a label value: empty, or up to 63 of `[A-Za-z0-9-_.]` starting and ending alphanumeric.
pub fn validate_label_value(value: &str) -> Result<(), NameError> {
    if value.is_empty() {
        return Ok(());
    }
    check_len(value, NamePart::Whole, QUALIFIED_NAME_MAX_LEN)?;
    check_qualified_part(value, 0, NamePart::Whole)
}

/// Checks `[prefix/]name` where prefix is a DNS-1123 subdomain and name is 1..=63 characters.
fn validate_qualified_name(key: &str) -> Result<(), NameError> {
    let (prefix, name, name_offset) = match key.split_once('/') {
        Some((prefix, rest)) => {
            if let Some(second) = rest.find('/') {
                return Err(NameError::ExtraSlash {
                    position: char_position(key, prefix.len() + 1 + second),
                });
            }
            (Some(prefix), rest, prefix.len() + 1)
        }
        None => (None, key, 0),
    };
    if let Some(prefix) = prefix {
        check_subdomain(prefix, 0, NamePart::Prefix)?;
    }
    check_len(name, NamePart::Name, QUALIFIED_NAME_MAX_LEN)?;
    check_qualified_part(name, name_offset, NamePart::Name)
}

/// Rejects an empty value and one longer than `max` bytes (Kubernetes counts bytes too).
fn check_len(value: &str, part: NamePart, max: usize) -> Result<(), NameError> {
    if value.is_empty() {
        return Err(NameError::Empty { part });
    }
    if value.len() > max {
        return Err(NameError::TooLong {
            part,
            max,
            got: value.len(),
        });
    }
    Ok(())
}

/// Checks a subdomain that starts at byte `offset` of the whole input.
fn check_subdomain(value: &str, offset: usize, part: NamePart) -> Result<(), NameError> {
    check_len(value, part, DNS1123_SUBDOMAIN_MAX_LEN)?;
    let mut start = 0;
    for label in value.split('.') {
        if label.is_empty() {
            // An empty label is a '.' at the start, at the end, or next to another '.'.
            let at = if start == 0 { 0 } else { start - 1 };
            return Err(invalid_at(value, at, offset, part, DNS1123_SUBDOMAIN_RULE));
        }
        check_dns_label(label, offset + start, part, DNS1123_SUBDOMAIN_RULE, false)?;
        start += label.len() + 1;
    }
    Ok(())
}

/// Checks the characters of a non-empty DNS label found at byte `offset` of the whole input.
///
/// `value` here is the label itself; positions in errors are relative to the whole input, which
/// is all ASCII up to the offending character, so byte offsets equal character positions.
fn check_dns_label(
    label: &str,
    offset: usize,
    part: NamePart,
    rule: &'static str,
    letter_first: bool,
) -> Result<(), NameError> {
    let bytes = label.as_bytes();
    let last = bytes.len().saturating_sub(1);
    for (i, &b) in bytes.iter().enumerate() {
        let ok = match b {
            b'a'..=b'z' => true,
            b'0'..=b'9' => !(letter_first && i == 0),
            b'-' => i != 0 && i != last,
            _ => false,
        };
        if !ok {
            return Err(invalid_at(label, i, offset, part, rule));
        }
    }
    Ok(())
}

/// Checks the name part of a qualified name (or a label value) found at byte `offset`.
fn check_qualified_part(value: &str, offset: usize, part: NamePart) -> Result<(), NameError> {
    let bytes = value.as_bytes();
    let last = bytes.len().saturating_sub(1);
    for (i, &b) in bytes.iter().enumerate() {
        let ok = match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => true,
            b'-' | b'_' | b'.' => i != 0 && i != last,
            _ => false,
        };
        if !ok {
            return Err(invalid_at(value, i, offset, part, QUALIFIED_NAME_RULE));
        }
    }
    Ok(())
}

/// Builds an `InvalidChar` for byte `i` of `segment`, which starts at byte `offset` of the input.
fn invalid_at(
    segment: &str,
    i: usize,
    offset: usize,
    part: NamePart,
    rule: &'static str,
) -> NameError {
    // Every byte before `i` was accepted, hence ASCII, so `i` is a char boundary.
    let found = segment
        .get(i..)
        .and_then(|t| t.chars().next())
        .unwrap_or('?');
    NameError::InvalidChar {
        part,
        rule,
        found,
        position: offset + i,
    }
}

/// The character position of byte index `byte` in `s` (a char boundary).
fn char_position(s: &str, byte: usize) -> usize {
    s.get(..byte).map_or(byte, |head| head.chars().count())
}

#[cfg(test)]
mod tests;
