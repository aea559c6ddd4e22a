//! Consumer client certificates made by `bindery certs --consumer <id>`: the
//! TLS layer has verified the chain to bindery's consumer CA; here the
//! certificate must name the consumer the path asks for.

use super::{Authenticator, PeerCertificate, User};
use crate::route::ConsumerId;

/// The organization consumer certificates carry.
pub const CONSUMER_ORGANIZATION: &str = "bindery:consumers";

pub struct ConsumerCertificates;

impl Authenticator for ConsumerCertificates {
    fn authenticate(
        &self,
        consumer: &ConsumerId,
        peer: Option<&PeerCertificate>,
        _headers: &http::HeaderMap,
    ) -> Option<User> {
        let peer = peer?;
        let is_consumer_cert = peer
            .organizations
            .iter()
            .any(|o| o == CONSUMER_ORGANIZATION);
        (is_consumer_cert && peer.common_name == consumer.as_str()).then(|| User {
            name: format!("bindery:consumer:{consumer}"),
            groups: vec![CONSUMER_ORGANIZATION.into(), "system:authenticated".into()],
            consumer: consumer.clone(),
        })
    }
}

/// Reads the subject of a DER certificate.
pub fn peer_certificate(der: &[u8]) -> Option<PeerCertificate> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let common_name = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    let organizations = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Some(PeerCertificate {
        common_name,
        organizations,
        der: der.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(cn: &str, org: &str) -> PeerCertificate {
        PeerCertificate {
            common_name: cn.into(),
            organizations: vec![org.into()],
            der: vec![],
        }
    }

    #[test]
    fn certificate_must_name_the_path_consumer() {
        let c1 = ConsumerId::parse("c1").unwrap();
        let headers = http::HeaderMap::new();
        let auth = ConsumerCertificates;
        assert!(
            auth.authenticate(&c1, Some(&peer("c1", CONSUMER_ORGANIZATION)), &headers)
                .is_some()
        );
        assert!(
            auth.authenticate(&c1, Some(&peer("c2", CONSUMER_ORGANIZATION)), &headers)
                .is_none()
        );
        assert!(
            auth.authenticate(&c1, Some(&peer("c1", "system:masters")), &headers)
                .is_none()
        );
        assert!(auth.authenticate(&c1, None, &headers).is_none());
    }

    #[test]
    fn reads_subjects_of_issued_certificates() {
        let dir = std::env::temp_dir().join(format!("bindery-peer-{}", std::process::id()));
        let pki = crate::certs::ensure_bindery(&dir, &[], &[]).unwrap();
        let cert = crate::certs::ensure_consumer(&pki, "c9").unwrap();
        let pem = std::fs::read(&cert).unwrap();
        use rustls_pki_types::pem::PemObject;
        let der = rustls_pki_types::CertificateDer::from_pem_slice(&pem).unwrap();
        let peer = peer_certificate(&der).unwrap();
        assert_eq!(peer.common_name, "c9");
        assert_eq!(peer.organizations, vec![CONSUMER_ORGANIZATION.to_string()]);
        assert!(peer_certificate(b"garbage").is_none());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
