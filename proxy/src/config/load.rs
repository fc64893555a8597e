//! Loading a config: parse the text ([`super::parse`]), then validate the result
//! ([`super::validate`]), reporting every problem at once.

use super::Config;
use super::parse::{self, ConfigError};
use super::validate;

impl Config {
    /// Parses and validates a TOML document; every problem found is in the error.
    ///
    /// # Example
    /// ```
    /// let config = rouse_proxy::Config::from_toml("[http]\nlisten = \"127.0.0.1:0\"\n")?;
    /// assert_eq!(config.wake.deadline, std::time::Duration::from_secs(60));
    /// # Ok::<(), rouse_proxy::config::ConfigError>(())
    /// ```
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        Self::from_shared_toml(text, &[])
    }

    /// Parses and validates the proxy's sections of a document shared with other components,
    /// skipping the top-level keys in `foreign`; line numbers in errors are the document's.
    pub fn from_shared_toml(text: &str, foreign: &[&str]) -> Result<Self, ConfigError> {
        let config = parse::parse(text, foreign)?;
        let issues = validate::validate(&config);
        if issues.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError::Invalid(issues))
        }
    }

    /// Reads, parses and validates a config file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml(&text)
    }
}
