//! Deletion without surprises, against the real provider and app clusters:
//! an export's deletion policy (`bindery.dev/deletion-policy`, Retain by
//! default) decides whether the consumer's objects go with the export or
//! with its binding, claimed Secrets included; nothing of another consumer
//! is touched; the export's RBAC goes with it; no finalizer is left behind.

use crate::controllers::{answered, run_with_input, wait_for_status};
use crate::export_status::{Export, in_sync};
use crate::fixture::{clusters, kubectl_path, unique_name};
use serde_json::json;
use std::time::{Duration, Instant};

const PATH: &str = "/apis/db.example.com/v1/namespaces/default/postgresqlinstances";

fn delete_policy() -> serde_json::Value {
    json!({"bindery.dev/deletion-policy": "Delete"})
}

/// Makes instance `name` in the consumer's `default` namespace, through
/// bindery.
fn make_instance(export: &Export, name: &str) {
    wait_for_status(&export.consumer, PATH, 200);
    let mut command = std::process::Command::new(kubectl_path());
    command
        .arg("--kubeconfig")
        .arg(&export.consumer.kubeconfig)
        .args(["-n", "default", "apply", "-f", "-"]);
    let manifest = format!(
        "apiVersion: db.example.com/v1\nkind: PostgreSQLInstance\nmetadata: {{name: {name}}}\nspec: {{plan: small}}\n"
    );
    let (ok, out) = run_with_input(command, Some(&manifest));
    assert!(ok, "{out}");
}

/// The instance names in the consumer's provider namespace for `default`.
fn provider_instances(export: &Export) -> Vec<String> {
    let out = clusters().provider.kubectl(&[
        "-n",
        &format!("{}-default", export.namespace),
        "get",
        "postgresqlinstances",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ]);
    out.split_whitespace().map(str::to_string).collect()
}

