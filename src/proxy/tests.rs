//! The proxy against a scripted upstream: what it asks, and what it does
//! with what it is told.

use super::*;
use crate::cache::store::Stored;
use crate::forward::answer::answer_up;
use crate::translate::binding::fixtures::widgets;
use crate::translate::objects::stamp_labels;
use http::header::CONTENT_TYPE;
use serde_json::{Value, json};
use std::sync::Mutex;

/// The provider's JSON of widget `w`, as a GET answers it.
fn provider_object(labels_of: &BoundResource) -> Value {
    let mut object = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "kube-bind-c1-ns", "resourceVersion": "5",
            "uid": "u-1", "annotations": {"a": "b"}},
        "spec": {"size": 1.5, "text": "caf\u{e9} \"quoted\"", "list": [1, {"x": null}]},
        "status": {"ready": true}});
    stamp_labels(labels_of, object["metadata"].as_object_mut().unwrap());
    object
}

type Sent<'a> = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = Result<http::Response<BoxBody>, crate::upstream::BoxError>>
            + Send
            + 'a,
    >,
>;

/// How a scripted upstream answers a request.
type Script = Box<dyn Fn(&http::Request<Bytes>) -> Response<BoxBody> + Send + Sync>;

/// An upstream that answers each request with what `answer` makes of it,
/// keeps every request it was sent, and offers [`MEMO`] as the consumer
/// form of any object.
struct Scripted {
    answer: Script,
    sent: Mutex<Vec<(Method, String, Option<String>)>>,
    memo_asked: Mutex<Vec<String>>,
    /// The lists asked of the cache (`list_translated`, `rows_translated`),
    /// with their Accept; each is answered with [`CACHED_LIST`] (its rows).
    lists_asked: Mutex<Vec<(String, Option<String>)>>,
}

/// The consumer form of a list, as the cache answers it.
const CACHED_LIST: &str = r#"{"apiVersion":"example.com/v1","kind":"WidgetList","metadata":{"resourceVersion":"9"},"items":[{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"uid":"u-1","name":"w","namespace":"ns","creationTimestamp":"2020-01-01T00:00:00Z"},"spec":{"size":1.5}}]}"#;

const MEMO: &str = r#"{"memo":true}"#;

impl Scripted {
    fn new(
        answer: impl Fn(&http::Request<Bytes>) -> Response<BoxBody> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            answer: Box::new(answer),
            sent: Mutex::default(),
            memo_asked: Mutex::default(),
            lists_asked: Mutex::default(),
        })
    }

    /// Records a list asked of the cache.
    fn list_asked(&self, request: &http::Request<Bytes>) {
        let accept = request
            .headers()
            .get(ACCEPT)
            .map(|v| v.to_str().unwrap().to_string());
        self.lists_asked
            .lock()
            .unwrap()
            .push((request.uri().to_string(), accept));
    }

    fn methods(&self) -> Vec<Method> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .map(|(m, _, _)| m.clone())
            .collect()
    }
}

impl crate::upstream::Sender for Scripted {
    fn send(&self, request: http::Request<Bytes>) -> Sent<'_> {
        let accept = request
            .headers()
            .get(ACCEPT)
            .map(|v| v.to_str().unwrap().to_string());
        self.sent.lock().unwrap().push((
            request.method().clone(),
            request.uri().to_string(),
            accept,
        ));
        let response = (self.answer)(&request);
        Box::pin(async move { Ok(response) })
    }
}

impl Upstream for Scripted {
    fn list_translated<'a>(
        &'a self,
        read: &'a crate::upstream::CacheRead<'a>,
        _translation: &'a Translation,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Vec<u8>>> + Send + 'a>> {
        self.list_asked(read.sent);
        Box::pin(async { Some(CACHED_LIST.as_bytes().to_vec()) })
    }

