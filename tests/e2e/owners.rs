//! ownerReferences through the app cluster, as a local CRD has them: the app
//! cluster's garbage collector acts on references between bound objects and
//! app-cluster objects, both ways (background, foreground, orphan), the
//! provider's never sees a reference to an object it does not hold, and
//! callers read back exactly the references they wrote. References between
//! bound objects stay on the provider, whose collector acts on them.

use crate::bind::{app_cluster_binds, app_cluster_namespace};
use crate::binder::bind_template;
use crate::controllers::install_examples;
use crate::fixture::{Cluster, clusters, unique_name};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const INSTANCES: &str = "postgresqlinstances.db.example.com";

/// Binds the postgresql template and waits until the app cluster serves
/// it; held, no other test binds into the app cluster.
pub(crate) fn bound() -> std::sync::MutexGuard<'static, ()> {
    let guard = app_cluster_binds();
    install_examples();
    bind_template("postgresql");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let output = clusters()
            .app
            .kubectl_output(&["get", INSTANCES, "-n", "default"], None);
        if output.status.success() {
            return guard;
        }
        assert!(
            Instant::now() < deadline,
            "the app cluster does not serve {INSTANCES}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn apply(cluster: &Cluster, object: &Value) {
    cluster.kubectl_with_stdin(&["apply", "-f", "-"], Some(&object.to_string()));
}

/// The object `kind/name` in `default`, or `None` once it is gone.
fn get(cluster: &Cluster, kind: &str, name: &str) -> Option<Value> {
    let output = cluster.kubectl_output(&["get", kind, name, "-n", "default", "-o", "json"], None);
    if output.status.success() {
        return Some(serde_json::from_slice(&output.stdout).expect("kubectl prints JSON"));
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("NotFound"),
        "kubectl get {kind} {name}: {stderr}"
    );
    None
}

fn uid(object: &Value) -> String {
    object["metadata"]["uid"]
        .as_str()
        .expect("a uid")
        .to_string()
}

/// A reference to `object` of `api_version`/`kind`, as controllers write one.
fn reference(api_version: &str, kind: &str, object: &Value, block: bool) -> Value {
    json!({
        "apiVersion": api_version, "kind": kind,
        "name": object["metadata"]["name"], "uid": object["metadata"]["uid"],
        "controller": true, "blockOwnerDeletion": block,
    })
}

fn config_map(name: &str) -> Value {
    apply(
        &clusters().app,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"a": "b"}}),
    );
    get(&clusters().app, "configmap", name).expect("the ConfigMap")
}

/// Creates an instance in the app cluster with `references` and returns it.
fn instance(name: &str, references: Value, finalizers: Value) -> Value {
    apply(
        &clusters().app,
        &json!({"apiVersion": "db.example.com/v1", "kind": "PostgreSQLInstance",
            "metadata": {"name": name, "namespace": "default",
                "ownerReferences": references, "finalizers": finalizers},
            "spec": {"plan": "small"}}),
    );
    get(&clusters().app, INSTANCES, name).expect("the instance")
}

/// The instance as the provider stores it.
fn on_provider(name: &str) -> Option<Value> {
    let namespace = format!("{}-default", app_cluster_namespace());
    let output = clusters().provider.kubectl_output(
        &["get", INSTANCES, name, "-n", &namespace, "-o", "json"],
        None,
    );
    output
        .status
        .success()
        .then(|| serde_json::from_slice(&output.stdout).expect("kubectl prints JSON"))
}

