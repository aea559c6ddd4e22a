//! Who binds, and whether they may: a binder shows a client certificate of
//! the provider's client CA (user = CN, groups = O, as kube-apiserver reads
//! it) or a bearer token the provider accepts (reviewed with a TokenReview in
//! the provider), and may
//! bind a template only with the `bind` verb on it, asked with a
//! SubjectAccessReview in the provider, as kcp asks for `bind` on an
//! APIExport. Other actions (a provider administrator's) are asked the same
//! way, and refused with kube-apiserver's 403.

use crate::auth::PeerCertificate;
use crate::auth::trust::CaVerifier;
use crate::authz::attributes::RequestUser;
use crate::status::ApiError;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};

/// A binder: a user of the provider cluster.
pub type Binder = RequestUser;

pub const TEMPLATE_GROUP: &str = "kube-bind.io";
pub const TEMPLATE_RESOURCE: &str = "apiserviceexporttemplates";
pub const BIND_VERB: &str = "bind";

/// What a request to `/bind` shows of its sender.
pub struct Caller<'a> {
    pub headers: &'a http::HeaderMap,
    /// The TLS client certificate, if one was sent.
    pub peer: Option<&'a PeerCertificate>,
}

/// The provider's user behind the request: its client certificate when the
/// provider's client CA issued it (checked first, as kube-apiserver does),
/// else its bearer token; `None` when neither is accepted.
pub async fn authenticate(
    provider: &kube::Client,
    provider_client_ca: Option<&CaVerifier>,
    caller: &Caller<'_>,
) -> Result<Option<Binder>, ApiError> {
    if let (Some(ca), Some(peer)) = (provider_client_ca, caller.peer)
        && let Some(binder) = certificate_user(ca, peer)
    {
        return Ok(Some(binder));
    }
    let Some(token) = crate::auth::service_account::bearer_token(caller.headers) else {
        return Ok(None);
    };
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_string()),
            audiences: None,
        },
        ..Default::default()
    };
    let answer = Api::<TokenReview>::all(provider.clone())
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| ApiError::internal(format!("reviewing the binder's token: {e}")))?;
    let status = answer.status.unwrap_or_default();
    if status.authenticated != Some(true) {
        return Ok(None);
    }
    let user = status.user.unwrap_or_default();
    Ok(Some(Binder {
        name: user.username.unwrap_or_default(),
        uid: user.uid.filter(|u| !u.is_empty()),
        groups: user.groups.unwrap_or_default(),
        extra: user.extra.unwrap_or_default().into_iter().collect(),
    }))
}