    fn rows_translated<'a>(
        &'a self,
        read: &'a crate::upstream::CacheRead<'a>,
        _translation: &'a Translation,
        rows: &'a crate::upstream::RowMaker<'a>,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Option<crate::upstream::Rows>> + Send + 'a>,
    > {
        self.list_asked(read.sent);
        let list: Value = serde_json::from_str(CACHED_LIST).unwrap();
        let made = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| rows.row(item.to_string().as_bytes()).ok().map(Arc::new))
            .collect::<Option<Vec<_>>>();
        let metadata = list["metadata"].as_object().unwrap().clone();
        Box::pin(async move {
            Some(crate::upstream::Rows {
                metadata,
                rows: made?,
            })
        })
    }

    fn object_translated(
        &self,
        target: &crate::route::ResourceRequest,
        _body: &[u8],
        _translation: &Translation,
    ) -> Option<Bytes> {
        self.memo_asked.lock().unwrap().push(target.path());
        Some(Bytes::from_static(MEMO.as_bytes()))
    }
}

fn proxy(upstream: Arc<dyn Upstream>) -> Proxy {
    let unreachable = tower::service_fn(|_: http::Request<kube::client::Body>| async {
        Err::<http::Response<kube::client::Body>, _>(std::io::Error::other(
            "no cluster in a unit test",
        ))
    });
    Proxy {
        upstream,
        tokens: Arc::new(ContinueTokens::random()),
        namespaces: NamespaceProvisioner::new(kube::Client::new(unreachable, "default")),
        shutdown: signal::channel(false).1,
        access: None,
        quota: crate::quota::QuotaAdmission::new(Default::default()),
        fairness: crate::fairness::Fairness::new(Default::default()),
    }
}

fn consumer_view(bound: &BoundResource) -> ConsumerView {
    let spec = serde_json::from_value(json!({"group": "example.com",
        "names": {"plural": "widgets", "kind": "Widget"}, "scope": "Namespaced",
        "versions": [{"name": "v1", "served": true, "storage": true}]}))
    .unwrap();
    ConsumerView {
        consumer: bound.consumer.clone(),
        cluster_namespace: "kube-bind-c1".into(),
        resources: vec![ServedResource {
            bound: bound.clone(),
            spec: Arc::new(spec),
            caps: crate::quota::caps::Caps::DEFAULT,
            export_resources: vec![("example.com".to_string(), "widgets".to_string())].into(),
        }],
    }
}

fn widget_request(name: Option<&str>) -> ResourceRequest {
    ResourceRequest {
        group: "example.com".into(),
        version: "v1".into(),
        namespace: Some("ns".into()),
        resource: "widgets".into(),
        name: name.map(str::to_string),
        subresource: None,
        watch_prefix: false,
    }
}

async fn call(
    proxy: &Proxy,
    bound: &BoundResource,
    request: http::Request<Bytes>,
    name: Option<&str>,
) -> (StatusCode, String) {
    let (parts, body) = request.into_parts();
    let resolved = crate::resolved::Resolved::of(&parts.method, &parts.uri);
    assert_eq!(resolved.resource(), Some(&widget_request(name)));
    let response = proxy
        .serve(&consumer_view(bound), &resolved, parts, body)
        .await;
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn json_response(status: u16, value: &Value) -> Response<BoxBody> {
    full(
        status,
        "application/json",
        serde_json::to_vec(value).unwrap(),
    )
}

const PATH: &str = "/apis/example.com/v1/namespaces/ns/widgets/w";

/// A plain JSON GET is answered with the consumer form the upstream
/// already holds for the provider's answer; a GET for another
/// representation is translated from the answer itself.
#[tokio::test]
async fn a_plain_get_is_answered_with_the_upstreams_consumer_form() {
    let bound = widgets();
    let object = provider_object(&bound);
    let upstream = Scripted::new(move |request| {
        let accept = request.headers()[ACCEPT].to_str().unwrap();
        if accept.contains("as=PartialObjectMetadata") {
            let mut partial =
                json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1"});
            partial["metadata"] = object["metadata"].clone();
            json_response(200, &partial)
        } else {
            json_response(200, &object)
        }
    });
    let proxy = proxy(upstream.clone());
    let get = |accept: Option<&str>| {
        let mut builder = http::Request::get(PATH);
        if let Some(accept) = accept {
            builder = builder.header(ACCEPT, accept);
        }
        builder.body(Bytes::new()).unwrap()
    };

    let (status, body) = call(&proxy, &bound, get(None), Some("w")).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, MEMO));
    let asked = upstream.memo_asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "the memo is asked for once: {asked:?}");
    assert!(
        asked[0].ends_with("/widgets/w") && !asked[0].contains("/namespaces/ns/"),
        "asked at the provider's path: {asked:?}"
    );

    let partial = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io";
    let (status, body) = call(&proxy, &bound, get(Some(partial)), Some("w")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let value: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(value["kind"], "PartialObjectMetadata");
    assert_eq!(value["metadata"]["namespace"], "ns");
    assert_eq!(upstream.memo_asked.lock().unwrap().len(), 1);
}

