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
//! there lists them through the aggregated path. A dry run changes nothing.
//! App objects owned by moved objects, and moved objects owned by app
//! objects, keep their owners; an object being deleted stays deleted.
//! The move is interrupted after each step and halfway through steps 3 and
//! 4 (the hidden `--stop-after`), and an app object the konnector never
//! synced stops it before anything is removed; after each stop nothing is
//! lost, and running the move again goes on from there and finishes. The
//! administrator who bound the export with `--export` unbinds it.

use crate::binder::{binder_token, bindery_command_for, succeeded};
use crate::bindery::bindery;
use crate::fixture::{clusters, own_app_cluster, unique_name};
use bindery::controllers::naming::cluster_namespace;
use bindery::translate::identity::EXPORT_LABEL;
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
    migrate_from(app_kubeconfig, &clusters().provider.kubeconfig, extra)
}

/// `bindery migrate` of the app cluster of `app_kubeconfig` to the provider
/// of `provider_kubeconfig`, with `extra` flags: whether it succeeded, and
/// what it said.
pub(crate) fn migrate_from(
    app_kubeconfig: &std::path::Path,
    provider_kubeconfig: &std::path::Path,
    extra: &[&str],
) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_bindery"))
        .arg("migrate")
        .arg("--kubeconfig")
        .arg(app_kubeconfig)
        .arg("--provider-kubeconfig")
        .arg(provider_kubeconfig)
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
    // kube-bind bound this app cluster with an identity of its own (its
    // CLI's `--cluster-identity`, or its UI's), not the kube-system UID:
    // the cluster namespace is named after it and records it, and the
    // konnector's kubeconfig Secret names the namespace (issue 33, finding
    // 8: such app clusters could not move at all).
    let uid = app.kube_system_uid();
    let cluster_identity = format!("prod-eu-{}", &uid[..8]);
    let cluster_ns = cluster_namespace("kube-bind-", &cluster_identity);
    let consumer = cluster_ns.strip_prefix("kube-bind-").unwrap().to_string();
    let provider_ns = format!("{cluster_ns}-default");
    let export = unique_name("widgets");
    let provider_widgets =
        || items(&provider.kubectl(&["-n", &provider_ns, "get", CRD, "-o", "json"]));
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
    provider.kubectl_wait(&["--for=condition=Established", "crd", CRD]);
    provider.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster_ns,
                "annotations": {"backend.kube-bind.io/identity": cluster_identity}}})
            .to_string(),
        ),
    );
    provider.kubectl(&["create", "namespace", &provider_ns]);
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
    // kube-bind's account for the app cluster, as its backend makes it
    // when the app cluster binds: the token in the konnector's kubeconfig is
    // this account's.
    provider.kubectl(&["-n", &cluster_ns, "create", "serviceaccount", "kube-binder"]);
    provider.kubectl(&[
        "-n",
        &cluster_ns,
        "create",
        "rolebinding",
        "kube-binder",
        "--clusterrole=view",
        &format!("--serviceaccount={cluster_ns}:kube-binder"),
    ]);
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
    app.kubectl_wait(&["--for=condition=Established", "crd", CRD]);
    // kube-bind's own APIServiceBinding CRD (v0.8.2), as its konnector
    // installs it: without bindery's `spec.permissionClaims`.
    let binding_crd = crate::kube_bind_live::kube_bind_binaries()
        .join("crds/kube-bind.io_apiservicebindings.yaml");
    app.kubectl(&["apply", "-f", binding_crd.to_str().unwrap()]);
    app.kubectl_wait(&[
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
    let konnector_kubeconfig = json!({"apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "provider", "cluster": {"server": "https://provider.example"}}],
        "users": [{"name": "kube-binder", "user": {"token": "unused"}}],
        "contexts": [{"name": "provider", "context": {"cluster": "provider",
            "user": "kube-binder", "namespace": cluster_ns}}],
        "current-context": "provider"});
    app.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(
            &json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "kubeconfig-abcde", "namespace": "kube-bind"},
                "stringData": {"kubeconfig": konnector_kubeconfig.to_string()}})
            .to_string(),
        ),
    );
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
    let app_objects = items(&app.kubectl(&["-n", "default", "get", CRD, "-o", "json"]));
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
            CRD,
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &json!({"status": {"phase": format!("ready-{name}")}}).to_string(),
        ]);
    }
    let provider_before = provider_widgets();
    assert_eq!(provider_before.len(), OBJECTS);
    // What one app object holds of its own and the konnector never synced
    // (issue 33, finding 3): a spec edit not synced yet, a label, an
    // annotation and a finalizer added in the app cluster.
    let edited = names[0].clone();
    for change in [
        &["label", CRD, edited.as_str(), "team=orders"][..],
        &["annotate", CRD, edited.as_str(), "note=mine"],
        &[
            "patch",
            CRD,
            edited.as_str(),
            "--type=merge",
            "-p",
            r#"{"spec":{"size":"edited-in-the-app"}}"#,
        ],
        &[
            "patch",
            CRD,
            edited.as_str(),
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/metadata/finalizers/-","value":"app.example/protect"}]"#,
        ],
    ] {
        let mut args = vec!["-n", "default"];
        args.extend_from_slice(change);
        app.kubectl(&args);
    }

    // An object being deleted in the app cluster, held by a finalizer of
    // the app's (issue 33, finding 3: it came back after the move).
    let leaving = names[3].clone();
    app.kubectl(&[
        "-n",
        "default",
        "patch",
        CRD,
        &leaving,
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/metadata/finalizers/-","value":"app.example/protect"}]"#,
    ]);
    app.kubectl(&["-n", "default", "delete", CRD, &leaving, "--wait=false"]);

    // Owners both ways (issue 33, finding 3): an app ConfigMap owned by a
    // bound object (the app cluster's garbage collector deleted it as the
    // copied CRD went), and a bound object owned by an app ConfigMap (the
    // reference was lost).
    let owner = names[1].clone();
    let owner_uid = app_objects[1]["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let owner_provider_uid = provider_before[1]["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(provider_before[1]["metadata"]["name"], owner.as_str());
    app.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "owned-by-a-widget", "namespace": "default",
                    "ownerReferences": [{"apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
                        "name": owner, "uid": owner_uid}]},
                "data": {"k": "v"}})
            .to_string(),
        ),
    );
    app.kubectl(&["-n", "default", "create", "configmap", "owns-a-widget"]);
    let app_owner_uid = app.kubectl(&[
        "-n",
        "default",
        "get",
        "configmap",
        "owns-a-widget",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let owned = names[2].clone();
    app.kubectl(&[
        "-n",
        "default",
        "patch",
        CRD,
        &owned,
        "--type=merge",
        "-p",
        &json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
            "name": "owns-a-widget", "uid": app_owner_uid}]}})
        .to_string(),
    ]);
    let dependent = || app.get_json("default", "configmap", "owned-by-a-widget");

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

    // Interrupted after each step, and inside the steps that change one
    // object at a time, the move loses nothing, and running it again goes
    // on from there. After each stop: what the step did is done, the rest
    // is not, and every object is where it was (the provider's 100 with
    // their uids, spec and status; the app cluster's 100 while its CRD is
    // there).
    let app_widgets = || items(&app.kubectl(&["-n", "default", "get", CRD, "-o", "json"]));
    let nothing_lost = |after: &str| {
        let provider_now = provider_widgets();
        assert_eq!(provider_now.len(), OBJECTS, "after {after}");
        for (before, now) in provider_before.iter().zip(&provider_now) {
            // The edited object's spec becomes the app's in step 3.
            let fields: &[&[&str]] = if before["metadata"]["name"] == edited.as_str() {
                &[&["metadata", "uid"], &["status"]]
            } else {
                &[&["metadata", "uid"], &["spec"], &["status"]]
            };
            for field in fields {
                let at = |o: &Value| field.iter().fold(o.clone(), |v, k| v[*k].clone());
                assert_eq!(
                    at(now),
                    at(before),
                    "after {after}: {}",
                    before["metadata"]["name"]
                );
            }
        }
        if app
            .kubectl_output(&["get", "crd", CRD], None)
            .status
            .success()
        {
            // The object being deleted goes once step 4 releases it.
            let staying = |o: &&Value| o["metadata"]["name"] != leaving.as_str();
            let uids: Vec<Value> = app_widgets()
                .iter()
                .filter(staying)
                .map(|o| o["metadata"]["uid"].clone())
                .collect();
            let before: Vec<Value> = app_objects
                .iter()
                .filter(staying)
                .map(|o| o["metadata"]["uid"].clone())
                .collect();
            assert_eq!(uids, before, "after {after}: the app cluster's objects");
        }
    };
    let stop_after = |point: &str| {
        let (ok, said) = migrate(&app.kubeconfig, &["--stop-after", point]);
        assert!(!ok && said.contains("stopped after"), "{point}: {said}");
        nothing_lost(point);
    };
    let adopted = || {
        provider_widgets()
            .iter()
            .filter(|o| o["metadata"]["labels"][EXPORT_LABEL].is_string())
            .count()
    };
    let held = || {
        app_widgets()
            .iter()
            .filter(|o| {
                o["metadata"]["finalizers"]
                    .to_string()
                    .contains("kubebind.io/syncer")
            })
            .count()
    };
    let konnector_replicas = || {
        app.kubectl(&[
            "-n",
            "kube-bind",
            "get",
            "deployment",
            "konnector",
            "-o",
            "jsonpath={.spec.replicas}",
        ])
    };
    stop_after("1");
    assert_eq!(konnector_replicas(), "0", "the konnector is stopped");
    assert!(!provider_export("json").contains("bindery.dev/managed"));
    stop_after("2");
    let taken = provider_export("json");
    assert!(
        taken.contains("bindery.dev/managed") && taken.contains("identityHash"),
        "{taken}"
    );
    assert_eq!(adopted(), 0);
    stop_after("3.50");
    assert_eq!(adopted(), 50, "half adopted");

    // An app object the konnector never synced stops the move before
    // anything is removed (the rest is adopted first).
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
    app.kubectl(&["-n", "default", "delete", CRD, "unsynced"]);
    assert_eq!(adopted(), OBJECTS);
    nothing_lost("the unsynced object");

    stop_after("3");
    assert_eq!(held(), OBJECTS, "nothing released yet");
    stop_after("4.50");
    assert_eq!(held(), OBJECTS - 50, "half released");
    stop_after("4");
    let deadline = Instant::now() + Duration::from_secs(30);
    while app
        .kubectl_output(&["get", "crd", CRD], None)
        .status
        .success()
    {
        assert!(Instant::now() < deadline, "the copied CRD is gone");
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        app.kubectl_output(&["get", "apiservicebinding", &export], None)
            .status
            .success(),
        "kube-bind's binding is deleted last"
    );
    // The app cluster's garbage collector had the copied CRD's deletion to
    // act on: the dependent stays, its reference held aside.
    std::thread::sleep(Duration::from_secs(5));
    let holding = dependent().expect("the app ConfigMap owned by a moved object stays");
    assert!(
        holding["metadata"]["ownerReferences"].is_null(),
        "{holding}"
    );
    assert_eq!(
        holding["metadata"]["labels"]["bindery.dev/held-owner-references"], "true",
        "{holding}"
    );

    // Run again, it finishes, and names the identity to bind with.
    let (ok, said) = migrate(&app.kubeconfig, &[]);
    assert!(ok, "{said}");
    // No binding stays with kube-bind: its account goes, and with it the
    // token it left in the app cluster (issue 34, item 5).
    for kind in ["serviceaccount", "rolebinding"] {
        assert!(
            !provider
                .kubectl_output(&["-n", &cluster_ns, "get", kind, "kube-binder"], None)
                .status
                .success(),
            "kube-bind's {kind} kube-binder is left after the move:\n{said}"
        );
    }
    assert!(
        said.contains(&format!("cluster namespace {cluster_ns}"))
            && said.contains(&format!("--cluster-identity {cluster_identity}")),
        "{said}"
    );
    assert!(
        !app.kubectl_output(&["get", "apiservicebinding", &export], None)
            .status
            .success(),
        "kube-bind's binding is gone"
    );
    assert_eq!(konnector_replicas(), "0", "the konnector is stopped");

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
        assert_eq!(after["status"], before["status"], "{name}");
        if *name == leaving.as_str() {
            // Still being deleted, held by the app's finalizer only.
            assert!(
                after["metadata"]["deletionTimestamp"].is_string(),
                "{after}"
            );
            assert_eq!(
                after["metadata"]["finalizers"],
                json!(["app.example/protect"]),
                "{after}"
            );
        }
        if *name == owned.as_str() {
            assert_eq!(
                after["metadata"]["ownerReferences"],
                json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owns-a-widget",
                    "uid": app_owner_uid}]),
                "the reference to an app ConfigMap moved with the object: {after}"
            );
        }
        if *name == edited.as_str() {
            assert_eq!(after["spec"]["size"], "edited-in-the-app", "{after}");
            assert_eq!(after["metadata"]["labels"]["team"], "orders", "{after}");
            assert_eq!(after["metadata"]["annotations"]["note"], "mine", "{after}");
            assert!(
                after["metadata"]["finalizers"]
                    .to_string()
                    .contains("app.example/protect"),
                "{after}"
            );
        } else {
            assert_eq!(after["spec"], before["spec"], "{name}");
        }
    }

    // The last step: the app cluster registered for the export that exists,
    // by a provider administrator (one who may update it; a binder holding
    // only `bind` on templates may not).
    let (binder, token) = binder_token(true);
    let bind_export = |token: &str| {
        bindery_command_for(&bindery().url, "bind", &app.kubeconfig)
            .args(["--export", &export, "--cluster-identity", &cluster_identity])
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
        let listed = app.kubectl_output(&["-n", "default", "get", CRD, "-o", "json"], None);
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

    // `bind --export` put the held reference back, naming the owner as
    // bindery serves it; the app cluster's garbage collector finds it there
    // and keeps the dependent.
    let back = dependent().expect("the dependent is there after the bind");
    assert_eq!(
        back["metadata"]["ownerReferences"],
        json!([{"apiVersion": format!("{GROUP}/v1"), "kind": "Widget", "name": owner,
            "uid": owner_provider_uid}]),
        "{back}"
    );
    assert!(
        back["metadata"]["labels"]["bindery.dev/held-owner-references"].is_null(),
        "{back}"
    );
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        dependent().is_some(),
        "the app cluster's garbage collector keeps the dependent of a served owner"
    );

    // The app's controller lets the object being deleted go, through
    // bindery: it is gone, on the provider too.
    app.kubectl(&[
        "-n",
        "default",
        "patch",
        CRD,
        &leaving,
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while provider_widgets().len() != OBJECTS - 1 {
        assert!(
            Instant::now() < deadline,
            "the object being deleted is gone"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        provider_widgets()
            .iter()
            .all(|o| o["metadata"]["name"] != leaving.as_str())
    );

    // Run again: nothing left to do, nothing changes.
    // kube-bind's binding is gone: the identity is given.
    let (ok, said) = migrate(
        &app.kubeconfig,
        &["--export", &export, "--cluster-identity", &cluster_identity],
    );
    assert!(ok, "{said}");
    assert!(
        said.contains(&format!("{} adopted already", OBJECTS - 1)),
        "{said}"
    );
    let (ok, said) = migrate(&app.kubeconfig, &[]);
    assert!(ok && said.contains("Nothing to move"), "{said}");
    assert_eq!(provider_widgets().len(), OBJECTS - 1);

    // An administrator who may update the export, and holds `bind` on no
    // template, unbinds it (there is no template of its name; on main a
    // 403): the export goes, the objects stay on the provider (deletion
    // policy Retain).
    let (administrator, admin_token) = binder_token(false);
    provider.kubectl(&[
        "-n",
        &cluster_ns,
        "create",
        "rolebinding",
        "export-admin-only",
        "--role=export-admin",
        &format!(
            "--serviceaccount=binders:{}",
            administrator.rsplit(':').next().unwrap()
        ),
    ]);
    succeeded(
        "unbind",
        &bindery_command_for(&bindery().url, "unbind", &app.kubeconfig)
            .args([&export, "--cluster-identity", &cluster_identity])
            .env("BINDERY_TOKEN", &admin_token)
            .output()
            .expect("bindery runs"),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while provider
        .kubectl_output(
            &["-n", &cluster_ns, "get", "apiserviceexport", &export],
            None,
        )
        .status
        .success()
    {
        assert!(Instant::now() < deadline, "the export is gone");
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(provider_widgets().len(), OBJECTS - 1);
    provider.kubectl(&[
        "-n",
        &provider_ns,
        "patch",
        CRD,
        &edited,
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    for namespace in [&provider_ns, &cluster_ns] {
        provider.kubectl(&["delete", "namespace", namespace, "--wait=false"]);
    }
}

/// A konnector that still runs, whatever its Deployment is called, stops
/// the move at step 1, before anything is taken over or removed: it would
/// delete every provider copy as the app cluster's CRD goes (issue 33,
/// finding 4: a second konnector deleted all six copies and `migrate`
/// printed `Done`). kube-bind v0.8.2's own konnector runs here as a process.
#[test]
fn a_konnector_still_running_stops_the_move_before_anything_is_removed() {
    use crate::kube_bind_live::{kube_bind_binaries, start_konnector};
    let binaries = kube_bind_binaries();
    let app = own_app_cluster("migrate-konnector");
    let konnector = start_konnector(
        &binaries,
        "migrate-konnector",
        &app.kubeconfig,
        "another-konnector",
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while !app
        .kubectl_output(&["-n", "kube-system", "get", "lease", "kube-bind"], None)
        .status
        .success()
        || !app
            .kubectl_output(&["get", "crd", "apiservicebindings.kube-bind.io"], None)
            .status
            .success()
    {
        assert!(
            Instant::now() < deadline,
            "the konnector never took its Lease or installed its CRDs:\n{}",
            konnector.tail()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    app.kubectl_wait(&[
        "--for=condition=Established",
        "crd/apiservicebindings.kube-bind.io",
    ]);
    let export = unique_name("widgets");
    app.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(
            &json!({"apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceBinding",
                "metadata": {"name": export},
                "spec": {"kubeconfigSecretRef": {"namespace": "kube-bind",
                    "name": "kubeconfig-nowhere", "key": "kubeconfig"}}})
            .to_string(),
        ),
    );
    let started = Instant::now();
    let (moved, log) = migrate(&app.kubeconfig, &[]);
    assert!(
        !moved,
        "the move went on beside a running konnector:\n{log}"
    );
    assert!(
        log.contains("a kube-bind konnector still runs in the app cluster")
            && log.contains("Lease kube-system/kube-bind was renewed"),
        "{log}"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(20),
        "the Leases were watched for less than the konnector holds one"
    );
    assert!(!log.contains("2. "), "it went past step 1:\n{log}");
    app.kubectl(&["get", "apiservicebinding", &export]);
}

/// The condition `type_` of `object`'s status, if it has one.
fn condition(object: &Value, type_: &str) -> Option<Value> {
    object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .cloned()
}

/// A konnector started again in an app cluster bindery serves (as GitOps
/// scales a Deployment back up after a move) reinstalls kube-bind's
/// APIServiceBinding CRD, which lacks `spec.permissionClaims`, and from then
/// on kube-apiserver drops the field from every read of bindery's binding
/// (issue 33, finding 2). The claims stay in force: a provider Secret made
/// afterwards is still copied down. kube-bind v0.8.2's own konnector runs
/// here as a process.

#[test]
fn a_konnector_started_again_leaves_binderys_claims_in_force() {
    use crate::kube_bind_live::{kube_bind_binaries, start_konnector};
    crate::controllers::install_examples();
    let binaries = kube_bind_binaries();
    let app = own_app_cluster("migrate-claims");
    let provider = &clusters().provider;
    let selector = unique_name("again");
    let template = unique_name("konnector-again");
    provider.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(
            &json!({"apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportTemplate",
                "metadata": {"name": template},
                "spec": {"scope": "Namespaced",
                    "resources": [{"group": "anynines.com", "resource": "servicebindings"}],
                    "permissionClaims": [{"group": "", "resource": "secrets",
                        "selector": {"labelSelector": {"matchLabels": {"kb-again": selector}}}}],
                    "namespaces": [{"name": "default"}]}})
            .to_string(),
        ),
    );
    let (_, token) = binder_token(true);
    let bind = |what: &str| {
        succeeded(
            what,
            &bindery_command_for(&bindery().url, "bind", &app.kubeconfig)
                .args(["--template", &template])
                .env("BINDERY_TOKEN", &token)
                .output()
                .expect("bindery runs"),
        )
    };
    bind("bind --template");
    let provider_namespace = format!(
        "{}-default",
        cluster_namespace("kube-bind-", &app.kube_system_uid())
    );
    let provider_secret = |name: &str| {
        provider.kubectl_with_stdin(
            &["apply", "-f", "-"],
            Some(
                &json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": name, "namespace": provider_namespace,
                        "labels": {"kb-again": selector}},
                    "stringData": {"password": name}})
                .to_string(),
            ),
        );
    };
    let copied_down = |name: &str, why: &str| {
        let deadline = Instant::now() + Duration::from_secs(90);
        while app.get_json("default", "secret", name).is_none() {
            assert!(
                Instant::now() < deadline,
                "{why}: {name} never reached the app cluster"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    provider.wait_found(&["namespace", &provider_namespace], Duration::from_secs(60));
    provider_secret("before");
    copied_down("before", "bound with a claim");

    let binding_crd_has_claims = || {
        let crd: Value = serde_json::from_str(&app.kubectl(&[
            "get",
            "crd",
            "apiservicebindings.kube-bind.io",
            "-o",
            "json",
        ]))
        .expect("JSON");
        crd["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| {
                !v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
                    ["permissionClaims"]
                    .is_null()
            })
    };
    assert!(binding_crd_has_claims(), "bind installed bindery's schema");
    {
        let konnector = start_konnector(
            &binaries,
            "migrate-claims-konnector",
            &app.kubeconfig,
            "konnector-again",
        );
        let deadline = Instant::now() + Duration::from_secs(120);
        while binding_crd_has_claims() {
            assert!(
                Instant::now() < deadline,
                "the konnector never reinstalled its CRD:\n{}",
                konnector.tail()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        // The konnector judges bindery's binding (its Secret is no
        // kube-bind kubeconfig), and makes Ready its own; bindery leaves it
        // (on main the two rewrote Ready after each other without end).
        let bindings =
            || items(&app.kubectl(&["get", "apiservicebindings.kube-bind.io", "-o", "json"]));
        let judged = |binding: &Value| {
            condition(binding, "SecretValid").is_some_and(|c| c["status"] == "False")
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !bindings().iter().all(judged) {
            assert!(
                Instant::now() < deadline,
                "the konnector never judged bindery's binding:\n{}",
                konnector.tail()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        let versions = || -> Vec<Value> {
            bindings()
                .iter()
                .map(|b| b["metadata"]["resourceVersion"].clone())
                .collect()
        };
        std::thread::sleep(Duration::from_secs(2));
        let settled = versions();
        std::thread::sleep(Duration::from_secs(8));
        assert_eq!(
            versions(),
            settled,
            "bindery's binding is rewritten: {:#}",
            Value::Array(bindings())
        );
    }
    // kube-apiserver now prunes the field from reads of bindery's binding.
    let bindings = app.kubectl(&["get", "apiservicebindings.kube-bind.io", "-o", "json"]);
    let listed = items(&bindings);
    assert!(!listed.is_empty(), "{bindings}");
    assert!(
        listed
            .iter()
            .all(|b| b["spec"]["permissionClaims"].is_null()),
        "{bindings}"
    );
    provider_secret("after");
    copied_down("after", "after the konnector reinstalled kube-bind's CRD");

    // With the konnector gone, the next bind takes its judgement back, and
    // Ready is bindery's again.
    bind("bind --template, again");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listed = items(&app.kubectl(&["get", "apiservicebindings.kube-bind.io", "-o", "json"]));
        let ours = |b: &Value| {
            condition(b, "SecretValid").is_none()
                && condition(b, "Ready").is_some_and(|c| c["status"] == "True")
        };
        if listed.iter().all(ours) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the konnector's judgement stays: {:#}",
            Value::Array(listed)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
