//! Certificate authorities and the certificates they sign, as PEM strings.
//!
//! Pure key and certificate generation with rcgen: nothing here touches the
//! file system, so the rules (which usages, which names, how long) are tested
//! without I/O. `certs::store` decides where the PEM goes.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use std::net::IpAddr;
use time::{Duration, OffsetDateTime};

/// How long a generated CA is valid: long enough never to expire under a
/// development cluster.
const CA_VALIDITY: Duration = Duration::days(3650);
/// How long a generated leaf certificate is valid.
const LEAF_VALIDITY: Duration = Duration::days(365);
/// Allowance for clock skew between the issuing and the verifying process.
const BACKDATE: Duration = Duration::minutes(5);

/// A certificate together with its private key, both PEM-encoded.
#[derive(Clone, Debug)]
pub struct PemPair {
    pub cert_pem: String,
    pub key_pem: String,
}

/// A CA that can sign certificates: its PEM pair plus the parsed issuer.
pub struct Authority {
    pem: PemPair,
    issuer: Issuer<'static, KeyPair>,
}

/// What a leaf certificate is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Usage {
    /// A TLS server, reachable under the given DNS names and IP addresses.
    Server {
        dns_names: Vec<String>,
        ips: Vec<IpAddr>,
    },
    /// A TLS client. Kubernetes reads the user from the common name and the
    /// groups from the organizations.
    Client { organizations: Vec<String> },
}

/// Errors from making or reading certificates.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("certificate generation failed: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("invalid DNS name {0:?} for a certificate")]
    DnsName(String),
}

