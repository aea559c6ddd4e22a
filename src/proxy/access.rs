//! The provider's RBAC as the limit of what a consumer's request can do:
//! requests are made as the consumer's own provider-side account
//! (`BoundResource::impersonation`), and a refusal is answered in the
//! consumer's terms. The account's RBAC is made by the controllers as an
//! export appears, and in each provider namespace as it is made (by
//! `crate::provider_namespace`, before the request that made it goes on),
//! so a request can still meet a provider whose authorizer has not seen it
//! yet: a refused request is tried again once the provider says the account
//! may make it (asked with SubjectAccessReviews until the request's own
//! deadline). A refusal the provider's RBAC did not make (its admission, a
//! quota of its own) is the provider's answer, as it came.
//!
//! What the shared watch cache answers without asking the provider is
//! bounded the same way: only where the account may read, as a review the
//! provider answered says ([`Access::may`]), kept for [`REVIEW_TTL`] as
//! kube-apiserver's webhook authorizer keeps its answers.

use crate::status::ApiError;
use crate::translate::BoundResource;
use crate::translate::identity::{EXPORT_EXTRA, consumer_account, consumer_account_groups};
use k8s_openapi::api::authorization::v1::ResourceAttributes;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How often the provider is asked again while RBAC is on its way.
const POLL: Duration = Duration::from_millis(200);
/// What is kept of a request's time to answer it once the wait is over.
const ANSWER_TIME: Duration = Duration::from_secs(1);
/// How long an allowing review answers for the same account and attempt: a
/// grant the provider revokes stops cache reads within this.
pub const REVIEW_TTL: Duration = Duration::from_secs(10);
/// The most allowing reviews kept; more, and the expired go, or else all.
const REVIEWS_KEPT: usize = 65_536;

/// What a refused request's wait for RBAC came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// RBAC allowed it at once: the refusal was not RBAC's.
    Already,
    /// RBAC allows it now.
    Now,
    /// RBAC did not allow it before the deadline.
    Never,
}

/// What a provider request asks to do, as RBAC sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
    /// The allowing reviews, until when they answer, by a 128-bit keyed
    /// hash of account, export and attempt ([`Access::key`]): 32 bytes an
    /// entry, whatever the names.
    allowed: Mutex<HashMap<u128, Instant>>,
    /// The two hash keys, random per process.
    hashers: (RandomState, RandomState),
    /// A lock per key being reviewed: requests that miss at once wait for
    /// one review instead of each asking the provider.
    reviewing: dashmap::DashMap<u128, Arc<tokio::sync::Mutex<()>>>,
}

impl Access {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            allowed: Mutex::new(HashMap::new()),
            hashers: (RandomState::new(), RandomState::new()),
            reviewing: dashmap::DashMap::new(),
        }
    }

    /// The key of `attempt` by `bound`'s account for its export.
    fn key(&self, bound: &BoundResource, attempt: &Attempt) -> u128 {
        let of = |state: &RandomState| {
            state.hash_one((
                bound.namespaces.cluster_namespace(),
                bound.identity.label_value(),
                attempt,
            ))
        };
        (u128::from(of(&self.hashers.0)) << 64) | u128::from(of(&self.hashers.1))
    }

    /// Whether `bound`'s consumer's account may make `attempt` now, as the
    /// provider answered a review of it at most [`REVIEW_TTL`] ago. A
    /// provider that cannot answer allows nothing.
    pub async fn may(&self, bound: &BoundResource, attempt: &Attempt) -> bool {
        let key = self.key(bound, attempt);
        if self.allowed_now(key) {
            return true;
        }
        let lock = self.reviewing.entry(key).or_default().clone();
        let _reviewing = lock.lock().await;
        // The key's lock goes with this review, even one cancelled.
        let _forget = Forget(&self.reviewing, key);
        // Another request's review may have answered meanwhile.
        if self.allowed_now(key) {
            return true;
        }
        if !matches!(self.allowed(bound, attempt).await, Ok(true)) {
            return false;
        }
        let now = Instant::now();
        let mut kept = self.kept();
        if kept.len() >= REVIEWS_KEPT {
            kept.retain(|_, until| *until > now);
            if kept.len() >= REVIEWS_KEPT {
                kept.clear();
            }
        }
        kept.insert(key, now + REVIEW_TTL);
        true
    }

    /// Whether a kept review still allows `key`.
    fn allowed_now(&self, key: u128) -> bool {
        let now = Instant::now();
        self.kept().get(&key).is_some_and(|until| *until > now)
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<u128, Instant>> {
        self.allowed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `bound`'s consumer's account may make `attempt`, waiting
    /// for RBAC that is being made until a second before `deadline`.
    pub async fn settles(
        &self,
        bound: &BoundResource,
        attempt: &Attempt,
        deadline: tokio::time::Instant,
    ) -> Settled {
        let until = deadline.checked_sub(ANSWER_TIME).unwrap_or(deadline);
        let mut first = true;
        loop {
            match self.allowed(bound, attempt).await {
                Ok(true) if first => return Settled::Already,
                Ok(true) => return Settled::Now,
                Ok(false) | Err(_) if tokio::time::Instant::now() >= until => {
                    return Settled::Never;
                }
                _ => tokio::time::sleep(POLL).await,
            }
            first = false;
        }
    }

    async fn allowed(&self, bound: &BoundResource, attempt: &Attempt) -> kube::Result<bool> {
        let cluster_namespace = bound.namespaces.cluster_namespace();
        let account = crate::auth::RequestUser {
            name: consumer_account(cluster_namespace),
            uid: None,
            groups: consumer_account_groups(cluster_namespace),
            extra: BTreeMap::from([(
                EXPORT_EXTRA.to_string(),
                vec![bound.identity.label_value().to_string()],
            )]),
        };
        let review = crate::authz::attributes::review_of(
            &account,
            ResourceAttributes {
                verb: Some(attempt.verb.into()),
                group: Some(attempt.group.clone()),
                resource: Some(attempt.resource.clone()),
                subresource: attempt.subresource.clone(),
                namespace: attempt.namespace.clone(),
                name: attempt.name.clone(),
                ..Default::default()
            },
        );
        Ok(crate::authz::ask(&self.client, &review).await?.allowed)
    }
}

/// Removes a key's review lock when its review is over.
struct Forget<'a>(
    &'a dashmap::DashMap<u128, Arc<tokio::sync::Mutex<()>>>,
    u128,
);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.0.remove(&self.1);
    }
}

/// Whether `body` (a 403's) is the provider's RBAC refusing `bound`'s
/// consumer's account: kube-apiserver's authorizer words it `User "<the
/// account>" cannot …`; admission and quotas word theirs otherwise.
pub fn refused_by_rbac(bound: &BoundResource, body: &[u8]) -> bool {
    let account = consumer_account(bound.namespaces.cluster_namespace());
    let Ok(status) = crate::deep::from_slice::<serde_json::Value>(body) else {
        return true;
    };
    let message = status["message"].as_str().unwrap_or_default();
    message.contains(&format!("User {account:?} cannot "))
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
