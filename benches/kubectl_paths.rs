//! kubectl's requests in an app cluster: a resource bound through bindery
//! (the app cluster's aggregated path, `bindery bind --template postgresql`)
//! against the very same CRD installed locally in the same app cluster under
//! another group (kube-bind's end state: a copied CRD), measured side by
//! side in one run on the test fixture's clusters. 500 objects of about
//! 0.7 KiB in one namespace on each side; each round makes one request of a
//! form on each side, in alternating order, over kept-alive connections with
//! kubectl's User-Agent: GET one object, LIST (consistent), LIST at
//! `resourceVersion=0`, LIST as a Table (what `kubectl get` asks), and watch
//! delivery (an object changed at its own kube-apiserver, the provider's for
//! the bound side, until the event reaches a client watching through the app
//! cluster). Prints p50 and p99 per side and the ratios. `cargo bench --bench
//! kubectl_paths` makes the full rounds (`BINDERY_BENCH_ROUNDS` scales
//! them); `cargo test` runs a few as a smoke test. Requests ask for gzip and
//! the client decompresses what comes compressed, as kubectl's Go transport
//! does; `BINDERY_BENCH_ENCODING=identity` asks for no compression (what
//! `kubectl --disable-compression` sends). `BINDERY_BENCH_ONLY=Table` runs
//! only the forms whose name holds the text. Results and the command are
//! recorded in `benches/RESULTS.md`.

#[allow(dead_code)]
#[path = "../tests/e2e/binder.rs"]
mod binder;
#[allow(dead_code)]
#[path = "../tests/e2e/bindery.rs"]
mod bindery;
#[allow(dead_code)]
#[path = "../tests/e2e/fixture.rs"]
mod fixture;

use bytes::Bytes;
use fixture::{clusters, repo_root};
use futures::StreamExt;
use http_body_util::BodyExt;
use std::time::{Duration, Instant};

const OBJECTS: usize = 500;
const NAMESPACE: &str = "bench";
const BOUND: &str = "db.example.com";
const LOCAL: &str = "db.local.example.com";
const PLURAL: &str = "postgresqlinstances";
const KUBECTL_AGENT: &str = "kubectl/v1.33.0 (linux/amd64) kubernetes/bindery-bench";
const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

fn main() {
    let benching = std::env::args().any(|a| a == "--bench");
    let scale: usize = std::env::var("BINDERY_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    let rounds = |full: usize| if benching { full * scale } else { 3 };
    set_up();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let app = clusters().app.client().await;
        fill(&app).await;
        let mut report = Vec::new();
        let object = format!("bench-{:04}", OBJECTS / 2);
        let forms: [(&str, String, Option<&str>, usize); 4] = [
            ("GET one object", format!("{PLURAL}/{object}"), None, 900),
            ("LIST, consistent", PLURAL.into(), None, 200),
            (
                "LIST, resourceVersion=0",
                format!("{PLURAL}?resourceVersion=0"),
                None,
                200,
            ),
            (
                "LIST as Table (kubectl get)",
                format!("{PLURAL}?limit=500"),
                Some(TABLE_ACCEPT),
                200,
            ),
        ];
        let mut shares = Vec::new();
        // `BINDERY_BENCH_ONLY=Table` runs only the forms whose name holds
        // it (for profiling one form).
        let only = std::env::var("BINDERY_BENCH_ONLY").unwrap_or_default();
        for (name, path, accept, full) in forms {
            if !name.contains(only.as_str()) {
                continue;
            }
            let before = BinderyTime::scrape();
            let (bound, local) = interleaved(&app, &path, accept, rounds(full)).await;
            shares.push((name, BinderyTime::scrape().since(&before), mean(&bound)));
            report.push((name, bound, local));
        }
        if "WATCH delivery".contains(only.as_str()) {
            let (bound, local) = watch_delivery(&app, rounds(200)).await;
            report.push(("WATCH delivery", bound, local));
        }
        let encoding = if asks_for_gzip() { "gzip" } else { "identity" };
        println!("kubectl-paths: {OBJECTS} objects of about 0.7 KiB in one namespace, interleaved rounds, Accept-Encoding: {encoding}");
        println!("| request | aggregated (bindery) p50 | local CRD p50 | ratio | aggregated p99 | local p99 | ratio |");
        println!("| --- | --- | --- | --- | --- | --- | --- |");
        for (name, mut bound, mut local) in report {
            let (b50, b99) = percentiles(&mut bound);
            let (l50, l99) = percentiles(&mut local);
            println!(
                "| {name} ({} rounds) | {:.2} ms | {:.2} ms | {:.2}× | {:.2} ms | {:.2} ms | {:.2}× |",
                bound.len(),
                ms(b50),
                ms(l50),
                ms(b50) / ms(l50),
                ms(b99),
                ms(l99),
                ms(b99) / ms(l99),
            );
        }
        println!();
        println!("Where a bound request's time goes (means over the rounds: the client's, bindery's own record of its requests, and its requests to the provider until their answers' heads):");
        println!("| request | client | bindery (of it: provider) | before and after bindery (app kube-apiserver, aggregator, TLS) |");
        println!("| --- | --- | --- | --- |");
        for (name, share, client) in shares {
            println!(
                "| {name} | {:.2} ms | {:.2} ms ({:.2} ms) | {:.2} ms |",
                ms(client),
                share.request_ms(),
                share.provider_ms(),
                ms(client) - share.request_ms(),
            );
        }
    });
}

