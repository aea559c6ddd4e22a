//! The hostile differential fuzz (issue 20): a seeded generator sends
//! thousands of hostile requests from three consumers (two direct, one an
//! app cluster bound with `bindery bind`) with two exports of one resource,
//! through the consumer endpoint, an app cluster's aggregation path and the
//! virtual workspace (one consumer's path and `*`), over HTTP/1.1 and
//! HTTP/2, in JSON, YAML, protobuf and Table forms. Every
//! answer and watch event is checked: no provider namespace, cluster
//! namespace, reserved label, identity value or provider account; no
//! object that is not the door's consumer's own as the provider stores it;
//! and every stored object keeps its namespace's consumer's identity.
//! Requests kube-apiserver refuses for their form (400, 406, 413, 415) are
//! sent to the same CRD served directly too, and must be refused alike.
//!
//! Prints `fuzz: N requests, N leaks, N differences (seed S)` and fails on
//! any leak or difference. `BINDERY_FUZZ_SEED` and `BINDERY_FUZZ_REQUESTS`
//! set the seed (default fixed, so CI runs are reproducible) and the count
//! (default 10,000).

#[allow(dead_code)]
#[path = "../e2e/binder.rs"]
mod binder;
#[allow(dead_code)]
#[path = "../e2e/bindery.rs"]
mod bindery;
mod check;
mod client;
#[allow(dead_code)]
#[path = "../e2e/fixture.rs"]
mod fixture;
mod hostile;

use check::{History, Owner, Shown, World};
use client::{Client, Credential};
use fixture::{clusters, repo_root, unique_name};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const GROUP: &str = "conformance.bindery.dev";
const CRD: &str = "widgets.conformance.bindery.dev";
const EXPORT: &str = "fuzz-widgets";
/// The second export of the same resource (consumer fuzz-b's): the
/// workspace of the first must never show its objects.
const OTHER_EXPORT: &str = "fuzz-gadgets";
const PREFIX: &str = "kube-bind-";
const NAMESPACES: &[&str] = &["default", "team", "other"];
const DEFAULT_SEED: u64 = 20_261_125;

/// What every worker shares.
struct Shared {
    world: World,
    provider: kube::Client,
    /// Every stored version, as the provider's own watch told them.
    history: Mutex<History>,
    /// Names of every consumer's objects (and planted ones), tokens and
    /// versions seen: ammunition.
    names: Mutex<Vec<String>>,
    tokens: Mutex<Vec<String>>,
    versions: Mutex<Vec<String>>,
    provider_namespaces: Mutex<Vec<String>>,
    findings: Mutex<Findings>,
}

#[derive(Default)]
struct Findings {
    requests: usize,
    leaks: Vec<String>,
    /// bindery's process gone, replaced, or its memory grown without bound.
    crashes: Vec<String>,
    /// Status codes (and, for a request refused for its form, words) that
    /// are not the reference's, and provider side effects the reference has
    /// none of.
    differences: Vec<String>,
    /// Answers that never came (a stream that does not end is a bug too).
    hangs: Vec<String>,
    /// Requests whose status was compared with the reference's.
    compared: usize,
    transport: usize,
}

/// One way in.
struct Door {
    name: &'static str,
    owner: Owner,
    /// The URL path prefix requests go below.
    base: String,
    clients: [Client; 2],
    /// A client of the same CRD served directly, for the differential.
    reference: Option<(Client, String)>,
    /// Whether the reference's answers are compared (else it only gets the
    /// door's writes, to hold what the door's consumer holds).
    compare: bool,
    /// The reference's namespaces for this door's consumer: `<mirror><ns>`
    /// for each of [`NAMESPACES`].
    mirror: &'static str,
    writes: bool,
    prefix: &'static str,
}

/// The longest namespace (63 characters) a door of `mirror`'s consumer
/// writes in; it exists where that consumer's reference is.
fn maximal_namespace(mirror: &str) -> String {
    format!("{mirror}{}", "m".repeat(63 - mirror.len()))
}

