//! The real aggregation path: the app cluster's kube-apiserver forwards the
//! bound group/versions to bindery through APIServices (an ExternalName
//! Service `bindery-<consumer>` in `kube-bind` to loopback, bindery's serving
//! CA as caBundle), and plain kubectl against the app cluster uses the bound
//! API; its RBAC decides, with kube-apiserver's own 403, and
//! `kubectl auth can-i` agrees; deleting an app namespace finishes and takes
//! its bound objects with it.

use crate::bindery::bindery;
use crate::export_status::{Export, in_sync};
use crate::fixture::{clusters, unique_name};
use base64::Engine;
use serde_json::json;

/// Deletes the APIServices when the test ends, so that no other test's
/// discovery meets them.
struct Unregister(Vec<String>);

impl Drop for Unregister {
    fn drop(&mut self) {
        for object in &self.0 {
            let _ = clusters().app.kubectl_output(
                &["delete", object, "--ignore-not-found", "--wait=false"],
                None,
            );
        }
    }
}

/// Registers bindery in the app cluster for `export`'s consumer, as
/// `bindery bind` will: the Service and one APIService per bound version.
fn register_apiservices(export: &Export) -> Unregister {
    let app = &clusters().app;
    let consumer = export.namespace.strip_prefix("kube-bind-").unwrap();
    let service = format!("bindery-{consumer}");
    let port: u16 = bindery()
        .url
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("bindery's port");
    let ca = std::fs::read(bindery().pki.join("bindery/serving-ca.crt")).expect("serving CA");
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca);
    let _ = app.kubectl_output(&["create", "namespace", "kube-bind"], None);
    let mut objects = vec![json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": service, "namespace": "kube-bind"},
        "spec": {"type": "ExternalName", "externalName": "localhost",
            "ports": [{"port": port, "protocol": "TCP"}]},
    })];
    let mut names = Vec::new();
    for (version, priority) in [("v1", 15), ("v1beta1", 10)] {
        let name = format!("{version}.db.example.com");
        objects.push(json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": name},
            "spec": {"group": "db.example.com", "version": version,
                "groupPriorityMinimum": 1000, "versionPriority": priority,
                "caBundle": ca_bundle,
                "service": {"namespace": "kube-bind", "name": service, "port": port}},
        }));
        names.push(format!("apiservice/{name}"));
    }
    let unregister = Unregister(names.clone());
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&list.to_string()));
    let mut wait = vec!["wait", "--for=condition=Available", "--timeout=90s"];
    wait.extend(names.iter().map(String::as_str));
    let waited = app.kubectl_output(&wait, None);
    if !waited.status.success() {
        let status = app.kubectl(&[
            "get",
            "apiservice",
            &names[0][11..],
            "-o",
            "jsonpath={.status}",
        ]);
        panic!("the APIServices never became Available: {status}");
    }
    unregister
}

#[test]
fn kubectl_against_the_app_cluster_uses_the_bound_api_under_its_rbac() {
    let export = Export::requested(
        &unique_name("aggregated"),
        &unique_name("aggregated-cluster"),
        json!({}),
    );
    // The app cluster registered with the provider (as bind will record it).
    let app = &clusters().app;
    crate::front_proxy::register(&export, &app.pki.front_proxy_ca());
    export.bind(in_sync());
    export.wait_condition("Connected", "True", "APIServiceBindingFound");
    let _unregister = register_apiservices(&export);

    // The admin of the app cluster: create, list, explain, the other version.
    app.kubectl_with_stdin(
        &["-n", "default", "apply", "-f", "-"],
        Some(
            "apiVersion: db.example.com/v1\nkind: PostgreSQLInstance\nmetadata: {name: orders}\nspec: {plan: small}\n",
        ),
    );
    let listed = app.kubectl(&["get", "postgresqlinstances", "-A"]);
    assert!(
        listed.contains("orders") && listed.contains("default"),
        "{listed}"
    );
    let explained = app.kubectl(&["explain", "postgresqlinstances.spec.plan"]);
    assert!(explained.contains("Size of the instance"), "{explained}");
    let beta = app.kubectl(&[
        "get",
        "postgresqlinstances.v1beta1.db.example.com",
        "-n",
        "default",
    ]);
    assert!(beta.contains("orders"), "{beta}");
    // Stored in the provider, in the consumer's provider namespace.
    clusters().provider.kubectl(&[
        "-n",
        &format!("{}-default", export.namespace),
        "get",
        "postgresqlinstances",
        "orders",
    ]);

    // Deleting an app namespace deletes its bound objects and finishes: the
    // namespace controller lists and deletes through the aggregator.
    let leaving = unique_name("leaving");
    app.kubectl(&["create", "namespace", &leaving]);
    app.kubectl_with_stdin(
        &["-n", &leaving, "apply", "-f", "-"],
        Some(
            "apiVersion: db.example.com/v1\nkind: PostgreSQLInstance\nmetadata: {name: doomed}\nspec: {plan: small}\n",
        ),
    );
    let provider_namespace = format!("{}-{leaving}", export.namespace);
    clusters().provider.kubectl(&[
        "-n",
        &provider_namespace,
        "get",
        "postgresqlinstances",
        "doomed",
    ]);
    app.kubectl(&["delete", "namespace", &leaving, "--wait=false"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    while app
        .kubectl_output(&["get", "namespace", &leaving], None)
        .status
        .success()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "namespace {leaving} never finished deleting: {}",
            app.kubectl(&["get", "namespace", &leaving, "-o", "jsonpath={.status}"])
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let left = clusters().provider.kubectl(&[
        "-n",
        &provider_namespace,
        "get",
        "postgresqlinstances",
        "-o",
        "name",
    ]);
    assert!(
        left.trim().is_empty(),
        "the bound objects went with it: {left}"
    );

    // A user with a Role in one namespace.
    let user = unique_name("dev");
    let team = unique_name("team");
    app.kubectl(&["create", "namespace", &team]);
    app.kubectl(&[
        "-n",
        &team,
        "create",
        "role",
        "db-user",
        "--verb=get,list,watch,create",
        "--resource=postgresqlinstances.db.example.com",
    ]);
    app.kubectl(&[
        "-n",
        &team,
        "create",
        "rolebinding",
        "db-user",
        "--role=db-user",
        &format!("--user={user}"),
    ]);
    let can_i = |verb: &str, namespace: &str| {
        let out = app.kubectl_output(
            &[
                "auth",
                "can-i",
                verb,
                "postgresqlinstances",
                "-n",
                namespace,
                "--as",
                &user,
            ],
            None,
        );
        String::from_utf8_lossy(&out.stdout).trim() == "yes"
    };
    assert!(can_i("list", &team));
    assert!(!can_i("list", "default"));
    let theirs = app.kubectl_output(
        &["-n", &team, "get", "postgresqlinstances", "--as", &user],
        None,
    );
    let said = String::from_utf8_lossy(&theirs.stderr);
    assert!(
        theirs.status.success() && said.contains("No resources found"),
        "{said}"
    );
    let denied = app.kubectl_output(
        &["-n", "default", "get", "postgresqlinstances", "--as", &user],
        None,
    );
    assert!(!denied.status.success());
    assert_eq!(
        String::from_utf8_lossy(&denied.stderr).trim(),
        format!(
            "Error from server (Forbidden): postgresqlinstances.db.example.com is forbidden: \
             User \"{user}\" cannot list resource \"postgresqlinstances\" in API group \
             \"db.example.com\" in the namespace \"default\""
        )
    );
}
