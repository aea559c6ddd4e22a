//! bindery's memory per bound consumer: one `bindery serve` of its own (its
//! resident set read from /proc) against the test fixture's real provider,
//! with 1,000 consumers × 10 bound resources. Each consumer has one export
//! of the 10 resources, creates one object in each through bindery and lists
//! each from the watch cache, over its own connection, which it keeps open
//! (as an app cluster's aggregator does). Prints the resident set before,
//! after the catalog holds every consumer, after the traffic, and the peak,
//! and the peak's growth per consumer; then how long a new replica takes to
//! be ready with every consumer there, and the provider LISTs it makes for
//! that. Between the two, the fleet's steady load on the same consumers
//! (`support/fleet.rs`: a watch each, a list and a get each, 20 writes/s;
//! `BINDERY_BENCH_FLEET_SECONDS`, 60 by default; 0 leaves it out). `cargo bench --bench
//! memory` runs the full size; `cargo test` runs it with 10 consumers as a
//! smoke test.
//! `BINDERY_BENCH_HTTP2=1` makes each consumer's client speak HTTP/2, as
//! an aggregator does. Results and the command are recorded in
//! `benches/RESULTS.md`.

#[allow(dead_code)]
#[path = "../tests/e2e/fixture.rs"]
mod fixture;
#[path = "support/fleet.rs"]
mod fleet;
#[path = "../tests/e2e/http2.rs"]
mod http2;

use fixture::clusters;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const GROUP: &str = "memory.bindery.dev";
const RESOURCES: usize = 10;
/// Requests in flight while setting up.
const PARALLEL: usize = 16;

fn plural(r: usize) -> String {
    format!("things{r}")
}

/// The spec of CRD `r` (also each BoundSchema's, as the controllers copy it).
fn crd_spec(r: usize) -> Value {
    json!({
        "group": GROUP,
        "names": {"plural": plural(r), "singular": format!("thing{r}"),
            "kind": format!("Thing{r}"), "listKind": format!("Thing{r}List")},
        "scope": "Namespaced",
        "versions": [{"name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}],
    })
}

/// A `bindery serve` of its own, whose memory is measured.
struct Measured {
    child: Child,
    url: String,
}

impl Measured {
    fn start(pki: &std::path::Path) -> Self {
        // `BINDERY_BENCH_WRAP` runs bindery under a profiler (heaptrack, say).
        let wrap = std::env::var("BINDERY_BENCH_WRAP").unwrap_or_default();
        let mut command: Vec<String> = wrap.split_whitespace().map(str::to_string).collect();
        command.push(env!("CARGO_BIN_EXE_bindery").to_string());
        // Its own process group, so that a wrapping profiler and bindery
        // stop together.
        let mut child = Command::new(&command[0])
            .process_group(0)
            .args(&command[1..])
            .args(["serve", "--controllers=false", "--listen", "127.0.0.1:0"])
            // Each consumer's connection is made before the traffic starts and
            // waits for it: at thousands of consumers, longer than the 90 s a
            // connection may stay idle (an aggregator's is never idle that long).
            .args(["--idle-connection-timeout", "3600"])
            .arg("--provider-kubeconfig")
            .arg(&clusters().provider.kubeconfig)
            .arg("--pki")
            .arg(pki)
            .env("RUST_LOG", "error")
            .stdout(Stdio::piped())
            .spawn()
            .expect("bindery starts");
        // A profiler may print first.
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let url = lines
            .find_map(|line| {
                let line = line.ok()?;
                Some(
                    line.strip_prefix("bindery listening on ")?
                        .trim()
                        .to_string(),
                )
            })
            .expect("bindery prints its address");
        Self { child, url }
    }

    /// How many sockets bindery holds open (client connections, provider
    /// connections and its listener).
    fn sockets(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .map(|fds| {
                fds.filter_map(Result::ok)
                    .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                    .filter(|target| target.to_string_lossy().starts_with("socket:"))
                    .count()
            })
            .unwrap_or(0)
    }

    /// `VmRSS` and `VmHWM` (peak) in KiB.
    fn memory(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("bindery's /proc status");
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

impl Drop for Measured {
    fn drop(&mut self) {
        // bindery first, alone, so that a wrapping profiler outlives it and
        // writes its data; then the whole group (under `BINDERY_BENCH_WRAP`
        // the child is the profiler, and bindery its child).
        let group = self.child.id().to_string();
        let _ = Command::new("pkill")
            .args(["-TERM", "-x", "-g", &group, "bindery"])
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill")
            .args(["--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn apply(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    object: Value,
) {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let name = object["metadata"]["name"]
        .as_str()
        .expect("a name")
        .to_string();
    let object: DynamicObject = serde_json::from_value(object).expect("an object");
    api.patch(
        &name,
        &PatchParams::apply("bindery-bench").force(),
        &Patch::Apply(&object),
    )
    .await
    .unwrap_or_else(|e| panic!("applying {name}: {e}"));
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, version, kind),
        plural,
    )
}

/// Consumer `id`'s provider objects, as the controllers would make them: the
/// cluster namespace, a BoundSchema per resource, the identity Secret and
/// one export of every resource with its identity hash.
async fn set_up(provider: &kube::Client, id: &str) {
    let namespace = format!("kube-bind-{id}");
    apply(
        provider,
        &resource("", "v1", "Namespace", "namespaces"),
        None,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
    )
    .await;
    let schemas = resource("kube-bind.io", "v1alpha2", "BoundSchema", "boundschemas");
    for r in 0..RESOURCES {
        let mut spec = crd_spec(r);
        spec["informerScope"] = "Namespaced".into();
        apply(
            provider,
            &schemas,
            Some(&namespace),
            json!({
                "apiVersion": "kube-bind.io/v1alpha2", "kind": "BoundSchema",
                "metadata": {"name": format!("{}.{GROUP}", plural(r))}, "spec": spec,
            }),
        )
        .await;
    }
    let key = format!("{id}/things/{}", std::process::id());
    apply(
        provider,
        &resource("", "v1", "Secret", "secrets"),
        Some(&namespace),
        json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "things-identity"},
            "stringData": {"key": key},
        }),
    )
    .await;
    let exports = resource(
        "kube-bind.io",
        "v1alpha2",
        "APIServiceExport",
        "apiserviceexports",
    );
    let resources: Vec<Value> = (0..RESOURCES)
        .map(|r| json!({"group": GROUP, "resource": plural(r), "versions": ["v1"]}))
        .collect();
    apply(provider, &exports, Some(&namespace), json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExport",
        "metadata": {"name": "things"},
        "spec": {"resources": resources, "informerScope": "Namespaced", "isolation": "Prefixed"},
    })).await;
    let identity = bindery::translate::IdentityHash::of_secret(key.as_bytes());
    let api: Api<DynamicObject> = Api::namespaced_with(provider.clone(), &namespace, &exports);
    api.patch_status(
        "things",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"identityHash": identity.as_str()}})),
    )
    .await
    .expect("the export's identity hash");
}

