//! Provider-owned claimed Secrets in the app cluster, against the real
//! clusters: bound with `bindery bind` (postgresql claims provider Secrets
//! labelled `app.kubernetes.io/part-of=postgresql`), a covered Secret in the
//! consumer's provider namespace appears in the app namespace and follows
//! its source. It goes when the source stops matching, comes back when it
//! matches again, and goes when the claim is rejected or the source deleted.
//! An uncovered Secret never appears, a consumer's own Secret of the same
//! name is never overwritten, and a copy the app cluster refuses (its own
//! admission policy) holds up none of the others.
//!
//! Consumer-owned claimed objects (ConfigMaps labelled `share=yes`) are read
//! by a provider controller through the consumer's workspace path: lists,
//! gets and watches show only what the claim covers, a ConfigMap that starts
//! or stops matching arrives as ADDED or leaves as DELETED, and a rejected
//! claim reads nothing. The same controller, with kubectl on that path,
//! discovers and explains the claimed resource next to the exported one,
//! creates, patches, replaces and deletes covered ConfigMaps, and cannot
//! create one the claim does not cover, take one out of the claim, or touch
//! one outside it. Its writes, made both through the workspace and straight
//! at the app cluster, get the app cluster's own answers: warnings, refusals
//! in the negotiated form, go-restful's refusals in its order, and kubectl's
//! protobuf creates.

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

/// The names of the Secrets made in the app cluster's `default` namespace
/// while it runs (`kubectl get --watch-only`), from when a probe Secret of
/// its own shows the watch is open.
struct SecretsWatch {
    child: std::process::Child,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    probes: Vec<String>,
}

impl SecretsWatch {
    fn start(probe: &str) -> Self {
        use std::io::BufRead;
        let app = &clusters().app;
        let mut child = std::process::Command::new(crate::fixture::kubectl_path())
            .arg("--kubeconfig")
            .arg(&app.kubeconfig)
            .args([
                "-n",
                "default",
                "get",
                "secrets",
                "--watch-only",
                "-o",
                "name",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("kubectl runs");
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stdout = child.stdout.take().expect("piped");
        let kept = lines.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                kept.lock().unwrap().push(line);
            }
        });
        // Made until one shows: one made before the watch's own list
        // began would not.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut made = Vec::new();
        'opened: loop {
            let name = format!("{probe}-{}", made.len());
            app.kubectl(&["-n", "default", "create", "secret", "generic", &name]);
            made.push(name);
            for _ in 0..10 {
                let seen = lines.lock().unwrap().clone();
                if made.iter().any(|m| seen.contains(&format!("secret/{m}"))) {
                    break 'opened;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            assert!(
                Instant::now() < deadline,
                "the watch of the app cluster's Secrets never showed {made:?}"
            );
        }
        Self {
            child,
            lines,
            probes: made,
        }
    }

    fn stop(mut self) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for probe in &self.probes {
            clusters()
                .app
                .kubectl(&["-n", "default", "delete", "secret", probe]);
        }
        self.lines.lock().unwrap().clone()
    }
}

#[test]
fn provider_owned_claimed_secrets_follow_their_source_into_the_app_cluster() {
    install_examples();
    let _guard = app_cluster_binds();
    let token = bind_template("postgresql");
    let (app, provider) = (&clusters().app, &clusters().provider);
    let source_namespace = format!("{}-default", app_cluster_namespace());
    provider.wait_found(&["namespace", &source_namespace], Duration::from_secs(30));
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

    // A ServiceAccount token Secret the claim covers: the provider's token
    // controller fills it with a token of the provider namespace's
    // `default` account, and a copy would hand that token to the app
    // cluster (whose own token controller would take the copy for one of
    // its accounts).
    let watched = SecretsWatch::start(&unique_name("probe"));
    let token_secret = unique_name("token");
    let token_object = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": token_secret, "namespace": source_namespace,
            "labels": {PART_OF: "postgresql"},
            "annotations": {"kubernetes.io/service-account.name": "default"}},
        "type": "kubernetes.io/service-account-token",
    });
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&token_object.to_string()));
    secret(&credentials, "second", Some("postgresql"));
    wait_for_copy(&credentials, Some("second"), "the copy follows its source");
    assert_eq!(
        app_password(&unclaimed),
        None,
        "never copied: no claim covers it"
    );
    // Watched, not read once: the app cluster's token controller deletes
    // a copy whose account uid is the provider's soon after it is made.
    let seen = watched.stop();
    assert!(
        !seen
            .iter()
            .any(|line| line.ends_with(&format!("/{token_secret}"))),
        "a ServiceAccount token Secret was copied into the app cluster: {seen:?}"
    );

    // A copy the app cluster refuses (here by an admission policy of its
    // own) holds up none of the others: listed before them, it is skipped
    // and they are still made and followed.
    let refused = unique_name("a-refused");
    let _policy = RefusedSecret::install(&refused);
    secret(&refused, "never", Some("postgresql"));
    secret(&credentials, "refused-beside", Some("postgresql"));
    wait_for_copy(
        &credentials,
        Some("refused-beside"),
        "a copy listed after one the app cluster refuses",
    );
    assert_eq!(app_password(&refused), None, "the app cluster refused it");
    provider.kubectl(&["-n", &source_namespace, "delete", "secret", &refused]);
    drop(_policy);

    secret(&credentials, "second", Some("something-else"));
    wait_for_copy(&credentials, None, "a source that stops matching");
    secret(&credentials, "third", Some("postgresql"));
    wait_for_copy(&credentials, Some("third"), "a source that starts matching");

    // The consumer rejects the claim, then accepts it again.
    let set_state = |state: &str| {
        app.kubectl(&[
            "patch",
            "apiservicebinding",
            "bindery.postgresql",
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

/// An admission policy of the app cluster's own that refuses a Secret of
/// one name, in force from `install` until dropped.
struct RefusedSecret(String);

impl RefusedSecret {
    fn install(name: &str) -> Self {
        let app = &clusters().app;
        let policy = serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{"apiGroups": [""],
                    "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                    "resources": ["secrets"]}]},
                "validations": [{"expression": format!("object.metadata.name != '{name}'"),
                    "message": "refused by the test's policy"}],
            },
        });
        let binding = serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"]},
        });
        for object in [policy, binding] {
            app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&object.to_string()));
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let tried = app.kubectl_output(
                &[
                    "-n",
                    "default",
                    "create",
                    "secret",
                    "generic",
                    name,
                    "--dry-run=server",
                ],
                None,
            );
            if !tried.status.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the app cluster's policy refusing {name} never took effect"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Self(name.to_string())
    }
}