/// A Table of a list the cache answers is rendered from the cache's
/// consumer form, with the schema's columns (here `Age`, the schema has
/// none); the provider is not asked.
#[tokio::test]
async fn a_table_of_a_cached_list_is_rendered_without_the_provider() {
    let bound = widgets();
    let upstream = Scripted::new(|_| json_response(500, &json!({})));
    let proxy = proxy(upstream.clone());
    let request =
        http::Request::get("/apis/example.com/v1/namespaces/ns/widgets?includeObject=None&limit=5")
            .header(
                ACCEPT,
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            )
            .body(Bytes::new())
            .unwrap();
    let (status, body) = call(&proxy, &bound, request, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let table: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["metadata"], json!({"resourceVersion": "9"}));
    let names: Vec<&Value> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["name"])
        .collect();
    assert_eq!(names, [&json!("Name"), &json!("Age")]);
    assert_eq!(table["rows"][0]["cells"][0], "w");
    assert_eq!(table["rows"][0]["object"], Value::Null);
    assert!(
        upstream.sent.lock().unwrap().is_empty(),
        "the provider was asked"
    );
    let asked = upstream.lists_asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].1.as_deref(), Some("application/json"));
    assert!(
        asked[0].0.contains("limit=5") && !asked[0].0.contains("includeObject"),
        "the cache is asked the plain list: {asked:?}"
    );
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
    let view = Arc::new(BoundView {
        bound: bound.clone(),
        tokens: tokens.clone(),
        scope: "s".into(),
    });
    let shape = Shape {
        expected: Expected::Object,
        kind: "Widget".into(),
        api_version: "example.com/v1".into(),
        include: Default::default(),
    };
    for labels_of in [&bound, &other] {
        let body = serde_json::to_vec(&provider_object(labels_of)).unwrap();
        let stored = Stored::of(&serde_json::from_slice(&body).unwrap());
        let made = stored.translated(&Translation::of(view.clone()));
        match answer_up(view.as_ref(), &shape, 200, &body) {
            Ok(answer) => assert_eq!(
                made.as_deref(),
                Some(&serde_json::to_vec(&answer.value).unwrap()[..])
            ),
            Err(_) => assert_eq!(made, None),
        }
    }
}

