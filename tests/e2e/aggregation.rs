//! The real aggregation path: the app cluster's kube-apiserver forwards the
//! bound group/versions to bindery through APIServices (an ExternalName
//! Service `bindery-<consumer>` in `kube-bind` to loopback, bindery's serving
//! CA as caBundle), and plain kubectl against the app cluster uses the bound
//! API; its RBAC decides, with kube-apiserver's own 403, and
//! `kubectl auth can-i` agrees; deleting an app namespace finishes and takes
//! its bound objects with it.

use crate::bind::{app_cluster_binds, app_cluster_namespace};
use crate::binder::{bind_template, bindery_cli, succeeded};
use crate::controllers::install_examples;
use crate::fixture::{clusters, unique_name};

#[test]
fn kubectl_against_the_app_cluster_uses_the_bound_api_under_its_rbac() {
    install_examples();
    let _guard = app_cluster_binds();
    let token = bind_template("postgresql");
    let app = &clusters().app;
    let cluster_namespace = app_cluster_namespace();

    // The binding's status comes from the export, and its SchemaInSync from
    // the APIServices, which the export reads back as ConsumerInSync.
    let condition = |cluster: &crate::fixture::Cluster, args: &[&str], type_: &str| {
        let mut all = args.to_vec();
        let path = format!("jsonpath={{.status.conditions[?(@.type==\"{type_}\")].reason}}");
        all.extend(["-o", &path]);
        cluster.kubectl(&all)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let binding = ["get", "apiservicebinding", "bindery.postgresql"];
        let export = [
            "-n",
            &cluster_namespace,
            "get",
            "apiserviceexport",
            "postgresql",
        ];
        let seen = (
            condition(app, &binding, "SchemaInSync"),
            condition(app, &binding, "Ready"),
            condition(&clusters().provider, &export, "ConsumerInSync"),
        );
        if seen.0 == "APIServicesAvailable" && seen.2 == "SchemaInSync" && !seen.1.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "binding SchemaInSync/Ready and export ConsumerInSync: {seen:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }

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
        &format!("{cluster_namespace}-default"),
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
    let provider_namespace = format!("{cluster_namespace}-{leaving}");
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

    // Binding again changes nothing.
    let version_of =
        |object: &str| app.kubectl(&["get", object, "-o", "jsonpath={.metadata.resourceVersion}"]);
    let before = version_of("apiservice/v1.db.example.com");
    let export_uid = |_: ()| {
        clusters().provider.kubectl(&[
            "-n",
            &cluster_namespace,
            "get",
            "apiserviceexport",
            "postgresql",
            "-o",
            "jsonpath={.metadata.uid}",
        ])
    };
    let uid = export_uid(());
    succeeded(
        "bind again",
        &bindery_cli("bind", &token, &["--template", "postgresql"]),
    );
    assert_eq!(version_of("apiservice/v1.db.example.com"), before);
    assert_eq!(export_uid(()), uid, "the same export");

    // -o yaml prints what bind applies, and the app cluster accepts it.
    let printed = succeeded(
        "bind -o yaml",
        &bindery_cli("bind", &token, &["--template", "postgresql", "-o", "yaml"]),
    );
    for expected in [
        "kind: APIService\n",
        "name: v1.db.example.com",
        "name: v1beta1.db.example.com",
        "kind: APIServiceBinding",
        "kind: ServiceAccount",
        "system:auth-delegator",
    ] {
        assert!(printed.contains(expected), "{expected} in:\n{printed}");
    }
    app.kubectl_with_stdin(&["apply", "--dry-run=server", "-f", "-"], Some(&printed));

    // With bindery in the app cluster (deploy/bindery/), the consumer's
    // Service selects bindery's pods; the app cluster accepts that, and the
    // deployment itself.
    let in_cluster = succeeded(
        "bind --in-cluster -o yaml",
        &bindery_cli(
            "bind",
            &token,
            &["--template", "postgresql", "--in-cluster", "-o", "yaml"],
        ),
    );
    for expected in [
        "type: ClusterIP",
        "app.kubernetes.io/name: bindery-server",
        "targetPort: https",
        "port: 443",
    ] {
        assert!(
            in_cluster.contains(expected),
            "{expected} in:\n{in_cluster}"
        );
    }
    assert!(!in_cluster.contains("ExternalName"), "{in_cluster}");
    // Over the ExternalName Service of this binding, applied as bind applies
    // (server-side, as its field manager), so the old port goes.
    app.kubectl_with_stdin(
        &[
            "apply",
            "--server-side",
            "--field-manager=bindery-bind",
            "--force-conflicts",
            "--dry-run=server",
            "-f",
            "-",
        ],
        Some(&in_cluster),
    );
    let manifest = crate::fixture::repo_root().join("deploy/bindery/bindery.yaml");
    app.kubectl(&[
        "apply",
        "--dry-run=server",
        "-f",
        &manifest.to_string_lossy(),
    ]);

    // Unbind removes what bind made, and the export in the provider.
    succeeded("unbind", &bindery_cli("unbind", &token, &["postgresql"]));
    for gone in [
        "apiservice/v1.db.example.com",
        "apiservice/v1beta1.db.example.com",
        "apiservicebinding/bindery.postgresql",
        "clusterrolebinding/bindery:auth-delegator",
        "clusterrole/bindery:app-cluster",
    ] {
        let out = app.kubectl_output(&["get", gone], None);
        assert!(!out.status.success(), "{gone} is left after unbind");
    }
    let reader = app.kubectl_output(
        &[
            "-n",
            "kube-system",
            "get",
            "rolebinding/bindery:authentication-reader",
        ],
        None,
    );
    assert!(
        !reader.status.success(),
        "the account's RoleBinding is left"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while clusters()
        .provider
        .kubectl_output(
            &[
                "-n",
                &cluster_namespace,
                "get",
                "apiserviceexport",
                "postgresql",
            ],
            None,
        )
        .status
        .success()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the export is never deleted"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let registration = clusters().provider.kubectl_output(
        &["-n", &cluster_namespace, "get", "secret", "app-cluster"],
        None,
    );
    assert!(
        !registration.status.success(),
        "the registration went with the last export"
    );
}

/// A create through the aggregator passes none of the app cluster's
/// admission: bindery does what NamespaceLifecycle does for a local kind.
/// A namespace the app cluster does not have, or one being deleted, takes
/// no new bound object, with kube-apiserver's words, and nothing is made on
/// the provider for it.
#[test]
fn creates_in_app_namespaces_that_are_missing_or_going_are_refused_as_for_a_local_kind() {
    install_examples();
    let _guard = app_cluster_binds();
    let _token = bind_template("postgresql");
    let app = &clusters().app;
    let instance = |namespace: &str| {
        format!(
            "apiVersion: db.example.com/v1\nkind: PostgreSQLInstance\nmetadata: {{name: held, namespace: {namespace}}}\nspec: {{plan: small}}\n"
        )
    };
    let config_map = |namespace: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: held, namespace: {namespace}}}\n"
        )
    };
    // Served through the aggregator before anything is asked of it.
    let ready = unique_name("ready");
    app.kubectl(&["create", "namespace", &ready]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !app
        .kubectl_output(&["create", "-f", "-"], Some(&instance(&ready)))
        .status
        .success()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the bound API is never served"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let refusal = |manifest: String| {
        let output = app.kubectl_output(&["create", "-f", "-"], Some(&manifest));
        assert!(!output.status.success(), "created: {manifest}");
        String::from_utf8_lossy(&output.stderr).to_string()
    };

    let missing = unique_name("missing");
    let bound = refusal(instance(&missing));
    let local = refusal(config_map(&missing));
    assert!(
        bound.contains(&format!("namespaces \"{missing}\" not found"))
            && local.contains(&format!("namespaces \"{missing}\" not found")),
        "bound: {bound}\nlocal: {local}"
    );
    let provider_namespaces = clusters()
        .provider
        .kubectl(&["get", "namespaces", "-o", "name"]);
    assert!(
        !provider_namespaces.contains(&missing),
        "{provider_namespaces}"
    );

    // A namespace held in Terminating by a finalizer.
    let going = unique_name("going");
    app.kubectl(&["create", "namespace", &going]);
    app.kubectl_with_stdin(
        &["create", "-f", "-"],
        Some(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: keeper, namespace: {going}, finalizers: [bindery.dev/hold]}}\n"
        )),
    );
    app.kubectl(&["delete", "namespace", &going, "--wait=false"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while app.kubectl(&["get", "namespace", &going, "-o", "jsonpath={.status.phase}"])
        != "Terminating"
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{going} never terminates"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // The state is kept for a moment: long enough ago now.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let bound = refusal(instance(&going));
    let local = refusal(config_map(&going));
    let words =
        format!("unable to create new content in namespace {going} because it is being terminated");
    assert!(
        bound.contains("(Forbidden)") && bound.contains(&words) && local.contains(&words),
        "bound: {bound}\nlocal: {local}"
    );
    app.kubectl(&[
        "-n",
        &going,
        "patch",
        "configmap",
        "keeper",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
}

/// An app namespace deleted takes its provider namespace and record with
/// it (its bound objects went first, through bindery, as the app cluster's
/// namespace controller deleted them); made again, it works again.
#[test]
fn a_provider_namespace_goes_with_its_app_namespace_and_comes_back_with_it() {
    install_examples();
    let _guard = app_cluster_binds();
    let _token = bind_template("postgresql");
    let app = &clusters().app;
    let provider = &clusters().provider;
    let cluster_namespace = app_cluster_namespace();
    let namespace = unique_name("passing");
    let instance = format!(
        "apiVersion: db.example.com/v1\nkind: PostgreSQLInstance\nmetadata: {{name: short-lived, namespace: {namespace}}}\nspec: {{plan: small}}\n"
    );
    let wait = |what: &str, done: &mut dyn FnMut() -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
        while !done() {
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: not after 90 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    };
    let provider_namespace = format!("{cluster_namespace}-{namespace}");
    let provider_has = |args: &[&str]| provider.kubectl_output(args, None).status.success();
    for round in 0..2 {
        app.kubectl(&["create", "namespace", &namespace]);
        wait("the bound API takes the create", &mut || {
            app.kubectl_output(&["create", "-f", "-"], Some(&instance))
                .status
                .success()
        });
        assert!(
            provider_has(&["get", "namespace", &provider_namespace]),
            "round {round}"
        );
        assert!(provider_has(&[
            "-n",
            &cluster_namespace,
            "get",
            "apiservicenamespace",
            &namespace
        ]));
        app.kubectl(&["delete", "namespace", &namespace, "--timeout=90s"]);
        wait("the provider namespace goes", &mut || {
            !provider_has(&["get", "namespace", &provider_namespace])
        });
        assert!(!provider_has(&[
            "-n",
            &cluster_namespace,
            "get",
            "apiservicenamespace",
            &namespace
        ]));
    }
}
