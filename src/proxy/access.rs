//! The provider's RBAC as the limit of what a consumer's request can do:
//! requests are made as the consumer's own provider-side account
//! (`BoundResource::impersonation`), and a refusal is answered in the
//! consumer's terms. The account's RBAC is made by the controllers as an
//! export and its namespaces appear, so a first request can arrive before
//! it: a refused request is tried again once the provider says the account
//! may make it (asked with a SubjectAccessReview, for a few seconds).

use crate::status::ApiError;
use crate::translate::BoundResource;
use crate::translate::identity::{EXPORT_EXTRA, consumer_account, consumer_account_groups};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a refused request waits for RBAC that may still be coming.
pub const PATIENCE: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(200);

/// What a provider request asks to do, as RBAC sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub verb: &'static str,
    pub group: String,
    pub resource: String,
    pub subresource: Option<String>,
    /// The provider namespace.
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// Asks the provider what a consumer's account may do.
pub struct Access {
    client: kube::Client,
    patience: Duration,
}

impl Access {
    pub fn new(client: kube::Client) -> Self {
        Self::with_patience(client, PATIENCE)
    }

    /// Waits `patience` for RBAC before a refusal stands.
    pub fn with_patience(client: kube::Client, patience: Duration) -> Self {
        Self { client, patience }
    }

    /// Whether `bound`'s consumer's account may make `attempt`, waiting a
    /// while for RBAC that is being made. `false` when it still may not.
    pub async fn settles(&self, bound: &BoundResource, attempt: &Attempt) -> bool {
        let deadline = tokio::time::Instant::now() + self.patience;
        loop {
            match self.allowed(bound, attempt).await {
                Ok(true) => return true,
                Ok(false) | Err(_) if tokio::time::Instant::now() >= deadline => return false,
                _ => tokio::time::sleep(POLL).await,
            }
        }
    }

    async fn allowed(&self, bound: &BoundResource, attempt: &Attempt) -> kube::Result<bool> {
        let cluster_namespace = bound.namespaces.cluster_namespace();
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(consumer_account(cluster_namespace)),
                groups: Some(consumer_account_groups(cluster_namespace)),
                extra: Some(BTreeMap::from([(
                    EXPORT_EXTRA.to_string(),
                    vec![bound.identity.label_value().to_string()],
                )])),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(attempt.verb.into()),
                    group: Some(attempt.group.clone()),
                    resource: Some(attempt.resource.clone()),
                    subresource: attempt.subresource.clone(),
                    namespace: attempt.namespace.clone(),
                    name: attempt.name.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }
}

/// The provider refused a consumer's request: answered as kube-apiserver
/// answers a request its authorizer refuses, in the consumer's terms. The
/// provider's own words (its account, namespaces, policies) stay behind.
pub fn refused(
    bound: &BoundResource,
    user: &str,
    verb: &str,
    consumer_namespace: Option<&str>,
    name: Option<&str>,
) -> ApiError {
    let scope = match consumer_namespace {
        Some(namespace) => format!("in the namespace {namespace:?}"),
        None => "at the cluster scope".into(),
    };
    ApiError::forbidden(
        &bound.group,
        &bound.resource,
        name,
        &format!(
            "User {user:?} cannot {verb} resource {:?} in API group {:?} {scope}",
            bound.resource, bound.group
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::binding::fixtures::widgets;

    #[test]
    fn a_refusal_names_nothing_of_the_provider() {
        let w = widgets();
        let error = refused(&w, "alice", "create", Some("team"), None);
        assert_eq!(error.code, 403);
        assert_eq!(
            error.message,
            "widgets.example.com is forbidden: User \"alice\" cannot create resource \"widgets\" in API group \"example.com\" in the namespace \"team\""
        );
        assert!(!format!("{error:?}").contains("kube-bind"));
        let named = refused(&w, "alice", "delete", Some("team"), Some("w"));
        assert!(
            named
                .message
                .starts_with("widgets.example.com \"w\" is forbidden")
        );
        let _ = ApiError::unauthorized();
    }
}
