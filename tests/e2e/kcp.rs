//! Controllers written for kcp run unmodified against bindery's virtual
//! workspace (issue 25): `examples/postgresql-mcr`, built on
//! multicluster-runtime v0.22.4-beta.1 and kcp's multicluster-provider
//! v0.3.3 (the released versions the Go module proxy serves; go.sum pins
//! them), runs against the `postgresql` export with two app clusters bound
//! (the shared one and one of this test's own). In the `apiexport` mode it
//! finds the workspace through the export's APIExportEndpointSlice and the
//! consumers through their APIBindings; in the `object` mode through the
//! PostgreSQLInstances at `clusters/*` (`ObjectToWatch`). Either way it
//! engages both consumers, reconciles their instances, which share a
//! namespace and a name, through each consumer's path (each app cluster
//! sees its own Ready and credentials). A consumer that unbinds is
//! disengaged in both modes: a watch at `clusters/*` is told its objects
//! left (DELETED, as kcp's watch tells the objects an APIBinding's deletion
//! removes) and goes on, and the workspace stops showing them; binding
//! again brings them back to the same watch as ADDED events. The
//! dialect itself is checked too: the annotation names each
//! object's consumer, a caller's value is never stored, the bindings and
//! the endpoint slice are what bindery made.

use crate::a_soak::go_runner;
use crate::bind::{app_cluster_binds, app_cluster_namespace};
use crate::binder::{
    bind_template, binder_token, bindery_cli, bindery_command_for, curl_with_token, succeeded,
    watch_with_token,
};
use crate::bindery::{bindery, serving_only};
use crate::controllers::install_examples;
use crate::fixture::{Cluster, clusters, own_app_cluster, scratch_dir, unique_name};
use crate::workspace::controller_token;
use bindery::controllers::naming::cluster_namespace;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

const EXPORT: &str = "postgresql";
const WAIT: Duration = Duration::from_secs(120);

/// The example controller on multicluster-runtime, built from its pinned
/// Go module (cached in `target/oracles` until its sources change).
fn controller_binary() -> std::path::PathBuf {
    go_runner::build_from(
        "examples",
        "postgresql-mcr",
        "github.com/kcp-dev/multicluster-provider v0.3.3 and sigs.k8s.io/multicluster-runtime \
         v0.22.4-beta.1 from the Go module proxy or cache",
    )
}

/// One running controller: its JSON lines, and its log.
struct Controller {
    child: Child,
    lines: Receiver<Value>,
    seen: Vec<Value>,
    log: std::path::PathBuf,
}

impl Controller {
    fn start(binary: &std::path::Path, mode: &str, token: &str) -> Self {
        let log = scratch_dir().join(unique_name(&format!("mcr-{mode}.log")));
        let mut child = Command::new(binary)
            .args([
                "--mode",
                mode,
                "--export",
                EXPORT,
                "--server",
                &bindery().url,
            ])
            .arg("--certificate-authority")
            .arg(bindery().pki.join("bindery/serving-ca.crt"))
            .arg("--provider-kubeconfig")
            .arg(&clusters().provider.kubeconfig)
            .env("CONTROLLER_TOKEN", token)
            .stdout(Stdio::piped())
            .stderr(Stdio::from(
                std::fs::File::create(&log).expect("a log file"),
            ))
            .spawn()
            .expect("the multicluster-runtime controller starts");
        let (tx, lines) = channel();
        let stdout = child.stdout.take().expect("stdout is piped");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(value);
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
            log,
        }
    }

    /// Waits for a line `wanted` accepts; fails with what was seen and the log.
    fn wait_for(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(line) = self.seen.iter().find(|l| wanted(l)) {
            return line.clone();
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if wanted(&line) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "the controller never reported {what}; it printed {:?}; its log ({}) ends:\n{}",
                    self.seen,
                    self.log.display(),
                    tail(&self.log)
                ),
            }
        }
    }

    fn engaged(&mut self, cluster: &str) {
        self.wait_for(&format!("engaging {cluster}"), |l| {
            l["event"] == "engaged" && l["cluster"] == cluster
        });
    }

    fn disengaged(&mut self, cluster: &str) {
        self.wait_for(&format!("disengaging {cluster}"), |l| {
            l["event"] == "disengaged" && l["cluster"] == cluster
        });
    }

    /// The reconcile of `cluster`'s `default/<name>` that found or made it Ready.
    fn reconciled(&mut self, cluster: &str, name: &str) -> Value {
        self.wait_for(&format!("{cluster}'s default/{name} Ready"), |l| {
            l["event"] == "reconciled"
                && l["cluster"] == cluster
                && l["namespace"] == "default"
                && l["name"] == name
                && l["phase"] == "Ready"
        })
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.stop();
    }
}

