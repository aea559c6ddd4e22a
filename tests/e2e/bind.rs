//! `bindery bind` and `bindery unbind` against the real clusters: binders
//! authenticate with tokens the provider issued, and only holders of `bind`
//! on a template see it and bind it; a bind is idempotent, `-o yaml` prints
//! what it would apply, and unbind removes exactly what bind made.
//!
//! Binds use the app cluster's real identity, so one bind runs at a time
//! ([`app_cluster_binds`]).

use crate::binder::{binder_token, bindery_cli};
use crate::bindery::bindery;
use crate::controllers::install_examples;
use crate::fixture::{clusters, unique_name};
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
    let mut command = Command::new("curl");
    command
        .args(["-s", "-w", "\n%{http_code}", "-X", method, "--cacert"])
        .arg(bindery().pki.join("bindery/serving-ca.crt"));
    if let Some(token) = token {
        command.args(["-H", &format!("Authorization: Bearer {token}")]);
    }
    if let Some(body) = body {
        command.args(["-H", "Content-Type: application/json", "--data", body]);
    }
    let output = command
        .arg(format!("{}/bind{path}", bindery().url))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (
        code.parse().unwrap_or(0),
        serde_json::from_str(body).unwrap_or(Value::String(body.to_string())),
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
    let mut config: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
    let inline = |value: &mut serde_yaml::Value, file_key: &str, data_key: &str| {
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
    serde_yaml::to_string(&config).unwrap()
}
