//! Who binds, and whether they may: a binder shows a bearer token the
//! provider accepts (reviewed with a TokenReview in the provider), and may
//! bind a template only with the `bind` verb on it, asked with a
//! SubjectAccessReview in the provider, as kcp asks for `bind` on an
//! APIExport.

use crate::authz::attributes::RequestUser;
use crate::status::ApiError;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

/// A binder: a user of the provider cluster.
pub type Binder = RequestUser;

pub const TEMPLATE_GROUP: &str = "kube-bind.io";
pub const TEMPLATE_RESOURCE: &str = "apiserviceexporttemplates";
pub const BIND_VERB: &str = "bind";

/// The provider's user behind the request's bearer token; `None` when there
/// is no token or the provider does not accept it.
pub async fn authenticate(
    provider: &kube::Client,
    headers: &http::HeaderMap,
) -> Result<Option<Binder>, ApiError> {
    let Some(token) = crate::auth::service_account::bearer_token(headers) else {
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

/// Whether `binder` holds `bind` on template `template` in the provider.
pub async fn may_bind(
    provider: &kube::Client,
    binder: &Binder,
    template: &str,
) -> Result<bool, ApiError> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(binder.name.clone()),
            uid: binder.uid.clone(),
            groups: Some(binder.groups.clone()),
            extra: (!binder.extra.is_empty()).then(|| binder.extra.clone()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(BIND_VERB.into()),
                group: Some(TEMPLATE_GROUP.into()),
                resource: Some(TEMPLATE_RESOURCE.into()),
                name: Some(template.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SubjectAccessReview>::all(provider.clone())
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| ApiError::internal(format!("asking whether the binder may bind: {e}")))?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// kube-apiserver's 403 for a binder without `bind` on `template`.
pub fn forbidden(binder: &Binder, template: &str) -> ApiError {
    ApiError::forbidden(
        TEMPLATE_GROUP,
        TEMPLATE_RESOURCE,
        Some(template),
        &format!(
            "User {:?} cannot {BIND_VERB} resource {TEMPLATE_RESOURCE:?} in API group \
             {TEMPLATE_GROUP:?} at the cluster scope",
            binder.name
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
