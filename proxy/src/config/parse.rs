//! Parsing the TOML text into a [`Config`], reporting every bad section with its key path and
//! line rather than stopping at the first.
//!
//! serde stops at the first error, so a failing top-level section is reported and removed and
//! the document is deserialized again, until it passes; a config file has a dozen sections at
//! most, so this costs nothing that matters.

use std::fmt;
use std::path::PathBuf;

use toml::de::DeTable;

use super::Config;

/// The top-level keys [`Config`] knows.
const SECTIONS: [&str; 12] = [
    "routing",
    "http",
    "https",
    "tls_passthrough",
    "tcp",
    "admin",
    "wake",
    "limits",
    "activity",
    "drain",
    "directory",
    "upstream",
];

/// Why a configuration was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// Keys or values are wrong; every one found is listed.
    #[error("invalid config:\n{}", IssueList(.0))]
    Invalid(Vec<ConfigIssue>),
}

impl ConfigError {
    /// The problems found, empty for a read error.
    pub fn issues(&self) -> &[ConfigIssue] {
        match self {
            ConfigError::Invalid(issues) => issues,
            ConfigError::Read { .. } => &[],
        }
    }

    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            ConfigError::Read { .. } => "read",
            ConfigError::Invalid(_) => "invalid",
        }
    }
}

/// One problem in a config: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Dotted key path, like `wake.deadline` or `tcp[1].sandbox`; empty for a syntax error.
    pub path: String,
    /// Line of the problem, from 1, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.line, self.path.is_empty()) {
            (Some(line), false) => write!(f, "line {line}: {}: {}", self.path, self.message),
            (Some(line), true) => write!(f, "line {line}: {}", self.message),
            (None, false) => write!(f, "{}: {}", self.path, self.message),
            (None, true) => write!(f, "{}", self.message),
        }
    }
}

struct IssueList<'a>(&'a [ConfigIssue]);

impl fmt::Display for IssueList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, issue) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "  {issue}")?;
        }
        Ok(())
    }
}

/// Parses the document; see the module docs for how all errors are collected.
///
/// Top-level keys in `foreign` belong to another component sharing the file (`rouse up` keeps
/// its `[api]` and `[runtime]` beside the proxy's sections) and are skipped.
pub(super) fn parse(text: &str, foreign: &[&str]) -> Result<Config, ConfigError> {
    let root = DeTable::parse(text).map_err(|err| {
        ConfigError::Invalid(vec![ConfigIssue {
            path: String::new(),
            line: err.span().map(|span| line_of(text, span.start)),
            message: first_line(err.message()),
        }])
    })?;
    let span = root.span();
    let mut table = root.into_inner();
    let mut issues = Vec::new();
    let unknown: Vec<(String, usize)> = table
        .iter()
        .filter(|(key, _)| !SECTIONS.contains(&key.get_ref().as_ref()))
        .map(|(key, _)| (key.get_ref().to_string(), key.span().start))
        .collect();
    for key in foreign {
        table.remove(*key);
    }
    for (key, at) in unknown {
        if foreign.contains(&key.as_str()) {
            continue;
        }
        table.remove(key.as_str());
        issues.push(ConfigIssue {
            path: key,
            line: Some(line_of(text, at)),
            message: format!("unknown section; expected one of {}", SECTIONS.join(", ")),
        });
    }
    // Each round either succeeds or removes one section, so this ends.
    for _ in 0..=SECTIONS.len() {
        let de = toml::de::Deserializer::from(toml::Spanned::new(span.clone(), table.clone()));
        match serde_path_to_error::deserialize::<_, Config>(de) {
            Ok(config) if issues.is_empty() => return Ok(config),
            Ok(_) => break,
            Err(err) => {
                let path = err.path().to_string();
                let inner = err.into_inner();
                issues.push(ConfigIssue {
                    path: if path == "." {
                        String::new()
                    } else {
                        path.clone()
                    },
                    line: inner.span().map(|span| line_of(text, span.start)),
                    message: first_line(inner.message()),
                });
                let section = path.split(['.', '[']).next().unwrap_or_default().to_owned();
                if table.remove(section.as_str()).is_none() {
                    break;
                }
            }
        }
    }
    issues.sort_by_key(|issue| issue.line);
    Err(ConfigError::Invalid(issues))
}

/// Line number (from 1) of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()
        .get(..end)
        .map_or(0, |head| head.iter().filter(|&&b| b == b'\n').count())
        + 1
}

fn first_line(message: &str) -> String {
    message.trim().lines().next().unwrap_or_default().to_owned()
}