fn tail(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Makes `default/<name>` in `app` once the bound API takes it.
fn create_instance(app: &Cluster, name: &str) {
    let instance = format!(
        "apiVersion: db.example.com/v1\nkind: PostgreSQLInstance\nmetadata: {{name: {name}}}\nspec: {{plan: small}}\n"
    );
    let deadline = Instant::now() + WAIT;
    loop {
        let made = app.kubectl_output(&["-n", "default", "apply", "-f", "-"], Some(&instance));
        if made.status.success() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} never made in {}: {}",
            app.name,
            String::from_utf8_lossy(&made.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Waits until `app` shows `default/<name>` Ready with its credentials;
/// returns its uid.
fn ready_in(app: &Cluster, name: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let phase = app.kubectl_output(
            &[
                "-n",
                "default",
                "get",
                "postgresqlinstances",
                name,
                "-o",
                "jsonpath={.status.phase} {.metadata.uid}",
            ],
            None,
        );
        let said = String::from_utf8_lossy(&phase.stdout).to_string();
        let secret = app.kubectl_output(
            &[
                "-n",
                "default",
                "get",
                "secret",
                &format!("{name}-credentials"),
            ],
            None,
        );
        if let Some(uid) = said.strip_prefix("Ready ")
            && secret.status.success()
        {
            return uid.trim().to_string();
        }
        assert!(
            Instant::now() < deadline,
            "{} shows {name} as {said:?}, credentials: {}",
            app.name,
            String::from_utf8_lossy(&secret.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Waits for `count` events of a watch that `wanted` accepts; fails on an
/// ERROR event (the watch would have to list again) or when they never come.
fn told(events: &Receiver<Value>, wanted: impl Fn(&Value) -> bool, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    let mut found = Vec::new();
    let mut seen = Vec::new();
    while found.len() < count {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = events.recv_timeout(left).unwrap_or_else(|_| {
            panic!("only {found:?} of {count} came; the watch showed {seen:?}")
        });
        assert_ne!(event["type"], "ERROR", "the watch ended: {event}");
        if wanted(&event) {
            found.push(event);
        } else {
            seen.push(event);
        }
    }
    found
}

/// `bindery <args>` against the app cluster `app`, as the binder `token`.
fn binder_runs(what: &str, app: &Cluster, token: &str, args: &[&str]) {
    let (verb, rest) = args.split_first().expect("a command");
    succeeded(
        what,
        &bindery_command_for(&bindery().url, verb, &app.kubeconfig)
            .args(rest)
            .env("BINDERY_TOKEN", token)
            .output()
            .expect("bindery runs"),
    );
}

/// The consumer `cluster`'s two instances, `shared-a` and `shared-b`, told
/// to a wildcard watch as `kind` events, in its terms and marked as its.
fn objects_told(events: &Receiver<Value>, kind: &str, cluster: &str) {
    let mut told = told(
        events,
        |e| {
            e["type"] == kind && e["object"]["metadata"]["annotations"]["kcp.io/cluster"] == cluster
        },
        2,
    );
    told.sort_by_key(|e| e["object"]["metadata"]["name"].as_str().map(str::to_string));
    for (event, name) in told.iter().zip(["shared-a", "shared-b"]) {
        let object = &event["object"];
        assert_eq!(object["metadata"]["name"], name, "{event}");
        assert_eq!(object["metadata"]["namespace"], "default", "{event}");
        assert_eq!(
            object["metadata"]["annotations"]["bindery.dev/consumer"], cluster,
            "{event}"
        );
        assert_eq!(object["kind"], "PostgreSQLInstance", "{event}");
    }
}

fn workspace(path: &str) -> String {
    format!("{}/services/export/{EXPORT}{path}", bindery().url)
}

/// The bindings at `clusters/*` once both consumers' are Ready.
fn ready_bindings(token: &str, consumers: &[&str]) -> Value {
    let url = workspace("/clusters/*/apis/apis.kcp.io/v1alpha1/apibindings");
    let deadline = Instant::now() + WAIT;
    loop {
        let (code, list) = curl_with_token("GET", &url, Some(token), None);
        let ready: Vec<&str> = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["status"]["conditions"][0]["status"] == "True")
            .filter_map(|b| b["metadata"]["annotations"]["kcp.io/cluster"].as_str())
            .collect();
        if code == 200 && consumers.iter().all(|c| ready.contains(c)) {
            return list;
        }
        assert!(
            Instant::now() < deadline,
            "the APIBindings never showed {consumers:?} Ready: {code} {list}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The dialect as a plain client sees it: the endpoint slice, the bindings,
/// the annotation on every object, and a caller's annotation never stored.
fn the_dialect_is_bindery_s_own(token: &str, one: &str, two: &str) {
    let (code, slice) = curl_with_token(
        "GET",
        &workspace("/apis/apis.kcp.io/v1alpha1/apiexportendpointslices/postgresql"),
        Some(token),
        None,
    );
    assert_eq!(code, 200, "{slice}");
    assert_eq!(
        slice["status"]["endpoints"],
        json!([{"url": workspace("")}]),
        "{slice}"
    );
    let (code, discovery) = curl_with_token(
        "GET",
        &workspace("/clusters/*/apis/apis.kcp.io/v1alpha1"),
        Some(token),
        None,
    );
    assert_eq!(code, 200, "{discovery}");
    assert_eq!(discovery["resources"][0]["name"], "apibindings");
    assert_eq!(
        discovery["resources"][0]["verbs"],
        json!(["get", "list", "watch"])
    );

    let bindings = ready_bindings(token, &[one, two]);
    let text = bindings.to_string();
    assert!(!text.contains("kube-bind-"), "no cluster namespace: {text}");
    for binding in bindings["items"].as_array().unwrap() {
        assert_eq!(binding["kind"], "APIBinding");
        assert_eq!(binding["metadata"]["name"], EXPORT);
        assert_eq!(binding["spec"]["reference"]["export"]["name"], EXPORT);
    }

    // Every instance at clusters/* names its consumer twice, in bindery's
    // words and in kcp's.
    let (code, instances) = curl_with_token(
        "GET",
        &workspace("/clusters/*/apis/db.example.com/v1/postgresqlinstances"),
        Some(token),
        None,
    );
    assert_eq!(code, 200, "{instances}");
    let marked: Vec<(String, String)> = instances["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["metadata"]["name"] == "shared-a")
        .map(|i| {
            let a = &i["metadata"]["annotations"];
            assert_eq!(a["kcp.io/cluster"], a["bindery.dev/consumer"], "{i}");
            (
                a["kcp.io/cluster"].as_str().unwrap_or_default().to_string(),
                i["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let mut expected = vec![
        (one.to_string(), "default".to_string()),
        (two.to_string(), "default".to_string()),
    ];
    expected.sort();
    let mut marked = marked;
    marked.sort();
    assert_eq!(marked, expected, "{instances}");

    // A caller that claims another consumer's cluster is ignored: on one
    // consumer's path the object still names its own, and the provider
    // never stores the caller's value.
    let path = workspace(&format!(
        "/clusters/{one}/apis/db.example.com/v1/namespaces/default/postgresqlinstances/shared-a"
    ));
    let mut command = Command::new("curl");
    command
        .args(["-X", "PATCH", "--cacert"])
        .arg(bindery().pki.join("bindery/serving-ca.crt"))
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["-H", "Content-Type: application/merge-patch+json"])
        .args([
            "--data-binary",
            &json!({"metadata": {"annotations": {"kcp.io/cluster": two, "note": "x"}}}).to_string(),
        ])
        .arg(&path);
    let (code, patched) = crate::fixture::curl_json(command);
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["metadata"]["annotations"]["kcp.io/cluster"], one);
    assert_eq!(patched["metadata"]["annotations"]["note"], "x");
    let stored = clusters().provider.kubectl(&[
        "get",
        "postgresqlinstances",
        "-A",
        "-l",
        &format!("bindery.dev/consumer={one}"),
        "-o",
        "json",
    ]);
    let stored: Value = serde_json::from_str(&stored).unwrap();
    let item = stored["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == "shared-a")
        .unwrap_or_else(|| panic!("{one}'s shared-a on the provider: {stored}"));
    assert_eq!(item["metadata"]["annotations"]["note"], "x");
    assert!(
        item["metadata"]["annotations"]
            .get("kcp.io/cluster")
            .is_none(),
        "a caller's kcp.io/cluster is never stored: {item}"
    );
}

#[test]
fn controllers_written_for_kcp_engage_every_consumer_and_reconcile_through_its_path() {
    install_examples();
    let binary = controller_binary();
    let second = own_app_cluster("kcp");
    let first = &clusters().app;
    let _guard = app_cluster_binds();
    let first_binder = bind_template(EXPORT);
    let (_, second_binder) = binder_token(true);
    binder_runs(
        "bind the second app cluster",
        &second,
        &second_binder,
        &["bind", "--template", EXPORT],
    );
    let one = app_cluster_namespace()
        .strip_prefix("kube-bind-")
        .unwrap()
        .to_string();
    let two = cluster_namespace("kube-bind-", second.kube_system_uid().trim())
        .strip_prefix("kube-bind-")
        .unwrap()
        .to_string();
    // The same namespace and name in both.
    create_instance(first, "shared-a");
    create_instance(&second, "shared-a");
    let (_, token) = controller_token(EXPORT, &["get", "list", "watch", "update", "patch"], None);
    the_dialect_is_bindery_s_own(&token, &one, &two);

    // The apiexport mode: the endpoint slice, then the APIBindings.
    let mut by_export = Controller::start(&binary, "apiexport", &token);
    by_export.engaged(&one);
    by_export.engaged(&two);
    let a_one = by_export.reconciled(&one, "shared-a");
    let a_two = by_export.reconciled(&two, "shared-a");
    assert_eq!(a_one["annotation"], one.as_str());
    assert_eq!(a_two["annotation"], two.as_str());
    let uid_one = ready_in(first, "shared-a");
    let uid_two = ready_in(&second, "shared-a");
    assert_ne!(uid_one, uid_two);
    assert_eq!(
        (a_one["uid"].as_str(), a_two["uid"].as_str()),
        (Some(uid_one.as_str()), Some(uid_two.as_str())),
        "each consumer's own object, told apart by its cluster"
    );
    by_export.stop();

    // The ObjectToWatch mode: the instances at clusters/* name the clusters.
    let mut by_object = Controller::start(&binary, "object", &token);
    by_object.engaged(&one);
    by_object.engaged(&two);
    create_instance(first, "shared-b");
    create_instance(&second, "shared-b");
    let b_one = by_object.reconciled(&one, "shared-b");
    let b_two = by_object.reconciled(&two, "shared-b");
    assert_eq!(
        (b_one["uid"].as_str(), b_two["uid"].as_str()),
        (
            Some(ready_in(first, "shared-b").as_str()),
            Some(ready_in(&second, "shared-b").as_str())
        )
    );

    // Unbinding the second app cluster disengages it, in both modes. A plain
    // watch at clusters/*, from a list's version as informers watch, is
    // told how: the consumer's objects leave it as DELETED events, as kcp's
    // do when its APIBinding deletion removes them (the ObjectToWatch mode
    // disengages a cluster when its last object is deleted), and it goes on.
    let mut by_export = Controller::start(&binary, "apiexport", &token);
    by_export.engaged(&one);
    by_export.engaged(&two);
    let instances = workspace("/clusters/*/apis/db.example.com/v1/postgresqlinstances");
    let (code, before) = curl_with_token("GET", &instances, Some(&token), None);
    assert_eq!(code, 200, "{before}");
    let version = before["metadata"]["resourceVersion"].as_str().unwrap();
    let (mut watch, events) = watch_with_token(
        &format!("{instances}?watch=1&resourceVersion={version}&allowWatchBookmarks=true"),
        &token,
        600,
    );
    binder_runs(
        "unbind the second app cluster",
        &second,
        &second_binder,
        &["unbind", EXPORT],
    );
    by_export.disengaged(&two);
    by_object.disengaged(&two);
    objects_told(&events, "DELETED", &two);
    // The watch goes on: a change of the first consumer's object follows.
    first.kubectl(&[
        "-n",
        "default",
        "annotate",
        "--overwrite",
        "postgresqlinstances",
        "shared-a",
        "touched=after-unbind",
    ]);
    told(
        &events,
        |e| {
            e["type"] == "MODIFIED"
                && e["object"]["metadata"]["annotations"]["kcp.io/cluster"] == one.as_str()
                && e["object"]["metadata"]["annotations"]["touched"] == "after-unbind"
        },
        1,
    );
    // The workspace no longer shows the second consumer's objects.
    let (code, list) = curl_with_token("GET", &instances, Some(&token), None);
    assert_eq!(code, 200, "{list}");
    assert!(
        !list.to_string().contains(two.as_str()),
        "{two} still shows at clusters/*: {list}"
    );
    // Binding again finds the objects the provider kept, and the same
    // watch is told them as ADDED, as kcp's wildcard watch tells the
    // objects of a workspace that binds the export.
    binder_runs(
        "bind the second app cluster again",
        &second,
        &second_binder,
        &["bind", "--template", EXPORT],
    );
    objects_told(&events, "ADDED", &two);
    let _ = watch.kill();
    let _ = watch.wait();
    // As the other tests expect the export: without this test's app cluster.
    binder_runs(
        "unbind the second app cluster again",
        &second,
        &second_binder,
        &["unbind", EXPORT],
    );
    for controller in [&by_export, &by_object] {
        assert!(
            !controller
                .seen
                .iter()
                .any(|l| l["event"] == "disengaged" && l["cluster"] == one.as_str()),
            "{one} stays engaged: {:?}",
            controller.seen
        );
    }
    by_export.stop();
    by_object.stop();

    first.kubectl(&[
        "-n",
        "default",
        "delete",
        "postgresqlinstances",
        "shared-a",
        "shared-b",
    ]);
    succeeded("unbind", &bindery_cli("unbind", &first_binder, &[EXPORT]));
}

/// A bindery that only serves (`--controllers=false`, as when the
/// controllers run in a deployment of their own) names its `--external-url`
/// in the export's endpoint slice, as one that runs the controllers does:
/// the URL is where provider controllers must reach it, not where this
/// caller did.
#[test]
fn a_serving_only_bindery_names_its_external_url_in_the_endpoint_slice() {
    install_examples();
    let _guard = app_cluster_binds();
    bind_template(EXPORT);
    let (_, token) = controller_token(EXPORT, &["get", "list", "watch"], None);
    let external = "https://bindery.example.test:8443/";
    let server = serving_only(
        &clusters().provider.kubeconfig,
        &["--external-url", external],
    );
    let (code, slice) = curl_with_token(
        "GET",
        &format!(
            "{}/services/export/{EXPORT}/apis/apis.kcp.io/v1alpha1/apiexportendpointslices/{EXPORT}",
            server.url
        ),
        Some(&token),
        None,
    );
    assert_eq!(code, 200, "{slice}");
    assert_eq!(
        slice["status"]["endpoints"],
        json!([{"url": format!("https://bindery.example.test:8443/services/export/{EXPORT}")}]),
        "{slice}"
    );
}
