//! Bearer tokens reviewed by the cluster that issued them (a TokenReview),
//! and the answers remembered: accepted and refused tokens alike, 10 s each
//! by default, the cache kube-apiserver's delegated authentication keeps
//! (`DelegatingAuthenticationOptions.CacheTTL`, used for success and
//! failure). As there, a review that could not be made is not remembered,
//! and concurrent reviews of one token are made once.
//!
//! Tokens are never kept: entries are keyed by an HMAC-SHA256 of the scope
//! (the cluster asked) and the token, under a key made at start. Each map
//! holds at most `capacity` entries (10,000 by default: a few MB for
//! accepted users, far less for refusals), so a stream of garbage tokens
//! costs one review each and bounded memory.

use super::{Refusal, RequestUser};
use crate::expiring::ExpiringMap;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long answers are kept, and how many of each.
#[derive(Clone, Copy, Debug)]
pub struct ReviewSettings {
    pub accepted_ttl: Duration,
    pub refused_ttl: Duration,
    /// Entries per map at most.
    pub capacity: usize,
}

impl Default for ReviewSettings {
    fn default() -> Self {
        Self {
            accepted_ttl: Duration::from_secs(10),
            refused_ttl: Duration::from_secs(10),
            capacity: 10_000,
        }
    }
}

type Key = [u8; 32];
type Answer = Result<RequestUser, Refusal>;

/// Token reviews with their answers remembered; cheap to clone.
#[derive(Clone)]
pub struct TokenReviews {
    inner: Arc<Inner>,
}

struct Inner {
    hmac: ring::hmac::Key,
    accepted: ExpiringMap<Key, RequestUser>,
    refused: ExpiringMap<Key, Refusal>,
    /// Reviews being made, which callers with the same token wait for.
    in_flight: Mutex<HashMap<Key, Shared<BoxFuture<'static, Answer>>>>,
}

impl Default for TokenReviews {
    fn default() -> Self {
        Self::new(ReviewSettings::default())
    }
}

