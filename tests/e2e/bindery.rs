//! bindery itself for the tests: `bindery serve` started once per test run
//! against the provider cluster (with kube-bind's CRDs from `deploy/crds/`
//! installed), and consumers set up the way the provider-side controllers
//! will: a cluster namespace, a BoundSchema copied from a CRD, and an
//! APIServiceExport with an identity.

use crate::fixture::{clusters, repo_root};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

pub struct Bindery {
    /// `https://127.0.0.1:<port>`
    pub url: String,
    pub pki: PathBuf,
}

/// The bindery of this test run, started on first use.
pub fn bindery() -> &'static Bindery {
    static BINDERY: OnceLock<Result<Bindery, String>> = OnceLock::new();
    match BINDERY.get_or_init(start) {
        Ok(bindery) => bindery,
        Err(reason) => panic!("bindery is not available: {reason}"),
    }
}

fn start() -> Result<Bindery, String> {
    let provider = &clusters().provider;
    // `BINDERY_TEST_CRDS` points at another set of kube-bind CRDs to test against.
    let crds = std::env::var_os("BINDERY_TEST_CRDS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("deploy/crds"));
    let output = provider.kubectl_output(&["apply", "-f", &crds.to_string_lossy()], None);
    if !output.status.success() {
        return Err(format!(
            "installing {}: {}",
            crds.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    provider.kubectl_wait(&[
        "--for=condition=Established",
        "--timeout=60s",
        "-f",
        &crds.to_string_lossy(),
    ]);
    let pki = provider
        .pki
        .dir
        .parent()
        .expect("pki dir has a parent")
        .to_path_buf();
    // The wrapper stops bindery when this test process exits, however it exits.
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(r#"owner=$1; shift; "$@" & child=$!; trap 'kill $child 2>/dev/null' EXIT; while kill -0 "$owner" 2>/dev/null && kill -0 "$child" 2>/dev/null; do sleep 0.5; done"#)
        .arg("bindery-owner")
        .arg(std::process::id().to_string())
        .arg(env!("CARGO_BIN_EXE_bindery"))
        .arg("serve")
        .arg("--provider-kubeconfig")
        .arg(&provider.kubeconfig)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--pki")
        .arg(&pki)
        .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("starting bindery: {e}"))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| format!("reading bindery's address: {e}"))?;
    let url = line
        .trim()
        .strip_prefix("bindery listening on ")
        .ok_or_else(|| format!("bindery did not start (it printed {line:?}); its log is above"))?
        .to_string();
    Ok(Bindery { url, pki })
}

/// A consumer of the direct endpoint `/clusters/<id>`.
pub struct Consumer {
    pub id: String,
    pub cluster_namespace: String,
    pub kubeconfig: PathBuf,
    pub base_url: String,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Bindery {
    /// Sets up consumer `id` with an export of the provider CRD `crd`
    /// (`<plural>.<group>`), named `export`.
    pub fn consumer(&self, id: &str, crd: &str, export: &str) -> Consumer {
        self.consumer_laid_out(id, crd, export, None, "Prefixed")
    }

    /// [`Self::consumer`], bound with `scope` (the CRD's unless given) under
    /// `isolation`.
    pub fn consumer_laid_out(
        &self,
        id: &str,
        crd: &str,
        export: &str,
        scope: Option<&str>,
        isolation: &str,
    ) -> Consumer {
        self.consumer_claiming(id, crd, export, scope, isolation, serde_json::json!([]))
    }

    /// [`Self::consumer_laid_out`], the export claiming `claims` (its
    /// `spec.permissionClaims`).
    pub fn consumer_claiming(
        &self,
        id: &str,
        crd: &str,
        export: &str,
        scope: Option<&str>,
        isolation: &str,
        claims: serde_json::Value,
    ) -> Consumer {
        let (plural, group) = crd.split_once('.').expect("crd is <plural>.<group>");
        export_for(
            &clusters().provider,
            id,
            crd,
            export,
            scope,
            isolation,
            claims,
        );
        let consumer = self.endpoint(id);
        consumer.wait_until_served(group, plural);
        consumer
    }
}

/// On the provider cluster `provider`, what the provider-side controllers
/// make for consumer `id` (cluster namespace `kube-bind-<id>`) with an export
/// of the CRD `crd` (`<plural>.<group>`) named `export`, bound with `scope`
/// (the CRD's unless given) under `isolation`, claiming `claims`.
pub fn export_for(
    provider: &crate::fixture::Cluster,
    id: &str,
    crd: &str,
    export: &str,
    scope: Option<&str>,
    isolation: &str,
    claims: serde_json::Value,
) {
    let cluster_namespace = format!("kube-bind-{id}");
    let _ = provider.kubectl_output(&["create", "namespace", &cluster_namespace], None);
    let spec = provider.kubectl(&["get", "crd", crd, "-o", "jsonpath={.spec}"]);
    let spec: serde_json::Value = serde_json::from_str(&spec).expect("CRD spec is JSON");
    let (plural, group) = crd.split_once('.').expect("crd is <plural>.<group>");
    let bound_schema = serde_json::json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "BoundSchema",
        "metadata": {"name": crd, "namespace": cluster_namespace,
        "labels": {"bindery.dev/managed": "true"}},
        "spec": {
        "informerScope": "Namespaced",
        "group": spec["group"], "names": spec["names"],
        "scope": scope.map_or(spec["scope"].clone(), serde_json::Value::from),
        "versions": spec["versions"], "conversion": spec["conversion"],
        },
    });
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&bound_schema.to_string()));
    // The export's identity, as the controllers would make it: a Secret
    // beside the export (made first, so that the controllers adopt it
    // rather than make their own), and the sha256 of its key in the status.
    let key = format!("{id}/{export}/{}", std::process::id());
    let identity = sha256_hex(key.as_bytes());
    let secret = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{export}-identity"), "namespace": cluster_namespace},
        "stringData": {"key": key},
    });
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&secret.to_string()));
    let export_object = serde_json::json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExport",
        "metadata": {"name": export, "namespace": cluster_namespace,
        "labels": {"bindery.dev/managed": "true"}},
        "spec": {
        "resources": [{"group": group, "resource": plural, "versions": ["v1"]}],
        "informerScope": "Namespaced", "isolation": isolation,
        "permissionClaims": claims,
        },
    });
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&export_object.to_string()));
    provider.kubectl(&[
        "-n",
        &cluster_namespace,
        "patch",
        "apiserviceexport",
        export,
        "--subresource=status",
        "--type=merge",
        "-p",
        &format!(r#"{{"status":{{"identityHash":"{identity}"}}}}"#),
    ]);
}