impl Drop for RefusedSecret {
    fn drop(&mut self) {
        let app = &clusters().app;
        for kind in [
            "validatingadmissionpolicybinding",
            "validatingadmissionpolicy",
        ] {
            app.kubectl(&["delete", kind, &self.0, "--ignore-not-found"]);
        }
    }
}

/// kube-bind's claims carry no `owner`: the direction is each object's, by
/// its `kube-bind.io/owner` label, or where it exists. Under such a claim a
/// provider Secret marked as the provider's, and one only the provider has,
/// are copied into the app cluster; one kube-bind marked the consumer's (a
/// copy its konnector pushed up) is not. On main no owner-less claim copied
/// anything, so an export kube-bind made lost its provider Secrets when it
/// moved to bindery.
#[test]
fn a_kube_bind_claim_copies_down_what_kube_bind_would() {
    install_examples();
    let template = unique_name("kube-bind-claims");
    let selector = unique_name("kb");
    let object = serde_json::json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportTemplate",
        "metadata": {"name": template},
        "spec": {
            "scope": "Namespaced",
            "resources": [{"group": "anynines.com", "resource": "servicebindings"}],
            "permissionClaims": [{"group": "", "resource": "secrets",
                "selector": {"labelSelector": {"matchLabels": {"kb-claim": selector}}}}],
            "namespaces": [{"name": "default"}],
        },
    });
    let provider = &clusters().provider;
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&object.to_string()));
    let _guard = app_cluster_binds();
    let token = bind_template(&template);
    let source_namespace = format!("{}-default", app_cluster_namespace());
    provider.wait_found(&["namespace", &source_namespace], Duration::from_secs(30));
    let secret = |name: &str, owner: Option<&str>| {
        let mut labels = serde_json::json!({"kb-claim": selector});
        if let Some(owner) = owner {
            labels["kube-bind.io/owner"] = serde_json::json!(owner);
        }
        let secret = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": source_namespace, "labels": labels},
            "stringData": {"password": name},
        });
        provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&secret.to_string()));
    };
    let (marked, unmarked, theirs) = (
        unique_name("kb-provider"),
        unique_name("kb-unmarked"),
        unique_name("kb-consumer"),
    );
    // The copy kube-bind's konnector left of `marked`, now stale.
    let left = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": marked, "namespace": "default",
            "labels": {"kube-bind.io/owner": "provider"},
            "annotations": {"kube-bind.io/provider-uid": "from-the-konnector"}},
        "stringData": {"password": "stale"},
    });
    clusters()
        .app
        .kubectl_with_stdin(&["apply", "-f", "-"], Some(&left.to_string()));
    secret(&theirs, Some("consumer"));
    secret(&marked, Some("provider"));
    secret(&unmarked, None);
    wait_for_copy(
        &marked,
        Some(&marked),
        "marked the provider's: copied over the konnector's stale copy",
    );
    wait_for_copy(&unmarked, Some(&unmarked), "only on the provider: copied");
    assert_eq!(
        app_password(&theirs),
        None,
        "marked the consumer's: never copied"
    );
    succeeded("unbind", &bindery_cli("unbind", &token, &[&template]));
    wait_for_copy(&marked, None, "unbound: the copies go");
    let _ = provider.kubectl_output(
        &[
            "-n",
            &source_namespace,
            "delete",
            "secret",
            &marked,
            &unmarked,
            &theirs,
        ],
        None,
    );
}

/// A template as a provider that ran kube-bind offers one (consumer-owned
/// claimed objects copied up, `bindery.dev/claimed-objects: Copied`):
/// servicebindings, with a claim of the Secrets labelled `label: selector`
/// in app namespace `default`. Returns its name, made of `prefix`.
pub(crate) fn kube_bind_template(prefix: &str, label: &str, selector: &str) -> String {
    let template = unique_name(prefix);
    let object = serde_json::json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportTemplate",
        "metadata": {"name": template,
            "annotations": {"bindery.dev/claimed-objects": "Copied"}},
        "spec": {
            "scope": "Namespaced",
            "resources": [{"group": "anynines.com", "resource": "servicebindings"}],
            "permissionClaims": [{"group": "", "resource": "secrets",
                "selector": {"labelSelector": {"matchLabels": {label: selector}}}}],
            "namespaces": [{"name": "default"}],
        },
    });
    clusters()
        .provider
        .kubectl_with_stdin(&["apply", "-f", "-"], Some(&object.to_string()));
    template
}

