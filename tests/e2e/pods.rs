//! bindery as pods on a real node: clusters of this test's own (in
//! `target/e2e-pods-run`) whose app cluster has a node (`cluster.sh --node
//! app`: containerd, kubelet, kube-proxy, kube-scheduler). The image that
//! `hack/image` builds from this build's bindery binary is imported into the
//! node's containerd; the chart installs the provider-side access into the
//! provider (`rbac.providerOnly`) and bindery into the app cluster's
//! `kube-bind` (`helm install`), as deploy/chart/bindery/README.md says.
//! `bindery bind --in-cluster` (reaching `/bind` through a port-forward to
//! the chart's Service) makes the consumer's ClusterIP Service, and the app
//! cluster's aggregator reaches the pods through it: `kubectl get` of the
//! bound resource is served by a pod; the example provider controller
//! reconciles through the workspace the pods serve, and their claim
//! controller copies its credentials Secret down (so serving, the
//! controllers and claims all hold with exactly the chart's provider role);
//! a rolling restart of the Deployment under a running watch gives the
//! client no error.
//!
//! How the pods reach the clusters, which listen on the node's address
//! 10.88.0.1 in such a run: the provider through a name its serving
//! certificate carries (`kubernetes`, mapped to 10.88.0.1 by the pods'
//! hostAliases); the app cluster through its `kubernetes` Service
//! (https://10.0.0.1), which `bind` records when it runs with a kubeconfig
//! of that address (the machine reaches it through kube-proxy too).

use crate::chart::{chart_dir, helm};
use crate::fixture::{Cluster, cluster_of, cluster_script, kubectl_path, repo_root};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The clusters of this test, and where the node's containerd listens.
struct NodeRun {
    dir: PathBuf,
    provider: Cluster,
    app: Cluster,
    containerd: String,
    node_ip: String,
}

fn node_run() -> NodeRun {
    let dir = repo_root().join("target/e2e-pods-run");
    let output = cluster_script("up", &dir)
        .arg("--owner-pid")
        .arg(std::process::id().to_string())
        .args(["--cluster", "provider", "--cluster", "app", "--node", "app"])
        .stderr(Stdio::inherit())
        .output()
        .expect("cluster.sh runs");
    assert!(
        output.status.success(),
        "cluster.sh up --node app failed ({}); its log tail is above",
        output.status
    );
    let env = String::from_utf8_lossy(&output.stdout).to_string();
    let value = |key: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("cluster.sh printed no {key}: {env}"))
            .to_string()
    };
    NodeRun {
        provider: cluster_of(&env, "provider", "PROVIDER").expect("provider"),
        app: cluster_of(&env, "app", "APP").expect("app"),
        containerd: value("NODE_CONTAINERD_ADDRESS"),
        node_ip: value("NODE_IP"),
        dir,
    }
}

fn run(what: &str, command: &mut Command) -> String {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).to_string()
}

/// `hack/image` of this build's bindery, imported into the node's containerd.
fn image(node: &NodeRun) -> (String, String) {
    let archive = node.dir.join("bindery.oci.tar");
    let reference = run(
        "hack/image",
        Command::new(repo_root().join("hack/image"))
            .args(["--binary", env!("CARGO_BIN_EXE_bindery"), "--out"])
            .arg(&archive),
    );
    let reference = reference.lines().last().unwrap_or("").trim().to_string();
    let (repository, tag) = reference
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("hack/image printed no reference: {reference}"));
    run(
        "ctr images import",
        Command::new("ctr")
            .args([
                "--address",
                &node.containerd,
                "-n",
                "k8s.io",
                "images",
                "import",
            ])
            .arg(&archive),
    );
    (repository.to_string(), tag.to_string())
}

fn helm_in(cluster: &Cluster, args: &[&str]) -> String {
    run(
        &format!("helm {}", args.join(" ")),
        Command::new(helm())
            .arg("--kubeconfig")
            .arg(&cluster.kubeconfig)
            .args(args),
    )
}

