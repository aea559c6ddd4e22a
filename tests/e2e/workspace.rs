//! The virtual workspace against the real provider: a provider controller's
//! token lists and watches one export across three consumers at once, each
//! object in its consumer's namespace and marked with its consumer; it
//! writes status through one consumer's path and the consumer sees it; a
//! second export of the same resource never shows in the first's workspace;
//! and the provider's RBAC on `apiserviceexports/content` decides, with
//! kube-apiserver's 403. The example controller (`examples/`) drives an
//! instance to Ready through the workspace, as the app cluster sees it.

use crate::binder::curl_with_token;
use crate::bindery::bindery;
use crate::controllers::install_examples;
use crate::fixture::{clusters, curl_json, unique_name};
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RESOURCE: &str = "apis/db.example.com/v1/postgresqlinstances";

/// `method` on `url` with a bearer `token`; status and JSON body.
fn curl(method: &str, url: &str, token: Option<&str>, body: Option<&Value>) -> (u16, Value) {
    curl_with_token(method, url, token, body.map(Value::to_string).as_deref())
}

/// A consumer `kube-bind-<id>` with an export `export` of the postgresql
/// template, and an instance `name` made through its own endpoint.
fn consumer_with_instance(export: &str, name: &str) -> crate::bindery::Consumer {
    let id = unique_name("vw");
    let cluster_namespace = format!("kube-bind-{id}");
    let provider = &clusters().provider;
    provider.kubectl(&["create", "namespace", &cluster_namespace]);
    let request = json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportRequest",
        "metadata": {"name": export, "namespace": cluster_namespace},
        "spec": {"templateRef": {"name": "postgresql"}},
    });
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&request.to_string()));
    let consumer = bindery().endpoint(&id);
    let instance = json!({"apiVersion": "db.example.com/v1", "kind": "PostgreSQLInstance",
        "metadata": {"name": name}, "spec": {"plan": "small"}})
    .to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let created = consumer_kubectl(
            &consumer,
            &["-n", "default", "apply", "-f", "-"],
            Some(&instance),
        );
        if created.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{name} never created for consumer {id}: {}",
            String::from_utf8_lossy(&created.stderr)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    consumer
}

/// kubectl as `consumer`, through its endpoint.
pub(crate) fn consumer_kubectl(
    consumer: &crate::bindery::Consumer,
    args: &[&str],
    stdin: Option<&str>,
) -> std::process::Output {
    let mut child = Command::new(crate::fixture::kubectl_path())
        .arg("--kubeconfig")
        .arg(&consumer.kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    if let Some(input) = stdin {
        use std::io::Write;
        pipe.write_all(input.as_bytes())
            .expect("writing kubectl stdin");
    }
    drop(pipe);
    child.wait_with_output().expect("kubectl finishes")
}

/// kubectl as the consumer in its `default` namespace; it must succeed.
pub(crate) fn consumer_write(
    consumer: &crate::bindery::Consumer,
    args: &[&str],
    stdin: Option<&str>,
) {
    let args: Vec<&str> = ["-n", "default"].iter().chain(args).copied().collect();
    let output = consumer_kubectl(consumer, &args, stdin);
    assert!(
        output.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A token of a new provider ServiceAccount bound to `rules` on the
/// workspace of `export` (cluster-wide, or in `namespace`).
pub(crate) fn controller_token(
    export: &str,
    verbs: &[&str],
    namespace: Option<&str>,
) -> (String, String) {
    controller_token_in(&clusters().provider, export, verbs, namespace)
}

/// [`controller_token`] in `provider`, a cluster other than the shared one.
pub(crate) fn controller_token_in(
    provider: &crate::fixture::Cluster,
    export: &str,
    verbs: &[&str],
    namespace: Option<&str>,
) -> (String, String) {
    let _ = provider.kubectl_output(&["create", "namespace", "vw-controllers"], None);
    let name = unique_name("controller");
    provider.kubectl(&["-n", "vw-controllers", "create", "serviceaccount", &name]);
    let rule = json!({"apiGroups": ["kube-bind.io"], "resources": ["apiserviceexports/content"],
        "resourceNames": [export], "verbs": verbs});
    let subject = json!({"kind": "ServiceAccount", "name": name, "namespace": "vw-controllers"});
    let objects = match namespace {
        None => json!([
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": name}, "rules": [rule]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": name}, "subjects": [subject],
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}},
        ]),
        Some(ns) => json!([
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": name, "namespace": ns}, "rules": [rule]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": name, "namespace": ns}, "subjects": [subject],
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}},
        ]),
    };
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&list.to_string()));
    let token = provider.kubectl(&["-n", "vw-controllers", "create", "token", &name]);
    (
        format!("system:serviceaccount:vw-controllers:{name}"),
        token.trim().to_string(),
    )
}

