//! The shared watch cache: an [`Upstream`] in front of the provider that
//! answers the LISTs it can answer exactly ([`query`]) from one store per
//! provider resource ([`store`]), kept by one list+watch per resource
//! ([`reflector`]) however many consumers, exports and clients read it.
//! Everything else, and every list the cache is not ready for, goes to the
//! provider unchanged. Consumers are kept apart exactly as on the way to
//! the provider: the request reaching the cache is already in provider
//! terms (the consumer's provider namespace, the identity label selector),
//! and the cache evaluates it as kube-apiserver would.

pub mod query;
pub mod reflector;
pub mod store;

use crate::upstream::{BoxBody, BoxError, ListAsked, Translation, Upstream};
use bytes::Bytes;
use dashmap::DashMap;
use http::header::{ACCEPT, CONTENT_TYPE};
use http_body_util::{BodyExt, Full};
use query::CacheableList;
use reflector::Reflected;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// How long a list waits for its resource's first LIST, or for the store to
/// reach a `NotOlderThan` version, before going to the provider instead.
const PATIENCE: Duration = Duration::from_secs(3);

/// The provider behind a watch cache.
pub struct CachedUpstream {
    inner: Arc<dyn Upstream>,
    client: kube::Client,
    resources: DashMap<String, Arc<Reflected>>,
    /// The newest resourceVersion a write through bindery answered with,
    /// per reflected collection: a later list waits for the store to reach
    /// it, so that whoever wrote through bindery reads their write.
    written: DashMap<String, u64>,
}

impl CachedUpstream {
    pub fn new(inner: Arc<dyn Upstream>, client: kube::Client) -> Self {
        Self {
            inner,
            client,
            resources: DashMap::new(),
            written: DashMap::new(),
        }
    }

    /// How many provider resources the cache reflects (one upstream watch
    /// each).
    pub fn reflected_resources(&self) -> usize {
        self.resources.len()
    }

    fn reflected(&self, collection: &str) -> Arc<Reflected> {
        self.resources
            .entry(collection.to_string())
            .or_insert_with(|| reflector::start(self.client.clone(), collection.to_string()))
            .clone()
    }

    /// The list body for `request` from the store, in provider terms or
    /// translated; `None` when the cache cannot answer it (yet).
    async fn list(
        &self,
        request: &http::Request<Bytes>,
        translation: Option<&(dyn Fn() -> Translation + Send + Sync)>,
    ) -> Option<Vec<u8>> {
        if request.extensions().get::<ListAsked>().is_some() {
            return None;
        }
        let (collection, namespace, list) = cacheable(request)?;
        let reflected = self.reflected(&collection);
        let written = self.written.get(&collection).map_or(0, |v| *v);
        if !reflected
            .reached(list.not_older_than.max(written), PATIENCE)
            .await
        {
            return None;
        }
        let translation = translation.map(|make| make());
        reflected.read(|store| match &translation {
            Some(translation) => {
                store.translated_list_body(namespace.as_deref(), &list, translation)
            }
            None => store.list_body(namespace.as_deref(), &list),
        })
    }

    async fn answer(&self, request: &http::Request<Bytes>) -> Option<http::Response<BoxBody>> {
        let body = self.list(request, None).await?;
        let mut response = http::Response::new(
            Full::new(Bytes::from(body))
                .map_err(|never| match never {})
                .boxed_unsync(),
        );
        response.headers_mut().insert(
            CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        Some(response)
    }
}

impl CachedUpstream {
    /// Remembers the version a successful write answered with.
    async fn note_write(
        &self,
        collection: String,
        response: http::Response<BoxBody>,
    ) -> Result<http::Response<BoxBody>, BoxError> {
        let (head, body) = response.into_parts();
        let bytes = body.collect().await?.to_bytes();
        let version = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| {
                v["metadata"]["resourceVersion"]
                    .as_str()?
                    .parse::<u64>()
                    .ok()
            });
        if let Some(version) = version {
            let mut newest = self.written.entry(collection).or_insert(0);
            *newest = (*newest).max(version);
        }
        Ok(http::Response::from_parts(
            head,
            Full::new(bytes)
                .map_err(|never| match never {})
                .boxed_unsync(),
        ))
    }
}

impl Upstream for CachedUpstream {
    fn send(
        &self,
        request: http::Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<http::Response<BoxBody>, BoxError>> + Send + '_>> {
        Box::pin(async move {
            if let Some(response) = self.answer(&request).await {
                return Ok(response);
            }
            let written = (request.method() != http::Method::GET)
                .then(|| collection_of(request.uri().path()))
                .flatten()
                .filter(|collection| self.resources.contains_key(collection));
            let response = self.inner.send(request).await?;
            match written {
                Some(collection) if response.status().is_success() => {
                    self.note_write(collection, response).await
                }
                _ => Ok(response),
            }
        })
    }

