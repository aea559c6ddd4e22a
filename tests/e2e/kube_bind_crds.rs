//! bindery's CRDs install over kube-bind's and hold kube-bind's rules. On a
//! cluster whose kube-bind CRDs were installed at `v1alpha1` (so
//! `status.storedVersions` lists it), applying `deploy/crds` succeeds and
//! the objects stored before are read at both versions, the same objects; a
//! request made by kube-bind's rules (no status) gets `status.phase:
//! Pending`, which kube-bind's backend acts on. On main the apply was
//! refused (`v1alpha1` must appear in spec.versions) and a request had no
//! phase.
//!
//! The API server then refuses what kube-bind's CRDs refuse, with
//! kube-apiserver's words (names and groups that break kube-bind's
//! patterns, empty names, missing required fields, changed immutable
//! fields, conditions without a time), and still takes what bindery's
//! extensions write (a request naming only a template, a template in
//! klutch's form). And every fixture of kube-bind's shapes
//! (`tests/fixtures/kube-bind/`) is taken and read back at `v1alpha2`.
//!
//! The cluster is this file's own, so the shared provider's CRDs are not
//! touched.

use crate::fixture::{Cluster, own_app_cluster, repo_root};
use bindery::api::{
    APIServiceBinding, APIServiceExport, APIServiceExportRequest, APIServiceExportTemplate,
    APIServiceNamespace, BoundSchema, ClusterBinding,
};
use serde_json::{Value, json};
use std::sync::OnceLock;

/// A CRD of `plural` as kube-bind v0.x installed it before `v1alpha2`:
/// `v1alpha1` stored (its schema kept open here; only the versions matter).
fn kube_bind_v1alpha1_crd(plural: &str, kind: &str) -> String {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.kube-bind.io")},
        "spec": {"group": "kube-bind.io", "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                "listKind": format!("{kind}List"), "categories": ["kube-bindings"]},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]},
    })
    .to_string()
}

const OLD_KINDS: [(&str, &str); 4] = [
    ("apiserviceexports", "APIServiceExport"),
    ("apiserviceexportrequests", "APIServiceExportRequest"),
    ("apiservicenamespaces", "APIServiceNamespace"),
    ("clusterbindings", "ClusterBinding"),
];

/// This file's cluster: kube-bind's CRDs installed at `v1alpha1` with an
/// export stored then, and bindery's CRDs (all seven) applied over them.
/// Returns the cluster and the old export as it was read before.
fn cluster() -> &'static (Cluster, Value) {
    static CLUSTER: OnceLock<(Cluster, Value)> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let cluster = own_app_cluster("kube-bind-crds");
        for (plural, kind) in OLD_KINDS {
            cluster.kubectl_with_stdin(
                &["apply", "-f", "-"],
                Some(&kube_bind_v1alpha1_crd(plural, kind)),
            );
        }
        cluster.kubectl_wait(&[
            "--for=condition=Established",
            "crd",
            "apiserviceexports.kube-bind.io",
        ]);
        let old = json!({"apiVersion": "kube-bind.io/v1alpha1", "kind": "APIServiceExport",
            "metadata": {"name": "old", "namespace": "default"},
            "spec": {"resources": [{"group": "g", "resource": "widgets", "versions": ["v1"]}],
                "informerScope": "Cluster", "isolation": "Prefixed"}});
        cluster.kubectl_with_stdin(&["apply", "-f", "-"], Some(&old.to_string()));
        let before = get(&cluster, "v1alpha1", "apiserviceexports", "old");
        let crds = repo_root().join("deploy/crds");
        for file in std::fs::read_dir(&crds).expect("deploy/crds") {
            let file = file.expect("a CRD file").path();
            let applied = cluster.kubectl_output(
                &[
                    "apply",
                    "--server-side",
                    "--force-conflicts",
                    "-f",
                    file.to_str().unwrap(),
                ],
                None,
            );
            assert!(
                applied.status.success(),
                "bindery's {} installs over kube-bind's: {}",
                file.display(),
                String::from_utf8_lossy(&applied.stderr)
            );
        }
        cluster.kubectl_wait(&["--for=condition=Established", "-f", crds.to_str().unwrap()]);
        (cluster, before)
    })
}

fn get(cluster: &Cluster, version: &str, plural: &str, name: &str) -> Value {
    let text = cluster.kubectl(&[
        "get",
        "--raw",
        &format!("/apis/kube-bind.io/{version}/namespaces/default/{plural}/{name}"),
    ]);
    serde_json::from_str(&text).expect("JSON")
}

