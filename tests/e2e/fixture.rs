//! The one shared test fixture: starts the real provider and app clusters once
//! per test run (through `conformance/cluster/cluster.sh`) and hands tests
//! their kubeconfigs, kube-rs clients and a real `kubectl`.
//!
//! A test that cannot get its clusters fails with the reason; nothing skips.
//! The clusters are started with this process as their owner, so they stop
//! when the test run ends, however it ends.

use bindery::certs::ClusterPki;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// One running test cluster.
#[derive(Clone)]
pub struct Cluster {
    pub name: &'static str,
    pub kubeconfig: PathBuf,
    pub server: String,
    pub pki: ClusterPki,
}

/// The test clusters.
pub struct Clusters {
    pub provider: Cluster,
    pub app: Cluster,
    /// A third cluster serving CRDs directly, for test binaries that ask for
    /// it with [`want_reference_cluster`] (the conformance suite).
    #[allow(dead_code)] // only the conformance binary reads it
    pub reference: Option<Cluster>,
    /// Where tests keep files of their own: emptied when the clusters
    /// start, so that nothing a test writes outlives the next run.
    scratch: PathBuf,
}

/// A directory for a test's own files (logs, kubeconfigs), in this test
/// binary's run directory rather than the machine's temp directory.
#[allow(dead_code)] // not every binary that includes the fixture writes files
pub fn scratch_dir() -> PathBuf {
    clusters().scratch.clone()
}

static WANT_REFERENCE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Asks for the `reference` cluster too; call it before the first [`clusters`].
#[allow(dead_code)] // only the conformance binary asks
pub fn want_reference_cluster() {
    WANT_REFERENCE.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// The clusters of this test run, started on first use.
pub fn clusters() -> &'static Clusters {
    static CLUSTERS: OnceLock<Result<Clusters, String>> = OnceLock::new();
    match CLUSTERS.get_or_init(start) {
        Ok(clusters) => clusters,
        Err(reason) => panic!("the test clusters are not available: {reason}"),
    }
}

/// The test binary's name without Cargo's hash (`e2e`, `conformance`): each
/// test binary gets clusters of its own, in `target/<name>-run`.
fn test_binary_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.file_name().map(|n| n.to_string_lossy().to_string()))
        .and_then(|name| name.rsplit_once('-').map(|(stem, _)| stem.to_string()))
        .unwrap_or_else(|| "tests".into())
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn start() -> Result<Clusters, String> {
    let run_dir = std::env::var_os("BINDERY_TEST_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(format!("target/{}-run", test_binary_name())));
    let want_reference = WANT_REFERENCE.load(std::sync::atomic::Ordering::SeqCst);
    let mut script = cluster_script("up", &run_dir);
    script
        .arg("--owner-pid")
        .arg(std::process::id().to_string());
    let names: &[&str] = if want_reference {
        &["provider", "app", "reference"]
    } else {
        &["provider", "app"]
    };
    for name in names {
        script.arg("--cluster").arg(name);
    }
    let output = script
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cluster.sh: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "conformance/cluster/cluster.sh up failed ({}); its log tail is above",
            output.status
        ));
    }
    let env = String::from_utf8_lossy(&output.stdout);
    let cluster = |name: &'static str, prefix: &str| cluster_of(&env, name, prefix);
    let scratch = run_dir.join("scratch");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)
        .map_err(|e| format!("cannot make {}: {e}", scratch.display()))?;
    Ok(Clusters {
        scratch,
        provider: cluster("provider", "PROVIDER")?,
        app: cluster("app", "APP")?,
        reference: if want_reference {
            Some(cluster("reference", "REFERENCE")?)
        } else {
            None
        },
    })
}

/// The cluster `name` in what `cluster.sh up` printed (`env`), its keys
/// starting with `prefix`.
pub fn cluster_of(env: &str, name: &'static str, prefix: &str) -> Result<Cluster, String> {
    let lookup = |key: &str| -> Result<String, String> {
        env.lines()
            .find_map(|line| line.strip_prefix(&format!("{key}=")))
            .map(str::to_string)
            .ok_or_else(|| format!("cluster.sh printed no {key}: {env}"))
    };
    let pki_dir = PathBuf::from(lookup("BINDERY_PKI_DIR")?);
    Ok(Cluster {
        name,
        kubeconfig: PathBuf::from(lookup(&format!("{prefix}_KUBECONFIG"))?),
        server: lookup(&format!("{prefix}_SERVER"))?,
        pki: ClusterPki {
            dir: pki_dir.join(name),
        },
    })
}

