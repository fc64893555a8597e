//! Bearer-token authentication and the token file in the data directory.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::state::Error;
use super::status::Failure;

/// Rejects requests without `Authorization: Bearer <token>` when a token is configured.
pub(crate) async fn require_token(
    State(token): State<Arc<Option<String>>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(expected) = token.as_deref() else {
        return next.run(request).await;
    };
    // Health checks answer without a token, as kube-apiserver's do for anonymous clients.
    if matches!(request.uri().path(), "/healthz" | "/readyz") {
        return next.run(request).await;
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    match given {
        Some(given) if constant_time_eq(given.as_bytes(), expected.as_bytes()) => {
            next.run(request).await
        }
        _ => Failure::unauthorized().into_response(),
    }
}

/// The token of an `Authorization: Bearer <token>` value; the scheme name is
/// case-insensitive (RFC 7235), so `bearer` and `BEARER` work too.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Compares two byte strings in time that depends only on their lengths, so a wrong token
/// reveals nothing about how much of it was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads the token from `{data}/token`, or creates that file (mode 0600) with a new random
/// token. Returns the token and whether it was created now (so `rouse up` prints it once).
///
/// # Example
/// ```
/// let dir = std::env::temp_dir().join(format!("rouse-token-doc-{}", std::process::id()));
/// let (token, created) = rouse_controller::api::load_or_create_token(&dir).expect("token");
/// assert!(created);
/// let (again, created) = rouse_controller::api::load_or_create_token(&dir).expect("token");
/// assert_eq!((again, created), (token, false));
/// # std::fs::remove_dir_all(&dir).ok();
/// ```
pub fn load_or_create_token(data_dir: &Path) -> Result<(String, bool), Error> {
    let path = rouse_shared::datadir::token_file(data_dir);
    std::fs::create_dir_all(data_dir).map_err(|source| Error::WriteToken {
        path: path.clone(),
        source,
    })?;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| Error::WriteToken {
        path: path.clone(),
        source: std::io::Error::other(e.to_string()),
    })?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(&path) {
        Ok(mut file) => {
            file.write_all(format!("{token}\n").as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|source| Error::WriteToken {
                    path: path.clone(),
                    source,
                })?;
            Ok((token, true))
        }
        // Another process (or an earlier start) made it: use that one.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let text = std::fs::read_to_string(&path).map_err(|source| Error::ReadToken {
                path: path.clone(),
                source,
            })?;
            let token = text.trim();
            if token.is_empty() {
                return Err(Error::EmptyToken { path });
            }
            Ok((token.to_owned(), false))
        }
        Err(source) => Err(Error::WriteToken { path, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn compares_exactly() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(constant_time_eq(b"", b""));
    }

    #[cfg(unix)]
    #[test]
    fn token_file_is_private_and_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let (token, created) = super::load_or_create_token(&data).expect("create");
        assert!(created);
        assert_eq!(token.len(), 64);
        let mode = std::fs::metadata(data.join("token"))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let (again, created) = super::load_or_create_token(&data).expect("load");
        assert_eq!((again.as_str(), created), (token.as_str(), false));
        std::fs::write(data.join("token"), "\n").expect("write");
        assert!(super::load_or_create_token(&data).is_err());
    }
}
