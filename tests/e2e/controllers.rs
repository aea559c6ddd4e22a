//! The provider-side controllers, running inside the test run's `bindery
//! serve`, against the real provider: the examples in `deploy/examples/`
//! (a template and a request made by hand) become an export that kubectl
//! uses through the consumer endpoint; requests that cannot be met fail with
//! a message naming what is wrong; an export whose identity is in doubt stops
//! being served.

use crate::bindery::bindery;
use crate::fixture::{clusters, repo_root, unique_name};
use bindery::controllers::naming::cluster_namespace;
use serde_json::{Value, json};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Installs the example CRDs and templates once.
pub(crate) fn install_examples() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let _ = bindery();
        let provider = &clusters().provider;
        let examples = repo_root().join("deploy/examples");
        for file in ["postgresql-crd.yaml", "servicebindings-crd.yaml"] {
            let path = examples.join(file);
            provider.kubectl(&["apply", "-f", &path.to_string_lossy()]);
            provider.kubectl_wait(&[
                "--for=condition=Established",
                "--timeout=60s",
                "-f",
                &path.to_string_lossy(),
            ]);
        }
        provider.kubectl(&[
            "apply",
            "-f",
            &examples.join("templates.yaml").to_string_lossy(),
        ]);
        provider.kubectl(&["create", "namespace", "bindery-requests"]);
    });
}

/// Applies a request for `identity` in `bindery-requests` and waits until
/// it leaves Pending; returns its status.
pub(crate) fn request(name: &str, identity: &str, spec: Value) -> Value {
    request_annotated(name, identity, spec, json!({}))
}

/// [`request`], with more annotations on the request.
pub(crate) fn request_annotated(
    name: &str,
    identity: &str,
    spec: Value,
    mut annotations: Value,
) -> Value {
    install_examples();
    annotations["backend.kube-bind.io/identity"] = json!(identity);
    let object = json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportRequest",
        "metadata": {"name": name, "namespace": "bindery-requests",
            "annotations": annotations},
        "spec": spec,
    });
    clusters()
        .provider
        .kubectl_with_stdin(&["apply", "-f", "-"], Some(&object.to_string()));
    answered(name)
}

/// Waits until request `name` in `bindery-requests` leaves Pending; returns
/// its status.
pub(crate) fn answered(name: &str) -> Value {
    let provider = &clusters().provider;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = provider.kubectl(&[
            "-n",
            "bindery-requests",
            "get",
            "apiserviceexportrequest",
            name,
            "-o",
            "json",
        ]);
        let status = serde_json::from_str::<Value>(&text).expect("JSON")["status"].clone();
        let phase = status["phase"].as_str().unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "request {name} still {phase:?} after 60 s: {status}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn can_i(account_namespace: &str, args: &[&str]) -> bool {
    let subject = format!("system:serviceaccount:{account_namespace}:bindery-consumer");
    let mut all = vec!["auth", "can-i", "--as", &subject];
    all.extend_from_slice(args);
    let output = clusters().provider.kubectl_output(&all, None);
    String::from_utf8_lossy(&output.stdout).trim() == "yes"
}

