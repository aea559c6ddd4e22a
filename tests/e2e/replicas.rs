//! Replicas share the fleet (issue 36), on bindery's Deployment of
//! tests/e2e/pods.rs: scaled to one replica, then to three under watches
//! and writes through the app cluster's aggregator, then one replica killed
//! (SIGKILL through the node's containerd, no grace). The chart runs with
//! a GOAWAY chance, so the aggregator reconnects now and then through the
//! Service: after the scale-out a new replica serves aggregated requests.
//! A replica's death costs the watches on it a resume: each watcher keeps
//! a store made of the list it started from and its events alone, and at
//! the end every store equals the provider's objects, name for name and
//! resourceVersion for resourceVersion, and no watcher saw an object's
//! event twice or out of order. A resume that the server answers with 410
//! (a relist, which would hide a missed event) fails the test.

use crate::fixture::{Cluster, kubectl_path};
use crate::pods::{aggregated_requests, wait_until};
use crate::rolling_restart::COLLECTION;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WATCHERS: usize = 4;

/// One watcher's view: the store its events made, every event it saw, and
/// what went wrong.
#[derive(Default)]
struct Watcher {
    store: BTreeMap<String, u64>,
    /// (type, name, resourceVersion), in order.
    events: Vec<(String, String, u64)>,
    errors: Vec<String>,
    /// What came instead of a watch (an error the aggregator answered).
    refused: Vec<String>,
    /// Watch requests made, and how many of them ended cut.
    rounds: u32,
    cut: u32,
    curl: Option<u32>,
}

/// The collection through the app cluster: name → resourceVersion, and
/// the list's resourceVersion.
fn listed(app: &Cluster) -> (BTreeMap<String, u64>, String) {
    let list: serde_json::Value =
        serde_json::from_str(&app.kubectl(&["get", "--raw", COLLECTION])).expect("a list");
    (
        versions(&list),
        list["metadata"]["resourceVersion"]
            .as_str()
            .expect("the list's resourceVersion")
            .to_string(),
    )
}

fn versions(list: &serde_json::Value) -> BTreeMap<String, u64> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| {
            (
                item["metadata"]["name"].as_str().unwrap_or("").to_string(),
                version_of(&item["metadata"]),
            )
        })
        .collect()
}

fn version_of(metadata: &serde_json::Value) -> u64 {
    metadata["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// One watch request from `version` through the app cluster, its events
/// applied to the watcher's store; the last resourceVersion it saw.
fn watch_round(app: &Cluster, version: &str, seen: &Mutex<Watcher>) -> String {
    let mut child = crate::rolling_restart::curl_watch(app, version, 60);
    seen.lock().unwrap().curl = Some(child.id());
    let mut version = version.to_string();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let Ok(line) = line else { break };
        let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
            // The aggregator's 503 while the Service still leads to a
            // replica that died: the client backs off and resumes.
            seen.lock().unwrap().refused.push(line);
            continue;
        };
        let (kind, object) = (event["type"].as_str().unwrap_or(""), &event["object"]);
        let mut seen = seen.lock().unwrap();
        if kind == "ERROR" {
            seen.errors.push(format!("watch from {version}: {object}"));
            continue;
        }
        let metadata = &object["metadata"];
        version = metadata["resourceVersion"]
            .as_str()
            .unwrap_or(&version)
            .to_string();
        if kind == "BOOKMARK" {
            continue;
        }
        let name = metadata["name"].as_str().unwrap_or("").to_string();
        let at = version_of(metadata);
        match kind {
            "DELETED" => seen.store.remove(&name),
            _ => seen.store.insert(name.clone(), at),
        };
        seen.events.push((kind.to_string(), name, at));
    }
    let output = child.wait_with_output().expect("curl finished");
    let mut seen = seen.lock().unwrap();
    seen.rounds += 1;
    seen.curl = None;
    if !output.status.success() {
        // A replica that dies cuts the watches on it: the client backs off
        // and resumes, as client-go's reflector does.
        seen.cut += 1;
        drop(seen);
        std::thread::sleep(Duration::from_millis(500));
    }
    version
}