/// `text` (a path, or a body, whatever its bytes) with the door's
/// namespaces as its reference has them: each of [`NAMESPACES`] as
/// `<mirror><ns>`.
fn mirrored(text: &[u8], mirror: &str) -> Vec<u8> {
    let mut out = text.to_vec();
    for ns in NAMESPACES {
        for (from, to) in [
            (
                format!("/namespaces/{ns}/"),
                format!("/namespaces/{mirror}{ns}/"),
            ),
            (
                format!("/namespaces/{ns}?"),
                format!("/namespaces/{mirror}{ns}?"),
            ),
            (
                format!("\"namespace\":\"{ns}\""),
                format!("\"namespace\":\"{mirror}{ns}\""),
            ),
            (
                format!("namespace: {ns}\n"),
                format!("namespace: {mirror}{ns}\n"),
            ),
        ] {
            out = replace_bytes(&out, from.as_bytes(), to.as_bytes());
        }
        let end = format!("/namespaces/{ns}");
        if out.ends_with(end.as_bytes()) {
            out.truncate(out.len() - end.len());
            out.extend_from_slice(format!("/namespaces/{mirror}{ns}").as_bytes());
        }
    }
    out
}

/// `bytes` with every `from` replaced by `to`.
fn replace_bytes(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = rest.windows(from.len()).position(|w| w == from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

fn main() {
    let seed = std::env::var("BINDERY_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED);
    let total: usize = std::env::var("BINDERY_FUZZ_REQUESTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let findings = runtime.block_on(run(seed, total));
    println!(
        "fuzz: {} requests, {} leaks, {} crashes, {} status differences, {} hangs (seed {seed}, {} compared with kube-apiserver, {} transport errors)",
        findings.requests,
        findings.leaks.len(),
        findings.crashes.len(),
        findings.differences.len(),
        findings.hangs.len(),
        findings.compared,
        findings.transport
    );
    for crash in &findings.crashes {
        println!("CRASH {crash}");
    }
    for hang in findings.hangs.iter().take(10) {
        println!("HANG {hang}");
    }
    for leak in findings.leaks.iter().take(30) {
        println!("LEAK {leak}");
    }
    for difference in findings.differences.iter().take(30) {
        println!("DIFFERENCE {difference}");
    }
    let failed = !findings.leaks.is_empty()
        || !findings.crashes.is_empty()
        || !findings.differences.is_empty()
        || !findings.hangs.is_empty()
        || findings.requests < total * 99 / 100;
    if failed {
        std::process::exit(1);
    }
}

async fn run(seed: u64, total: usize) -> Findings {
    fixture::want_reference_cluster();
    let (provider, app) = (&clusters().provider, &clusters().app);
    let reference = clusters().reference.as_ref().expect("a reference cluster");
    for cluster in [provider, reference] {
        cluster.kubectl(&[
            "apply",
            "-f",
            &repo_root().join("conformance/crds").to_string_lossy(),
        ]);
        cluster.kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            &format!("crd/{CRD}"),
        ]);
    }
    // Each consumer with a reference holds its namespaces there apart, so
    // that what exists is the same on both sides of the comparison.
    for mirror in ["a-", "c-"] {
        for ns in NAMESPACES {
            let _ =
                reference.kubectl_output(&["create", "namespace", &format!("{mirror}{ns}")], None);
        }
        let _ =
            reference.kubectl_output(&["create", "namespace", &maximal_namespace(mirror)], None);
    }
    // The app cluster's namespaces: a create in one it does not have is
    // refused, as for a local kind.
    for ns in NAMESPACES
        .iter()
        .map(|ns| ns.to_string())
        .chain([maximal_namespace("c-")])
    {
        let _ = app.kubectl_output(&["create", "namespace", &ns], None);
    }
    let a = bindery::bindery().consumer("fuzz-a", CRD, EXPORT);
    let b = bindery::bindery().consumer("fuzz-b", CRD, OTHER_EXPORT);
    let c = bind_app_cluster();
    let consumers = vec![a.id.clone(), b.id.clone(), c.clone()];
    let exports = [EXPORT, OTHER_EXPORT, EXPORT];
    let identities: HashMap<String, String> = consumers
        .iter()
        .zip(exports)
        .map(|(id, export)| (id.clone(), identity_label(&format!("{PREFIX}{id}"), export)))
        .collect();
    let world = World {
        consumers: consumers.clone(),
        identities,
        prefix: PREFIX.into(),
    };
    let shared = Arc::new(Shared {
        world,
        provider: provider.client().await,
        history: Default::default(),
        names: Mutex::new(Vec::new()),
        tokens: Mutex::new(Vec::new()),
        versions: Mutex::new(Vec::new()),
        provider_namespaces: Mutex::new(Vec::new()),
        findings: Mutex::new(Findings::default()),
    });
    tokio::spawn(record(shared.clone()));
    plant(&shared, &consumers);
    refresh(&shared).await;

    let bindery_url = bindery::bindery().url.clone();
    let serving_ca = bindery::bindery().pki.join("bindery/serving-ca.crt");
    let certificate = |consumer: &bindery::Consumer| Credential::Certificate {
        cert: std::fs::read(&consumer.cert).unwrap(),
        key: std::fs::read(&consumer.key).unwrap(),
    };
    let admin = |cluster: &fixture::Cluster| {
        let (cert, key) = cluster.pki.admin();
        Credential::Certificate {
            cert: std::fs::read(cert).unwrap(),
            key: std::fs::read(key).unwrap(),
        }
    };
    let controller = Credential::Token(controller_token());
    let pair = |url: &str, ca: &std::path::Path, credential: &Credential| {
        [
            Client::new(url, ca, credential, false),
            Client::new(url, ca, credential, true),
        ]
    };
    let direct_reference = || {
        Some((
            Client::new(
                &reference.server,
                &reference.pki.ca(),
                &admin(reference),
                true,
            ),
            String::new(),
        ))
    };
    let doors = vec![
        (
            40,
            Door {
                name: "consumer fuzz-a",
                owner: Owner::Consumer(a.id.clone()),
                base: format!("/clusters/{}", a.id),
                clients: pair(&bindery_url, &serving_ca, &certificate(&a)),
                reference: direct_reference(),
                compare: true,
                mirror: "a-",
                writes: true,
                prefix: "a-",
            },
        ),
        (
            15,
            Door {
                name: "workspace fuzz-a",
                owner: Owner::Consumer(a.id.clone()),
                base: format!("/services/export/{EXPORT}/clusters/{}", a.id),
                clients: pair(&bindery_url, &serving_ca, &controller),
                // What the provider's controllers write in fuzz-a's
                // namespaces, fuzz-a's reference holds too.
                reference: direct_reference(),
                compare: false,
                mirror: "a-",
                writes: true,
                prefix: "w-",
            },
        ),
        (
            15,
            Door {
                name: "consumer fuzz-b",
                owner: Owner::Consumer(b.id.clone()),
                base: format!("/clusters/{}", b.id),
                clients: pair(&bindery_url, &serving_ca, &certificate(&b)),
                reference: None,
                compare: false,
                mirror: "b-",
                writes: true,
                prefix: "b-",
            },
        ),
        (
            20,
            Door {
                name: "aggregated",
                owner: Owner::Consumer(c.clone()),
                base: String::new(),
                clients: pair(&app.server, &app.pki.ca(), &admin(app)),
                reference: direct_reference(),
                compare: true,
                mirror: "c-",
                writes: true,
                prefix: "c-",
            },
        ),
        (
            10,
            Door {
                name: "workspace *",
                owner: Owner::Export(vec![a.id.clone(), c.clone()]),
                base: format!("/services/export/{EXPORT}/clusters/*"),
                clients: pair(&bindery_url, &serving_ca, &controller),
                reference: None,
                compare: false,
                mirror: "x-",
                writes: false,
                prefix: "x-",
            },
        ),
    ];
    // bindery's process, before: the same one must answer to the end, its
    // memory bounded.
    let process = bindery_process();
    let memory_before = resident_kib(process);
    // The consumer fuzz-a's two doors share one worker, so that what one
    // shows the other changed in order.
    let mut workers = Vec::new();
    let mut a_doors = Vec::new();
    for (i, (share, door)) in doors.into_iter().enumerate() {
        let count = total * share / 100;
        if door.name.ends_with("fuzz-a") {
            a_doors.push((count, door));
            continue;
        }
        workers.push(tokio::spawn(work(
            shared.clone(),
            seed ^ (i as u64 + 1),
            vec![(count, door)],
        )));
    }
    workers.push(tokio::spawn(work(shared.clone(), seed, a_doors)));
    for worker in workers {
        worker.await.expect("a worker ends");
    }
    // The watch catches up with the last writes.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let misstored = check::misstored(&shared.world, &shared.history.lock().unwrap());
    let mut findings = std::mem::take(&mut *shared.findings.lock().unwrap());
    findings.leaks.extend(misstored);
    let now = bindery_process();
    if now != process {
        findings.crashes.push(format!(
            "bindery's process {process} is gone; {now} serves now"
        ));
    }
    let memory_after = resident_kib(now);
    println!(
        "fuzz: bindery's resident memory {memory_before} KiB before, {memory_after} KiB after"
    );
    if memory_after > memory_before + MEMORY_GROWTH_KIB {
        findings.crashes.push(format!(
            "bindery's memory grew from {memory_before} to {memory_after} KiB"
        ));
    }
    findings
        .differences
        .extend(side_effects(&consumers[..1], &["a-"]));
    findings
        .differences
        .extend(side_effects(&consumers[2..], &["c-"]));
    findings
}

/// How much bindery's resident memory may grow over a run: what its caches
/// of the run's objects and answers take, well under what a leak per
/// request (or a stack per deep body) would.
const MEMORY_GROWTH_KIB: u64 = 512 * 1024;

/// Provider namespaces made for `consumers` (one per mirror) for app
/// namespaces their reference has none of: a write the reference refused
/// that made something on the provider anyway.
fn side_effects(consumers: &[String], mirrors: &[&str]) -> Vec<String> {
    let provider = &clusters().provider;
    let mut found = Vec::new();
    for (consumer, mirror) in consumers.iter().zip(mirrors) {
        let listed = provider.kubectl(&[
            "get",
            "namespaces",
            "-l",
            &format!("bindery.dev/consumer={consumer}"),
            "-o",
            "jsonpath={range .items[*]}{.metadata.annotations.kube-bind\\.io/consumer-namespace}{\"\\n\"}{end}",
        ]);
        let allowed: Vec<String> = NAMESPACES
            .iter()
            .map(|ns| ns.to_string())
            .chain([maximal_namespace(mirror)])
            .collect();
        for namespace in listed.lines().filter(|l| !l.is_empty()) {
            if !allowed.iter().any(|a| a == namespace) {
                found.push(format!(
                    "{consumer}: a provider namespace for app namespace {namespace:?}, which its reference has none of"
                ));
            }
        }
    }
    found
}

/// The bindery of this run's process id.
fn bindery_process() -> u32 {
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
        .unwrap_or(0)
}

/// A process's resident memory.
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

/// Works through `doors`, each for its count of requests, interleaved.
async fn work(shared: Arc<Shared>, seed: u64, mut doors: Vec<(usize, Door)>) {
    let mut rng = hostile::Rng::new(seed);
    let mut left: Vec<usize> = doors.iter().map(|(count, _)| *count).collect();
    while left.iter().any(|n| *n > 0) {
        let open: Vec<usize> = (0..doors.len()).filter(|i| left[*i] > 0).collect();
        let i = *rng.pick(&open);
        left[i] -= 1;
        let door = &mut doors[i].1;
        one(&shared, &mut rng, door).await;
        if rng.chance(2) {
            refresh(&shared).await;
        }
    }
}

/// One request through `door`, checked.
async fn one(shared: &Shared, rng: &mut hostile::Rng, door: &mut Door) {
    let (names, tokens, versions, provider_namespaces) = (
        shared.names.lock().unwrap().clone(),
        shared.tokens.lock().unwrap().clone(),
        shared.versions.lock().unwrap().clone(),
        shared.provider_namespaces.lock().unwrap().clone(),
    );
    let identities: Vec<String> = shared.world.identities.values().cloned().collect();
    let context = hostile::Context {
        group: GROUP,
        version: "v1",
        resource: "widgets",
        kind: "Widget",
        prefix: door.prefix,
        names: &names,
        provider_namespaces: &provider_namespaces,
        identities: &identities,
        consumers: &shared.world.consumers,
        tokens: &tokens,
        versions: &versions,
        writes: door.writes,
        maximal_namespace: &maximal_namespace(door.mirror),
    };
    let request = context.request(rng);
    let h2 = rng.chance(50);
    let path = format!("{}{}", door.base, request.path);
    // What the caller sent, in every form an echo of it may take (a JSON
    // pointer in a patch names keys escaped).
    let body = String::from_utf8_lossy(&request.body);
    let sent = format!(
        "{} {:?} {body} {}",
        percent_decoded(&request.path),
        request.headers,
        body.replace("~1", "/").replace("~0", "~")
    );
    let answer = door.clients[usize::from(h2)]
        .send(request.method, &path, &request.headers, &request.body)
        .await;
    let mut findings = Vec::new();
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            let mut shared_findings = shared.findings.lock().unwrap();
            shared_findings.requests += 1;
            shared_findings.transport += 1;
            if error.contains("20 s") {
                shared_findings
                    .hangs
                    .push(format!("{}: {} {path}: {error}", door.name, request.method));
            }
            return;
        }
    };
    let values = check::decode(&answer.content_type, &answer.body);
    let forbidden = shared.world.forbidden(&provider_namespaces);
    for leak in check::leaks(&forbidden, &door.owner, &sent, &answer.body, &values) {
        findings.push(format!(
            "{}: {} {path} ({}) {leak}",
            door.name, request.method, answer.status
        ));
    }
    let shown = check::objects(&values);
    // What a dry run makes is never stored.
    if !request.path.contains("dryRun=") {
        for object in &shown {
            if let Some(problem) = stored_as_shown(shared, &door.owner, object).await {
                findings.push(format!(
                    "{}: {} {path} ({}) {problem}",
                    door.name, request.method, answer.status
                ));
            }
        }
    }
    remember(shared, &values, &shown);
    if let Some((reference, base)) = &mut door.reference {
        let mirrored_request = hostile::Request {
            path: String::from_utf8_lossy(&mirrored(request.path.as_bytes(), door.mirror))
                .into_owned(),
            body: mirrored(&request.body, door.mirror),
            ..request.clone()
        };
        let reference_path = format!("{base}{}", mirrored_request.path);
        let (compared, difference) = differs(
            reference,
            &mirrored_request,
            &reference_path,
            &answer,
            door.compare,
        )
        .await;
        shared.findings.lock().unwrap().compared += usize::from(compared);
        if let Some(difference) = difference {
            shared.findings.lock().unwrap().differences.push(format!(
                "{}: {} {path} {:?} {:.200}: {difference}",
                door.name, request.method, request.headers, body
            ));
        }
    }
    let mut shared_findings = shared.findings.lock().unwrap();
    shared_findings.requests += 1;
    shared_findings.leaks.extend(findings);
}