/// An export that keeps kube-bind's way (`bindery.dev/claimed-objects:
/// Copied`, from its template; `bindery migrate` sets it on what it takes
/// over) copies the consumer's claimed Secrets up into the provider
/// namespace, as kube-bind's konnector does, where a provider controller
/// written for kube-bind reads them: marked the consumer's and with
/// kube-bind's namespace marks, following their source, over the stale
/// copy the konnector left, never what the app cluster holds as the
/// provider's (issue 33, finding 1: after a move a new app Secret never
/// reached the provider).
#[test]
fn a_kube_bind_export_copies_the_consumers_claimed_secrets_up() {
    install_examples();
    let selector = unique_name("up");
    let template = kube_bind_template("kube-bind-push", "kb-up", &selector);
    let provider = &clusters().provider;
    let app = &clusters().app;
    let _guard = app_cluster_binds();
    let token = bind_template(&template);
    let provider_namespace = format!("{}-default", app_cluster_namespace());
    let (mine, pulled, stale) = (
        unique_name("up-mine"),
        unique_name("up-pulled"),
        unique_name("up-stale"),
    );
    // The copy kube-bind's konnector pushed up earlier, now stale.
    provider.wait_found(&["namespace", &provider_namespace], Duration::from_secs(30));
    provider.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(
            &serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": stale, "namespace": provider_namespace,
                    "labels": {"kb-up": selector, "kube-bind.io/owner": "consumer"}},
                "stringData": {"password": "stale"}})
            .to_string(),
        ),
    );
    let app_secret = |name: &str, password: &str, owner: Option<&str>| {
        let mut labels = serde_json::json!({"kb-up": selector});
        if let Some(owner) = owner {
            labels["kube-bind.io/owner"] = serde_json::json!(owner);
        }
        app.kubectl_with_stdin(
            &["apply", "-f", "-"],
            Some(
                &serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": name, "namespace": "default", "labels": labels},
                    "stringData": {"password": password}})
                .to_string(),
            ),
        );
    };
    app_secret(&mine, "first", None);
    app_secret(&stale, "fresh", Some("consumer"));
    app_secret(&pulled, "provider's", Some("provider"));
    let upstream = |name: &str| -> Option<serde_json::Value> {
        provider.get_json(&provider_namespace, "secret", name)
    };
    let password = |secret: &serde_json::Value| {
        use base64::Engine;
        let raw = secret["data"]["password"].as_str().unwrap_or_default();
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(raw)
                .unwrap_or_default(),
        )
        .unwrap_or_default()
    };
    let wait_upstream = |name: &str, want: Option<&str>, why: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let found = upstream(name);
            if found.as_ref().map(password).as_deref() == want {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "{why}: {name} on the provider is {found:?}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    let copy =
        wait_upstream(&mine, Some("first"), "the consumer's Secret goes up").expect("a copy");
    let labels = &copy["metadata"]["labels"];
    let annotations = &copy["metadata"]["annotations"];
    assert_eq!(labels["kube-bind.io/owner"], "consumer", "{copy}");
    assert_eq!(labels["kb-up"], selector.as_str(), "{copy}");
    assert_eq!(
        annotations["kube-bind.io/cluster-namespace"],
        app_cluster_namespace(),
        "{copy}"
    );
    assert_eq!(
        annotations["kube-bind.io/consumer-namespace"], "default",
        "{copy}"
    );
    wait_upstream(
        &stale,
        Some("fresh"),
        "the konnector's stale copy follows its source",
    );
    app_secret(&mine, "second", None);
    wait_upstream(&mine, Some("second"), "a change follows");
    assert!(
        upstream(&pulled).is_none(),
        "what the app cluster holds as the provider's never goes up"
    );
    // Never copied back down: the app cluster still has exactly its own.
    let again = app.kubectl(&[
        "-n",
        "default",
        "get",
        "secret",
        &mine,
        "-o",
        "jsonpath={.metadata.labels}",
    ]);
    assert!(!again.contains("bindery.dev/claimed"), "{again}");
    app.kubectl(&["-n", "default", "delete", "secret", &mine]);
    wait_upstream(&mine, None, "the copy goes with its source");
    succeeded("unbind", &bindery_cli("unbind", &token, &[&template]));
    let _ = app.kubectl_output(
        &["-n", "default", "delete", "secret", &stale, &pulled],
        None,
    );
    let _ = provider.kubectl_output(
        &["-n", &provider_namespace, "delete", "secret", &stale],
        None,
    );
}

/// A template offering servicebindings (not postgresqlinstances, which
/// other tests bind through their own exports) with a claim on the
/// consumer's ConfigMaps labelled `share=yes`, and the `extra` claims;
/// returns its name.
fn template_claiming_shared_config_maps(extra: &[serde_json::Value]) -> String {
    let name = unique_name("shared-config");
    let mut claims = vec![
        serde_json::json!({"group": "", "resource": "configmaps", "selector": {
        "owner": "Consumer", "labelSelector": {"matchLabels": {"share": "yes"}}}}),
    ];
    claims.extend(extra.iter().cloned());
    let template = serde_json::json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportTemplate",
        "metadata": {"name": name},
        "spec": {
            "scope": "Namespaced",
            "resources": [{"group": "anynines.com", "resource": "servicebindings"}],
            "permissionClaims": claims,
        },
    });
    clusters()
        .provider
        .kubectl_with_stdin(&["apply", "-f", "-"], Some(&template.to_string()));
    name
}

/// The app cluster bound to a template claiming its `share=yes`
/// ConfigMaps, with one ConfigMap `shared` (`share=yes`, `k: v`) and one
/// `private` (`share=no`) in `default`; the guard keeps other binding
/// tests out.
struct SharedConfigMaps {
    template: String,
    _guard: std::sync::MutexGuard<'static, ()>,
    token: String,
    consumer: String,
    shared: String,
    private: String,
}

/// Unbinds `template` and deletes the ConfigMaps `made` (those that still
/// exist): a `share=yes` ConfigMap left behind would show up in the next
/// claims test's lists.
fn unbind_and_delete(token: &str, template: &str, made: &[&str]) {
    succeeded("unbind", &bindery_cli("unbind", token, &[template]));
    let app = &clusters().app;
    let _ = app.kubectl_output(
        &[
            &["-n", "default", "delete", "configmap", "--ignore-not-found"],
            made,
        ]
        .concat(),
        None,
    );
}