/// bindery's own figures from its `/metrics`: its aggregated requests'
/// time (`apiserver_request_duration_seconds`) and their provider phase.
#[derive(Default)]
struct BinderyTime {
    request_seconds: f64,
    requests: f64,
    provider_seconds: f64,
    provider_requests: f64,
}

impl BinderyTime {
    fn scrape() -> Self {
        let (cert, key) = clusters().provider.pki.admin();
        let output = std::process::Command::new("curl")
            .args(["-sk", "--cert"])
            .arg(cert)
            .arg("--key")
            .arg(key)
            .arg(format!("{}/metrics", bindery::bindery().url))
            .output()
            .expect("curl runs");
        let text = String::from_utf8_lossy(&output.stdout);
        let mut time = BinderyTime::default();
        for line in text.lines() {
            let value = || -> f64 {
                line.rsplit(' ')
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0.0)
            };
            let aggregated = line.contains("endpoint=\"aggregated\"");
            if !aggregated {
                continue;
            }
            if line.starts_with("apiserver_request_duration_seconds_sum") {
                time.request_seconds += value();
            } else if line.starts_with("apiserver_request_duration_seconds_count") {
                time.requests += value();
            } else if line.starts_with("bindery_request_phase_duration_seconds_sum")
                && line.contains("phase=\"provider\"")
            {
                time.provider_seconds += value();
            } else if line.starts_with("bindery_request_phase_duration_seconds_count")
                && line.contains("phase=\"provider\"")
            {
                time.provider_requests += value();
            }
        }
        time
    }

    fn since(&self, before: &BinderyTime) -> BinderyTime {
        BinderyTime {
            request_seconds: self.request_seconds - before.request_seconds,
            requests: self.requests - before.requests,
            provider_seconds: self.provider_seconds - before.provider_seconds,
            provider_requests: self.provider_requests - before.provider_requests,
        }
    }

    fn request_ms(&self) -> f64 {
        1000.0 * self.request_seconds / self.requests.max(1.0)
    }

    /// The provider's time per request (requests the cache answered have
    /// none).
    fn provider_ms(&self) -> f64 {
        1000.0 * self.provider_seconds / self.requests.max(1.0)
    }
}

fn mean(times: &[Duration]) -> Duration {
    times.iter().sum::<Duration>() / (times.len().max(1) as u32)
}