/// The (consumer annotation, namespace, name) of each listed item.
fn listed(list: &Value) -> Vec<(String, String, String)> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {list}"))
        .iter()
        .map(|item| {
            let m = &item["metadata"];
            (
                m["annotations"]["bindery.dev/consumer"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                m["namespace"].as_str().unwrap_or_default().to_string(),
                m["name"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn one_url_lists_and_watches_every_consumer_of_an_export_and_writes_through_one() {
    install_examples();
    let export = unique_name("vwexport");
    let other_export = unique_name("vwother");
    let consumers: Vec<_> = ["one", "two", "three"]
        .iter()
        .map(|name| consumer_with_instance(&export, &format!("db-{name}")))
        .collect();
    let outsider = consumer_with_instance(&other_export, "db-outsider");
    let (_, token) = controller_token(
        &export,
        &["get", "list", "watch", "create", "update", "patch"],
        None,
    );
    // The export publishes its workspace; the controller uses that URL.
    let namespace = format!("kube-bind-{}", consumers[0].id);
    let deadline = Instant::now() + Duration::from_secs(30);
    let published = loop {
        let url = clusters().provider.kubectl(&[
            "-n",
            &namespace,
            "get",
            "apiserviceexport",
            &export,
            "-o",
            "jsonpath={.status.virtualWorkspaceURL}",
        ]);
        if !url.is_empty() {
            break url;
        }
        assert!(
            Instant::now() < deadline,
            "the export never published its workspace"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(
        published,
        format!("{}/services/export/{export}/clusters/*", bindery().url)
    );
    let all = format!("{published}/{RESOURCE}");

    // Every consumer's instance, in its own namespace, marked with it; the
    // other export's never.
    let (code, list) = curl("GET", &all, Some(&token), None);
    assert_eq!(code, 200, "{list}");
    let mut seen = listed(&list);
    seen.sort();
    let mut expected: Vec<_> = consumers
        .iter()
        .zip(["one", "two", "three"])
        .map(|(c, n)| (c.id.clone(), "default".to_string(), format!("db-{n}")))
        .collect();
    expected.sort();
    assert_eq!(seen, expected, "{list}");
    let text = list.to_string();
    assert!(
        !text.contains("kube-bind-vw"),
        "no provider namespace: {text}"
    );
    assert!(
        !text.contains("bindery.dev/export"),
        "no identity label: {text}"
    );
    assert!(!text.contains(&outsider.id), "{text}");
    let (_, others) = curl(
        "GET",
        &format!(
            "{}/services/export/{other_export}/clusters/*/{RESOURCE}",
            bindery().url
        ),
        Some(&token),
        None,
    );
    assert_eq!(
        others["code"], 403,
        "this controller may not see the other export: {others}"
    );

    // One watch stream across consumers, from the list's resourceVersion.
    let version = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let (mut watch, rx) = crate::binder::watch_with_token(
        &format!("{all}?watch=1&resourceVersion={version}&allowWatchBookmarks=true"),
        &token,
        30,
    );
    let _late = consumer_with_instance(&other_export, "db-late-outsider");
    // The same name in every consumer: three events, told apart by the
    // consumer annotation.
    let instance = json!({"apiVersion": "db.example.com/v1", "kind": "PostgreSQLInstance",
        "metadata": {"name": "db-late"}, "spec": {"plan": "large"}});
    for consumer in &consumers {
        let (code, created) = curl_as_consumer(consumer, "POST", &instance);
        assert_eq!(code, 201, "{created}");
    }
    // A consumer that binds while the watch runs shows on it too.
    let newcomer = consumer_with_instance(&export, "db-newcomer");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut arrived = Vec::new();
    let mut newcomer_seen = false;
    while arrived.len() < consumers.len() || !newcomer_seen {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = rx.recv_timeout(left).unwrap_or_else(|_| {
            panic!("only {arrived:?} (newcomer: {newcomer_seen}) arrived on the watch")
        });
        let object = &event["object"]["metadata"];
        assert_ne!(
            object["name"], "db-late-outsider",
            "another export's object on the watch: {event}"
        );
        if object["name"] == "db-newcomer" {
            assert_eq!(
                object["annotations"]["bindery.dev/consumer"],
                newcomer.id.as_str()
            );
            newcomer_seen = true;
        }
        if object["name"] == "db-late" {
            assert_eq!(event["type"], "ADDED", "{event}");
            assert_eq!(object["namespace"], "default", "{event}");
            arrived.push(
                object["annotations"]["bindery.dev/consumer"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    arrived.sort();
    let mut ids: Vec<String> = consumers.iter().map(|c| c.id.clone()).collect();
    ids.sort();
    assert_eq!(arrived, ids, "one event per consumer, each marked with it");

    // A status written through the first consumer's path, with the object
    // as the workspace showed it; the consumer sees the status, and not the
    // workspace's annotation.
    let first = &consumers[0];
    let mut object = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["annotations"]["bindery.dev/consumer"] == first.id.as_str())
        .unwrap()
        .clone();
    object["status"] = json!({"phase": "Ready"});
    let one = format!(
        "{}/services/export/{export}/clusters/{}/apis/db.example.com/v1/namespaces/default/postgresqlinstances/db-one/status",
        bindery().url,
        first.id
    );
    let (code, written) = curl("PUT", &one, Some(&token), Some(&object));
    assert_eq!(code, 200, "{written}");
    let seen = consumer_kubectl(
        first,
        &[
            "-n",
            "default",
            "get",
            "postgresqlinstances",
            "db-one",
            "-o",
            "json",
        ],
        None,
    );
    let seen: Value = serde_json::from_slice(&seen.stdout).expect("the consumer reads it");
    assert_eq!(seen["status"]["phase"], "Ready", "{seen}");
    assert!(
        seen["metadata"]["annotations"]["bindery.dev/consumer"].is_null(),
        "{seen}"
    );

    // Writes need a consumer; the outsider is not a consumer of this export.
    let (code, status) = curl("POST", &all, Some(&token), Some(&instance));
    assert_eq!(
        (code, status["reason"].clone()),
        (405, "MethodNotAllowed".into())
    );
    // In the form the caller negotiated, as kube-apiserver answers errors.
    let yaml = Command::new("curl")
        .args([
            "-sS",
            "-X",
            "POST",
            "-o",
            "-",
            "-w",
            "\n%{http_code} %{content_type}",
        ])
        .arg("--cacert")
        .arg(bindery().pki.join("bindery/serving-ca.crt"))
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["-H", "Accept: application/yaml"])
        .args(["-H", "Content-Type: application/json"])
        .args(["--data-binary", &instance.to_string()])
        .arg(&all)
        .output()
        .expect("curl runs");
    let yaml = String::from_utf8_lossy(&yaml.stdout).to_string();
    assert!(
        yaml.ends_with("\n405 application/yaml") && yaml.contains("reason: MethodNotAllowed\n"),
        "{yaml}"
    );
    let (code, _) = curl(
        "GET",
        &format!(
            "{}/services/export/{export}/clusters/{}/{RESOURCE}",
            bindery().url,
            outsider.id
        ),
        Some(&token),
        None,
    );
    assert_eq!(code, 404);
}

/// `method` on the consumer's own postgresqlinstances in `default`.
fn curl_as_consumer(
    consumer: &crate::bindery::Consumer,
    method: &str,
    body: &Value,
) -> (u16, Value) {
    let mut command = Command::new("curl");
    command
        .args(["-k", "-X", method, "--cert"])
        .arg(&consumer.cert)
        .arg("--key")
        .arg(&consumer.key)
        .args(["-H", "Content-Type: application/json", "--data-binary"])
        .arg(body.to_string())
        .arg(format!(
            "{}/apis/db.example.com/v1/namespaces/default/postgresqlinstances",
            consumer.base_url
        ));
    curl_json(command)
}

#[test]
fn the_providers_rbac_on_the_exports_content_decides() {
    install_examples();
    let export = unique_name("vwrbac");
    let first = consumer_with_instance(&export, "db-a");
    let second = consumer_with_instance(&export, "db-b");
    let url = |consumer: &str| {
        format!(
            "{}/services/export/{export}/clusters/{consumer}/{RESOURCE}",
            bindery().url
        )
    };
    let (code, status) = curl("GET", &url("*"), None, None);
    assert_eq!(
        (code, status["reason"].clone()),
        (401, "Unauthorized".into())
    );

    let (name, stranger) = controller_token("something-else", &["list"], None);
    let (code, status) = curl("GET", &url("*"), Some(&stranger), None);
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        format!(
            "apiserviceexports.kube-bind.io \"{export}\" is forbidden: User \"{name}\" cannot \
             list resource \"apiserviceexports/content\" in API group \"kube-bind.io\" at the \
             cluster scope"
        )
    );

    // An export that does not exist is not found only for a caller the
    // provider would let in; others cannot probe for export names.
    let missing = unique_name("vwmissing");
    let missing_url = format!(
        "{}/services/export/{missing}/clusters/*/{RESOURCE}",
        bindery().url
    );
    let (code, status) = curl("GET", &missing_url, Some(&stranger), None);
    assert_eq!(code, 403, "a stranger probing {missing}: {status}");
    let (_, allowed) = controller_token(&missing, &["list"], None);
    let (code, status) = curl("GET", &missing_url, Some(&allowed), None);
    assert_eq!(code, 404, "{status}");

    // A Role in the first consumer's cluster namespace: that consumer only.
    let first_namespace = format!("kube-bind-{}", first.id);
    let (_, scoped) = controller_token(&export, &["list"], Some(&first_namespace));
    let (code, list) = curl("GET", &url(&first.id), Some(&scoped), None);
    assert_eq!(code, 200, "{list}");
    assert_eq!(
        listed(&list),
        vec![(String::new(), "default".into(), "db-a".into())],
        "one consumer's path lists that consumer's objects"
    );
    let (code, status) = curl("GET", &url(&second.id), Some(&scoped), None);
    assert_eq!(code, 403, "{status}");
    let (code, _) = curl("GET", &url("*"), Some(&scoped), None);
    assert_eq!(code, 403, "every consumer needs the cluster-wide grant");
}

/// The example controller's binary (`examples/postgresql_controller.rs`),
/// built with the cargo running the tests (a no-op when `hack/test` built it).
pub(crate) fn example_controller() -> std::path::PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = Command::new(cargo)
        .args(["build", "--locked", "--example", "postgresql_controller"])
        .current_dir(crate::fixture::repo_root())
        .output()
        .expect("cargo runs");
    assert!(
        built.status.success(),
        "building the example controller failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| crate::fixture::repo_root().join("target"));
    target.join("debug/examples/postgresql_controller")
}

/// A child process that is stopped however the test ends.
/// The example controller (`controller`, built by [`example_controller`])
/// reconciling through `workspace` with a provider `token`.
pub(crate) fn run_example_controller(
    controller: &std::path::Path,
    workspace: &str,
    certificate_authority: &std::path::Path,
    provider_kubeconfig: &std::path::Path,
    token: &str,
) -> KillOnDrop {
    let running = Command::new(controller)
        .arg("--workspace")
        .arg(workspace)
        .arg("--certificate-authority")
        .arg(certificate_authority)
        .arg("--provider-kubeconfig")
        .arg(provider_kubeconfig)
        .env("CONTROLLER_TOKEN", token)
        .env("RUST_LOG", "warn")
        .spawn()
        .expect("the example controller starts");
    KillOnDrop(running)
}

pub(crate) struct KillOnDrop(std::process::Child);

impl KillOnDrop {
    pub(crate) fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.stop();
    }
}

#[test]
fn the_example_controller_drives_an_instance_to_ready_as_the_app_cluster_sees_it() {
    use crate::bind::{app_cluster_binds, app_cluster_namespace};
    use crate::binder::{bind_template, bindery_cli, succeeded};
    install_examples();
    let controller = example_controller();
    let _guard = app_cluster_binds();
    let binder = bind_template("postgresql");
    let (app, provider) = (&clusters().app, &clusters().provider);
    let workspace = provider.kubectl(&[
        "-n",
        &app_cluster_namespace(),
        "get",
        "apiserviceexport",
        "postgresql",
        "-o",
        "jsonpath={.status.virtualWorkspaceURL}",
    ]);
    assert!(
        workspace.ends_with("/clusters/*"),
        "published: {workspace:?}"
    );
    let (_, token) = controller_token("postgresql", &["get", "list", "watch", "patch"], None);
    let mut running = run_example_controller(
        &controller,
        &workspace,
        &bindery().pki.join("bindery/serving-ca.crt"),
        &provider.kubeconfig,
        &token,
    );
    // The instance is made after the controller listed: it must arrive by
    // the workspace watch.
    std::thread::sleep(Duration::from_secs(3));

    let instance = unique_name("shop");
    app.kubectl_with_stdin(
        &["-n", "default", "apply", "-f", "-"],
        Some(&format!(
            "apiVersion: db.example.com/v1\nkind: PostgreSQLInstance\nmetadata: {{name: {instance}}}\nspec: {{plan: small}}\n"
        )),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let credentials = format!("{instance}-credentials");
    loop {
        let phase = app.kubectl(&[
            "-n",
            "default",
            "get",
            "postgresqlinstances",
            &instance,
            "-o",
            "jsonpath={.status.phase}",
        ]);
        let secret = app.kubectl_output(&["-n", "default", "get", "secret", &credentials], None);
        if phase == "Ready" && secret.status.success() {
            break;
        }
        if Instant::now() >= deadline {
            // Where the instance went, and which exports the workspace has.
            let stored = provider.kubectl(&[
                "get",
                "postgresqlinstances",
                "-A",
                "-o",
                "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.metadata.labels}{\"\\n\"}{end}",
            ]);
            let exports = provider.kubectl(&[
                "get",
                "apiserviceexports",
                "-A",
                "-o",
                "jsonpath={range .items[?(@.metadata.name==\"postgresql\")]}{.metadata.namespace} {.status.identityHash} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
            ]);
            panic!(
                "in the app cluster: phase {phase:?}, credentials Secret {}\n\
                 instances in the provider:\n{}\nexports named postgresql:\n{exports}",
                String::from_utf8_lossy(&secret.stderr),
                stored
                    .lines()
                    .filter(|l| l.contains(&instance) || l.contains("/orders "))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    running.stop();
    let username = app.kubectl(&[
        "-n",
        "default",
        "get",
        "secret",
        &credentials,
        "-o",
        "jsonpath={.data.username}",
    ]);
    use base64::Engine;
    let username = base64::engine::general_purpose::STANDARD
        .decode(username.trim())
        .unwrap();
    assert_eq!(String::from_utf8(username).unwrap(), instance);
    app.kubectl(&["-n", "default", "delete", "postgresqlinstances", &instance]);
    succeeded("unbind", &bindery_cli("unbind", &binder, &["postgresql"]));
}