/// What the controllers grant each consumer's provider-side account, for
/// every consumer at once: bindery reaches the provider as that account
/// (impersonation is on by default), and the bench runs without the
/// controllers, so one ClusterRoleBinding to every service account stands
/// in for the per-namespace RoleBindings they would make.
async fn grant_consumers(provider: &kube::Client) {
    let resources: Vec<String> = (0..RESOURCES)
        .flat_map(|r| [plural(r), format!("{}/status", plural(r))])
        .collect();
    let name = "bindery-bench:memory";
    apply(
        provider,
        &resource(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
        ),
        None,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [{"apiGroups": [GROUP], "resources": resources,
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}],
        }),
    )
    .await;
    apply(
        provider,
        &resource("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings"),
        None,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                "name": "system:serviceaccounts"}],
        }),
    )
    .await;
}

/// A client of consumer `id` on the measured bindery, over HTTP/2 when
/// `http2`.
async fn consumer_client(
    bindery: &Measured,
    pki: &std::path::Path,
    id: &str,
    http2: bool,
) -> kube::Client {
    let output = Command::new(env!("CARGO_BIN_EXE_bindery"))
        .args([
            "consumer-kubeconfig",
            "--consumer",
            id,
            "--server",
            &bindery.url,
            "--pki",
        ])
        .arg(pki)
        .output()
        .expect("bindery consumer-kubeconfig runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&String::from_utf8_lossy(&output.stdout))
        .expect("a kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("a consumer config");
    if http2 {
        http2::client(&config).await
    } else {
        kube::Client::try_from(config).expect("a consumer client")
    }
}

/// `BINDERY_BENCH_HTTP2=1`: each consumer's client speaks HTTP/2 over one
/// connection, as an app cluster's aggregator does (client-go's transport
/// negotiates "h2"); otherwise kube-rs' HTTP/1.1 client.
fn speaks_http2() -> bool {
    std::env::var("BINDERY_BENCH_HTTP2").is_ok_and(|v| v == "1")
}

/// Creates one object in each resource through bindery (waiting until the
/// catalog serves the consumer), then lists each at any version.
async fn traffic(client: &kube::Client) {
    for r in 0..RESOURCES {
        let things = resource(GROUP, "v1", &format!("Thing{r}"), &plural(r));
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &things);
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{GROUP}/v1"), "kind": format!("Thing{r}"),
            "metadata": {"name": "one"}, "spec": {"size": "small"},
        }))
        .expect("a thing");
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            match api.create(&PostParams::default(), &object).await {
                Ok(_) => break,
                Err(kube::Error::Api(status)) if status.code == 409 => break,
                Err(e) => {
                    assert!(Instant::now() < deadline, "creating a Thing{r}: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }
    for r in 0..RESOURCES {
        let request = http::Request::builder()
            .uri(format!(
                "/apis/{GROUP}/v1/namespaces/default/{}?resourceVersion=0",
                plural(r)
            ))
            .body(Vec::new())
            .expect("a request");
        let list: Value = client.request(request).await.expect("a cached list");
        assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");
    }
}

fn main() {
    let benching = std::env::args().any(|a| a == "--bench");
    let consumers = std::env::var("BINDERY_BENCH_CONSUMERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(if benching { 1000 } else { 10 });
    // The smoke test (`cargo test`) has every other consumer speak HTTP/2,
    // so that both load generators are run.
    let http2_for = |i: usize| speaks_http2() || (!benching && i % 2 == 1);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let pki = clusters()
        .provider
        .pki
        .dir
        .parent()
        .expect("the pki dir has a parent")
        .to_path_buf();
    // kube-bind's CRDs, which bindery serves from.
    let crds = fixture::repo_root().join("deploy/crds");
    clusters()
        .provider
        .kubectl(&["apply", "-f", &crds.to_string_lossy()]);
    clusters().provider.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "-f",
        &crds.to_string_lossy(),
    ]);
    runtime.block_on(async {
        let provider = clusters().provider.client().await;
        let crds = resource("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions");
        for r in 0..RESOURCES {
            apply(&provider, &crds, None, json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{}.{GROUP}", plural(r))}, "spec": crd_spec(r),
            }))
            .await;
        }
        for r in 0..RESOURCES {
            clusters().provider.kubectl(&[
                "wait", "--for=condition=Established", "--timeout=60s",
                &format!("crd/{}.{GROUP}", plural(r)),
            ]);
        }
        grant_consumers(&provider).await;
        let bindery = Measured::start(&pki);
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (before, _) = bindery.memory();
        let ids: Vec<String> = (0..consumers)
            .map(|i| format!("mem{}-{i}", std::process::id()))
            .collect();
        let started = Instant::now();
        futures::stream::iter(&ids)
            .for_each_concurrent(PARALLEL, |id| set_up(&provider, id))
            .await;
        let clients: Vec<kube::Client> = futures::stream::iter(&ids)
            .enumerate()
            .then(|(i, id)| consumer_client(&bindery, &pki, id, http2_for(i)))
            .collect()
            .await;
        let (set_up_rss, _) = bindery.memory();
        println!(
            "memory: {consumers} consumers set up in {:?}; RSS {set_up_rss} KiB",
            started.elapsed()
        );
        let started = Instant::now();
        futures::stream::iter(&clients)
            .for_each_concurrent(PARALLEL, traffic)
            .await;
        println!("memory: traffic took {:?}", started.elapsed());
        let (after, peak) = bindery.memory();
        println!("memory: bindery holds {} sockets", bindery.sockets());
        let growth = peak.saturating_sub(before);
        println!(
            "memory: load generator speaks {}",
            match (speaks_http2(), benching) {
                (true, _) => "HTTP/2",
                (false, true) => "HTTP/1.1",
                (false, false) => "HTTP/1.1 and HTTP/2 (every other consumer)",
            }
        );
        println!(
            "memory: {consumers} consumers x {RESOURCES} resources: RSS {before} KiB before, {after} KiB after, peak {peak} KiB; \
             peak growth {:.1} KiB per consumer (target: <= 50 KiB)",
            growth as f64 / consumers as f64
        );
        // The fleet's steady load on the same consumers (issue 36).
        let seconds = std::env::var("BINDERY_BENCH_FLEET_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(if benching { 60 } else { 3 });
        // 0 leaves the phase out: a heap profile's peak is then the one
        // measured above.
        if seconds > 0 {
            let clean = fleet::run(&clients, GROUP, RESOURCES, seconds, bindery.child.id()).await;
            let (rss, _) = bindery.memory();
            println!("fleet: RSS {rss} KiB after the phase (its watches closed)");
            assert!(clean || benching, "the fleet phase had failures (above)");
        }
        drop(clients);
        new_replica(&pki, consumers).await;
    });
}

