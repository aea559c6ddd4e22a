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

/// Installing bindery leaves kube-bind's konnectors writing: its admission
/// policy holds bindery's own consumer accounts (`bindery-consumer`) to
/// bindery's identity labels, and leaves the account kube-bind gives each
/// konnector (`kube-binder` in the same cluster namespaces) alone (issue
/// 33, finding 0: the konnector was denied 27 times in its first second).
#[test]
fn kube_binds_konnector_account_writes_beside_bindery_and_bindery_accounts_do_not() {
    install_examples();
    let provider = &clusters().provider;
    // The policy is in force (bindery's leader applies it at start).
    let deadline = Instant::now() + Duration::from_secs(60);
    while !provider
        .kubectl_output(
            &[
                "get",
                "validatingadmissionpolicybinding",
                "bindery.dev-identity",
            ],
            None,
        )
        .status
        .success()
    {
        assert!(
            Instant::now() < deadline,
            "bindery's admission policy never appeared"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let namespace = format!("kube-bind-{}", unique_name("kb"));
    provider.kubectl(&["create", "namespace", &namespace]);
    for account in ["kube-binder", "bindery-consumer"] {
        provider.kubectl(&[
            "-n",
            &namespace,
            "create",
            "rolebinding",
            account,
            "--clusterrole=edit",
            &format!("--serviceaccount={namespace}:{account}"),
        ]);
    }
    let create_as = |account: &str, name: &str| {
        let output = provider.kubectl_output(
            &[
                "-n",
                &namespace,
                "create",
                "configmap",
                name,
                &format!("--as=system:serviceaccount:{namespace}:{account}"),
            ],
            None,
        );
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    // What the konnector writes (a ConfigMap as it syncs a claimed one, no
    // bindery label): admitted, at once and again.
    for name in ["synced-1", "synced-2"] {
        let (admitted, error) = create_as("kube-binder", name);
        assert!(admitted, "kube-bind's konnector account refused: {error}");
    }
    // bindery's own account with no export and no labels: refused.
    let (admitted, error) = create_as("bindery-consumer", "unlabelled");
    assert!(
        !admitted,
        "bindery's consumer account wrote an unlabelled object"
    );
    assert!(error.contains("bindery.dev-identity"), "{error}");
    provider.kubectl(&["delete", "namespace", &namespace, "--wait=false"]);
}

/// An object a consumer makes through bindery carries the annotations
/// kube-bind's konnector puts on every object it syncs up
/// (`kube-bind.io/cluster-namespace`, `kube-bind.io/consumer-namespace`),
/// so a provider controller written for kube-bind finds it; the consumer
/// never sees them and cannot set them (issue 33, finding 7).
#[test]
fn objects_made_through_bindery_carry_kube_binds_marks_the_consumer_never_sees() {
    use crate::workspace::consumer_kubectl;
    install_examples();
    let consumer = crate::bindery::bindery().consumer(
        &unique_name("marks"),
        "postgresqlinstances.db.example.com",
        "pg-marks",
    );
    let object = json!({"apiVersion": "db.example.com/v1", "kind": "PostgreSQLInstance",
        "metadata": {"name": "orders", "namespace": "shop", "annotations": {"team": "a"}},
        "spec": {"plan": "small"}});
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let output = consumer_kubectl(&consumer, &["apply", "-f", "-"], Some(&object.to_string()));
        if output.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the consumer's create: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let provider_namespace = format!("{}-shop", consumer.cluster_namespace);
    let stored = get(&provider_namespace, "postgresqlinstance", "orders");
    let annotations = &stored["metadata"]["annotations"];
    assert_eq!(
        annotations["kube-bind.io/cluster-namespace"], consumer.cluster_namespace,
        "{stored}"
    );
    assert_eq!(
        annotations["kube-bind.io/consumer-namespace"], "shop",
        "{stored}"
    );
    assert_eq!(annotations["team"], "a", "{stored}");
    // The consumer's own read, with its managed fields: none of them.
    let read = consumer_kubectl(
        &consumer,
        &[
            "-n",
            "shop",
            "get",
            "postgresqlinstance",
            "orders",
            "-o",
            "json",
            "--show-managed-fields",
        ],
        None,
    );
    let read_text = String::from_utf8_lossy(&read.stdout);
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    assert!(!read_text.contains("kube-bind.io/"), "{read_text}");
    assert!(read_text.contains("\"team\": \"a\""), "{read_text}");
    // A consumer's edit keeps them; setting one is refused.
    let edited = consumer_kubectl(
        &consumer,
        &[
            "-n",
            "shop",
            "annotate",
            "postgresqlinstance",
            "orders",
            "team=b",
            "--overwrite",
        ],
        None,
    );
    assert!(
        edited.status.success(),
        "{}",
        String::from_utf8_lossy(&edited.stderr)
    );
    let stored = get(&provider_namespace, "postgresqlinstance", "orders");
    assert_eq!(stored["metadata"]["annotations"]["team"], "b", "{stored}");
    assert_eq!(
        stored["metadata"]["annotations"]["kube-bind.io/cluster-namespace"],
        consumer.cluster_namespace,
        "{stored}"
    );
    let forged = consumer_kubectl(
        &consumer,
        &[
            "-n",
            "shop",
            "annotate",
            "postgresqlinstance",
            "orders",
            "kube-bind.io/cluster-namespace=kube-bind-someone-else",
            "--overwrite",
        ],
        None,
    );
    assert!(!forged.status.success(), "a consumer set kube-bind's mark");
    let error = String::from_utf8_lossy(&forged.stderr);
    assert!(
        error.contains("metadata.annotations[kube-bind.io/cluster-namespace]"),
        "{error}"
    );
}
