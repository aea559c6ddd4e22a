//! The router (`bindery route`) and a second provider for the tests and
//! benchmarks of several providers: a provider cluster of their own with its
//! own bindery (serving only), a consumer bound there to the same CRD as on
//! the shared provider, and the router started against an app cluster.

use crate::bindery::{Bindery, Consumer, bindery, export_for};
use crate::fixture::{Cluster, own_provider_cluster, repo_root};
use std::process::{Child, Command, Stdio};

/// The group and resource both providers offer.
pub const GROUP: &str = "routed.example.com";
pub const PLURAL: &str = "gadgets";

/// `bindery route` for `app`, stopped when dropped.
pub struct Router {
    child: Child,
    pub port: u16,
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `bindery route` for `app` across `providers` (name and the consumer
/// bound there), `default` among them, not started yet.
fn route_command(app: &Cluster, providers: &[(&str, &Consumer)], default: &str) -> Command {
    let serving = bindery().pki.join("bindery");
    let mut command = Command::new(env!("CARGO_BIN_EXE_bindery"));
    command
        .args([
            "route",
            "--listen",
            "127.0.0.1:0",
            "--default-provider",
            default,
            // The providers' schemas judged again every second.
            "--schema-recheck-seconds",
            "1",
            // The router points the APIServices at its Service itself.
            "--register-service",
            "kube-bind/bindery-router",
        ])
        .arg("--register-ca-file")
        .arg(serving.join("serving-ca.crt"))
        .arg("--kubeconfig")
        .arg(&app.kubeconfig)
        .arg("--tls-cert-file")
        .arg(serving.join("serving.crt"))
        .arg("--tls-private-key-file")
        .arg(serving.join("serving.key"));
    for (name, consumer) in providers {
        command
            .arg("--provider")
            .arg(format!("{name}={}", consumer.kubeconfig.display()));
    }
    command
        .env("RUST_LOG", "warn,bindery=info,kube_client=off")
        .stdout(Stdio::piped());
    command
}

/// Starts the router for `app` across `providers` (name and the consumer
/// bound there), `default` among them.
pub fn start_router(app: &Cluster, providers: &[(&str, &Consumer)], default: &str) -> Router {
    let mut child = route_command(app, providers, default)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("bindery route starts");
    let line = crate::bindery::first_line(&mut child);
    let port = line
        .trim()
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or_else(|| panic!("bindery route did not start: {line:?} (its log is above)"));
    Router { child, port }
}

/// Why the router refused to start for `providers` (what it printed on
/// its way out); `None` when it started.
pub fn refusal(app: &Cluster, providers: &[(&str, &Consumer)], default: &str) -> Option<String> {
    let mut child = route_command(app, providers, default)
        .stderr(Stdio::piped())
        .spawn()
        .expect("bindery route starts");
    let line = crate::bindery::first_line(&mut child);
    if !line.is_empty() {
        let _ = child.kill();
        let _ = child.wait();
        return None;
    }
    let output = child.wait_with_output().expect("bindery route ends");
    Some(String::from_utf8_lossy(&output.stderr).into_owned())
}

/// Makes the namespaces `default_ns` (the default provider's) and `west_ns`
/// (labelled for the provider `west`) in `app`.
pub fn routed_namespaces(app: &Cluster, default_ns: &str, west_ns: &str) {
    app.kubectl(&["create", "namespace", default_ns]);
    app.kubectl(&["create", "namespace", west_ns]);
    app.kubectl(&["label", "namespace", west_ns, "bindery.dev/provider=west"]);
}

/// A provider cluster of its own with bindery serving it, and consumer
/// `id` bound to its CRD there.
pub fn second_provider(
    tag: &str,
    id: &str,
    crd: &str,
) -> (Cluster, crate::bindery::ServingOnly, Consumer) {
    let provider = provider_cluster(tag);
    provider.install_open_crd(GROUP, PLURAL, "Gadget", "Namespaced");
    let (serving, consumer) = serve_consumer(&provider, id, crd);
    (provider, serving, consumer)
}

/// A provider cluster of its own (`tag`) with kube-bind's CRDs installed.
pub fn provider_cluster(tag: &str) -> Cluster {
    let provider = own_provider_cluster(tag);
    let crds = repo_root().join("deploy/crds");
    provider.kubectl(&["apply", "-f", &crds.to_string_lossy()]);
    provider.kubectl_wait(&[
        "--for=condition=Established",
        "--timeout=60s",
        "-f",
        &crds.to_string_lossy(),
    ]);
    provider
}

/// bindery serving `provider` (serving only) and consumer `id` bound there
/// to `crd` (`<plural>.<group>`, installed already), once it is served.
pub fn serve_consumer(
    provider: &Cluster,
    id: &str,
    crd: &str,
) -> (crate::bindery::ServingOnly, Consumer) {
    // Without controllers there, no provider-side account to impersonate.
    let serving = crate::bindery::serving_only(&provider.kubeconfig, &["--impersonate=false"]);
    let consumer = consumer_at(provider, &serving, id, crd);
    (serving, consumer)
}

/// Consumer `id` bound to `crd` (`<plural>.<group>`, installed already) at
/// `provider`, whose bindery is `serving`, once it is served.
pub fn consumer_at(
    provider: &Cluster,
    serving: &crate::bindery::ServingOnly,
    id: &str,
    crd: &str,
) -> Consumer {
    let (plural, group) = crd.split_once('.').expect("crd is <plural>.<group>");
    export_for(
        provider,
        id,
        crd,
        plural,
        None,
        "Prefixed",
        serde_json::json!([]),
    );
    let endpoint = Bindery {
        url: serving.url.clone(),
        pki: bindery().pki.clone(),
    }
    .endpoint(id);
    endpoint.wait_until_served(group, plural);
    endpoint
}

/// The Service the router registered `group`'s v1 APIService with in
/// `app`: an ExternalName Service to loopback at the router's `port`, made
/// once the router chose it; waits until the aggregator finds the
/// APIService available, and checks that it names the Service.
pub fn reach_router(app: &Cluster, group: &str, port: u16) {
    let objects = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-bind"}},
        {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "bindery-router", "namespace": "kube-bind"},
            "spec": {"type": "ExternalName", "externalName": "localhost",
                "ports": [{"port": port, "protocol": "TCP"}]}},
    ]});
    app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&objects.to_string()));
    let api_service = format!("apiservice/v1.{group}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !app
        .kubectl_output(&["get", &api_service], None)
        .status
        .success()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the router never registered {api_service}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    app.kubectl_wait(&["--for=condition=Available", "--timeout=60s", &api_service]);
    let service = app.kubectl(&[
        "get",
        &api_service,
        "-o",
        "jsonpath={.spec.service.namespace}/{.spec.service.name}:{.spec.service.port}",
    ]);
    assert_eq!(service, format!("kube-bind/bindery-router:{port}"));
}

/// A gadget named `name`, as JSON.
pub fn gadget(name: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "Gadget",
        "metadata": {"name": name}, "spec": {"size": 1},
    })
}

/// The names (`<namespace>/<name>`) of `provider`'s gadgets.
pub fn stored(provider: &Cluster) -> Vec<String> {
    // Qualified: other tests' CRDs on the shared provider are `gadgets` too.
    let listed = provider.kubectl(&[
        "get",
        &format!("{PLURAL}.{GROUP}"),
        "-A",
        "-o",
        "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}",
    ]);
    listed.lines().map(str::to_string).collect()
}
