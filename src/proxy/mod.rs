//! Resource requests, served from the provider in one hop: check that the
//! consumer has the resource, translate the request down, make sure a named
//! write targets the consumer's own object, send it, and translate the
//! response (or the watch stream) back up.

pub mod namespaces;
pub mod negotiate;
pub mod watch;
pub mod yaml;

use crate::catalog::{ConsumerView, ServedResource};
use crate::route::{ResourceRequest, Verb};
use crate::status::ApiError;
use crate::translate::binding::BoundResource;
use crate::translate::continue_token::ContinueTokens;
use crate::translate::continue_token::TokenError;
use crate::translate::objects::{Refusal, Visibility, object_up};
use crate::translate::request::{ConsumerRequest, RequestError, encode, request_down, token_scope};
use crate::translate::response::{Translated, body_up, event_up, text_up};
use crate::upstream::{BoxBody, CacheAsked, IdentityScope, Translation, Upstream};
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use http::{HeaderValue, Method, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use namespaces::NamespaceProvisioner;
use std::sync::Arc;
use tokio::sync::watch as signal;

/// What serving resources needs.
pub struct Proxy {
    pub upstream: Arc<dyn Upstream>,
    pub tokens: Arc<ContinueTokens>,
    pub namespaces: NamespaceProvisioner,
    pub shutdown: signal::Receiver<bool>,
}

/// A complete response with `body`.
pub fn full(status: u16, content_type: &str, body: impl Into<Bytes>) -> Response<BoxBody> {
    let mut response = Response::new(
        Full::new(body.into())
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(value) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(CONTENT_TYPE, value);
    }
    response
}

/// The response for an error.
pub fn error(error: &ApiError) -> Response<BoxBody> {
    let (content_type, body) = error.body();
    full(error.code, content_type, body)
}

impl Proxy {
    pub async fn serve(
        &self,
        view: &ConsumerView,
        request: ResourceRequest,
        parts: http::request::Parts,
        body: Bytes,
    ) -> Response<BoxBody> {
        match self.try_serve(view, request, parts, body).await {
            Ok(response) => response,
            Err(e) => error(&e),
        }
    }

    async fn try_serve(
        &self,
        view: &ConsumerView,
        request: ResourceRequest,
        parts: http::request::Parts,
        body: Bytes,
    ) -> Result<Response<BoxBody>, ApiError> {
        let served = view
            .find(&request.group, &request.resource)
            .filter(|s| s.serves(&request.version));
        let Some(served) = served else {
            return Err(ApiError::page_not_found());
        };
        let bound = &served.bound;
        check_scope(served, &request)?;
        let query = decoded_query(&parts.uri);
        let Some(verb) = Verb::of_query(&parts.method, &request, parts.uri.query()) else {
            return Err(ApiError::method_not_allowed(
                "",
                &bound.group,
                &bound.resource,
            ));
        };
        let content_type = header(&parts, CONTENT_TYPE);
        // A named write must target the consumer's own object; its current
        // labels let a patch that clears labels keep the identity ones.
        let current = match &request.name {
            Some(name) if matches!(verb, Verb::Update | Verb::Patch | Verb::Delete) => {
                self.current_object(served, &request, name).await?
            }
            _ => None,
        };
        let current_labels = current
            .as_ref()
            .and_then(|o| o.pointer("/metadata/labels"))
            .and_then(serde_json::Value::as_object);
        let incoming = ConsumerRequest {
            resource: &request,
            verb,
            query: &query,
            content_type: content_type.as_deref(),
            body: &body,
            current_labels,
        };
        let provider =
            request_down(bound, &incoming, &self.tokens).map_err(|e| request_error(served, e))?;
        if let Some(ns) = &request.namespace
            && creates(verb, content_type.as_deref())
        {
            self.namespaces.ensure(bound, ns).await?;
        }

        let (accept, to_yaml) =
            negotiate::upstream_accept(header(&parts, ACCEPT).as_deref(), verb == Verb::Watch);
        let mut uri = provider.path.clone();
        if !provider.query.is_empty() {
            uri.push('?');
            uri.push_str(
                &form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(&provider.query)
                    .finish(),
            );
        }
        let mut upstream = http::Request::builder()
            .method(parts.method.clone())
            .uri(&uri);
        if let Some(accept) = &accept {
            upstream = upstream.header(ACCEPT, accept.as_str());
        }
        if let Some(agent) = parts.headers.get(USER_AGENT) {
            upstream = upstream.header(USER_AGENT, agent);
        }
        let body = match provider.body {
            Some((content_type, bytes)) => {
                upstream = upstream.header(CONTENT_TYPE, content_type);
                Bytes::from(bytes)
            }
            None => {
                if let Some(content_type) = parts.headers.get(CONTENT_TYPE) {
                    upstream = upstream.header(CONTENT_TYPE, content_type);
                }
                body
            }
        };
        let mut upstream = upstream
            .body(body)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let make = || translation(bound, &self.tokens, token_scope(bound, &request));
        if verb == Verb::List {
            if request.namespace.is_none() {
                upstream
                    .extensions_mut()
                    .insert(IdentityScope(bound.identity_selector()));
            }
            if let Some(bytes) = self.upstream.list_translated(&upstream, &make).await {
                return Ok(translated_list(bytes, to_yaml));
            }
            upstream.extensions_mut().insert(CacheAsked);
        }
        if verb == Verb::Watch {
            if let Some(body) = self.upstream.watch_translated(&upstream, &make).await {
                let mut response = Response::new(body);
                response
                    .headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                return Ok(response);
            }
            upstream.extensions_mut().insert(CacheAsked);
        }
        let response =
            self.upstream.send(upstream).await.map_err(|e| {
                ApiError::unavailable(format!("the provider cannot be reached: {e}"))
            })?;
        let (mut head, upstream_body) = response.into_parts();
        let scope = token_scope(bound, &request);
        let mut out_headers = http::HeaderMap::new();
        for (name, value) in head.headers.iter() {
            if name == CONTENT_TYPE {
                out_headers.append(name, value.clone());
            } else if name == "warning"
                && let Ok(text) = value.to_str()
                && let Ok(value) = HeaderValue::from_str(&text_up(bound, text))
            {
                out_headers.append(name, value);
            }
        }
        if verb == Verb::Watch && head.status.is_success() {
            let (bound, tokens) = (bound.clone(), self.tokens.clone());
            let body = watch::translate_stream(
                upstream_body,
                Box::new(move |event| event_up(&bound, event, &tokens, &scope)),
                self.shutdown.clone(),
            );
            let mut response = Response::new(body);
            *response.status_mut() = head.status;
            *response.headers_mut() = out_headers;
            return Ok(response);
        }
        let bytes = upstream_body
            .collect()
            .await
            .map_err(|e| ApiError::unavailable(format!("reading the provider's answer: {e}")))?
            .to_bytes();
        // A plain object GET whose version the cache holds already has its
        // consumer form.
        let plain_object = verb == Verb::Get
            && head.status == StatusCode::OK
            && !accept.as_deref().is_some_and(|a| a.contains("as="))
            && head.headers.get(CONTENT_TYPE).map(HeaderValue::as_bytes)
                == Some(b"application/json");
        let made = plain_object
            .then(|| {
                self.upstream
                    .object_translated(&provider.path, &bytes, &make)
            })
            .flatten();
        let mut bytes = match made {
            Some(made) => {
                tracing::trace!(path = %provider.path, "GET answered with the cached consumer form");
                made
            }
            None => match body_up(bound, &bytes, &self.tokens, &scope) {
                Translated::Body(translated) => Bytes::from(translated),
                Translated::Unchanged => bytes,
                Translated::Hidden => {
                    return Err(ApiError::object_not_found(
                        &bound.group,
                        &bound.resource,
                        request.name.as_deref().unwrap_or_default(),
                    ));
                }
            },
        };
        if to_yaml
            && head
                .headers
                .get(CONTENT_TYPE)
                .is_some_and(|ct| ct.as_bytes().starts_with(b"application/json"))
            && let Some(yaml) = negotiate::json_to_yaml(&bytes)
        {
            bytes = Bytes::from(yaml);
            out_headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/yaml"));
        }
        head.headers = out_headers;
        Ok(Response::from_parts(
            head,
            Full::new(bytes)
                .map_err(|never| match never {})
                .boxed_unsync(),
        ))
    }

    /// The provider's current object behind a named write, in provider terms;
    /// `None` when there is none (the write itself then answers, or, for an
    /// apply, creates). One that is someone else's reads as not found.
    async fn current_object(
        &self,
        served: &ServedResource,
        request: &ResourceRequest,
        name: &str,
    ) -> Result<Option<serde_json::Value>, ApiError> {
        let bound = &served.bound;
        let mut path = format!(
            "/apis/{}/{}",
            encode(&request.group),
            encode(&request.version)
        );
        if let Some(ns) = &request.namespace {
            path.push_str(&format!(
                "/namespaces/{}",
                encode(&bound.namespaces.to_provider(ns))
            ));
        }
        path.push_str(&format!(
            "/{}/{}",
            encode(&request.resource),
            encode(&bound.provider_name(name))
        ));
        let uri: http::Uri = path
            .parse()
            .map_err(|_| ApiError::object_not_found(&bound.group, &bound.resource, name))?;
        let get = http::Request::builder()
            .method(Method::GET)
            .uri(uri)
            .header(ACCEPT, "application/json")
            .body(Bytes::new())
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let response =
            self.upstream.send(get).await.map_err(|e| {
                ApiError::unavailable(format!("the provider cannot be reached: {e}"))
            })?;
        if response.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| ApiError::unavailable(e.to_string()))?
            .to_bytes();
        let object: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        if object.get("kind").and_then(|k| k.as_str()) == Some("Status") {
            return Ok(None);
        }
        match object_up(bound, &mut object.clone(), true) {
            Visibility::Visible => Ok(Some(object)),
            Visibility::Hidden => Err(ApiError::object_not_found(
                &bound.group,
                &bound.resource,
                name,
            )),
        }
    }
}

