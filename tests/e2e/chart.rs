//! The Helm chart (`deploy/chart/bindery`): `helm lint --strict` in each of
//! its modes, `helm template` of each applied with `kubectl apply
//! --dry-run=server` to the real provider and app clusters, and the PKI the
//! chart generates read by bindery itself. helm is the pinned one that
//! `conformance/cluster/build.sh --helm` builds from its Go module.

use crate::fixture::{clusters, repo_root, scratch_dir, unique_name};
use std::path::PathBuf;
use std::process::Command;

/// The pinned helm binary (built on first use, cached by version; once per
/// test run, so that tests starting together do not build it twice).
pub fn helm() -> PathBuf {
    static HELM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    HELM.get_or_init(build_helm).clone()
}

fn build_helm() -> PathBuf {
    let output = Command::new(repo_root().join("conformance/cluster/build.sh"))
        .arg("--helm")
        .output()
        .expect("build.sh runs");
    assert!(
        output.status.success(),
        "build.sh --helm failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let dir = stdout
        .lines()
        .find_map(|l| l.strip_prefix("HELM_BIN_DIR="))
        .unwrap_or_else(|| panic!("build.sh printed no HELM_BIN_DIR: {stdout}"));
    PathBuf::from(dir).join("helm")
}

pub fn chart_dir() -> PathBuf {
    repo_root().join("deploy/chart/bindery")
}

/// Runs helm with `args` and returns its stdout; fails the test if helm fails.
pub fn run_helm(args: &[&str]) -> String {
    let output = Command::new(helm()).args(args).output().expect("helm runs");
    assert!(
        output.status.success(),
        "helm {} failed ({}):\n{}{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("helm prints UTF-8")
}

/// The exported resources of the examples, as `--set-json` gives them to
/// the chart (`rbac.exportedResources` has no default).
pub const EXPORTED_RESOURCES: &str = r#"rbac.exportedResources=[{"apiGroups":["db.example.com","anynines.com"],"resources":["*"],"verbs":["get","list","watch","create","update","patch","delete","deletecollection"]}]"#;

/// `helm template bindery <chart> -n <namespace> <sets...>`, with the
/// examples' exported resources.
fn template(namespace: &str, sets: &[&str]) -> String {
    template_named("bindery", namespace, sets)
}

/// [`template`] of the release `release`.
pub(crate) fn template_named(release: &str, namespace: &str, sets: &[&str]) -> String {
    let chart = chart_dir();
    let mut args = vec![
        "template",
        release,
        chart.to_str().unwrap(),
        "-n",
        namespace,
        "--set-json",
        EXPORTED_RESOURCES,
    ];
    for set in sets {
        args.extend(["--set", set]);
    }
    run_helm(&args)
}

/// The rendered objects as JSON values.
fn objects(rendered: &str) -> Vec<serde_json::Value> {
    serde_norway::Deserializer::from_str(rendered)
        .filter_map(|doc| {
            let value: serde_json::Value =
                serde::Deserialize::deserialize(doc).expect("helm renders YAML");
            (!value.is_null()).then_some(value)
        })
        .collect()
}

fn find<'a>(objects: &'a [serde_json::Value], kind: &str) -> Option<&'a serde_json::Value> {
    objects.iter().find(|o| o["kind"] == kind)
}

fn kinds(objects: &[serde_json::Value]) -> Vec<String> {
    let mut kinds: Vec<String> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap_or("").to_string())
        .collect();
    kinds.sort();
    kinds
}