#[test]
fn a_request_for_a_template_becomes_an_export_kubectl_can_use() {
    install_examples();
    let provider = &clusters().provider;
    // The by-hand example, as committed, with its own identity.
    let example = std::fs::read_to_string(repo_root().join("deploy/examples/request.yaml"))
        .expect("the example request");
    let identity = unique_name("app-cluster");
    let name = unique_name("postgresql");
    let text = example.replace("example-app-cluster", &identity).replace(
        "name: postgresql\n  namespace",
        &format!("name: {name}\n  namespace"),
    );
    assert!(text.contains(&identity) && text.contains(&name), "{text}");
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&text));
    let status = answered(&name);
    assert_eq!(status["phase"], "Succeeded", "{status}");
    let ns = cluster_namespace("kube-bind-", &identity);
    assert!(
        status["terminalMessage"].as_str().unwrap().contains(&ns),
        "{status}"
    );

    // What the request became.
    let get = |args: &[&str]| -> Value {
        let mut all = vec!["-n", &ns, "get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        serde_json::from_str(&provider.kubectl(&all)).expect("JSON")
    };
    let namespace: Value =
        serde_json::from_str(&provider.kubectl(&["get", "namespace", &ns, "-o", "json"])).unwrap();
    assert_eq!(
        namespace["metadata"]["annotations"]["backend.kube-bind.io/identity"],
        identity.as_str()
    );
    let binding = get(&["clusterbinding", "cluster"]);
    assert_eq!(binding["spec"]["providerPrettyName"], "bindery");
    let schema = get(&["boundschema", "postgresqlinstances.db.example.com"]);
    let versions: Vec<&str> = schema["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["v1", "v1beta1"], "every served version is bound");
    let export = get(&["apiserviceexport", &name]);
    assert_eq!(
        schema["metadata"]["ownerReferences"][0]["uid"],
        export["metadata"]["uid"]
    );
    assert_eq!(export["spec"]["permissionClaims"][0]["resource"], "secrets");
    let hash = export["status"]["identityHash"]
        .as_str()
        .expect("an identity hash");
    let secret = get(&["secret", &format!("{name}-identity")]);
    let key = base64_decode(secret["data"]["key"].as_str().unwrap());
    assert_eq!(key.len(), 32);
    assert_eq!(
        bindery::translate::IdentityHash::of_secret(&key).as_str(),
        hash
    );
    let seeded = get(&["apiservicenamespace", "default"]);
    assert_eq!(seeded["status"]["namespace"], format!("{ns}-default"));

    // RBAC: exactly the exported resources and claims, in the consumer's
    // own namespaces only.
    let own = format!("{ns}-default");
    assert!(can_i(
        &ns,
        &["create", "postgresqlinstances.db.example.com", "-n", &own]
    ));
    assert!(can_i(
        &ns,
        &[
            "patch",
            "postgresqlinstances.db.example.com/status",
            "-n",
            &own
        ]
    ));
    assert!(can_i(&ns, &["get", "secrets", "-n", &own]));
    assert!(!can_i(&ns, &["get", "configmaps", "-n", &own]));
    assert!(!can_i(
        &ns,
        &["get", "servicebindings.anynines.com", "-n", &own]
    ));
    assert!(!can_i(
        &ns,
        &[
            "get",
            "postgresqlinstances.db.example.com",
            "-n",
            "kube-system"
        ]
    ));
    assert!(!can_i(&ns, &["get", "secrets", "-n", "default"]));

    // Served through the consumer endpoint, to plain kubectl.
    let consumer_id = ns.strip_prefix("kube-bind-").unwrap();
    let consumer = bindery().endpoint(consumer_id);
    let kubectl = |args: &[&str], input: Option<&str>| {
        let mut command = std::process::Command::new(crate::fixture::kubectl_path());
        command
            .arg("--kubeconfig")
            .arg(&consumer.kubeconfig)
            .args(args);
        run_with_input(command, input)
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ok, out) = kubectl(&["explain", "postgresqlinstances.spec.plan"], None);
        if ok {
            assert!(out.contains("Size of the instance"), "{out}");
            break;
        }
        assert!(Instant::now() < deadline, "never served: {out}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (ok, out) = kubectl(
        &["-n", "default", "apply", "-f", "-"],
        Some(
            "apiVersion: db.example.com/v1\nkind: PostgreSQLInstance\nmetadata: {name: orders}\nspec: {plan: small}\n",
        ),
    );
    assert!(ok, "{out}");
    let (ok, out) = kubectl(&["-n", "default", "get", "postgresqlinstances"], None);
    assert!(
        ok && out.contains("orders") && out.contains("small"),
        "{out}"
    );
    let (ok, out) = kubectl(
        &["get", "postgresqlinstances.v1beta1.db.example.com", "-A"],
        None,
    );
    assert!(
        ok && out.contains("orders"),
        "the second served version works: {out}"
    );
    provider.kubectl(&["-n", &own, "get", "postgresqlinstances", "orders"]);
}

/// A cluster namespace an early kube-bind backend made records its
/// identity under `example-backend.kube-bind.io/identity`, which kube-bind
/// v0.8.2 still honours: a request of that identity is met there and the
/// key moves to the current one (as kube-bind's backend moves it), and a
/// request of another identity that would land there is refused.
#[test]
fn a_cluster_namespace_of_an_early_kube_bind_backend_keeps_its_identity() {
    install_examples();
    let provider = &clusters().provider;
    let legacy_namespace = |identity: &str, recorded: &str| {
        let ns = cluster_namespace("kube-bind-", identity);
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "annotations":
                {"example-backend.kube-bind.io/identity": recorded}}});
        provider.kubectl_with_stdin(&["create", "-f", "-"], Some(&namespace.to_string()));
        ns
    };
    let spec = json!({"templateRef": {"name": "postgresql"}});

    let identity = unique_name("early-cluster");
    let ns = legacy_namespace(&identity, &identity);
    let status = request(&unique_name("early"), &identity, spec.clone());
    assert_eq!(status["phase"], "Succeeded", "{status}");
    let namespace: Value =
        serde_json::from_str(&provider.kubectl(&["get", "namespace", &ns, "-o", "json"])).unwrap();
    let annotations = &namespace["metadata"]["annotations"];
    assert_eq!(
        annotations["backend.kube-bind.io/identity"],
        identity.as_str(),
        "{annotations}"
    );
    assert!(
        annotations
            .get("example-backend.kube-bind.io/identity")
            .is_none(),
        "the legacy key stays: {annotations}"
    );

    let identity = unique_name("late-cluster");
    legacy_namespace(&identity, "an-early-cluster");
    let status = request(&unique_name("late"), &identity, spec);
    assert_eq!(status["phase"], "Failed", "{status}");
    assert_eq!(
        status["conditions"][0]["reason"], "IdentityConflict",
        "{status}"
    );
}

