//! Which CAs client certificates are trusted from. The TLS listener accepts a
//! certificate from any CA bindery knows (its consumer CA and every
//! registered app cluster's front-proxy CA), through a verifier whose roots
//! change as app clusters are registered. That is only a gate: each
//! authenticator then checks the certificate against the one CA it trusts
//! ([`CaVerifier`]), so a certificate from one app cluster's front-proxy CA
//! never passes as a consumer certificate or as another app cluster's.

use dashmap::DashMap;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, UnixTime};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parses every certificate of a PEM bundle.
pub fn parse_pem_bundle(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not a PEM certificate bundle: {e}"))?;
    if certificates.is_empty() {
        return Err("no certificate in the bundle".into());
    }
    Ok(certificates)
}

fn verifier(roots: &[CertificateDer<'static>]) -> Result<Arc<dyn ClientCertVerifier>, String> {
    let mut store = RootCertStore::empty();
    for root in roots {
        store
            .add(root.clone())
            .map_err(|e| format!("unusable CA certificate: {e}"))?;
    }
    if store.is_empty() {
        // Nothing trusted: certificates are not asked for.
        return Ok(WebPkiClientVerifier::no_client_auth());
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(store), provider())
        .allow_unauthenticated()
        .build()
        .map_err(|e| format!("building a certificate verifier: {e}"))
}

/// Verifies leaf certificates against one CA bundle. A leaf that verified
/// is remembered for a few seconds, so that requests on one connection (or
/// from one front proxy) do not each pay for a chain verification.
#[derive(Clone)]
pub struct CaVerifier {
    inner: Arc<dyn ClientCertVerifier>,
    verified: Arc<DashMap<[u8; 32], Instant>>,
}

/// How long a verified leaf is remembered, and how many at most.
const REMEMBERED_FOR: Duration = Duration::from_secs(10);
const REMEMBERED_AT_MOST: usize = 1024;

impl std::fmt::Debug for CaVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CaVerifier")
    }
}

impl CaVerifier {
    pub fn from_pem(pem: &[u8]) -> Result<Self, String> {
        Ok(Self {
            inner: verifier(&parse_pem_bundle(pem)?)?,
            verified: Arc::new(DashMap::new()),
        })
    }

    /// Whether `leaf` (DER) chains to this CA and is valid now.
    pub fn verifies(&self, leaf: &[u8]) -> bool {
        let mut key = [0u8; 32];
        key.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, leaf).as_ref());
        let now = Instant::now();
        if self.verified.get(&key).is_some_and(|until| now < *until) {
            return true;
        }
        let valid = self
            .inner
            .verify_client_cert(&CertificateDer::from(leaf.to_vec()), &[], UnixTime::now())
            .is_ok();
        if valid {
            if self.verified.len() >= REMEMBERED_AT_MOST {
                self.verified.clear();
            }
            self.verified.insert(key, now + REMEMBERED_FOR);
        }
        valid
    }
}

/// The listener's client certificate verifier, whose trusted CAs can be
/// replaced while it serves.
#[derive(Debug)]
pub struct DynamicClientVerifier {
    current: RwLock<Arc<dyn ClientCertVerifier>>,
}

impl DynamicClientVerifier {
    pub fn new(roots: &[CertificateDer<'static>]) -> Result<Self, String> {
        Ok(Self {
            current: RwLock::new(verifier(roots)?),
        })
    }

    /// Trusts exactly `roots` from now on.
    pub fn set_roots(&self, roots: &[CertificateDer<'static>]) -> Result<(), String> {
        let next = verifier(roots)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = next;
        Ok(())
    }

    fn current(&self) -> Arc<dyn ClientCertVerifier> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl ClientCertVerifier for DynamicClientVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    /// No hints: clients (Go's, curl) then send their certificate whatever
    /// CA issued it, and the authenticators decide.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaf_passes_only_its_own_ca() {
        let dir = std::env::temp_dir().join(format!("bindery-trust-{}", std::process::id()));
        let one = crate::certs::ensure_bindery(&dir.join("one"), &[], &[]).unwrap();
        let two = crate::certs::ensure_bindery(&dir.join("two"), &[], &[]).unwrap();
        let leaf_pem = std::fs::read(crate::certs::ensure_consumer(&one, "c1").unwrap()).unwrap();
        let leaf = CertificateDer::from_pem_slice(&leaf_pem).unwrap();
        let ca_one = CaVerifier::from_pem(&std::fs::read(one.consumer_ca()).unwrap()).unwrap();
        let ca_two = CaVerifier::from_pem(&std::fs::read(two.consumer_ca()).unwrap()).unwrap();
        assert!(ca_one.verifies(&leaf));
        assert!(ca_one.verifies(&leaf), "remembered, still true");
        assert!(!ca_two.verifies(&leaf));
        assert!(
            !ca_two.verifies(&leaf),
            "a failure is not remembered as success"
        );
        assert!(!ca_one.verifies(b"not a certificate"));
        assert!(CaVerifier::from_pem(b"garbage").is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
