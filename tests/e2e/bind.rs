//! `bindery bind` and `bindery unbind` against the real clusters: binders
//! authenticate with tokens the provider issued, and only holders of `bind`
//! on a template see it and bind it; a bind is idempotent, `-o yaml` prints
//! what it would apply, and unbind removes exactly what bind made.
//!
//! Binds use the app cluster's real identity, so one bind runs at a time
//! ([`app_cluster_binds`]).

use crate::binder::{binder_token, bindery_cli, bindery_command, curl_with_token, succeeded};
use crate::bindery::bindery;
use crate::controllers::install_examples;
use crate::fixture::{clusters, curl_json, unique_name};
use bindery::controllers::naming::cluster_namespace;
use serde_json::Value;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// Held by every test that binds into the app cluster.
pub(crate) fn app_cluster_binds() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The app cluster's cluster namespace in the provider.
pub(crate) fn app_cluster_namespace() -> String {
    let uid = clusters().app.kubectl(&[
        "get",
        "namespace",
        "kube-system",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    cluster_namespace("kube-bind-", uid.trim())
}

/// `method` on bindery's `/bind<path>` with a bearer `token`, or none.
fn curl_bind(method: &str, path: &str, token: Option<&str>, body: Option<&str>) -> (u16, Value) {
    curl_with_token(
        method,
        &format!("{}/bind{path}", bindery().url),
        token,
        body,
    )
}

#[test]
fn only_holders_of_bind_see_templates_and_bind() {
    install_examples();
    let (_, allowed) = binder_token(true);
    let (stranger_name, stranger) = binder_token(false);

    let (code, offers) = curl_bind("GET", "/templates", Some(&allowed), None);
    assert_eq!(code, 200, "{offers}");
    let postgresql = offers["offers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "postgresql")
        .unwrap_or_else(|| panic!("postgresql is offered: {offers}"));
    assert_eq!(
        postgresql["resources"][0]["resource"],
        "postgresqlinstances"
    );
    assert_eq!(postgresql["claims"][0]["resource"], "secrets");

    let (code, offers) = curl_bind("GET", "/templates", Some(&stranger), None);
    assert_eq!(
        (code, offers["offers"].clone()),
        (200, serde_json::json!([]))
    );
    let (code, status) = curl_bind("GET", "/templates", None, None);
    assert_eq!(
        (code, status["reason"].clone()),
        (401, "Unauthorized".into())
    );
    let (code, status) = curl_bind("GET", "/templates", Some("not-a-token"), None);
    assert_eq!(code, 401, "{status}");

    // The binding API itself refuses with kube-apiserver's 403.
    let identity = unique_name("stranger-cluster");
    let (code, status) = curl_bind(
        "POST",
        "/bindings",
        Some(&stranger),
        Some(&format!(
            r#"{{"template":"postgresql","identity":"{identity}"}}"#
        )),
    );
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        format!(
            "apiserviceexporttemplates.kube-bind.io \"postgresql\" is forbidden: User \
             \"{stranger_name}\" cannot bind resource \"apiserviceexporttemplates\" in API \
             group \"kube-bind.io\" at the cluster scope"
        )
    );
    let made = clusters().provider.kubectl_output(
        &[
            "get",
            "namespace",
            &cluster_namespace("kube-bind-", &identity),
        ],
        None,
    );
    assert!(!made.status.success(), "nothing is made for a stranger");

    // And so does the CLI, before touching the app cluster.
    let _guard = app_cluster_binds();
    // (Another test's unbind may still be deleting the account.)
    let account_uid = || {
        let out = clusters().app.kubectl_output(
            &[
                "-n",
                "kube-bind",
                "get",
                "serviceaccount",
                "bindery",
                "-o",
                "jsonpath={.metadata.uid}",
            ],
            None,
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let before = account_uid();
    let output = bindery_cli("bind", &stranger, &["--template", "postgresql"]);
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("you may not bind template \"postgresql\""),
        "{said}"
    );
    let after = account_uid();
    assert!(
        after.is_empty() || after == before,
        "no account is made for a stranger"
    );
}

#[test]
fn a_registration_for_another_app_cluster_is_refused() {
    install_examples();
    let (_, allowed) = binder_token(true);
    // A kubeconfig that reaches the app cluster, offered for another identity.
    let kubeconfig = std::fs::read_to_string(&clusters().app.kubeconfig).unwrap();
    let inline = inline_kubeconfig(&kubeconfig);
    let body = serde_json::json!({
        "template": "postgresql",
        "identity": unique_name("someone-else"),
        "registration": {"kubeconfig": inline, "requestheaderClientCa": "x",
            "requestheaderAllowedNames": []},
    });
    let (code, status) = curl_bind("POST", "/bindings", Some(&allowed), Some(&body.to_string()));
    assert_eq!(code, 400, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(message.contains("whose kube-system UID is"), "{message}");
    // A kubeconfig that would make bindery run a program is refused unread.
    let body = serde_json::json!({
        "template": "postgresql",
        "identity": "x",
        "registration": {"kubeconfig": "apiVersion: v1\nkind: Config\ncurrent-context: a\ncontexts: [{name: a, context: {cluster: a, user: a}}]\nclusters: [{name: a, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: a, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: touch, args: [/tmp/bindery-pwned]}}}]\n",
            "requestheaderClientCa": "x", "requestheaderAllowedNames": []},
    });
    let (code, status) = curl_bind("POST", "/bindings", Some(&allowed), Some(&body.to_string()));
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("exec is not accepted"),
        "{status}"
    );
}

/// The test clusters' kubeconfigs name certificate files; bindery takes
/// inline data only.
fn inline_kubeconfig(text: &str) -> String {
    let mut config: serde_norway::Value = serde_norway::from_str(text).unwrap();
    let inline = |value: &mut serde_norway::Value, file_key: &str, data_key: &str| {
        if let Some(path) = value
            .get(file_key)
            .and_then(|p| p.as_str())
            .map(str::to_string)
        {
            use base64::Engine;
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            let map = value.as_mapping_mut().unwrap();
            map.remove(file_key);
            map.insert(
                data_key.into(),
                base64::engine::general_purpose::STANDARD
                    .encode(bytes)
                    .into(),
            );
        }
    };
    for cluster in config["clusters"].as_sequence_mut().unwrap() {
        inline(
            &mut cluster["cluster"],
            "certificate-authority",
            "certificate-authority-data",
        );
    }
    for user in config["users"].as_sequence_mut().unwrap() {
        inline(
            &mut user["user"],
            "client-certificate",
            "client-certificate-data",
        );
        inline(&mut user["user"], "client-key", "client-key-data");
    }
    serde_norway::to_string(&config).unwrap()
}

/// A client certificate signed by `cluster`'s client CA for `user` in
/// `groups`, written beside that cluster's PKI; (certificate, key) paths.
fn client_certificate(
    cluster: &crate::fixture::Cluster,
    user: &str,
    groups: &[&str],
) -> (std::path::PathBuf, std::path::PathBuf) {
    use bindery::certs::authority::{Authority, PemPair, Usage};
    let read = |name: &str| std::fs::read_to_string(cluster.pki.dir.join(name)).unwrap();
    let ca = Authority::from_pem(PemPair {
        cert_pem: read("ca.crt"),
        key_pem: read("ca.key"),
    })
    .expect("the cluster CA");
    let usage = Usage::Client {
        organizations: groups.iter().map(|g| g.to_string()).collect(),
    };
    let pair = ca.issue(user, &usage).expect("a client certificate");
    let base = cluster.pki.dir.join(unique_name(user));
    let (cert, key) = (base.with_extension("crt"), base.with_extension("key"));
    std::fs::write(&cert, pair.cert_pem).unwrap();
    std::fs::write(&key, pair.key_pem).unwrap();
    (cert, key)
}

/// GET bindery's `/bind/templates` with a client certificate.
fn templates_with_certificate(cert: &std::path::Path, key: &std::path::Path) -> (u16, Value) {
    let mut command = Command::new("curl");
    command
        .arg("--cacert")
        .arg(bindery().pki.join("bindery/serving-ca.crt"))
        .arg("--cert")
        .arg(cert)
        .arg("--key")
        .arg(key)
        .arg(format!("{}/bind/templates", bindery().url));
    curl_json(command)
}

#[test]
fn provider_client_certificates_are_binder_credentials() {
    install_examples();
    let provider = &clusters().provider;
    binder_token(true); // makes the ClusterRole bindery-binder
    let group = unique_name("cert-binders");
    provider.kubectl(&[
        "create",
        "clusterrolebinding",
        &group,
        "--clusterrole=bindery-binder",
        &format!("--group={group}"),
    ]);
    let (cert, key) = client_certificate(provider, &unique_name("carol"), &[&group]);
    let (stranger_cert, stranger_key) = client_certificate(provider, "mallory", &["devs"]);
    let (foreign_cert, foreign_key) = client_certificate(&clusters().app, "carol", &[&group]);

    let (code, offers) = templates_with_certificate(&cert, &key);
    assert_eq!(code, 200, "{offers}");
    assert!(
        offers["offers"]
            .as_array()
            .is_some_and(|o| o.iter().any(|o| o["name"] == "postgresql")),
        "a holder of bind by group sees postgresql: {offers}"
    );
    let (code, offers) = templates_with_certificate(&stranger_cert, &stranger_key);
    assert_eq!(
        (code, offers["offers"].clone()),
        (200, serde_json::json!([]))
    );
    // A CA bindery does not trust fails the TLS handshake, as it does with
    // kube-apiserver; one it trusts for other uses (its consumer CA) is nobody.
    let (code, _) = templates_with_certificate(&foreign_cert, &foreign_key);
    assert_eq!(code, 0, "no answer over a refused handshake");
    let consumer = bindery().endpoint("binder-certificate-check");
    let (code, status) = templates_with_certificate(&consumer.cert, &consumer.key);
    assert_eq!(
        (code, status["reason"].clone()),
        (401, "Unauthorized".into()),
        "a consumer certificate is no binder"
    );

    // The CLI binds with the certificate, and unbinds with the provider's
    // admin kubeconfig (its client certificate).
    let _guard = app_cluster_binds();
    succeeded(
        "bind --client-certificate",
        &bindery_command(&bindery().url, "bind")
            .arg("--client-certificate")
            .arg(&cert)
            .arg("--client-key")
            .arg(&key)
            .args(["--template", "postgresql"])
            .output()
            .unwrap(),
    );
    let binding = clusters().app.kubectl(&[
        "get",
        "apiservicebinding",
        "bindery.postgresql",
        "-o",
        "jsonpath={.metadata.labels.bindery\\.dev/binding}",
    ]);
    assert_eq!(binding, "postgresql");
    let refused = bindery_command(&bindery().url, "unbind")
        .arg("--client-certificate")
        .arg(&stranger_cert)
        .arg("--client-key")
        .arg(&stranger_key)
        .arg("postgresql")
        .output()
        .unwrap();
    assert!(!refused.status.success(), "a stranger cannot unbind");
    succeeded(
        "unbind --provider-kubeconfig",
        &bindery_command(&bindery().url, "unbind")
            .arg("--provider-kubeconfig")
            .arg(&provider.kubeconfig)
            .arg("postgresql")
            .output()
            .unwrap(),
    );
    let gone = clusters()
        .app
        .kubectl_output(&["get", "apiservicebinding", "bindery.postgresql"], None);
    assert!(!gone.status.success(), "unbind removed the binding");
}

/// A CRD of kind `Gadget` in `group` (namespaced, one version v1).
pub(crate) fn gadget_crd(group: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
         metadata: {{name: gadgets.{group}}}\n\
         spec:\n  group: {group}\n  scope: Namespaced\n\
         \x20 names: {{plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}}\n\
         \x20 versions:\n  - name: v1\n    served: true\n    storage: true\n\
         \x20   schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n"
    )
}

#[test]
fn a_group_the_app_cluster_serves_from_its_own_crd_is_not_bound() {
    install_examples();
    let (provider, app) = (&clusters().provider, &clusters().app);
    let group = format!("{}.example.com", unique_name("local"));
    let template = unique_name("local-gadgets");
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&gadget_crd(&group)));
    provider.kubectl_wait(&[
        "--for=condition=Established",
        &format!("crd/gadgets.{group}"),
    ]);
    provider.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: kube-bind.io/v1alpha2\nkind: APIServiceExportTemplate\n\
             metadata: {{name: {template}}}\n\
             spec: {{scope: Namespaced, resources: [{{group: {group}, resource: gadgets}}]}}\n"
        )),
    );
    app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&gadget_crd(&group)));
    let _guard = app_cluster_binds();
    let (_, token) = binder_token(true);
    let output = bindery_cli("bind", &token, &["--template", &template]);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    // Cleaned up before asserting: a CRD left in the app cluster would take
    // the group from later binds.
    app.kubectl(&["delete", "crd", &format!("gadgets.{group}")]);
    let api_service = app.kubectl_output(&["get", "apiservice", &format!("v1.{group}")], None);
    assert!(!output.status.success(), "bind succeeded over a local CRD");
    assert!(
        stderr.contains(&format!("the app cluster serves {group}/v1 itself"))
            && stderr.contains(&format!("CustomResourceDefinition gadgets.{group}")),
        "{stderr}"
    );
    // kube-apiserver's own local APIService for the CRD was not replaced.
    let shown = String::from_utf8_lossy(&api_service.stdout).to_string();
    assert!(
        !shown.contains("kube-bind/"),
        "bind registered its APIService: {shown}"
    );
    let _ = bindery_cli("unbind", &token, &[&template]);
}