#[test]
fn requests_that_cannot_be_met_fail_with_an_actionable_message() {
    install_examples();
    let provider = &clusters().provider;
    // Two CRDs labelled for export, of different scopes, and a template
    // naming a CRD that does not exist.
    for (plural, kind, scope) in [
        ("gadgets", "Gadget", "Namespaced"),
        ("clustergadgets", "ClusterGadget", "Cluster"),
    ] {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.requests.bindery.dev"),
                "labels": {"kube-bind.io/exported": "true"}},
            "spec": {"group": "requests.bindery.dev", "scope": scope,
                "names": {"plural": plural, "singular": plural.trim_end_matches('s'), "kind": kind},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]},
        });
        provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&crd.to_string()));
    }
    let template = json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportTemplate",
        "metadata": {"name": "nothing-behind-it"},
        "spec": {"scope": "Namespaced",
            "resources": [{"group": "missing.bindery.dev", "resource": "phantoms"}]},
    });
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&template.to_string()));

    let cases = [
        (
            json!({"templateRef": {"name": "no-such-template"}}),
            "TemplateNotFound",
            "no-such-template",
        ),
        (
            json!({"templateRef": {"name": "nothing-behind-it"}}),
            "CustomResourceDefinitionNotFound",
            "phantoms.missing.bindery.dev",
        ),
        (
            json!({"resources": [
                {"group": "requests.bindery.dev", "resource": "gadgets"},
                {"group": "requests.bindery.dev", "resource": "clustergadgets"}]}),
            "DifferentScopes",
            "clustergadgets.requests.bindery.dev is Cluster",
        ),
        (
            // (A claim kube-bind's patterns refuse, such as a resource
            // "Secrets", the API server refuses: e2e kube_bind_crds.)
            json!({"resources": [{"group": "requests.bindery.dev", "resource": "gadgets"}],
                   "permissionClaims": [{"resource": "secrets", "selector": {"labelSelector":
                       {"matchExpressions": [{"key": "tier", "operator": "In"}]}}}]}),
            "InvalidPermissionClaim",
            "\"tier\"",
        ),
        (
            json!({"resources": [{"group": "db.example.com", "resource": "postgresqlinstances"}]}),
            "NotExported",
            "kube-bind.io/exported=true",
        ),
    ];
    for (spec, reason, named) in cases {
        let name = unique_name("failing");
        let identity = unique_name("failing-cluster");
        let status = request(&name, &identity, spec.clone());
        assert_eq!(status["phase"], "Failed", "{spec}: {status}");
        let message = status["terminalMessage"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{spec}: {message}");
        let condition = &status["conditions"][0];
        assert_eq!(condition["type"], "ExportsReady");
        assert_eq!(condition["status"], "False");
        assert_eq!(condition["reason"], reason, "{spec}: {status}");
        // Nothing was exported.
        let ns = cluster_namespace("kube-bind-", &identity);
        let exports = provider.kubectl(&["-n", &ns, "get", "apiserviceexports", "-o", "name"]);
        assert!(exports.trim().is_empty(), "{spec}: {exports}");
    }
}