impl Bindery {
    /// The direct endpoint of consumer `id` (cluster namespace
    /// `kube-bind-<id>`), with a client certificate for it; nothing is set up
    /// on the provider.
    pub fn endpoint(&self, id: &str) -> Consumer {
        let cluster_namespace = format!("kube-bind-{id}");
        let kubeconfig_text = Command::new(env!("CARGO_BIN_EXE_bindery"))
            .args([
                "consumer-kubeconfig",
                "--consumer",
                id,
                "--server",
                &self.url,
                "--pki",
            ])
            .arg(&self.pki)
            .output()
            .expect("bindery consumer-kubeconfig runs");
        assert!(
            kubeconfig_text.status.success(),
            "{}",
            String::from_utf8_lossy(&kubeconfig_text.stderr)
        );
        let kubeconfig = self.pki.join(format!("{id}.kubeconfig"));
        std::fs::write(&kubeconfig, &kubeconfig_text.stdout)
            .expect("writing the consumer kubeconfig");
        Consumer {
            id: id.to_string(),
            cluster_namespace,
            kubeconfig,
            base_url: format!("{}/clusters/{id}", self.url),
            cert: self.pki.join(format!("bindery/consumers/{id}.crt")),
            key: self.pki.join(format!("bindery/consumers/{id}.key")),
        }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    bindery::translate::IdentityHash::of_secret(bytes)
        .as_str()
        .to_string()
}

impl Consumer {
    /// A kube-rs client for this consumer.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("consumer kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("consumer config");
        kube::Client::try_from(config).expect("consumer client")
    }