impl Authority {
    /// Creates a new self-signed CA with the given common name.
    pub fn generate(common_name: &str) -> Result<Self, CertError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name(common_name, &[]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        set_validity(&mut params, CA_VALIDITY);
        let cert = params.self_signed(&key)?;
        let pem = PemPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        };
        let issuer = Issuer::new(params, key);
        Ok(Self { pem, issuer })
    }

    /// Loads a CA from its PEM pair, as written by an earlier run.
    pub fn from_pem(pem: PemPair) -> Result<Self, CertError> {
        let key = KeyPair::from_pem(&pem.key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(&pem.cert_pem, key)?;
        Ok(Self { pem, issuer })
    }

    /// The CA's own certificate and key.
    pub fn pem(&self) -> &PemPair {
        &self.pem
    }

    /// Signs a new leaf certificate with a fresh key.
    pub fn issue(&self, common_name: &str, usage: &Usage) -> Result<PemPair, CertError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        set_validity(&mut params, LEAF_VALIDITY);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.use_authority_key_identifier_extension = true;
        match usage {
            Usage::Server { dns_names, ips } => {
                params.distinguished_name = distinguished_name(common_name, &[]);
                params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
                for name in dns_names {
                    if !is_dns_name(name) {
                        return Err(CertError::DnsName(name.clone()));
                    }
                    let dns = name
                        .clone()
                        .try_into()
                        .map_err(|_| CertError::DnsName(name.clone()))?;
                    params.subject_alt_names.push(SanType::DnsName(dns));
                }
                params
                    .subject_alt_names
                    .extend(ips.iter().copied().map(SanType::IpAddress));
            }
            Usage::Client { organizations } => {
                params.distinguished_name = distinguished_name(common_name, organizations);
                params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            }
        }
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(PemPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// A fresh key pair for signing service-account tokens: (private PEM, public PEM).
pub fn signing_key_pair() -> Result<(String, String), CertError> {
    let key = KeyPair::generate()?;
    Ok((key.serialize_pem(), key.public_key_pem()))
}

/// Is `name` a DNS name a certificate may carry: dot-separated labels of
/// lowercase letters, digits and inner hyphens, with an optional leading `*.`?
fn is_dns_name(name: &str) -> bool {
    let name = name.strip_prefix("*.").unwrap_or(name);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

fn distinguished_name(common_name: &str, organizations: &[String]) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    for organization in organizations {
        name.push(DnType::OrganizationName, organization.as_str());
    }
    name.push(DnType::CommonName, common_name);
    name
}

fn set_validity(params: &mut CertificateParams, validity: Duration) {
    let now = OffsetDateTime::now_utc();
    params.not_before = now - BACKDATE;
    params.not_after = now + validity;
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::prelude::*;

    fn parse(pem: &str) -> Vec<u8> {
        let (_, pem) = parse_x509_pem(pem.as_bytes()).expect("valid PEM");
        pem.contents
    }

    #[test]
    fn server_certificate_carries_names_and_chains_to_its_ca() {
        let ca = Authority::generate("test-ca").unwrap();
        let usage = Usage::Server {
            dns_names: vec![
                "bindery.bindery-system.svc".into(),
                "*.bindery-system.svc".into(),
            ],
            ips: vec!["127.0.0.1".parse().unwrap()],
        };
        let leaf = ca.issue("bindery", &usage).unwrap();

        let der = parse(&leaf.cert_pem);
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        let sans = cert.subject_alternative_name().unwrap().unwrap();
        let names = &sans.value.general_names;
        assert!(
            names.contains(&GeneralName::DNSName("bindery.bindery-system.svc")),
            "{names:?}"
        );
        assert!(
            names.contains(&GeneralName::DNSName("*.bindery-system.svc")),
            "{names:?}"
        );
        assert!(
            names.contains(&GeneralName::IPAddress(&[127, 0, 0, 1])),
            "{names:?}"
        );
        assert!(
            cert.extended_key_usage()
                .unwrap()
                .unwrap()
                .value
                .server_auth
        );

        let ca_der = parse(&ca.pem().cert_pem);
        let (_, ca_cert) = X509Certificate::from_der(&ca_der).unwrap();
        assert_eq!(cert.issuer(), ca_cert.subject());
        cert.verify_signature(Some(ca_cert.public_key()))
            .expect("leaf is signed by the CA");
        assert!(ca_cert.is_ca());
    }

    #[test]
    fn client_certificate_names_user_and_groups() {
        let ca = Authority::generate("test-ca").unwrap();
        let usage = Usage::Client {
            organizations: vec!["system:masters".into()],
        };
        let leaf = ca.issue("admin", &usage).unwrap();
        let der = parse(&leaf.cert_pem);
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        let cn: Vec<_> = cert.subject().iter_common_name().collect();
        let orgs: Vec<_> = cert.subject().iter_organization().collect();
        assert_eq!(cn[0].as_str().unwrap(), "admin");
        assert_eq!(orgs[0].as_str().unwrap(), "system:masters");
        let eku = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
    }

    #[test]
    fn reloaded_authority_signs_for_the_same_subject() {
        let ca = Authority::generate("reloaded-ca").unwrap();
        let again = Authority::from_pem(ca.pem().clone()).unwrap();
        let leaf = again
            .issue(
                "x",
                &Usage::Client {
                    organizations: vec![],
                },
            )
            .unwrap();
        let der = parse(&leaf.cert_pem);
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        let ca_der = parse(&ca.pem().cert_pem);
        let (_, ca_cert) = X509Certificate::from_der(&ca_der).unwrap();
        cert.verify_signature(Some(ca_cert.public_key())).unwrap();
    }

    #[test]
    fn bad_dns_names_are_errors_not_panics() {
        let ca = Authority::generate("ca").unwrap();
        for bad in [
            "not a name",
            "nul\u{0}",
            "",
            "a..b",
            "-a.b",
            "*.",
            "UPPER.case",
            "a.*.b",
        ] {
            let usage = Usage::Server {
                dns_names: vec![bad.into()],
                ips: vec![],
            };
            assert!(ca.issue("x", &usage).is_err(), "{bad:?} must be refused");
        }
        for good in ["a", "svc.ns.svc", "*.ns.svc", "x-1.y"] {
            assert!(is_dns_name(good), "{good:?} is a DNS name");
        }
    }
}