/// Creates `object`; what kubectl said on stderr if it was refused.
fn refusal(object: &Value) -> Option<String> {
    let created = cluster()
        .0
        .kubectl_output(&["create", "-f", "-"], Some(&object.to_string()));
    (!created.status.success()).then(|| String::from_utf8_lossy(&created.stderr).into_owned())
}

/// `object` is refused, and kubectl's words contain `words`.
fn refused_with(object: &Value, words: &str) -> Result<(), String> {
    match refusal(object) {
        Some(said) if said.contains(words) => Ok(()),
        Some(said) => Err(format!("expected {words:?}, got: {said}")),
        None => Err(format!(
            "{object} was taken; kube-bind's CRDs refuse it ({words})"
        )),
    }
}

#[track_caller]
fn assert_refused(object: &Value, words: &str) {
    if let Err(wrong) = refused_with(object, words) {
        panic!("{wrong}");
    }
}

#[track_caller]
fn assert_taken(object: &Value) {
    if let Some(said) = refusal(object) {
        panic!("{object} was refused: {said}");
    }
}

fn object(kind: &str, name: &str, spec: Value) -> Value {
    let mut object = json!({"apiVersion": "kube-bind.io/v1alpha2", "kind": kind,
        "metadata": {"name": name}, "spec": spec});
    if !matches!(kind, "APIServiceBinding" | "APIServiceExportTemplate") {
        object["metadata"]["namespace"] = json!("default");
    }
    object
}

fn request(name: &str, spec: Value) -> Value {
    object("APIServiceExportRequest", name, spec)
}

#[test]
fn bindery_crds_install_over_kube_binds_v1alpha1_and_requests_default_to_pending() {
    let (cluster, before) = cluster();
    for version in ["v1alpha2", "v1alpha1"] {
        let after = get(cluster, version, "apiserviceexports", "old");
        assert_eq!(
            after["metadata"]["uid"], before["metadata"]["uid"],
            "{version}"
        );
        assert_eq!(after["spec"], before["spec"], "{version}");
    }

    // A request as kube-bind's CLI makes it: no status.
    let made = request(
        "new",
        json!({"resources": [{"group": "g", "resource": "widgets"}]}),
    );
    assert_taken(&made);
    let made = get(cluster, "v1alpha2", "apiserviceexportrequests", "new");
    assert_eq!(made["status"]["phase"], "Pending", "{made}");
}

#[test]
fn kube_binds_immutability_and_name_rules_hold() {
    let (cluster, _) = cluster();
    let changed = cluster.kubectl_output(
        &[
            "patch",
            "apiserviceexport",
            "old",
            "--type=merge",
            "-p",
            r#"{"spec":{"isolation":"None"}}"#,
        ],
        None,
    );
    assert!(!changed.status.success());
    assert!(
        String::from_utf8_lossy(&changed.stderr).contains("isolation is immutable"),
        "{}",
        String::from_utf8_lossy(&changed.stderr)
    );
    let secret_ref = json!({"name": "kubeconfig", "key": "kubeconfig"});
    assert_refused(
        &object(
            "ClusterBinding",
            "other",
            json!({"kubeconfigSecretRef": secret_ref, "providerPrettyName": "p"}),
        ),
        "cluster binding name should be cluster",
    );
    // A ClusterBinding's Secret cannot change (on main it could).
    let mut binding = object(
        "ClusterBinding",
        "cluster",
        json!({"kubeconfigSecretRef": secret_ref, "providerPrettyName": "p"}),
    );
    binding["metadata"]["namespace"] = json!("kube-system");
    assert_taken(&binding);
    let moved = cluster.kubectl_output(
        &[
            "-n",
            "kube-system",
            "patch",
            "clusterbinding",
            "cluster",
            "--type=merge",
            "-p",
            r#"{"spec":{"kubeconfigSecretRef":{"name":"elsewhere"}}}"#,
        ],
        None,
    );
    let said = String::from_utf8_lossy(&moved.stderr);
    assert!(
        !moved.status.success() && said.contains("kubeconfigSecretRef is immutable"),
        "{said}"
    );
}