#[test]
fn an_export_whose_identity_is_in_doubt_stops_being_served() {
    let provider = &clusters().provider;
    let identity = unique_name("doubt-cluster");
    let name = unique_name("doubt");
    let status = request(
        &name,
        &identity,
        json!({"templateRef": {"name": "postgresql"}}),
    );
    assert_eq!(status["phase"], "Succeeded", "{status}");
    let ns = cluster_namespace("kube-bind-", &identity);
    let consumer = bindery().endpoint(ns.strip_prefix("kube-bind-").unwrap());
    let path = "/apis/db.example.com/v1/namespaces/default/postgresqlinstances";
    wait_for_status(&consumer, path, 200);

    // Replace the identity Secret's key: the status no longer matches it.
    let secret = format!("{name}-identity");
    provider.kubectl(&[
        "-n",
        &ns,
        "patch",
        "secret",
        &secret,
        "--type=merge",
        "-p",
        r#"{"stringData":{"key":"not-the-original-key-00000000000"}}"#,
    ]);
    let condition_path = r#"jsonpath={.status.conditions[?(@.type=="IdentityValid")].status}"#;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let valid = provider.kubectl(&[
            "-n",
            &ns,
            "get",
            "apiserviceexport",
            &name,
            "-o",
            condition_path,
        ]);
        if valid.trim() == "False" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "IdentityValid never turned False"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let hash_after = provider.kubectl(&[
        "-n",
        &ns,
        "get",
        "apiserviceexport",
        &name,
        "-o",
        "jsonpath={.status.identityHash}",
    ]);
    assert_eq!(hash_after.trim().len(), 64, "the recorded hash is kept");
    wait_for_status(&consumer, path, 404);
}

