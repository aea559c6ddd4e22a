//! A provider watch that goes silent. A second `bindery serve` reaches the
//! real provider through an HTTP proxy that can silence every watch it
//! holds: the connection stays open and nothing more comes, as when the
//! provider stops delivering one resource's events. (The proxy can also cut
//! every answer it is sending, and drops the connection of a request it
//! cannot pass on, as an unreachable provider would: the soak test uses
//! both.) The cache must notice
//! within seconds (a reader waits for a version bindery itself wrote and the
//! store has not reached) and watch again, rather than send every reader to
//! the provider after its full patience until the watch times out.

use crate::availability::{bindery_reaching, postgresql_consumer};
use crate::bindery::Consumer;
use crate::fixture::clusters;
use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Incoming;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const COLLECTION: &str = "/apis/db.example.com/v1/postgresqlinstances";

/// What the proxy saw of bindery's own requests (not a consumer's, which
/// carry impersonation) for [`COLLECTION`], and what consumers' lists it
/// passed.
struct Seen {
    /// bindery's own WATCHes of the collection (the cache's reflector).
    reflector_watches: AtomicU64,
    /// Lists made as a consumer (answered by the provider, not the cache).
    consumer_lists: AtomicU64,
    /// Raised to silence every watch opened before.
    silence: AtomicU64,
    /// Raised to cut every answer being sent.
    cut: tokio::sync::watch::Sender<u64>,
    /// While true, bindery's own LISTs of [`COLLECTION`] (the cache's
    /// first list) wait.
    hold_lists: tokio::sync::watch::Sender<bool>,
}

/// An HTTP proxy in front of the provider, authenticating as the
/// provider's admin (bindery's own identity there in these tests), passing
/// impersonation headers on.
pub(crate) struct SilencingProxy {
    pub(crate) url: String,
    seen: Arc<Seen>,
}

impl SilencingProxy {
    pub(crate) fn start() -> Self {
        Self::start_to(clusters().provider.server.clone())
    }

    /// A proxy to the provider's kube-apiserver at `server` (one of the
    /// shared provider's, with its certificates).
    pub(crate) fn start_to(server: String) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Seen {
            reflector_watches: AtomicU64::new(0),
            consumer_lists: AtomicU64::new(0),
            silence: AtomicU64::new(0),
            cut: tokio::sync::watch::channel(0).0,
            hold_lists: tokio::sync::watch::channel(false).0,
        });
        let shared = seen.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let kubeconfig =
                    kube::config::Kubeconfig::read_from(&clusters().provider.kubeconfig).unwrap();
                let mut config =
                    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                        .await
                        .unwrap();
                config.cluster_url = server.parse().unwrap();
                let provider = kube::Client::try_from(config).unwrap();
                listener.set_nonblocking(true).unwrap();
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let (provider, seen) = (provider.clone(), shared.clone());
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |request| {
                            forward(provider.clone(), seen.clone(), request)
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
        });
        Self { url, seen }
    }

    /// Every watch open now sends nothing more; its connection stays.
    pub(crate) fn silence_open_watches(&self) {
        self.seen.silence.fetch_add(1, Ordering::SeqCst);
    }

    /// While `hold` is true, bindery's own LISTs of the postgresql
    /// collection (its watch cache's first list) get no answer.
    pub(crate) fn hold_lists(&self, hold: bool) {
        self.seen.hold_lists.send_replace(hold);
    }

    /// Every answer being sent now (watches above all) breaks off, and its
    /// connection with it.
    pub(crate) fn cut_open_answers(&self) {
        self.seen.cut.send_modify(|generation| *generation += 1);
    }
}

type ProxyBody = http_body_util::combinators::UnsyncBoxBody<Bytes, std::io::Error>;

async fn forward(
    provider: kube::Client,
    seen: Arc<Seen>,
    request: hyper::Request<Incoming>,
) -> Result<hyper::Response<ProxyBody>, std::io::Error> {
    // A watch is open from the moment its request arrives: one whose answer
    // is still on its way when watches are silenced is silenced too (read
    // after the answer's head, a watch asked just before the silence slipped
    // through it, and the test waited for a stall that never came).
    let born = seen.silence.load(Ordering::SeqCst);
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let query = parts.uri.query().unwrap_or_default();
    let path = parts.uri.path();
    let watch = query
        .split('&')
        .any(|p| p == "watch=true" || p == "watch=1");
    let impersonated = parts.headers.contains_key("impersonate-user");
    let collection = path == COLLECTION || path.ends_with("/postgresqlinstances");
    if path == COLLECTION && watch && !impersonated {
        seen.reflector_watches.fetch_add(1, Ordering::SeqCst);
    }
    if collection && !watch && impersonated && parts.method == http::Method::GET {
        seen.consumer_lists.fetch_add(1, Ordering::SeqCst);
    }
    if path == COLLECTION && !watch && !impersonated && parts.method == http::Method::GET {
        let mut hold = seen.hold_lists.subscribe();
        let _ = hold.wait_for(|held| !*held).await;
    }
    let mut upstream = http::Request::builder()
        .method(parts.method.clone())
        .uri(parts.uri.path_and_query().map_or("/", |p| p.as_str()));
    for (name, value) in &parts.headers {
        if name != http::header::HOST && name != http::header::AUTHORIZATION {
            upstream = upstream.header(name, value);
        }
    }
    let upstream = upstream
        .body(kube::client::Body::from(body.to_vec()))
        .unwrap();
    // A provider that cannot be reached: the connection is dropped, as it
    // would be without the proxy.
    let response = provider
        .send(upstream)
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let (head, body) = response.into_parts();
    let mut cut = seen.cut.subscribe();
    cut.mark_unchanged();
    let frames = futures::stream::unfold(
        (body, seen.clone(), watch, cut, false),
        move |(mut body, seen, watch, mut cut, ended)| async move {
            if ended {
                return None;
            }
            let broken = || std::io::Error::other("cut by the proxy");
            let frame = tokio::select! {
                frame = body.frame() => frame?,
                _ = cut.changed() => return Some((Err(broken()), (body, seen, watch, cut, true))),
            };
            // A silenced watch holds its connection and sends nothing,
            // until it is cut or the provider ends it.
            if watch && seen.silence.load(Ordering::SeqCst) != born {
                loop {
                    tokio::select! {
                        frame = body.frame() => if let Some(Ok(_)) = frame { continue },
                        _ = cut.changed() => {},
                    }
                    return Some((Err(broken()), (body, seen, watch, cut, true)));
                }
            }
            let frame = frame.map_err(|e| std::io::Error::other(e.to_string()));
            Some((frame, (body, seen, watch, cut, false)))
        },
    );
    let body: ProxyBody = StreamBody::new(frames).boxed_unsync();
    Ok(hyper::Response::from_parts(head, body))
}

