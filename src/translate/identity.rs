//! Export identity hashes and the labels that stamp every object created
//! through an export with its export and its consumer.

use std::fmt;

/// Labels whose keys start with this prefix belong to bindery: a consumer may
/// never set, change or see them.
pub const RESERVED_LABEL_PREFIX: &str = "bindery.dev/";
/// The export an object was created through (the first 32 hex characters, 128
/// bits, of the export's identity hash: a label value holds at most 63).
pub const EXPORT_LABEL: &str = "bindery.dev/export";
/// The consumer an object belongs to.
pub const CONSUMER_LABEL: &str = "bindery.dev/consumer";

/// The provider-side ServiceAccount, in a consumer's cluster namespace, that
/// the consumer's requests are made as (impersonated), and whose RBAC
/// covers only that consumer's namespaces and exported resources. It is
/// bindery's own: kube-bind's konnector runs as `kube-binder` in the same
/// namespaces, with a token kube-bind handed the app cluster, so bindery
/// neither grants that account anything nor holds its writes to bindery's
/// identity.
pub const CONSUMER_SERVICE_ACCOUNT: &str = "bindery-consumer";

/// The user extra, set by impersonation, that names the export a
/// consumer's request is for; the provider's admission policy holds each
/// write to that export's identity.
pub const EXPORT_EXTRA: &str = "bindery.dev/export";

/// The provider user of a consumer's account in `cluster_namespace`.
pub fn consumer_account(cluster_namespace: &str) -> String {
    format!("system:serviceaccount:{cluster_namespace}:{CONSUMER_SERVICE_ACCOUNT}")
}

/// The groups kube-apiserver gives that account when it is impersonated.
pub fn consumer_account_groups(cluster_namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{cluster_namespace}"),
        "system:authenticated".into(),
    ]
}

/// The hex sha256 of an export's identity secret.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IdentityHash(String);

impl IdentityHash {
    /// Accepts 64 lower-case hex characters.
    pub fn parse(raw: &str) -> Option<Self> {
        (raw.len() == 64
            && raw
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| Self(raw.to_string()))
    }

    /// The hash of an identity secret's bytes.
    pub fn of_secret(secret: &[u8]) -> Self {
        let digest = ring::digest::digest(&ring::digest::SHA256, secret);
        Self(digest.as_ref().iter().map(|b| format!("{b:02x}")).collect())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value of [`EXPORT_LABEL`] on objects of this export.
    pub fn label_value(&self) -> &str {
        &self.0[..32]
    }
}

impl fmt::Display for IdentityHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// True for a label key a consumer may not use.
pub fn is_reserved_label(key: &str) -> bool {
    key.starts_with(RESERVED_LABEL_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_of_secret_is_hex_sha256() {
        let hash = IdentityHash::of_secret(b"abc");
        assert_eq!(
            hash.as_str(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hash.label_value(), "ba7816bf8f01cfea414140de5dae2223");
        assert_eq!(IdentityHash::parse(hash.as_str()), Some(hash));
    }

    #[test]
    fn parse_rejects_non_hashes() {
        assert!(IdentityHash::parse("abc").is_none());
        assert!(IdentityHash::parse(&"G".repeat(64)).is_none());
        assert!(IdentityHash::parse(&"A".repeat(64)).is_none());
    }
}