/// Whether kube-apiserver serving the CRD directly answers the same request
/// (`request`, in the reference's namespaces) otherwise: another status
/// code, or, for a request either refuses for its form (400, 406, 413, 415),
/// other words. The reference holds what the door's consumer holds (it gets
/// every write bindery took, compared or not), so what exists is the same
/// on both sides. Not compared, for reasons of their own:
/// - a continue token (bindery's is sealed, the reference's its own), a
///   resourceVersion (the provider's, not the reference's), a watch (its
///   events are timing), a conflict or a deadline either side met (timing);
/// - what bindery refuses on purpose: `.` and `..` path segments, the
///   `proxy` verb prefix, its reserved `bindery.dev/` labels, annotations
///   and selectors, and a method no resource has (405 before anything is
///   looked up, where kube-apiserver tells existing resources apart) — all
///   in docs/DESIGN.md;
/// - an object the provider's administrator planted (the reference has
///   none).
async fn differs(
    reference: &mut Client,
    request: &hostile::Request,
    path: &str,
    answer: &client::Answer,
    compare: bool,
) -> (bool, Option<String>) {
    const FORM: &[u16] = &[400, 406, 413, 415];
    const VERBS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];
    let decoded = percent_decoded(&request.path);
    let body = String::from_utf8_lossy(&request.body);
    let excluded = request.path.contains("continue=")
        || request.path.contains("resourceVersion")
        || request.watch
        || decoded
            .split(['/', '?', ' '])
            .any(|s| s == ".." || s == "." || s == "proxy")
        || [
            "bindery.dev/consumer",
            "bindery.dev/export",
            "bindery.dev~1export",
        ]
        .iter()
        .any(|reserved| decoded.contains(reserved) || body.contains(reserved))
        || decoded.contains("planted")
        || !VERBS.contains(&request.method);
    let compared = compare && !excluded;
    let writes =
        request.method != "GET" && request.method != "HEAD" && VERBS.contains(&request.method);
    // The reference gets every write bindery took, to hold what the
    // consumer holds; and every request compared.
    let taken = writes && (200..300).contains(&answer.status);
    if !(compared || taken) {
        return (false, None);
    }
    let direct = match reference
        .send(request.method, path, &request.headers, &request.body)
        .await
    {
        Ok(direct) => direct,
        // The reference's own transport failing is no finding of bindery's.
        Err(_) => return (false, None),
    };
    if !compared
        || [direct.status, answer.status]
            .iter()
            .any(|status| *status == 504 || *status == 409)
        // The reference throttling itself is no finding of bindery's.
        || direct.status == 429
    {
        return (false, None);
    }
    if direct.status != answer.status {
        return (
            true,
            Some(format!(
                "bindery {} {:.300}, kube-apiserver {} {:.300}",
                answer.status,
                String::from_utf8_lossy(&answer.body),
                direct.status,
                String::from_utf8_lossy(&direct.body)
            )),
        );
    }
    if !FORM.contains(&direct.status) {
        return (true, None);
    }
    let message = |a: &client::Answer| {
        check::decode(&a.content_type, &a.body)
            .first()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| String::from_utf8_lossy(&a.body).into_owned())
    };
    let (ours, theirs) = (message(answer), message(&direct));
    let words = (ours != theirs).then(|| {
        format!(
            "bindery {} {ours:?}, kube-apiserver {} {theirs:?}",
            answer.status, direct.status
        )
    });
    (true, words)
}

