//! A noisy neighbour: consumer B (an app cluster bound with `bindery bind
//! --template postgresql`, as in `kubectl_paths`) makes kubectl's requests
//! through its app cluster's aggregator (GET one object, LIST, LIST as a
//! Table) while consumer A (another consumer of the same provider resource
//! through its own export, on bindery's consumer endpoint) floods bindery:
//! Tables with a new label selector each time, 1,000 watches held open,
//! creates in new namespaces, dry-run creates nested 10,000 deep, and GETs
//! of made-up subresources. B's latencies are measured without the flood
//! (the baseline), with it, and without it again, in one run; the ratios
//! are of the flood to the baseline. Also printed: what A got (answers by
//! code), and bindery's process (the same one throughout) and its resident
//! memory before, during and after. `cargo bench --bench noisy_neighbour`
//! (`BINDERY_BENCH_ROUNDS` scales the rounds); `cargo test` runs a few
//! rounds as a smoke test. Results are recorded in `benches/RESULTS.md`.

#[allow(dead_code)]
#[path = "../tests/e2e/binder.rs"]
mod binder;
#[allow(dead_code)]
#[path = "../tests/e2e/bindery.rs"]
mod bindery;
#[allow(dead_code)]
#[path = "../tests/e2e/fixture.rs"]
mod fixture;

use fixture::{clusters, repo_root};
use http_body_util::BodyExt;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const OBJECTS: usize = 200;
const NAMESPACE: &str = "neighbour";
const GROUP: &str = "db.example.com";
const PLURAL: &str = "postgresqlinstances";
const CRD: &str = "postgresqlinstances.db.example.com";
/// The control: the same resource as a CRD of B's own app cluster, read
/// the same way in the same rounds, so that what the flood costs the
/// machine (two cores shared by every process) is told from what it costs
/// bindery's consumers.
const LOCAL_GROUP: &str = "local.bench.bindery.dev";
const KUBECTL_AGENT: &str = "kubectl/v1.33.0 (linux/amd64) kubernetes/bindery-bench";
const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
/// A's watches held open during the flood.
const WATCHES: usize = 1_000;

fn main() {
    let benching = std::env::args().any(|a| a == "--bench");
    let scale: usize = std::env::var("BINDERY_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    let rounds = if benching { 150 * scale } else { 3 };
    let watches = if benching { WATCHES } else { 20 };
    set_up();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let app = clusters().app.client().await;
        fill(&app).await;
        let noisy = bindery::bindery().consumer("noisy-a", CRD, "noisy");
        let a = noisy.client().await;
        let pid = bindery_pid();
        let memory = |when: &str| (when.to_string(), resident_kib(pid));
        let mut memories = vec![memory("before")];
        // Warm B's connections and the cache.
        b_rounds(&app, rounds.min(20)).await;
        let mut cpu = Vec::new();
        let mark = Cpu::now(pid);
        let baseline = b_rounds(&app, rounds).await;
        cpu.push(("baseline", mark.since(pid)));
        let stop = Arc::new(AtomicBool::new(false));
        let codes: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
        let flood = tokio::spawn(flood(a, watches, stop.clone(), codes.clone()));
        // Let the flood build up (its watches open) before measuring.
        tokio::time::sleep(Duration::from_secs(if benching { 10 } else { 1 })).await;
        let mark = Cpu::now(pid);
        let flooded = b_rounds(&app, rounds).await;
        cpu.push(("flood", mark.since(pid)));
        memories.push(memory("during the flood"));
        stop.store(true, Ordering::SeqCst);
        flood.await.expect("the flood ends");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mark = Cpu::now(pid);
        let after = b_rounds(&app, rounds).await;
        cpu.push(("after", mark.since(pid)));
        memories.push(memory("after"));
        assert_eq!(bindery_pid(), pid, "bindery was restarted");
        println!("noisy-neighbour: B (kubectl through its app cluster, {OBJECTS} objects) against its own baseline while A floods");
        println!("| B's request | baseline p50 | flood p50 | ratio | baseline p99 | flood p99 | ratio | after p99 |");
        println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
        let mut ratios = BTreeMap::new();
        for (name, mut base) in baseline {
            let mut during = flooded[&name].clone();
            let mut later = after[&name].clone();
            let (b50, b99) = percentiles(&mut base);
            let (f50, f99) = percentiles(&mut during);
            let (_, a99) = percentiles(&mut later);
            ratios.insert(name.clone(), (ms(f50) / ms(b50), ms(f99) / ms(b99)));
            println!(
                "| {name} ({} rounds) | {:.2} ms | {:.2} ms | {:.2}× | {:.2} ms | {:.2} ms | {:.2}× | {:.2} ms |",
                base.len(),
                ms(b50),
                ms(f50),
                ms(f50) / ms(b50),
                ms(b99),
                ms(f99),
                ms(f99) / ms(b99),
                ms(a99),
            );
        }
        println!();
        println!("The flood's ratio for B's bound resource over the same ratio for the local CRD (1.00: bindery's consumers slowed no more than the machine):");
        for (name, (r50, r99)) in &ratios {
            if let Some((l50, l99)) = ratios.get(&format!("local CRD: {name}")) {
                println!("  {name}: p50 {:.2}, p99 {:.2}", r50 / l50, r99 / l99);
            }
        }
        println!();
        println!("What A's flood got, by request and code: {:?}", codes.lock().unwrap());
        println!("bindery's process (pid {pid}) throughout; resident memory: {memories:?}");
        println!(
            "CPU while B was measured, in cores of the machine's {}: ",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        for (phase, (machine, bindery)) in cpu {
            println!("  {phase}: machine busy {machine:.2}, bindery {bindery:.2}");
        }
    });
}