#[test]
fn helm_lint_passes_in_every_mode() {
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    for sets in [
        &[][..],
        &[
            "provider.kubeconfigSecret=bindery-provider",
            "serviceMonitor.enabled=true",
        ][..],
        &[
            "rbac.providerOnly=true",
            "controllers.consumerScope=Cluster",
        ][..],
        &["pki.existingSecret=bindery-pki", "replicaCount=1"][..],
    ] {
        let mut args = vec!["lint", "--strict", chart, "--set-json", EXPORTED_RESOURCES];
        for set in sets {
            args.extend(["--set", set]);
        }
        let said = run_helm(&args);
        assert!(said.contains("0 chart(s) failed"), "{said}");
    }
    // A value of the wrong shape fails the lint: it is a real check.
    let broken = Command::new(helm())
        .args(["lint", "--strict", chart, "--set-json", EXPORTED_RESOURCES])
        .args(["--set", "service.port=[1]"])
        .output()
        .expect("helm runs");
    assert!(
        !broken.status.success(),
        "{}",
        String::from_utf8_lossy(&broken.stdout)
    );
}

#[test]
fn the_rendered_chart_is_accepted_by_the_test_clusters() {
    let namespace = unique_name("chart");
    for cluster in [&clusters().provider, &clusters().app] {
        cluster.kubectl(&["create", "namespace", &namespace]);
    }

    // In an app cluster against a remote provider: what runs, no provider RBAC.
    let in_app = template(
        &namespace,
        &[
            "provider.kubeconfigSecret=bindery-provider",
            "serviceMonitor.enabled=true",
        ],
    );
    let rendered = objects(&in_app);
    assert_eq!(
        kinds(&rendered),
        [
            "Deployment",
            "PodDisruptionBudget",
            "Secret",
            "Service",
            "ServiceAccount",
            "ServiceMonitor"
        ]
    );
    let deployment = find(&rendered, "Deployment").unwrap();
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"],
        "bindery-server",
        "bind --in-cluster's Services select this label"
    );
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/livez")] {
        assert_eq!(container[probe]["httpGet"]["path"], path);
        assert_eq!(container[probe]["httpGet"]["scheme"], "HTTPS");
        assert_eq!(container[probe]["httpGet"]["port"], "https");
    }
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        args.contains(&"--provider-kubeconfig=/etc/bindery/provider/kubeconfig"),
        "{args:?}"
    );
    // The provider-side release of the same name makes that role.
    assert!(
        args.contains(&"--namespace-data-role=bindery:namespace-data"),
        "{args:?}"
    );
    let monitor = &find(&rendered, "ServiceMonitor").unwrap()["spec"]["endpoints"][0];
    assert_eq!(monitor["path"], "/metrics");
    assert_eq!(monitor["scheme"], "https");
    assert_eq!(monitor["port"], "https");
    // The ServiceMonitor needs prometheus-operator's CRD, which the test
    // clusters do not have: everything else goes to the app cluster.
    let without_monitor = template(&namespace, &["provider.kubeconfigSecret=bindery-provider"]);
    clusters().app.kubectl_with_stdin(
        &["apply", "--dry-run=server", "-f", "-"],
        Some(&without_monitor),
    );

    // In the provider cluster itself: the RBAC bound to the ServiceAccount.
    let in_provider = template(&namespace, &[]);
    let rendered = objects(&in_provider);
    assert!(kinds(&rendered).contains(&"ClusterRole".to_string()));
    let binding = find(&rendered, "ClusterRoleBinding").unwrap();
    assert_eq!(binding["subjects"][0]["namespace"], namespace.as_str());
    assert_eq!(
        find(&rendered, "Deployment").unwrap()["spec"]["template"]["spec"]["automountServiceAccountToken"],
        true
    );
    clusters().provider.kubectl_with_stdin(
        &["apply", "--dry-run=server", "-f", "-"],
        Some(&in_provider),
    );

    // Only the provider side, for a bindery that runs elsewhere.
    let provider_only = template(&namespace, &["rbac.providerOnly=true"]);
    assert_eq!(
        kinds(&objects(&provider_only)),
        [
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "RoleBinding",
            "ServiceAccount",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"
        ]
    );
    // With a scraper allowed /metrics.
    let provider_only = template(
        &namespace,
        &[
            "rbac.providerOnly=true",
            "rbac.metricsReaders[0].kind=ServiceAccount",
            "rbac.metricsReaders[0].name=prometheus",
            "rbac.metricsReaders[0].namespace=monitoring",
        ],
    );
    let rendered = objects(&provider_only);
    let reader = rendered
        .iter()
        .find(|o| o["metadata"]["name"] == "bindery:metrics-reader" && o["kind"] == "ClusterRole")
        .expect("the metrics reader role");
    assert_eq!(reader["rules"][0]["nonResourceURLs"][0], "/metrics");
    clusters().provider.kubectl_with_stdin(
        &["apply", "--dry-run=server", "-f", "-"],
        Some(&provider_only),
    );

    for cluster in [&clusters().provider, &clusters().app] {
        cluster.kubectl(&["delete", "namespace", &namespace, "--wait=false"]);
    }
}

