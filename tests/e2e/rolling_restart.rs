//! A rolling restart of bindery's Deployment (tests/e2e/pods.rs) under a
//! running watch of the bound resource through the app cluster's
//! aggregator. One watch request (240 s) spans the restart, so the pod
//! serving it is stopped under it. The watch is curl's, so that how each
//! watch response ends is
//! seen as it is: a server that ends a watch cleanly (the last chunk, or
//! HTTP/2's END_STREAM) lets curl exit 0, and the client resumes from the
//! last resourceVersion, as client-go's watchers do; a cut stream (the pod
//! gone mid-response, the aggregator aborting) makes curl fail (18, 56,
//! 92), and so does an error status (22: the aggregator's 503 when it
//! cannot reach a pod). kube-rs and client-go read an unexpected EOF as an end, so they
//! would hide the difference. Creates run meanwhile, through kubectl.

use crate::fixture::{Cluster, kubectl_path};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the watch saw: the names of the objects of its events, and every
/// round that did not end cleanly.
#[derive(Default)]
struct Seen {
    names: Vec<String>,
    errors: Vec<String>,
    rounds: u32,
    /// The running curl, which the test ends when it has seen enough.
    curl: Option<u32>,
    stopped: bool,
}

pub(crate) const COLLECTION: &str =
    "/apis/db.example.com/v1/namespaces/default/postgresqlinstances";

/// curl watching the app cluster's default namespace of
/// postgresqlinstances from `version` for `seconds`, as the cluster's
/// admin, its events on stdout; an error status fails it (with the body).
pub(crate) fn curl_watch(app: &Cluster, version: &str, seconds: u32) -> std::process::Child {
    let (cert, key) = app.pki.admin();
    Command::new("curl")
        .args(["-sS", "-N", "--fail-with-body", "--cacert"])
        .arg(app.pki.ca())
        .arg("--cert")
        .arg(cert)
        .arg("--key")
        .arg(key)
        .arg(format!(
            "{}{COLLECTION}?watch=1&allowWatchBookmarks=true&timeoutSeconds={seconds}&resourceVersion={version}",
            app.server
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("curl runs")
}

/// One watch request from `version`, its events recorded as they come;
/// returns the last resourceVersion it saw.
fn watch_round(app: &Cluster, version: &str, seen: &Mutex<Seen>) -> String {
    let mut child = curl_watch(app, version, 240);
    seen.lock().unwrap().curl = Some(child.id());
    let (started, started_at) = (Instant::now(), version.to_string());
    let mut version = version.to_string();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let Ok(line) = line else { break };
        let event: serde_json::Value = match serde_json::from_str(&line) {
            Ok(event) => event,
            Err(e) => {
                seen.lock()
                    .unwrap()
                    .errors
                    .push(format!("not a watch event ({e}): {line}"));
                continue;
            }
        };
        let object = &event["object"];
        if event["type"] == "ERROR" {
            seen.lock()
                .unwrap()
                .errors
                .push(format!("watch event: {object}"));
            continue;
        }
        if let Some(v) = object["metadata"]["resourceVersion"].as_str() {
            version = v.to_string();
        }
        if event["type"] != "BOOKMARK" {
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string();
            seen.lock().unwrap().names.push(name);
        }
    }
    let output = child.wait_with_output().expect("curl finished");
    eprintln!(
        "rolling restart: a watch from {started_at} ended after {:?} with {} at resourceVersion {version}",
        started.elapsed(),
        output.status
    );
    let mut seen = seen.lock().unwrap();
    seen.rounds += 1;
    seen.curl = None;
    if !output.status.success() && !seen.stopped {
        seen.errors.push(format!(
            "the watch from resourceVersion {version} ended with curl {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    version
}

fn create(app: &Cluster, name: &str) -> Result<(), String> {
    let output = app.kubectl_output(
        &["-n", "default", "create", "-f", "-"],
        Some(&format!(
            "apiVersion: db.example.com/v1\nkind: PostgreSQLInstance\nmetadata: {{name: {name}}}\nspec: {{plan: small}}\n"
        )),
    );
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "create {name}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

fn pod_uids(app: &Cluster) -> String {
    app.kubectl(&[
        "-n",
        "kube-bind",
        "get",
        "pods",
        "-l",
        "app.kubernetes.io/name=bindery-server",
        "-o",
        "jsonpath={.items[*].metadata.uid}",
    ])
}

/// `kubectl rollout restart deployment/bindery` in `kube-bind` while a
/// resumed watch runs and objects are created: the watch sees every object,
/// and neither it nor a create gets an error.
pub fn under_a_watch(app: &Cluster, run_dir: &std::path::Path) {
    let before = pod_uids(app);
    let version = app.kubectl(&["get", "--raw", COLLECTION]);
    let version: serde_json::Value = serde_json::from_str(&version).expect("a list");
    let version = version["metadata"]["resourceVersion"]
        .as_str()
        .expect("the list's resourceVersion")
        .to_string();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let watcher = {
        let (app, seen) = (app.clone(), seen.clone());
        std::thread::spawn(move || {
            let mut version = version;
            while !seen.lock().unwrap().stopped {
                version = watch_round(&app, &version, &seen);
            }
        })
    };

    let mut created = vec![];
    let mut create_errors = vec![];
    create(app, "before-restart").expect("a create before the restart");
    created.push("before-restart".to_string());
    let restart = Command::new(kubectl_path())
        .arg("--kubeconfig")
        .arg(&app.kubeconfig)
        .args([
            "-n",
            "kube-bind",
            "rollout",
            "restart",
            "deployment/bindery",
        ])
        .output()
        .unwrap();
    assert!(
        restart.status.success(),
        "{}",
        String::from_utf8_lossy(&restart.stderr)
    );
    let mut status = Command::new(kubectl_path())
        .arg("--kubeconfig")
        .arg(&app.kubeconfig)
        .args([
            "-n",
            "kube-bind",
            "rollout",
            "status",
            "deployment/bindery",
            "--timeout=240s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut n = 0;
    let rolled = loop {
        if let Some(exit) = status.try_wait().unwrap() {
            break exit;
        }
        n += 1;
        let name = format!("during-restart-{n}");
        match create(app, &name) {
            Ok(()) => created.push(name),
            Err(e) => create_errors.push(e),
        }
        std::thread::sleep(Duration::from_secs(1));
    };
    assert!(rolled.success(), "the rollout did not finish");
    // The old pods take their grace period to go; the watch runs on
    // through it.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let now = pod_uids(app);
        if !before.split_whitespace().any(|uid| now.contains(uid)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "old pods still there: {before} then {now}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    create(app, "after-restart").expect("a create after the restart");
    created.push("after-restart".to_string());

    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let missing: Vec<String> = {
            let seen = seen.lock().unwrap();
            created
                .iter()
                .filter(|c| !seen.names.contains(c))
                .cloned()
                .collect()
        };
        if missing.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the watch never saw {missing:?}; its errors: {:?}",
            seen.lock().unwrap().errors
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    {
        let mut seen = seen.lock().unwrap();
        seen.stopped = true;
        if let Some(pid) = seen.curl {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
    let _ = watcher.join();
    let seen = seen.lock().unwrap();
    assert!(
        n > 0 && seen.rounds > 0,
        "creates during the restart: {n}; watch rounds: {}",
        seen.rounds
    );
    assert!(
        seen.errors.is_empty() && create_errors.is_empty(),
        "a rolling restart of bindery's Deployment (its pods stopped with SIGTERM) reached the \
         client: watch {:?}; creates {create_errors:?} (run dir {})",
        seen.errors,
        run_dir.display()
    );
}