fn exists(args: &[&str]) -> bool {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    clusters()
        .provider
        .kubectl_output(&all, None)
        .status
        .success()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not after 60 s");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Deletes `export` and waits until it is gone for good.
pub(crate) fn delete_export(export: &Export) {
    clusters().provider.kubectl(&[
        "-n",
        &export.namespace,
        "delete",
        "apiserviceexport",
        &export.name,
        "--wait=false",
    ]);
    // Gone for good: the finalizer did its work and came off.
    wait_until("the export is gone", || {
        !exists(&["-n", &export.namespace, "apiserviceexport", &export.name])
    });
}

fn cluster_role(export: &Export) -> String {
    format!("bindery:export:{}:{}", export.namespace, export.name)
}

#[test]
fn deleting_an_export_under_delete_takes_only_that_consumers_objects() {
    let doomed = Export::requested(
        &unique_name("doomed"),
        &unique_name("doomed-cluster"),
        delete_policy(),
    );
    let bystander = Export::requested(
        &unique_name("bystander"),
        &unique_name("bystander-cluster"),
        json!({}),
    );
    let export = doomed.get("apiserviceexport", &doomed.name);
    assert_eq!(
        export["metadata"]["annotations"]["bindery.dev/deletion-policy"],
        "Delete"
    );
    assert!(
        export["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.contains(&json!("bindery.dev/cleanup"))),
        "{export}"
    );
    make_instance(&doomed, "orders");
    make_instance(&bystander, "orders");
    assert!(exists(&["clusterrole", &cluster_role(&doomed)]));
    // Secrets in the provider namespaces, as the provider's controller writes
    // them: the template claims those labelled part-of=postgresql.
    for (export, name, part_of) in [
        (&doomed, "orders-credentials", "postgresql"),
        (&doomed, "unclaimed", "something-else"),
        (&bystander, "orders-credentials", "postgresql"),
    ] {
        clusters().provider.kubectl(&[
            "-n",
            &format!("{}-default", export.namespace),
            "create",
            "secret",
            "generic",
            name,
            "--from-literal=password=x",
        ]);
        clusters().provider.kubectl(&[
            "-n",
            &format!("{}-default", export.namespace),
            "label",
            "secret",
            name,
            &format!("app.kubernetes.io/part-of={part_of}"),
        ]);
    }

    delete_export(&doomed);
    assert!(
        provider_instances(&doomed).is_empty(),
        "the consumer's objects went with the export"
    );
    assert_eq!(
        provider_instances(&bystander),
        ["orders"],
        "another consumer's object of the same name is untouched"
    );
    let doomed_secrets = |name: &str| {
        exists(&[
            "-n",
            &format!("{}-default", doomed.namespace),
            "secret",
            name,
        ])
    };
    assert!(!doomed_secrets("orders-credentials"), "claimed: cleaned up");
    assert!(doomed_secrets("unclaimed"), "not claimed: kept");
    assert!(exists(&[
        "-n",
        &format!("{}-default", bystander.namespace),
        "secret",
        "orders-credentials"
    ]));
    assert!(!exists(&["clusterrole", &cluster_role(&doomed)]));
    assert!(!exists(&[
        "-n",
        &format!("{}-default", doomed.namespace),
        "rolebinding",
        &format!("bindery:export:{}", doomed.name),
    ]));
    assert!(exists(&["clusterrole", &cluster_role(&bystander)]));
    wait_for_status(&bystander.consumer, PATH, 200);
}

#[test]
fn deleting_an_export_under_retain_keeps_objects_and_requesting_again_serves_them() {
    let name = unique_name("kept");
    let identity = unique_name("kept-cluster");
    let export = Export::requested(&name, &identity, json!({}));
    let hash = export.get("apiserviceexport", &name)["status"]["identityHash"].clone();
    make_instance(&export, "orders");

    delete_export(&export);
    assert_eq!(provider_instances(&export), ["orders"], "Retain keeps them");
    assert!(!exists(&["clusterrole", &cluster_role(&export)]));
    let secret = export.get("secret", &format!("{name}-identity"));
    assert!(
        secret["metadata"]["ownerReferences"].is_null(),
        "the identity Secret outlives the export: {secret}"
    );
    wait_for_status(&export.consumer, PATH, 404);

    // The same request again: the same identity, the same objects.
    clusters().provider.kubectl(&[
        "-n",
        "bindery-requests",
        "delete",
        "apiserviceexportrequest",
        &name,
    ]);
    let again = Export::requested(&name, &identity, json!({}));
    let status = answered(&name);
    assert_eq!(status["phase"], "Succeeded", "{status}");
    wait_until("the identity is recorded again", || {
        again.get("apiserviceexport", &name)["status"]["identityHash"] == hash
    });
    wait_for_status(&again.consumer, &format!("{PATH}/orders"), 200);
}

#[test]
fn unbinding_under_delete_takes_the_consumers_objects_and_keeps_the_export() {
    let export = Export::requested(
        &unique_name("unbound"),
        &unique_name("unbound-cluster"),
        delete_policy(),
    );
    export.register_app_cluster();
    export.bind(in_sync());
    export.wait_condition("Connected", "True", "APIServiceBindingFound");
    make_instance(&export, "orders");
    make_instance(&export, "invoices");

    clusters()
        .app
        .kubectl(&["delete", "apiservicebinding", &export.name]);
    export.wait_condition("Connected", "False", "APIServiceBindingNotFound");
    wait_until("the consumer's objects are deleted", || {
        provider_instances(&export).is_empty()
    });
    assert!(exists(&[
        "-n",
        &export.namespace,
        "apiserviceexport",
        &export.name
    ]));
}

#[test]
fn unbinding_under_retain_keeps_the_objects_for_the_next_binding() {
    let export = Export::requested(
        &unique_name("rebound"),
        &unique_name("rebound-cluster"),
        json!({}),
    );
    export.register_app_cluster();
    export.bind(in_sync());
    export.wait_condition("Connected", "True", "APIServiceBindingFound");
    make_instance(&export, "orders");
    clusters()
        .app
        .kubectl(&["delete", "apiservicebinding", &export.name]);
    export.wait_condition("Connected", "False", "APIServiceBindingNotFound");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(provider_instances(&export), ["orders"]);
    export.bind(in_sync());
    wait_for_status(&export.consumer, &format!("{PATH}/orders"), 200);
}

#[test]
fn deleting_a_consumers_cluster_namespace_leaves_no_finalizer_behind() {
    let export = Export::requested(
        &unique_name("leaving"),
        &unique_name("leaving-cluster"),
        delete_policy(),
    );
    make_instance(&export, "orders");
    clusters()
        .provider
        .kubectl(&["delete", "namespace", &export.namespace, "--wait=false"]);
    wait_until("the cluster namespace is gone", || {
        !exists(&["namespace", &export.namespace])
    });
    assert!(!exists(&["clusterrole", &cluster_role(&export)]));
    assert!(provider_instances(&export).is_empty());
}
