//! The binder's side of a bind, for tests: a provider ServiceAccount token
//! that may (or may not) bind, and `bindery bind`/`unbind` run as the real CLI
//! against the app cluster.

use crate::bindery::bindery;
use crate::fixture::{clusters, unique_name};
use std::process::{Command, Output};

/// A token of a new provider ServiceAccount, holding `bind` on every
/// template when `may_bind`.
pub fn binder_token(may_bind: bool) -> (String, String) {
    let provider = &clusters().provider;
    let _ = provider.kubectl_output(&["create", "namespace", "binders"], None);
    let name = unique_name("binder");
    provider.kubectl(&["-n", "binders", "create", "serviceaccount", &name]);
    if may_bind {
        // kubectl's `create clusterrole` refuses `bind` on anything but
        // roles, so the role is applied as YAML, once: two first applies at
        // the same time both create, and one fails.
        static ROLE: std::sync::Once = std::sync::Once::new();
        ROLE.call_once(|| {
            provider.kubectl_with_stdin(
                &["apply", "-f", "-"],
                Some(
                    "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n\
                     metadata: {name: bindery-binder}\nrules:\n\
                     - {apiGroups: [kube-bind.io], resources: [apiserviceexporttemplates], verbs: [bind]}\n",
                ),
            );
        });
        provider.kubectl(&[
            "create",
            "clusterrolebinding",
            &name,
            "--clusterrole=bindery-binder",
            &format!("--serviceaccount=binders:{name}"),
        ]);
    }
    let token = provider.kubectl(&["-n", "binders", "create", "token", &name]);
    (
        format!("system:serviceaccount:binders:{name}"),
        token.trim().to_string(),
    )
}

/// Runs `bindery <command> <bindery url> <args>` as the binder with `token`
/// against the app cluster.
pub fn bindery_cli(command: &str, token: &str, args: &[&str]) -> Output {
    bindery_cli_at(&bindery().url, command, token, args)
}

/// [`bindery_cli`] against the bindery at `url` (which shares the test
/// bindery's PKI).
pub fn bindery_cli_at(url: &str, command: &str, token: &str, args: &[&str]) -> Output {
    bindery_command(url, command)
        .args(args)
        .env("BINDERY_TOKEN", token)
        .output()
        .expect("bindery runs")
}

/// `bindery <command> <url>` against the app cluster, trusting the test
/// bindery's serving CA; the caller adds credentials and arguments.
pub fn bindery_command(url: &str, command: &str) -> Command {
    bindery_command_for(url, command, &clusters().app.kubeconfig)
}

/// [`bindery_command`] against the app cluster `kubeconfig` reaches.
pub fn bindery_command_for(url: &str, command: &str, kubeconfig: &std::path::Path) -> Command {
    let mut bindery_cli = Command::new(env!("CARGO_BIN_EXE_bindery"));
    bindery_cli
        .arg(command)
        .arg(url)
        .arg("--certificate-authority")
        .arg(bindery().pki.join("bindery/serving-ca.crt"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env_remove("BINDERY_TOKEN");
    bindery_cli
}

/// Binds `template` into the app cluster with the CLI, as a new binder
/// holding `bind`; returns the binder's token (for unbind). The caller holds
/// `bind::app_cluster_binds()`.
#[allow(dead_code)] // the conformance binary binds its own way
pub fn bind_template(template: &str) -> String {
    let (_, token) = binder_token(true);
    succeeded(
        &format!("bind --template {template}"),
        &bindery_cli("bind", &token, &["--template", template]),
    );
    token
}

pub fn succeeded(what: &str, output: &Output) -> String {
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).to_string()
}

/// `method` on `url` at the test bindery (trusting its serving CA), with a
/// bearer `token` and a JSON `body` if given; status and JSON body.
pub fn curl_with_token(
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, serde_json::Value) {
    let mut command = Command::new("curl");
    command
        .args(["-X", method, "--cacert"])
        .arg(bindery().pki.join("bindery/serving-ca.crt"));
    if let Some(token) = token {
        command.args(["-H", &format!("Authorization: Bearer {token}")]);
    }
    if let Some(body) = body {
        command.args([
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            body,
        ]);
    }
    command.arg(url);
    crate::fixture::curl_json(command)
}

/// A watch of bindery's `url` (a `?watch=1…` URL) with `token` as the
/// bearer, for at most `seconds`: the curl process, and its events as they
/// arrive.
pub fn watch_with_token(
    url: &str,
    token: &str,
    seconds: u64,
) -> (
    std::process::Child,
    std::sync::mpsc::Receiver<serde_json::Value>,
) {
    use std::io::BufRead;
    let mut watch = Command::new("curl")
        .args(["-sN", "--max-time", &seconds.to_string(), "--cacert"])
        .arg(bindery().pki.join("bindery/serving-ca.crt"))
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .arg(url)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("curl runs");
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = watch.stdout.take().expect("stdout is piped");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if let Ok(event) = serde_json::from_str(&line) {
                let _ = tx.send(event);
            }
        }
    });
    (watch, rx)
}