/// Keeps names, tokens and versions an answer showed, to aim at later.
fn remember(shared: &Shared, values: &[Value], shown: &[Shown]) {
    let mut names = shared.names.lock().unwrap();
    for Shown { name, .. } in shown {
        if !names.contains(name) && names.len() < 400 {
            names.push(name.clone());
        }
    }
    for value in values {
        let metadata = if value["type"].is_string() {
            &value["object"]["metadata"]
        } else {
            &value["metadata"]
        };
        if let Some(token) = metadata["continue"].as_str().filter(|t| !t.is_empty()) {
            let mut tokens = shared.tokens.lock().unwrap();
            if tokens.len() < 200 {
                tokens.push(token.to_string());
            }
        }
        if let Some(version) = metadata["resourceVersion"].as_str() {
            let mut versions = shared.versions.lock().unwrap();
            if versions.len() < 200 {
                versions.push(version.to_string());
            }
        }
    }
}

/// Whether an object shown to `owner` is, at the version shown, stored
/// where that consumer's objects live and with that consumer's identity.
/// The provider's watch may trail the answer: it is waited for a little.
async fn stored_as_shown(shared: &Shared, owner: &Owner, shown: &Shown) -> Option<String> {
    let (consumer, namespace) = match check::home(&shared.world, owner, shown) {
        Ok(home) => home,
        Err(problem) => return Some(problem),
    };
    let key = (namespace, shown.name.clone(), shown.version.clone());
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let identity = shared.history.lock().unwrap().versions.get(&key).cloned();
        match identity {
            Some(identity) if check::owned(&shared.world, &consumer, &identity) => return None,
            Some(identity) => {
                return Some(format!(
                    "shows {}/{} at {}, stored with {identity:?}",
                    key.0, key.1, key.2
                ));
            }
            None if tokio::time::Instant::now() > deadline => {
                return Some(format!(
                    "shows {}/{} at {}, which the provider never stored",
                    key.0, key.1, key.2
                ));
            }
            None => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    }
}

