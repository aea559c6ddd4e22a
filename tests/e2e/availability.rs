//! Availability while the provider cannot be reached. A second `bindery
//! serve` reaches the real provider through a TCP relay that the test cuts
//! (so the shared provider stays up for every other test). With the relay
//! cut, discovery still answers from the last known BoundSchemas, in well
//! under 5 s, and resource calls get a clear 503 Status. With the relay back,
//! everything is served again.
//!
//! Through the app cluster's aggregator, bound to that second bindery: the
//! APIService stays Available across the aggregator's own availability
//! checks, kubectl's discovery works, resource calls fail with the 503, and
//! a namespace deleted during the outage finishes once the provider is back.
//!
//! The watch cache through an outage and through a restart of the provider's
//! kube-apiserver: a second kube-apiserver of the provider (same etcd, own
//! port) is restarted under a second bindery while a client watches through
//! it, and the watch sees every change once, in order, without ending.
//!
//! Replicas: a list's pages begun on one bindery go on on another serving
//! the same provider, since both seal continue tokens with the key kept in
//! the provider.

use crate::bind::app_cluster_binds;
use crate::binder::{binder_token, bindery_cli_at, succeeded};
use crate::bindery::{ServingOnly, bindery, serving_only};
use crate::controllers::{install_examples, request};
use crate::fixture::{clusters, unique_name};
use bindery::controllers::naming::cluster_namespace;
use serde_json::json;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A TCP relay to `target` that refuses every connection while cut, and
/// drops the ones it holds when cut.
struct Relay {
    port: u16,
    cut: Arc<AtomicBool>,
    generation: Arc<std::sync::atomic::AtomicU64>,
}

impl Relay {
    fn start(target: String) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let generation = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (cut_flag, generations) = (cut.clone(), generation.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                listener.set_nonblocking(true).unwrap();
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((mut client, _)) = listener.accept().await else {
                        continue;
                    };
                    if cut_flag.load(Ordering::SeqCst) {
                        drop(client);
                        continue;
                    }
                    let target = target.clone();
                    let born = generations.load(Ordering::SeqCst);
                    let generations = generations.clone();
                    tokio::spawn(async move {
                        let Ok(mut upstream) = tokio::net::TcpStream::connect(&target).await else {
                            return;
                        };
                        let copy = tokio::io::copy_bidirectional(&mut client, &mut upstream);
                        let severed = async {
                            while generations.load(Ordering::SeqCst) == born {
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                        };
                        tokio::select! {
                            _ = copy => {}
                            () = severed => {}
                        }
                    });
                }
            });
        });
        Self {
            port,
            cut,
            generation,
        }
    }

    fn set_cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
        if cut {
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A `bindery serve` (serving only) whose provider is behind `relay`.
fn second_bindery(relay: &Relay) -> ServingOnly {
    bindery_reaching(&format!("https://127.0.0.1:{}", relay.port))
}

/// A `bindery serve` (serving only) that reaches the provider at `server`.
pub(crate) fn bindery_reaching(server: &str) -> ServingOnly {
    serving_only(&kubeconfig_reaching(server), &[])
}

/// [`bindery_reaching`], with `args` after `serve`'s own.
pub(crate) fn bindery_reaching_with(server: &str, args: &[&str]) -> ServingOnly {
    serving_only(&kubeconfig_reaching(server), args)
}

/// [`bindery_reaching`], logging what bindery logs by default to `log`.
pub(crate) fn bindery_reaching_logged(server: &str, log: &std::path::Path) -> ServingOnly {
    crate::bindery::serving_only_logged(&kubeconfig_reaching(server), log)
}

/// The provider's kubeconfig with its server changed to `server`.
fn kubeconfig_reaching(server: &str) -> std::path::PathBuf {
    let provider = &clusters().provider;
    let kubeconfig = std::fs::read_to_string(&provider.kubeconfig).unwrap();
    let relayed = kubeconfig.replace(&provider.server, server);
    assert!(
        kubeconfig.contains(&provider.server),
        "the provider's server is in its kubeconfig"
    );
    let path = crate::fixture::scratch_dir().join(format!(
        "bindery-at-{}.kubeconfig",
        server.rsplit(':').next().unwrap_or_default()
    ));
    std::fs::write(&path, relayed).unwrap();
    path
}

/// A new consumer of the postgresql template (requested as `<prefix>-…`).
pub(crate) fn postgresql_consumer(prefix: &str) -> crate::bindery::Consumer {
    install_examples();
    let identity = unique_name(&format!("{prefix}-cluster"));
    let status = request(
        &unique_name(prefix),
        &identity,
        json!({"templateRef": {"name": "postgresql"}}),
    );
    assert_eq!(status["phase"], "Succeeded", "{status}");
    let namespace = cluster_namespace("kube-bind-", &identity);
    bindery().endpoint(namespace.strip_prefix("kube-bind-").unwrap())
}

/// A new consumer of the postgresql template (requested as `<prefix>-…`),
/// and a second bindery that reaches the provider through a relay.
fn relayed_consumer(prefix: &str) -> (crate::bindery::Consumer, Relay, ServingOnly) {
    let consumer = postgresql_consumer(prefix);
    let relay = Relay::start(
        clusters()
            .provider
            .server
            .trim_start_matches("https://")
            .to_string(),
    );
    let second = second_bindery(&relay);
    (consumer, relay, second)
}

/// GET `path` with the consumer certificate; status, body and how long it took.
fn get(consumer: &crate::bindery::Consumer, url: &str, path: &str) -> (u16, String, Duration) {
    let start = Instant::now();
    let output = Command::new("curl")
        .args(["-sk", "-m", "30", "-w", "\n%{http_code}", "--cert"])
        .arg(&consumer.cert)
        .arg("--key")
        .arg(&consumer.key)
        .arg(format!("{url}/clusters/{}{path}", consumer.id))
        .output()
        .unwrap();
    let took = start.elapsed();
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.parse().unwrap_or(0), body.to_string(), took)
}