    fn list_translated<'a>(
        &'a self,
        request: &'a http::Request<Bytes>,
        translation: &'a (dyn Fn() -> Translation + Send + Sync),
    ) -> Pin<Box<dyn Future<Output = Option<Vec<u8>>> + Send + 'a>> {
        Box::pin(self.list(request, Some(translation)))
    }
}

/// A LIST the cache may answer: the collection across namespaces, the
/// namespace asked for, and the filter.
fn cacheable(request: &http::Request<Bytes>) -> Option<(String, Option<String>, CacheableList)> {
    if request.method() != http::Method::GET {
        return None;
    }
    let accept = request
        .headers()
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if !matches!(accept, "application/json" | "*/*") {
        return None;
    }
    let (collection, namespace, name) = parse_path(request.uri().path())?;
    if name.is_some() {
        return None;
    }
    let query: Vec<(String, String)> =
        form_urlencoded::parse(request.uri().query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let list = CacheableList::of_query(&query)?;
    Some((collection, namespace, list))
}

/// The collection (across namespaces) a resource path is in.
fn collection_of(path: &str) -> Option<String> {
    parse_path(path).map(|(collection, _, _)| collection)
}

/// `(collection across namespaces, namespace, name)` of a provider resource
/// path (`/apis/<g>/<v>[/namespaces/<ns>]/<resource>[/<name>[/<sub>]]`).
fn parse_path(path: &str) -> Option<(String, Option<String>, Option<String>)> {
    if path.contains('%') {
        return None;
    }
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (prefix, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => (format!("/api/{version}"), rest),
        ["apis", group, version, rest @ ..] => (format!("/apis/{group}/{version}"), rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", namespace, rest @ ..] if !rest.is_empty() => {
            (Some(namespace.to_string()), rest)
        }
        rest => (None, rest),
    };
    let (resource, name) = match rest {
        [resource] => (*resource, None),
        [resource, name] | [resource, name, _] => (*resource, Some(name.to_string())),
        _ => return None,
    };
    if resource.is_empty() || resource == "namespaces" {
        return None;
    }
    Some((format!("{prefix}/{resource}"), namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(uri: &str, accept: Option<&str>) -> http::Request<Bytes> {
        let mut request = http::Request::builder().uri(uri);
        if let Some(accept) = accept {
            request = request.header(ACCEPT, accept);
        }
        request.body(Bytes::new()).unwrap()
    }

    #[test]
    fn collections_are_keyed_across_namespaces() {
        let (collection, namespace, _) = cacheable(&get(
            "/apis/example.com/v1/namespaces/kube-bind-x-default/widgets?resourceVersion=0",
            None,
        ))
        .unwrap();
        assert_eq!(collection, "/apis/example.com/v1/widgets");
        assert_eq!(namespace.as_deref(), Some("kube-bind-x-default"));
        let (collection, namespace, _) =
            cacheable(&get("/api/v1/secrets?resourceVersion=0", Some("*/*"))).unwrap();
        assert_eq!((collection.as_str(), namespace), ("/api/v1/secrets", None));
        for written in [
            "/apis/example.com/v1/namespaces/a/widgets",
            "/apis/example.com/v1/namespaces/a/widgets/w",
            "/apis/example.com/v1/namespaces/a/widgets/w/status",
        ] {
            assert_eq!(
                collection_of(written).as_deref(),
                Some("/apis/example.com/v1/widgets"),
                "{written}"
            );
        }
    }

    #[test]
    fn objects_watches_tables_and_consistent_lists_go_to_the_provider() {
        for (uri, accept) in [
            (
                "/apis/example.com/v1/namespaces/a/widgets/w?resourceVersion=0",
                None,
            ),
            (
                "/apis/example.com/v1/widgets?watch=true&resourceVersion=0",
                None,
            ),
            ("/apis/example.com/v1/widgets", None),
            (
                "/apis/example.com/v1/widgets?resourceVersion=0",
                Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
            ),
            (
                "/apis/example.com/v1/namespaces/a%2Fb/widgets?resourceVersion=0",
                None,
            ),
            ("/api/v1/namespaces?resourceVersion=0", None),
            ("/version?resourceVersion=0", None),
        ] {
            assert!(cacheable(&get(uri, accept)).is_none(), "{uri}");
        }
    }
}