fn widgets(client: &kube::Client) -> kube::Api<kube::api::DynamicObject> {
    kube::Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(GROUP, "v1", "Widget"),
            "widgets",
        ),
    )
}

/// Records every version of every Widget the provider stores, from its
/// own watch, for as long as the fuzz runs.
async fn record(shared: Arc<Shared>) {
    use futures::StreamExt;
    use kube::api::{WatchEvent, WatchParams};
    let api = widgets(&shared.provider);
    let remember = |object: &kube::api::DynamicObject| {
        let labels = object.metadata.labels.clone().unwrap_or_default();
        shared.history.lock().unwrap().versions.insert(
            (
                object.metadata.namespace.clone().unwrap_or_default(),
                object.metadata.name.clone().unwrap_or_default(),
                object.metadata.resource_version.clone().unwrap_or_default(),
            ),
            (
                labels.get("bindery.dev/consumer").cloned(),
                labels.get("bindery.dev/export").cloned(),
            ),
        );
    };
    let mut version = String::new();
    loop {
        if version.is_empty() {
            match api.list(&Default::default()).await {
                Ok(list) => {
                    list.items.iter().for_each(&remember);
                    version = list.metadata.resource_version.unwrap_or_default();
                }
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    continue;
                }
            }
        }
        let params = WatchParams::default().timeout(290);
        let Ok(stream) = api.watch(&params, &version).await else {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            continue;
        };
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) => {
                    remember(&o);
                    version = o.metadata.resource_version.clone().unwrap_or_default();
                }
                Ok(WatchEvent::Bookmark(b)) => version = b.metadata.resource_version,
                // Too old: versions in between are lost, and say so.
                Ok(WatchEvent::Error(e)) => {
                    eprintln!("fuzz: the provider's watch ended: {e:?}");
                    version.clear();
                    break;
                }
                Err(_) => break,
            }
        }
    }
}