/// The demo's API bound into the app cluster through bindery, and the same
/// CRD under another group installed in the app cluster itself.
fn set_up() {
    let provider = &clusters().provider;
    let app = &clusters().app;
    let _ = bindery::bindery();
    let examples = repo_root().join("deploy/examples");
    for file in ["postgresql-crd.yaml", "templates.yaml"] {
        provider.kubectl(&["apply", "-f", &examples.join(file).to_string_lossy()]);
    }
    provider.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        &format!("crd/{PLURAL}.{BOUND}"),
    ]);
    let (_, token) = binder::binder_token(true);
    let output = binder::bindery_cli("bind", &token, &["--template", "postgresql"]);
    assert!(
        output.status.success(),
        "bindery bind: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let crd = std::fs::read_to_string(examples.join("postgresql-crd.yaml"))
        .expect("the example CRD")
        .replace(BOUND, LOCAL);
    app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&crd));
    app.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        &format!("crd/{PLURAL}.{LOCAL}"),
    ]);
    let _ = app.kubectl_output(&["create", "namespace", NAMESPACE], None);
    app.kubectl(&[
        "wait",
        "--for=condition=Available",
        "--timeout=120s",
        &format!("apiservice/v1.{BOUND}"),
    ]);
}

fn collection(group: &str) -> String {
    format!("/apis/{group}/v1/namespaces/{NAMESPACE}")
}

/// `OBJECTS` objects of about 0.7 KiB on each side (made once per run).
async fn fill(app: &kube::Client) {
    let filler = "x".repeat(400);
    for group in [BOUND, LOCAL] {
        for i in 0..OBJECTS {
            let body = serde_json::json!({
                "apiVersion": format!("{group}/v1"), "kind": "PostgreSQLInstance",
                "metadata": {"name": format!("bench-{i:04}"),
                    "labels": {"app": "bench", "tier": "data"},
                    "annotations": {"bench.bindery.dev/filler": filler}},
                "spec": {"plan": "small", "version": "16",
                    "writeConnectionSecretToRef": {"name": format!("bench-{i:04}-conn")}},
            });
            let request = http::Request::post(format!("{}/{PLURAL}", collection(group)))
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(serde_json::to_vec(&body).unwrap())
                .unwrap();
            match app.request_text(request).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(error) => panic!("creating bench-{i:04} in {group}: {error}"),
            }
        }
    }
}

/// One request of `path` (below the namespace) on each side per round, in
/// alternating order; each side's times, the whole body read.
async fn interleaved(
    app: &kube::Client,
    path: &str,
    accept: Option<&str>,
    rounds: usize,
) -> (Vec<Duration>, Vec<Duration>) {
    let timed = |group: &'static str| {
        let app = app.clone();
        let uri = format!("{}/{path}", collection(group));
        let accept = accept.unwrap_or("application/json").to_string();
        async move {
            let mut request = http::Request::get(&uri)
                .header(http::header::ACCEPT, accept)
                .header(http::header::USER_AGENT, KUBECTL_AGENT);
            if asks_for_gzip() {
                request = request.header(http::header::ACCEPT_ENCODING, "gzip");
            }
            let request = request.body(kube::client::Body::empty()).unwrap();
            let started = Instant::now();
            let response = app.send(request).await.expect("an answer");
            assert!(
                response.status().is_success(),
                "{uri}: {}",
                response.status()
            );
            let gzipped = response
                .headers()
                .get(http::header::CONTENT_ENCODING)
                .is_some_and(|v| v == "gzip");
            let body: Bytes = response.into_body().collect().await.unwrap().to_bytes();
            let body = if gzipped {
                gunzip(&body)
            } else {
                body.to_vec()
            };
            let took = started.elapsed();
            assert!(serde_json::from_slice::<serde_json::Value>(&body).is_ok());
            took
        }
    };
    // Warm both sides (connections, caches) first.
    for _ in 0..(rounds / 10).max(2) {
        timed(BOUND).await;
        timed(LOCAL).await;
    }
    let (mut bound, mut local) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        if round % 2 == 0 {
            bound.push(timed(BOUND).await);
            local.push(timed(LOCAL).await);
        } else {
            local.push(timed(LOCAL).await);
            bound.push(timed(BOUND).await);
        }
    }
    (bound, local)
}

