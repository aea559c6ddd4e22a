//! Consumer client certificates made by `bindery certs --consumer <id>`:
//! the certificate must chain to bindery's consumer CA (the TLS layer trusts
//! other CAs too) and name the consumer the path asks for. Headers are never
//! read: `X-Remote-*` from such a client means nothing.

use super::trust::CaVerifier;
use super::{Authenticator, Outcome, PeerCertificate, Refusal, RequestUser, User, Via};
use crate::route::ConsumerId;

/// The organization consumer certificates carry.
pub const CONSUMER_ORGANIZATION: &str = "bindery:consumers";

pub struct ConsumerCertificates {
    /// bindery's consumer CA.
    pub ca: CaVerifier,
}

impl Authenticator for ConsumerCertificates {
    fn authenticate(
        &self,
        consumer: &ConsumerId,
        peer: Option<&PeerCertificate>,
        _headers: &http::HeaderMap,
    ) -> Outcome {
        let Some(peer) = peer else {
            return Outcome::NotMine;
        };
        if !self.ca.verifies(&peer.der) {
            return Outcome::NotMine;
        }
        let is_consumer_cert = peer
            .organizations
            .iter()
            .any(|o| o == CONSUMER_ORGANIZATION);
        if !is_consumer_cert || peer.common_name != consumer.as_str() {
            return Outcome::Refused(Refusal::CertificateNotForConsumer);
        }
        let identity = RequestUser {
            name: format!("bindery:consumer:{consumer}"),
            uid: None,
            groups: vec![CONSUMER_ORGANIZATION.into(), "system:authenticated".into()],
            extra: Default::default(),
        };
        Outcome::Accepted(User::new(identity, consumer, Via::ConsumerCertificate))
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

    fn issued(pki: &crate::certs::BinderyPki, consumer: &str) -> PeerCertificate {
        use rustls_pki_types::pem::PemObject;
        let pem = std::fs::read(crate::certs::ensure_consumer(pki, consumer).unwrap()).unwrap();
        let der = rustls_pki_types::CertificateDer::from_pem_slice(&pem).unwrap();
        peer_certificate(&der).unwrap()
    }

    #[test]
    fn certificate_must_chain_to_the_consumer_ca_and_name_the_path_consumer() {
        let dir = std::env::temp_dir().join(format!("bindery-names-{}", std::process::id()));
        let ours = crate::certs::ensure_bindery(&dir.join("ours"), &[], &[]).unwrap();
        let theirs = crate::certs::ensure_bindery(&dir.join("theirs"), &[], &[]).unwrap();
        let auth = ConsumerCertificates {
            ca: CaVerifier::from_pem(&std::fs::read(ours.consumer_ca()).unwrap()).unwrap(),
        };
        let c1 = ConsumerId::parse("c1").unwrap();
        let mut headers = http::HeaderMap::new();
        headers.insert("x-remote-user", "system:admin".parse().unwrap());
        let Outcome::Accepted(user) = auth.authenticate(&c1, Some(&issued(&ours, "c1")), &headers)
        else {
            panic!("c1's certificate is accepted");
        };
        assert_eq!(user.name, "bindery:consumer:c1", "X-Remote-User is ignored");
        assert_eq!(user.via, Via::ConsumerCertificate);
        assert_eq!(
            auth.authenticate(&c1, Some(&issued(&ours, "c2")), &headers),
            Outcome::Refused(Refusal::CertificateNotForConsumer)
        );
        assert_eq!(
            auth.authenticate(&c1, Some(&issued(&theirs, "c1")), &headers),
            Outcome::NotMine,
            "another CA's certificate naming c1"
        );
        let mut wrong_org = issued(&ours, "c1");
        wrong_org.organizations = vec!["system:masters".into()];
        assert_eq!(
            auth.authenticate(&c1, Some(&wrong_org), &headers),
            Outcome::Refused(Refusal::CertificateNotForConsumer)
        );
        assert_eq!(auth.authenticate(&c1, None, &headers), Outcome::NotMine);
        std::fs::remove_dir_all(dir).unwrap();
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
