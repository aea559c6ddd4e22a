//! The provider cluster's own users, on the endpoints that serve the
//! provider (the virtual workspace and `/bind`): a client certificate of the
//! provider's client CA names its user as kube-apiserver's x509
//! authenticator does (CN the user, each O a group, plus
//! `system:authenticated`), and is checked first, as kube-apiserver does;
//! otherwise a bearer token is reviewed by the provider with a TokenReview
//! ([`super::token_review`], answers remembered briefly).

use super::token_review::TokenReviews;
use super::trust::CaVerifier;
use super::{PeerCertificate, Refusal, RequestUser, bearer_token};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

/// The scope the provider's token reviews are remembered under, apart from
/// every app cluster's (those are under their consumer's id, a DNS label).
const PROVIDER_SCOPE: &str = "@provider";

pub struct ProviderUsers {
    pub provider: kube::Client,
    /// The provider's client CA (its `client-ca-file`), if it publishes one.
    pub client_ca: Option<CaVerifier>,
    pub reviews: TokenReviews,
}

impl ProviderUsers {
    /// The provider's user behind a request that shows `peer` and
    /// `headers`, or why there is none.
    pub async fn authenticate(
        &self,
        peer: Option<&PeerCertificate>,
        headers: &http::HeaderMap,
    ) -> Result<RequestUser, Refusal> {
        let certificate = match (&self.client_ca, peer) {
            (Some(ca), Some(peer)) => certificate_user(ca, peer),
            (None, Some(_)) => Err(Refusal::UnknownCa),
            (_, None) => Err(Refusal::NoCredential),
        };
        let refusal = match certificate {
            Ok(user) => return Ok(user),
            Err(refusal) => refusal,
        };
        let Some(token) = bearer_token(headers) else {
            return Err(refusal);
        };
        self.reviews
            .review(&self.provider, PROVIDER_SCOPE, token)
            .await
    }
}

/// The user of a client certificate the provider's client CA issued, as
/// kube-apiserver's x509 authenticator names it: CN the user, each O a group,
/// and every authenticated user is in `system:authenticated`.
pub fn certificate_user(ca: &CaVerifier, peer: &PeerCertificate) -> Result<RequestUser, Refusal> {
    if !ca.verifies(&peer.der) {
        return Err(Refusal::UnknownCa);
    }
    if peer.common_name.is_empty() {
        return Err(Refusal::NoUserName);
    }
    let mut groups = peer.organizations.clone();
    if !groups.iter().any(|g| g == AUTHENTICATED) {
        groups.push(AUTHENTICATED.into());
    }
    Ok(RequestUser {
        name: peer.common_name.clone(),
        groups,
        ..Default::default()
    })
}

const AUTHENTICATED: &str = "system:authenticated";

/// The CA bundle kube-apiserver verifies client certificates with, as it
/// publishes it (`kube-system/extension-apiserver-authentication`,
/// `client-ca-file`); `None` when it publishes none.
pub async fn provider_client_ca(provider: &kube::Client) -> Result<Option<String>, kube::Error> {
    let config_maps = Api::<ConfigMap>::namespaced(provider.clone(), "kube-system");
    let published = config_maps
        .get_opt("extension-apiserver-authentication")
        .await?;
    Ok(published
        .and_then(|c| c.data)
        .and_then(|mut data| data.remove("client-ca-file")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(path: &std::path::Path) -> PeerCertificate {
        use rustls_pki_types::pem::PemObject;
        let der = rustls_pki_types::CertificateDer::from_pem_slice(&std::fs::read(path).unwrap())
            .unwrap();
        crate::auth::client_cert::peer_certificate(&der).unwrap()
    }

    #[test]
    fn a_certificate_of_the_provider_client_ca_names_the_user_like_kube_apiserver() {
        let dir = std::env::temp_dir().join(format!("bindery-binder-{}", std::process::id()));
        let provider = crate::certs::ensure_cluster(&dir, "provider").unwrap();
        let other = crate::certs::ensure_cluster(&dir, "other").unwrap();
        let ca = CaVerifier::from_pem(&std::fs::read(provider.ca()).unwrap()).unwrap();
        let user = certificate_user(&ca, &peer(&provider.admin().0)).expect("accepted");
        assert_eq!(user.name, "bindery-admin");
        assert_eq!(user.groups, ["system:masters", "system:authenticated"]);
        assert_eq!(user.uid, None);
        assert_eq!(
            certificate_user(&ca, &peer(&other.admin().0)),
            Err(Refusal::UnknownCa),
            "another cluster's certificate is no provider user"
        );
        assert_eq!(
            certificate_user(&ca, &peer(&provider.front_proxy_client().0)),
            Err(Refusal::UnknownCa),
            "the front-proxy CA is not the client CA"
        );
        let mut nameless = peer(&provider.admin().0);
        nameless.common_name.clear();
        assert_eq!(certificate_user(&ca, &nameless), Err(Refusal::NoUserName));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn without_a_token_the_certificates_refusal_stands() {
        let dir = std::env::temp_dir().join(format!("bindery-pusers-{}", std::process::id()));
        let provider = crate::certs::ensure_cluster(&dir, "provider").unwrap();
        let other = crate::certs::ensure_cluster(&dir, "other").unwrap();
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        let users = ProviderUsers {
            provider: kube::Client::try_from(config).unwrap(),
            client_ca: Some(CaVerifier::from_pem(&std::fs::read(provider.ca()).unwrap()).unwrap()),
            reviews: TokenReviews::default(),
        };
        let none = http::HeaderMap::new();
        assert_eq!(
            users.authenticate(None, &none).await,
            Err(Refusal::NoCredential)
        );
        assert_eq!(
            users
                .authenticate(Some(&peer(&other.admin().0)), &none)
                .await,
            Err(Refusal::UnknownCa)
        );
        let user = users
            .authenticate(Some(&peer(&provider.admin().0)), &none)
            .await
            .expect("the provider's admin");
        assert_eq!(user.name, "bindery-admin");
        let _ = std::fs::remove_dir_all(dir);
    }
}