/// Whether requests ask for gzip, as kubectl's do unless
/// `BINDERY_BENCH_ENCODING=identity`.
fn asks_for_gzip() -> bool {
    std::env::var("BINDERY_BENCH_ENCODING").map_or(true, |e| e != "identity")
}

fn gunzip(body: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(body)
        .read_to_end(&mut out)
        .expect("a gzip body");
    out
}

/// Watch delivery: each round changes one object at the kube-apiserver that
/// stores it (the provider's for the bound side, the app cluster's for the
/// local one) and times until a client watching through the app cluster
/// gets the event.
async fn watch_delivery(app: &kube::Client, rounds: usize) -> (Vec<Duration>, Vec<Duration>) {
    let provider = clusters().provider.client().await;
    let object = format!("bench-{:04}", 7);
    // The bound object's provider namespace, found by its name.
    let found: serde_json::Value = provider
        .request(
            http::Request::get(format!(
                "/apis/{BOUND}/v1/{PLURAL}?fieldSelector=metadata.name%3D{object}"
            ))
            .body(Vec::new())
            .unwrap(),
        )
        .await
        .expect("the provider's copy");
    let provider_namespace = found["items"][0]["metadata"]["namespace"]
        .as_str()
        .expect("the bound object on the provider")
        .to_string();
    let mut watches = Vec::new();
    for group in [BOUND, LOCAL] {
        let request = http::Request::get(format!(
            "{}/{PLURAL}?watch=true&fieldSelector=metadata.name%3D{object}&resourceVersion=0",
            collection(group)
        ))
        .header(http::header::USER_AGENT, KUBECTL_AGENT)
        .body(Vec::new())
        .unwrap();
        let events = app
            .request_events::<serde_json::Value>(request)
            .await
            .expect("a watch");
        let mut events = Box::pin(events);
        // The initial ADDED.
        tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .expect("the initial event")
            .expect("a stream")
            .expect("an event");
        watches.push(events);
    }
    let (mut bound, mut local) = (Vec::new(), Vec::new());
    for round in 0..rounds + 2 {
        for side in [round % 2, 1 - round % 2] {
            let (client, path) = if side == 0 {
                (
                    &provider,
                    format!("/apis/{BOUND}/v1/namespaces/{provider_namespace}/{PLURAL}/{object}"),
                )
            } else {
                (app, format!("{}/{PLURAL}/{object}", collection(LOCAL)))
            };
            let patch = serde_json::json!({"metadata": {"annotations": {"bench.bindery.dev/round": round.to_string()}}});
            let request = http::Request::patch(path)
                .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
                .body(serde_json::to_vec(&patch).unwrap())
                .unwrap();
            let started = Instant::now();
            let delivered = async {
                let event =
                    tokio::time::timeout(Duration::from_secs(30), watches[side].next()).await;
                (event, started.elapsed())
            };
            let (written, (event, took)) = tokio::join!(client.request_text(request), delivered);
            written.expect("the change");
            let event = event.expect("an event within 30 s");
            assert!(
                matches!(event, Some(Ok(kube::core::WatchEvent::Modified(_)))),
                "{event:?}"
            );
            // The first two rounds warm up.
            if round >= 2 {
                if side == 0 {
                    bound.push(took)
                } else {
                    local.push(took)
                }
            }
        }
    }
    (bound, local)
}

fn percentiles(times: &mut [Duration]) -> (Duration, Duration) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.99))
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