/// A cluster namespace a bindery of an earlier version made lacks the label
/// that puts it under `bindery.dev-kube-bind-rbac`'s protection (issue 33):
/// its consumer's next bind labels it.
#[test]
fn a_cluster_namespace_made_before_the_label_is_labelled_at_the_next_bind() {
    let _guard = crate::owners::bound();
    let provider = &clusters().provider;
    let namespace = app_cluster_namespace();
    let label = || {
        provider.kubectl(&[
            "get",
            "namespace",
            &namespace,
            "-o",
            "jsonpath={.metadata.labels.bindery\\.dev/cluster-namespace}",
        ])
    };
    assert_eq!(label().trim(), "true", "bindery labels what it makes");
    provider.kubectl(&[
        "label",
        "namespace",
        &namespace,
        "bindery.dev/cluster-namespace-",
    ]);
    assert_eq!(label().trim(), "", "as an earlier bindery left it");
    crate::binder::bind_template("postgresql");
    assert_eq!(label().trim(), "true", "labelled by the next bind");
}

/// The unbind that leaves bindery no binding in an app cluster removes
/// bindery's account there, but never the APIServiceBinding CRD bind
/// installed, nor namespace `kube-bind`, while other bindings (kube-bind's,
/// or anyone's) still use them: on the old code it deleted the CRD, and every
/// other binding with it. A binding bindery once named as its export (which
/// kube-bind's konnector pairs with the export) is renamed by the next bind.
#[test]
fn the_last_unbind_keeps_the_binding_crd_other_bindings_use() {
    install_examples();
    let app = crate::fixture::own_app_cluster("unbind-keeps");
    let (_, token) = binder_token(true);
    let cli = |command: &str, args: &[&str]| {
        succeeded(
            command,
            &crate::binder::bindery_command_for(&bindery().url, command, &app.kubeconfig)
                .args(args)
                .env("BINDERY_TOKEN", &token)
                .output()
                .expect("bindery runs"),
        )
    };
    cli("bind", &["--template", "postgresql"]);
    let crd = "crd/apiservicebindings.kube-bind.io";
    assert_eq!(
        app.kubectl(&[
            "get",
            crd,
            "-o",
            "jsonpath={.metadata.labels.app\\.kubernetes\\.io/managed-by}",
        ]),
        "bindery",
        "bind installed the CRD"
    );
    // A binding an earlier bindery named as its export goes at the next
    // bind: kube-bind's konnector would pair it with the export.
    app.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(
            &serde_json::json!({"apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceBinding",
                "metadata": {"name": "postgresql", "labels": {
                    "app.kubernetes.io/managed-by": "bindery", "bindery.dev/binding": "postgresql"}},
                "spec": {"kubeconfigSecretRef": {"namespace": "kube-bind",
                    "name": "bindery-provider-postgresql", "key": "kubeconfig"}}})
            .to_string(),
        ),
    );
    cli("bind", &["--template", "postgresql"]);
    let names = app.kubectl(&[
        "get",
        "apiservicebindings",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ]);
    assert_eq!(names, "bindery.postgresql", "after the next bind");
    app.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(
            &serde_json::json!({"apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceBinding",
                "metadata": {"name": "theirs"},
                "spec": {"kubeconfigSecretRef": {"namespace": "kube-bind",
                    "name": "kubeconfig-theirs", "key": "kubeconfig"}}})
            .to_string(),
        ),
    );
    cli("unbind", &["postgresql"]);
    let found = |what: &[&str]| {
        let mut args = vec!["get"];
        args.extend_from_slice(what);
        app.kubectl_output(&args, None).status.success()
    };
    assert!(!found(&["apiservicebinding", "bindery.postgresql"]));
    assert!(
        !found(&["-n", "kube-bind", "serviceaccount", "bindery"]),
        "bindery's account goes with its last binding"
    );
    assert!(found(&[crd]), "the CRD other bindings use stays");
    assert!(
        found(&["apiservicebinding", "theirs"]),
        "the other binding stays"
    );
    assert!(found(&["namespace", "kube-bind"]), "its namespace stays");
}