/// An app cluster of one test's own (in `target/e2e-<tag>-run`), apart from
/// the shared ones: another consumer, that no other test binds into. It
/// stops with this test run.
pub fn own_app_cluster(tag: &str) -> Cluster {
    own_cluster(tag, "app", "APP")
}

/// A provider cluster of one test's own (in `target/e2e-<tag>-provider-run`),
/// for a test whose programs act on every object of a provider (kube-bind's
/// backend) and so must not share one with the other tests.
#[allow(dead_code)] // not every binary that includes the fixture runs one
pub fn own_provider_cluster(tag: &str) -> Cluster {
    own_cluster(&format!("{tag}-provider"), "provider", "PROVIDER")
}

fn own_cluster(tag: &str, name: &'static str, prefix: &str) -> Cluster {
    let run_dir = repo_root().join(format!("target/{}-{tag}-run", test_binary_name()));
    let output = cluster_script("up", &run_dir)
        .arg("--owner-pid")
        .arg(std::process::id().to_string())
        .args(["--cluster", name])
        .stderr(Stdio::inherit())
        .output()
        .expect("cluster.sh runs");
    assert!(
        output.status.success(),
        "cluster.sh up for {tag}'s {name} cluster failed ({}); its log tail is above",
        output.status
    );
    cluster_of(&String::from_utf8_lossy(&output.stdout), name, prefix)
        .unwrap_or_else(|reason| panic!("{tag}'s {name} cluster: {reason}"))
}

/// `conformance/cluster/cluster.sh <command> --run-dir <run_dir>`, with this
/// build's bindery binary and the tests' kubectl.
pub fn cluster_script(command: &str, run_dir: &Path) -> Command {
    let mut script = Command::new(repo_root().join("conformance/cluster/cluster.sh"));
    script
        .arg(command)
        .arg("--run-dir")
        .arg(run_dir)
        .env("BINDERY_BIN", env!("CARGO_BIN_EXE_bindery"))
        .env("KUBECTL", kubectl_path());
    script
}

/// The kubectl the tests use: `$KUBECTL`, else the machine's newest versioned
/// kubectl (1.33, within the supported skew of the 1.34 clusters), else `kubectl`.
pub fn kubectl_path() -> PathBuf {
    if let Some(path) = std::env::var_os("KUBECTL") {
        return PathBuf::from(path);
    }
    let versioned = Path::new("/usr/lib/google-cloud-sdk/bin/kubectl.1.33");
    if versioned.exists() {
        versioned.to_path_buf()
    } else {
        PathBuf::from("kubectl")
    }
}

