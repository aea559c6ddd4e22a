//! Provider-owned claimed Secrets in the app cluster, against the real
//! clusters: bound with `bindery bind` (postgresql claims provider Secrets
//! labelled `app.kubernetes.io/part-of=postgresql`), a covered Secret in the
//! consumer's provider namespace appears in the app namespace and follows
//! its source. It goes when the source stops matching, comes back when it
//! matches again, and goes when the claim is rejected or the source deleted.
//! An uncovered Secret never appears, and a consumer's own Secret of the
//! same name is never overwritten.
//!
//! Consumer-owned claimed objects (ConfigMaps labelled `share=yes`) are read
//! by a provider controller through the consumer's workspace path: lists,
//! gets and watches show only what the claim covers, a ConfigMap that starts
//! or stops matching arrives as ADDED or leaves as DELETED, and a rejected
//! claim reads nothing.

use crate::bind::{app_cluster_binds, app_cluster_namespace};
use crate::binder::{bind_template, bindery_cli, succeeded};
use crate::controllers::install_examples;
use crate::fixture::{clusters, unique_name};
use std::time::{Duration, Instant};

const PART_OF: &str = "app.kubernetes.io/part-of";

/// The app cluster's `default/<name>` Secret's `password`, decoded; `None`
/// when there is no such Secret.
fn app_password(name: &str) -> Option<String> {
    let output = clusters().app.kubectl_output(
        &[
            "-n",
            "default",
            "get",
            "secret",
            name,
            "-o",
            "jsonpath={.data.password}",
        ],
        None,
    );
    output.status.success().then(|| {
        use base64::Engine;
        let encoded = String::from_utf8_lossy(&output.stdout).to_string();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes).to_string()
    })
}

/// Waits until the app cluster's copy of `name` has `want` as its password
/// (`None`: until there is no copy).
fn wait_for_copy(name: &str, want: Option<&str>, why: &str) {
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        let seen = app_password(name);
        if seen.as_deref() == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{why}: the app cluster's {name} is {seen:?}, not {want:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn provider_owned_claimed_secrets_follow_their_source_into_the_app_cluster() {
    install_examples();
    let _guard = app_cluster_binds();
    let token = bind_template("postgresql");
    let (app, provider) = (&clusters().app, &clusters().provider);
    let source_namespace = format!("{}-default", app_cluster_namespace());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !provider
        .kubectl_output(&["get", "namespace", &source_namespace], None)
        .status
        .success()
    {
        assert!(
            Instant::now() < deadline,
            "the pre-seeded namespace never appeared"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let secret = |name: &str, password: &str, part_of: Option<&str>| {
        let mut args = vec![
            "-n".to_string(),
            source_namespace.clone(),
            "create".into(),
            "secret".into(),
            "generic".into(),
            name.into(),
            format!("--from-literal=password={password}"),
            "--dry-run=client".into(),
            "-o".into(),
            "yaml".into(),
        ];
        let yaml = provider.kubectl(&args.iter().map(String::as_str).collect::<Vec<_>>());
        provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&yaml));
        args.clear();
        let label = match part_of {
            Some(value) => format!("{PART_OF}={value}"),
            None => format!("{PART_OF}-"),
        };
        provider.kubectl(&[
            "-n",
            &source_namespace,
            "label",
            "--overwrite",
            "secret",
            name,
            &label,
        ]);
    };

    let credentials = unique_name("orders-credentials");
    let unclaimed = unique_name("unclaimed");
    secret(&unclaimed, "hidden", None);
    secret(&credentials, "first", Some("postgresql"));
    wait_for_copy(&credentials, Some("first"), "a covered Secret is copied");
    let copy_labels = app.kubectl(&[
        "-n",
        "default",
        "get",
        "secret",
        &credentials,
        "-o",
        "jsonpath={.metadata.labels}",
    ]);
    assert!(
        copy_labels.contains("postgresql") && !copy_labels.contains("bindery.dev/export"),
        "{copy_labels}"
    );

    secret(&credentials, "second", Some("postgresql"));
    wait_for_copy(&credentials, Some("second"), "the copy follows its source");
    assert_eq!(
        app_password(&unclaimed),
        None,
        "never copied: no claim covers it"
    );

    secret(&credentials, "second", Some("something-else"));
    wait_for_copy(&credentials, None, "a source that stops matching");
    secret(&credentials, "third", Some("postgresql"));
    wait_for_copy(&credentials, Some("third"), "a source that starts matching");

    // The consumer rejects the claim, then accepts it again.
    let set_state = |state: &str| {
        app.kubectl(&[
            "patch",
            "apiservicebinding",
            "postgresql",
            "--type=json",
            "-p",
            &format!(
                r#"[{{"op":"replace","path":"/spec/permissionClaims/0/state","value":"{state}"}}]"#
            ),
        ]);
    };
    set_state("Rejected");
    wait_for_copy(&credentials, None, "a rejected claim");
    set_state("Accepted");
    wait_for_copy(&credentials, Some("third"), "the claim accepted again");

    // A consumer's own Secret of a claimed name stays the consumer's.
    let own = unique_name("own");
    app.kubectl(&[
        "-n",
        "default",
        "create",
        "secret",
        "generic",
        &own,
        "--from-literal=password=mine",
    ]);
    secret(&own, "theirs", Some("postgresql"));
    provider.kubectl(&["-n", &source_namespace, "delete", "secret", &credentials]);
    wait_for_copy(&credentials, None, "a deleted source");
    assert_eq!(app_password(&own).as_deref(), Some("mine"));

    // Unbinding takes the copies with it, and leaves the consumer's own.
    secret(&credentials, "fourth", Some("postgresql"));
    wait_for_copy(&credentials, Some("fourth"), "copied again");
    succeeded("unbind", &bindery_cli("unbind", &token, &["postgresql"]));
    assert_eq!(app_password(&credentials), None, "unbind removed the copy");
    assert_eq!(app_password(&own).as_deref(), Some("mine"));
    app.kubectl(&["-n", "default", "delete", "secret", &own]);
}