pub(crate) fn wait_for_status(consumer: &crate::bindery::Consumer, path: &str, want: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let output = std::process::Command::new("curl")
            .args(["-sk", "-o", "/dev/null", "-w", "%{http_code}", "--cert"])
            .arg(&consumer.cert)
            .arg("--key")
            .arg(&consumer.key)
            .arg(format!("{}{path}", consumer.base_url))
            .output()
            .expect("curl runs");
        let code = String::from_utf8_lossy(&output.stdout).to_string();
        if code == want.to_string() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{path} answered {code}, not {want}, for 30 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub(crate) fn run_with_input(
    mut command: std::process::Command,
    input: Option<&str>,
) -> (bool, String) {
    use std::io::Write;
    use std::process::Stdio;
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("kubectl runs");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    if let Some(input) = input {
        stdin.write_all(input.as_bytes()).expect("writing stdin");
    }
    drop(stdin);
    let output = child.wait_with_output().expect("kubectl finishes");
    (
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("Secret data is base64")
}

/// A CRD behind an export changes: under `schemaUpdatePolicy: Always` a new
/// field reaches `kubectl explain` through bindery (the time it took is
/// printed); a breaking change is held back with conditions naming the field
/// and the rule, and the last accepted schema is still served.
#[test]
fn crd_changes_are_followed_when_compatible_and_held_back_when_breaking() {
    install_examples();
    let provider = &clusters().provider;
    let crd = |properties: Value| {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "evolvers.schema.bindery.dev"},
            "spec": {"group": "schema.bindery.dev", "scope": "Namespaced",
                "names": {"plural": "evolvers", "singular": "evolver", "kind": "Evolver"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": properties}}}}}]},
        })
        .to_string()
    };
    provider.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(&crd(
            json!({"size": {"type": "string", "description": "How big."}}),
        )),
    );
    provider.kubectl_wait(&[
        "--for=condition=Established",
        "--timeout=60s",
        "crd/evolvers.schema.bindery.dev",
    ]);
    let template = json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportTemplate",
        "metadata": {"name": "evolvers"},
        "spec": {"scope": "Namespaced",
                 "resources": [{"group": "schema.bindery.dev", "resource": "evolvers"}],
                 "schemaUpdatePolicy": "Always"},
    });
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&template.to_string()));
    let identity = unique_name("evolving-cluster");
    let name = unique_name("evolvers");
    let status = request(
        &name,
        &identity,
        json!({"templateRef": {"name": "evolvers"}}),
    );
    assert_eq!(status["phase"], "Succeeded", "{status}");
    let ns = cluster_namespace("kube-bind-", &identity);
    let consumer = bindery().endpoint(ns.strip_prefix("kube-bind-").unwrap());
    let explain = |field: &str| {
        let mut command = std::process::Command::new(crate::fixture::kubectl_path());
        command
            .arg("--kubeconfig")
            .arg(&consumer.kubeconfig)
            .args(["explain", field]);
        run_with_input(command, None)
    };
    let until = |what: &str, check: &dyn Fn() -> bool| -> Duration {
        let start = Instant::now();
        while !check() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{what}: not within 60 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        start.elapsed()
    };
    until("served", &|| explain("evolvers.spec.size").0);

    // Compatible: a new optional field.
    provider.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(&crd(json!({
            "size": {"type": "string", "description": "How big."},
            "color": {"type": "string", "description": "Which color."},
        }))),
    );
    let bound_schema = || {
        provider.kubectl(&[
            "-n",
            &ns,
            "get",
            "boundschema",
            "evolvers.schema.bindery.dev",
            "-o",
            "json",
        ])
    };
    let followed = until("the new field in the BoundSchema", &|| {
        bound_schema().contains("Which color.")
    });
    println!("the BoundSchema followed after {followed:?}");
    let took = until("the new field in kubectl explain", &|| {
        let (ok, out) = explain("evolvers.spec.color");
        ok && out.contains("Which color.")
    });
    println!("compatible CRD change visible in kubectl explain through bindery after {took:?}");

    // Breaking: a field removed, another retyped.
    provider.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(&crd(
            json!({"size": {"type": "integer", "description": "How big."}}),
        )),
    );
    let condition = |kind: &str, object: &str| -> Value {
        let text = provider.kubectl(&["-n", &ns, "get", kind, object, "-o", "json"]);
        let object: Value = serde_json::from_str(&text).unwrap();
        object["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "SchemaInSync")
            .cloned()
            .unwrap_or(Value::Null)
    };
    until("SchemaInSync=False on the BoundSchema", &|| {
        condition("boundschema", "evolvers.schema.bindery.dev")["status"] == "False"
    });
    let held = condition("boundschema", "evolvers.schema.bindery.dev");
    assert_eq!(held["reason"], "RemovedField", "{held}");
    let message = held["message"].as_str().unwrap();
    assert!(
        message.contains(".spec.color") && message.contains("RemovedField"),
        "{message}"
    );
    assert!(
        message.contains(".spec.size") && message.contains("ChangedType"),
        "{message}"
    );
    until("SchemaInSync=False on the export", &|| {
        condition("apiserviceexport", &name)["status"] == "False"
    });
    let on_export = condition("apiserviceexport", &name);
    assert!(
        on_export["message"]
            .as_str()
            .unwrap()
            .contains(".spec.color"),
        "{on_export}"
    );
    // The last accepted schema is still what is served.
    let (ok, out) = explain("evolvers.spec.color");
    assert!(ok && out.contains("Which color."), "{out}");
    let (ok, out) = explain("evolvers.spec.size");
    assert!(ok && out.contains("<string>"), "{out}");
}