/// Waits until `kind/name` is gone from the app cluster.
fn until_gone(kind: &str, name: &str, why: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while get(&clusters().app, kind, name).is_some() {
        assert!(
            Instant::now() < deadline,
            "{kind}/{name} is still there: {why}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Both garbage collectors have had time to act on what was just written
/// (the provider's removed a dangling dependent within 300 ms on main).
fn collectors_settle() {
    std::thread::sleep(Duration::from_secs(4));
}

#[test]
fn a_bound_object_owned_by_an_app_config_map_lives_and_dies_with_it() {
    let _guard = bound();
    let app = &clusters().app;
    let owner = config_map(&unique_name("owner"));
    let name = unique_name("owned");
    let references = json!([reference("v1", "ConfigMap", &owner, true)]);
    instance(&name, references.clone(), json!([]));
    collectors_settle();

    let read = get(app, INSTANCES, &name).expect("the owned instance survives its creation");
    assert_eq!(
        read["metadata"]["ownerReferences"], references,
        "the references read back as written"
    );
    let stored = on_provider(&name).expect("stored on the provider");
    assert!(
        stored["metadata"]["ownerReferences"].is_null(),
        "the provider's collector never sees a reference to an app-cluster object: {}",
        stored["metadata"]
    );

    app.kubectl(&[
        "delete",
        "configmap",
        owner["metadata"]["name"].as_str().unwrap(),
        "-n",
        "default",
    ]);
    until_gone(INSTANCES, &name, "its owner ConfigMap was deleted");
    assert!(on_provider(&name).is_none(), "gone from the provider too");
}

#[test]
fn foreground_deletion_of_an_app_owner_waits_for_its_bound_dependent() {
    let _guard = bound();
    let app = &clusters().app;
    let owner_name = unique_name("fg-owner");
    let owner = config_map(&owner_name);
    let name = unique_name("fg-owned");
    instance(
        &name,
        json!([reference("v1", "ConfigMap", &owner, true)]),
        json!(["example.com/hold"]),
    );
    collectors_settle();
    let before = get(app, INSTANCES, &name).expect("the dependent");
    assert!(
        before["metadata"]["deletionTimestamp"].is_null(),
        "no collector deletes the dependent while its owner lives: {}",
        before["metadata"]
    );
    app.kubectl(&[
        "delete",
        "configmap",
        &owner_name,
        "-n",
        "default",
        "--cascade=foreground",
        "--wait=false",
    ]);
    // The collector deletes the dependent, which its finalizer holds; the
    // owner waits for it, as blockOwnerDeletion asks.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let dependent = get(app, INSTANCES, &name).expect("held by its finalizer");
        if !dependent["metadata"]["deletionTimestamp"].is_null() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the dependent was never deleted: {dependent}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    collectors_settle();
    let waiting = get(app, "configmap", &owner_name).expect("the owner waits for its dependent");
    assert_eq!(
        waiting["metadata"]["finalizers"],
        json!(["foregroundDeletion"]),
        "{}",
        waiting["metadata"]
    );
    app.kubectl(&[
        "patch",
        INSTANCES,
        &name,
        "-n",
        "default",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    until_gone(INSTANCES, &name, "its finalizer was removed");
    until_gone("configmap", &owner_name, "its last dependent is gone");
}

#[test]
fn orphan_deletion_of_an_app_owner_leaves_its_bound_dependent_without_the_reference() {
    let _guard = bound();
    let app = &clusters().app;
    let owner_name = unique_name("orphan-owner");
    let owner = config_map(&owner_name);
    let other = config_map(&unique_name("orphan-other"));
    let name = unique_name("orphan-owned");
    let kept = reference("v1", "ConfigMap", &other, false);
    let mut kept_uncontrolled = kept.clone();
    kept_uncontrolled["controller"] = json!(false);
    instance(
        &name,
        json!([
            reference("v1", "ConfigMap", &owner, true),
            kept_uncontrolled
        ]),
        json!([]),
    );
    app.kubectl(&[
        "delete",
        "configmap",
        &owner_name,
        "-n",
        "default",
        "--cascade=orphan",
    ]);
    until_gone("configmap", &owner_name, "deleted with orphan");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let orphan = get(app, INSTANCES, &name).expect("an orphan is not deleted");
        if orphan["metadata"]["ownerReferences"] == json!([kept_uncontrolled]) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the collector never removed the deleted owner's reference: {}",
            orphan["metadata"]
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    collectors_settle();
    assert!(get(app, INSTANCES, &name).is_some(), "the orphan stays");
}

#[test]
fn an_app_secret_owned_by_a_bound_object_is_collected_with_it() {
    let _guard = bound();
    let app = &clusters().app;
    let name = unique_name("secret-owner");
    let owner = instance(&name, json!([]), json!([]));
    let secret = unique_name("owned-secret");
    apply(
        app,
        &json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret, "namespace": "default",
                "ownerReferences": [reference("db.example.com/v1", "PostgreSQLInstance", &owner, true)]},
            "stringData": {"password": "x"}}),
    );
    collectors_settle();
    assert!(
        get(app, "secret", &secret).is_some(),
        "the app cluster's collector finds the bound owner"
    );
    app.kubectl(&["delete", INSTANCES, &name, "-n", "default"]);
    until_gone("secret", &secret, "its bound owner was deleted");
}

#[test]
fn references_between_bound_objects_stay_with_the_provider() {
    let _guard = bound();
    let app = &clusters().app;
    let parent_name = unique_name("parent");
    let parent = instance(&parent_name, json!([]), json!([]));
    let child_name = unique_name("child");
    let references = json!([reference(
        "db.example.com/v1",
        "PostgreSQLInstance",
        &parent,
        true
    )]);
    instance(&child_name, references.clone(), json!([]));
    collectors_settle();
    let stored = on_provider(&child_name).expect("the child is stored");
    assert_eq!(
        stored["metadata"]["ownerReferences"][0]["uid"],
        json!(uid(&parent)),
        "a reference to a bound owner is the provider's: {}",
        stored["metadata"]
    );
    let read = get(app, INSTANCES, &child_name).expect("the child lives with its parent");
    assert_eq!(read["metadata"]["ownerReferences"], references);
    app.kubectl(&["delete", INSTANCES, &parent_name, "-n", "default"]);
    until_gone(INSTANCES, &child_name, "its bound parent was deleted");
}

/// A reference the provider stored itself (kube-bind's konnector puts one
/// to the consumer's cluster Namespace on every cluster-scoped copy, and a
/// provider controller may add its own) names a provider object: on main
/// the app cluster read it, and its collector deleted the object as
/// dangling. The consumer never sees it, and its updates keep it.
#[test]
fn a_reference_the_provider_stored_is_never_the_app_clusters_and_outlives_its_updates() {
    let _guard = bound();
    let app = &clusters().app;
    let provider = &clusters().provider;
    let name = unique_name("kept");
    instance(&name, json!([]), json!([]));
    let namespace = format!("{}-default", app_cluster_namespace());
    let keeper = format!("keeper-{name}");
    apply(
        provider,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": keeper, "namespace": namespace}}),
    );
    let keeper_uid = provider.kubectl(&[
        "get",
        "configmap",
        &keeper,
        "-n",
        &namespace,
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let providers_own = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": keeper,
        "uid": keeper_uid.trim(), "controller": false, "blockOwnerDeletion": false});
    provider.kubectl(&[
        "patch",
        INSTANCES,
        &name,
        "-n",
        &namespace,
        "--type",
        "merge",
        "-p",
        &json!({"metadata": {"ownerReferences": [providers_own]}}).to_string(),
    ]);
    collectors_settle();

    let read =
        get(app, INSTANCES, &name).expect("the app cluster's collector leaves the instance alone");
    assert!(
        read["metadata"]["ownerReferences"].is_null(),
        "the provider's reference is not shown: {}",
        read["metadata"]
    );
    assert!(
        !read.to_string().contains(&keeper),
        "nothing names the provider's object: {read}"
    );

    app.kubectl(&["label", INSTANCES, &name, "-n", "default", "touched=yes"]);
    let mut replaced = get(app, INSTANCES, &name).expect("the instance");
    replaced["spec"]["plan"] = json!("large");
    app.kubectl_with_stdin(&["replace", "-f", "-"], Some(&replaced.to_string()));
    let stored = on_provider(&name).expect("stored on the provider");
    assert_eq!(stored["spec"]["plan"], "large", "the update is stored");
    assert_eq!(
        stored["metadata"]["labels"]["touched"], "yes",
        "so is the patch"
    );
    assert_eq!(
        stored["metadata"]["ownerReferences"],
        json!([providers_own]),
        "a patch and an update from the app cluster keep the provider's reference"
    );

    app.kubectl(&["delete", INSTANCES, &name, "-n", "default"]);
    provider.kubectl(&["delete", "configmap", &keeper, "-n", &namespace]);
}

/// kube-bind's konnector gives every cluster-scoped object of a `Prefixed`
/// (or `None`) export a reference to its consumer's cluster Namespace, so
/// that it goes with its consumer (issue 33, finding 7). bindery gives a
/// create the same, never shows it, and an update keeps it.
#[tokio::test]
async fn a_cluster_scoped_object_is_owned_by_its_cluster_namespace_as_kube_bind_has_it() {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
    const GROUP: &str = "owned.bindery.dev";
    const CRD: &str = "trophies.owned.bindery.dev";
    let provider = &clusters().provider;
    provider.install_open_crd(GROUP, "trophies", "Trophy", "Cluster");
    let consumer = crate::bindery::bindery().consumer("owned-cs", CRD, "trophies");
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(GROUP, "v1", "Trophy"));
    let api: Api<DynamicObject> = Api::all_with(consumer.client().await, &resource);
    let name = unique_name("cup");
    let trophy: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "Trophy",
        "metadata": {"name": name}, "spec": {"metal": "gold"}}))
    .unwrap();
    let created = api
        .create(&PostParams::default(), &trophy)
        .await
        .expect("created");
    assert_eq!(created.metadata.owner_references, None, "{created:?}");

    let namespace_uid = provider.kubectl(&[
        "get",
        "namespace",
        &consumer.cluster_namespace,
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let owner = json!([{"apiVersion": "v1", "kind": "Namespace",
        "name": consumer.cluster_namespace, "uid": namespace_uid.trim()}]);
    let stored = || -> Value {
        let text = provider.kubectl(&[
            "get",
            CRD,
            &format!("{}-{name}", consumer.cluster_namespace),
            "-o",
            "json",
        ]);
        serde_json::from_str(&text).expect("kubectl prints JSON")
    };
    assert_eq!(
        stored()["metadata"]["ownerReferences"],
        owner,
        "as kube-bind's konnector has it"
    );

    let mut read = api.get(&name).await.expect("read back");
    assert_eq!(
        read.metadata.owner_references, None,
        "never shown: {read:?}"
    );
    read.data["spec"]["metal"] = json!("silver");
    api.replace(&name, &PostParams::default(), &read)
        .await
        .expect("replaced");
    let after = stored();
    assert_eq!(after["spec"]["metal"], "silver", "the update is stored");
    assert_eq!(
        after["metadata"]["ownerReferences"], owner,
        "and keeps the reference"
    );
    let patch = json!({"spec": {"metal": "bronze"}});
    api.patch(&name, &Default::default(), &kube::api::Patch::Merge(&patch))
        .await
        .expect("patched");
    let after = stored();
    assert_eq!(after["spec"]["metal"], "bronze", "the patch is stored");
    assert_eq!(
        after["metadata"]["ownerReferences"], owner,
        "and keeps it too"
    );
    api.delete(&name, &Default::default())
        .await
        .expect("deleted");
}