/// B's kubectl requests, one of each form per round; each form's times.
async fn b_rounds(app: &kube::Client, rounds: usize) -> BTreeMap<String, Vec<Duration>> {
    let object = format!("b-{:04}", OBJECTS / 2);
    let forms = [
        ("GET one object", format!("{PLURAL}/{object}"), None),
        ("LIST", PLURAL.to_string(), None),
        (
            "LIST as Table (kubectl get)",
            format!("{PLURAL}?limit=500"),
            Some(TABLE_ACCEPT),
        ),
    ];
    let mut times: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    for _ in 0..rounds {
        for ((name, path, accept), (group, label)) in forms
            .iter()
            .flat_map(|form| [(form, (GROUP, "")), (form, (LOCAL_GROUP, "local CRD: "))])
        {
            let name = format!("{label}{name}");
            let uri = format!("/apis/{group}/v1/namespaces/{NAMESPACE}/{path}");
            let request = http::Request::get(&uri)
                .header(http::header::ACCEPT, accept.unwrap_or("application/json"))
                .header(http::header::USER_AGENT, KUBECTL_AGENT)
                .body(kube::client::Body::empty())
                .unwrap();
            let started = Instant::now();
            let response = app.send(request).await.expect("an answer");
            assert!(
                response.status().is_success(),
                "{uri}: {}",
                response.status()
            );
            response.into_body().collect().await.expect("a body");
            times
                .entry(name.to_string())
                .or_default()
                .push(started.elapsed());
        }
    }
    times
}

/// A's flood until `stop`: each kind of request in a loop of its own.
async fn flood(
    a: kube::Client,
    watches: usize,
    stop: Arc<AtomicBool>,
    codes: Arc<Mutex<BTreeMap<String, usize>>>,
) {
    let collection = |namespace: &str| format!("/apis/{GROUP}/v1/namespaces/{namespace}/{PLURAL}");
    let count = {
        let codes = codes.clone();
        move |kind: &str, code: u16| {
            *codes
                .lock()
                .unwrap()
                .entry(format!("{kind} {code}"))
                .or_default() += 1;
        }
    };
    let mut held = Vec::new();
    for i in 0..watches {
        let request = http::Request::get(format!(
            "{}?watch=true&resourceVersion=0&labelSelector=w%3D{i}",
            collection("a-watched")
        ))
        .body(kube::client::Body::empty())
        .unwrap();
        match a.send(request).await {
            Ok(response) => {
                count("watch", response.status().as_u16());
                held.push(response);
            }
            Err(_) => count("watch", 0),
        }
    }
    let mut tasks = Vec::new();
    // Three Table readers, each with a new label selector every time.
    for reader in 0..3 {
        let (a, stop, count) = (a.clone(), stop.clone(), count.clone());
        let uri = collection("a-tables");
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                let request = http::Request::get(format!("{uri}?labelSelector=r{reader}%3D{i}"))
                    .header(http::header::ACCEPT, TABLE_ACCEPT)
                    .body(kube::client::Body::empty())
                    .unwrap();
                send(&a, request, "table", &count).await;
            }
        }));
    }
    // Creates, each in a new namespace.
    {
        let (a, stop, count) = (a.clone(), stop.clone(), count.clone());
        tasks.push(tokio::spawn(async move {
            let run = std::process::id();
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                let body = serde_json::json!({"apiVersion": format!("{GROUP}/v1"),
                    "kind": "PostgreSQLInstance", "metadata": {"name": "x"},
                    "spec": {"plan": "small"}});
                let request = http::Request::post(collection(&format!("a-{run}-{i}")))
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
                    .unwrap();
                send(&a, request, "create in a new namespace", &count).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
    }
    // Dry-run creates nested 10,000 deep.
    {
        let (a, stop, count) = (a.clone(), stop.clone(), count.clone());
        tasks.push(tokio::spawn(async move {
            let levels = 9_999;
            let deep = format!(
                r#"{{"apiVersion":"{GROUP}/v1","kind":"PostgreSQLInstance","metadata":{{"name":"deep"}},"spec":{}null{}}}"#,
                "{\"a\":".repeat(levels - 1),
                "}".repeat(levels - 1)
            );
            while !stop.load(Ordering::SeqCst) {
                let request = http::Request::post(format!("{}?dryRun=All", collection("a-deep")))
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(kube::client::Body::from(deep.clone().into_bytes()))
                    .unwrap();
                send(&a, request, "deep dry run", &count).await;
            }
        }));
    }
    // Made-up subresources.
    {
        let (a, stop, count) = (a.clone(), stop.clone(), count.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                let request =
                    http::Request::get(format!("{}/x/made-up-{i}", collection("a-tables")))
                        .body(kube::client::Body::empty())
                        .unwrap();
                send(&a, request, "made-up subresource", &count).await;
            }
        }));
    }
    for task in tasks {
        task.await.expect("a flood task");
    }
    drop(held);
}