/// What kube-bind's CRDs refuse, bindery's refuse too, with
/// kube-apiserver's words. Each was taken on main.
#[test]
fn what_kube_binds_crds_refuse_is_refused() {
    let _ = cluster();
    let mut cases: Vec<(Value, &str)> = Vec::new();
    let widgets = json!([{"group": "g", "resource": "widgets"}]);
    // Names kube-bind's patterns refuse.
    cases.push((
        request(
            "bad-resource",
            json!({"resources": [{"group": "example.com", "resource": "Foo_Bar"}]}),
        ),
        r#"spec.resources[0].resource: Invalid value: "Foo_Bar": spec.resources[0].resource in body should match '^[a-z][-a-z0-9]*[a-z0-9]$'"#,
    ));
    cases.push((
        request(
            "bad-group",
            json!({"resources": [{"group": "Example_com", "resource": "widgets"}]}),
        ),
        r#"spec.resources[0].group: Invalid value: "Example_com": spec.resources[0].group in body should match"#,
    ));
    cases.push((
        request(
            "bad-claim",
            json!({"resources": widgets, "permissionClaims": [{"resource": "Secrets",
                "selector": {"labelSelector": {}}}]}),
        ),
        r#"spec.permissionClaims[0].resource: Invalid value: "Secrets""#,
    ));
    cases.push((
        request(
            "bad-reference",
            json!({"resources": widgets, "permissionClaims": [{"resource": "secrets",
                "selector": {"references": [{"group": "g", "resource": "Widgets",
                    "jsonPath": {"name": "spec.secret"}}]}}]}),
        ),
        r#"spec.permissionClaims[0].selector.references[0].resource: Invalid value: "Widgets""#,
    ));
    // Required fields.
    cases.push((
        request(
            "no-selector",
            json!({"resources": widgets, "permissionClaims": [{"resource": "secrets"}]}),
        ),
        "spec.permissionClaims[0].selector: Required value",
    ));
    cases.push((
        request(
            "no-json-path",
            json!({"resources": widgets, "permissionClaims": [{"resource": "secrets",
                "selector": {"references": [{"group": "g", "resource": "widgets"}]}}]}),
        ),
        "spec.permissionClaims[0].selector.references[0].jsonPath: Required value",
    ));
    cases.push((
        request("nothing", json!({})),
        "spec.resources: Required value",
    ));
    cases.push((
        request("empty", json!({"resources": []})),
        "spec.resources: Invalid value: 0: spec.resources in body should have at least 1 items",
    ));
    cases.push((
        object(
            "APIServiceExport",
            "no-isolation",
            json!({"resources": widgets, "informerScope": "Cluster"}),
        ),
        "spec.isolation: Required value",
    ));
    cases.push((
        object(
            "APIServiceExportTemplate",
            "no-scope",
            json!({"resources": widgets}),
        ),
        "spec.scope: Required value",
    ));
    // Minimum lengths.
    cases.push((
        object(
            "ClusterBinding",
            "cluster",
            json!({"kubeconfigSecretRef": {"name": "kubeconfig", "key": "kubeconfig"},
                "providerPrettyName": ""}),
        ),
        r#"spec.providerPrettyName: Invalid value: "": spec.providerPrettyName in body should be at least 1 chars long"#,
    ));
    cases.push((
        object(
            "APIServiceBinding",
            "no-secret",
            json!({"kubeconfigSecretRef": {"namespace": "kube-bind", "name": "",
                "key": "kubeconfig"}}),
        ),
        r#"spec.kubeconfigSecretRef.name: Invalid value: "": spec.kubeconfigSecretRef.name in body should be at least 1 chars long"#,
    ));
    // A BoundSchema's versions and conversion.
    let schema = |name: &str, versions: Value, conversion: Value| {
        let mut spec = json!({"informerScope": "Namespaced", "group": "g",
            "names": {"kind": "Widget", "plural": "widgets"}, "scope": "Namespaced",
            "versions": versions});
        if !conversion.is_null() {
            spec["conversion"] = conversion;
        }
        object("BoundSchema", name, spec)
    };
    let open = json!({"openAPIV3Schema": {"type": "object"}});
    cases.push((
        schema(
            "bad-version",
            json!([{"name": "version1", "served": true, "storage": true, "schema": open}]),
            Value::Null,
        ),
        r#"spec.versions[0].name: Invalid value: "version1": spec.versions[0].name in body should match '^v[1-9][0-9]*([a-z]+[1-9][0-9]*)?$'"#,
    ));
    cases.push((
        schema(
            "no-schema",
            json!([{"name": "v1", "served": true, "storage": true}]),
            Value::Null,
        ),
        "spec.versions[0].schema: Required value",
    ));
    cases.push((
        schema(
            "no-webhook",
            json!([{"name": "v1", "served": true, "storage": true, "schema": open}]),
            json!({"strategy": "Webhook"}),
        ),
        "Webhook must be specified if strategy=Webhook",
    ));
    // At v1alpha1, the Secret's key is `kubeconfig`.
    let mut old_binding = object(
        "APIServiceBinding",
        "old-key",
        json!({"kubeconfigSecretRef": {"namespace": "kube-bind", "name": "k",
            "key": "config"}}),
    );
    old_binding["apiVersion"] = json!("kube-bind.io/v1alpha1");
    cases.push((
        old_binding,
        r#"spec.kubeconfigSecretRef.key: Unsupported value: "config": supported values: "kubeconfig""#,
    ));
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|(object, words)| refused_with(object, words).err())
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A condition without a time is refused, as kube-bind's CRD refuses it
/// (bindery writes none).
#[test]
fn a_condition_without_a_transition_time_is_refused() {
    let (cluster, _) = cluster();
    assert_taken(&request(
        "with-status",
        json!({"resources": [{"group": "g", "resource": "widgets"}]}),
    ));
    let patched = cluster.kubectl_output(
        &[
            "-n",
            "default",
            "patch",
            "apiserviceexportrequest",
            "with-status",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"conditions":[{"type":"Ready","status":"True"}]}}"#,
        ],
        None,
    );
    let said = String::from_utf8_lossy(&patched.stderr);
    assert!(
        !patched.status.success()
            && said.contains("status.conditions[0].lastTransitionTime: Required value"),
        "{said}"
    );
}