/// A replica started now, with every consumer there (issue 36): how long
/// until its `/readyz` says ok (its catalog holds every consumer and its
/// watch cache has listed every bound resource), and how many LISTs that
/// cost the provider.
async fn new_replica(pki: &std::path::Path, consumers: usize) {
    let lists_before = provider_lists();
    let started = Instant::now();
    let replica = Measured::start(pki);
    let deadline = started + Duration::from_secs(900);
    loop {
        let ready = Command::new("curl")
            .args(["-sk", "-m", "2"])
            .arg(format!("{}/readyz", replica.url))
            .output()
            .is_ok_and(|o| o.stdout == b"ok");
        if ready {
            break;
        }
        assert!(Instant::now() < deadline, "the new replica became ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ready_in = started.elapsed();
    let lists = provider_lists() - lists_before;
    let (rss, peak) = replica.memory();
    println!(
        "memory: a new replica with {consumers} consumers is ready in {ready_in:.1?} \
         (RSS {rss} KiB, {peak} KiB at its peak), having made {lists} LISTs on the provider"
    );
}

/// The LISTs the provider has served, by its `apiserver_request_total`.
fn provider_lists() -> u64 {
    let metrics = clusters().provider.kubectl(&["get", "--raw", "/metrics"]);
    metrics
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && l.contains("verb=\"LIST\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}
