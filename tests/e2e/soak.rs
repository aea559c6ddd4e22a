//! A soak with real controllers (BINDERY_SOAK_SECONDS, 600 unless set). An
//! app cluster of the test's own binds an API through a second `bindery
//! serve`, which reaches a second kube-apiserver of the provider (same etcd)
//! through an HTTP proxy; the app cluster's aggregator sends the bound
//! resource to that bindery. Against that aggregated path run a client-go
//! dynamic informer and a metadata informer (`tests/clients/informers`,
//! client-go v0.34.10), a kube-rs watcher, and the app cluster's own
//! kube-controller-manager, under continuous writes, while, over and over,
//! the proxy cuts every answer it is sending (the provider's watch breaks
//! off), silences every open watch (it stays open, nothing comes), and the
//! provider's kube-apiserver is killed and started again.
//!
//! At the end every informer's store is the provider's objects, and for
//! every object each informer was told exactly the changes the writer made,
//! in order: none missed, none twice, none that was not made. Only changes
//! made around a restart of the provider may reach a client as their net
//! change, as they reach a client of a local CRD whose kube-apiserver
//! restarts (its new watch cache no longer has them). The requests that waited the watch
//! cache's full patience, and what each client went through, are reported.

use crate::availability::{ProviderReplica, bindery_reaching_logged};
use crate::binder::{binder_token, bindery_command_for, succeeded};
use crate::cache_stall::SilencingProxy;
use crate::controllers::install_examples;
use crate::fixture::{Cluster, clusters, own_app_cluster, scratch_dir, unique_name};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[allow(dead_code)] // the e2e tests build Go programs; they run no oracle
#[path = "../oracles/runner.rs"]
pub(crate) mod go_runner;

const GROUP: &str = "soak.bindery.test";
const RESOURCE: &str = "tides";
/// How many object names the writer plays with.
const NAMES: usize = 12;

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: tides.soak.bindery.test}
spec:
  group: soak.bindery.test
  names: {plural: tides, singular: tide, kind: Tide, listKind: TideList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: kube-bind.io/v1alpha2
kind: APIServiceExportTemplate
metadata: {name: soak}
spec:
  description: Tides, for the soak test.
  scope: Namespaced
  resources:
  - group: soak.bindery.test
    resource: tides
"#;

fn soak_duration() -> Duration {
    let seconds = std::env::var("BINDERY_SOAK_SECONDS")
        .ok()
        .map(|s| s.parse().expect("BINDERY_SOAK_SECONDS is a number"))
        .unwrap_or(600);
    Duration::from_secs(seconds)
}

fn tides() -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: "v1".into(),
        api_version: format!("{GROUP}/v1"),
        kind: "Tide".into(),
        plural: RESOURCE.into(),
    }
}

/// One change as a client was told of it, or as the writer made it:
/// `add`, `update` or `delete`, and the version it made (none for a
/// deletion: a deletion's version is the provider's, not the writer's).
pub(crate) type Change = (String, Option<String>);

/// Each object's changes, in order.
pub(crate) type History = BTreeMap<String, Vec<Change>>;

fn told(history: &mut History, name: &str, kind: &str, version: Option<String>) {
    let version = if kind == "delete" { None } else { version };
    history
        .entry(name.to_string())
        .or_default()
        .push((kind.to_string(), version));
}

/// The client-go informers, a child process printing JSON lines.
pub(crate) struct GoInformers {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Arc<Mutex<Vec<Value>>>,
    reader: Option<std::thread::JoinHandle<()>>,
    stderr: std::path::PathBuf,
}

impl Written {
    fn made(&mut self, name: &str, kind: &str, version: Option<String>) {
        told(&mut self.history, name, kind, version);
        self.when
            .entry(name.to_string())
            .or_default()
            .push(Instant::now());
    }
}

impl GoInformers {
    fn start(app: &Cluster, namespace: &str) -> Self {
        Self::start_for(app, GROUP, RESOURCE, namespace, true)
    }

