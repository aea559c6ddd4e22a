//! A list and a watch across namespaces through `bindery route` with two
//! providers (half the objects at each, the merged list and the merged
//! watch) against the same through a router with one provider (all the
//! objects there), side by side in one run. Both routers serve the shared
//! app cluster and are called as its aggregator calls them (the app
//! cluster's front-proxy client certificate, the user in `X-Remote-*`);
//! the providers are the shared provider with its bindery (east, and the
//! one provider alone) and a provider cluster of this benchmark's own with
//! a bindery serving it (west). Results in `benches/RESULTS.md`.

#[allow(dead_code)]
#[path = "../tests/e2e/bindery.rs"]
mod bindery;
#[allow(dead_code)]
#[path = "../tests/e2e/fixture.rs"]
mod fixture;
#[allow(dead_code)]
#[path = "../tests/e2e/router_fixture.rs"]
mod router_fixture;

use criterion::{Criterion, criterion_group, criterion_main};
use fixture::{Cluster, clusters};
use futures::StreamExt;
use router_fixture::{GROUP, PLURAL, gadget, second_provider, start_router};
use std::time::Duration;

/// 1,000 objects under `cargo bench`; twenty when `cargo test` runs the
/// benchmarks once to check that they work.
fn objects() -> usize {
    if std::env::args().any(|a| a == "--bench") {
        1_000
    } else {
        20
    }
}

/// A client of the router at `port` as `app`'s aggregator: its front-proxy
/// client certificate, a user of `system:masters`.
fn as_aggregator(app: &Cluster, port: u16) -> kube::Client {
    let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().expect("a URL"));
    let serving_ca = bindery::bindery().pki.join("bindery/serving-ca.crt");
    let pem = std::fs::read(&serving_ca).expect("the serving CA");
    let der = rustls_pki_types::pem::PemObject::pem_slice_iter(&pem)
        .map(|c: Result<rustls_pki_types::CertificateDer<'static>, _>| c.expect("PEM").to_vec())
        .collect();
    config.root_cert = Some(der);
    let (cert, key) = app.pki.front_proxy_client();
    config.auth_info.client_certificate = Some(cert.to_string_lossy().into_owned());
    config.auth_info.client_key = Some(key.to_string_lossy().into_owned());
    config.headers = vec![
        (
            "x-remote-user".parse().expect("a name"),
            "bench-router".parse().expect("a value"),
        ),
        (
            "x-remote-group".parse().expect("a name"),
            "system:masters".parse().expect("a value"),
        ),
    ];
    config.read_timeout = None;
    kube::Client::try_from(config).expect("a client of the router")
}

/// A request of `method` to `path` with a JSON `body`.
fn request(method: &str, path: &str, body: Option<&serde_json::Value>) -> http::Request<Vec<u8>> {
    let content_type = match method {
        "PATCH" => "application/merge-patch+json",
        _ => "application/json",
    };
    http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::CONTENT_TYPE, content_type)
        .body(body.map_or_else(Vec::new, |b| serde_json::to_vec(b).expect("JSON")))
        .expect("a request")
}

fn collection(namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("/apis/{GROUP}/v1/namespaces/{ns}/{PLURAL}"),
        None => format!("/apis/{GROUP}/v1/{PLURAL}"),
    }
}

/// Makes `count` gadgets in `namespace` through `client`, named `<prefix>-<i>`.
async fn fill(client: &kube::Client, namespace: &str, prefix: &str, count: usize) {
    let creates = (0..count).map(|i| {
        let client = client.clone();
        let path = collection(Some(namespace));
        let mut body = gadget(&format!("{prefix}-{i:05}"));
        body["metadata"]["annotations"] =
            serde_json::json!({"bench.bindery.dev/padding": "x".repeat(200)});
        async move {
            match client
                .request_text(request("POST", &path, Some(&body)))
                .await
            {
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(e) => panic!("creating in {namespace}: {e}"),
                Ok(_) => {}
            }
        }
    });
    futures::stream::iter(creates)
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}

