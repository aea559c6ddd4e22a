//! Watch-event delivery to many concurrent watchers, through bindery and
//! directly on the provider, side by side in one run on the same real
//! provider (started by the test fixture): every watcher watches the same
//! object, one write is made on the provider per round, and each watcher's
//! delay from the write until it holds the event is one sample. Prints p50
//! and p99 per side. Then as an app cluster's aggregator watches: every
//! watcher on one HTTP/2 connection to bindery, against one watch alone on
//! a connection of its own. `cargo bench --bench watch_fanout` uses 1,000 watchers;
//! `cargo test` runs it small, as a smoke test. Results and the command are
//! recorded in `benches/RESULTS.md`.

#[allow(dead_code)]
#[path = "../tests/e2e/bindery.rs"]
mod bindery;
#[allow(dead_code)]
#[path = "../tests/e2e/fixture.rs"]
mod fixture;
#[allow(dead_code)]
#[path = "../tests/e2e/http2.rs"]
mod http2;
mod support;

use fixture::clusters;
use futures::TryStreamExt;
use kube::api::{
    Api, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use std::time::{Duration, Instant};
use support::widgets;
use tokio::sync::mpsc;

const OBJECT: &str = "fanout-probe";

fn main() {
    let benching = std::env::args().any(|a| a == "--bench");
    let (watchers, rounds) = if benching { (1000, 20) } else { (20, 2) };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let consumer = support::widgets_consumer("fanout");
    runtime.block_on(async {
        let provider = clusters().provider.client().await;
        let direct = widgets(provider, "kube-bind-fanout-load");
        let through = widgets(consumer.client().await, "load");
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "conformance.bindery.dev/v1", "kind": "Widget",
            "metadata": {"name": OBJECT}, "spec": {"size": "small"},
        }))
        .expect("a widget");
        let _ = through.create(&PostParams::default(), &object).await;
        let (direct_p50, direct_p99) =
            side(&direct, "direct", &direct, watchers, rounds).await;
        let (bindery_p50, bindery_p99) =
            side(&direct, "bindery", &through, watchers, rounds).await;
        println!(
            "watch-fanout: bindery - direct: p50 {:+.2} ms, p99 {:+.2} ms (target: p99 <= direct + 2 ms)",
            ms(bindery_p50) - ms(direct_p50),
            ms(bindery_p99) - ms(direct_p99),
        );
        // As an app cluster's aggregator: every watch on one HTTP/2
        // connection, against one watch alone on such a connection. The
        // aggregator passes a watch's frames on without decoding them, so
        // an event counts as delivered when its frame is read (no JSON
        // decode on the client, which made 1,000 decodes one after another
        // part of the figure before).
        let consumer_config = config_of(&consumer.kubeconfig).await;
        let provider_config = config_of(&clusters().provider.kubeconfig).await;
        let through_path = "/apis/conformance.bindery.dev/v1/namespaces/load/widgets";
        let direct_path =
            "/apis/conformance.bindery.dev/v1/namespaces/kube-bind-fanout-load/widgets";
        // At 1,000 watches (the target), and at 250 (kube-apiserver's own
        // limit of streams on a connection, Go's default). The provider's
        // lone watch on a connection of its own is printed beside bindery's.
        let (_, lone) = frame_side(
            &direct,
            "bindery-lone-watch",
            &consumer_config,
            through_path,
            1,
            rounds * 5,
        )
        .await;
        let sizes = if watchers > 250 { vec![watchers, 250] } else { vec![watchers] };
        for size in sizes {
            let (_, many) = frame_side(
                &direct,
                "bindery-one-h2-connection",
                &consumer_config,
                through_path,
                size,
                rounds,
            )
            .await;
            println!(
                "watch-fanout: {size} watches on one HTTP/2 connection - a lone watch: p99 {:+.2} ms (target at 1,000: <= +2 ms)",
                ms(many) - ms(lone),
            );
        }
        frame_side(
            &direct,
            "direct-lone-watch",
            &provider_config,
            direct_path,
            1,
            rounds * 5,
        )
        .await;
    });
}

async fn config_of(kubeconfig: &std::path::Path) -> kube::Config {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).expect("a kubeconfig");
    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("a config")
}

/// [`side`], with every watch on one new HTTP/2 connection to the server
/// `config` names, read frame by frame ([`frame_deliveries`]).
async fn frame_side(
    writer: &Api<DynamicObject>,
    side: &str,
    config: &kube::Config,
    path: &str,
    watchers: usize,
    rounds: usize,
) -> (Duration, Duration) {
    let connection = http2::connection(config).await;
    let url = config.cluster_url.to_string();
    let collection = format!("{}{path}", url.trim_end_matches('/'));
    let mut delays = frame_deliveries(writer, connection, &collection, watchers, rounds).await;
    report(side, watchers, rounds, &mut delays)
}

/// One side's deliveries ([`deliveries`]) of `watchers` watches on
/// `watched` over `rounds` writes through `writer`, printed; its p50 and p99.
async fn side(
    writer: &Api<DynamicObject>,
    side: &str,
    watched: &Api<DynamicObject>,
    watchers: usize,
    rounds: usize,
) -> (Duration, Duration) {
    let mut delays = deliveries(writer, watched, watchers, rounds).await;
    report(side, watchers, rounds, &mut delays)
}