fn bind_shared_config_maps() -> SharedConfigMaps {
    bind_shared_config_maps_and(&[])
}

/// [`bind_shared_config_maps`], with the `extra` claims too.
fn bind_shared_config_maps_and(extra: &[serde_json::Value]) -> SharedConfigMaps {
    install_examples();
    let template = template_claiming_shared_config_maps(extra);
    let _guard = app_cluster_binds();
    let token = bind_template(&template);
    let consumer = app_cluster_namespace()
        .strip_prefix("kube-bind-")
        .unwrap()
        .to_string();
    let (shared, private) = (unique_name("shared"), unique_name("private"));
    for (name, share) in [(&shared, "yes"), (&private, "no")] {
        clusters().app.kubectl_with_stdin(
            &["apply", "-f", "-"],
            Some(&format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default, \
                 labels: {{share: \"{share}\"}}}}\ndata: {{k: v}}\n"
            )),
        );
    }
    SharedConfigMaps {
        template,
        _guard,
        token,
        consumer,
        shared,
        private,
    }
}

#[test]
fn consumer_owned_claimed_objects_are_read_through_the_workspace_filtered_by_the_claim() {
    use crate::binder::curl_with_token;
    use serde_json::Value;
    let SharedConfigMaps {
        template,
        _guard,
        token,
        consumer,
        shared,
        private,
    } = bind_shared_config_maps();
    let app = &clusters().app;
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
    // A Table lists only what the claim covers, whatever its rows carry
    // (on main a row without an object was checked against nothing: this
    // path dropped them all, the consumer path kept them all).
    for include in ["None", "Metadata"] {
        let mut command = std::process::Command::new("curl");
        command
            .args(["--cacert"])
            .arg(crate::bindery::bindery().pki.join("bindery/serving-ca.crt"))
            .args(["-H", &format!("Authorization: Bearer {controller}")])
            .args(["-H", "Accept: application/json;as=Table;v=v1;g=meta.k8s.io"])
            .arg(format!("{base}/configmaps?includeObject={include}"));
        let (code, table) = crate::fixture::curl_json(command);
        assert_eq!(code, 200, "{table}");
        let rows: Vec<&str> = table["rows"]
            .as_array()
            .unwrap_or_else(|| panic!("a Table: {table}"))
            .iter()
            .filter_map(|row| row["cells"][0].as_str())
            .collect();
        assert_eq!(rows, [shared.as_str()], "{include}: {table}");
    }
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
    let (mut watch, rx) = crate::binder::watch_with_token(
        &format!("{base}/configmaps?watch=1&resourceVersion={version}"),
        &controller,
        30,
    );
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
        &format!("bindery.{template}"),
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/permissionClaims/0/state","value":"Rejected"}]"#,
    ]);
    let (code, _) = as_controller("GET", "/configmaps");
    assert_eq!(code, 404, "a rejected claim reads nothing");
    let (code, _) = as_controller("GET", &format!("/configmaps/{private}"));
    assert_eq!(code, 404);

    unbind_and_delete(&token, &template, &[&shared, &private]);
}

/// kubectl against a workspace path, with a provider token.
fn workspace_kubectl(server: &str, token: &str, args: &[&str]) -> std::process::Output {
    let scratch = crate::fixture::scratch_dir().join(unique_name("vw-kubectl"));
    std::process::Command::new(crate::fixture::kubectl_path())
        .env("KUBECONFIG", scratch.join("none"))
        .arg(format!("--cache-dir={}", scratch.join("cache").display()))
        .arg(format!("--server={server}"))
        .arg(format!("--token={token}"))
        .arg(format!(
            "--certificate-authority={}",
            crate::bindery::bindery()
                .pki
                .join("bindery/serving-ca.crt")
                .display()
        ))
        .args(args)
        .output()
        .expect("kubectl runs")
}

