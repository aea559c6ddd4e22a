//! Several providers, one app cluster (`bindery route`): the same
//! group/resource bound from two provider clusters, each with its own
//! bindery, into one app cluster whose APIService names the router. A
//! namespace's objects live at the provider its Namespace names (else the
//! default); kubectl across namespaces sees both providers as one resource,
//! and a watch across namespaces resumes from any event's version without
//! missing or repeating one.

use crate::bindery::{Bindery, Consumer, bindery, export_for};
use crate::fixture::{Cluster, clusters, own_app_cluster, own_provider_cluster, repo_root};
use futures::{StreamExt, TryStreamExt};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, WatchEvent, WatchParams,
};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const GROUP: &str = "routed.example.com";
const PLURAL: &str = "gadgets";

/// `bindery route` for `app`, stopped when dropped.
struct Router {
    child: Child,
    port: u16,
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_router(app: &Cluster, providers: &[(&str, &Consumer)], default: &str) -> Router {
    let serving = bindery().pki.join("bindery");
    let mut command = Command::new(env!("CARGO_BIN_EXE_bindery"));
    command
        .args([
            "route",
            "--listen",
            "127.0.0.1:0",
            "--default-provider",
            default,
        ])
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
    let mut child = command
        .env("RUST_LOG", "warn,bindery=info,kube_client=off")
        .stdout(Stdio::piped())
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

/// The APIService of the group, served by the router at `port`.
fn register(app: &Cluster, port: u16) {
    let ca = std::fs::read(bindery().pki.join("bindery/serving-ca.crt")).expect("serving CA");
    let objects = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-bind"}},
        {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "bindery-router", "namespace": "kube-bind"},
            "spec": {"type": "ExternalName", "externalName": "localhost",
                "ports": [{"port": port, "protocol": "TCP"}]}},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": format!("v1.{GROUP}")},
            "spec": {"group": GROUP, "version": "v1", "groupPriorityMinimum": 1000,
                "versionPriority": 15,
                "caBundle": base64(&ca),
                "service": {"namespace": "kube-bind", "name": "bindery-router", "port": port}}},
    ]});
    app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&objects.to_string()));
    app.kubectl(&[
        "wait",
        "--for=condition=Available",
        "--timeout=60s",
        &format!("apiservice/v1.{GROUP}"),
    ]);
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A provider cluster of its own with bindery serving it, and consumer
/// `id` bound to its CRD there.
fn second_provider(id: &str, crd: &str) -> (Cluster, crate::bindery::ServingOnly, Consumer) {
    let provider = own_provider_cluster("routed");
    let crds = repo_root().join("deploy/crds");
    provider.kubectl(&["apply", "-f", &crds.to_string_lossy()]);
    provider.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "-f",
        &crds.to_string_lossy(),
    ]);
    provider.install_open_crd(GROUP, PLURAL, "Gadget", "Namespaced");
    export_for(
        &provider,
        id,
        crd,
        PLURAL,
        None,
        "Prefixed",
        serde_json::json!([]),
    );
    // Without controllers there, no provider-side account to impersonate.
    let serving = crate::bindery::serving_only(&provider.kubeconfig, &["--impersonate=false"]);
    let endpoint = Bindery {
        url: serving.url.clone(),
        pki: bindery().pki.clone(),
    }
    .endpoint(id);
    endpoint.wait_until_served(GROUP, PLURAL);
    (provider, serving, endpoint)
}

/// A gadget named `name`, as JSON.
fn gadget(name: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "Gadget",
        "metadata": {"name": name}, "spec": {"size": 1},
    })
}

/// The names (`<namespace>/<name>`) of `provider`'s gadgets.
fn stored(provider: &Cluster) -> Vec<String> {
    let listed = provider.kubectl(&[
        "get",
        PLURAL,
        "-A",
        "-o",
        "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}",
    ]);
    listed.lines().map(str::to_string).collect()
}

