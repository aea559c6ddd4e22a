//! LIST of 10,000 objects through bindery against the same LIST made
//! directly to the provider, side by side in one run on the same real
//! provider (started by the test fixture): at `resourceVersion=0` (served
//! by kube-apiserver's watch cache on one side, bindery's on the other) and
//! consistent (no resourceVersion). Bodies are read as raw bytes, so the
//! client's decoding does not dilute the ratio. Results and the command are
//! recorded in `benches/RESULTS.md`.

#[allow(dead_code)]
#[path = "../tests/e2e/bindery.rs"]
mod bindery;
#[allow(dead_code)]
#[path = "../tests/e2e/fixture.rs"]
mod fixture;
mod support;

use criterion::{Criterion, criterion_group, criterion_main};
use fixture::clusters;
use futures::StreamExt;

const OBJECTS: usize = 10_000;
const CONSUMER: &str = "bench10k";

/// 10,000 under `cargo bench`; a hundred when `cargo test` runs the
/// benchmarks once to check that they work.
fn objects() -> usize {
    if std::env::args().any(|a| a == "--bench") {
        OBJECTS
    } else {
        100
    }
}

/// GETs `path` and returns the body (read whole).
async fn get(client: &kube::Client, path: &str) -> String {
    let request = http::Request::builder()
        .uri(path)
        .header(http::header::ACCEPT, "application/json")
        .body(Vec::new())
        .expect("a request");
    client.request_text(request).await.expect("a list")
}

/// How many items a list body holds.
fn items(body: &str) -> usize {
    serde_json::from_str::<serde_json::Value>(body).expect("a JSON list")["items"]
        .as_array()
        .map_or(0, Vec::len)
}

fn list_10k(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let provider = &clusters().provider;
    let consumer = support::widgets_consumer(CONSUMER);
    let (direct, through) = runtime.block_on(async {
        let direct = provider.client().await;
        let through = consumer.client().await;
        // Made through bindery, so that they carry the identity labels; the
        // direct requests read the very same objects.
        let creates = (0..objects()).map(|i| {
            let through = through.clone();
            async move {
                let body = serde_json::json!({
                    "apiVersion": "conformance.bindery.dev/v1", "kind": "Widget",
                    "metadata": {"name": format!("w-{i:05}"), "labels": {"bench": "yes"},
                        "annotations": {"bench.bindery.dev/padding": "x".repeat(200)}},
                    "spec": {"size": "small", "replicas": 1, "note": "benchmark"},
                });
                let request = http::Request::builder()
                    .method("POST")
                    .uri("/apis/conformance.bindery.dev/v1/namespaces/load/widgets")
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(serde_json::to_vec(&body).expect("JSON"))
                    .expect("a request");
                match through.request_text(request).await {
                    // Already there on a second run: fine.
                    Err(kube::Error::Api(status)) if status.code == 409 => {}
                    Err(e) => panic!("creating w-{i:05} through bindery: {e}"),
                    Ok(_) => {}
                }
            }
        });
        futures::stream::iter(creates)
            .buffer_unordered(16)
            .collect::<Vec<()>>()
            .await;
        (direct, through)
    });
    let direct_path =
        format!("/apis/conformance.bindery.dev/v1/namespaces/kube-bind-{CONSUMER}-load/widgets");
    let through_path = "/apis/conformance.bindery.dev/v1/namespaces/load/widgets".to_string();
    // Both sides must list every object, or the comparison means nothing.
    // Any-version lists may lag the writes for a moment, on both sides.
    let (direct_body, through_body) = runtime.block_on(async {
        let complete = |client: kube::Client, uri: String| async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            loop {
                let body = get(&client, &uri).await;
                let listed = items(&body);
                if listed == objects() {
                    return body;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{uri} lists {listed} of {} objects",
                    objects()
                );
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        };
        (
            complete(direct.clone(), format!("{direct_path}?resourceVersion=0")).await,
            complete(through.clone(), format!("{through_path}?resourceVersion=0")).await,
        )
    });
    eprintln!(
        "list bodies: direct {} bytes, bindery {} bytes",
        direct_body.len(),
        through_body.len()
    );

    for (name, query) in [("any", "?resourceVersion=0"), ("consistent", "")] {
        let mut group = c.benchmark_group(format!("list-{OBJECTS}-{name}"));
        group.sample_size(10);
        for (side, client, path) in [
            ("direct", &direct, &direct_path),
            ("bindery", &through, &through_path),
        ] {
            let uri = format!("{path}{query}");
            group.bench_function(side, |b| b.to_async(&runtime).iter(|| get(client, &uri)));
        }
        group.finish();
    }
}

criterion_group!(benches, list_10k);
criterion_main!(benches);
