//! GET latency through bindery against the same GET made directly to the
//! provider, interleaved in one run on the same real provider (started by
//! the test fixture): each round times one direct GET and one GET through
//! bindery of the same object, in alternating order, so that whatever else
//! the two shared cores are doing weighs on both sides alike. Prints p50 and
//! p99 per side and the ratio of the p50s. `cargo bench --bench get_latency`
//! makes 5,000 rounds; `cargo test` runs a few as a smoke test. Results and
//! the command are recorded in `benches/RESULTS.md`.

#[allow(dead_code)]
#[path = "../tests/e2e/bindery.rs"]
mod bindery;
#[allow(dead_code)]
#[path = "../tests/e2e/fixture.rs"]
mod fixture;
mod support;

use fixture::clusters;
use kube::api::{Api, DynamicObject, PostParams};
use std::time::{Duration, Instant};
use support::widgets;

const OBJECT: &str = "latency-probe";

fn main() {
    let benching = std::env::args().any(|a| a == "--bench");
    let (warm_up, rounds) = if benching {
        (
            500,
            std::env::var("BINDERY_BENCH_ROUNDS")
                .ok()
                .and_then(|r| r.parse().ok())
                .unwrap_or(5000),
        )
    } else {
        (5, 20)
    };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let consumer = support::widgets_consumer("latency");
    runtime.block_on(async {
        let direct = widgets(clusters().provider.client().await, "kube-bind-latency-load");
        let through = widgets(consumer.client().await, "load");
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "conformance.bindery.dev/v1", "kind": "Widget",
            "metadata": {"name": OBJECT}, "spec": {"size": "small", "replicas": 1},
        }))
        .expect("a widget");
        // Through bindery, so that it carries the identity labels; the
        // direct GETs read the very same object.
        let _ = through.create(&PostParams::default(), &object).await;
        let timed = |api: &Api<DynamicObject>| {
            let api = api.clone();
            async move {
                let started = Instant::now();
                api.get(OBJECT).await.expect("the object");
                started.elapsed()
            }
        };
        for _ in 0..warm_up {
            timed(&direct).await;
            timed(&through).await;
        }
        let (mut direct_times, mut bindery_times) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            if round % 2 == 0 {
                direct_times.push(timed(&direct).await);
                bindery_times.push(timed(&through).await);
            } else {
                bindery_times.push(timed(&through).await);
                direct_times.push(timed(&direct).await);
            }
        }
        let mut p50s = Vec::new();
        for (side, times) in [
            ("direct", &mut direct_times),
            ("bindery", &mut bindery_times),
        ] {
            times.sort();
            let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
            println!(
                "get-latency/{side}: {rounds} GETs: p50 {:.3} ms, p99 {:.3} ms",
                ms(at(0.5)),
                ms(at(0.99)),
            );
            p50s.push(at(0.5));
        }
        println!(
            "get-latency: p50 bindery / direct = {:.3} (target: <= 1.15)",
            ms(p50s[1]) / ms(p50s[0])
        );
    });
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