#[test]
fn one_resource_from_two_providers_routed_by_namespace_and_read_as_one() {
    let tag = crate::fixture::unique_name("r");
    let crd = clusters()
        .provider
        .install_open_crd(GROUP, PLURAL, "Gadget", "Namespaced");
    let east = bindery().consumer(&format!("{tag}-east"), &crd, PLURAL);
    let (west_cluster, _west_bindery, west) = second_provider(&format!("{tag}-west"), &crd);
    let app = own_app_cluster("routed");
    let router = start_router(&app, &[("east", &east), ("west", &west)], "east");
    register(&app, router.port);

    // team-east names no provider (the default's); team-west names west.
    let (team_east, team_west) = (format!("{tag}-e"), format!("{tag}-w"));
    app.kubectl(&["create", "namespace", &team_east]);
    app.kubectl(&["create", "namespace", &team_west]);
    app.kubectl(&[
        "label",
        "namespace",
        &team_west,
        "bindery.dev/provider=west",
    ]);
    // The router reads Namespaces by a watch: wait until it routes team-west.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let made = app.kubectl_output(
            &["-n", &team_west, "create", "-f", "-"],
            Some(&gadget("b").to_string()),
        );
        if made.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "creating in {team_west}: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    app.kubectl_with_stdin(
        &["-n", &team_east, "create", "-f", "-"],
        Some(&gadget("a").to_string()),
    );

    // Each object is stored at its namespace's provider, and only there.
    let east_stored = stored(&clusters().provider);
    let west_stored = stored(&west_cluster);
    let at = |id: &str, ns: &str, name: &str| format!("kube-bind-{id}-{ns}/{name}");
    assert!(
        east_stored.contains(&at(&east.id, &team_east, "a")),
        "{east_stored:?}"
    );
    assert!(
        west_stored.contains(&at(&west.id, &team_west, "b")),
        "{west_stored:?}"
    );
    assert!(
        !east_stored
            .iter()
            .any(|s| s.ends_with(&format!("{team_west}/b"))),
        "{east_stored:?}"
    );
    assert!(
        !west_stored
            .iter()
            .any(|s| s.ends_with(&format!("{team_east}/a"))),
        "{west_stored:?}"
    );
    // A namespace sees only its own provider's objects.
    let missing = app.kubectl_output(&["-n", &team_east, "get", PLURAL, "b"], None);
    assert!(!missing.status.success(), "b is not in {team_east}");
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("NotFound"),
        "{missing:?}"
    );

    // kubectl across namespaces: one resource, both providers, a Table.
    let listed = app.kubectl(&["get", PLURAL, "-A"]);
    assert!(
        listed.contains(&team_east) && listed.contains(&team_west),
        "{listed}"
    );
    let json = app.kubectl(&["get", PLURAL, "-A", "-o", "json"]);
    let json: serde_json::Value = serde_json::from_str(&json).expect("a list");
    let names: Vec<&str> = json["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|item| item["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["a", "b"], "{json}");

    // A watch across namespaces, from a merged list's version, resumed from
    // its first event's version: the second event once, nothing before.
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let client = app.client().await;
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(GROUP, "v1", "Gadget"),
            PLURAL,
        );
        let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let list = all
            .list(&ListParams::default())
            .await
            .expect("a list across providers");
        let version = list.metadata.resource_version.clone().expect("a version");
        assert_eq!(
            version.split('.').count(),
            2,
            "one version per provider: {version}"
        );
        assert_eq!(list.items.len(), 2);

        let events = all
            .watch(&WatchParams::default().timeout(20), &version)
            .await
            .expect("a watch across providers");
        futures::pin_mut!(events);
        let create = |ns: &str, name: &str| {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
            let object: DynamicObject = serde_json::from_value(gadget(name)).expect("a gadget");
            async move {
                api.create(&Default::default(), &object)
                    .await
                    .expect("created")
            }
        };
        create(&team_west, "c").await;
        let first = next_added(&mut events).await;
        create(&team_east, "d").await;
        let second = next_added(&mut events).await;
        assert_eq!(
            (
                first.metadata.name.as_deref(),
                second.metadata.name.as_deref()
            ),
            (Some("c"), Some("d"))
        );
        let resumed_from = first.metadata.resource_version.clone().expect("a version");
        assert_eq!(resumed_from.split('.').count(), 2, "{resumed_from}");
        let resumed = all
            .watch(&WatchParams::default().timeout(3), &resumed_from)
            .await
            .expect("a resumed watch");
        let seen: Vec<String> = resumed
            .try_filter_map(|event| async move {
                Ok(match event {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                        o.metadata.name
                    }
                    _ => None,
                })
            })
            .try_collect()
            .await
            .expect("the resumed watch");
        assert_eq!(seen, ["d"], "resumed after c: d once, nothing else");

        // An object as the watch gave it (the merged version) is written
        // back to its own provider.
        let mut object = first;
        object.data["spec"]["size"] = serde_json::json!(2);
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &team_west, &resource);
        let replaced = api
            .replace("c", &Default::default(), &object)
            .await
            .expect("replaced with the merged version");
        assert_eq!(replaced.data["spec"]["size"], 2);
    });
    let west_stored = stored(&west_cluster);
    assert!(
        west_stored.contains(&at(&west.id, &team_west, "c")),
        "{west_stored:?}"
    );
    drop(router);
}

/// The next ADDED event's object.
async fn next_added(
    events: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<DynamicObject>>> + Unpin),
) -> DynamicObject {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let event = tokio::time::timeout_at(deadline, events.next())
            .await
            .expect("an event within 15 s")
            .expect("the watch goes on")
            .expect("an event");
        if let WatchEvent::Added(object) = event {
            return object;
        }
    }
}
