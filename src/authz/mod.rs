//! Authorization: one [`Authorizer`] asks the authority a caller belongs to
//! with a SubjectAccessReview (an app cluster for its users, the provider
//! for its own), and remembers the decision briefly ([`cache`]). Which
//! authority is asked for which request is decided in one place, the
//! authorization layer (`crate::server::authz`); `/bind` asks the same
//! Authorizer per template. A denial is kube-apiserver's own 403
//! ([`attributes`]); a review that cannot be made is its 500.

pub mod attributes;
pub mod cache;

use crate::status::ApiError;
use attributes::Access;
use cache::{CacheSettings, Decision, DecisionCache};
use k8s_openapi::api::authorization::v1::{SubjectAccessReview, SubjectAccessReviewStatus};
use kube::api::{Api, PostParams};
use std::time::Instant;

/// The scope the provider's decisions are cached under, apart from every
/// app cluster's (those are cached under their consumer's id, a DNS label,
/// which never contains `@`).
pub const PROVIDER: &str = "@provider";

/// Asks app clusters and the provider, remembering their answers briefly.
pub struct Authorizer {
    cache: DecisionCache,
}

impl Authorizer {
    pub fn new(settings: CacheSettings) -> Self {
        Self {
            cache: DecisionCache::new(settings),
        }
    }

    /// `Ok` when the cluster `client` reaches (cached under `scope`: the
    /// consumer of an app cluster, or [`PROVIDER`]) allows `attributes`;
    /// else kube-apiserver's 403.
    pub async fn authorize(
        &self,
        client: &kube::Client,
        scope: &str,
        attributes: &impl Access,
    ) -> Result<(), ApiError> {
        let started = Instant::now();
        let decision = self.review(client, scope, attributes.review()).await;
        let auth = &crate::metrics::metrics().auth;
        let took = started.elapsed();
        crate::timing::add(crate::timing::Phase::Authorization, took);
        match decision {
            Ok(Decision::Allowed) => {
                auth.authorized("allowed", took);
                Ok(())
            }
            Ok(Decision::Denied(reason)) => {
                auth.authorized("denied", took);
                Err(attributes.forbidden(&reason))
            }
            Err(error) => {
                auth.authorized("error", took);
                Err(error)
            }
        }
    }

    /// The decision on `review` of the cluster `client` reaches, cached
    /// under `scope` and the review's whole spec.
    pub async fn review(
        &self,
        client: &kube::Client,
        scope: &str,
        review: SubjectAccessReview,
    ) -> Result<Decision, ApiError> {
        let key = format!(
            "{scope}\n{}",
            serde_json::to_string(&review.spec).unwrap_or_default()
        );
        let metrics = &crate::metrics::metrics().auth;
        if let Some(cached) = self.cache.get(&key, Instant::now()) {
            metrics.decision_cache(true);
            return Ok(cached);
        }
        metrics.decision_cache(false);
        let asked = Instant::now();
        let status = ask(client, &review)
            .await
            .map_err(|error| ApiError::internal(error.to_string()))?;
        let decision = if status.allowed {
            Decision::Allowed
        } else {
            Decision::Denied(status.reason.unwrap_or_default())
        };
        // An answer given while the authorizer erred is not kept.
        if status.evaluation_error.is_none_or(|e| e.is_empty()) {
            self.cache.put(key, &decision, asked);
        }
        Ok(decision)
    }

    /// How many decisions are cached, allowed and denied.
    pub fn cached(&self) -> (usize, usize) {
        self.cache.len()
    }
}

/// Sends `review` to the cluster `client` reaches, counted in
/// `apiserver_delegated_authz_request_total`: the one place bindery asks a
/// cluster for a decision (the [`Authorizer`], and the provider RBAC check
/// of a consumer's account, `proxy::access`, which keeps its answers its own
/// way).
pub async fn ask(
    client: &kube::Client,
    review: &SubjectAccessReview,
) -> kube::Result<SubjectAccessReviewStatus> {
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), review)
        .await;
    crate::metrics::metrics().auth.access_review(match &answer {
        Ok(_) => Some(201),
        Err(error) => crate::metrics::auth::code_of(error),
    });
    Ok(answer?.status.unwrap_or_default())
}