/// `method` on `path` at `url` as `consumer`, with a JSON `body`: status
/// and body.
fn call(
    consumer: &Consumer,
    url: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> (u16, String) {
    let mut curl = Command::new("curl");
    curl.args([
        "-sk",
        "-m",
        "30",
        "-w",
        "\n%{http_code}",
        "-X",
        method,
        "--cert",
    ])
    .arg(&consumer.cert)
    .arg("--key")
    .arg(&consumer.key)
    .arg(format!("{url}/clusters/{}{path}", consumer.id));
    if let Some(body) = body {
        curl.args([
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            body,
        ]);
    }
    let output = curl.output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.parse().unwrap_or(0), body.to_string())
}

fn names(body: &str) -> Vec<String> {
    let list: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn a_watch_that_goes_silent_is_replaced_within_seconds() {
    let consumer = postgresql_consumer("stall");
    let proxy = SilencingProxy::start();
    let second = bindery_reaching(&proxy.url);
    let url = &second.url;
    let namespaced = "/apis/db.example.com/v1/namespaces/default/postgresqlinstances";
    let any = format!("{namespaced}?resourceVersion=0");
    let create = |name: &str| {
        let body = format!(
            r#"{{"apiVersion":"db.example.com/v1","kind":"PostgreSQLInstance","metadata":{{"name":"{name}"}},"spec":{{"plan":"small"}}}}"#
        );
        let (code, body) = call(&consumer, url, "POST", namespaced, Some(&body));
        assert_eq!(code, 201, "creating {name}: {body}");
    };
    create("before");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, body) = call(&consumer, url, "GET", &any, None);
        if code == 200 && names(&body) == ["before"] {
            break;
        }
        assert!(Instant::now() < deadline, "before the stall: {code} {body}");
        std::thread::sleep(Duration::from_millis(300));
    }
    // The cache lists, then watches: the watch may be a moment behind.
    let deadline = Instant::now() + Duration::from_secs(10);
    while proxy.seen.reflector_watches.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the cache watches the provider through the proxy"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let watches = proxy.seen.reflector_watches.load(Ordering::SeqCst);

    proxy.silence_open_watches();
    let silenced = Instant::now();
    create("during");
    // This list waits for the version the create answered with; the
    // silent watch never brings it.
    let (code, body) = call(&consumer, url, "GET", &any, None);
    assert_eq!(
        (code, names(&body)),
        (200, vec!["before".into(), "during".into()]),
        "{body}"
    );
    let deadline = silenced + Duration::from_secs(10);
    while proxy.seen.reflector_watches.load(Ordering::SeqCst) == watches {
        assert!(
            Instant::now() < deadline,
            "the cache did not watch again within 10 s of its watch going silent"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // Caught up: a write and the lists after it are the cache's again.
    create("after");
    let lists = proxy.seen.consumer_lists.load(Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (code, body) = call(&consumer, url, "GET", &any, None);
        assert_eq!(code, 200, "{body}");
        if names(&body) == ["after", "before", "during"] {
            break;
        }
        assert!(Instant::now() < deadline, "after the stall: {body}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        proxy.seen.consumer_lists.load(Ordering::SeqCst),
        lists,
        "the list after the new watch is answered from the cache, not the provider"
    );
    // The lag is a figure an operator reads: the new watch brought a version
    // readers waited for, and reads waited for it (from a cache that keeps
    // up, a read waits milliseconds; this one waited a quarter of a second
    // before it nudged the reflector, and then for the new watch).
    let metrics = crate::operations::scrape(url);
    let resource = [("resource", "postgresqlinstances.db.example.com")];
    let behind = crate::operations::total(&metrics, "bindery_watch_cache_behind_total", &resource);
    assert!(behind >= 1.0, "bindery_watch_cache_behind_total: {behind}");
    let waited: f64 = metrics["bindery_watch_cache_read_wait_seconds"]["samples"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["labels"]["resource"] == resource[0].1)
        .map(|s| s["sum"].as_f64().unwrap_or(0.0))
        .sum();
    assert!(
        waited >= 0.25,
        "reads waited {waited} s in all for the stalled cache"
    );
    for name in ["before", "during", "after"] {
        call(
            &consumer,
            url,
            "DELETE",
            &format!("{namespaced}/{name}"),
            None,
        );
    }
}
