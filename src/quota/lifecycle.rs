//! kube-apiserver's NamespaceLifecycle admission for creates of bound
//! objects, which a request through an app cluster's aggregator never
//! passes: content may be created only in a namespace of the app cluster
//! that exists (404 `namespaces "X" not found` otherwise) and is not being
//! deleted (403 `unable to create new content in namespace X because it is
//! being terminated`, with its `NamespaceTerminating` cause). So a create
//! in a namespace the app cluster does not have makes nothing on the
//! provider, and an app namespace being deleted gets no new content while
//! its namespace controller empties it. The app cluster is asked with
//! bindery's account there (`get` on namespaces, written by `bindery
//! bind`); what it said is kept for a moment. An app cluster that cannot
//! tell (an older binding's account, an outage) lets the create go on, as
//! before.

use crate::auth::registrations::Registrations;
use crate::expiring::ExpiringMap;
use crate::status::ApiError;
use k8s_openapi::api::core::v1::Namespace;
use serde_json::json;
use std::time::{Duration, Instant};

/// How long an app namespace's state is kept.
const KEPT: Duration = Duration::from_secs(2);

/// What an app namespace allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppNamespace {
    Active,
    Terminating,
    Missing,
    /// The app cluster could not tell.
    Unknown,
}

/// The app clusters' namespaces, as creates need them.
pub struct NamespaceLifecycle {
    registrations: Registrations,
    kept: ExpiringMap<(String, String), AppNamespace>,
}

impl NamespaceLifecycle {
    pub fn new(registrations: Registrations) -> Self {
        Self {
            registrations,
            kept: ExpiringMap::new(KEPT, 10_000),
        }
    }

    /// Whether `consumer`'s app cluster lets an object `name` of
    /// `group`/`resource` be created in its namespace `namespace`; a
    /// consumer without a registered app cluster has no namespaces to ask.
    pub async fn admit(
        &self,
        consumer: &str,
        namespace: &str,
        subject: (&str, &str, &str),
    ) -> Result<(), ApiError> {
        refusal(self.state(consumer, namespace).await, namespace, subject)
    }

    async fn state(&self, consumer: &str, namespace: &str) -> AppNamespace {
        let key = (consumer.to_string(), namespace.to_string());
        if let Some(state) = self.kept.get(&key, Instant::now()) {
            return state;
        }
        let Some(registration) = self.registrations.get(consumer) else {
            return AppNamespace::Unknown;
        };
        let namespaces = kube::Api::<Namespace>::all(registration.app.clone());
        let state = match namespaces.get_opt(namespace).await {
            Ok(Some(found)) if found.metadata.deletion_timestamp.is_some() => {
                AppNamespace::Terminating
            }
            Ok(Some(found))
                if found.status.as_ref().and_then(|s| s.phase.as_deref())
                    == Some("Terminating") =>
            {
                AppNamespace::Terminating
            }
            Ok(Some(_)) => AppNamespace::Active,
            Ok(None) => AppNamespace::Missing,
            Err(_) => AppNamespace::Unknown,
        };
        self.kept.insert(key, state, Instant::now());
        state
    }
}

/// kube-apiserver's refusal of a create in `namespace` of that `state`, for
/// object `subject` (group, resource, name).
pub fn refusal(
    state: AppNamespace,
    namespace: &str,
    (group, resource, name): (&str, &str, &str),
) -> Result<(), ApiError> {
    match state {
        AppNamespace::Active | AppNamespace::Unknown => Ok(()),
        AppNamespace::Missing => Err(ApiError::object_not_found("", "namespaces", namespace)),
        AppNamespace::Terminating => {
            let mut error = ApiError::forbidden(
                group,
                resource,
                Some(name).filter(|n| !n.is_empty()),
                &format!(
                    "unable to create new content in namespace {namespace} because it is being terminated"
                ),
            );
            if let Some(details) = error.details.as_mut() {
                details["causes"] = json!([{
                    "reason": "NamespaceTerminating",
                    "message": format!("namespace {namespace} is being terminated"),
                    "field": "metadata.namespace",
                }]);
            }
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_are_refused_as_namespace_lifecycle_refuses_them() {
        let subject = ("example.com", "widgets", "w");
        assert!(refusal(AppNamespace::Active, "team", subject).is_ok());
        assert!(refusal(AppNamespace::Unknown, "team", subject).is_ok());
        let missing = refusal(AppNamespace::Missing, "team", subject).unwrap_err();
        assert_eq!(
            (missing.code, missing.message.as_str()),
            (404, r#"namespaces "team" not found"#)
        );
        let going = refusal(AppNamespace::Terminating, "team", subject).unwrap_err();
        assert_eq!(going.code, 403);
        assert_eq!(
            going.message,
            r#"widgets.example.com "w" is forbidden: unable to create new content in namespace team because it is being terminated"#
        );
        assert_eq!(
            going.details.unwrap()["causes"][0]["reason"],
            "NamespaceTerminating"
        );
    }
}