impl Cluster {
    /// A kube-rs client with the cluster's admin credentials.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig)
            .unwrap_or_else(|e| panic!("reading {}: {e}", self.kubeconfig.display()));
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap_or_else(|e| panic!("kubeconfig of {}: {e}", self.name));
        kube::Client::try_from(config).expect("client from kubeconfig")
    }

    /// Runs kubectl against this cluster as admin and returns its output,
    /// whatever the exit status.
    pub fn kubectl_output(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut command = Command::new(kubectl_path());
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if stdin.is_some() {
            command.stdin(Stdio::piped());
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", kubectl_path().display()));
        if let Some(input) = stdin {
            use std::io::Write;
            let mut pipe = child.stdin.take().expect("stdin is piped");
            pipe.write_all(input.as_bytes())
                .expect("writing kubectl stdin");
        }
        child.wait_with_output().expect("kubectl finished")
    }

    /// Runs kubectl and returns its stdout; fails the test if kubectl fails.
    /// The cluster's identity as bindery knows it: its kube-system
    /// namespace's UID.
    pub fn kube_system_uid(&self) -> String {
        self.kubectl(&[
            "get",
            "namespace",
            "kube-system",
            "-o",
            "jsonpath={.metadata.uid}",
        ])
    }

    /// Applies the CustomResourceDefinition `crd` and waits until it is
    /// established.
    pub fn install_crd(&self, crd: &serde_json::Value) {
        self.kubectl_with_stdin(&["apply", "-f", "-"], Some(&crd.to_string()));
        let name = crd["metadata"]["name"].as_str().expect("a CRD has a name");
        self.kubectl_wait(&[
            "--for=condition=Established",
            "--timeout=60s",
            &format!("crd/{name}"),
        ]);
    }

    /// Installs `<plural>.<group>` of `kind` and `scope`, serving `v1` with
    /// any fields; waits until it is established. Its name.
    pub fn install_open_crd(&self, group: &str, plural: &str, kind: &str, scope: &str) -> String {
        let name = format!("{plural}.{group}");
        self.install_crd(&serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": group, "scope": scope,
                "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}
        }));
        name
    }

    /// `kubectl -n <namespace> get <resource> <name> -o json`: the object,
    /// or `None` when kubectl fails (it is not there).
    #[allow(dead_code)] // not every binary that includes the fixture reads one
    pub fn get_json(
        &self,
        namespace: &str,
        resource: &str,
        name: &str,
    ) -> Option<serde_json::Value> {
        let output = self.kubectl_output(
            &["-n", namespace, "get", resource, name, "-o", "json"],
            None,
        );
        output
            .status
            .success()
            .then(|| serde_json::from_slice(&output.stdout).expect("kubectl prints JSON"))
    }

    /// Waits up to `within` until `kubectl get <what…>` finds it.
    #[allow(dead_code)] // not every binary that includes the fixture waits for one
    pub fn wait_found(&self, what: &[&str], within: std::time::Duration) {
        let deadline = std::time::Instant::now() + within;
        let mut args = vec!["get"];
        args.extend_from_slice(what);
        while !self.kubectl_output(&args, None).status.success() {
            assert!(
                std::time::Instant::now() < deadline,
                "kubectl get {} found nothing within {within:?}",
                what.join(" ")
            );
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    }

    pub fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_with_stdin(args, None)
    }

    /// Runs kubectl with `input` on stdin and returns its stdout; fails the test
    /// if kubectl fails.
    pub fn kubectl_with_stdin(&self, args: &[&str], input: Option<&str>) -> String {
        let output = self.kubectl_output(args, input);
        self.succeeded(args, output)
    }

    /// `kubectl wait <args>`, asked again while the object's
    /// `status.conditions` is still null: kubectl then fails at once
    /// (`accessor error: <nil>`) instead of waiting, and a CRD just made
    /// may have none yet.
    pub fn kubectl_wait(&self, args: &[&str]) -> String {
        let mut all = vec!["wait"];
        all.extend_from_slice(args);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let output = self.kubectl_output(&all, None);
            let not_yet = String::from_utf8_lossy(&output.stderr).contains("accessor error: <nil>");
            if output.status.success() || !not_yet || std::time::Instant::now() >= deadline {
                return self.succeeded(&all, output);
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// The stdout of a kubectl run that must have succeeded.
    fn succeeded(&self, args: &[&str], output: Output) -> String {
        assert!(
            output.status.success(),
            "kubectl {} against {} failed ({}):\n{}",
            args.join(" "),
            self.name,
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("kubectl prints UTF-8")
    }
}

/// A name unique to this test run, for objects that tests create.
pub fn unique_name(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{}-{n}", std::process::id())
}

/// Runs a prepared `curl` command (this adds `-s` and the status code after
/// the body) and returns the status (0 when no answer came) and the body as
/// JSON, or as a JSON string when it is not JSON.
#[allow(dead_code)] // the conformance binary makes no such requests
pub fn curl_json(mut curl: Command) -> (u16, serde_json::Value) {
    let output = curl
        .args(["-s", "-w", "\n%{http_code}"])
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (
        code.parse().unwrap_or(0),
        serde_json::from_str(body).unwrap_or_else(|_| serde_json::Value::String(body.into())),
    )
}