/// On main, any answer but 404 to the ownership read let a named write
/// through: a 429 under throttling, a 500, or a body that was not JSON.
/// Now only the consumer's own object, or a plain "not found", lets it go
/// on; the caller gets the provider's answer, in its terms.
#[tokio::test]
async fn a_named_write_goes_no_further_than_an_unclear_ownership_read() {
    let bound = widgets();
    for (status, body) in [
        (
            429,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "too many requests in kube-bind-c1-ns", "reason": "TooManyRequests",
                "details": {"retryAfterSeconds": 1}, "code": 429}),
        ),
        (
            500,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "etcd is sad", "reason": "InternalError", "code": 500}),
        ),
        (
            200,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        ),
    ] {
        let upstream = Scripted::new(move |_| json_response(status, &body));
        let proxy = proxy(upstream.clone());
        for (method, content_type) in [
            (Method::DELETE, "application/json"),
            (Method::PUT, "application/json"),
            (Method::PATCH, "application/merge-patch+json"),
        ] {
            let request = http::Request::builder()
                .method(method.clone())
                .uri(PATH)
                .header(CONTENT_TYPE, content_type)
                .body(Bytes::from_static(if method == Method::DELETE {
                    b""
                } else {
                    br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}"#
                }))
                .unwrap();
            let (answered, text) = call(&proxy, &bound, request, Some("w")).await;
            assert_eq!(
                upstream.methods().last(),
                Some(&Method::GET),
                "{method} after {status}"
            );
            assert!(
                upstream.methods().iter().all(|m| m == Method::GET),
                "{method} after {status}: {:?}",
                upstream.methods()
            );
            assert!(
                answered.as_u16() >= 400,
                "{method} after {status}: {answered} {text}"
            );
            assert!(!text.contains("kube-bind-c1"), "{text}");
        }
    }
}

