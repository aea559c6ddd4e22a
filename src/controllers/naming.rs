//! Names the provider-side controllers give to what they make, as kube-bind
//! names them, so kube-bind data and tooling keep finding them. Pure.

use crate::translate::namespaces::base36;
use sha2::{Digest, Sha224};

/// The consumer's cluster namespace: `prefix` + base36 of the first 8 bytes
/// of sha224(`identity`), where the identity is the app cluster's
/// `kube-system` namespace UID.
pub fn cluster_namespace(prefix: &str, identity: &str) -> String {
    let digest = Sha224::digest(identity.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    format!("{prefix}{}", base36(u64::from_be_bytes(first)))
}

/// The Secret holding an export's identity: 32 random bytes.
pub fn identity_secret(export: &str) -> String {
    format!("{export}-identity")
}

/// The ServiceAccount a consumer's provider-side access is granted to.
pub use crate::translate::identity::CONSUMER_SERVICE_ACCOUNT;

/// The ClusterRole granting exactly one export's resources and claims.
pub fn export_cluster_role(cluster_namespace: &str, export: &str) -> String {
    crate::provider_namespace::export_cluster_role(cluster_namespace, export)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base36_digits() {
        assert_eq!(base36(0), "0");
        assert_eq!(base36(35), "z");
        assert_eq!(base36(36), "10");
        assert_eq!(base36(u64::MAX), "3w5e11264sgsf");
    }

    #[test]
    fn cluster_namespace_is_stable_and_dns_safe() {
        let name = cluster_namespace("kube-bind-", "0b6e7c6a-4a43-4d3c-8f0e-3b1e2b2f6f11");
        assert_eq!(
            name,
            cluster_namespace("kube-bind-", "0b6e7c6a-4a43-4d3c-8f0e-3b1e2b2f6f11")
        );
        assert!(name.starts_with("kube-bind-"));
        let suffix = &name["kube-bind-".len()..];
        assert!((1..=13).contains(&suffix.len()), "{name}");
        assert!(
            suffix
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
        );
        assert_ne!(name, cluster_namespace("kube-bind-", "another-uid"));
    }

    #[test]
    fn matches_an_independent_computation() {
        // sha224("abc") = 23097d22 3405d822 ...; the first 8 bytes as a
        // big-endian integer, in base 36.
        let expected = base36(0x23097d223405d822);
        assert_eq!(cluster_namespace("p-", "abc"), format!("p-{expected}"));
        assert_eq!(expected, u64_in_base36_by_division(0x23097d223405d822));
    }

    fn u64_in_base36_by_division(value: u64) -> String {
        let mut digits = Vec::new();
        let mut v = value as u128;
        while v > 0 {
            digits.push(std::char::from_digit((v % 36) as u32, 36).unwrap());
            v /= 36;
        }
        digits.iter().rev().collect()
    }
}