#[test]
fn consumer_owned_claimed_objects_are_discovered_and_written_through_the_workspace_only_as_claimed()
{
    let SharedConfigMaps {
        template,
        _guard,
        token,
        consumer,
        shared,
        private,
    } = bind_shared_config_maps();
    let app = &clusters().app;
    let made = unique_name("made");
    let verbs = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    let (_, controller) = crate::workspace::controller_token(&template, &verbs, None);
    let server = format!(
        "{}/services/export/{template}/clusters/{consumer}",
        crate::bindery::bindery().url
    );
    let run = |args: &[&str]| workspace_kubectl(&server, &controller, args);
    let ok = |args: &[&str]| -> String {
        let output = run(args);
        assert!(
            output.status.success(),
            "kubectl {args:?} through the workspace: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).to_string()
    };
    let refused = |args: &[&str], reason: &str| {
        let output = run(args);
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        assert!(
            !output.status.success() && stderr.to_lowercase().contains(reason),
            "kubectl {args:?} should fail with {reason}: {stderr}"
        );
    };
    let app_data = |name: &str| {
        app.kubectl_output(
            &[
                "-n",
                "default",
                "get",
                "configmap",
                name,
                "-o",
                "jsonpath={.data.k}",
            ],
            None,
        )
    };

    // Discovery and OpenAPI: the claimed resource next to the exported one,
    // nothing else of the core group.
    let resources = ok(&["api-resources", "-o", "name"]);
    let listed: Vec<&str> = resources.lines().collect();
    assert!(listed.contains(&"configmaps"), "{resources}");
    assert!(
        listed.iter().any(|r| r.starts_with("servicebindings.")),
        "{resources}"
    );
    assert!(!listed.contains(&"secrets"), "{resources}");
    assert!(!listed.contains(&"pods"), "{resources}");
    let explained = ok(&["explain", "configmaps.data"]);
    assert!(
        explained.contains("KIND:") && explained.contains("ConfigMap"),
        "{explained}"
    );
    let names = ok(&["-n", "default", "get", "configmaps", "-o", "name"]);
    assert_eq!(names.trim(), format!("configmap/{shared}"));

    // Create: only an object the claim covers.
    refused(
        &[
            "-n",
            "default",
            "create",
            "configmap",
            &made,
            "--from-literal=k=v",
        ],
        "forbidden",
    );
    let manifest = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{made}\",\
         \"namespace\":\"default\",\"labels\":{{\"share\":\"yes\"}}}},\"data\":{{\"k\":\"made\"}}}}"
    );
    let manifest_file = crate::fixture::scratch_dir().join(format!("{made}.json"));
    std::fs::write(&manifest_file, &manifest).unwrap();
    ok(&["create", "-f", manifest_file.to_str().unwrap()]);
    assert_eq!(String::from_utf8_lossy(&app_data(&made).stdout), "made");

    // Patch and update (PUT) of a covered object land in the app cluster.
    ok(&[
        "-n",
        "default",
        "patch",
        "configmap",
        &shared,
        "--type=merge",
        "-p",
        r#"{"data":{"k":"patched"}}"#,
    ]);
    assert_eq!(
        String::from_utf8_lossy(&app_data(&shared).stdout),
        "patched"
    );
    let current = ok(&["-n", "default", "get", "configmap", &shared, "-o", "json"]);
    let replaced = current.replace("\"patched\"", "\"replaced\"");
    std::fs::write(&manifest_file, &replaced).unwrap();
    ok(&["replace", "-f", manifest_file.to_str().unwrap()]);
    assert_eq!(
        String::from_utf8_lossy(&app_data(&shared).stdout),
        "replaced"
    );

    // A write that would take the object out of the claim is forbidden, and
    // changes nothing.
    refused(
        &[
            "-n",
            "default",
            "label",
            "--overwrite",
            "configmap",
            &shared,
            "share=no",
        ],
        "forbidden",
    );
    let label = app.kubectl(&[
        "-n",
        "default",
        "get",
        "configmap",
        &shared,
        "-o",
        "jsonpath={.metadata.labels.share}",
    ]);
    assert_eq!(label, "yes");

    // An object outside the claim cannot be written, read or deleted.
    for args in [
        vec![
            "-n",
            "default",
            "patch",
            "configmap",
            private.as_str(),
            "--type=merge",
            "-p",
            r#"{"data":{"k":"stolen"}}"#,
        ],
        vec![
            "-n",
            "default",
            "label",
            "--overwrite",
            "configmap",
            private.as_str(),
            "share=yes",
        ],
        vec!["-n", "default", "delete", "configmap", private.as_str()],
    ] {
        refused(&args, "not found");
    }
    assert_eq!(String::from_utf8_lossy(&app_data(&private).stdout), "v");

    // Delete of a covered object.
    ok(&["-n", "default", "delete", "configmap", &made]);
    assert!(!app_data(&made).status.success(), "{made} is still there");

    unbind_and_delete(&token, &template, &[&shared, &private]);
    let _ = std::fs::remove_file(manifest_file);
}

/// One HTTP answer, as curl saw it.
struct Reply {
    code: u16,
    content_type: String,
    warnings: Vec<String>,
    body: Vec<u8>,
    /// curl's own word when it got no answer (its exit status and stderr).
    failure: String,
}

impl Reply {
    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| {
            panic!(
                "{} is not JSON: {}{}",
                self.code,
                String::from_utf8_lossy(&self.body),
                self.failure
            )
        })
    }
}

/// Where a raw request goes: through bindery's workspace path as a
/// provider controller (to the app cluster's `default` namespace), or
/// straight to the app cluster as its admin (to another namespace, so that
/// the same names give the same answers).
enum Through<'a> {
    Workspace { base: &'a str, token: &'a str },
    AppCluster { namespace: &'a str },
}

/// Sends `body` with `headers` to `path` (below the namespace) through
/// `through`, with curl.
fn send(
    through: &Through<'_>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let scratch = crate::fixture::scratch_dir().join(unique_name("raw"));
    std::fs::create_dir_all(&scratch).unwrap();
    let (head, out, input) = (
        scratch.join("head"),
        scratch.join("body"),
        scratch.join("input"),
    );
    std::fs::write(&input, body).unwrap();
    let mut curl = std::process::Command::new("curl");
    curl.args(["-s", "-X", method, "-D"])
        .arg(&head)
        .arg("-o")
        .arg(&out)
        .args(["-w", "%{http_code}"]);
    match through {
        Through::Workspace { base, token } => {
            curl.arg("--cacert")
                .arg(crate::bindery::bindery().pki.join("bindery/serving-ca.crt"))
                .args(["-H", &format!("Authorization: Bearer {token}")])
                .arg(format!("{base}/api/v1/namespaces/default{path}"));
        }
        Through::AppCluster { namespace } => {
            let app = &clusters().app;
            let (cert, key) = app.pki.admin();
            curl.arg("--cacert")
                .arg(app.pki.ca())
                .arg("--cert")
                .arg(cert)
                .arg("--key")
                .arg(key)
                .arg(format!(
                    "{}/api/v1/namespaces/{namespace}{path}",
                    app.server
                ));
        }
    }
    for (name, value) in headers {
        curl.args(["-H", &format!("{name}: {value}")]);
    }
    if !body.is_empty() {
        curl.arg("--data-binary")
            .arg(format!("@{}", input.display()));
    }
    let output = curl.arg("-S").output().expect("curl runs");
    let code = String::from_utf8_lossy(&output.stdout).parse().unwrap_or(0);
    let head = std::fs::read_to_string(&head).unwrap_or_default();
    let header = |name: &str| -> Vec<String> {
        head.lines()
            .filter_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.eq_ignore_ascii_case(name)
                    .then(|| value.trim().to_string())
            })
            .collect()
    };
    let reply = Reply {
        code,
        content_type: header("content-type").pop().unwrap_or_default(),
        warnings: header("warning"),
        body: std::fs::read(&out).unwrap_or_default(),
        failure: if output.status.success() {
            String::new()
        } else {
            format!(
                " (curl {method} {path}: {}, {})",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )
        },
    };
    let _ = std::fs::remove_dir_all(&scratch);
    reply
}