/// The object behind a write must be the consumer's export's own.
#[tokio::test]
async fn a_named_write_to_another_exports_object_is_not_found() {
    let bound = widgets();
    let mut other = widgets();
    other.identity = crate::translate::IdentityHash::of_secret(b"other");
    let object = provider_object(&other);
    let upstream = Scripted::new(move |_| json_response(200, &object));
    let proxy = proxy(upstream.clone());
    let request = http::Request::delete(PATH).body(Bytes::new()).unwrap();
    let (status, _) = call(&proxy, &bound, request, Some("w")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(upstream.methods(), [Method::GET]);
}

/// A patch that nulls the labels is applied by bindery: the update it
/// sends keeps the identity, pinned to the version it was applied to.
#[tokio::test]
async fn a_patch_is_stored_as_the_object_it_results_in() {
    let bound = widgets();
    let object = provider_object(&bound);
    let stored = Arc::new(Mutex::new(None::<Value>));
    let kept = stored.clone();
    let upstream = Scripted::new(move |request| {
        if request.method() == Method::PUT {
            let body: Value = serde_json::from_slice(request.body()).unwrap();
            *kept.lock().unwrap() = Some(body.clone());
            json_response(200, &body)
        } else {
            json_response(200, &object)
        }
    });
    let proxy = proxy(upstream.clone());
    for (content_type, patch) in [
        (
            "application/json-patch+json",
            json!([{"op": "replace", "path": "/metadata/labels", "value": null}]),
        ),
        (
            "application/merge-patch+json",
            json!({"metadata": {"labels": null}}),
        ),
    ] {
        let request = http::Request::patch(PATH)
            .header(CONTENT_TYPE, content_type)
            .body(Bytes::from(serde_json::to_vec(&patch).unwrap()))
            .unwrap();
        let (status, body) = call(&proxy, &bound, request, Some("w")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let sent = stored.lock().unwrap().take().expect("an update was sent");
        let labels = &sent["metadata"]["labels"];
        assert_eq!(labels["bindery.dev/consumer"], "c1", "{sent}");
        assert_eq!(
            labels["bindery.dev/export"],
            bound.identity.label_value(),
            "{sent}"
        );
        assert_eq!(sent["metadata"]["resourceVersion"], "5", "pinned");
        assert_eq!(sent["metadata"]["namespace"], "kube-bind-c1-ns");
        assert!(!body.contains("bindery.dev/"), "{body}");
    }
    assert_eq!(
        upstream.methods(),
        [Method::GET, Method::PUT, Method::GET, Method::PUT]
    );
}

/// A provider whose authorizer lets the consumer's account update widgets
/// only from `granted_at` (virtual time) on: its SubjectAccessReviews say
/// so, and the scripted upstream refuses in RBAC's words until then.
fn slow_rbac(granted_at: std::time::Duration, refusal: &'static str) -> (Proxy, BoundResource) {
    let start = tokio::time::Instant::now();
    let granted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reviews = {
        let granted = granted.clone();
        tower::service_fn(move |_: http::Request<kube::client::Body>| {
            let granted = granted.clone();
            async move {
                let allowed = start.elapsed() >= granted_at;
                granted.store(allowed, std::sync::atomic::Ordering::SeqCst);
                let review = json!({"apiVersion": "authorization.k8s.io/v1",
                    "kind": "SubjectAccessReview", "spec": {}, "status": {"allowed": allowed}});
                let response = http::Response::builder()
                    .status(201)
                    .header(CONTENT_TYPE, "application/json")
                    .body(kube::client::Body::from(
                        serde_json::to_vec(&review).unwrap(),
                    ))
                    .unwrap();
                Ok::<_, std::io::Error>(response)
            }
        })
    };
    let mut bound = widgets();
    bound.namespaces.insert("ns", "kube-bind-c1-ns");
    let object = provider_object(&bound);
    let upstream = Scripted::new(move |request| {
        if request.method() != Method::PUT {
            return json_response(200, &object);
        }
        if granted.load(std::sync::atomic::Ordering::SeqCst) && refusal.is_empty() {
            return json_response(200, &object);
        }
        let message = if refusal.is_empty() {
            "widgets.example.com \"w\" is forbidden: User \"system:serviceaccount:kube-bind-c1:bindery-consumer\" cannot update resource \"widgets\" in API group \"example.com\" in the namespace \"kube-bind-c1-ns\""
        } else {
            refusal
        };
        json_response(
            403,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": message, "reason": "Forbidden", "code": 403}),
        )
    });
    let mut proxy = proxy(upstream);
    proxy.access = Some(access::Access::new(kube::Client::new(reviews, "default")));
    (proxy, bound)
}

fn update(timeout: &str) -> http::Request<Bytes> {
    http::Request::put(format!("{PATH}?timeout={timeout}"))
        .header(CONTENT_TYPE, "application/json")
        .body(Bytes::from_static(
            br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","resourceVersion":"5"}}"#,
        ))
        .unwrap()
}

/// RBAC on its way is waited for as long as the request's own time
/// allows, and no longer.
#[tokio::test(start_paused = true)]
async fn a_refusal_waits_for_rbac_until_the_requests_deadline() {
    let (proxy, bound) = slow_rbac(std::time::Duration::from_secs(8), "");
    let started = tokio::time::Instant::now();
    let (status, body) = call(&proxy, &bound, update("3s"), Some("w")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body.contains(r#"User \"c1\" cannot update resource \"widgets\" in API group \"example.com\" in the namespace \"ns\""#),
        "{body}"
    );
    assert!(!body.contains("kube-bind"), "{body}");
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(1500)
            && waited < std::time::Duration::from_secs(3),
        "waited {waited:?} of 3s"
    );

    let (proxy, bound) = slow_rbac(std::time::Duration::from_secs(8), "");
    let started = tokio::time::Instant::now();
    let (status, body) = call(&proxy, &bound, update("40s"), Some("w")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(started.elapsed() >= std::time::Duration::from_secs(8));
}

/// A refusal RBAC did not make (the provider's admission, a quota of its
/// own) is answered as the provider gave it, at once.
#[tokio::test(start_paused = true)]
async fn a_refusal_that_is_not_rbacs_is_the_providers_answer() {
    let refusal = "widgets.example.com \"w\" is forbidden: exceeded quota: provider-quota, requested: count/widgets.example.com=1, used: count/widgets.example.com=5, limited: count/widgets.example.com=5";
    let (proxy, bound) = slow_rbac(std::time::Duration::ZERO, refusal);
    let started = tokio::time::Instant::now();
    let (status, body) = call(&proxy, &bound, update("40s"), Some("w")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains("exceeded quota: provider-quota"), "{body}");
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
}