/// The PKI the chart makes is one bindery reads as its own: `bindery certs`
/// over it keeps every file (it would remake a serving certificate lacking
/// a name the aggregator needs, and fails on a key it cannot read).
#[test]
fn the_generated_pki_is_one_bindery_keeps() {
    let rendered = objects(&template("kube-bind", &[]));
    let secret = rendered
        .iter()
        .find(|o| o["kind"] == "Secret" && o["metadata"]["name"] == "bindery-pki")
        .expect("the PKI Secret");
    let out = scratch_dir().join(unique_name("chart-pki"));
    let dir = out.join("bindery");
    std::fs::create_dir_all(&dir).unwrap();
    let mut written = Vec::new();
    for (name, value) in secret["data"].as_object().expect("data") {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(value.as_str().unwrap())
            .unwrap();
        std::fs::write(dir.join(name), &bytes).unwrap();
        written.push((name.clone(), bytes));
    }
    assert_eq!(written.len(), 6, "{:?}", secret["data"]);
    let certs = Command::new(env!("CARGO_BIN_EXE_bindery"))
        .args(["certs", "--out", out.to_str().unwrap()])
        .args(["--server-dns", "bindery.kube-bind.svc"])
        .output()
        .expect("bindery runs");
    assert!(
        certs.status.success(),
        "bindery certs over the chart's PKI: {}",
        String::from_utf8_lossy(&certs.stderr)
    );
    for (name, bytes) in written {
        assert_eq!(
            std::fs::read(dir.join(&name)).unwrap(),
            bytes,
            "bindery remade {name}"
        );
    }
}

/// The provider role holds no right to grant more than bindery holds
/// (`escalate`, `bind`), and impersonates only bindery's consumer accounts
/// and its export extra.
#[test]
fn the_provider_role_cannot_grant_beyond_itself() {
    let rendered = objects(&template("bindery-system", &["rbac.providerOnly=true"]));
    let role = rendered
        .iter()
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "bindery:provider")
        .unwrap_or_else(|| panic!("the provider ClusterRole: {:?}", kinds(&rendered)));
    let rules = role["rules"].as_array().expect("rules");
    for rule in rules {
        let verbs: Vec<&str> = rule["verbs"]
            .as_array()
            .expect("verbs")
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        for wide in ["escalate", "*"] {
            assert!(!verbs.contains(&wide), "{wide} in {rule}");
        }
        if verbs.contains(&"bind") {
            assert_eq!(
                rule["resources"],
                serde_json::json!(["clusterroles"]),
                "{rule}"
            );
            assert_eq!(
                rule["resourceNames"],
                serde_json::json!(["bindery:namespace-data"]),
                "bind on anything but bindery's namespace data role: {rule}"
            );
        }
        let resources = rule["resources"].to_string();
        if resources.contains("\"secrets\"") || resources.contains("\"configmaps\"") {
            assert!(
                rule["resourceNames"] == serde_json::json!(["app-cluster"])
                    && !verbs.iter().any(|v| !["get", "list", "watch"].contains(v)),
                "Secrets or ConfigMaps cluster-wide: {rule}"
            );
        }
        if verbs.contains(&"impersonate") {
            let resources = rule["resources"].to_string();
            let named = rule["resourceNames"]
                .as_array()
                .is_some_and(|n| !n.is_empty());
            assert!(
                named || resources.contains("userextras/bindery.dev/export"),
                "impersonation of anything: {rule}"
            );
        }
    }
}

