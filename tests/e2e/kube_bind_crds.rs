//! bindery's CRDs install over kube-bind's: on a cluster whose kube-bind
//! CRDs were installed at `v1alpha1` (so `status.storedVersions` lists it),
//! applying `deploy/crds` succeeds and the objects stored before are read
//! at both versions, the same objects; a request made by kube-bind's rules
//! (no status) gets `status.phase: Pending`, which kube-bind's backend acts
//! on; kube-bind's immutability and name rules hold. On main the apply was refused (`v1alpha1` must appear in
//! spec.versions) and a request had no phase. The cluster is this test's
//! own, so the shared provider's CRDs are not touched.

use crate::fixture::{own_app_cluster, repo_root};
use serde_json::{Value, json};

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

#[test]
fn bindery_crds_install_over_kube_binds_v1alpha1_and_requests_default_to_pending() {
    let cluster = own_app_cluster("kube-bind-crds");
    let get = |version: &str, plural: &str, name: &str| -> Value {
        let text = cluster.kubectl(&[
            "get",
            "--raw",
            &format!("/apis/kube-bind.io/{version}/namespaces/default/{plural}/{name}"),
        ]);
        serde_json::from_str(&text).expect("JSON")
    };
    let kinds = [
        ("apiserviceexports", "APIServiceExport"),
        ("apiserviceexportrequests", "APIServiceExportRequest"),
        ("apiservicenamespaces", "APIServiceNamespace"),
        ("clusterbindings", "ClusterBinding"),
    ];
    for (plural, kind) in kinds {
        cluster.kubectl_with_stdin(
            &["apply", "-f", "-"],
            Some(&kube_bind_v1alpha1_crd(plural, kind)),
        );
    }
    cluster.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd",
        "apiserviceexports.kube-bind.io",
    ]);
    let old = json!({"apiVersion": "kube-bind.io/v1alpha1", "kind": "APIServiceExport",
        "metadata": {"name": "old", "namespace": "default"},
        "spec": {"resources": [{"group": "g", "resource": "r", "versions": ["v1"]}],
            "informerScope": "Cluster", "isolation": "Prefixed"}});
    cluster.kubectl_with_stdin(&["apply", "-f", "-"], Some(&old.to_string()));
    let before = get("v1alpha1", "apiserviceexports", "old");

    for (plural, _) in kinds {
        let file = repo_root().join(format!("deploy/crds/{plural}.kube-bind.io.yaml"));
        let applied = cluster.kubectl_output(
            &["apply", "--server-side", "--force-conflicts", "-f"]
                .iter()
                .copied()
                .chain([file.to_str().unwrap()])
                .collect::<Vec<_>>(),
            None,
        );
        assert!(
            applied.status.success(),
            "bindery's {plural} CRD installs over kube-bind's: {}",
            String::from_utf8_lossy(&applied.stderr)
        );
    }
    cluster.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd",
        "apiserviceexportrequests.kube-bind.io",
    ]);
    for version in ["v1alpha2", "v1alpha1"] {
        let after = get(version, "apiserviceexports", "old");
        assert_eq!(
            after["metadata"]["uid"], before["metadata"]["uid"],
            "{version}"
        );
        assert_eq!(after["spec"], before["spec"], "{version}");
    }

    // kube-bind's rules hold: an export's isolation cannot change, and the
    // ClusterBinding is named `cluster`.
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
    let misnamed = json!({"apiVersion": "kube-bind.io/v1alpha2", "kind": "ClusterBinding",
        "metadata": {"name": "other", "namespace": "default"},
        "spec": {"kubeconfigSecretRef": {"name": "kubeconfig", "key": "kubeconfig"},
            "providerPrettyName": "p"}});
    let refused = cluster.kubectl_output(&["create", "-f", "-"], Some(&misnamed.to_string()));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("cluster binding name should be cluster"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    // A request as kube-bind's CLI makes it: no status.
    let request = json!({"apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportRequest",
        "metadata": {"name": "new", "namespace": "default"},
        "spec": {"resources": [{"group": "g", "resource": "r"}]}});
    cluster.kubectl_with_stdin(&["create", "-f", "-"], Some(&request.to_string()));
    let made = get("v1alpha2", "apiserviceexportrequests", "new");
    assert_eq!(made["status"]["phase"], "Pending", "{made}");
}
