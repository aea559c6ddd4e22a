//! bindery and kube-bind's backend on one provider: bindery's controllers
//! act only on what is bindery's (`controllers/ownership.rs`), so a request
//! and an export made as kube-bind's backend makes them are left alone (no
//! status, finalizer, identity or RBAC), until they are marked bindery's.

use crate::controllers::install_examples;
use crate::fixture::{clusters, unique_name};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn get(namespace: &str, kind: &str, name: &str) -> Value {
    let text = clusters()
        .provider
        .kubectl(&["-n", namespace, "get", kind, name, "-o", "json"]);
    serde_json::from_str(&text).expect("JSON")
}

/// What bindery would have put on an export or a request (a request's
/// status is `{phase: Pending}` by the CRD's default, as kube-bind's CRD
/// has it).
fn touched(object: &Value) -> Vec<String> {
    let mut marks = Vec::new();
    let status = &object["status"];
    if !status.is_null() && *status != json!({}) && *status != json!({"phase": "Pending"}) {
        marks.push(format!("status {status}"));
    }
    if let Some(finalizers) = object["metadata"]["finalizers"].as_array() {
        marks.push(format!("finalizers {finalizers:?}"));
    }
    marks
}

#[test]
fn kube_binds_requests_and_exports_are_left_to_kube_bind() {
    install_examples();
    let provider = &clusters().provider;
    let namespace = format!("kube-bind-{}", unique_name("kb"));
    provider.kubectl(&["create", "namespace", &namespace]);
    let name = unique_name("pg");
    let resources = json!([{"group": "db.example.com", "resource": "postgresqlinstances",
        "versions": ["v1"]}]);
    let request = json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportRequest",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"resources": resources},
    });
    let export = json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExport",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"resources": resources, "informerScope": "Cluster", "isolation": "Prefixed"},
    });
    for object in [&request, &export] {
        provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&object.to_string()));
    }
    // bindery's controllers answer a request or an export within
    // milliseconds; five seconds of nothing is being left alone.
    std::thread::sleep(Duration::from_secs(5));
    for kind in ["apiserviceexportrequest", "apiserviceexport"] {
        let object = get(&namespace, kind, &name);
        assert_eq!(touched(&object), Vec::<String>::new(), "{kind} left alone");
    }
    let secrets = provider.kubectl(&["-n", &namespace, "get", "secrets", "-o", "name"]);
    assert!(
        !secrets.contains("identity"),
        "no identity Secret: {secrets}"
    );

    // Marked bindery's (as `bindery migrate` marks what it takes over), the
    // export is bindery's to serve: it gets the finalizer and an identity.
    provider.kubectl(&[
        "-n",
        &namespace,
        "label",
        "apiserviceexport",
        &name,
        "bindery.dev/managed=true",
    ]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let object = get(&namespace, "apiserviceexport", &name);
        if object["status"]["identityHash"].is_string()
            && object["metadata"]["finalizers"].as_array().is_some()
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the marked export was taken up: {object}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let request = get(&namespace, "apiserviceexportrequest", &name);
    assert_eq!(
        touched(&request),
        Vec::<String>::new(),
        "the request still kube-bind's"
    );
    provider.kubectl(&["delete", "namespace", &namespace, "--wait=false"]);
}
