//! The whole move on kube-bind v0.8.2's own konnector and backend (issue 33,
//! item 3): an app cluster the real konnector bound to two exports of one
//! provider, where bindery runs beside kube-bind, moves one of them with
//! `bindery migrate --export` (interrupted, and with the konnector coming
//! back in the middle) and `bindery bind --export`; the other stays with
//! kube-bind. Afterwards every object of both clusters is what it should
//! be, and the konnector, started again for the binding that stays, keeps
//! syncing that one and deletes nothing of the moved one.

use crate::fixture::{Cluster, own_app_cluster, own_provider_cluster, repo_root, scratch_dir};
use crate::kube_bind_live::{
    Running, apply, bindery_beside_kube_bind, binding_crd_installed, get_json, kube_bind_binaries,
    kube_bind_cluster_namespace, start_backend, start_konnector, wait_for, write,
};
use crate::migrate::migrate_from;
use bindery::controllers::naming::cluster_namespace;
use bindery::translate::identity::EXPORT_LABEL;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The export that moves, and the one that stays with kube-bind.
const MOVED: &str = "postgresqlinstances.db.example.com";
const STAYING: &str = "servicebindings.anynines.com";

/// The objects of `resource` on `cluster` (all namespaces), by
/// `<namespace>/<name>`.
fn objects(cluster: &Cluster, resource: &str) -> BTreeMap<String, Value> {
    let listed = get_json(cluster, &[resource, "-A"]).unwrap_or_default();
    listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            (
                format!(
                    "{}/{}",
                    o["metadata"]["namespace"].as_str().unwrap_or_default(),
                    o["metadata"]["name"].as_str().unwrap_or_default()
                ),
                o.clone(),
            )
        })
        .collect()
}

/// `<name>` → uid of the objects of `resource` on `cluster`.
fn uids(cluster: &Cluster, resource: &str) -> BTreeMap<String, Value> {
    objects(cluster, resource)
        .into_iter()
        .map(|(key, o)| {
            let name = key.rsplit('/').next().unwrap_or_default().to_string();
            (name, o["metadata"]["uid"].clone())
        })
        .collect()
}

/// The request kube-bind's CLI makes for `crd` (`<plural>.<group>`) in the
/// cluster namespace; waits until kube-bind's backend made its export.
fn request(provider: &Cluster, namespace: &str, crd: &str, programs: &[&Running]) {
    let (resource, group) = crd.split_once('.').expect("<plural>.<group>");
    apply(
        provider,
        &json!({"apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportRequest",
            "metadata": {"name": crd, "namespace": namespace},
            "spec": {"resources": [{"group": group, "resource": resource, "versions": ["v1"]}]}}),
    );
    wait_for(
        &format!("kube-bind's backend makes the export of {crd}"),
        120,
        programs,
        || {
            get_json(provider, &["-n", namespace, "apiserviceexportrequest", crd])
                .is_some_and(|r| r["status"]["phase"] == "Succeeded")
        },
    );
}

/// A CRD exported the kube-bind way on `provider`, from `deploy/examples`.
fn exported_crd(provider: &Cluster, file: &str, crd: &str) {
    let path = repo_root().join("deploy/examples").join(file);
    provider.kubectl(&["apply", "-f", &path.to_string_lossy()]);
    provider.kubectl_wait(&[
        "--for=condition=Established",
        "--timeout=60s",
        &format!("crd/{crd}"),
    ]);
    provider.kubectl(&[
        "label",
        "--overwrite",
        "crd",
        crd,
        "kube-bind.io/exported=true",
    ]);
}