/// A template offering servicebindings (not postgresqlinstances, which
/// other tests bind through their own exports) with a claim on the
/// consumer's ConfigMaps labelled `share=yes`; returns its name.
fn template_claiming_shared_config_maps() -> String {
    let name = unique_name("shared-config");
    let template = serde_json::json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportTemplate",
        "metadata": {"name": name},
        "spec": {
            "scope": "Namespaced",
            "resources": [{"group": "anynines.com", "resource": "servicebindings"}],
            "permissionClaims": [{"group": "", "resource": "configmaps", "selector": {
                "owner": "Consumer", "labelSelector": {"matchLabels": {"share": "yes"}}}}],
        },
    });
    clusters()
        .provider
        .kubectl_with_stdin(&["apply", "-f", "-"], Some(&template.to_string()));
    name
}

#[test]
fn consumer_owned_claimed_objects_are_read_through_the_workspace_filtered_by_the_claim() {
    use crate::binder::curl_with_token;
    use serde_json::Value;
    install_examples();
    let template = template_claiming_shared_config_maps();
    let _guard = app_cluster_binds();
    let token = bind_template(&template);
    let app = &clusters().app;
    let consumer = app_cluster_namespace()
        .strip_prefix("kube-bind-")
        .unwrap()
        .to_string();
    let (shared, private) = (unique_name("shared"), unique_name("private"));
    for (name, share) in [(&shared, "yes"), (&private, "no")] {
        app.kubectl(&[
            "-n",
            "default",
            "create",
            "configmap",
            name,
            "--from-literal=k=v",
        ]);
        app.kubectl(&[
            "-n",
            "default",
            "label",
            "configmap",
            name,
            &format!("share={share}"),
        ]);
    }
    let (_, controller) =
        crate::workspace::controller_token(&template, &["get", "list", "watch"], None);
    let base = format!(
        "{}/services/export/{template}/clusters/{consumer}/api/v1/namespaces/default",
        crate::bindery::bindery().url
    );
    let as_controller = |method: &str, path: &str| {
        curl_with_token(method, &format!("{base}{path}"), Some(&controller), None)
    };
    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap_or_else(|| panic!("a list: {list}"))
            .iter()
            .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
            .collect()
    };

    let (code, list) = as_controller("GET", "/configmaps");
    assert_eq!(code, 200, "{list}");
    assert_eq!(
        names(&list),
        vec![shared.clone()],
        "only what the claim covers"
    );
    let (code, _) = as_controller("GET", &format!("/configmaps/{shared}"));
    assert_eq!(code, 200);
    let (code, status) = as_controller("GET", &format!("/configmaps/{private}"));
    assert_eq!((code, status["reason"].clone()), (404, "NotFound".into()));
    let (code, _) = as_controller("GET", "/secrets");
    assert_eq!(code, 404, "nothing outside a claim");
    let (code, status) = as_controller("DELETE", &format!("/configmaps/{shared}"));
    assert_eq!(code, 403, "no delete on the content: {status}");

    // A watch: the private one starts matching (ADDED), the shared one
    // stops (DELETED).
    let version = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut watch = std::process::Command::new("curl")
        .args(["-sN", "--max-time", "30", "--cacert"])
        .arg(crate::bindery::bindery().pki.join("bindery/serving-ca.crt"))
        .args(["-H", &format!("Authorization: Bearer {controller}")])
        .arg(format!(
            "{base}/configmaps?watch=1&resourceVersion={version}"
        ))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if let Ok(event) = serde_json::from_str::<Value>(&line) {
                let _ = tx.send(event);
            }
        }
    });
    std::thread::sleep(Duration::from_secs(1));
    app.kubectl(&[
        "-n",
        "default",
        "label",
        "--overwrite",
        "configmap",
        &private,
        "share=yes",
    ]);
    app.kubectl(&[
        "-n",
        "default",
        "label",
        "--overwrite",
        "configmap",
        &shared,
        "share=no",
    ]);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.len() < 2 {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("only {seen:?} on the watch"));
        seen.push((
            event["type"].as_str().unwrap_or_default().to_string(),
            event["object"]["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        ));
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(
        seen,
        vec![
            ("ADDED".to_string(), private.clone()),
            ("DELETED".to_string(), shared.clone())
        ]
    );

    // Rejected, the claim gives nothing at all.
    app.kubectl(&[
        "patch",
        "apiservicebinding",
        &template,
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/permissionClaims/0/state","value":"Rejected"}]"#,
    ]);
    let (code, _) = as_controller("GET", "/configmaps");
    assert_eq!(code, 404, "a rejected claim reads nothing");
    let (code, _) = as_controller("GET", &format!("/configmaps/{private}"));
    assert_eq!(code, 404);

    succeeded("unbind", &bindery_cli("unbind", &token, &[&template]));
    for name in [&shared, &private] {
        app.kubectl(&["-n", "default", "delete", "configmap", name]);
    }
}
