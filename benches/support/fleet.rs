//! The fleet's steady load (issue 36), on the consumers the memory bench
//! has set up (each with its own connection, `things0`..`things<R-1>` of
//! the bench's group bound, one object `one` in each): every consumer
//! watches one of its resources from the state, and lists and gets once
//! during the phase, while a churn of 20 writes/s (merge patches through
//! bindery, spread over the consumers) changes the watched objects. Prints
//! each verb's p50 and p99 beside the objective SIG Scalability holds
//! kube-apiserver to, the watch events' delivery (from the write's start to
//! the watcher holding it), and bindery's CPU per request over the phase.

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, Patch, PatchParams, WatchEvent, WatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The churn's rate.
pub const WRITES_PER_SECOND: u64 = 20;
/// The annotation a write carries: when it started, in nanoseconds since
/// the epoch.
const WRITTEN_AT: &str = "fleet.bindery.dev/written-at";
/// Watches opened at once while the phase sets up.
const OPENING: usize = 64;

/// Latencies of one kind of request, and how many failed.
#[derive(Default)]
struct Samples {
    took: Vec<Duration>,
    failed: usize,
}

impl Samples {
    fn record<T, E: std::fmt::Display>(&mut self, started: Instant, result: &Result<T, E>) {
        match result {
            Ok(_) => self.took.push(started.elapsed()),
            Err(error) => {
                if self.failed == 0 {
                    eprintln!("fleet: a request failed: {error}");
                }
                self.failed += 1;
            }
        }
    }

    /// p50 and p99 in ms.
    fn quantiles(&mut self) -> (f64, f64) {
        self.took.sort();
        let at = |q: f64| {
            self.took
                .get(((self.took.len().max(1) - 1) as f64 * q) as usize)
                .map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
        };
        (at(0.5), at(0.99))
    }
}

type Shared = Arc<Mutex<Samples>>;

fn things(group: &str, r: usize) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, "v1", &format!("Thing{r}")),
        &format!("things{r}"),
    )
}

fn api(client: &kube::Client, group: &str, r: usize) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), "default", &things(group, r))
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_nanos()
}

/// bindery's CPU time so far (user and system), from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command's closing parenthesis; utime and stime
    // are the 14th and 15th of the whole line.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i)?.parse::<f64>().ok())
        .sum();
    ticks / clock_ticks_per_second()
}

fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// One watch per consumer, each event's delivery recorded.
async fn open_watches(
    clients: &[kube::Client],
    group: &str,
    resources: usize,
    lifetime: Duration,
    delivered: &Shared,
    opened: &Shared,
) -> Vec<tokio::task::JoinHandle<()>> {
    futures::stream::iter(clients.iter().enumerate())
        .map(|(i, client)| {
            let (delivered, opened) = (delivered.clone(), opened.clone());
            let api = api(client, group, i % resources);
            async move {
                let params = WatchParams::default().timeout(lifetime.as_secs() as u32);
                let started = Instant::now();
                let stream = api.watch(&params, "0").await;
                opened.lock().unwrap().record(started, &stream);
                let stream = stream.ok()?;
                Some(tokio::spawn(async move {
                    let mut stream = std::pin::pin!(stream);
                    while let Ok(Some(event)) = stream.try_next().await {
                        let WatchEvent::Modified(object) = event else {
                            continue;
                        };
                        let written = object
                            .metadata
                            .annotations
                            .as_ref()
                            .and_then(|a| a.get(WRITTEN_AT)?.parse::<u128>().ok());
                        if let Some(written) = written {
                            let delay = now_nanos().saturating_sub(written);
                            delivered
                                .lock()
                                .unwrap()
                                .took
                                .push(Duration::from_nanos(delay as u64));
                        }
                    }
                }))
            }
        })
        .buffer_unordered(OPENING)
        .filter_map(std::future::ready)
        .collect()
        .await
}