async fn send(
    client: &kube::Client,
    request: http::Request<kube::client::Body>,
    kind: &str,
    count: &impl Fn(&str, u16),
) {
    match client.send(request).await {
        Ok(response) => {
            let code = response.status().as_u16();
            let _ = response.into_body().collect().await;
            count(kind, code);
        }
        Err(_) => count(kind, 0),
    }
}

/// The demo's API bound into the app cluster through bindery (consumer B).
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
        &format!("crd/{CRD}"),
    ]);
    let (_, token) = binder::binder_token(true);
    let output = binder::bindery_cli("bind", &token, &["--template", "postgresql"]);
    assert!(
        output.status.success(),
        "bindery bind: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let _ = app.kubectl_output(&["create", "namespace", NAMESPACE], None);
    let crd = std::fs::read_to_string(examples.join("postgresql-crd.yaml"))
        .expect("the example CRD")
        .replace(GROUP, LOCAL_GROUP);
    app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&crd));
    app.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        &format!("crd/{PLURAL}.{LOCAL_GROUP}"),
    ]);
    app.kubectl(&[
        "wait",
        "--for=condition=Available",
        "--timeout=120s",
        &format!("apiservice/v1.{GROUP}"),
    ]);
}

/// B's objects (made once per run).
async fn fill(app: &kube::Client) {
    for (group, i) in [GROUP, LOCAL_GROUP]
        .into_iter()
        .flat_map(|g| (0..OBJECTS).map(move |i| (g, i)))
    {
        let body = serde_json::json!({
            "apiVersion": format!("{group}/v1"), "kind": "PostgreSQLInstance",
            "metadata": {"name": format!("b-{i:04}"), "labels": {"app": "bench"}},
            "spec": {"plan": "small", "version": "16"},
        });
        let request =
            http::Request::post(format!("/apis/{group}/v1/namespaces/{NAMESPACE}/{PLURAL}"))
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(serde_json::to_vec(&body).unwrap())
                .unwrap();
        match app.request_text(request).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => panic!("creating b-{i:04}: {error}"),
        }
    }
}

/// The shared bindery's process.
fn bindery_pid() -> u32 {
    let kubeconfig = clusters().provider.kubeconfig.to_string_lossy().to_string();
    let output = std::process::Command::new("pgrep")
        .args([
            "-f",
            &format!("bindery serve --provider-kubeconfig {kubeconfig}"),
        ])
        .output()
        .expect("pgrep runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .find(|pid: &u32| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "bindery")
        })
        .expect("bindery's process")
}

/// A process's resident memory.
/// A moment's CPU counters: the machine's busy and total jiffies
/// (`/proc/stat`), and bindery's own (`/proc/<pid>/stat`).
struct Cpu {
    busy: u64,
    total: u64,
    bindery: u64,
    at: Instant,
}

impl Cpu {
    fn now(pid: u32) -> Cpu {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let fields: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal
        let total: u64 = fields.iter().take(8).sum();
        let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
        let own = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // utime and stime, fields 14 and 15: the 12th and 13th after the
        // `)` that ends the name (the state is the 1st).
        let after_name: Vec<&str> = own
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        let field =
            |i: usize| -> u64 { after_name.get(i).and_then(|f| f.parse().ok()).unwrap_or(0) };
        let bindery = field(11) + field(12);
        Cpu {
            busy: total - idle,
            total,
            bindery,
            at: Instant::now(),
        }
    }

    /// Cores busy on the machine, and cores bindery used, since `self`.
    fn since(&self, pid: u32) -> (f64, f64) {
        let now = Cpu::now(pid);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let total = (now.total - self.total).max(1) as f64;
        let machine = (now.busy - self.busy) as f64 / total * cores;
        // Jiffies are 1/100 s.
        let bindery = (now.bindery - self.bindery) as f64 / 100.0 / self.at.elapsed().as_secs_f64();
        (machine, bindery)
    }
}

fn resident_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn percentiles(times: &mut [Duration]) -> (Duration, Duration) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.99))
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