/// Creates, changes and deletes objects (`<prefix>-<n>`) through the app
/// cluster until `stop`: each round creates one, annotates the one before
/// and deletes the one three before. The errors it met (a write in flight
/// on a replica that dies fails, as on a kube-apiserver that dies).
fn churn(app: &Cluster, prefix: &str, stop: &AtomicBool) -> Vec<String> {
    let mut errors = vec![];
    let mut write = |args: &[&str], stdin: Option<&str>| {
        let output = app.kubectl_output(args, stdin);
        if !output.status.success() {
            errors.push(String::from_utf8_lossy(&output.stderr).trim().to_string());
        }
    };
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        write(
            &["-n", "default", "create", "-f", "-"],
            Some(&format!(
                "apiVersion: db.example.com/v1\nkind: PostgreSQLInstance\nmetadata: {{name: {prefix}-{n}}}\nspec: {{plan: small}}\n"
            )),
        );
        if n > 1 {
            let changed = format!("postgresqlinstance/{prefix}-{}", n - 1);
            let round = format!("round={n}");
            write(
                &["-n", "default", "annotate", "--overwrite", &changed, &round],
                None,
            );
        }
        if n > 3 {
            let deleted = format!("postgresqlinstance/{prefix}-{}", n - 3);
            write(
                &["-n", "default", "delete", &deleted, "--ignore-not-found"],
                None,
            );
        }
    }
    errors
}

fn kubectl(app: &Cluster, args: &[&str]) -> Result<(), String> {
    let output = Command::new(kubectl_path())
        .arg("--kubeconfig")
        .arg(&app.kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs");
    match output.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&output.stderr).to_string()),
    }
}

/// The server pods: name → (uid, containerd id of its container).
fn pods(app: &Cluster) -> BTreeMap<String, (String, String)> {
    app.kubectl(&[
        "-n",
        "kube-bind",
        "get",
        "pods",
        "-l",
        "app.kubernetes.io/name=bindery-server",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.status.containerStatuses[0].containerID}{\"\\n\"}{end}",
    ])
    .lines()
    .filter_map(|line| {
        let mut fields = line.split_whitespace();
        let name = fields.next()?.to_string();
        let uid = fields.next()?.to_string();
        let container = fields.next().unwrap_or("").trim_start_matches("containerd://");
        Some((name, (uid, container.to_string())))
    })
    .collect()
}

fn scale(app: &Cluster, replicas: usize) {
    kubectl(
        app,
        &[
            "-n",
            "kube-bind",
            "scale",
            "deployment/bindery",
            &format!("--replicas={replicas}"),
        ],
    )
    .expect("kubectl scale");
    kubectl(
        app,
        &[
            "-n",
            "kube-bind",
            "rollout",
            "status",
            "deployment/bindery",
            "--timeout=240s",
        ],
    )
    .expect("the Deployment rolls out");
    wait_until(&format!("{replicas} server pods"), 120, || {
        let now = pods(app);
        match now.len() == replicas && now.values().all(|(_, c)| !c.is_empty()) {
            true => Ok(()),
            false => Err(format!("{now:?}")),
        }
    });
}