/// Prints a side's p50, p99 and max; its p50 and p99.
fn report(
    side: &str,
    watchers: usize,
    rounds: usize,
    delays: &mut [Duration],
) -> (Duration, Duration) {
    delays.sort();
    let at = |q: f64| delays[((delays.len() - 1) as f64 * q) as usize];
    println!(
        "watch-fanout/{side}: {watchers} watchers x {rounds} writes: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms(at(0.5)),
        ms(at(0.99)),
        ms(at(1.0)),
    );
    (at(0.5), at(0.99))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Opens `watchers` watches of the object on `watched`, writes it `rounds`
/// times through `writer` (on the provider), and returns every watcher's
/// delay from each write's start until it held that write's event.
async fn deliveries(
    writer: &Api<DynamicObject>,
    watched: &Api<DynamicObject>,
    watchers: usize,
    rounds: usize,
) -> Vec<Duration> {
    let version = watched
        .list(&ListParams::default().fields(&format!("metadata.name={OBJECT}")))
        .await
        .expect("list before watching")
        .metadata
        .resource_version
        .expect("a list resourceVersion");
    let (tx, mut rx) = mpsc::unbounded_channel::<(String, Instant)>();
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let stream = watched
            .watch(
                &WatchParams::default()
                    .fields(&format!("metadata.name={OBJECT}"))
                    .timeout(290),
                &version,
            )
            .await
            .expect("watch opens");
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Ok(Some(event)) = stream.try_next().await {
                if let WatchEvent::Modified(object) = event {
                    let note = object.data["spec"]["note"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    let _ = tx.send((note, Instant::now()));
                }
            }
        }));
    }
    // Let every watch reach the server before the first write.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let delays = rounds_of(writer, &mut rx, watchers, rounds).await;
    for task in tasks {
        task.abort();
    }
    delays
}

/// Writes the object `rounds` times through `writer` (on the provider),
/// each time waiting until all `watchers` reported that write's note on
/// `rx`: every watcher's delay from the write's start.
async fn rounds_of(
    writer: &Api<DynamicObject>,
    rx: &mut mpsc::UnboundedReceiver<(String, Instant)>,
    watchers: usize,
    rounds: usize,
) -> Vec<Duration> {
    let mut delays = Vec::with_capacity(watchers * rounds);
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_nanos();
    for round in 0..rounds {
        let note = format!("{run:x}-{round}");
        let start = Instant::now();
        let patch = Patch::Merge(serde_json::json!({"spec": {"note": note}}));
        writer
            .patch(OBJECT, &PatchParams::default(), &patch)
            .await
            .expect("patch on the provider");
        let mut received = 0;
        while received < watchers {
            let (seen, at) = tokio::time::timeout(Duration::from_secs(60), rx.recv())
                .await
                .unwrap_or_else(|_| panic!("round {round}: {received} of {watchers} events"))
                .expect("the watchers hold the channel");
            if seen == note {
                received += 1;
                delays.push(at - start);
            }
        }
    }
    delays
}

/// [`deliveries`] on one HTTP/2 connection (`connection`) to the collection
/// at absolute URL `collection`, each watch's body read frame by frame: an
/// event is held once the line that carries it has been read, undecoded.
async fn frame_deliveries(
    writer: &Api<DynamicObject>,
    connection: hyper::client::conn::http2::SendRequest<kube::client::Body>,
    collection: &str,
    watchers: usize,
    rounds: usize,
) -> Vec<Duration> {
    use http_body_util::BodyExt;
    let selector = format!("metadata.name%3D{OBJECT}");
    let version = writer
        .get(OBJECT)
        .await
        .expect("the object")
        .metadata
        .resource_version
        .expect("its resourceVersion");
    let (tx, mut rx) = mpsc::unbounded_channel::<(String, Instant)>();
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let request = http::Request::get(format!(
            "{collection}?watch=1&fieldSelector={selector}&resourceVersion={version}&timeoutSeconds=290"
        ))
        .body(kube::client::Body::empty())
        .expect("a request");
        let mut sender = connection.clone();
        tokio::time::timeout(Duration::from_secs(30), sender.ready())
            .await
            .expect("the connection takes one more stream within 30 s")
            .expect("the connection is open");
        let response = sender.send_request(request).await.expect("the watch opens");
        assert_eq!(response.status(), 200, "the watch opens");
        let mut body = response.into_body();
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            let mut pending = Vec::new();
            while let Some(Ok(frame)) = body.frame().await {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                let at = Instant::now();
                pending.extend_from_slice(&data);
                while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).collect();
                    if let Some(note) = note_of(&line) {
                        let _ = tx.send((note, at));
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let delays = rounds_of(writer, &mut rx, watchers, rounds).await;
    for task in tasks {
        task.abort();
    }
    delays
}

/// The `spec.note` a watch event's line carries, found without decoding it.
fn note_of(line: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"\"note\":\"";
    let at = line.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let end = line[at..].iter().position(|b| *b == b'"')?;
    String::from_utf8(line[at..at + end].to_vec()).ok()
}