/// The user of a client certificate the provider's client CA issued, as
/// kube-apiserver's x509 authenticator names it: CN the user, each O a group,
/// and every authenticated user is in `system:authenticated`.
pub fn certificate_user(ca: &CaVerifier, peer: &PeerCertificate) -> Option<Binder> {
    if peer.common_name.is_empty() || !ca.verifies(&peer.der) {
        return None;
    }
    let mut groups = peer.organizations.clone();
    if !groups.iter().any(|g| g == AUTHENTICATED) {
        groups.push(AUTHENTICATED.into());
    }
    Some(Binder {
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

/// One action on a provider object, as a SubjectAccessReview asks it.
pub struct Action<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    /// `None` for a cluster-scoped object.
    pub namespace: Option<&'a str>,
    pub name: &'a str,
}

/// `bind` on template `template`.
fn bind_action(template: &str) -> Action<'_> {
    Action {
        verb: BIND_VERB,
        group: TEMPLATE_GROUP,
        resource: TEMPLATE_RESOURCE,
        namespace: None,
        name: template,
    }
}

/// Whether `binder` holds `bind` on template `template` in the provider.
pub async fn may_bind(
    provider: &kube::Client,
    binder: &Binder,
    template: &str,
) -> Result<bool, ApiError> {
    may(provider, binder, &bind_action(template)).await
}

/// Whether the provider allows `binder` `action`, asked with a
/// SubjectAccessReview there.
pub async fn may(
    provider: &kube::Client,
    binder: &Binder,
    action: &Action<'_>,
) -> Result<bool, ApiError> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(binder.name.clone()),
            uid: binder.uid.clone(),
            groups: Some(binder.groups.clone()),
            extra: (!binder.extra.is_empty()).then(|| binder.extra.clone()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(action.verb.into()),
                group: Some(action.group.into()),
                resource: Some(action.resource.into()),
                namespace: action.namespace.map(str::to_string),
                name: Some(action.name.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SubjectAccessReview>::all(provider.clone())
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| {
            ApiError::internal(format!(
                "asking whether the binder may {} {}: {e}",
                action.verb, action.resource
            ))
        })?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// kube-apiserver's 403 for a binder without `bind` on `template`.
pub fn forbidden(binder: &Binder, template: &str) -> ApiError {
    refused(binder, &bind_action(template), None)
}

/// kube-apiserver's 403 for `binder` on `action`, its authorizer's wording
/// after `why` when bindery has a reason of its own to ask.
pub fn refused(binder: &Binder, action: &Action<'_>, why: Option<&str>) -> ApiError {
    let scope = match action.namespace {
        Some(namespace) => format!("in the namespace {namespace:?}"),
        None => "at the cluster scope".into(),
    };
    let denied = format!(
        "User {:?} cannot {} resource {:?} in API group {:?} {scope}",
        binder.name, action.verb, action.resource, action.group
    );
    let message = match why {
        Some(why) => format!("{why}, and {denied}"),
        None => denied,
    };
    ApiError::forbidden(action.group, action.resource, Some(action.name), &message)
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
    fn a_certificate_of_the_provider_client_ca_names_the_binder_like_kube_apiserver() {
        let dir = std::env::temp_dir().join(format!("bindery-binder-{}", std::process::id()));
        let provider = crate::certs::ensure_cluster(&dir, "provider").unwrap();
        let other = crate::certs::ensure_cluster(&dir, "other").unwrap();
        let ca = CaVerifier::from_pem(&std::fs::read(provider.ca()).unwrap()).unwrap();
        let binder = certificate_user(&ca, &peer(&provider.admin().0)).expect("accepted");
        assert_eq!(binder.name, "bindery-admin");
        assert_eq!(binder.groups, ["system:masters", "system:authenticated"]);
        assert_eq!(binder.uid, None);
        assert!(
            certificate_user(&ca, &peer(&other.admin().0)).is_none(),
            "another cluster's certificate is no provider user"
        );
        assert!(
            certificate_user(&ca, &peer(&provider.front_proxy_client().0)).is_none(),
            "the front-proxy CA is not the client CA"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn forbidden_reads_like_kube_apiserver() {
        let binder = Binder {
            name: "system:serviceaccount:team:ci".into(),
            ..Default::default()
        };
        let error = forbidden(&binder, "postgresql");
        assert_eq!(error.code, 403);
        assert_eq!(
            error.message,
            "apiserviceexporttemplates.kube-bind.io \"postgresql\" is forbidden: User \
             \"system:serviceaccount:team:ci\" cannot bind resource \"apiserviceexporttemplates\" \
             in API group \"kube-bind.io\" at the cluster scope"
        );
    }

    #[test]
    fn a_refusal_with_a_reason_keeps_the_authorizers_wording_after_it() {
        let binder = Binder {
            name: "mallory".into(),
            ..Default::default()
        };
        let action = Action {
            verb: "update",
            group: "",
            resource: "secrets",
            namespace: Some("kube-bind-abc"),
            name: "app-cluster",
        };
        let error = refused(&binder, &action, Some("it is registered"));
        assert_eq!((error.code, error.reason), (403, "Forbidden"));
        assert_eq!(
            error.message,
            "secrets \"app-cluster\" is forbidden: it is registered, and User \"mallory\" \
             cannot update resource \"secrets\" in API group \"\" in the namespace \"kube-bind-abc\""
        );
        assert_eq!(
            error.details,
            Some(serde_json::json!({"name": "app-cluster", "group": "", "kind": "secrets"}))
        );
    }
}