/// bindery's extensions stay writable: a request naming only a template,
/// a template in klutch's form; defaults kube-bind's CRDs have apply.
#[test]
fn binderys_extensions_and_kube_binds_defaults() {
    let (cluster, _) = cluster();
    assert_taken(&request(
        "by-template",
        json!({"templateRef": {"name": "widgets"}}),
    ));
    assert_taken(&object(
        "APIServiceExportTemplate",
        "klutch",
        json!({"APIServiceSelector": {"group": "anynines.com",
            "resource": "postgresqlinstances", "version": "v1"},
            "permissionClaims": [{"resource": "secrets", "selector": {"owner": "Provider"}}]}),
    ));
    assert_taken(&object(
        "APIServiceExportTemplate",
        "defaulted",
        json!({"scope": "Cluster", "resources": [{"resource": "widgets"}]}),
    ));
    let template: Value = serde_json::from_str(&cluster.kubectl(&[
        "get",
        "apiserviceexporttemplate",
        "defaulted",
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(template["spec"]["schemaUpdatePolicy"], "Never");
    assert_eq!(template["spec"]["resources"][0]["group"], "");
    assert_taken(&object(
        "BoundSchema",
        "gadgets.g",
        json!({"informerScope": "Namespaced", "group": "g",
            "names": {"kind": "Gadget", "plural": "gadgets"}, "scope": "Namespaced",
            "versions": [{"name": "v1", "storage": true,
                "schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}]}),
    ));
    let schema = get(cluster, "v1alpha2", "boundschemas", "gadgets.g");
    let version = &schema["spec"]["versions"][0];
    assert_eq!(version["served"], true, "{schema}");
    assert_eq!(
        version["schema"],
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        "a bare schema is kept whole"
    );
}

/// Every fixture of kube-bind's shapes is taken (spec, then status, as
/// kube-bind's writers write them) and reads back at `v1alpha2`.
#[test]
fn every_kube_bind_fixture_is_valid() {
    let (cluster, _) = cluster();
    for namespace in ["kube-bind-fixtures", "kube-bind-fixtures-v1alpha1"] {
        cluster.kubectl(&["create", "namespace", namespace]);
    }
    let dir = repo_root().join("tests/fixtures/kube-bind");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the fixtures")
        .map(|f| f.expect("a fixture").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    // Exports before the BoundSchemas they own.
    files.sort();
    assert_eq!(files.len(), 12, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for document in serde_norway::Deserializer::from_str(&text) {
            let mut object: Value = serde::Deserialize::deserialize(document).unwrap();
            apply_fixture(cluster, &mut object, &file);
        }
    }
}

fn apply_fixture(cluster: &Cluster, object: &mut Value, file: &std::path::Path) {
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    let namespace = object["metadata"]["namespace"].as_str().map(str::to_string);
    let in_namespace = |args: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = namespace
            .iter()
            .flat_map(|n| ["-n".to_string(), n.clone()])
            .collect();
        all.extend(args.iter().map(|a| a.to_string()));
        all
    };
    // An owner reference names the owner's uid, which only this cluster knows.
    if let Some(owners) = object["metadata"]["ownerReferences"].as_array_mut() {
        for owner in owners {
            let uid = cluster.kubectl(
                &in_namespace(&[
                    "get",
                    "apiserviceexport",
                    owner["name"].as_str().unwrap(),
                    "-o",
                    "jsonpath={.metadata.uid}",
                ])
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            );
            owner["uid"] = json!(uid);
        }
    }
    let status = object.as_object_mut().unwrap().remove("status");
    let created = cluster.kubectl_output(&["create", "-f", "-"], Some(&object.to_string()));
    assert!(
        created.status.success(),
        "{} {name}: {}",
        file.display(),
        String::from_utf8_lossy(&created.stderr)
    );
    let version = object["apiVersion"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap();
    let resource = format!(
        "{}.{version}.kube-bind.io",
        object["kind"].as_str().unwrap().to_lowercase()
    );
    if let Some(status) = &status {
        let patch = json!({"status": status}).to_string();
        let args = in_namespace(&[
            "patch",
            &resource,
            &name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ]);
        let patched =
            cluster.kubectl_output(&args.iter().map(String::as_str).collect::<Vec<_>>(), None);
        assert!(
            patched.status.success(),
            "{} {name} status: {}",
            file.display(),
            String::from_utf8_lossy(&patched.stderr)
        );
    }
    let kind = object["kind"].as_str().unwrap().to_string();
    let read = |version: &str| -> Value {
        let text = cluster.kubectl(
            &in_namespace(&[
                "get",
                &format!("{}.{version}.kube-bind.io", kind.to_lowercase()),
                &name,
                "-o",
                "json",
            ])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        );
        serde_json::from_str(&text).unwrap()
    };
    // Nothing written is lost (defaults may be added). kube-bind's v1alpha1
    // export is the exception, in kube-bind's CRDs too: stored at v1alpha2,
    // it keeps only the fields v1alpha2 has.
    let kept = read(version);
    if !(kind == "APIServiceExport" && version == "v1alpha1") {
        let mut written = object.clone();
        if let Some(status) = &status {
            written["status"] = status.clone();
        }
        for part in ["spec", "status"] {
            assert!(
                within(&written[part], &kept[part]),
                "{} {name}: {part} written {}, kept {}",
                file.display(),
                written[part],
                kept[part]
            );
        }
    }
    // bindery reads it at v1alpha2.
    let served = read("v1alpha2");
    let decoded = match kind.as_str() {
        "APIServiceBinding" => decodes::<APIServiceBinding>(&served),
        "APIServiceExport" => decodes::<APIServiceExport>(&served),
        "APIServiceExportRequest" => decodes::<APIServiceExportRequest>(&served),
        "APIServiceExportTemplate" => decodes::<APIServiceExportTemplate>(&served),
        "APIServiceNamespace" => decodes::<APIServiceNamespace>(&served),
        "BoundSchema" => decodes::<BoundSchema>(&served),
        "ClusterBinding" => decodes::<ClusterBinding>(&served),
        other => Err(format!("no such kind {other}")),
    };
    if let Err(error) = decoded {
        panic!(
            "{} {name} at v1alpha2 does not decode: {error}",
            file.display()
        );
    }
}

fn decodes<T: serde::de::DeserializeOwned>(object: &Value) -> Result<(), String> {
    serde_json::from_value::<T>(object.clone())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Every field of `written` is in `kept` with the same value (`kept` may
/// have more: defaults).
fn within(written: &Value, kept: &Value) -> bool {
    match (written, kept) {
        // Nothing written.
        (Value::Null, _) => true,
        (Value::Object(written), Value::Object(kept)) => written
            .iter()
            .all(|(k, v)| kept.get(k).is_some_and(|kept| within(v, kept))),
        (Value::Array(written), Value::Array(kept)) => {
            written.len() == kept.len() && written.iter().zip(kept).all(|(w, k)| within(w, k))
        }
        _ => written == kept,
    }
}