/// The provider side names the groups bindery may reach: without
/// `rbac.exportedResources` the chart refuses to render it (it used to
/// default to every group), and with them no rule reaches every group.
#[test]
fn the_provider_side_reaches_only_the_groups_it_is_told() {
    let chart = chart_dir();
    let unnamed = Command::new(helm())
        .args([
            "template",
            "bindery",
            chart.to_str().unwrap(),
            "-n",
            "bindery-system",
        ])
        .args(["--set", "rbac.providerOnly=true"])
        .output()
        .expect("helm runs");
    assert!(
        !unnamed.status.success(),
        "the provider side rendered without exported resources:\n{}",
        String::from_utf8_lossy(&unnamed.stdout)
    );
    let said = String::from_utf8_lossy(&unnamed.stderr);
    assert!(
        said.contains("rbac.exportedResources is required"),
        "{said}"
    );
    let rendered = objects(&template("bindery-system", &["rbac.providerOnly=true"]));
    let role = rendered
        .iter()
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "bindery:provider")
        .unwrap_or_else(|| panic!("the provider ClusterRole: {:?}", kinds(&rendered)));
    for rule in role["rules"].as_array().expect("rules") {
        assert!(
            !rule["apiGroups"]
                .as_array()
                .is_some_and(|groups| groups.iter().any(|g| g == "*")),
            "a rule of every group: {rule}"
        );
    }
}

