//! The authentication layer: every endpoint that needs a caller
//! authenticates it here, before anything reads the request's body.
//!
//! - A consumer's endpoints (`/clusters/<id>`, and the aggregation layer's
//!   paths, whose consumer the TLS server name or the front-proxy
//!   certificate tells): the [`Authenticator`]s of app-cluster callers; the
//!   caller becomes a [`User`].
//! - The virtual workspace, `/metrics` and `/bind`: the provider's users
//!   ([`ProviderUsers`]); the caller becomes a [`ProviderUser`]. The
//!   browser's pages of an interactive bind are authenticated by the
//!   session id in their URL ([`BindRoute::credential`]).
//! - Health and unknown paths need no caller.
//!
//! A refused caller gets kube-apiserver's 401 (a bind page, the page saying
//! its session is unknown or has expired), the same whatever the reason;
//! the [`Refusal`] is logged with the request id.

use super::ServerName;
use super::gate::{Check, GateLayer};
use super::layers::REQUEST_ID;
use crate::aggregation::consumer_of_server_name;
use crate::auth::provider::ProviderUsers;
use crate::auth::{
    Authenticator, Outcome, PeerCertificate, ProviderUser, Refusal, SharedFrontProxy, User,
};
use crate::bind::routes::{BindRoute, Credential};
use crate::bind::sessions::Sessions;
use crate::forward::encode::ErrorForm;
use crate::resolved::{Resolved, resolved_of};
use crate::route::{ApiPath, ConsumerId, Endpoint};
use crate::status::ApiError;
use crate::upstream::BoxBody;
use futures::future::BoxFuture;
use http::{Request, Response};
use std::sync::Arc;
use std::time::Instant;

/// Everything callers are recognised by.
pub struct Authentication {
    /// The app clusters' callers of a consumer's endpoints, tried in order.
    pub consumers: Vec<Box<dyn Authenticator>>,
    /// The provider's users, on the workspace and `/bind`.
    pub provider: ProviderUsers,
    /// The interactive binds' sessions, whose ids authenticate their pages.
    pub sessions: Sessions,
}

/// Who an endpoint needs, told from the request alone.
enum Needs {
    Nobody,
    /// A caller of this consumer; `None` when the consumer cannot be told.
    Consumer(Option<ConsumerId>),
    Provider,
    /// The live bind session with this id.
    Session(String),
}

impl Authentication {
    /// Authenticates `request` for its endpoint, keeping who the caller is
    /// in its extensions (a [`User`] or a [`ProviderUser`]); why not, when
    /// it is refused. Reads the request's head only.
    pub async fn authenticate<B>(&self, request: &mut Request<B>) -> Result<(), Refusal> {
        let needs = self.needs(request);
        if let Needs::Nobody = needs {
            return Ok(());
        }
        if let Needs::Consumer(Some(consumer)) = &needs {
            crate::timing::set_consumer(consumer.as_str());
        }
        let started = Instant::now();
        let result = self.authenticate_for(needs, request).await;
        let took = started.elapsed();
        crate::timing::add(crate::timing::Phase::Authentication, took);
        let outcome = if result.is_ok() { "success" } else { "failure" };
        crate::metrics::metrics().auth.authenticated(outcome, took);
        result
    }

    /// [`Authentication::authenticate`], for an endpoint that `needs` a caller.
    async fn authenticate_for<B>(
        &self,
        needs: Needs,
        request: &mut Request<B>,
    ) -> Result<(), Refusal> {
        let (peer, headers) = (
            request.extensions().get::<PeerCertificate>(),
            request.headers(),
        );
        match needs {
            Needs::Nobody => Ok(()),
            Needs::Consumer(None) => Err(Refusal::UnknownConsumer),
            Needs::Consumer(Some(consumer)) => {
                let user = self.consumer(&consumer, peer, headers).await?;
                request.extensions_mut().insert(user);
                Ok(())
            }
            Needs::Provider => {
                let user = self.provider.authenticate(peer, headers).await?;
                request.extensions_mut().insert(ProviderUser(user));
                Ok(())
            }
            Needs::Session(id) => match self.sessions.get(&id, Instant::now()) {
                Some(_) => Ok(()),
                None => Err(Refusal::UnknownSession),
            },
        }
    }

