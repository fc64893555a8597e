//! The kubeconfig `rouse up` writes into its data directory: the API's address, the CA to trust
//! and the bearer token, so kubectl, client libraries and the `rouse` CLI all connect the same
//! way.

use std::path::Path;

use base64::Engine;

use super::tls::{TlsError, write_private};

/// The context, cluster and user name in the kubeconfig.
pub const KUBECONFIG_CONTEXT: &str = "rouse";

/// A kubeconfig (YAML) for `server` (`https://127.0.0.1:7070`), trusting `ca_pem` when given,
/// authenticating with `token` when given.
pub fn kubeconfig(server: &str, ca_pem: Option<&str>, token: Option<&str>) -> String {
    let name = KUBECONFIG_CONTEXT;
    let ca = ca_pem.map_or_else(String::new, |pem| {
        let data = base64::engine::general_purpose::STANDARD.encode(pem);
        format!("    certificate-authority-data: {data}\n")
    });
    let user = token.map_or_else(
        || "  user: {}\n".to_owned(),
        |token| format!("  user:\n    token: {token}\n"),
    );
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {server}\n{ca}\
         contexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n    namespace: default\n\
         current-context: {name}\nusers:\n- name: {name}\n{user}preferences: {{}}\n"
    )
}

/// Writes [`kubeconfig`] to `{data}/kubeconfig` with mode 0600 (it holds the token).
pub fn write_kubeconfig(
    data_dir: &Path,
    server: &str,
    ca_pem: Option<&str>,
    token: Option<&str>,
) -> Result<std::path::PathBuf, TlsError> {
    let path = rouse_shared::datadir::kubeconfig_file(data_dir);
    write_private(&path, &kubeconfig(server, ca_pem, token))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    #[test]
    fn kubeconfig_names_server_ca_and_token() {
        let text = super::kubeconfig("https://127.0.0.1:7070", Some("PEM"), Some("abc"));
        assert!(text.contains("server: https://127.0.0.1:7070\n"), "{text}");
        assert!(
            text.contains("certificate-authority-data: UEVN\n"),
            "{text}"
        );
        assert!(text.contains("    token: abc\n"), "{text}");
        assert!(text.contains("current-context: rouse\n"), "{text}");
        let plain = super::kubeconfig("http://127.0.0.1:1", None, None);
        assert!(!plain.contains("certificate-authority"), "{plain}");
        assert!(plain.contains("  user: {}\n"), "{plain}");
    }
}