    /// The informers of `<resource>.<group>` (version v1) in `namespace`
    /// (empty: across namespaces) of `app`, once they have synced; with the
    /// watch-list (as the app cluster's kube-controller-manager runs them)
    /// or with a list and then a watch.
    pub(crate) fn start_for(
        app: &Cluster,
        group: &str,
        resource: &str,
        namespace: &str,
        watch_list: bool,
    ) -> Self {
        let binary = go_runner::build_from(
            "tests/clients",
            "informers",
            "k8s.io/client-go v0.34.10 from the Go module proxy or cache",
        );
        let stderr = scratch_dir().join(unique_name("informers.log"));
        let mut child = Command::new(binary)
            .arg("--kubeconfig")
            .arg(&app.kubeconfig)
            .args(["--group", group, "--version", "v1", "--resource", resource])
            .args(["--namespace", namespace])
            // The watch-list: a watch whose initial events end with a
            // bookmark, instead of a list.
            .env("KUBE_FEATURE_WatchListClient", watch_list.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("the informers start");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().unwrap();
        let shared = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let line = line.expect("reading the informers");
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("the informers printed {line:?}: {e}"));
                shared.lock().unwrap().push(value);
            }
        });
        let informers = Self {
            stdin: child.stdin.take(),
            child,
            lines,
            reader: Some(reader),
            stderr,
        };
        let deadline = Instant::now() + Duration::from_secs(150);
        while !informers.lines().iter().any(|l| l["synced"] == true) {
            assert!(
                Instant::now() < deadline,
                "the client-go informers never synced; see {}",
                informers.stderr.display()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        informers
    }

    fn lines(&self) -> Vec<Value> {
        self.lines.lock().unwrap().clone()
    }

    /// Each informer's history; relists' replays (an update to the version
    /// it had) are counted apart, deletions learnt from a relist too.
    pub(crate) fn histories(&self) -> HashMap<String, (History, usize, usize)> {
        let mut by_informer: HashMap<String, (History, usize, usize)> = HashMap::new();
        for line in self.lines() {
            let (Some(informer), Some(kind)) = (line["informer"].as_str(), line["type"].as_str())
            else {
                continue;
            };
            let entry = by_informer.entry(informer.to_string()).or_default();
            let version = line["rv"].as_str().map(str::to_string);
            if kind == "update" && line["previous"] == line["rv"] {
                entry.1 += 1;
                continue;
            }
            if line["tombstone"] == true {
                entry.2 += 1;
            }
            told(&mut entry.0, line["name"].as_str().unwrap(), kind, version);
        }
        by_informer
    }

    /// Ends the informers: their stores (name to version), by informer.
    pub(crate) fn finish(mut self) -> HashMap<String, BTreeMap<String, String>> {
        drop(self.stdin.take());
        let status = self.child.wait().expect("the informers end");
        self.reader.take().unwrap().join().expect("the reader");
        assert!(
            status.success(),
            "the informers exited with {status}; see {}",
            self.stderr.display()
        );
        self.lines()
            .into_iter()
            .filter_map(|line| {
                let informer = line["informer"].as_str()?.to_string();
                let store = serde_json::from_value(line.get("store")?.clone()).ok()?;
                Some((informer, store))
            })
            .collect()
    }
}