    fn needs<B>(&self, request: &mut Request<B>) -> Needs {
        // Parsed here if no outer layer has; kept for the layers after.
        let method = request.method().clone();
        match &resolved_of(request).endpoint {
            Endpoint::Health | Endpoint::Unknown => Needs::Nobody,
            Endpoint::Consumer { consumer, .. } => Needs::Consumer(Some(consumer.clone())),
            Endpoint::Aggregated { path } => {
                let path = path.clone();
                let named = request
                    .extensions()
                    .get::<ServerName>()
                    .and_then(|name| consumer_of_server_name(&name.0));
                Needs::Consumer(named.or_else(|| self.consumer_by_certificate(request, &path)))
            }
            Endpoint::Workspace { .. } | Endpoint::Metrics => Needs::Provider,
            Endpoint::Bind(segments) => {
                let route = BindRoute::of(&method, segments);
                let needs = match route.credential() {
                    Credential::Provider => Needs::Provider,
                    Credential::Session(id) => Needs::Session(id.to_string()),
                };
                request.extensions_mut().insert(route);
                needs
            }
        }
    }

    /// The caller of `consumer`'s endpoints: the first authenticator that
    /// accepts it, from what bindery holds, else from what the app cluster
    /// answers.
    async fn consumer(
        &self,
        consumer: &ConsumerId,
        peer: Option<&PeerCertificate>,
        headers: &http::HeaderMap,
    ) -> Result<User, Refusal> {
        let mut refusals = Vec::new();
        let mut take = |outcome| match outcome {
            Outcome::Accepted(user) => Some(user),
            Outcome::Refused(refusal) => {
                refusals.push(refusal);
                None
            }
            Outcome::NotMine => None,
        };
        for authenticator in &self.consumers {
            if let Some(user) = take(authenticator.authenticate(consumer, peer, headers)) {
                return Ok(user);
            }
        }
        // The slower way: authenticators that ask the app cluster.
        for authenticator in &self.consumers {
            let outcome = authenticator.authenticate_remotely(consumer, headers).await;
            if let Some(user) = take(outcome) {
                return Ok(user);
            }
        }
        Err(refusals
            .into_iter()
            .next()
            .unwrap_or_else(|| crate::auth::unclaimed(peer, headers)))
    }

    /// Without a server name naming the consumer (kube-aggregator's
    /// availability checks before Kubernetes 1.36 send none), the front-proxy
    /// certificate tells: the one consumer whose registered CA verifies it.
    /// Several consumers may share an app cluster's CA (the same cluster
    /// registered more than once); then only discovery, which shows no
    /// objects, is answered: for the first of them, with what all of them
    /// serve ([`SharedFrontProxy`]), since the aggregator cannot say which
    /// one it asks for.
    fn consumer_by_certificate<B>(
        &self,
        request: &mut Request<B>,
        path: &ApiPath,
    ) -> Option<ConsumerId> {
        let peer = request.extensions().get::<PeerCertificate>()?;
        let mut candidates: Vec<ConsumerId> = self
            .consumers
            .iter()
            .flat_map(|a| a.consumers_of(peer))
            .collect();
        candidates.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        candidates.dedup();
        let discovery = matches!(
            path,
            ApiPath::Version
                | ApiPath::LegacyRoot
                | ApiPath::GroupList
                | ApiPath::Group(_)
                | ApiPath::GroupVersion { .. }
        );
        match candidates.len() {
            1 => candidates.pop(),
            n if n > 1 && discovery => {
                let first = candidates[0].clone();
                request
                    .extensions_mut()
                    .insert(SharedFrontProxy(candidates));
                Some(first)
            }
            _ => None,
        }
    }
}

/// The answer to a refused caller of `request`: the same whatever the
/// reason.
fn refused<B>(request: &Request<B>) -> Response<BoxBody> {
    match request.extensions().get::<BindRoute>() {
        Some(route) => route.refused(),
        // Negotiated, as kube-apiserver's `Unauthorized` handler answers.
        None => {
            let query = request.extensions().get::<Resolved>().map(|r| &r.query);
            ErrorForm::of(request.headers(), query).error(&ApiError::unauthorized())
        }
    }
}

/// The authentication layer.
pub type AuthnLayer = GateLayer<Arc<Authentication>>;

