//! Whether a binder may bind: a binder is a user of the provider cluster
//! (authenticated by the authentication layer, `crate::auth::provider`), and
//! may bind a template only with the `bind` verb on it, asked with a
//! SubjectAccessReview in the provider through the one cached
//! [`Authorizer`], as kcp asks for `bind` on an APIExport. Other actions (a
//! provider administrator's) are asked the same way, and refused with
//! kube-apiserver's 403.

use crate::authz::attributes::RequestUser;
use crate::authz::cache::Decision;
use crate::authz::{Authorizer, PROVIDER};
use crate::status::ApiError;
use k8s_openapi::api::authorization::v1::ResourceAttributes;

/// A binder: a user of the provider cluster.
pub type Binder = RequestUser;

pub const TEMPLATE_GROUP: &str = "kube-bind.io";
pub const TEMPLATE_RESOURCE: &str = "apiserviceexporttemplates";
pub const BIND_VERB: &str = "bind";

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
    authorizer: &Authorizer,
    provider: &kube::Client,
    binder: &Binder,
    template: &str,
) -> Result<bool, ApiError> {
    may(authorizer, provider, binder, &bind_action(template)).await
}

/// Whether the provider allows `binder` `action`, asked with a
/// SubjectAccessReview there (its decision remembered briefly).
pub async fn may(
    authorizer: &Authorizer,
    provider: &kube::Client,
    binder: &Binder,
    action: &Action<'_>,
) -> Result<bool, ApiError> {
    let review = crate::authz::attributes::review_of(
        binder,
        ResourceAttributes {
            verb: Some(action.verb.into()),
            group: Some(action.group.into()),
            resource: Some(action.resource.into()),
            namespace: action.namespace.map(str::to_string),
            name: Some(action.name.into()),
            ..Default::default()
        },
    );
    let decision = authorizer
        .review(provider, PROVIDER, review)
        .await
        .map_err(|e| {
            let cause = e.message.strip_prefix("Internal error occurred: ");
            ApiError::internal(format!(
                "asking whether the binder may {} {}: {}",
                action.verb,
                action.resource,
                cause.unwrap_or(&e.message)
            ))
        })?;
    Ok(decision == Decision::Allowed)
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