    /// A client as [`Self::client`] that sends each request once: what
    /// bindery answered, a 429 or 504 included, is what the test sees.
    pub async fn client_without_retries(&self) -> kube::Client {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("consumer kubeconfig");
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("consumer config");
        config.default_retry = false;
        kube::Client::try_from(config).expect("consumer client")
    }

    /// Waits until bindery's catalog serves `<plural>.<group>` to this consumer.
    pub fn wait_until_served(&self, group: &str, plural: &str) {
        let path = format!("{}/apis/{group}/v1/{plural}", self.base_url);
        for _ in 0..100 {
            let output = Command::new("curl")
                .args(["-sk", "-o", "/dev/null", "-w", "%{http_code}", "--cert"])
                .arg(&self.cert)
                .arg("--key")
                .arg(&self.key)
                .arg(&path)
                .output()
                .expect("curl runs");
            if output.stdout == b"200" {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!(
            "bindery never served {plural}.{group} to consumer {}",
            self.id
        );
    }
}

/// A `bindery serve` of its own (serving only, no controllers) beside the
/// shared one, with `provider_kubeconfig` and the shared PKI; stopped when
/// dropped.
pub struct ServingOnly {
    child: Child,
    /// `https://127.0.0.1:<port>`.
    pub url: String,
}

impl ServingOnly {
    /// Asks it to stop, as Kubernetes stops a pod: SIGTERM.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "SIGTERM to bindery: {status}");
    }

    /// Whether it has exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for ServingOnly {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a [`ServingOnly`] bindery with `extra_args` after `serve`'s own.
pub fn serving_only(provider_kubeconfig: &std::path::Path, extra_args: &[&str]) -> ServingOnly {
    serving_only_with_env(provider_kubeconfig, extra_args, &[])
}

/// [`serving_only`], with `env` set for bindery.
pub fn serving_only_with_env(
    provider_kubeconfig: &std::path::Path,
    extra_args: &[&str],
    env: &[(&str, &str)],
) -> ServingOnly {
    spawn_serving_only(
        provider_kubeconfig,
        extra_args,
        env,
        ("error,kube_client=off", Stdio::inherit()),
    )
}

/// [`serving_only`], logging what it logs by default to the file `log`.
pub fn serving_only_logged(
    provider_kubeconfig: &std::path::Path,
    log: &std::path::Path,
) -> ServingOnly {
    let file = std::fs::File::create(log).expect("a log file");
    spawn_serving_only(
        provider_kubeconfig,
        &[],
        &[],
        ("warn,bindery=info,kube_client=off", Stdio::from(file)),
    )
}

/// `bindery serve` without controllers; `logging`: its `RUST_LOG`, and
/// where its log goes.
fn spawn_serving_only(
    provider_kubeconfig: &std::path::Path,
    extra_args: &[&str],
    env: &[(&str, &str)],
    logging: (&str, Stdio),
) -> ServingOnly {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bindery"))
        .args(["serve", "--controllers=false", "--listen", "127.0.0.1:0"])
        .arg("--provider-kubeconfig")
        .arg(provider_kubeconfig)
        .arg("--pki")
        .arg(&bindery().pki)
        .args(extra_args)
        .envs(env.iter().copied())
        .env("RUST_LOG", logging.0)
        .stderr(logging.1)
        .stdout(Stdio::piped())
        .spawn()
        .expect("bindery starts");
    let line = first_line(&mut child);
    let url = line
        .trim()
        .strip_prefix("bindery listening on ")
        .unwrap_or_else(|| panic!("bindery did not start: {line:?}"))
        .to_string();
    ServingOnly { child, url }
}

/// The first line `child` prints (its address, for bindery's commands that
/// serve).
pub fn first_line(child: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout is piped"))
        .read_line(&mut line)
        .expect("reading what the child printed");
    line
}