/// The items of a list across namespaces.
async fn listed(client: &kube::Client, query: &str) -> usize {
    let body = client
        .request_text(request(
            "GET",
            &format!("{}{query}", collection(None)),
            None,
        ))
        .await
        .expect("a list across namespaces");
    serde_json::from_str::<serde_json::Value>(&body).expect("a JSON list")["items"]
        .as_array()
        .map_or(0, Vec::len)
}

fn two_providers(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    // Clients are made within the runtime.
    let _entered = runtime.enter();
    let app = &clusters().app;
    let crd = clusters()
        .provider
        .install_open_crd(GROUP, PLURAL, "Gadget", "Namespaced");
    let pid = std::process::id();
    let east = bindery::bindery().consumer(&format!("bench-two-east-{pid}"), &crd, PLURAL);
    let alone = bindery::bindery().consumer(&format!("bench-one-east-{pid}"), &crd, PLURAL);
    let (_west_cluster, _west_bindery, west) =
        second_provider("bench-routed", &format!("bench-two-west-{pid}"), &crd);
    let (team_east, team_west) = (format!("bench-e-{pid}"), format!("bench-w-{pid}"));
    router_fixture::routed_namespaces(app, &team_east, &team_west);
    let two = start_router(app, &[("east", &east), ("west", &west)], "east");
    let one = start_router(app, &[("east", &alone)], "east");
    let (through_two, through_one) = (as_aggregator(app, two.port), as_aggregator(app, one.port));
    let half = objects() / 2;
    runtime.block_on(async {
        // The router reads Namespaces by a watch: the label may take a
        // moment; made twice over is no harm (409).
        tokio::time::sleep(Duration::from_secs(2)).await;
        fill(&through_two, &team_east, "e", half).await;
        fill(&through_two, &team_west, "w", objects() - half).await;
        fill(&through_one, &team_east, "o", objects()).await;
        for (side, client) in [("two", &through_two), ("one", &through_one)] {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while listed(client, "?resourceVersion=0").await != objects() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the router with {side} provider(s) does not list {} objects",
                    objects()
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    });

    for (name, query) in [("any", "?resourceVersion=0"), ("consistent", "")] {
        let mut group = c.benchmark_group(format!("providers-list-{}-{name}", objects()));
        group.sample_size(10);
        for (side, client) in [
            ("one-provider", &through_one),
            ("two-providers", &through_two),
        ] {
            group.bench_function(side, |b| {
                b.to_async(&runtime).iter(|| listed(client, query))
            });
        }
        group.finish();
    }

    // A write at east and its event on a watch across namespaces.
    let mut group = c.benchmark_group("providers-watch-event");
    group.sample_size(20);
    for (side, client) in [
        ("one-provider", &through_one),
        ("two-providers", &through_two),
    ] {
        let watch = runtime.block_on(async {
            let response = client
                .send(
                    request("GET", &format!("{}?watch=true", collection(None)), None)
                        .map(kube::client::Body::from),
                )
                .await
                .expect("a watch across namespaces");
            assert!(response.status().is_success(), "{}", response.status());
            tokio::sync::Mutex::new(http_body_util::BodyDataStream::new(response.into_body()))
        });
        let watch = &watch;
        let name = match side {
            "one-provider" => "o-00000",
            _ => "e-00000",
        };
        let path = format!("{}/{name}", collection(Some(&team_east)));
        let mut round = 0u64;
        group.bench_function(side, |b| {
            b.to_async(&runtime).iter(|| {
                round += 1;
                let patch =
                    serde_json::json!({"metadata": {"annotations": {"round": round.to_string()}}});
                let path = path.clone();
                async move {
                    client
                        .request_text(request("PATCH", &path, Some(&patch)))
                        .await
                        .expect("a patch");
                    let mut events = watch.lock().await;
                    let wanted = format!("\"round\":\"{round}\"");
                    let mut seen = String::new();
                    while !seen.contains(&wanted) {
                        let chunk = tokio::time::timeout(Duration::from_secs(10), events.next())
                            .await
                            .expect("the event within 10 s")
                            .expect("the watch goes on")
                            .expect("a chunk");
                        seen.push_str(&String::from_utf8_lossy(&chunk));
                    }
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, two_providers);
criterion_main!(benches);