/// How `bound`'s consumer sees each provider object, for upstreams that
/// answer lists with objects they translated before; continue tokens are
/// sealed for `scope`.
fn translation(bound: &BoundResource, tokens: &Arc<ContinueTokens>, scope: String) -> Translation {
    let key = bound.translation_key();
    let bound = bound.clone();
    Translation {
        key,
        item: Box::new(move |bytes| {
            let mut object: serde_json::Value = serde_json::from_slice(bytes).ok()?;
            match object_up(&bound, &mut object, true) {
                Visibility::Visible => serde_json::to_vec(&object).ok(),
                Visibility::Hidden => None,
            }
        }),
        continue_token: {
            let tokens = tokens.clone();
            Box::new(move |token| tokens.seal(&scope, token))
        },
    }
}

/// A list body already in consumer terms, as JSON or YAML.
fn translated_list(bytes: Vec<u8>, to_yaml: bool) -> Response<BoxBody> {
    match to_yaml.then(|| negotiate::json_to_yaml(&bytes)).flatten() {
        Some(yaml) => full(200, "application/yaml", yaml),
        None => full(200, "application/json", bytes),
    }
}

/// Namespaced resources are reached in a namespace (lists and watches also
/// across all); cluster-scoped ones never in a namespace. Subresources must
/// exist. Everything else is not found, as kube-apiserver answers.
fn check_scope(served: &ServedResource, request: &ResourceRequest) -> Result<(), ApiError> {
    let bound = &served.bound;
    match (bound.namespaced, &request.namespace, &request.name) {
        (true, None, Some(_)) | (false, Some(_), _) => return Err(ApiError::page_not_found()),
        _ => {}
    }
    match request.subresource.as_deref() {
        None => Ok(()),
        Some("status") if bound.has_status => Ok(()),
        Some("scale") if bound.has_scale => Ok(()),
        Some(_) => Err(ApiError::object_not_found(
            &bound.group,
            &bound.resource,
            request.name.as_deref().unwrap_or_default(),
        )),
    }
}

