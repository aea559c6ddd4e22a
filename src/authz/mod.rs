//! Authorization of consumer requests: every request is checked with a
//! SubjectAccessReview against the app cluster it comes from, with the
//! attributes kube-apiserver would check for a local CRD, and the decision
//! is cached briefly ([`cache`]). A denial is kube-apiserver's own 403
//! ([`attributes`]); a review that cannot be made is its 500.

pub mod attributes;
pub mod cache;

use crate::status::ApiError;
use attributes::Attributes;
use cache::{CacheSettings, Decision, DecisionCache};
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::api::{Api, PostParams};
use std::time::Instant;

/// Asks app clusters, remembering their answers briefly.
pub struct Authorizer {
    cache: DecisionCache,
}

impl Authorizer {
    pub fn new(settings: CacheSettings) -> Self {
        Self {
            cache: DecisionCache::new(settings),
        }
    }

    /// `Ok` when `app` (the app cluster of `consumer`) allows `attributes`;
    /// else the error to answer with.
    pub async fn authorize(
        &self,
        app: &kube::Client,
        consumer: &str,
        attributes: &Attributes,
    ) -> Result<(), ApiError> {
        let review = attributes.review();
        let key = format!(
            "{consumer}\n{}",
            serde_json::to_string(&review.spec).unwrap_or_default()
        );
        let decision = match self.cache.get(&key, Instant::now()) {
            Some(cached) => cached,
            None => {
                let asked = Instant::now();
                let answer = Api::<SubjectAccessReview>::all(app.clone())
                    .create(&PostParams::default(), &review)
                    .await
                    .map_err(|error| ApiError::internal(error.to_string()))?;
                let status = answer.status.unwrap_or_default();
                let decision = if status.allowed {
                    Decision::Allowed
                } else {
                    Decision::Denied(status.reason.unwrap_or_default())
                };
                // An answer given while the authorizer erred is not kept.
                if status.evaluation_error.is_none_or(|e| e.is_empty()) {
                    self.cache.put(key, &decision, asked);
                }
                decision
            }
        };
        match decision {
            Decision::Allowed => Ok(()),
            Decision::Denied(reason) => Err(attributes.forbidden(&reason)),
        }
    }

    /// How many decisions are cached, allowed and denied.
    pub fn cached(&self) -> (usize, usize) {
        self.cache.len()
    }
}
