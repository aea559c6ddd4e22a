//! TLS for bindery's listener: the serving certificate, HTTP/2 and HTTP/1.1
//! by ALPN, and optional client certificates verified by the given verifier
//! (a request without one is still served, and then authenticated otherwise
//! or refused with 401).

use anyhow::{Context, Result};
use rustls::server::danger::ClientCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;

/// The rustls server configuration for `cert`/`key`, asking for client
/// certificates that `verifier` accepts.
pub fn server_config(
    cert: &Path,
    key: &Path,
    verifier: Arc<dyn ClientCertVerifier>,
) -> Result<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing {}", cert.display()))?;
    let key =
        PrivateKeyDer::from_pem_file(key).with_context(|| format!("reading {}", key.display()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("choosing TLS versions")?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .context("loading the serving certificate")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