/// Lists the provider's consumer namespaces (ammunition, and tokens no
/// answer may show).
async fn refresh(shared: &Shared) {
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(shared.provider.clone());
    if let Ok(list) = namespaces.list(&Default::default()).await {
        let names: Vec<String> = list
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .filter(|n| n.starts_with(PREFIX))
            .collect();
        *shared.provider_namespaces.lock().unwrap() = names;
    }
}

/// Objects the provider's administrator put in each consumer's namespaces:
/// one bare, one with another consumer's identity. No door may show them.
fn plant(shared: &Shared, consumers: &[String]) {
    let provider = &clusters().provider;
    for (i, consumer) in consumers.iter().enumerate() {
        let other = &consumers[(i + 1) % consumers.len()];
        for ns in NAMESPACES {
            let namespace = format!("{PREFIX}{consumer}-{ns}");
            let _ = provider.kubectl_output(&["create", "namespace", &namespace], None);
            let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
                {"apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
                 "metadata": {"name": "planted-bare", "namespace": namespace, "labels": {"planted": "yes"}},
                 "spec": {"size": "small"}},
                {"apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
                 "metadata": {"name": "planted-cross", "namespace": namespace, "labels": {
                    "planted": "yes", "bindery.dev/consumer": other,
                    "bindery.dev/export": shared.world.identities[other]}},
                 "spec": {"size": "small"}},
            ]});
            provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&objects.to_string()));
        }
    }
    let mut names = shared.names.lock().unwrap();
    names.extend(["planted-bare".to_string(), "planted-cross".to_string()]);
}

