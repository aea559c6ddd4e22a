//! A provider controller written for kube-bind, unmodified, against a
//! consumer bindery serves (issue 33, item 5): `tests/clients/kube-bind-provider`,
//! a client-go program that knows nothing of bindery, lists the bound
//! resource in every namespace of the provider, acts on the objects kube-bind
//! marks as a consumer's (`kube-bind.io/cluster-namespace`,
//! `kube-bind.io/consumer-namespace`), reads the Secret the consumer claimed
//! in the object's provider namespace, and writes the status the app
//! cluster reads back through bindery.

use crate::a_soak::go_runner;
use crate::bind::{app_cluster_binds, app_cluster_namespace};
use crate::binder::bind_template;
use crate::claims::kube_bind_template;
use crate::controllers::install_examples;
use crate::fixture::{clusters, scratch_dir, unique_name};
use base64::Engine;
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The controller's process, stopped however the test ends.
struct Controller(std::process::Child);

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_provider_controller_written_for_kube_bind_serves_binderys_consumers_unmodified() {
    install_examples();
    let binary = go_runner::build_from(
        "tests/clients",
        "kube-bind-provider",
        "k8s.io/client-go v0.34.10 from the Go module proxy or cache",
    );
    // An export as a provider that ran kube-bind offers it: consumer-owned
    // claimed Secrets are copied up, as kube-bind's konnector copies them.
    let selector = unique_name("op");
    let template = kube_bind_template("kube-bind-operator", "kb-op", &selector);
    let provider = &clusters().provider;
    let app = &clusters().app;
    let _guard = app_cluster_binds();
    bind_template(&template);

    let log = scratch_dir().join(unique_name("kube-bind-provider.log"));
    let _controller = Controller(
        Command::new(&binary)
            .arg("--kubeconfig")
            .arg(&provider.kubeconfig)
            .args(["--group", "anynines.com", "--version", "v1"])
            .args([
                "--resource",
                "servicebindings",
                "--secret-field",
                "instanceName",
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("a log file"))
            .spawn()
            .expect("the kube-bind provider controller starts"),
    );

    // The app team's objects, made with kubectl in the app cluster.
    let (secret, binding) = (unique_name("db-pass"), unique_name("orders"));
    let apply = |object: Value| {
        app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&object.to_string()));
    };
    apply(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": secret, "namespace": "default", "labels": {"kb-op": selector}},
        "stringData": {"password": "hunter22"}}));
    apply(
        json!({"apiVersion": "anynines.com/v1", "kind": "ServiceBinding",
        "metadata": {"name": binding, "namespace": "default"},
        "spec": {"instanceName": secret}}),
    );
    let encoded = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let wait_status = |password: &str, why: &str| -> Value {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let seen: Value = serde_json::from_str(&app.kubectl(&[
                "-n",
                "default",
                "get",
                "servicebindings.anynines.com",
                &binding,
                "-o",
                "json",
            ]))
            .expect("JSON");
            if seen["status"]["phase"] == "Bound"
                && seen["status"]["passwordData"] == encoded(password).as_str()
            {
                return seen;
            }
            assert!(
                Instant::now() < deadline,
                "{why}: the app cluster reads {}; the controller logged:\n{}",
                seen["status"],
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    let seen = wait_status(
        "hunter22",
        "the controller reads the consumer's Secret and writes the status",
    );
    // It found the consumer by kube-bind's marks, which bindery keeps to
    // the provider: the app cluster reads the status, not the marks.
    assert_eq!(
        seen["status"]["clusterNamespace"],
        app_cluster_namespace(),
        "{seen}"
    );
    assert_eq!(seen["status"]["consumerNamespace"], "default", "{seen}");
    let annotations = seen["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert!(
        !annotations.keys().any(|k| k.starts_with("kube-bind.io/")),
        "{seen}"
    );
    // The consumer changes its Secret; the controller sees the change.
    apply(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": secret, "namespace": "default", "labels": {"kb-op": selector}},
        "stringData": {"password": "correct-horse"}}));
    wait_status("correct-horse", "a changed Secret reaches the controller");
    app.kubectl(&[
        "-n",
        "default",
        "delete",
        "servicebindings.anynines.com",
        &binding,
    ]);
    app.kubectl(&["-n", "default", "delete", "secret", &secret]);
}