/// The port of a cluster's server URL.
fn port_of(server: &str) -> &str {
    server.rsplit_once(':').map(|(_, p)| p).unwrap_or("443")
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// What the pods did, for a failure message.
fn pods_report(app: &Cluster) -> String {
    let describe = app.kubectl_output(&["-n", "kube-bind", "describe", "pods"], None);
    let logs = app.kubectl_output(
        &[
            "-n",
            "kube-bind",
            "logs",
            "-l",
            "app.kubernetes.io/name=bindery-server",
            "--tail=40",
            "--prefix",
        ],
        None,
    );
    format!(
        "{}\n{}{}",
        String::from_utf8_lossy(&describe.stdout),
        String::from_utf8_lossy(&logs.stdout),
        String::from_utf8_lossy(&logs.stderr)
    )
}

/// A kubeconfig file: `server`, the CA at `ca`, and a token or the client
/// certificate of `admin_of`.
pub(crate) fn write_kubeconfig(path: &Path, server: &str, ca: &Path, user: serde_json::Value) {
    let ca = std::fs::read(ca).expect("the cluster's CA");
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority-data": base64(&ca)}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    });
    std::fs::write(path, serde_json::to_string(&kubeconfig).unwrap()).unwrap();
}

/// `kubectl port-forward` to `target` (the chart's Service, a pod) in
/// `kube-bind`; the local port, and the process (killed on drop).
struct PortForward(std::process::Child, u16);

impl Drop for PortForward {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn port_forward(app: &Cluster, target: &str, port: &str) -> PortForward {
    let mut child = Command::new(kubectl_path())
        .arg("--kubeconfig")
        .arg(&app.kubeconfig)
        .args([
            "-n",
            "kube-bind",
            "port-forward",
            target,
            &format!(":{port}"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("kubectl port-forward runs");
    let mut line = String::new();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdout
        .read_line(&mut line)
        .expect("port-forward prints its port");
    // It prints a line for every connection: keep reading, or it dies of
    // a broken pipe.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    // "Forwarding from 127.0.0.1:40123 -> 8443"
    let port = line
        .split_whitespace()
        .nth(2)
        .and_then(|a| a.rsplit_once(':'))
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("kubectl port-forward said: {line:?}"));
    PortForward(child, port)
}

pub(crate) fn wait_until(what: &str, seconds: u64, mut done: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        match done() {
            Ok(()) => return,
            Err(last) if Instant::now() > deadline => {
                panic!("{what} not within {seconds}s; last: {last}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

#[test]
fn bindery_runs_as_pods_and_serves_through_the_aggregator() {
    let forwarding = std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").unwrap();
    let node = node_run();
    let (provider, app) = (&node.provider, &node.app);
    let scratch = node.dir.join("pods-test");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let (repository, tag) = image(&node);

    // The provider: kube-bind's CRDs, the example API, its template, a
    // binder; bindery's own access from the chart (rbac.providerOnly).
    let deploy = repo_root().join("deploy");
    let file = |p: &str| deploy.join(p).to_string_lossy().to_string();
    provider.kubectl(&["apply", "-f", &file("crds")]);
    provider.kubectl(&[
        "apply",
        "-f",
        &file("examples/postgresql-crd.yaml"),
        "-f",
        &file("examples/servicebindings-crd.yaml"),
    ]);
    provider.kubectl_wait(&[
        "--for=condition=Established",
        "--timeout=60s",
        "-f",
        &file("crds"),
        "-f",
        &file("examples/postgresql-crd.yaml"),
    ]);
    provider.kubectl(&["apply", "-f", &file("examples/templates.yaml")]);
    provider.kubectl(&["apply", "-f", &file("examples/binder.yaml")]);
    provider.kubectl(&["create", "namespace", "bindery-system"]);
    provider.kubectl(&[
        "-n",
        "bindery-system",
        "create",
        "serviceaccount",
        "scraper",
    ]);
    let chart = chart_dir().to_string_lossy().to_string();
    helm_in(
        provider,
        &[
            "install",
            "bindery",
            &chart,
            "-n",
            "bindery-system",
            "--set",
            "rbac.providerOnly=true",
            "--set-json",
            crate::chart::EXPORTED_RESOURCES,
            "--set",
            "rbac.metricsReaders[0].kind=ServiceAccount",
            "--set",
            "rbac.metricsReaders[0].name=scraper",
            "--set",
            "rbac.metricsReaders[0].namespace=bindery-system",
        ],
    );
    let provider_token = provider.kubectl(&[
        "-n",
        "bindery-system",
        "create",
        "token",
        "bindery",
        "--duration=2h",
    ]);

    // The app cluster: the provider kubeconfig as a Secret, then the chart.
    let pods_provider = scratch.join("provider.kubeconfig");
    write_kubeconfig(
        &pods_provider,
        &format!("https://kubernetes:{}", port_of(&provider.server)),
        &provider.pki.ca(),
        serde_json::json!({"token": provider_token.trim()}),
    );
    app.kubectl(&["create", "namespace", "kube-bind"]);
    app.kubectl(&[
        "-n",
        "kube-bind",
        "create",
        "secret",
        "generic",
        "bindery-provider",
        &format!("--from-file=kubeconfig={}", pods_provider.display()),
    ]);
    let values = scratch.join("values.yaml");
    std::fs::write(
        &values,
        format!(
            "provider: {{kubeconfigSecret: bindery-provider}}\n\
             image: {{repository: {repository}, tag: {tag}, pullPolicy: Never}}\n\
             hostAliases: [{{ip: {ip}, hostnames: [kubernetes]}}]\n\
             env: [{{name: RUST_LOG, value: 'warn,bindery=debug'}}]\n\
             terminationGracePeriodSeconds: 30\n\
             goawayChance: 0.02\n",
            ip = node.node_ip
        ),
    )
    .unwrap();
    let installed = Command::new(helm())
        .arg("--kubeconfig")
        .arg(&app.kubeconfig)
        .args(["install", "bindery", &chart, "-n", "kube-bind", "-f"])
        .arg(&values)
        .args(["--wait", "--timeout", "240s"])
        .output()
        .expect("helm runs");
    assert!(
        installed.status.success(),
        "helm install in the app cluster failed: {}\n{}",
        String::from_utf8_lossy(&installed.stderr),
        pods_report(app)
    );

    // Two pods of the image, running on the node, with pod-network addresses.
    let pods = app.kubectl(&[
        "-n",
        "kube-bind",
        "get",
        "pods",
        "-l",
        "app.kubernetes.io/name=bindery-server",
        "-o",
        "jsonpath={range .items[*]}{.spec.nodeName} {.status.podIP} {.status.containerStatuses[0].ready} {.spec.containers[0].image} {.metadata.name}{\"\\n\"}{end}",
    ]);
    let pods: Vec<&str> = pods.lines().collect();
    assert_eq!(pods.len(), 2, "{pods:?}");
    for pod in &pods {
        let fields: Vec<&str> = pod.split(' ').collect();
        assert_eq!(fields[0], "bindery-node", "{pod}");
        assert!(fields[1].starts_with("10.88.0."), "{pod}");
        assert_eq!(fields[2], "true", "{pod}");
        assert_eq!(fields[3], format!("{repository}:{tag}"), "{pod}");
    }
    // One of them leads the provider-side controllers, by the Lease in the
    // provider that the chart's RBAC lets it hold.
    let names: Vec<&str> = pods.iter().filter_map(|p| p.split(' ').nth(4)).collect();
    wait_until("a pod holds the controllers' Lease", 60, || {
        let holder = provider.kubectl_output(
            &[
                "-n",
                "kube-system",
                "get",
                "lease",
                "bindery-controllers",
                "-o",
                "jsonpath={.spec.holderIdentity}",
            ],
            None,
        );
        let holder = String::from_utf8_lossy(&holder.stdout).to_string();
        if names.contains(&holder.trim()) {
            Ok(())
        } else {
            Err(format!("holder {holder:?}, pods {names:?}"))
        }
    });

    // The node routes nothing off the machine for its pods.
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").unwrap(),
        forwarding,
        "the node changed ip_forward"
    );

    // Bind, reaching /bind through the chart's Service, with a kubeconfig
    // of the app cluster that the pods can use too.
    let serving_ca = scratch.join("serving-ca.crt");
    let ca = app.kubectl(&[
        "-n",
        "kube-bind",
        "get",
        "secret",
        "bindery-pki",
        "-o",
        "jsonpath={.data.serving-ca\\.crt}",
    ]);
    use base64::Engine;
    std::fs::write(
        &serving_ca,
        base64::engine::general_purpose::STANDARD
            .decode(ca.trim())
            .unwrap(),
    )
    .unwrap();
    let through_service = scratch.join("app-via-service.kubeconfig");
    let (cert, key) = app.pki.admin();
    write_kubeconfig(
        &through_service,
        "https://10.0.0.1:443",
        &app.pki.ca(),
        serde_json::json!({"client-certificate": cert, "client-key": key}),
    );
    let binder_token = provider.kubectl(&["-n", "bindery-binders", "create", "token", "binder"]);
    let forward = port_forward(app, "svc/bindery", "443");
    run(
        "bindery bind --in-cluster",
        Command::new(env!("CARGO_BIN_EXE_bindery"))
            .arg("bind")
            .arg(format!("https://localhost:{}", forward.1))
            .args(["--in-cluster", "--template", "postgresql"])
            .arg("--certificate-authority")
            .arg(&serving_ca)
            .arg("--kubeconfig")
            .arg(&through_service)
            .env("BINDERY_TOKEN", binder_token.trim()),
    );
    drop(forward);

    // The consumer's Service selects the pods, and the APIService is
    // Available through it.
    let cluster_namespace =
        bindery::controllers::naming::cluster_namespace("kube-bind-", app.kube_system_uid().trim());
    let consumer = cluster_namespace.trim_start_matches("kube-bind-");
    let service = format!("bindery-{consumer}");
    let service_type = app.kubectl(&[
        "-n",
        "kube-bind",
        "get",
        "service",
        &service,
        "-o",
        "jsonpath={.spec.type}",
    ]);
    assert_eq!(service_type, "ClusterIP");
    wait_until("the consumer's Service leads to the two pods", 60, || {
        let endpoints = app.kubectl(&[
            "-n",
            "kube-bind",
            "get",
            "endpointslices",
            "-l",
            &format!("kubernetes.io/service-name={service}"),
            "-o",
            "jsonpath={.items[*].endpoints[*].addresses[*]}",
        ]);
        let addresses: Vec<&str> = endpoints.split_whitespace().collect();
        if addresses.len() == 2 && addresses.iter().all(|a| a.starts_with("10.88.0.")) {
            Ok(())
        } else {
            Err(endpoints)
        }
    });
    wait_until("APIService v1.db.example.com Available", 90, || {
        let status = app.kubectl(&[
            "get",
            "apiservice",
            "v1.db.example.com",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Available\")].status} {.status.conditions[?(@.type==\"Available\")].message}",
        ]);
        if status.starts_with("True") {
            Ok(())
        } else {
            Err(status)
        }
    });

    // kubectl against the app cluster, served by the pods.
    app.kubectl_with_stdin(
        &["-n", "default", "apply", "-f", "-"],
        Some(
            "apiVersion: db.example.com/v1\nkind: PostgreSQLInstance\nmetadata: {name: orders}\nspec: {plan: small}\n",
        ),
    );
    let listed = app.kubectl(&["get", "postgresqlinstances", "-A"]);
    assert!(listed.contains("orders"), "{listed}");
    provider.kubectl(&[
        "-n",
        &format!("{cluster_namespace}-default"),
        "get",
        "postgresqlinstances",
        "orders",
    ]);
    let logs = app.kubectl(&[
        "-n",
        "kube-bind",
        "logs",
        "-l",
        "app.kubernetes.io/name=bindery-server",
        "--tail=-1",
    ]);
    assert!(
        logs.contains("postgresqlinstances"),
        "the pods logged the requests they served:\n{logs}"
    );

    a_provider_controller_reconciles_through_the_pods(&node, &serving_ca, &cluster_namespace);
    secrets_only_where_the_pods_serve(provider, &cluster_namespace);
    scrape_metrics(app, provider, &serving_ca);
    crate::rolling_restart::under_a_watch(app, &node.dir);
    crate::replicas::scaled_and_killed_under_watches(
        app,
        provider,
        &format!("{cluster_namespace}-default"),
        &node.containerd,
        &serving_ca,
    );
    down_leaves_nothing(&node);
}

/// The example provider controller (`examples/postgresql_controller.rs`),
/// reaching the export's virtual workspace through the chart's Service,
/// drives the instance `orders` to Ready: the pods serve the workspace
/// with nothing but the chart's provider role, and their claim controller
/// copies the credentials Secret the controller writes in the provider down
/// into the app cluster, as the template's claim asks.
fn a_provider_controller_reconciles_through_the_pods(
    node: &NodeRun,
    serving_ca: &Path,
    cluster_namespace: &str,
) {
    let (provider, app) = (&node.provider, &node.app);
    let published = provider.kubectl(&[
        "-n",
        cluster_namespace,
        "get",
        "apiserviceexport",
        "postgresql",
        "-o",
        "jsonpath={.status.virtualWorkspaceURL}",
    ]);
    let path = published
        .find("/services/")
        .map(|at| published[at..].to_string())
        .unwrap_or_else(|| panic!("the export's workspace URL: {published:?}"));
    let (_, token) = crate::workspace::controller_token_in(
        provider,
        "postgresql",
        &["get", "list", "watch", "patch"],
        None,
    );
    let forward = port_forward(app, "svc/bindery", "443");
    let mut controller = crate::workspace::run_example_controller(
        &crate::workspace::example_controller(),
        &format!("https://localhost:{}{path}", forward.1),
        serving_ca,
        &provider.kubeconfig,
        &token,
    );
    wait_until(
        "orders Ready, with its credentials Secret copied into the app cluster",
        90,
        || {
            let phase = app.kubectl(&[
                "-n",
                "default",
                "get",
                "postgresqlinstances",
                "orders",
                "-o",
                "jsonpath={.status.phase}",
            ]);
            let secret = app.kubectl_output(
                &["-n", "default", "get", "secret", "orders-credentials"],
                None,
            );
            if phase == "Ready" && secret.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "phase {phase:?}; the Secret: {}",
                    String::from_utf8_lossy(&secret.stderr).trim()
                ))
            }
        },
    );
    controller.stop();
    drop(forward);
}

/// What the pods reached Secrets through, once the claim was copied down:
/// bindery's own RoleBinding of the chart's namespace data role, in the
/// consumer's cluster namespace and provider namespace alone, and the
/// claim granted to the consumer's account as a Role there, never in the
/// export's ClusterRole (which kube-apiserver would refuse bindery, holding
/// no Secrets cluster-wide).
fn secrets_only_where_the_pods_serve(provider: &Cluster, cluster_namespace: &str) {
    let provider_namespace = format!("{cluster_namespace}-default");
    let own = provider.kubectl(&[
        "get",
        "rolebindings",
        "-A",
        "--field-selector",
        "metadata.name=bindery:namespace-data",
        "-o",
        "jsonpath={range .items[*]}{.metadata.namespace} {.roleRef.name} {.subjects[0].name}{\"\\n\"}{end}",
    ]);
    let mut own: Vec<&str> = own.lines().collect();
    own.sort();
    let mut wanted = vec![
        format!("{cluster_namespace} bindery:namespace-data bindery"),
        format!("{provider_namespace} bindery:namespace-data bindery"),
    ];
    wanted.sort();
    assert_eq!(own, wanted, "bindery's own access, namespace by namespace");
    let claims = provider.kubectl(&[
        "-n",
        &provider_namespace,
        "get",
        "role",
        "bindery:export:postgresql:claims",
        "-o",
        "jsonpath={.rules[*].resources}",
    ]);
    assert!(claims.contains("secrets"), "the claims Role: {claims}");
    let exported = provider.kubectl(&[
        "get",
        "clusterrole",
        &bindery::controllers::naming::export_cluster_role(cluster_namespace, "postgresql"),
        "-o",
        "jsonpath={.rules[*].resources}",
    ]);
    assert!(
        !exported.contains("secrets"),
        "the export's ClusterRole: {exported}"
    );
    let account = "system:serviceaccount:bindery-system:bindery";
    for namespace in ["kube-system", "default", "bindery-system"] {
        let may = provider.kubectl_output(
            &[
                "auth", "can-i", "get", "secrets", "-n", namespace, "--as", account,
            ],
            None,
        );
        assert_eq!(
            String::from_utf8_lossy(&may.stdout).trim(),
            "no",
            "bindery reads the Secrets of {namespace}"
        );
    }
}

/// /metrics of each pod: a provider ServiceAccount that the chart's
/// `rbac.metricsReaders` names reads it, and the pods together counted the
/// requests they served through the aggregator; no credentials is a 401.
fn scrape_metrics(app: &Cluster, provider: &Cluster, serving_ca: &Path) {
    let counted = aggregated_requests(app, provider, serving_ca);
    assert!(
        counted.values().any(|n| n.requests > 0.0),
        "no pod counted an aggregated request for postgresqlinstances: {counted:?}"
    );
}

/// What a server pod served through the aggregator, of postgresqlinstances.
#[derive(Debug)]
pub(crate) struct Served {
    /// Requests finished.
    pub(crate) requests: f64,
    /// Watches open now.
    pub(crate) watching: f64,
}

/// What each server pod served, read from its /metrics as the chart's
/// metrics reader (and checked to be a 401 without credentials).
pub(crate) fn aggregated_requests(
    app: &Cluster,
    provider: &Cluster,
    serving_ca: &Path,
) -> std::collections::BTreeMap<String, Served> {
    let token = provider.kubectl(&["-n", "bindery-system", "create", "token", "scraper"]);
    let pods = app.kubectl(&[
        "-n",
        "kube-bind",
        "get",
        "pods",
        "-l",
        "app.kubernetes.io/name=bindery-server",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ]);
    let mut counted = std::collections::BTreeMap::new();
    for pod in pods.split_whitespace() {
        let forward = port_forward(app, &format!("pod/{pod}"), "8443");
        let url = format!("https://localhost:{}/metrics", forward.1);
        let scrape = |token: Option<&str>| {
            let mut curl = Command::new("curl");
            curl.arg("--cacert").arg(serving_ca).arg(&url);
            if let Some(token) = token {
                curl.args(["-H", &format!("Authorization: Bearer {token}")]);
            }
            crate::fixture::curl_json(curl)
        };
        let (status, body) = scrape(Some(token.trim()));
        let text = body.as_str().unwrap_or_default().to_string();
        assert_eq!(status, 200, "{pod}: {text}");
        let sum = |metric: &str| -> f64 {
            text.lines()
                .filter(|l| {
                    l.starts_with(&format!("{metric}{{"))
                        && l.contains("endpoint=\"aggregated\"")
                        && l.contains("postgresqlinstances")
                })
                .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
                .sum()
        };
        let served = Served {
            requests: sum("apiserver_request_total"),
            watching: sum("apiserver_longrunning_requests"),
        };
        counted.insert(pod.to_string(), served);
        let (status, _) = scrape(None);
        assert_eq!(status, 401, "{pod} without credentials");
    }
    counted
}

/// `cluster.sh down` stops the node and takes along what it made outside
/// its run dir: no process, mount or shim of the run is left, nor the
/// bridge, the iptables chains of kube-proxy and the kubelet, the node's
/// cgroups or the machine's record of the node.
fn down_leaves_nothing(node: &NodeRun) {
    let down = cluster_script("down", &node.dir)
        .output()
        .expect("cluster.sh runs");
    assert!(
        down.status.success(),
        "{}",
        String::from_utf8_lossy(&down.stderr)
    );
    let dir = node.dir.to_string_lossy().to_string();
    let processes = run("pgrep", Command::new("pgrep").args(["-af", "."]));
    let left: Vec<&str> = processes.lines().filter(|l| l.contains(&dir)).collect();
    assert!(left.is_empty(), "processes left: {left:?}");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&dir), "mounts left below {dir}");
    let links = run("ip link", Command::new("ip").args(["-br", "link"]));
    assert!(!links.contains("bindery0"), "{links}");
    for table in ["filter", "nat", "mangle"] {
        let rules = run(
            "iptables",
            Command::new("iptables").args(["-t", table, "-S"]),
        );
        assert!(!rules.contains("KUBE-"), "{table}: {rules}");
    }
    assert!(!Path::new("/sys/fs/cgroup/pids/bindery-node").exists());
    assert!(!Path::new("/run/bindery-node.owner").exists());
}