/// Scales bindery 1 → 3 under watches and writes, kills one replica, and
/// checks every watcher's store against the provider (see the module).
pub fn scaled_and_killed_under_watches(
    app: &Cluster,
    provider: &Cluster,
    provider_namespace: &str,
    containerd: &str,
    serving_ca: &std::path::Path,
) {
    scale(app, 1);
    let first: Vec<String> = pods(app).into_keys().collect();
    assert_eq!(first.len(), 1);
    let watchers: Vec<Arc<Mutex<Watcher>>> = (0..WATCHERS)
        .map(|_| Arc::new(Mutex::new(Watcher::default())))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = watchers
        .iter()
        .map(|watcher| {
            let (app, watcher, stop) = (app.clone(), watcher.clone(), stop.clone());
            std::thread::spawn(move || {
                let (store, mut version) = listed(&app);
                watcher.lock().unwrap().store = store;
                while !stop.load(Ordering::SeqCst) {
                    version = watch_round(&app, &version, &watcher);
                }
            })
        })
        .collect();
    let writes_stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (app, stop) = (app.clone(), writes_stop.clone());
        let prefix = crate::fixture::unique_name("replica");
        std::thread::spawn(move || churn(&app, &prefix, &stop))
    };
    std::thread::sleep(Duration::from_secs(5));

    scale(app, 3);
    let scaled = pods(app);
    let new: Vec<&String> = scaled.keys().filter(|p| !first.contains(p)).collect();
    assert_eq!(new.len(), 2, "two new replicas: {scaled:?}");
    // The aggregator's connection moves now and then (GOAWAY): a new
    // replica serves aggregated requests within a while.
    wait_until("a new replica serves the aggregator", 120, || {
        let served = aggregated_requests(app, provider, serving_ca);
        match new
            .iter()
            .any(|p| served.get(*p).is_some_and(|n| n.requests > 0.0))
        {
            true => Ok(()),
            false => Err(format!("{served:?}")),
        }
    });

    // The replica holding the most watches dies: SIGKILL, no grace, no
    // GOAWAY.
    let served = aggregated_requests(app, provider, serving_ca);
    let (victim, held) = served
        .iter()
        .max_by(|a, b| a.1.watching.total_cmp(&b.1.watching))
        .expect("pods");
    assert!(held.watching > 0.0, "no replica holds a watch: {served:?}");
    let (_, container) = &scaled[victim];
    let killed = Command::new("ctr")
        .args(["--address", containerd, "-n", "k8s.io", "tasks", "kill"])
        .args(["--signal", "SIGKILL", container])
        .output()
        .expect("ctr runs");
    assert!(
        killed.status.success(),
        "ctr tasks kill {container}: {}",
        String::from_utf8_lossy(&killed.stderr)
    );
    std::thread::sleep(Duration::from_secs(10));
    writes_stop.store(true, Ordering::SeqCst);
    let write_errors = writer.join().expect("the writer");

    // Every watcher's store comes to be the provider's objects.
    let truth = || -> BTreeMap<String, u64> {
        let list: serde_json::Value = serde_json::from_str(&provider.kubectl(&[
            "get",
            "--raw",
            &format!("/apis/db.example.com/v1/namespaces/{provider_namespace}/postgresqlinstances"),
        ]))
        .expect("the provider's list");
        versions(&list)
    };
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let want = truth();
        let behind: Vec<usize> = (0..WATCHERS)
            .filter(|i| watchers[*i].lock().unwrap().store != want)
            .collect();
        if behind.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            let watcher = watchers[behind[0]].lock().unwrap();
            let missing: Vec<_> = want
                .iter()
                .filter(|(n, v)| watcher.store.get(*n) != Some(v))
                .collect();
            let extra: Vec<_> = watcher
                .store
                .iter()
                .filter(|(n, v)| want.get(*n) != Some(v))
                .collect();
            panic!(
                "watchers {behind:?} do not hold the provider's objects; watcher {}: \
                 missing or older {missing:?}, extra or newer {extra:?}; errors {:?}",
                behind[0], watcher.errors
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::SeqCst);
    for watcher in &watchers {
        if let Some(pid) = watcher.lock().unwrap().curl {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
    for thread in threads {
        let _ = thread.join();
    }
    let (mut cut, mut refused) = (0, vec![]);
    for (i, watcher) in watchers.iter().enumerate() {
        let watcher = watcher.lock().unwrap();
        cut += watcher.cut;
        refused.extend(watcher.refused.iter().cloned());
        assert!(
            watcher.errors.is_empty(),
            "watcher {i}: {:?}",
            watcher.errors
        );
        let mut last: BTreeMap<&str, u64> = BTreeMap::new();
        for (kind, name, at) in &watcher.events {
            if let Some(before) = last.insert(name, *at) {
                assert!(
                    *at > before,
                    "watcher {i} saw {name} at {before} and then {kind} at {at}: an event twice or out of order"
                );
            }
        }
        assert!(
            watcher.events.len() > 10,
            "watcher {i} saw {} events",
            watcher.events.len()
        );
    }
    // Writes in flight on the replica that died fail, as they would on a
    // kube-apiserver that dies; the provider's objects are the truth the
    // stores were checked against.
    eprintln!(
        "replicas: {WATCHERS} watchers, {cut} watch requests cut or refused ({refused:?}), \
         {} writes failed: {write_errors:?}",
        write_errors.len()
    );
}