impl TokenReviews {
    pub fn new(settings: ReviewSettings) -> Self {
        let random = ring::rand::SystemRandom::new();
        let hmac = ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &random)
            .expect("the system's random source works");
        Self {
            inner: Arc::new(Inner {
                hmac,
                accepted: ExpiringMap::new(settings.accepted_ttl, settings.capacity),
                refused: ExpiringMap::new(settings.refused_ttl, settings.capacity),
                in_flight: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The user the cluster `client` reaches makes of `token`, asked with a
    /// TokenReview there unless an answer for `scope` (a name of that
    /// cluster) is remembered.
    pub async fn review(&self, client: &kube::Client, scope: &str, token: &str) -> Answer {
        let client = client.clone();
        self.review_with(scope, token, move |token| ask(client, token))
            .await
    }

    /// [`Self::review`] with `asker` making the review.
    pub async fn review_with<F, Fut>(&self, scope: &str, token: &str, asker: F) -> Answer
    where
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = Answer> + Send + 'static,
    {
        let key = self.key(scope, token);
        let metrics = &crate::metrics::metrics().auth;
        if let Some(answer) = self.inner.remembered(&key) {
            metrics.token_cache(true);
            return answer;
        }
        metrics.token_cache(false);
        let pending = {
            let mut in_flight = self.inner.lock();
            // Checked again under the lock: a review that ended meanwhile
            // has left its answer before leaving `in_flight`.
            if let Some(answer) = self.inner.remembered(&key) {
                return answer;
            }
            match in_flight.get(&key) {
                Some(pending) => pending.clone(),
                None => {
                    // Its own task, so that the review ends (and is
                    // remembered) however many callers give up waiting.
                    let inner = self.inner.clone();
                    let review = asker(token.to_string());
                    let task = tokio::spawn(async move {
                        let asked = Instant::now();
                        let answer = review.await;
                        match &answer {
                            Ok(user) => inner.accepted.insert(key, user.clone(), asked),
                            Err(Refusal::ReviewFailed(_)) => {}
                            Err(refusal) => inner.refused.insert(key, refusal.clone(), asked),
                        }
                        inner.lock().remove(&key);
                        answer
                    });
                    let pending = async move {
                        task.await
                            .unwrap_or_else(|e| Err(Refusal::ReviewFailed(e.to_string())))
                    }
                    .boxed()
                    .shared();
                    in_flight.insert(key, pending.clone());
                    pending
                }
            }
        };
        pending.await
    }

    /// How many answers are remembered, accepted and refused.
    pub fn remembered(&self) -> (usize, usize) {
        (self.inner.accepted.len(), self.inner.refused.len())
    }

    fn key(&self, scope: &str, token: &str) -> Key {
        let mut context = ring::hmac::Context::with_key(&self.inner.hmac);
        context.update(scope.as_bytes());
        context.update(&[0]);
        context.update(token.as_bytes());
        let mut key = [0u8; 32];
        key.copy_from_slice(context.sign().as_ref());
        key
    }
}

impl Inner {
    fn remembered(&self, key: &Key) -> Option<Answer> {
        let now = Instant::now();
        if let Some(user) = self.accepted.get(key, now) {
            return Some(Ok(user));
        }
        self.refused.get(key, now).map(Err)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Shared<BoxFuture<'static, Answer>>>> {
        self.in_flight.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Asks the cluster `client` reaches whom `token` names.
async fn ask(client: kube::Client, token: String) -> Answer {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token),
            audiences: None,
        },
        ..Default::default()
    };
    let answer = Api::<TokenReview>::all(client)
        .create(&PostParams::default(), &review)
        .await;
    crate::metrics::metrics().auth.token_review(match &answer {
        Ok(_) => Some(201),
        Err(error) => crate::metrics::auth::code_of(error),
    });
    let answer = answer.map_err(|e| Refusal::ReviewFailed(e.to_string()))?;
    let status = answer.status.unwrap_or_default();
    if status.authenticated != Some(true) {
        return Err(Refusal::ReviewRefused(
            status.error.filter(|e| !e.is_empty()),
        ));
    }
    let user = status.user.unwrap_or_default();
    let Some(name) = user.username.filter(|n| !n.is_empty()) else {
        return Err(Refusal::ReviewRefused(Some(
            "the review names no user".into(),
        )));
    };
    Ok(RequestUser {
        name,
        uid: user.uid.filter(|u| !u.is_empty()),
        groups: user.groups.unwrap_or_default(),
        extra: user.extra.unwrap_or_default().into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An asker that counts its reviews and answers after `delay`.
    fn asker(
        asked: &Arc<AtomicUsize>,
        answer: Answer,
        delay: Duration,
    ) -> impl FnOnce(String) -> BoxFuture<'static, Answer> {
        let asked = asked.clone();
        move |_token| {
            asked.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(delay).await;
                answer
            }
            .boxed()
        }
    }

    fn alice() -> RequestUser {
        RequestUser {
            name: "alice".into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn accepted_and_refused_tokens_are_reviewed_once() {
        let reviews = TokenReviews::default();
        let asked = Arc::new(AtomicUsize::new(0));
        for _ in 0..5 {
            let answer = reviews
                .review_with("s", "good", asker(&asked, Ok(alice()), Duration::ZERO))
                .await;
            assert_eq!(answer, Ok(alice()));
        }
        let refused = Err(Refusal::ReviewRefused(Some("invalid bearer token".into())));
        for _ in 0..5 {
            let answer = reviews
                .review_with("s", "bad", asker(&asked, refused.clone(), Duration::ZERO))
                .await;
            assert_eq!(answer, refused);
        }
        assert_eq!(asked.load(Ordering::SeqCst), 2);
        assert_eq!(reviews.remembered(), (1, 1));
    }

    #[tokio::test]
    async fn concurrent_reviews_of_one_token_are_made_once() {
        let reviews = TokenReviews::default();
        let asked = Arc::new(AtomicUsize::new(0));
        let refused = Err(Refusal::ReviewRefused(None));
        let all = (0..20).map(|_| {
            reviews.review_with(
                "s",
                "bad",
                asker(&asked, refused.clone(), Duration::from_millis(50)),
            )
        });
        let answers = futures::future::join_all(all).await;
        assert!(answers.iter().all(|a| *a == refused));
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_review_that_failed_is_not_remembered() {
        let reviews = TokenReviews::default();
        let asked = Arc::new(AtomicUsize::new(0));
        let failed = Err(Refusal::ReviewFailed("connection refused".into()));
        for _ in 0..3 {
            let answer = reviews
                .review_with("s", "t", asker(&asked, failed.clone(), Duration::ZERO))
                .await;
            assert_eq!(answer, failed);
        }
        assert_eq!(asked.load(Ordering::SeqCst), 3);
        assert_eq!(reviews.remembered(), (0, 0));
    }

    #[tokio::test]
    async fn answers_are_kept_per_scope_and_expire() {
        let reviews = TokenReviews::new(ReviewSettings {
            accepted_ttl: Duration::from_millis(100),
            refused_ttl: Duration::from_millis(100),
            capacity: 10,
        });
        let asked = Arc::new(AtomicUsize::new(0));
        let ok = || asker(&asked, Ok(alice()), Duration::ZERO);
        reviews.review_with("app-1", "t", ok()).await.unwrap();
        reviews.review_with("app-2", "t", ok()).await.unwrap();
        assert_eq!(
            asked.load(Ordering::SeqCst),
            2,
            "another cluster asks again"
        );
        reviews.review_with("app-1", "t", ok()).await.unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 2);
        tokio::time::sleep(Duration::from_millis(150)).await;
        reviews.review_with("app-1", "t", ok()).await.unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 3, "expired");
    }

    #[tokio::test]
    async fn a_flood_of_tokens_stays_within_the_capacity() {
        let reviews = TokenReviews::new(ReviewSettings {
            capacity: 100,
            ..Default::default()
        });
        let asked = Arc::new(AtomicUsize::new(0));
        for i in 0..1_000 {
            let token = format!("garbage-{i}");
            let refused = Err(Refusal::ReviewRefused(None));
            let _ = reviews
                .review_with("s", &token, asker(&asked, refused, Duration::ZERO))
                .await;
        }
        let (accepted, refused) = reviews.remembered();
        assert!(accepted == 0 && refused <= 100, "{refused}");
    }

    #[test]
    fn keys_hash_the_scope_and_the_token_apart() {
        let reviews = TokenReviews::default();
        assert_ne!(reviews.key("ab", "c"), reviews.key("a", "bc"));
        assert_eq!(reviews.key("a", "t"), reviews.key("a", "t"));
        let other = TokenReviews::default();
        assert_ne!(
            reviews.key("a", "t"),
            other.key("a", "t"),
            "each process has its own key"
        );
    }
}