/// The chart's provider side, applied to the real provider as a release of
/// its own, holds bindery to Secrets and ConfigMaps in the namespaces it
/// serves (issue 34, item 4; before, its ClusterRole read and wrote every
/// Secret of the provider): as the chart's ServiceAccount, no Secret
/// outside them may be read, its namespace data role binds only to itself
/// and only in a namespace marked as bindery's, it may not mark a
/// namespace that exists, and it may not remove the policy that says so.
#[test]
fn the_provider_side_reaches_secrets_only_where_bindery_serves() {
    let provider = &clusters().provider;
    let release = unique_name("data");
    let namespace = format!("{release}-system");
    provider.kubectl(&["create", "namespace", &namespace]);
    let rendered = template_named(
        &release,
        &namespace,
        &[
            "rbac.providerOnly=true",
            &format!("fullnameOverride={release}"),
            &format!("continueTokenSecret={namespace}/tokens"),
        ],
    );
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&rendered));
    let me = format!("system:serviceaccount:{namespace}:{release}");
    let role = format!("{release}:namespace-data");
    let as_bindery = |args: &[&str], stdin: Option<&str>| {
        let mut all = vec!["--as", &me];
        all.extend_from_slice(args);
        provider.kubectl_output(&all, stdin)
    };
    let can = |args: &[&str]| {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        String::from_utf8_lossy(&as_bindery(&all, None).stdout).trim() == "yes"
    };
    let refused = |what: &str, output: std::process::Output, why: &str| {
        let said = String::from_utf8_lossy(&output.stderr).to_string();
        assert!(
            !output.status.success() && said.contains(why),
            "{what} was not refused ({why:?}): {}{said}",
            String::from_utf8_lossy(&output.stdout)
        );
    };
    // Policies take a moment to be in force.
    crate::pods::wait_until("the chart's RBAC in force", 30, || {
        if can(&["get", "secrets/app-cluster", "-n", "default"]) {
            Ok(())
        } else {
            Err("the app-cluster Secrets are not readable yet".into())
        }
    });
    let elsewhere: [&[&str]; 4] = [
        &["get", "secrets", "-n", "kube-system"],
        &["list", "secrets", "-A"],
        &["create", "secrets", "-n", "default"],
        &["get", "configmaps", "-n", "default"],
    ];
    for args in elsewhere {
        assert!(!can(args), "{me} may {args:?}");
    }
    assert!(can(&["get", "secrets/tokens", "-n", &namespace]));

    let plain = format!("{release}-plain");
    let marked = format!("{release}-marked");
    provider.kubectl(&["create", "namespace", &plain]);
    let made = format!(
        "{{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {{\"name\": \"{marked}\", \
         \"labels\": {{\"bindery.dev/consumer\": \"{release}\"}}}}}}"
    );
    let output = as_bindery(&["create", "-f", "-"], Some(&made));
    assert!(
        output.status.success(),
        "bindery may make a namespace of its own: {output:?}"
    );
    let marks = "bindery marks as its own only the namespaces it creates";
    crate::pods::wait_until("the chart's admission policy in force", 30, || {
        let probe = &[
            "label",
            "namespace",
            &plain,
            "bindery.dev/consumer=x",
            "--dry-run=server",
        ];
        let said = as_bindery(probe, None);
        if String::from_utf8_lossy(&said.stderr).contains(marks) {
            Ok(())
        } else {
            Err(format!("{said:?}"))
        }
    });
    let binding = |subject: &str| {
        format!(
            "{{\"apiVersion\": \"rbac.authorization.k8s.io/v1\", \"kind\": \"RoleBinding\", \
             \"metadata\": {{\"name\": \"data\"}}, \"roleRef\": {{\"apiGroup\": \
             \"rbac.authorization.k8s.io\", \"kind\": \"ClusterRole\", \"name\": \"{role}\"}}, \
             \"subjects\": [{subject}]}}"
        )
    };
    let itself = format!(
        "{{\"kind\": \"ServiceAccount\", \"name\": \"{release}\", \"namespace\": \"{namespace}\"}}"
    );
    let other = format!(
        "{{\"kind\": \"ServiceAccount\", \"name\": \"default\", \"namespace\": \"{namespace}\"}}"
    );
    let policy = "bindery binds its namespace data role only to itself";
    refused(
        "binding the data role in a namespace not bindery's",
        as_bindery(
            &["-n", &plain, "create", "-f", "-"],
            Some(&binding(&itself)),
        ),
        policy,
    );
    refused(
        "binding the data role to another account",
        as_bindery(
            &["-n", &marked, "create", "-f", "-"],
            Some(&binding(&other)),
        ),
        policy,
    );
    let output = as_bindery(
        &["-n", &marked, "create", "-f", "-"],
        Some(&binding(&itself)),
    );
    assert!(
        output.status.success(),
        "binding its own access: {output:?}"
    );
    crate::pods::wait_until("bindery's own access in force", 30, || {
        if can(&["create", "secrets", "-n", &marked]) {
            Ok(())
        } else {
            Err("not yet".into())
        }
    });
    assert!(!can(&["create", "secrets", "-n", &plain]));
    // Where it may make Secrets, never one the provider fills with a
    // ServiceAccount's token.
    let token_secret = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "t",
            "annotations": {"kubernetes.io/service-account.name": "default"}},
        "type": "kubernetes.io/service-account-token",
    })
    .to_string();
    refused(
        "a ServiceAccount token Secret",
        as_bindery(&["-n", &marked, "create", "-f", "-"], Some(&token_secret)),
        "bindery makes no ServiceAccount token Secrets",
    );
    let plain_secret = token_secret
        .replace("kubernetes.io/service-account-token", "Opaque")
        .replace("\"t\"", "\"o\"");
    let output = as_bindery(&["-n", &marked, "create", "-f", "-"], Some(&plain_secret));
    assert!(output.status.success(), "an Opaque Secret: {output:?}");
    // Never cluster-wide: `bind` on the role would let a ClusterRoleBinding
    // through, which the policy refuses.
    let cluster_wide = binding(&itself)
        .replace("\"RoleBinding\"", "\"ClusterRoleBinding\"")
        .replace(
            "\"name\": \"data\"",
            &format!("\"name\": \"{release}-data\""),
        );
    refused(
        "binding the data role cluster-wide",
        as_bindery(&["create", "-f", "-"], Some(&cluster_wide)),
        "never cluster-wide",
    );
    // Where it may create only its continue-token key, that key alone.
    let bootstrap = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "bootstrap-token-abcdef"},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {"token-id": "abcdef", "token-secret": "0123456789abcdef",
            "usage-bootstrap-authentication": "true"},
    })
    .to_string();
    refused(
        "a Secret beside the continue-token key",
        as_bindery(&["-n", &namespace, "create", "-f", "-"], Some(&bootstrap)),
        "bindery makes Secrets only in the namespaces it serves",
    );
    let key = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "tokens"}, "data": {}})
    .to_string();
    let output = as_bindery(&["-n", &namespace, "create", "-f", "-"], Some(&key));
    assert!(
        output.status.success(),
        "the continue-token key: {output:?}"
    );
    let admin = binding(&itself).replace(&format!("\"{role}\""), "\"admin\"");
    refused(
        "binding a role bindery does not hold",
        as_bindery(&["-n", &marked, "create", "-f", "-"], Some(&admin)),
        "forbidden",
    );
    for (verb, mark) in [
        ("label", "bindery.dev/consumer=x"),
        ("label", "bindery.dev/cluster-namespace=true"),
        ("annotate", "kube-bind.io/api-service-namespace=a/b"),
        ("annotate", "backend.kube-bind.io/identity=x"),
    ] {
        refused(
            &format!("{verb} {mark} on a namespace that exists"),
            as_bindery(&[verb, "namespace", &plain, mark], None),
            marks,
        );
    }
    let output = as_bindery(&["label", "namespace", &plain, "team=a"], None);
    assert!(output.status.success(), "any other label: {output:?}");
    refused(
        "an early kube-bind backend's identity key on a namespace that exists",
        as_bindery(
            &[
                "annotate",
                "namespace",
                &plain,
                "example-backend.kube-bind.io/identity=x",
            ],
            None,
        ),
        marks,
    );
    // A cluster namespace of an early kube-bind backend (its identity under
    // the legacy key) is served, and bindery may move that key to the
    // current one, with the same identity only, as kube-bind's backend does.
    let legacy = format!("{release}-legacy");
    provider.kubectl(&["create", "namespace", &legacy]);
    provider.kubectl(&[
        "annotate",
        "namespace",
        &legacy,
        "example-backend.kube-bind.io/identity=early",
    ]);
    refused(
        "another identity on an early kube-bind backend's namespace",
        as_bindery(
            &[
                "annotate",
                "namespace",
                &legacy,
                "backend.kube-bind.io/identity=other",
            ],
            None,
        ),
        marks,
    );
    let output = as_bindery(
        &[
            "annotate",
            "namespace",
            &legacy,
            "backend.kube-bind.io/identity=early",
            "example-backend.kube-bind.io/identity-",
        ],
        None,
    );
    assert!(
        output.status.success(),
        "the legacy key moved to the current one: {output:?}"
    );
    let output = as_bindery(
        &["-n", &legacy, "create", "-f", "-"],
        Some(&binding(&itself)),
    );
    assert!(
        output.status.success(),
        "its own access in an early kube-bind backend's namespace: {output:?}"
    );
    refused(
        "removing the chart's policy",
        as_bindery(
            &[
                "delete",
                "validatingadmissionpolicy",
                &format!("{release}-namespace-data"),
            ],
            None,
        ),
        "forbidden",
    );

    provider.kubectl_with_stdin(&["delete", "--wait=false", "-f", "-"], Some(&rendered));
    for gone in [&namespace, &plain, &marked, &legacy] {
        provider.kubectl(&["delete", "namespace", gone, "--wait=false"]);
    }
}
