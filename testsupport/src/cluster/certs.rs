//! The certificates of a test control plane: one CA that signs the API server's serving
//! certificate and the clients' certificates, and the service account signing key.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// Paths of the PEM files written by [`write`].
#[derive(Debug, Clone)]
pub struct CertPaths {
    /// The CA certificate (trusted by clients and used as the client CA).
    pub ca: PathBuf,
    /// The API server's serving certificate (for `127.0.0.1` and `localhost`) and key.
    pub serving: (PathBuf, PathBuf),
    /// A client certificate in `system:masters` (cluster admin) and its key.
    pub admin: (PathBuf, PathBuf),
    /// The service account token signing key (private) and its public key.
    pub service_account: (PathBuf, PathBuf),
    /// A kubelet's client certificate (`system:node:NAME` in `system:nodes`), when asked for.
    pub node: Option<(PathBuf, PathBuf)>,
}

/// Generates every certificate and key into `dir`, the API server's for `127.0.0.1` and
/// `localhost`.
pub fn write(dir: &Path) -> Result<CertPaths> {
    write_for(dir, &["127.0.0.1".to_owned(), "localhost".to_owned()], None)
}

/// [`write`] with the API server's names (IP addresses or DNS names) and, with `node`, a
/// kubelet client certificate for that node name.
pub fn write_for(dir: &Path, server_names: &[String], node: Option<&str>) -> Result<CertPaths> {
    let ca_key = KeyPair::generate().context("generate CA key")?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "rouse-test-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key).context("self-sign the CA")?;
    let issuer = Issuer::new(ca_params, ca_key);

    let ca = dir.join("ca.crt");
    std::fs::write(&ca, ca_cert.pem())?;

    let leaf =
        |name: &str, cn: &str, org: Option<&str>, server: bool| -> Result<(PathBuf, PathBuf)> {
            let sans = if server {
                server_names.to_vec()
            } else {
                Vec::new()
            };
            let mut params = CertificateParams::new(sans)?;
            params.distinguished_name.push(DnType::CommonName, cn);
            if let Some(org) = org {
                params
                    .distinguished_name
                    .push(DnType::OrganizationName, org);
            }
            params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            params.extended_key_usages = vec![if server {
                ExtendedKeyUsagePurpose::ServerAuth
            } else {
                ExtendedKeyUsagePurpose::ClientAuth
            }];
            let key = KeyPair::generate()?;
            let cert = params
                .signed_by(&key, &issuer)
                .with_context(|| format!("sign the {name} certificate"))?;
            let (crt_path, key_path) = (
                dir.join(format!("{name}.crt")),
                dir.join(format!("{name}.key")),
            );
            std::fs::write(&crt_path, cert.pem())?;
            std::fs::write(&key_path, key.serialize_pem())?;
            Ok((crt_path, key_path))
        };

    let serving = leaf("apiserver", "kube-apiserver", None, true)?;
    let admin = leaf("admin", "rouse-test-admin", Some("system:masters"), false)?;
    let sa_key = KeyPair::generate().context("generate the service account key")?;
    let service_account = (
        dir.join("service-account.key"),
        dir.join("service-account.pub"),
    );
    std::fs::write(&service_account.0, sa_key.serialize_pem())?;
    std::fs::write(&service_account.1, sa_key.public_key_pem())?;
    let node = match node {
        Some(name) => Some(leaf(
            "node",
            &format!("system:node:{name}"),
            Some("system:nodes"),
            false,
        )?),
        None => None,
    };
    Ok(CertPaths {
        ca,
        serving,
        admin,
        service_account,
        node,
    })
}
