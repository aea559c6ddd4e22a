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
        // connection, against one watch alone on such a connection.
        let kubeconfig = kube::config::Kubeconfig::read_from(&consumer.kubeconfig)
            .expect("the consumer's kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("the consumer's config");
        let one_connection = widgets(http2::client(&config).await, "load");
        let alone = widgets(http2::client(&config).await, "load");
        let (_, shared_p99) = side(
            &direct,
            "bindery-one-h2-connection",
            &one_connection,
            watchers,
            rounds,
        )
        .await;
        let (_, lone_p99) = side(&direct, "bindery-lone-watch", &alone, 1, rounds * 5).await;
        println!(
            "watch-fanout: {watchers} watches on one HTTP/2 connection - a lone watch: p99 {:+.2} ms (target: <= +2 ms)",
            ms(shared_p99) - ms(lone_p99),
        );
    });
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
    for task in tasks {
        task.abort();
    }
    delays
}
