//! Metrics of authentication and authorization, with kube-apiserver's
//! names: attempts and their time by result, the token-review and
//! SubjectAccessReview calls made to the clusters callers belong to, and
//! how often a remembered answer spared one.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabels {
    pub status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabels {
    pub code: String,
}

type Histograms = Family<ResultLabels, Histogram, fn() -> Histogram>;

pub struct AuthMetrics {
    authentication: Family<ResultLabels, Counter>,
    authentication_duration: Histograms,
    token_cache: Family<StatusLabels, Counter>,
    token_reviews: Family<CodeLabels, Counter>,
    authorization: Family<ResultLabels, Counter>,
    authorization_duration: Histograms,
    decision_cache: Family<StatusLabels, Counter>,
    access_reviews: Family<CodeLabels, Counter>,
}

fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

impl AuthMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let authentication = Family::<ResultLabels, Counter>::default();
        registry.register(
            "authentication_attempts",
            "Counter of authenticated attempts, by result (success, failure, error).",
            authentication.clone(),
        );
        let authentication_duration: Histograms = Family::new_with_constructor(latency);
        registry.register(
            "authentication_duration_seconds",
            "Authentication duration in seconds broken out by result.",
            authentication_duration.clone(),
        );
        let token_cache = Family::<StatusLabels, Counter>::default();
        registry.register(
            "authentication_token_cache_request",
            "Counter of token lookups in the cache of token reviews, by status (hit, miss).",
            token_cache.clone(),
        );
        let token_reviews = Family::<CodeLabels, Counter>::default();
        registry.register(
            "apiserver_delegated_authn_request",
            "Number of TokenReviews sent, partitioned by status code (<error> when none came).",
            token_reviews.clone(),
        );
        let authorization = Family::<ResultLabels, Counter>::default();
        registry.register(
            "authorization_attempts",
            "Counter of authorization attempts, by result (allowed, denied, error).",
            authorization.clone(),
        );
        let authorization_duration: Histograms = Family::new_with_constructor(latency);
        registry.register(
            "authorization_duration_seconds",
            "Authorization duration in seconds broken out by result.",
            authorization_duration.clone(),
        );
        let decision_cache = Family::<StatusLabels, Counter>::default();
        registry.register(
            "bindery_authorization_cache_request",
            "Counter of authorization decisions looked up in the decision cache, by status (hit, miss).",
            decision_cache.clone(),
        );
        let access_reviews = Family::<CodeLabels, Counter>::default();
        registry.register(
            "apiserver_delegated_authz_request",
            "Number of SubjectAccessReviews sent, partitioned by status code (<error> when none came).",
            access_reviews.clone(),
        );
        Self {
            authentication,
            authentication_duration,
            token_cache,
            token_reviews,
            authorization,
            authorization_duration,
            decision_cache,
            access_reviews,
        }
    }

    /// One authentication: `success`, `failure` (refused) or `error`.
    pub fn authenticated(&self, result: &'static str, took: Duration) {
        let labels = ResultLabels { result };
        self.authentication.get_or_create(&labels).inc();
        self.authentication_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// A token looked up among the remembered token reviews.
    pub fn token_cache(&self, hit: bool) {
        let status = if hit { "hit" } else { "miss" };
        self.token_cache
            .get_or_create(&StatusLabels { status })
            .inc();
    }

    /// A TokenReview sent: its answer's status code, `None` when none came.
    pub fn token_review(&self, code: Option<u16>) {
        self.token_reviews.get_or_create(&code_labels(code)).inc();
    }

    /// One authorization: `allowed`, `denied` or `error`.
    pub fn authorized(&self, result: &'static str, took: Duration) {
        let labels = ResultLabels { result };
        self.authorization.get_or_create(&labels).inc();
        self.authorization_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// A decision looked up among the remembered ones.
    pub fn decision_cache(&self, hit: bool) {
        let status = if hit { "hit" } else { "miss" };
        self.decision_cache
            .get_or_create(&StatusLabels { status })
            .inc();
    }

    /// A SubjectAccessReview sent: its answer's status code, `None` when
    /// none came.
    pub fn access_review(&self, code: Option<u16>) {
        self.access_reviews.get_or_create(&code_labels(code)).inc();
    }
}

fn code_labels(code: Option<u16>) -> CodeLabels {
    CodeLabels {
        code: code.map_or_else(|| "<error>".to_string(), |c| c.to_string()),
    }
}

/// The status code a kube-rs error carries, if the server answered.
pub fn code_of(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}