/// Whether a write may create its object (and so needs its provider namespace).
fn creates(verb: Verb, content_type: Option<&str>) -> bool {
    verb == Verb::Create
        || (verb == Verb::Patch
            && content_type.is_some_and(|ct| ct.starts_with("application/apply-patch")))
}

/// The request's query pairs, percent-decoded.
pub fn decoded_query(uri: &http::Uri) -> Vec<(String, String)> {
    uri.query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default()
}

fn header(parts: &http::request::Parts, name: http::header::HeaderName) -> Option<String> {
    parts
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn request_error(served: &ServedResource, error: RequestError) -> ApiError {
    let bound = &served.bound;
    match error {
        RequestError::Refused(Refusal::ReservedLabel { name, key }) => ApiError::field_forbidden(
            &bound.group,
            &bound.kind,
            &name,
            &format!("metadata.labels[{key}]"),
            "the label is reserved by bindery",
        ),
        RequestError::Continue(error @ TokenError::Encoding(_)) => ApiError::bad_request(format!(
            "invalid continue token: continue key is not valid: {error}"
        )),
        RequestError::Continue(TokenError::Forged) => ApiError::bad_request(
            "invalid continue token: continue key is not valid: it was not issued for this request",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::store::Stored;
    use crate::translate::binding::fixtures::widgets;
    use crate::translate::objects::stamp_labels;
    use serde_json::json;

    /// The provider's JSON of a widget, as a GET answers it.
    fn provider_body(labels_of: &BoundResource) -> Vec<u8> {
        let mut object = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "kube-bind-c1-ns", "resourceVersion": "5",
                "uid": "u-1", "annotations": {"a": "b"}},
            "spec": {"size": 1.5, "text": "caf\u{e9} \"quoted\"", "list": [1, {"x": null}]},
            "status": {"ready": true}});
        stamp_labels(labels_of, object["metadata"].as_object_mut().unwrap());
        serde_json::to_vec(&object).unwrap()
    }

    /// An upstream that answers every request with a widget's provider
    /// JSON and offers [`MEMO`] as its consumer form, keeping the paths it
    /// was asked for.
    struct MemoUpstream {
        body: Vec<u8>,
        asked: std::sync::Mutex<Vec<String>>,
    }

    const MEMO: &str = r#"{"memo":true}"#;

    type Sent<'a> = std::pin::Pin<
        Box<
            dyn std::future::Future<
                    Output = Result<http::Response<BoxBody>, crate::upstream::BoxError>,
                > + Send
                + 'a,
        >,
    >;

    impl Upstream for MemoUpstream {
        fn send(&self, _request: http::Request<Bytes>) -> Sent<'_> {
            let response = full(200, "application/json", self.body.clone());
            Box::pin(async move { Ok(response) })
        }

        fn object_translated(
            &self,
            path: &str,
            _body: &[u8],
            _translation: &(dyn Fn() -> Translation + Send + Sync),
        ) -> Option<Bytes> {
            self.asked.lock().unwrap().push(path.to_string());
            Some(Bytes::from_static(MEMO.as_bytes()))
        }
    }

    async fn get_widget(proxy: &Proxy, bound: &BoundResource, accept: Option<&str>) -> String {
        let spec = serde_json::from_value(json!({"group": "example.com",
            "names": {"plural": "widgets", "kind": "Widget"}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true}]}))
        .unwrap();
        let view = ConsumerView {
            consumer: bound.consumer.clone(),
            cluster_namespace: "kube-bind-c1".into(),
            resources: vec![ServedResource {
                bound: bound.clone(),
                spec: Arc::new(spec),
            }],
        };
        let request = ResourceRequest {
            group: "example.com".into(),
            version: "v1".into(),
            namespace: Some("ns".into()),
            resource: "widgets".into(),
            name: Some("w".into()),
            subresource: None,
            watch_prefix: false,
        };
        let mut builder = http::Request::get("/apis/example.com/v1/namespaces/ns/widgets/w");
        if let Some(accept) = accept {
            builder = builder.header(ACCEPT, accept);
        }
        let (parts, ()) = builder.body(()).unwrap().into_parts();
        let response = proxy.serve(&view, request, parts, Bytes::new()).await;
        assert_eq!(response.status(), StatusCode::OK);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(body.to_vec()).unwrap()
    }

    /// A plain JSON GET is answered with the consumer form the upstream
    /// already holds for the provider's answer; a GET for another
    /// representation is translated from the answer itself.
    #[tokio::test]
    async fn a_plain_get_is_answered_with_the_upstreams_consumer_form() {
        let bound = widgets();
        let upstream = Arc::new(MemoUpstream {
            body: provider_body(&bound),
            asked: Default::default(),
        });
        let unreachable = tower::service_fn(|_: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, _>(std::io::Error::other(
                "no cluster in a unit test",
            ))
        });
        let proxy = Proxy {
            upstream: upstream.clone(),
            tokens: Arc::new(ContinueTokens::random()),
            namespaces: NamespaceProvisioner::new(kube::Client::new(unreachable, "default")),
            shutdown: signal::channel(false).1,
        };

        assert_eq!(get_widget(&proxy, &bound, None).await, MEMO);
        let asked = upstream.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1, "the memo is asked for once: {asked:?}");
        assert!(
            asked[0].ends_with("/widgets/w") && !asked[0].contains("/namespaces/ns/"),
            "asked at the provider's path: {asked:?}"
        );

        let partial = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io";
        let body = get_widget(&proxy, &bound, Some(partial)).await;
        assert_ne!(body, MEMO, "another representation is not the memo");
        assert_eq!(upstream.asked.lock().unwrap().len(), 1);
    }

    /// A GET answered from the cache carries the consumer form the cache
    /// made from its stored copy; it must be the very body the GET's own
    /// translation gives, and hide what that hides.
    #[test]
    fn the_cached_consumer_form_of_an_object_is_its_translated_get_body() {
        let bound = widgets();
        let mut other = widgets();
        other.identity = crate::translate::IdentityHash::of_secret(b"other");
        let tokens = Arc::new(ContinueTokens::random());
        for labels_of in [&bound, &other] {
            let body = provider_body(labels_of);
            let stored = Stored::of(&serde_json::from_slice(&body).unwrap());
            let made = stored.translated(&translation(&bound, &tokens, "s".into()));
            match body_up(&bound, &body, &tokens, "s") {
                Translated::Body(translated) => {
                    assert_eq!(made.as_deref(), Some(&translated[..]));
                }
                Translated::Hidden => assert_eq!(made, None),
                Translated::Unchanged => panic!("an object is translated"),
            }
        }
    }
}