/// Writes through the workspace are read with kube-apiserver's rules for a
/// built-in kind, sent as bindery encoded them, and answered as the app
/// cluster answers the same request itself: each request is made both ways
/// (through the workspace to `default`, straight to the app cluster in
/// another namespace) with the same names, and the answers compared. On
/// main the writes passed the caller's bytes on, its errors were passed
/// back as the app cluster's JSON whatever the caller negotiated, warnings
/// were dropped, and refusals of requests it could not read were its own.
#[test]
fn consumer_owned_claimed_writes_are_read_and_answered_as_the_app_cluster_would() {
    let by_kubectl = unique_name("by-kubectl");
    let SharedConfigMaps {
        template,
        _guard,
        token,
        consumer,
        shared,
        private,
    } = bind_shared_config_maps_and(&[serde_json::json!({
        "group": "", "resource": "configmaps", "selector": {"owner": "Consumer",
            "namedResources": [{"name": by_kubectl, "namespace": "default"}]}})]);
    let app = &clusters().app;
    let verbs = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    let (_, controller) = crate::workspace::controller_token(&template, &verbs, None);
    let server = format!(
        "{}/services/export/{template}/clusters/{consumer}",
        crate::bindery::bindery().url
    );
    let direct = unique_name("claims-direct");
    app.kubectl(&["create", "namespace", &direct]);
    for (name, share) in [(&shared, "yes"), (&private, "no")] {
        app.kubectl_with_stdin(
            &["apply", "-f", "-"],
            Some(&format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {direct}, \
                 labels: {{share: \"{share}\"}}}}\ndata: {{k: v}}\n"
            )),
        );
    }
    let workspace = Through::Workspace {
        base: &server,
        token: &controller,
    };
    let app_cluster = Through::AppCluster { namespace: &direct };
    let both = |method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]| {
        (
            send(&workspace, method, path, headers, body),
            send(&app_cluster, method, path, headers, body),
        )
    };
    let json = [("Content-Type", "application/json")];
    let stored = |namespace: &str, name: &str| -> serde_json::Value {
        let output = app.kubectl(&["-n", namespace, "get", "configmap", name, "-o", "json"]);
        let object: serde_json::Value = serde_json::from_str(&output).unwrap();
        serde_json::json!({"labels": object["metadata"]["labels"], "data": object["data"]})
    };

    // A body kube-apiserver reads with a warning (a key given twice), an
    // invalid UTF-8 byte and a lone surrogate: the same answer, warning
    // included, and the same object stored.
    let made = unique_name("made");
    let mut body = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{made}\",\
         \"labels\":{{\"share\":\"yes\"}}}},\"data\":{{\"k\":\"first\",\"k\":\"second\",\
         \"surrogate\":\"\\ud800\",\"bytes\":\"a"
    )
    .into_bytes();
    body.extend_from_slice(b"\xff\"}}");
    let (through, straight) = both("POST", "/configmaps", &json, &body);
    assert_eq!(
        (through.code, straight.code),
        (201, 201),
        "{}",
        String::from_utf8_lossy(&through.body)
    );
    assert_eq!(through.warnings, [r#"299 - "duplicate field \"data.k\"""#]);
    assert_eq!(through.warnings, straight.warnings);
    assert_eq!(stored("default", &made), stored(&direct, &made));
    assert_eq!(
        stored("default", &made)["data"],
        serde_json::json!({"k": "second", "surrogate": "\u{fffd}", "bytes": "a\u{fffd}"})
    );
    // Strictly, the same key given twice is refused.
    let (through, straight) = both("POST", "/configmaps?fieldValidation=Strict", &json, &body);
    assert_eq!(through.code, 400);
    assert_eq!(through.json(), straight.json());

    // The app cluster's refusals come back rebuilt, in what the caller
    // negotiated: JSON, YAML or protobuf, as the app cluster gives them.
    for accept in [
        "application/json",
        "application/yaml",
        "application/vnd.kubernetes.protobuf, application/json",
    ] {
        let headers = [("Content-Type", "application/json"), ("Accept", accept)];
        let (through, straight) = both("POST", "/configmaps", &headers, &body);
        assert_eq!((through.code, straight.code), (409, 409), "{accept}");
        assert_eq!(through.content_type, straight.content_type, "{accept}");
        if accept == "application/json" {
            assert_eq!(through.json(), straight.json(), "AlreadyExists");
        } else {
            assert_eq!(through.body, straight.body, "{accept}: AlreadyExists");
        }
    }
    let invalid = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{}\",\
         \"labels\":{{\"share\":\"yes\"}}}},\"data\":{{\"not a key\":\"v\"}}}}",
        unique_name("invalid")
    );
    let (through, straight) = both("POST", "/configmaps", &json, invalid.as_bytes());
    assert_eq!(through.code, 422);
    assert_eq!(through.json(), straight.json(), "Invalid, with its causes");

    // What bindery cannot translate is refused before anything is written:
    // a built-in kind in protobuf (the app cluster would answer in it).
    let lone = unique_name("protobuf-only");
    let body_of = |name: &str| {
        format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{name}\",\
             \"labels\":{{\"share\":\"yes\"}}}},\"data\":{{\"k\":\"v\"}}}}"
        )
    };
    let through = send(
        &workspace,
        "POST",
        "/configmaps",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/vnd.kubernetes.protobuf"),
        ],
        body_of(&lone).as_bytes(),
    );
    assert_eq!(
        through.code,
        406,
        "{}",
        String::from_utf8_lossy(&through.body)
    );
    assert!(
        !app.kubectl_output(&["-n", "default", "get", "configmap", &lone], None)
            .status
            .success(),
        "nothing was written"
    );

    // What it can is answered in it: YAML, and a Table of the written object.
    let (through, straight) = both(
        "POST",
        "/configmaps",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/yaml"),
        ],
        body_of(&unique_name("yaml")).as_bytes(),
    );
    assert_eq!(
        (through.code, through.content_type.as_str()),
        (201, "application/yaml")
    );
    assert_eq!(straight.content_type, "application/yaml");
    let yaml: serde_json::Value = serde_norway::from_slice(&through.body).unwrap();
    assert_eq!(yaml["data"]["k"], "v");
    let tabled = unique_name("table");
    let (through, straight) = both(
        "POST",
        "/configmaps",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"),
        ],
        body_of(&tabled).as_bytes(),
    );
    assert_eq!(
        (through.code, straight.code),
        (201, 201),
        "{}",
        String::from_utf8_lossy(&through.body)
    );
    let row = |reply: &Reply| reply.json()["rows"][0]["cells"][0].clone();
    assert_eq!(row(&through), serde_json::json!(tabled));
    assert_eq!(row(&through), row(&straight));

    // Requests kube-apiserver refuses before reading them get its refusal,
    // in its order: go-restful's for a patch type or an Accept no route
    // takes, the request deadline before either.
    for (method, path, headers, body) in [
        (
            "PATCH",
            format!("/configmaps/{shared}"),
            vec![("Content-Type", "text/plain"), ("Accept", "text/html")],
            "{}",
        ),
        (
            "PATCH",
            format!("/configmaps/{shared}?timeout=x"),
            vec![("Content-Type", "text/plain")],
            "{}",
        ),
        (
            "PATCH",
            format!("/configmaps/{shared}"),
            vec![("Content-Type", "text/plain, application/merge-patch+json")],
            "{}",
        ),
        (
            "POST",
            "/configmaps".to_string(),
            vec![
                ("Content-Type", "application/json"),
                ("Accept", "text/html"),
            ],
            "{}",
        ),
        (
            "GET",
            "/configmaps?limit=x".to_string(),
            vec![("Accept", "application/*")],
            "",
        ),
        (
            "PATCH",
            format!("/configmaps/{shared}"),
            vec![("Content-Type", "application/strategic-merge-patch+json")],
            "[1]",
        ),
    ] {
        let (through, straight) = both(method, &path, &headers, body.as_bytes());
        assert_eq!(
            (through.code, through.json()),
            (straight.code, straight.json()),
            "{method} {path} {headers:?}"
        );
    }

    // Patches of every type are applied by the app cluster, as bindery
    // encoded them; duplicate keys warn as the app cluster warns.
    let patch = br#"{"data":{"k":"one","k":"smp"}}"#;
    let smp = [("Content-Type", "application/strategic-merge-patch+json")];
    let (through, straight) = both("PATCH", &format!("/configmaps/{shared}"), &smp, patch);
    assert_eq!(
        (through.code, straight.code),
        (200, 200),
        "{}",
        String::from_utf8_lossy(&through.body)
    );
    assert_eq!(through.warnings, straight.warnings);
    assert_eq!(through.warnings.len(), 1, "{:?}", through.warnings);
    assert_eq!(stored("default", &shared), stored(&direct, &shared));
    let wrong_type = br#"{"data":{"k":1}}"#;
    let merge = [("Content-Type", "application/merge-patch+json")];
    let (through, straight) = both(
        "PATCH",
        &format!("/configmaps/{shared}"),
        &merge,
        wrong_type,
    );
    assert_eq!((through.code, straight.code), (422, 422));
    assert!(
        through.json()["message"].as_str().is_some_and(|m| m
            .starts_with(" \"\" is invalid: patch: Invalid value: ")
            && m.ends_with(
                "cannot unmarshal number into Go struct field ConfigMap.data of type string"
            )),
        "{}",
        through.json()
    );
    // A JSON patch is pinned by a test of its own; the caller's tests are
    // the caller's refusals, and server-side apply is applied as sent.
    let object = format!("/configmaps/{shared}");
    let json_patch = [("Content-Type", "application/json-patch+json")];
    let replace = br#"[{"op":"replace","path":"/data/k","value":"json"}]"#;
    let (through, straight) = both("PATCH", &object, &json_patch, replace);
    assert_eq!((through.code, straight.code), (200, 200));
    assert_eq!(stored("default", &shared), stored(&direct, &shared));
    let failing = br#"[{"op":"test","path":"/data/k","value":"nope"}]"#;
    let (through, straight) = both("PATCH", &object, &json_patch, failing);
    assert_eq!(
        (through.code, through.json()),
        (straight.code, straight.json())
    );
    let apply = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{shared}\",\
         \"labels\":{{\"share\":\"yes\"}}}},\"data\":{{\"applied\":\"yes\"}}}}"
    );
    let (through, straight) = both(
        "PATCH",
        &format!("{object}?fieldManager=claims-test&force=true"),
        &[("Content-Type", "application/apply-patch+yaml")],
        apply.as_bytes(),
    );
    assert_eq!(
        (through.code, straight.code),
        (200, 200),
        "{}",
        String::from_utf8_lossy(&through.body)
    );
    assert_eq!(stored("default", &shared), stored(&direct, &shared));
    // A patch that takes the object out of the claim is forbidden, in any
    // patch type, and changes nothing.
    let before = stored("default", &shared);
    for (content_type, leaving) in [
        (
            "application/merge-patch+json",
            r#"{"metadata":{"labels":{"share":"no"}}}"#,
        ),
        (
            "application/strategic-merge-patch+json",
            r#"{"metadata":{"labels":{"share":null}}}"#,
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"replace","path":"/metadata/labels/share","value":"no"}]"#,
        ),
    ] {
        let through = send(
            &workspace,
            "PATCH",
            &format!("/configmaps/{shared}"),
            &[("Content-Type", content_type)],
            leaving.as_bytes(),
        );
        assert_eq!(
            through.code,
            403,
            "{content_type}: {}",
            String::from_utf8_lossy(&through.body)
        );
    }
    assert_eq!(stored("default", &shared), before);
    // A stale version is the app cluster's conflict, in its words.
    let stale = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{shared}\",\
         \"resourceVersion\":\"1\",\"labels\":{{\"share\":\"yes\"}}}},\"data\":{{\"k\":\"stale\"}}}}"
    );
    let (through, straight) = both(
        "PUT",
        &format!("/configmaps/{shared}"),
        &json,
        stale.as_bytes(),
    );
    assert_eq!(through.code, 409);
    assert_eq!(through.json(), straight.json());
    let precondition = br#"{"preconditions":{"resourceVersion":"1"}}"#;
    let (through, straight) = both(
        "DELETE",
        &format!("/configmaps/{shared}"),
        &json,
        precondition,
    );
    assert_eq!(through.code, 409);
    // The message names the stored version, which differs.
    let unversioned = |reply: &Reply| {
        let mut status = reply.json();
        let message = status["message"].as_str().unwrap_or_default().to_string();
        status["message"] = message
            .split(" in record")
            .next()
            .unwrap_or_default()
            .into();
        status
    };
    assert_eq!(unversioned(&through), unversioned(&straight));

    // kubectl sends a built-in kind in protobuf: the write is what the app
    // cluster's dry run made of it, checked.
    let output = workspace_kubectl(
        &server,
        &controller,
        &[
            "-n",
            "default",
            "create",
            "configmap",
            &by_kubectl,
            "--from-literal=k=protobuf",
            "-o",
            "json",
            "-v=8",
        ],
    );
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{log}");
    assert!(
        log.contains("Content-Type: application/vnd.kubernetes.protobuf"),
        "kubectl sent no protobuf: {log}"
    );
    let answered: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let get = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "-n",
            "default",
            "get",
            "configmap",
            &by_kubectl,
            "-o",
            "json",
        ];
        args.extend_from_slice(extra);
        serde_json::from_str(&app.kubectl(&args)).unwrap()
    };
    let created = get(&[]);
    assert_eq!(
        answered, created,
        "kubectl was answered with the object made"
    );
    assert_eq!(created["data"], serde_json::json!({"k": "protobuf"}));
    assert_eq!(
        get(&["--show-managed-fields"])["metadata"]["managedFields"][0]["manager"],
        "kubectl-create",
        "its manager is the caller's"
    );

    unbind_and_delete(
        &token,
        &template,
        &[&shared, &private, &by_kubectl, &made, &tabled],
    );
    app.kubectl(&["delete", "namespace", &direct, "--wait=false"]);
}

