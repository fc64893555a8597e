//! Usage errors: a command line that cannot be run as given. `main` prints them like clap's
//! own (`error: ...`) and exits 2, as for an unknown flag.

/// A command line that cannot be run as given.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A usage error as an `anyhow::Error`, for `return Err(usage(...))`.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}