impl Check for Arc<Authentication> {
    fn check<'a, B: Send + 'a>(
        &'a self,
        request: &'a mut Request<B>,
    ) -> BoxFuture<'a, Result<(), Response<BoxBody>>> {
        Box::pin(async move {
            self.authenticate(request).await.map_err(|reason| {
                log_refusal(request, &reason);
                refused(request)
            })
        })
    }
}

fn log_refusal<B>(request: &Request<B>, reason: &Refusal) {
    let id = request
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let endpoint = match request.extensions().get::<Resolved>().map(|r| &r.endpoint) {
        Some(Endpoint::Consumer { consumer, .. }) => format!("consumer {consumer}"),
        Some(Endpoint::Aggregated { .. }) => "aggregated".into(),
        Some(Endpoint::Workspace { export, .. }) => format!("workspace {export}"),
        Some(Endpoint::Bind(_)) => "bind".into(),
        _ => "other".into(),
    };
    if *reason == Refusal::NoCredential {
        tracing::debug!(request_id = %id, %endpoint, %reason, "unauthenticated");
    } else {
        tracing::info!(request_id = %id, %endpoint, %reason, "unauthenticated");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::token_review::TokenReviews;
    use crate::auth::{RequestUser, Via};
    use bytes::Bytes;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::{Context, Poll};
    use tower::{Layer, Service};

    /// An authenticator that makes the same of every request.
    struct Fixed(Outcome);

    impl Authenticator for Fixed {
        fn authenticate(
            &self,
            _consumer: &ConsumerId,
            _peer: Option<&PeerCertificate>,
            _headers: &http::HeaderMap,
        ) -> Outcome {
            self.0.clone()
        }
    }

    /// A body that fails the test if anything reads it.
    struct Unread(Arc<AtomicBool>);

    impl http_body::Body for Unread {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
            self.0.store(true, Ordering::SeqCst);
            Poll::Pending
        }
    }

    fn authentication(consumer_outcome: Outcome) -> Authentication {
        // A provider that cannot be reached: every token review fails.
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        Authentication {
            consumers: vec![Box::new(Fixed(consumer_outcome))],
            provider: ProviderUsers {
                provider: kube::Client::try_from(config).unwrap(),
                client_ca: None,
                reviews: TokenReviews::default(),
            },
            sessions: Sessions::default(),
        }
    }

    /// The answer to `method` on `path` with `headers`, whether the inner
    /// service was called, and whether the body was read.
    async fn answer(
        authentication: Authentication,
        method: http::Method,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (u16, Bytes, bool, bool) {
        let called = Arc::new(AtomicBool::new(false));
        let seen = called.clone();
        let inner = tower::service_fn(move |_: Request<Unread>| {
            seen.store(true, Ordering::SeqCst);
            async { Ok::<_, std::convert::Infallible>(crate::proxy::full(200, "text/plain", "")) }
        });
        let mut service = AuthnLayer::new(Arc::new(authentication)).layer(inner);
        let read = Arc::new(AtomicBool::new(false));
        let mut request = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Unread(read.clone())).unwrap();
        let response = service.call(request).await.unwrap();
        let status = response.status().as_u16();
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .unwrap()
            .to_bytes();
        (
            status,
            body,
            called.load(Ordering::SeqCst),
            read.load(Ordering::SeqCst),
        )
    }

    #[tokio::test]
    async fn every_refusal_is_the_same_401_and_no_body_is_read() {
        let bearer = ("authorization", "Bearer not-a-token");
        type Case<'a> = (Outcome, http::Method, &'a str, Vec<(&'a str, &'a str)>);
        let cases: Vec<Case> = vec![
            (
                Outcome::NotMine,
                http::Method::POST,
                "/clusters/c1/apis/g/v1/namespaces/default/things",
                vec![],
            ),
            (
                Outcome::Refused(Refusal::ExpiredToken),
                http::Method::POST,
                "/clusters/c1/apis/g/v1/namespaces/default/things",
                vec![bearer],
            ),
            (
                Outcome::Refused(Refusal::NameNotAllowed),
                http::Method::GET,
                "/apis/g/v1/things",
                vec![],
            ),
            (
                Outcome::NotMine,
                http::Method::POST,
                "/services/export/e/clusters/*/apis/g/v1/things",
                vec![],
            ),
            (
                Outcome::NotMine,
                http::Method::POST,
                "/services/export/e/clusters/c1/apis/g/v1/namespaces/n/things",
                vec![bearer],
            ),
            (
                Outcome::NotMine,
                http::Method::POST,
                "/bind/bindings",
                vec![],
            ),
            (
                Outcome::NotMine,
                http::Method::POST,
                "/bind/sessions/s1/progress",
                vec![bearer],
            ),
            (
                Outcome::NotMine,
                http::Method::GET,
                "/bind/elsewhere",
                vec![],
            ),
        ];
        let mut bodies = std::collections::BTreeSet::new();
        for (outcome, method, path, headers) in cases {
            let (status, body, called, read) =
                answer(authentication(outcome), method.clone(), path, &headers).await;
            assert_eq!(status, 401, "{method} {path}");
            assert!(
                !called && !read,
                "{method} {path}: refused before anything read"
            );
            bodies.insert(body);
        }
        assert_eq!(bodies.len(), 1, "one answer for every reason: {bodies:?}");
        let status: serde_json::Value = serde_json::from_slice(bodies.first().unwrap()).unwrap();
        assert_eq!(status, ApiError::unauthorized().to_status());
    }

    #[tokio::test]
    async fn each_refusal_says_why() {
        let why = async |outcome: Outcome, path: &str, pairs: &[(&'static str, &str)]| {
            let mut request = Request::get(path).body(()).unwrap();
            for (name, value) in pairs {
                request.headers_mut().insert(*name, value.parse().unwrap());
            }
            authentication(outcome).authenticate(&mut request).await
        };
        let consumer = "/clusters/c1/apis/g/v1/things";
        assert_eq!(
            why(Outcome::NotMine, consumer, &[]).await,
            Err(Refusal::NoCredential)
        );
        assert_eq!(
            why(Outcome::NotMine, consumer, &[("authorization", "Bearer x")]).await,
            Err(Refusal::UnknownToken)
        );
        assert_eq!(
            why(Outcome::Refused(Refusal::WrongAudience), consumer, &[]).await,
            Err(Refusal::WrongAudience)
        );
        assert_eq!(
            why(Outcome::NotMine, "/apis/g/v1/things", &[]).await,
            Err(Refusal::UnknownConsumer)
        );
        assert_eq!(
            why(Outcome::NotMine, "/bind/templates", &[]).await,
            Err(Refusal::NoCredential)
        );
        assert!(matches!(
            why(
                Outcome::NotMine,
                "/bind/templates",
                &[("authorization", "Bearer x")]
            )
            .await,
            Err(Refusal::ReviewFailed(_))
        ));
        assert_eq!(
            why(Outcome::NotMine, "/bind/sessions/s1", &[]).await,
            Err(Refusal::UnknownSession)
        );
        assert_eq!(why(Outcome::NotMine, "/healthz", &[]).await, Ok(()));
    }

    #[tokio::test]
    async fn the_caller_is_kept_for_the_layers_after() {
        let alice = RequestUser {
            name: "alice".into(),
            ..Default::default()
        };
        let user = User::new(alice, &ConsumerId::parse("c1").unwrap(), Via::FrontProxy);
        let mut request = Request::get("/clusters/c1/apis/g/v1/things")
            .body(())
            .unwrap();
        authentication(Outcome::Accepted(user.clone()))
            .authenticate(&mut request)
            .await
            .unwrap();
        assert_eq!(request.extensions().get::<User>(), Some(&user));
        assert!(request.extensions().get::<Resolved>().is_some());
    }

    #[tokio::test]
    async fn an_unknown_bind_session_gets_the_expired_page_unread() {
        let (status, body, called, read) = answer(
            authentication(Outcome::NotMine),
            http::Method::POST,
            "/bind/sessions/made-up/choice",
            &[],
        )
        .await;
        assert_eq!(status, 404);
        assert!(String::from_utf8_lossy(&body).contains("unknown or has expired"));
        assert!(!called && !read);
        let sessions = Sessions::default();
        let id = sessions
            .open(RequestUser::default(), Instant::now())
            .unwrap();
        let mut live = authentication(Outcome::NotMine);
        live.sessions = sessions;
        let (status, _, called, _) = answer(
            live,
            http::Method::GET,
            &format!("/bind/sessions/{id}"),
            &[],
        )
        .await;
        assert_eq!(status, 200);
        assert!(called, "a live session's page is the caller's");
    }
}