impl Drop for GoInformers {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the kube-rs watcher saw: its history, its store, how often it
/// listed again and the errors its stream gave.
#[derive(Default)]
struct KubeRsWatch {
    history: History,
    store: BTreeMap<String, String>,
    /// Lists made (the first included).
    lists: usize,
    errors: usize,
}

fn version_of(object: &DynamicObject) -> String {
    object.metadata.resource_version.clone().unwrap_or_default()
}

async fn watch_with_kube_rs(api: Api<DynamicObject>, seen: Arc<Mutex<KubeRsWatch>>) {
    let mut stream = watcher(api, watcher::Config::default()).boxed();
    let mut relisted: Option<BTreeMap<String, String>> = None;
    while let Some(event) = stream.next().await {
        let mut seen = seen.lock().unwrap();
        let seen = &mut *seen;
        match event {
            Ok(watcher::Event::Apply(object)) => {
                let name = object.metadata.name.clone().unwrap_or_default();
                let kind = if seen.store.contains_key(&name) {
                    "update"
                } else {
                    "add"
                };
                told(&mut seen.history, &name, kind, Some(version_of(&object)));
                seen.store.insert(name, version_of(&object));
            }
            Ok(watcher::Event::Delete(object)) => {
                let name = object.metadata.name.clone().unwrap_or_default();
                told(&mut seen.history, &name, "delete", None);
                seen.store.remove(&name);
            }
            Ok(watcher::Event::Init) => relisted = Some(BTreeMap::new()),
            Ok(watcher::Event::InitApply(object)) => {
                if let Some(listed) = relisted.as_mut() {
                    listed.insert(
                        object.metadata.name.clone().unwrap_or_default(),
                        version_of(&object),
                    );
                }
            }
            Ok(watcher::Event::InitDone) => {
                // A list (the first, or again after an error): what changed
                // since the store is what the client is told.
                let listed = relisted.take().unwrap_or_default();
                for (name, version) in &listed {
                    match seen.store.get(name) {
                        Some(had) if had == version => {}
                        Some(_) => told(&mut seen.history, name, "update", Some(version.clone())),
                        None => told(&mut seen.history, name, "add", Some(version.clone())),
                    }
                }
                let gone: Vec<String> = seen
                    .store
                    .keys()
                    .filter(|n| !listed.contains_key(*n))
                    .cloned()
                    .collect();
                for name in gone {
                    told(&mut seen.history, &name, "delete", None);
                }
                seen.store = listed;
                seen.lists += 1;
            }
            Err(_) => seen.errors += 1,
        }
    }
}

/// What the writer made, and how many of its writes failed.
#[derive(Default)]
struct Written {
    history: History,
    /// When each change of `history` was made.
    when: BTreeMap<String, Vec<Instant>>,
    /// What the writer believes exists: name to version.
    objects: BTreeMap<String, String>,
    writes: usize,
    failures: usize,
}

/// After a failed write: the object as the provider has it now (`None`:
/// gone), read until bindery answers.
async fn settle(api: &Api<DynamicObject>, name: &str) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        match api.get_opt(name).await {
            Ok(found) => return found.as_ref().map(version_of),
            Err(error) => {
                assert!(
                    Instant::now() < deadline,
                    "{name} could not be read for 3 minutes: {error}"
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// Writes until `until`: creates a missing object, else changes it (four
/// times in five) or deletes it. A write that fails is settled by reading
/// the object, so that a change made without an answer is still counted.
async fn write_until(api: Api<DynamicObject>, until: Instant, written: Arc<Mutex<Written>>) {
    let mut random: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        random ^= random << 13;
        random ^= random >> 7;
        random ^= random << 17;
        random
    };
    let mut counter = 0u64;
    while Instant::now() < until {
        counter += 1;
        let name = format!("tide-{}", next() as usize % NAMES);
        let had = written.lock().unwrap().objects.get(&name).cloned();
        let result = match &had {
            None => {
                let object: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": format!("{GROUP}/v1"), "kind": "Tide",
                    "metadata": {"name": name}, "spec": {"n": counter}}))
                .unwrap();
                api.create(&PostParams::default(), &object)
                    .await
                    .map(|made| ("add", Some(version_of(&made))))
            }
            Some(_) if next() % 5 != 0 => api
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"n": counter}})),
                )
                .await
                .map(|changed| ("update", Some(version_of(&changed)))),
            Some(_) => api
                .delete(&name, &DeleteParams::default())
                .await
                .map(|_| ("delete", None)),
        };
        let failed = {
            let mut log = written.lock().unwrap();
            log.writes += 1;
            match result {
                Ok((kind, version)) => {
                    log.made(&name, kind, version.clone());
                    match version {
                        Some(version) => log.objects.insert(name.clone(), version),
                        None => log.objects.remove(&name),
                    };
                    false
                }
                Err(_) => {
                    log.failures += 1;
                    true
                }
            }
        };
        if failed {
            let now = settle(&api, &name).await;
            let mut log = written.lock().unwrap();
            let log = &mut *log;
            match (&had, now) {
                (None, Some(version)) => {
                    log.made(&name, "add", Some(version.clone()));
                    log.objects.insert(name, version);
                }
                (Some(before), Some(version)) if *before != version => {
                    log.made(&name, "update", Some(version.clone()));
                    log.objects.insert(name, version);
                }
                (Some(_), None) => {
                    log.made(&name, "delete", None);
                    log.objects.remove(&name);
                }
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What was done to the provider, by kind.
#[derive(Debug, Default)]
struct Disruptions {
    cuts: usize,
    stalls: usize,
    restarts: usize,
    /// From a little before each kill of the provider to a little after it
    /// answered again.
    restarted: Vec<(Instant, Instant)>,
}

/// Until `until`, every 90 s: the proxy cuts every answer it is sending,
/// later silences every open watch, later the provider's kube-apiserver is
/// killed and started again.
fn disrupt_until(
    proxy: &SilencingProxy,
    replica: &mut ProviderReplica,
    until: Instant,
) -> Disruptions {
    let mut done = Disruptions::default();
    let wait_until = |at: Instant| {
        while Instant::now() < at.min(until) {
            std::thread::sleep(Duration::from_millis(200));
        }
        Instant::now() < until
    };
    let mut cycle = Instant::now();
    loop {
        if !wait_until(cycle + Duration::from_secs(20)) {
            return done;
        }
        proxy.cut_open_answers();
        done.cuts += 1;
        if !wait_until(cycle + Duration::from_secs(45)) {
            return done;
        }
        proxy.silence_open_watches();
        done.stalls += 1;
        if !wait_until(cycle + Duration::from_secs(70)) {
            return done;
        }
        let killed = Instant::now();
        replica.kill();
        std::thread::sleep(Duration::from_secs(3));
        replica.run();
        done.restarts += 1;
        done.restarted.push((
            killed - Duration::from_secs(5),
            Instant::now() + Duration::from_secs(5),
        ));
        cycle += Duration::from_secs(90);
    }
}

/// The provider's objects in the consumer's provider namespace for
/// `namespace`: name to version.
fn provider_objects(provider_namespace: &str) -> BTreeMap<String, String> {
    let listed: Value = serde_json::from_str(&clusters().provider.kubectl(&[
        "get",
        &format!("{RESOURCE}.{GROUP}"),
        "-n",
        provider_namespace,
        "-o",
        "json",
    ]))
    .unwrap();
    listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            (
                item["metadata"]["name"].as_str().unwrap().to_string(),
                item["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect()
}

/// The first object whose history, as `client` was told it, is not the
/// writer's, described. A provider's kube-apiserver that restarts has lost
/// the changes it had not yet sent (its watch cache starts anew, older
/// versions get 410): a client of a local CRD is then told the net change
/// on its relist, and so may a client here, for changes made around a
/// restart (`restarted`). Every other change is told once, in order, and
/// nothing is told that was not written.
fn first_difference(
    client: &str,
    told: &History,
    written: &Written,
    restarted: &[(Instant, Instant)],
) -> Option<String> {
    let same = |a: &Change, b: &Change| match (a.0.as_str(), b.0.as_str()) {
        ("delete", "delete") => true,
        ("delete", _) | (_, "delete") => false,
        _ => a.1 == b.1,
    };
    let names: std::collections::BTreeSet<&String> =
        told.keys().chain(written.history.keys()).collect();
    names.into_iter().find_map(|name| {
        let (got, want) = (
            told.get(name).cloned().unwrap_or_default(),
            written.history.get(name).cloned().unwrap_or_default(),
        );
        let when = written.when.get(name).cloned().unwrap_or_default();
        let around_restart =
            |at: Instant| restarted.iter().any(|(from, to)| *from <= at && at <= *to);
        let mut next = 0;
        for (index, change) in want.iter().enumerate() {
            if next < got.len() && same(&got[next], change) {
                next += 1;
            } else if !around_restart(when[index]) {
                return Some(format!(
                    "{client}, {name}: change {index} {change:?} was not told; told {got:?}, written {want:?}"
                ));
            }
        }
        (next < got.len()).then(|| {
            format!("{client}, {name}: told {:?} that was not written; told {got:?}, written {want:?}", &got[next..])
        })
    })
}

fn lines_with(path: &std::path::Path, needle: &str) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains(needle))
        .count()
}

#[test]
fn real_controllers_are_told_every_change_through_cuts_stalls_and_provider_restarts() {
    install_examples();
    let provider = &clusters().provider;
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(CRD));
    provider.kubectl_wait(&[
        "--for=condition=Established",
        "--timeout=60s",
        &format!("crd/{RESOURCE}.{GROUP}"),
    ]);
    let app = own_app_cluster("soak");
    let mut replica = ProviderReplica::start();
    let proxy = SilencingProxy::start_to(replica.server());
    let bindery_log = scratch_dir().join(unique_name("soak-bindery.log"));
    let second = bindery_reaching_logged(&proxy.url, &bindery_log);
    let (_, token) = binder_token(true);
    let bind = |command: &str, args: &[&str]| {
        let output = bindery_command_for(&second.url, command, &app.kubeconfig)
            .args(args)
            .env("BINDERY_TOKEN", &token)
            .output()
            .expect("bindery runs");
        succeeded(&format!("{command} {args:?}"), &output);
    };
    bind("bind", &["--template", "soak"]);
    let namespace = unique_name("soak");
    app.kubectl(&["create", "namespace", &namespace]);
    let deadline = Instant::now() + Duration::from_secs(90);
    while !app
        .kubectl_output(&["get", RESOURCE, "-n", &namespace], None)
        .status
        .success()
    {
        assert!(
            Instant::now() < deadline,
            "the soak app cluster never served {RESOURCE}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let uid = app.kube_system_uid();
    let provider_namespace = format!(
        "{}-{namespace}",
        bindery::controllers::naming::cluster_namespace("kube-bind-", uid.trim())
    );

    let informers = GoInformers::start(&app, &namespace);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let api: Api<DynamicObject> =
        Api::namespaced_with(runtime.block_on(app.client()), &namespace, &tides());
    let kube_rs = Arc::new(Mutex::new(KubeRsWatch::default()));
    runtime.spawn(watch_with_kube_rs(api.clone(), kube_rs.clone()));
    let deadline = Instant::now() + Duration::from_secs(60);
    while kube_rs.lock().unwrap().lists == 0 {
        assert!(
            Instant::now() < deadline,
            "the kube-rs watcher never listed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let started = Instant::now();
    let until = started + soak_duration();
    let written = Arc::new(Mutex::new(Written::default()));
    let writer = runtime.spawn(write_until(api.clone(), until, written.clone()));
    let disruptions = disrupt_until(&proxy, &mut replica, until);
    runtime.block_on(writer).expect("the writer");

    // Every client catches up with the last change.
    let caught_up = |histories: &HashMap<String, (History, usize, usize)>| {
        let written = written.lock().unwrap();
        let matches = |client: &str, told: &History| {
            first_difference(client, told, &written, &disruptions.restarted).is_none()
        };
        ["client-go", "metadata"].iter().all(|informer| {
            histories
                .get(*informer)
                .is_some_and(|h| matches(informer, &h.0))
        }) && matches("kube-rs", &kube_rs.lock().unwrap().history)
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while !caught_up(&informers.histories()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    let histories = informers.histories();
    let informer_log = informers.stderr.clone();
    let stores = informers.finish();
    let objects = provider_objects(&provider_namespace);
    let kube_rs = kube_rs.lock().unwrap();
    let written = written.lock().unwrap();

    let waited = lines_with(&bindery_log, "full patience");
    eprintln!(
        "soak: {:?} with {} cuts, {} stalls, {} provider restarts; {} writes ({} failed, settled by reading), {} objects at the end; \
         bindery: {waited} requests waited the watch cache's full patience, {} silent watches replaced, {} lags caught up (log {}); \
         client-go: {:?} replays, {:?} tombstones, {} log lines on watch or list (log {}); \
         kube-rs: {} lists, {} stream errors",
        started.elapsed(),
        disruptions.cuts,
        disruptions.stalls,
        disruptions.restarts,
        written.writes,
        written.failures,
        objects.len(),
        lines_with(&bindery_log, "sent nothing, not even a bookmark"),
        lines_with(&bindery_log, "a new watch caught it up"),
        bindery_log.display(),
        histories
            .iter()
            .map(|(i, h)| (i.clone(), h.1))
            .collect::<BTreeMap<_, _>>(),
        histories
            .iter()
            .map(|(i, h)| (i.clone(), h.2))
            .collect::<BTreeMap<_, _>>(),
        lines_with(&informer_log, "watch") + lines_with(&informer_log, "list"),
        informer_log.display(),
        kube_rs.lists,
        kube_rs.errors,
    );
    assert!(
        disruptions.cuts >= 1 && disruptions.stalls >= 1 && disruptions.restarts >= 1,
        "every disruption happened: {disruptions:?}"
    );
    assert!(
        written.writes > 100,
        "the writer kept writing: {}",
        written.writes
    );
    assert_eq!(
        written.objects, objects,
        "the writer's objects are the provider's"
    );
    for informer in ["client-go", "metadata"] {
        assert_eq!(stores.get(informer), Some(&objects), "{informer}'s store");
        let told = histories
            .get(informer)
            .map(|h| h.0.clone())
            .unwrap_or_default();
        assert_eq!(
            first_difference(informer, &told, &written, &disruptions.restarted),
            None,
            "{informer} was told every change once"
        );
    }
    assert_eq!(kube_rs.store, objects, "kube-rs's store");
    assert_eq!(
        first_difference(
            "kube-rs",
            &kube_rs.history,
            &written,
            &disruptions.restarted
        ),
        None,
        "kube-rs was told every change once"
    );
    drop((kube_rs, written));

    app.kubectl(&["delete", "namespace", &namespace, "--wait=false"]);
    bind("unbind", &["soak"]);
}