/// Runs the phase for `seconds` against `clients` (consumer `i` watches
/// `things<i % resources>`), bindery being process `pid`; prints the
/// figures. Whether every request succeeded.
pub async fn run(
    clients: &[kube::Client],
    group: &str,
    resources: usize,
    seconds: u64,
    pid: u32,
) -> bool {
    let n = clients.len();
    let phase = Duration::from_secs(seconds);
    let (delivered, opened) = (Shared::default(), Shared::default());
    let (writes, lists, gets) = (Shared::default(), Shared::default(), Shared::default());
    let opening = Instant::now();
    let watchers = open_watches(
        clients,
        group,
        resources,
        phase + Duration::from_secs(60),
        &delivered,
        &opened,
    )
    .await;
    println!(
        "fleet: {} watches open in {:.1?}",
        watchers.len(),
        opening.elapsed()
    );
    let cpu_before = cpu_seconds(pid);
    let started = Instant::now();
    let mut tasks = Vec::new();
    // The churn: 20 writes/s, each to another consumer's watched object.
    let write_every = Duration::from_millis(1000 / WRITES_PER_SECOND);
    let read_every = phase / n.max(1) as u32;
    let mut next_write = tokio::time::Instant::now();
    let mut next_read = tokio::time::Instant::now();
    let (mut written, mut read) = (0usize, 0usize);
    while started.elapsed() < phase {
        let now = tokio::time::Instant::now();
        if now >= next_write {
            let i = (written * 7919) % n;
            let (api, writes) = (api(&clients[i], group, i % resources), writes.clone());
            tasks.push(tokio::spawn(async move {
                let patch = serde_json::json!({"metadata": {"annotations": {
                    WRITTEN_AT: now_nanos().to_string()}}});
                let started = Instant::now();
                let result = api
                    .patch("one", &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                writes.lock().unwrap().record(started, &result);
            }));
            written += 1;
            next_write += write_every;
        }
        if now >= next_read && read < n {
            let api = api(&clients[read], group, read % resources);
            let (lists, gets) = (lists.clone(), gets.clone());
            tasks.push(tokio::spawn(async move {
                let started = Instant::now();
                let result = api.list(&Default::default()).await;
                lists.lock().unwrap().record(started, &result);
                let started = Instant::now();
                let result = api.get("one").await;
                gets.lock().unwrap().record(started, &result);
            }));
            read += 1;
            next_read += read_every;
        }
        tokio::time::sleep_until(
            next_write
                .min(next_read)
                .max(now + Duration::from_millis(1)),
        )
        .await;
    }
    for task in tasks {
        let _ = task.await;
    }
    let elapsed = started.elapsed();
    let cpu = cpu_seconds(pid) - cpu_before;
    // The last writes' events on their way.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for watcher in watchers {
        watcher.abort();
    }
    let requests = written + 2 * read;
    println!(
        "fleet: {n} consumers for {elapsed:.1?}: {written} writes ({:.1}/s), {read} lists, {read} gets; \
         bindery CPU {cpu:.2} s, {:.0} µs per request",
        written as f64 / elapsed.as_secs_f64(),
        cpu * 1e6 / requests.max(1) as f64,
    );
    let mut clean = true;
    for (verb, samples, objective) in [
        ("watch open", &opened, "-"),
        ("get", &gets, "p99 <= 1 s"),
        ("patch", &writes, "p99 <= 1 s"),
        ("list (a namespace)", &lists, "p99 <= 5 s"),
        ("watch event delivery", &delivered, "-"),
    ] {
        let mut samples = samples.lock().unwrap();
        let (p50, p99) = samples.quantiles();
        println!(
            "fleet/{verb}: {} samples, {} failed: p50 {p50:.2} ms, p99 {p99:.2} ms (objective: {objective})",
            samples.took.len(),
            samples.failed
        );
        clean &= samples.failed == 0;
    }
    let delivered = delivered.lock().unwrap().took.len();
    println!("fleet: {delivered} of {written} writes' events delivered");
    clean && delivered == written
}