#[test]
fn discovery_answers_and_resource_calls_get_503_while_the_provider_is_unreachable() {
    let (consumer, relay, second) = relayed_consumer("availability");
    let list = "/apis/db.example.com/v1/namespaces/default/postgresqlinstances";
    let discovery = "/apis/db.example.com/v1";
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(&consumer, &second.url, list).0 != 200 {
        assert!(Instant::now() < deadline, "never served through the relay");
        std::thread::sleep(Duration::from_millis(300));
    }

    relay.set_cut(true);
    for path in [discovery, "/apis", "/apis/db.example.com"] {
        let (code, body, took) = get(&consumer, &second.url, path);
        assert_eq!(code, 200, "{path} while the provider is away: {body}");
        assert!(
            took < Duration::from_secs(2),
            "{path} took {took:?} while the provider is away"
        );
    }
    let (_, body, _) = get(&consumer, &second.url, discovery);
    assert!(body.contains("postgresqlinstances"), "{body}");
    let (code, body, took) = get(&consumer, &second.url, list);
    assert_eq!(code, 503, "{body}");
    assert!(took < Duration::from_secs(10), "the 503 took {took:?}");
    let status: serde_json::Value = serde_json::from_str(&body).expect(&body);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "ServiceUnavailable");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("the provider cannot be reached"),
        "{status}"
    );

    relay.set_cut(false);
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(&consumer, &second.url, list).0 != 200 {
        assert!(
            Instant::now() < deadline,
            "not served again after the provider came back"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// How long the aggregator's availability controller takes to check every
/// APIService again (its informer resyncs every 30 s), with a margin.
const AGGREGATOR_RECHECK: Duration = Duration::from_secs(40);

#[test]
fn the_app_cluster_keeps_the_bound_api_available_while_the_provider_is_unreachable() {
    install_examples();
    let _guard = app_cluster_binds();
    let (app, provider) = (&clusters().app, &clusters().provider);
    let relay = Relay::start(provider.server.trim_start_matches("https://").to_string());
    let second = second_bindery(&relay);
    let (_, token) = binder_token(true);
    succeeded(
        "bind through the relayed bindery",
        &bindery_cli_at(&second.url, "bind", &token, &["--template", "postgresql"]),
    );
    let port = app.kubectl(&[
        "get",
        "apiservice",
        "v1.db.example.com",
        "-o",
        "jsonpath={.spec.service.port}",
    ]);
    assert!(
        second.url.ends_with(&format!(":{port}")),
        "the APIService points at the relayed bindery ({}): port {port}",
        second.url
    );
    let away = unique_name("away");
    app.kubectl(&["create", "namespace", &away]);
    let instance = "apiVersion: db.example.com/v1\nkind: PostgreSQLInstance\nmetadata: {name: kept}\nspec: {plan: small}\n";
    let deadline = Instant::now() + Duration::from_secs(60);
    while !app
        .kubectl_output(&["-n", &away, "apply", "-f", "-"], Some(instance))
        .status
        .success()
    {
        assert!(
            Instant::now() < deadline,
            "never created through the aggregator"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    relay.set_cut(true);
    let available = || {
        app.kubectl(&[
            "get",
            "apiservice",
            "v1.db.example.com",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Available\")].status} {.status.conditions[?(@.type==\"Available\")].reason}",
        ])
    };
    let cut_at = Instant::now();
    while cut_at.elapsed() < AGGREGATOR_RECHECK {
        let condition = available();
        assert!(
            condition.starts_with("True "),
            "the APIService stays Available {:?} into the outage: {condition}",
            cut_at.elapsed()
        );
        let start = Instant::now();
        let discovery = app.kubectl_output(&["get", "--raw", "/apis/db.example.com/v1"], None);
        let took = start.elapsed();
        assert!(
            discovery.status.success()
                && String::from_utf8_lossy(&discovery.stdout).contains("postgresqlinstances"),
            "discovery through the aggregator during the outage: {}",
            String::from_utf8_lossy(&discovery.stderr)
        );
        assert!(took < Duration::from_secs(5), "discovery took {took:?}");
        std::thread::sleep(Duration::from_secs(2));
    }
    let resources = app.kubectl(&["api-resources", "--api-group=db.example.com"]);
    assert!(resources.contains("postgresqlinstances"), "{resources}");
    let listed = app.kubectl_output(&["-n", &away, "get", "postgresqlinstances"], None);
    let stderr = String::from_utf8_lossy(&listed.stderr);
    assert!(
        !listed.status.success()
            && stderr.contains("ServiceUnavailable")
            && stderr.contains("the provider cannot be reached"),
        "a resource call during the outage: {stderr}"
    );
    app.kubectl(&["delete", "namespace", &away, "--wait=false"]);
    std::thread::sleep(Duration::from_secs(3));

    relay.set_cut(false);
    let deadline = Instant::now() + Duration::from_secs(120);
    while app
        .kubectl_output(&["get", "namespace", &away], None)
        .status
        .success()
    {
        assert!(
            Instant::now() < deadline,
            "namespace {away} never finished deleting after the provider came back: {}",
            app.kubectl(&["get", "namespace", &away, "-o", "jsonpath={.status}"])
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let provider_namespace = format!("{}-{away}", crate::bind::app_cluster_namespace());
    let left = provider.kubectl(&[
        "get",
        "postgresqlinstances",
        "-A",
        "-o",
        "jsonpath={range .items[*]}{.metadata.namespace}{\"\\n\"}{end}",
    ]);
    assert!(
        !left.lines().any(|ns| ns == provider_namespace),
        "the namespace's bound objects went with it: {left}"
    );
    succeeded(
        "unbind",
        &bindery_cli_at(&second.url, "unbind", &token, &["postgresql"]),
    );
}

#[test]
fn the_watch_cache_serves_through_an_outage_and_catches_up_after_it() {
    let (consumer, relay, second) = relayed_consumer("cache-outage");
    // Writes go through the shared bindery (straight to the provider); the
    // second one, behind the relay, answers any-version lists from its cache.
    let write = |args: &[&str], stdin: Option<&str>| {
        crate::workspace::consumer_write(&consumer, args, stdin)
    };
    let instance = |name: &str| {
        format!(
            "apiVersion: db.example.com/v1\nkind: PostgreSQLInstance\nmetadata: {{name: {name}}}\nspec: {{plan: small}}\n"
        )
    };
    let any = "/apis/db.example.com/v1/namespaces/default/postgresqlinstances?resourceVersion=0";
    let listed = |body: &str| -> Vec<String> {
        let list: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        list["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let wait_for = |want: &[&str], why: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (code, body, _) = get(&consumer, &second.url, any);
            if code == 200 && listed(&body) == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{why}: the second bindery lists {code} {:?}",
                listed(&body)
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    write(&["apply", "-f", "-"], Some(&instance("before")));
    wait_for(&["before"], "before the outage");

    relay.set_cut(true);
    // The relay severs held connections within 50 ms.
    std::thread::sleep(Duration::from_millis(500));
    let consistent = any.trim_end_matches("?resourceVersion=0");
    let (code, body, _) = get(&consumer, &second.url, consistent);
    assert_eq!(code, 503, "the provider is cut off: {body}");
    // The outage: the cache still answers, with what it last saw.
    let (code, body, took) = get(&consumer, &second.url, any);
    assert_eq!(
        (code, listed(&body)),
        (200, vec!["before".to_string()]),
        "{body}"
    );
    assert!(
        took < Duration::from_secs(2),
        "the cached list took {took:?}"
    );
    write(&["apply", "-f", "-"], Some(&instance("during")));
    write(&["delete", "postgresqlinstance", "before"], None);
    std::thread::sleep(Duration::from_secs(3));

    relay.set_cut(false);
    wait_for(&["during"], "after the outage");
    write(&["delete", "postgresqlinstance", "during"], None);
}

/// A second kube-apiserver of the shared provider: the provider's own
/// command line (recorded by cluster.sh), on its own port, against the same
/// etcd. Restarting it disturbs no other test.
pub(crate) struct ProviderReplica {
    args: Vec<String>,
    port: u16,
    log: std::path::PathBuf,
    child: Option<Child>,
}

impl ProviderReplica {
    pub(crate) fn start() -> Self {
        let recorded = clusters()
            .provider
            .kubeconfig
            .parent()
            .expect("the kubeconfig is in the cluster's directory")
            .join("kube-apiserver.args");
        let recorded = std::fs::read(&recorded)
            .unwrap_or_else(|e| panic!("cluster.sh records {}: {e}", recorded.display()));
        let mut args: Vec<String> = recorded
            .split(|b| *b == 0)
            .filter(|arg| !arg.is_empty())
            .map(|arg| String::from_utf8_lossy(arg).to_string())
            .collect();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let at = args
            .iter()
            .position(|a| a == "--secure-port")
            .expect("the recorded command line names its port");
        args[at + 1] = port.to_string();
        let mut replica = Self {
            args,
            port,
            log: crate::fixture::scratch_dir().join(unique_name("provider-replica")),
            child: None,
        };
        replica.run();
        replica
    }

    pub(crate) fn server(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// Starts the process and waits until it is ready.
    pub(crate) fn run(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("a log file");
        let child = Command::new(&self.args[0])
            .args(&self.args[1..])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("kube-apiserver starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let ready = Command::new("curl")
                .args(["-sk", "-m", "2"])
                .arg(format!("{}/readyz", self.server()))
                .output()
                .is_ok_and(|o| o.stdout == b"ok");
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the provider replica never became ready; see {}",
                self.log.display()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Kills the process, as a crash would.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for ProviderReplica {
    fn drop(&mut self) {
        self.kill();
    }
}

#[test]
fn a_client_watch_through_a_provider_restart_sees_every_change_once() {
    let consumer = postgresql_consumer("restart");
    let mut replica = ProviderReplica::start();
    let second = bindery_reaching(&replica.server());
    let collection = "/apis/db.example.com/v1/namespaces/default/postgresqlinstances";
    let deadline = Instant::now() + Duration::from_secs(30);
    let version = loop {
        let (code, body, _) = get(
            &consumer,
            &second.url,
            &format!("{collection}?resourceVersion=0"),
        );
        if code == 200 {
            let list: serde_json::Value = serde_json::from_str(&body).unwrap();
            break list["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_string();
        }
        assert!(Instant::now() < deadline, "never served: {code} {body}");
        std::thread::sleep(Duration::from_millis(300));
    };
    let mut watch = crate::cache::ClientWatch::start(
        &consumer,
        &format!("{}/clusters/{}", second.url, consumer.id),
        &format!(
            "{collection}?watch=true&resourceVersion={version}&allowWatchBookmarks=true&timeoutSeconds=600"
        ),
    );
    // Writes go through the shared bindery, straight to the provider.
    let write = |args: &[&str], stdin: Option<&str>| {
        crate::workspace::consumer_write(&consumer, args, stdin)
    };
    let create = |name: &str| {
        write(
            &["create", "-f", "-"],
            Some(&format!(
                "apiVersion: db.example.com/v1\nkind: PostgreSQLInstance\nmetadata: {{name: {name}}}\nspec: {{plan: small}}\n"
            )),
        )
    };
    let seen = |kind: &'static str, name: &'static str| {
        move |events: &[(String, String, String)]| {
            events.iter().any(|(t, n, _)| t == kind && n == name)
        }
    };
    for name in ["a", "b", "c"] {
        create(name);
    }
    watch.wait_for(20, "c created", seen("ADDED", "c"));

    replica.kill();
    // While the provider bindery reaches is down: a change, a deletion and a
    // creation, which its watch cannot see as they happen.
    write(
        &[
            "patch",
            "postgresqlinstance",
            "a",
            "--type=merge",
            "-p",
            r#"{"spec":{"plan":"large"}}"#,
        ],
        None,
    );
    write(&["delete", "postgresqlinstance", "b"], None);
    create("d");
    std::thread::sleep(Duration::from_secs(2));
    replica.run();
    create("e");
    watch.wait_for(60, "e created after the restart", seen("ADDED", "e"));
    assert!(watch.is_open(), "the client's watch ended with the restart");

    let events: Vec<(String, String, String)> = watch
        .events()
        .into_iter()
        .filter(|(kind, _, _)| kind != "BOOKMARK")
        .collect();
    let mut told: Vec<(String, String)> = events
        .iter()
        .map(|(k, n, _)| (k.clone(), n.clone()))
        .collect();
    assert_eq!(told.len(), 7, "seven changes, each once: {events:?}");
    // The outage's three changes and the one after it come in
    // resourceVersion order: a deletion bindery did not see happen is told
    // at a version between the two lists that no listed object has, which
    // need not be where it happened. The first three came as they were made.
    told[3..].sort();
    let pair = |k: &str, n: &str| (k.to_string(), n.to_string());
    assert_eq!(
        told,
        [
            pair("ADDED", "a"),
            pair("ADDED", "b"),
            pair("ADDED", "c"),
            pair("ADDED", "d"),
            pair("ADDED", "e"),
            pair("DELETED", "b"),
            pair("MODIFIED", "a"),
        ],
        "every change once: {events:?}"
    );
    let versions: Vec<u64> = events.iter().map(|(_, _, v)| v.parse().unwrap()).collect();
    assert!(
        versions.windows(2).all(|w| w[0] < w[1]),
        "resourceVersions go up, event by event: {events:?}"
    );
    for name in ["a", "c", "d", "e"] {
        write(&["delete", "postgresqlinstance", name], None);
    }
}

#[test]
fn a_list_begun_on_one_replica_goes_on_on_another() {
    let consumer = postgresql_consumer("replicas");
    let instance = |name: &str| {
        format!(
            "apiVersion: db.example.com/v1\nkind: PostgreSQLInstance\nmetadata: {{name: {name}}}\nspec: {{plan: small}}\n"
        )
    };
    for name in ["a", "b", "c"] {
        crate::workspace::consumer_write(&consumer, &["create", "-f", "-"], Some(&instance(name)));
    }
    let replica = bindery_reaching(&clusters().provider.server);
    let names = |body: &str| -> (Vec<String>, String) {
        let list: serde_json::Value = serde_json::from_str(body).expect(body);
        let token = list["metadata"]["continue"].as_str().unwrap_or_default();
        (crate::cache::names(&list), token.to_string())
    };
    let collection = "/apis/db.example.com/v1/namespaces/default/postgresqlinstances";
    // Consistent (the provider's token) and versioned (the cache's token)
    // pages, each begun on the shared bindery and continued on the replica,
    // and the other way round.
    for first_query in [
        "limit=2",
        "limit=2&resourceVersion=1&resourceVersionMatch=NotOlderThan",
    ] {
        for (first, then) in [
            (&bindery().url, &replica.url),
            (&replica.url, &bindery().url),
        ] {
            let (code, body, _) = get(&consumer, first, &format!("{collection}?{first_query}"));
            assert_eq!(code, 200, "{body}");
            let (page, token) = names(&body);
            assert_eq!(page, ["a", "b"], "{first_query} on {first}");
            let (code, body, _) = get(
                &consumer,
                then,
                &format!("{collection}?limit=2&continue={token}"),
            );
            assert_eq!(code, 200, "the token of {first} on {then}: {body}");
            assert_eq!(names(&body), (vec!["c".to_string()], String::new()));
        }
    }
}
