//! `bindery migrate` moves an app cluster that kube-bind's konnector bound
//! to bindery, losing nothing. The app cluster (one of the test's own) is
//! built as the konnector leaves it: the CRD copied in, 100 objects with the
//! konnector's finalizer and annotations, a kube-bind APIServiceBinding, a
//! konnector Deployment; the provider holds kube-bind's export and
//! BoundSchema, the APIServiceNamespace and the 100 copies the konnector
//! synced (spec and status). After the move the same 100 objects (same
//! provider uids, spec and status) are served through bindery to the
//! consumer, the copied CRD is gone, nothing was deleted on the provider,
//! and once `bindery bind --export` registered the app cluster, kubectl
//! there lists them through the aggregated path. A dry run changes nothing; an app object the konnector never
//! synced stops the move before anything is removed, and the move finishes
//! when run again.

use crate::binder::{binder_token, bindery_command_for, succeeded};
use crate::bindery::bindery;
use crate::fixture::{clusters, own_app_cluster, repo_root, unique_name};
use bindery::controllers::naming::cluster_namespace;
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

const GROUP: &str = "migrate.bindery.test";
const CRD: &str = "widgets.migrate.bindery.test";
const OBJECTS: usize = 100;

fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "string"}}},
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}}]},
    })
}

fn list(items: Vec<Value>) -> String {
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

fn items(text: &str) -> Vec<Value> {
    serde_json::from_str::<Value>(text).expect("JSON")["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn migrate(app_kubeconfig: &std::path::Path, extra: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_bindery"))
        .arg("migrate")
        .arg("--kubeconfig")
        .arg(app_kubeconfig)
        .arg("--provider-kubeconfig")
        .arg(&clusters().provider.kubeconfig)
        .args(["--timeout-seconds", "60"])
        .args(extra)
        .output()
        .expect("bindery migrate runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn an_app_cluster_bound_by_the_konnector_moves_to_bindery_without_losing_an_object() {
    // bindery serves, its controllers run, and the provider has its CRDs.
    let _ = bindery();
    let app = own_app_cluster("migrate");
    let provider = &clusters().provider;
    let uid = app.kube_system_uid();
    let cluster_ns = cluster_namespace("kube-bind-", &uid);
    let consumer = cluster_ns.strip_prefix("kube-bind-").unwrap().to_string();
    let provider_ns = format!("{cluster_ns}-default");
    let export = unique_name("widgets");
    let provider_widgets =
        || items(&provider.kubectl(&["-n", &provider_ns, "get", "widgets", "-o", "json"]));
    let provider_export = |output: &str| {
        provider.kubectl(&[
            "-n",
            &cluster_ns,
            "get",
            "apiserviceexport",
            &export,
            "-o",
            output,
        ])
    };

    // The provider, as kube-bind's backend and konnector leave it.
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&crd().to_string()));
    provider.kubectl(&["wait", "--for=condition=Established", "crd", CRD]);
    for namespace in [&cluster_ns, &provider_ns] {
        provider.kubectl(&["create", "namespace", namespace]);
    }
    provider.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(
            &json!({"apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExport",
                "metadata": {"name": export, "namespace": cluster_ns},
                "spec": {"resources": [{"group": GROUP, "resource": "widgets", "versions": ["v1"]}],
                    "informerScope": "Namespaced", "isolation": "Prefixed"}})
            .to_string(),
        ),
    );
    let export_uid = provider_export("jsonpath={.metadata.uid}");
    let crd_spec = crd()["spec"].clone();
    provider.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(
            &json!({"apiVersion": "kube-bind.io/v1alpha2", "kind": "BoundSchema",
                "metadata": {"name": CRD, "namespace": cluster_ns,
                    "ownerReferences": [{"apiVersion": "kube-bind.io/v1alpha2",
                        "kind": "APIServiceExport", "name": export, "uid": export_uid,
                        "controller": true}]},
                "spec": {"informerScope": "Namespaced", "group": GROUP,
                    "names": crd_spec["names"], "scope": "Namespaced",
                    "versions": crd_spec["versions"]}})
            .to_string(),
        ),
    );
    provider.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(
            &json!({"apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceNamespace",
                "metadata": {"name": "default", "namespace": cluster_ns}, "spec": {}})
            .to_string(),
        ),
    );
    provider.kubectl(&[
        "-n",
        &cluster_ns,
        "patch",
        "apiservicenamespace",
        "default",
        "--subresource=status",
        "--type=merge",
        "-p",
        &json!({"status": {"namespace": provider_ns}}).to_string(),
    ]);

    // The app cluster, as kube-bind's CLI and konnector leave it.
    app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&crd().to_string()));
    app.kubectl(&["wait", "--for=condition=Established", "crd", CRD]);
    let binding_crd = repo_root().join("deploy/crds/apiservicebindings.kube-bind.io.yaml");
    app.kubectl(&["apply", "-f", binding_crd.to_str().unwrap()]);
    app.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd",
        "apiservicebindings.kube-bind.io",
    ]);
    app.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(
            &json!({"apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceBinding",
                "metadata": {"name": export},
                "spec": {"kubeconfigSecretRef": {"namespace": "kube-bind",
                    "name": "kubeconfig-abcde", "key": "kubeconfig"}}})
            .to_string(),
        ),
    );
    app.kubectl(&["create", "namespace", "kube-bind"]);
    app.kubectl(&[
        "-n",
        "kube-bind",
        "create",
        "deployment",
        "konnector",
        "--image=ghcr.io/kube-bind/konnector:v0.6.0",
    ]);
    let names: Vec<String> = (0..OBJECTS).map(|i| format!("w-{i:03}")).collect();
    app.kubectl_with_stdin(
        &["create", "-f", "-"],
        Some(&list(
            names
                .iter()
                .map(|name| {
                    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
                        "metadata": {"name": name, "namespace": "default",
                            "finalizers": ["kubebind.io/syncer"]},
                        "spec": {"size": format!("size-of-{name}")}})
                })
                .collect(),
        )),
    );
    let app_objects = items(&app.kubectl(&["-n", "default", "get", "widgets", "-o", "json"]));
    assert_eq!(app_objects.len(), OBJECTS);
    provider.kubectl_with_stdin(
        &["create", "-f", "-"],
        Some(&list(
            app_objects
                .iter()
                .map(|object| {
                    let name = object["metadata"]["name"].clone();
                    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
                        "metadata": {"name": name, "namespace": provider_ns,
                            "annotations": {
                                "kube-bind.io/cluster-namespace": cluster_ns,
                                "kube-bind.io/consumer-namespace": "default",
                                "kube-bind.io/consumer-uid": object["metadata"]["uid"]}},
                        "spec": object["spec"]})
                })
                .collect(),
        )),
    );
    for name in &names {
        provider.kubectl(&[
            "-n",
            &provider_ns,
            "patch",
            "widget",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &json!({"status": {"phase": format!("ready-{name}")}}).to_string(),
        ]);
    }
    let provider_before = provider_widgets();
    assert_eq!(provider_before.len(), OBJECTS);

    // A dry run says what it would do and changes nothing.
    let (ok, said) = migrate(&app.kubeconfig, &["--dry-run"]);
    assert!(ok, "{said}");
    assert!(
        said.contains(&format!("{OBJECTS} provider copies to adopt")),
        "{said}"
    );
    let export_object = provider_export("json");
    assert!(
        !export_object.contains("bindery.dev/managed"),
        "{export_object}"
    );
    assert!(
        app.kubectl_output(&["get", "crd", CRD], None)
            .status
            .success()
    );

    // An app object the konnector never synced stops the move before
    // anything is removed.
    app.kubectl_with_stdin(
        &["create", "-f", "-"],
        Some(
            &json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
                "metadata": {"name": "unsynced", "namespace": "default"}, "spec": {"size": "s"}})
            .to_string(),
        ),
    );
    let (ok, said) = migrate(&app.kubeconfig, &[]);
    assert!(!ok, "the move stopped: {said}");
    assert!(said.contains("default/unsynced"), "{said}");
    assert!(
        app.kubectl_output(&["get", "crd", CRD], None)
            .status
            .success(),
        "the CRD is kept"
    );
    app.kubectl(&["-n", "default", "delete", "widget", "unsynced"]);

    // Run again, it finishes.
    let (ok, said) = migrate(&app.kubeconfig, &[]);
    assert!(ok, "{said}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while app
        .kubectl_output(&["get", "crd", CRD], None)
        .status
        .success()
    {
        assert!(Instant::now() < deadline, "the copied CRD is gone");
        std::thread::sleep(Duration::from_millis(300));
    }
    let replicas = app.kubectl(&[
        "-n",
        "kube-bind",
        "get",
        "deployment",
        "konnector",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    assert_eq!(replicas, "0", "the konnector is stopped");

    // Nothing was deleted on the provider, and bindery serves the same
    // objects to the consumer: same uids, spec and status.
    let provider_after = provider_widgets();
    assert_eq!(provider_after.len(), OBJECTS);
    let through = bindery().endpoint(&consumer);
    let path = format!("/apis/{GROUP}/v1/namespaces/default/widgets");
    let deadline = Instant::now() + Duration::from_secs(60);
    let served = loop {
        let output = Command::new("curl")
            .args(["-sk", "--cert"])
            .arg(&through.cert)
            .arg("--key")
            .arg(&through.key)
            .arg(format!("{}{path}", through.base_url))
            .output()
            .expect("curl runs");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let listed = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["items"].as_array().cloned())
            .unwrap_or_default();
        if listed.len() == OBJECTS {
            break listed;
        }
        assert!(
            Instant::now() < deadline,
            "bindery serves the {OBJECTS} objects: {text}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    for before in &provider_before {
        let name = &before["metadata"]["name"];
        let after = served
            .iter()
            .find(|o| &o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{name} is served"));
        assert_eq!(
            after["metadata"]["uid"], before["metadata"]["uid"],
            "{name}"
        );
        assert_eq!(after["metadata"]["namespace"], "default", "{name}");
        assert_eq!(after["spec"], before["spec"], "{name}");
        assert_eq!(after["status"], before["status"], "{name}");
    }

    // The last step: the app cluster registered for the export that exists,
    // by a provider administrator (one who may update it; a binder holding
    // only `bind` on templates may not).
    let (binder, token) = binder_token(true);
    let bind_export = |token: &str| {
        bindery_command_for(&bindery().url, "bind", &app.kubeconfig)
            .args(["--export", &export])
            .env("BINDERY_TOKEN", token)
            .output()
            .expect("bindery runs")
    };
    let refused = bind_export(&token);
    assert!(
        !refused.status.success(),
        "a binder may not bind an export it may not update"
    );
    let account = binder.rsplit(':').next().unwrap().to_string();
    provider.kubectl(&[
        "-n",
        &cluster_ns,
        "create",
        "role",
        "export-admin",
        "--verb=update",
        "--resource=apiserviceexports.kube-bind.io",
    ]);
    provider.kubectl(&[
        "-n",
        &cluster_ns,
        "create",
        "rolebinding",
        "export-admin",
        "--role=export-admin",
        &format!("--serviceaccount=binders:{account}"),
    ]);
    // Refusals are cached a while (as kube-apiserver's authorizer caches
    // them): the grant takes effect within that while.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut bound = bind_export(&token);
    while !bound.status.success() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(2));
        bound = bind_export(&token);
    }
    succeeded("bind --export", &bound);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listed = app.kubectl_output(&["-n", "default", "get", "widgets", "-o", "json"], None);
        let served = if listed.status.success() {
            items(&String::from_utf8_lossy(&listed.stdout))
        } else {
            Vec::new()
        };
        let uids: std::collections::BTreeSet<String> = served
            .iter()
            .filter_map(|o| o["metadata"]["uid"].as_str().map(str::to_string))
            .collect();
        let wanted: std::collections::BTreeSet<String> = provider_before
            .iter()
            .filter_map(|o| o["metadata"]["uid"].as_str().map(str::to_string))
            .collect();
        if uids == wanted {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl in the app cluster lists the moved objects through bindery: {}",
            String::from_utf8_lossy(&listed.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // Run again: nothing left to do, nothing changes.
    let (ok, said) = migrate(&app.kubeconfig, &["--export", &export]);
    assert!(ok, "{said}");
    assert!(
        said.contains(&format!("{OBJECTS} adopted already")),
        "{said}"
    );
    let (ok, said) = migrate(&app.kubeconfig, &[]);
    assert!(ok && said.contains("Nothing to move"), "{said}");
    assert_eq!(provider_widgets().len(), OBJECTS);
    for namespace in [&provider_ns, &cluster_ns] {
        provider.kubectl(&["delete", "namespace", namespace, "--wait=false"]);
    }
}
