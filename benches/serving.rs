//! GET, LIST and watch-event delivery through bindery against the same
//! requests made directly to the provider, side by side in one run, on the
//! same real provider cluster (started by the test fixture). Results and the
//! command are recorded in `benches/RESULTS.md`; read the two lines of each
//! group as a ratio.

#[allow(dead_code)]
#[path = "../tests/e2e/bindery.rs"]
mod bindery;
#[allow(dead_code)]
#[path = "../tests/e2e/fixture.rs"]
mod fixture;
mod support;

use criterion::{Criterion, criterion_group, criterion_main};
use fixture::clusters;
use futures::{StreamExt, TryStreamExt};
use kube::api::{
    Api, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::widgets;

const OBJECTS: usize = 200;

fn serving(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let provider = &clusters().provider;
    let consumer = support::widgets_consumer("bench");
    let (direct, through) = runtime.block_on(async {
        let direct = widgets(provider.client().await, "kube-bind-bench-load");
        let through = widgets(consumer.client().await, "load");
        for i in 0..OBJECTS {
            let object: DynamicObject = serde_json::from_value(serde_json::json!({
                "apiVersion": "conformance.bindery.dev/v1", "kind": "Widget",
                "metadata": {"name": format!("w-{i}")}, "spec": {"size": "small", "replicas": 1},
            }))
            .expect("a widget");
            // Through bindery, so that the objects carry the identity labels;
            // the direct requests read the very same objects.
            let _ = through.create(&PostParams::default(), &object).await;
        }
        (direct, through)
    });

    let mut get = c.benchmark_group("get");
    get.bench_function("direct", |b| {
        b.to_async(&runtime).iter(|| direct.get("w-1"))
    });
    get.bench_function("bindery", |b| {
        b.to_async(&runtime).iter(|| through.get("w-1"))
    });
    get.finish();

    let all = ListParams::default();
    let mut list = c.benchmark_group(format!("list-{OBJECTS}"));
    list.sample_size(30);
    list.bench_function("direct", |b| {
        b.to_async(&runtime).iter(|| direct.list(&all))
    });
    list.bench_function("bindery", |b| {
        b.to_async(&runtime).iter(|| through.list(&all))
    });
    list.finish();

    // Watch-event delivery: one provider-side change, timed from the write
    // until the watcher holds the event. Each function opens its own watch,
    // so the provider sees the same load in both.
    // Every write sets a value never written before, so none is a no-op.
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is past 1970");
    let changes = AtomicU64::new(since_epoch.as_millis() as u64 * 1000);
    let mut watch = c.benchmark_group("watch-event");
    watch.sample_size(30);
    for (name, watched) in [("direct", &direct), ("bindery", &through)] {
        watch.bench_function(name, |b| {
            b.to_async(&runtime).iter_custom(|iters| {
                let first = changes.fetch_add(iters, Ordering::Relaxed);
                deliver(&direct, watched, first, iters, 1)
            })
        });
    }
    watch.finish();

    // Throughput: a burst of concurrent writes, timed until every event
    // has arrived.
    let mut burst = c.benchmark_group(format!("watch-burst-{BURST}"));
    burst.sample_size(10);
    for (name, watched) in [("direct", &direct), ("bindery", &through)] {
        burst.bench_function(name, |b| {
            b.to_async(&runtime).iter_custom(|iters| {
                let first = changes.fetch_add(iters * BURST as u64, Ordering::Relaxed);
                deliver(&direct, watched, first, iters, BURST)
            })
        });
    }
    burst.finish();
}

const BURST: usize = 50;

/// Makes `rounds` rounds of `per_round` concurrent writes through `writer`
/// (directly on the provider) and returns the time from each round's first
/// write until `watched`'s watch delivered all of that round's events.
async fn deliver(
    writer: &Api<DynamicObject>,
    watched: &Api<DynamicObject>,
    first_change: u64,
    rounds: u64,
    per_round: usize,
) -> Duration {
    let version = watched
        .list(&ListParams::default().limit(1))
        .await
        .expect("list before watching")
        .metadata
        .resource_version
        .expect("a list resourceVersion");
    let mut events = watched
        .watch(&WatchParams::default().timeout(290), &version)
        .await
        .expect("watch opens")
        .boxed();
    let mut total = Duration::ZERO;
    let mut change = first_change;
    for _ in 0..rounds {
        let start = Instant::now();
        let writes = (0..per_round).map(|i| {
            change += 1;
            let patch = Patch::Merge(serde_json::json!({"spec": {"note": format!("{change:x}")}}));
            async move {
                writer
                    .patch(&format!("w-{i}"), &PatchParams::default(), &patch)
                    .await
                    .expect("patch on the provider")
            }
        });
        futures::future::join_all(writes.collect::<Vec<_>>()).await;
        let mut seen = 0;
        while seen < per_round {
            match events.try_next().await.expect("watch stays healthy") {
                Some(WatchEvent::Modified(_)) => seen += 1,
                Some(_) => {}
                None => panic!(
                    "watch ended early after {seen} of {per_round} events, {:?} into the round",
                    start.elapsed()
                ),
            }
        }
        total += start.elapsed();
    }
    total
}

criterion_group!(benches, serving);
criterion_main!(benches);