/// The identity label value of the export in `cluster_namespace`.
fn identity_label(cluster_namespace: &str, export: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let hash = clusters().provider.kubectl(&[
            "-n",
            cluster_namespace,
            "get",
            "apiserviceexport",
            export,
            "-o",
            "jsonpath={.status.identityHash}",
        ]);
        if hash.len() == 64 {
            return hash[..32].to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no identity for the export in {cluster_namespace}"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

/// Binds the app cluster to the same resource with `bindery bind`, and
/// returns its consumer id.
fn bind_app_cluster() -> String {
    let (provider, app) = (&clusters().provider, &clusters().app);
    let template = format!(
        "apiVersion: kube-bind.io/v1alpha2\nkind: APIServiceExportTemplate\nmetadata: {{name: {EXPORT}}}\n\
         spec:\n  description: The fuzz's Widgets.\n  scope: Namespaced\n  resources:\n  - {{group: {GROUP}, resource: widgets}}\n"
    );
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&template));
    let (_, token) = binder::binder_token(true);
    binder::succeeded(
        "bindery bind",
        &binder::bindery_cli("bind", &token, &["--template", EXPORT]),
    );
    let uid = app.kubectl(&[
        "get",
        "namespace",
        "kube-system",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let namespaces = provider.kubectl(&[
        "get",
        "namespaces",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.metadata.annotations.backend\\.kube-bind\\.io/identity}{\"\\n\"}{end}",
    ]);
    let cluster_namespace = namespaces
        .lines()
        .find_map(|line| {
            line.split_once('=')
                .filter(|(_, id)| *id == uid.trim())
                .map(|(n, _)| n.to_string())
        })
        .unwrap_or_else(|| panic!("no cluster namespace for the app cluster: {namespaces}"));
    // Served through the aggregator before the fuzz starts.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !app
        .kubectl_output(&["get", CRD, "-A"], None)
        .status
        .success()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the app cluster never served {CRD}"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    cluster_namespace
        .strip_prefix(PREFIX)
        .expect("a cluster namespace")
        .to_string()
}

/// A provider token allowed every verb on the export's content.
fn controller_token() -> String {
    let provider = &clusters().provider;
    let _ = provider.kubectl_output(&["create", "namespace", "fuzz-controllers"], None);
    let name = unique_name("fuzz-controller");
    provider.kubectl(&["-n", "fuzz-controllers", "create", "serviceaccount", &name]);
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": name}, "rules": [{"apiGroups": ["kube-bind.io"],
            "resources": ["apiserviceexports/content"], "resourceNames": [EXPORT], "verbs": ["*"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "fuzz-controllers"}],
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}},
    ]});
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&objects.to_string()));
    provider
        .kubectl(&[
            "-n",
            "fuzz-controllers",
            "create",
            "token",
            &name,
            "--duration=2h",
        ])
        .trim()
        .to_string()
}

fn percent_decoded(path: &str) -> String {
    let plus_as_space = path.replace('+', " ");
    let bytes: Vec<u8> = form_urlencoded::parse(plus_as_space.as_bytes())
        .flat_map(|(k, v)| [k.into_owned(), v.into_owned()])
        .collect::<Vec<_>>()
        .join("=")
        .into_bytes();
    format!("{path} {}", String::from_utf8_lossy(&bytes))
}