/// Runs `during` while kubectl in `app` lists the moved resource in
/// namespace `shop` over and over; what `during` returned, and the longest
/// time the list failed in a row.
fn reads_during<T>(app: &Cluster, during: impl FnOnce() -> T) -> (T, Duration) {
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let mut longest = Duration::ZERO;
            let mut failing_since: Option<Instant> = None;
            while !done.load(Ordering::Relaxed) {
                let listed = app.kubectl_output(&["-n", "shop", "get", MOVED], None);
                let now = Instant::now();
                match (listed.status.success(), failing_since) {
                    (true, Some(since)) => {
                        longest = longest.max(now - since);
                        failing_since = None;
                    }
                    (false, None) => failing_since = Some(now),
                    _ => {}
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            if let Some(since) = failing_since {
                longest = longest.max(Instant::now() - since);
            }
            longest
        });
        let result = during();
        done.store(true, Ordering::Relaxed);
        (result, reader.join().expect("the reader"))
    })
}

fn postgres(name: &str, plan: &str, owner: Option<(&str, &str)>) -> Value {
    let mut object = json!({"apiVersion": "db.example.com/v1", "kind": "PostgreSQLInstance",
        "metadata": {"name": name, "namespace": "shop"}, "spec": {"plan": plan}});
    if let Some((name, uid)) = owner {
        object["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid}]);
    }
    object
}

#[test]
fn one_binding_moves_off_kube_binds_own_konnector_and_the_other_stays_with_it() {
    let binaries = kube_bind_binaries();
    let provider = own_provider_cluster("kube-bind-move");
    let app = own_app_cluster("kube-bind-move");
    let bindery = bindery_beside_kube_bind(&provider, &binaries, "move-bindery", &[]);
    let url = bindery.bindery_url();
    exported_crd(&provider, "servicebindings-crd.yaml", STAYING);
    // A selectable field, which kube-bind's backend leaves out of the
    // BoundSchema it makes (issue 33, finding 9: the taken-over BoundSchema
    // then read as an update waiting, though nothing had changed).
    provider.kubectl(&[
        "patch",
        "crd",
        MOVED,
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/spec/versions/0/selectableFields","value":[{"jsonPath":".spec.plan"}]}]"#,
    ]);
    let backend = start_backend(&binaries, &provider, "move-backend", "kube-bind-");

    // Bound as kube-bind's CLI binds: the cluster namespace named after the
    // kube-system UID, one request per export.
    let identity = app.kube_system_uid();
    let cluster_ns = cluster_namespace("kube-bind-", &identity);
    let provider_ns = format!("{cluster_ns}-shop");
    let kubeconfig = kube_bind_cluster_namespace(&provider, &cluster_ns, &identity);
    for crd in [MOVED, STAYING] {
        request(&provider, &cluster_ns, crd, &[&backend, &bindery]);
    }
    app.kubectl(&["create", "namespace", "kube-bind"]);
    apply(
        &app,
        &json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "kubeconfig-move", "namespace": "kube-bind"},
            "stringData": {"kubeconfig": kubeconfig}}),
    );
    let konnector_kubeconfig = scratch_dir().join("kube-bind-move-app.kubeconfig");
    write(
        &konnector_kubeconfig,
        &std::fs::read_to_string(&app.kubeconfig).expect("the app kubeconfig"),
    );
    let konnector = |name: &str| start_konnector(&binaries, name, &konnector_kubeconfig, name);
    let first = konnector("move-konnector");
    binding_crd_installed(&app, &first);
    for crd in [MOVED, STAYING] {
        apply(
            &app,
            &json!({"apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceBinding",
                "metadata": {"name": crd},
                "spec": {"kubeconfigSecretRef": {"namespace": "kube-bind",
                    "name": "kubeconfig-move", "key": "kubeconfig"}}}),
        );
    }
    let programs = [&first, &backend, &bindery];
    for crd in [MOVED, STAYING] {
        wait_for(
            &format!("the konnector serves {crd} in the app cluster"),
            120,
            &programs,
            || {
                get_json(&app, &["crd", crd]).is_some_and(|crd| {
                    crate::kube_bind_live::condition_of(&crd, "Established")["status"] == "True"
                })
            },
        );
    }

    // The app cluster's objects: plain ones, one the app owns through a
    // ConfigMap, one that owns an app ConfigMap, and one of the export that
    // stays.
    app.kubectl(&["create", "namespace", "shop"]);
    app.kubectl(&["-n", "shop", "create", "configmap", "owner-of-one"]);
    let owner_uid = app.kubectl(&[
        "-n",
        "shop",
        "get",
        "configmap",
        "owner-of-one",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    for object in [
        postgres("orders", "small", None),
        postgres("edited", "small", None),
        postgres("leaving", "small", None),
        postgres("owned", "small", Some(("owner-of-one", &owner_uid))),
        postgres("owner", "small", None),
    ] {
        apply(&app, &object);
    }
    let owner_app_uid = app.kubectl(&[
        "-n",
        "shop",
        "get",
        MOVED,
        "owner",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    apply(
        &app,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "owned-by-owner", "namespace": "shop",
                "ownerReferences": [{"apiVersion": "db.example.com/v1",
                    "kind": "PostgreSQLInstance", "name": "owner", "uid": owner_app_uid}]}}),
    );
    apply(
        &app,
        &json!({"apiVersion": "anynines.com/v1", "kind": "ServiceBinding",
            "metadata": {"name": "creds", "namespace": "shop"},
            "spec": {"instanceName": "orders"}}),
    );
    wait_for(
        "the konnector syncs every object up",
        120,
        &programs,
        || uids(&provider, MOVED).len() == 5 && uids(&provider, STAYING).len() == 1,
    );
    provider.kubectl(&[
        "-n",
        &provider_ns,
        "patch",
        MOVED,
        "orders",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Ready"}}"#,
    ]);
    wait_for("the konnector syncs a status down", 60, &programs, || {
        get_json(&app, &["-n", "shop", MOVED, "orders"])
            .is_some_and(|o| o["status"]["phase"] == "Ready")
    });

    // The konnector stops (as its Deployment scaled to 0 would); what the
    // app does afterwards it never syncs.
    drop(first);
    std::thread::sleep(Duration::from_secs(2));
    app.kubectl(&[
        "-n",
        "shop",
        "patch",
        MOVED,
        "edited",
        "--type=merge",
        "-p",
        &json!({"spec": {"plan": "large"},
            "metadata": {"labels": {"team": "orders"}, "annotations": {"note": "mine"},
                "finalizers": ["kubebind.io/syncer", "app.example/protect"]}})
        .to_string(),
    ]);
    app.kubectl(&["-n", "shop", "delete", MOVED, "leaving", "--wait=false"]);
    let provider_before = uids(&provider, MOVED);
    let staying_before = objects(&provider, STAYING);

    let migrate = |extra: &[&str]| {
        let mut args = vec!["--export", MOVED];
        args.extend_from_slice(extra);
        migrate_from(&app.kubeconfig, &provider.kubeconfig, &args)
    };
    // Nothing of the provider's goes, and the export that stays keeps its
    // objects, whatever happens to the move.
    let nothing_lost = |when: &str| {
        let now = uids(&provider, MOVED);
        for (name, uid) in &provider_before {
            if name != "leaving" {
                assert_eq!(now.get(name), Some(uid), "{when}: provider copy {name}");
            }
        }
        assert_eq!(
            objects(&provider, STAYING).keys().collect::<Vec<_>>(),
            staying_before.keys().collect::<Vec<_>>(),
            "{when}: the export that stays"
        );
        assert!(
            get_json(&app, &["crd", STAYING]).is_some(),
            "{when}: the app cluster's CRD of the export that stays"
        );
    };

    // Stopped after the export is taken over.
    let (ok, said) = migrate(&["--stop-after", "2"]);
    assert!(!ok && said.contains("stopped after"), "{said}");
    nothing_lost("stopped after step 2");
    // Stopped after the copies are adopted.
    let (ok, said) = migrate(&["--stop-after", "3"]);
    assert!(!ok && said.contains("stopped after"), "{said}");
    nothing_lost("stopped after step 3");
    // The konnector comes back in the middle of the move: the move stops
    // before it removes anything, and the konnector deletes nothing.
    {
        let back = konnector("move-konnector-back");
        let (ok, said) = migrate(&[]);
        assert!(
            !ok && said.contains("a kube-bind konnector still runs"),
            "the move went on beside a konnector:\n{said}\n{}",
            back.tail()
        );
        assert!(
            get_json(&app, &["crd", MOVED]).is_some(),
            "the app cluster's CRD went beside a konnector"
        );
        nothing_lost("a konnector back mid-move");
    }
    // The rest of the move in one command, bind included, while kubectl in
    // the app cluster reads the API all along: it lacks the API only between
    // the copied CRD going and bindery serving, inside the command.
    std::thread::sleep(Duration::from_secs(2));
    let ca = crate::bindery::bindery().pki.join("bindery/serving-ca.crt");
    let ca = ca.to_string_lossy();
    let ((ok, said), outage) = reads_during(&app, || {
        migrate(&["--bindery", &url, "--certificate-authority", &ca])
    });
    assert!(ok, "{said}");
    // The binding that stays keeps kube-bind's account for the app cluster.
    assert!(
        said.contains("6. kube-bind's account kube-binder"),
        "{said}"
    );
    assert!(
        get_json(
            &provider,
            &["-n", &cluster_ns, "serviceaccount", "kube-binder"]
        )
        .is_some(),
        "kube-bind's account went while a binding stays with kube-bind"
    );
    assert!(
        said.contains("5. "),
        "the move bound the export itself:\n{said}"
    );
    eprintln!("the app cluster lacked {MOVED} for {outage:?} during the move");
    assert!(outage > Duration::ZERO, "the reader never saw the switch");
    assert!(
        app.kubectl_output(&["-n", "shop", "get", MOVED], None)
            .status
            .success(),
        "bindery serves the API once the move returns"
    );
    nothing_lost("after the move");
    let schema = get_json(&provider, &["-n", &cluster_ns, "boundschema", MOVED])
        .expect("the moved export's BoundSchema");
    assert_eq!(
        crate::kube_bind_live::condition_of(&schema, "SchemaInSync")["status"],
        "True",
        "{schema}"
    );
    assert!(
        get_json(&app, &["crd", MOVED]).is_none(),
        "the copied CRD is gone"
    );
    assert!(
        get_json(&app, &["apiservicebinding", STAYING]).is_some(),
        "kube-bind's binding of the export that stays is kept"
    );
    let moved = objects(&provider, MOVED);
    assert!(
        !moved.contains_key(&format!("{provider_ns}/leaving")),
        "an object being deleted in the app cluster is deleted"
    );
    let edited = &moved[&format!("{provider_ns}/edited")];
    assert_eq!(edited["spec"]["plan"], "large", "{edited}");
    assert_eq!(edited["metadata"]["labels"]["team"], "orders", "{edited}");
    assert_eq!(
        edited["metadata"]["annotations"]["note"], "mine",
        "{edited}"
    );
    assert!(
        edited["metadata"]["finalizers"]
            .to_string()
            .contains("app.example/protect"),
        "{edited}"
    );
    for (key, object) in &moved {
        assert!(
            object["metadata"]["labels"][EXPORT_LABEL].is_string(),
            "{key} is not adopted: {object}"
        );
    }

    // bindery's binding is not named as the export: kube-bind's konnector,
    // started again for the binding that stays, would pair the two.
    assert!(
        get_json(&app, &["apiservicebinding", MOVED]).is_none(),
        "kube-bind's binding of the moved export is gone, and bindery's is not named so"
    );
    assert!(get_json(&app, &["apiservicebinding", &format!("bindery.{MOVED}")]).is_some());
    let served = |app: &Cluster| -> BTreeMap<String, Value> {
        let listed = app.kubectl_output(&["-n", "shop", "get", MOVED, "-o", "json"], None);
        if !listed.status.success() {
            return BTreeMap::new();
        }
        serde_json::from_slice::<Value>(&listed.stdout).expect("JSON")["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|o| {
                (
                    o["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    o.clone(),
                )
            })
            .collect()
    };
    let expected: BTreeMap<String, Value> = provider_before
        .iter()
        .filter(|(name, _)| *name != "leaving")
        .map(|(name, uid)| (name.clone(), uid.clone()))
        .collect();
    let mut through_bindery = BTreeMap::new();
    wait_for(
        "kubectl in the app cluster lists the moved objects through bindery",
        90,
        &[&bindery],
        || {
            through_bindery = served(&app);
            through_bindery
                .iter()
                .map(|(name, o)| (name.clone(), o["metadata"]["uid"].clone()))
                .collect::<BTreeMap<_, _>>()
                == expected
        },
    );
    assert_eq!(through_bindery["orders"]["status"]["phase"], "Ready");
    assert_eq!(through_bindery["edited"]["spec"]["plan"], "large");
    assert_eq!(
        through_bindery["owned"]["metadata"]["ownerReferences"][0]["uid"],
        Value::String(owner_uid.clone()),
        "the moved object keeps its app owner: {}",
        through_bindery["owned"]
    );
    wait_for(
        "the app ConfigMap owned by a moved object names its owner as bindery serves it",
        60,
        &[&bindery],
        || {
            app.get_json("shop", "configmap", "owned-by-owner")
                .is_some_and(|c| c["metadata"]["ownerReferences"][0]["uid"] == expected["owner"])
        },
    );

    // The konnector starts again for the binding that stays: that one keeps
    // syncing both ways, and nothing of the moved export is deleted or
    // changed by it.
    let again = konnector("move-konnector-again");
    let programs = [&again, &backend, &bindery];
    apply(
        &app,
        &json!({"apiVersion": "anynines.com/v1", "kind": "ServiceBinding",
            "metadata": {"name": "creds-after", "namespace": "shop"},
            "spec": {"instanceName": "orders"}}),
    );
    wait_for(
        "the binding that stays syncs a new object up",
        120,
        &programs,
        || uids(&provider, STAYING).contains_key("creds-after"),
    );
    provider.kubectl(&[
        "-n",
        &provider_ns,
        "patch",
        STAYING,
        "creds",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"after-the-move"}}"#,
    ]);
    wait_for(
        "the binding that stays syncs a status down",
        60,
        &programs,
        || {
            get_json(&app, &["-n", "shop", STAYING, "creds"])
                .is_some_and(|o| o["status"]["phase"] == "after-the-move")
        },
    );
    // A while beside the konnector.
    std::thread::sleep(Duration::from_secs(15));
    let after = objects(&provider, MOVED);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        moved.keys().collect::<Vec<_>>(),
        "the konnector changed the moved export's objects:\n{}",
        again.tail()
    );
    for (key, object) in &after {
        assert_eq!(
            object["metadata"]["uid"], moved[key]["metadata"]["uid"],
            "{key}"
        );
        assert_eq!(object["spec"], moved[key]["spec"], "{key}");
        assert_eq!(
            object["metadata"]["finalizers"], moved[key]["metadata"]["finalizers"],
            "{key}: a finalizer the konnector would never take off again"
        );
        assert!(
            object["metadata"]["labels"][EXPORT_LABEL].is_string(),
            "{key} lost its identity: {object}"
        );
    }
    assert!(
        get_json(&app, &["crd", MOVED]).is_none(),
        "the konnector copied the moved CRD back:\n{}",
        again.tail()
    );
    let still: BTreeMap<String, Value> = served(&app)
        .iter()
        .map(|(name, o)| (name.clone(), o["metadata"]["uid"].clone()))
        .collect();
    assert_eq!(still, expected, "the app cluster's moved objects");
}