/// A claim by references covers the consumer's objects that its bound
/// objects name, as kube-bind's `IsClaimed` decides (gjson paths, ORed with
/// the claim's other ways): a ConfigMap named by a ServiceBinding's
/// `spec.instanceName` is served through the workspace once that binding
/// exists, and not before or after. On main a claim with references
/// covered nothing.
#[test]
fn a_claim_by_references_covers_what_the_consumers_bound_objects_name() {
    use crate::binder::curl_with_token;
    let SharedConfigMaps {
        template,
        _guard,
        token,
        consumer,
        shared,
        private,
    } = bind_shared_config_maps_and(&[serde_json::json!({
        "group": "", "resource": "configmaps", "selector": {"owner": "Consumer",
            "references": [{"group": "anynines.com", "resource": "servicebindings",
                "jsonPath": {"name": "spec.instanceName"}}]}})]);
    let app = &clusters().app;
    let referred = unique_name("referred");
    app.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {referred}, namespace: default}}\n\
             data: {{k: v}}\n"
        )),
    );
    let (_, controller) =
        crate::workspace::controller_token(&template, &["get", "list", "watch"], None);
    let base = format!(
        "{}/services/export/{template}/clusters/{consumer}/api/v1/namespaces/default",
        crate::bindery::bindery().url
    );
    let get = || {
        curl_with_token(
            "GET",
            &format!("{base}/configmaps/{referred}"),
            Some(&controller),
            None,
        )
    };
    let listed = || {
        let (code, list) = curl_with_token(
            "GET",
            &format!("{base}/configmaps"),
            Some(&controller),
            None,
        );
        assert_eq!(code, 200, "{list}");
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|item| item["metadata"]["name"] == referred.as_str())
    };
    assert_eq!(get().0, 404, "nothing refers to it yet");
    assert!(!listed());

    let binding = unique_name("binding");
    app.kubectl_with_stdin(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: anynines.com/v1\nkind: ServiceBinding\nmetadata: {{name: {binding}, \
             namespace: default}}\nspec: {{instanceName: {referred}}}\n"
        )),
    );
    let (code, object) = get();
    assert_eq!(code, 200, "a bound object names it: {object}");
    assert_eq!(object["data"]["k"], "v");
    assert!(listed(), "and lists show it");

    app.kubectl(&["-n", "default", "delete", "servicebinding", &binding]);
    assert_eq!(get().0, 404, "no bound object names it any more");

    unbind_and_delete(&token, &template, &[&shared, &private, &referred]);
}
