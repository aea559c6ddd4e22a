//! What `bindery bind` writes into the app cluster, as objects. The account
//! part is shared by every binding of the app cluster: the `kube-bind`
//! namespace, the APIServiceBinding CRD, and a ServiceAccount whose token
//! lets bindery ask SubjectAccessReviews and TokenReviews
//! (`system:auth-delegator`), read its APIServiceBindings and write their
//! status, read namespace `kube-system` (to prove the cluster's identity),
//! read the front-proxy CA kube-apiserver publishes (kube-system's
//! `extension-apiserver-authentication-reader` Role, which aggregated API
//! servers are given too; bindery records the CA from there) and read
//! APIServices (whose availability its bindings report), nothing wider. The binding part is per export: the Service
//! `bindery-<consumer>` that the aggregator reaches bindery by (an
//! ExternalName), one APIService per bound group/version with bindery's
//! serving CA, a Secret saying where the provider is, and the
//! APIServiceBinding. Everything carries [`MANAGED_BY`], so that unbind
//! removes exactly this. Pure.

use super::wire::GroupVersion;
use crate::api::claims::PermissionClaim;
use crate::api::{APIServiceBinding, AcceptablePermissionClaim, CLAIMS_ANNOTATION, ClaimState};
use crate::translate::claimed_discovery::CLAIMED_VERBS;
use base64::Engine;
use kube::CustomResourceExt;
use serde_json::{Value, json};

/// The app-cluster namespace of bind's objects, as kube-bind's konnector uses.
pub const NAMESPACE: &str = "kube-bind";
/// bindery's account in the app cluster.
pub const ACCOUNT: &str = "bindery";
/// The Secret holding the account's token.
pub const TOKEN_SECRET: &str = "bindery-token";
/// The ClusterRole (and its binding) of the account's own permissions.
pub const ROLE: &str = "bindery:app-cluster";
/// The ClusterRoleBinding to `system:auth-delegator`.
pub const AUTH_DELEGATOR_BINDING: &str = "bindery:auth-delegator";
/// The RoleBinding (in kube-system) to kube-apiserver's
/// `extension-apiserver-authentication-reader` Role.
pub const AUTHENTICATION_READER_BINDING: &str = "bindery:authentication-reader";
/// The Role kube-apiserver makes for reading
/// `kube-system/extension-apiserver-authentication`.
const AUTHENTICATION_READER_ROLE: &str = "extension-apiserver-authentication-reader";
use crate::app_binding::{BINDING_LABEL, MANAGED_BY};

/// Labels of a shared object.
fn shared_labels() -> Value {
    json!({MANAGED_BY.0: MANAGED_BY.1})
}

fn binding_labels(export: &str) -> Value {
    json!({MANAGED_BY.0: MANAGED_BY.1, BINDING_LABEL: export})
}

/// The shared namespace; made only when missing.
pub fn namespace() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": shared_labels()},
    })
}

/// The APIServiceBinding CRD; made only when missing.
pub fn binding_crd() -> Value {
    let mut crd = serde_json::to_value(APIServiceBinding::crd()).expect("the CRD serializes");
    crd["metadata"]["labels"] = shared_labels();
    crd
}

/// Whether an installed APIServiceBinding CRD (its JSON, without `kind`
/// and `apiVersion` as kube-rs reads it) declares what bindery's binding
/// sets: `spec.permissionClaims` at the version bindery writes. Pure.
pub fn binding_crd_is_bindery_s(crd: &Value) -> bool {
    crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|version| version["name"] == "v1alpha2")
        .any(|version| {
            version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
                .get("permissionClaims")
                .is_some()
        })
}

/// The account and its permissions.
pub fn account() -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": ACCOUNT, "namespace": NAMESPACE, "labels": shared_labels()},
        }),
        json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": TOKEN_SECRET, "namespace": NAMESPACE, "labels": shared_labels(),
                "annotations": {"kubernetes.io/service-account.name": ACCOUNT}},
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": ROLE, "labels": shared_labels()},
            "rules": [
                {"apiGroups": ["kube-bind.io"], "resources": ["apiservicebindings"],
                    "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["kube-bind.io"], "resources": ["apiservicebindings/status"],
                    "verbs": ["get", "update", "patch"]},
                {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["apiregistration.k8s.io"], "resources": ["apiservices"],
                    "verbs": ["get", "list", "watch"]},
                // Quota admission: creates of bound objects are charged to
                // the app cluster's ResourceQuotas (crate::quota).
                {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["list"]},
                {"apiGroups": [""], "resources": ["resourcequotas/status"], "verbs": ["update"]},
            ],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": AUTHENTICATION_READER_BINDING, "namespace": "kube-system",
                "labels": shared_labels()},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                "name": AUTHENTICATION_READER_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}],
        }),
        cluster_role_binding(ROLE, ROLE),
        cluster_role_binding(AUTH_DELEGATOR_BINDING, "system:auth-delegator"),
    ]
}

fn cluster_role_binding(name: &str, role: &str) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": shared_labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}],
    })
}

/// What one binding needs in the app cluster.
pub struct BindingInputs<'a> {
    pub consumer: &'a str,
    pub export: &'a str,
    /// bindery's base URL, as the binder reached it.
    pub bindery_url: &'a str,
    /// How the aggregator reaches bindery.
    pub reach: Reach<'a>,
    pub serving_ca_pem: &'a str,
    pub group_versions: &'a [GroupVersion],
    pub claims: &'a [PermissionClaim],
}

/// How the app cluster's aggregator reaches bindery: through the consumer's
/// Service `kube-bind/bindery-<consumer>` either way, so that the TLS server
/// name still names the consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach<'a> {
    /// bindery runs outside the app cluster: an ExternalName Service to the
    /// DNS name bindery answers at (`localhost` for local clusters).
    External { host: &'a str, port: u16 },
    /// bindery runs in the app cluster (`deploy/bindery/`): a ClusterIP
    /// Service selecting its pods in `kube-bind` by [`SERVER_POD_LABEL`],
    /// port 443 to their port named `https`.
    InCluster,
}

/// The label (name, value) of bindery's own pods when it runs in a cluster.
pub const SERVER_POD_LABEL: (&str, &str) = ("app.kubernetes.io/name", "bindery-server");

impl Reach<'_> {
    /// The Service's spec and the port APIServices name.
    fn service(&self) -> (Value, u16) {
        match self {
            Reach::External { host, port } => (
                json!({"type": "ExternalName", "externalName": host,
                    "ports": [{"port": port, "protocol": "TCP"}]}),
                *port,
            ),
            Reach::InCluster => (
                json!({"type": "ClusterIP",
                    "selector": {SERVER_POD_LABEL.0: SERVER_POD_LABEL.1},
                    "ports": [{"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}]}),
                443,
            ),
        }
    }
}

/// The Service's name for `consumer`; its DNS name is what bindery's
/// serving certificate and SNI routing expect (see `crate::aggregation`).
pub fn service_name(consumer: &str) -> String {
    format!("bindery-{consumer}")
}

/// The APIService name of a group/version.
pub fn api_service_name(gv: &GroupVersion) -> String {
    format!("{}.{}", gv.version, gv.group)
}

/// The Secret (per binding) saying where the provider is.
pub fn provider_secret_name(export: &str) -> String {
    format!("bindery-provider-{export}")
}

/// One APIService per group/version (`group_versions` preferred first
/// within a group, and their `versionPriority` says the same), labelled
/// `labels`, sending its requests to the app cluster's Service `service`
/// (`{namespace, name, port}`) whose serving certificate `ca_bundle`
/// (base64 PEM) signed.
pub fn api_services(
    group_versions: &[GroupVersion],
    labels: &Value,
    ca_bundle: &str,
    service: &Value,
) -> Vec<Value> {
    let mut previous_group = None;
    let mut priority = 0;
    let mut objects = Vec::with_capacity(group_versions.len());
    for gv in group_versions {
        if previous_group != Some(&gv.group) {
            previous_group = Some(&gv.group);
            priority = 100;
        } else {
            priority = (priority - 5).max(1);
        }
        objects.push(json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": api_service_name(gv), "labels": labels},
            "spec": {"group": gv.group, "version": gv.version,
                "groupPriorityMinimum": 1000, "versionPriority": priority,
                "caBundle": ca_bundle,
                "service": service},
        }));
    }
    objects
}

/// The binding's objects, in the order to apply them.
pub fn binding(inputs: &BindingInputs) -> Vec<Value> {
    let labels = binding_labels(inputs.export);
    let service = service_name(inputs.consumer);
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(inputs.serving_ca_pem);
    let (service_spec, service_port) = inputs.reach.service();
    let mut objects = vec![json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": service, "namespace": NAMESPACE, "labels": shared_labels()},
        "spec": service_spec,
    })];
    let service_ref = json!({"namespace": NAMESPACE, "name": service, "port": service_port});
    objects.extend(api_services(
        inputs.group_versions,
        &labels,
        &ca_bundle,
        &service_ref,
    ));
    let provider_kubeconfig = json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "provider",
        "clusters": [{"name": "provider", "cluster": {"server": inputs.bindery_url,
            "certificate-authority-data": ca_bundle}}],
        "contexts": [{"name": "provider", "context": {"cluster": "provider", "user": "app-cluster"}}],
        "users": [{"name": "app-cluster", "user": {}}],
    });
    let secret = provider_secret_name(inputs.export);
    objects.push(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": secret, "namespace": NAMESPACE, "labels": labels},
        "stringData": {"kubeconfig": serde_norway::to_string(&provider_kubeconfig)
            .expect("a kubeconfig serializes")},
    }));
    let claims: Vec<AcceptablePermissionClaim> = inputs
        .claims
        .iter()
        .cloned()
        .map(|c| AcceptablePermissionClaim::new(c, ClaimState::Accepted))
        .collect();
    objects.extend(claim_access(inputs.export, inputs.claims));
    let mut metadata =
        json!({"name": crate::app_binding::binding_name(inputs.export), "labels": labels});
    if !claims.is_empty() {
        metadata["annotations"] = json!({CLAIMS_ANNOTATION: serde_json::to_string(&claims)
            .expect("claims serialize")});
    }
    objects.push(json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceBinding",
        "metadata": metadata,
        "spec": {
            "kubeconfigSecretRef": {"namespace": NAMESPACE, "name": secret, "key": "kubeconfig"},
            "permissionClaims": claims,
        },
    }));
    objects
}

/// What the account may do with the claimed resources of `export`: what
/// the virtual workspace serves on them (provider controllers read and
/// write consumer-owned objects there, each checked against the claims),
/// and, for provider-owned ones, keeping the copies the provider writes.
/// Nothing when the export claims nothing.
fn claim_access(export: &str, claims: &[PermissionClaim]) -> Vec<Value> {
    if claims.is_empty() {
        return Vec::new();
    }
    let mut rules: Vec<Value> = Vec::new();
    for claim in claims {
        let verbs = CLAIMED_VERBS;
        let rule =
            json!({"apiGroups": [claim.group], "resources": [claim.resource], "verbs": verbs});
        if !rules.contains(&rule) {
            rules.push(rule);
        }
    }
    let name = claims_role_name(export);
    let labels = binding_labels(export);
    vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels},
            "rules": rules,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}],
        }),
    ]
}

/// The ClusterRole (and its binding) of `export`'s claims.
pub fn claims_role_name(export: &str) -> String {
    format!("bindery:claims:{export}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_bind_s_binding_crd_is_told_from_bindery_s() {
        let ours = binding_crd();
        assert!(binding_crd_is_bindery_s(&ours));
        let mut kube_bind_s = ours.clone();
        for version in kube_bind_s["spec"]["versions"].as_array_mut().unwrap() {
            version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
                .as_object_mut()
                .unwrap()
                .remove("permissionClaims");
        }
        assert!(!binding_crd_is_bindery_s(&kube_bind_s));
        assert!(!binding_crd_is_bindery_s(&serde_json::json!({"spec": 1})));
    }

    fn inputs<'a>(gvs: &'a [GroupVersion], claims: &'a [PermissionClaim]) -> BindingInputs<'a> {
        BindingInputs {
            consumer: "abc123",
            export: "postgresql",
            bindery_url: "https://127.0.0.1:8443",
            reach: Reach::External {
                host: "localhost",
                port: 8443,
            },
            serving_ca_pem: "-----BEGIN CERTIFICATE-----\n",
            group_versions: gvs,
            claims,
        }
    }

    fn gv(group: &str, version: &str) -> GroupVersion {
        GroupVersion {
            group: group.into(),
            version: version.into(),
        }
    }

    #[test]
    fn one_api_service_per_group_version_preferred_first_through_the_consumers_service() {
        let gvs = [
            gv("db.example.com", "v1"),
            gv("db.example.com", "v1beta1"),
            gv("other.io", "v2"),
        ];
        let objects = binding(&inputs(&gvs, &[]));
        let services: Vec<&Value> = objects
            .iter()
            .filter(|o| o["kind"] == "APIService")
            .collect();
        assert_eq!(services.len(), 3);
        assert_eq!(services[0]["metadata"]["name"], "v1.db.example.com");
        assert_eq!(services[0]["spec"]["versionPriority"], 100);
        assert_eq!(services[1]["spec"]["versionPriority"], 95);
        assert_eq!(
            services[2]["spec"]["versionPriority"], 100,
            "a new group starts again"
        );
        for s in &services {
            assert_eq!(s["spec"]["service"]["name"], "bindery-abc123");
            assert_eq!(s["spec"]["service"]["namespace"], "kube-bind");
            assert_eq!(s["spec"]["service"]["port"], 8443);
            assert!(!s["spec"]["caBundle"].as_str().unwrap().is_empty());
            assert_eq!(s["metadata"]["labels"][BINDING_LABEL], "postgresql");
        }
        assert_eq!(objects[0]["spec"]["externalName"], "localhost");
        assert_eq!(objects[0]["spec"]["type"], "ExternalName");
    }

    #[test]
    fn in_cluster_the_consumers_service_selects_binderys_pods() {
        let gvs = [gv("db.example.com", "v1")];
        let mut inputs = inputs(&gvs, &[]);
        inputs.reach = Reach::InCluster;
        let objects = binding(&inputs);
        let service = &objects[0];
        assert_eq!(service["metadata"]["name"], "bindery-abc123");
        assert_eq!(service["spec"]["type"], "ClusterIP");
        assert_eq!(service["spec"]["externalName"], Value::Null);
        assert_eq!(
            service["spec"]["selector"][SERVER_POD_LABEL.0],
            SERVER_POD_LABEL.1
        );
        assert_eq!(service["spec"]["ports"][0]["port"], 443);
        assert_eq!(service["spec"]["ports"][0]["targetPort"], "https");
        let api_service = objects.iter().find(|o| o["kind"] == "APIService").unwrap();
        assert_eq!(api_service["spec"]["service"]["port"], 443);
        assert_eq!(api_service["spec"]["service"]["name"], "bindery-abc123");
    }

    #[test]
    fn the_binding_accepts_the_exports_claims_and_points_at_the_provider_secret() {
        let claims: Vec<PermissionClaim> =
            serde_json::from_value(json!([{"group": "", "resource": "secrets"}])).unwrap();
        let objects = binding(&inputs(&[], &claims));
        let binding = objects
            .iter()
            .find(|o| o["kind"] == "APIServiceBinding")
            .unwrap();
        // Never named as the export, which kube-bind's konnector would pair
        // with it; the export is in its label.
        assert_eq!(binding["metadata"]["name"], "bindery.postgresql");
        assert_eq!(binding["metadata"]["labels"][BINDING_LABEL], "postgresql");
        assert_eq!(binding["spec"]["permissionClaims"][0]["state"], "Accepted");
        // Also where kube-bind's schema, reinstalled by its konnector, does
        // not prune them.
        let typed: APIServiceBinding = serde_json::from_value(json!({
            "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceBinding",
            "metadata": binding["metadata"],
            "spec": {"kubeconfigSecretRef": binding["spec"]["kubeconfigSecretRef"]}}))
        .unwrap();
        assert_eq!(typed.claim_decisions().len(), 1);
        assert!(typed.claim_decisions()[0].is_accepted());
        assert_eq!(
            binding["spec"]["kubeconfigSecretRef"]["name"],
            "bindery-provider-postgresql"
        );
        let secret = objects.iter().find(|o| o["kind"] == "Secret").unwrap();
        assert!(
            secret["stringData"]["kubeconfig"]
                .as_str()
                .unwrap()
                .contains("https://127.0.0.1:8443")
        );
    }

    #[test]
    fn claims_give_the_account_exactly_the_claimed_resources() {
        let claims: Vec<PermissionClaim> = serde_json::from_value(json!([
            {"group": "", "resource": "secrets", "selector": {"owner": "Provider"}},
            {"group": "", "resource": "configmaps", "selector": {"owner": "Consumer"}},
        ]))
        .unwrap();
        let objects = binding(&inputs(&[], &claims));
        let role = objects
            .iter()
            .find(|o| o["kind"] == "ClusterRole")
            .expect("a role for the claims");
        assert_eq!(role["metadata"]["name"], "bindery:claims:postgresql");
        assert_eq!(role["metadata"]["labels"][BINDING_LABEL], "postgresql");
        assert_eq!(
            role["rules"],
            json!([
                {"apiGroups": [""], "resources": ["secrets"], "verbs": CLAIMED_VERBS},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": CLAIMED_VERBS},
            ])
        );
        let bound = objects
            .iter()
            .find(|o| o["kind"] == "ClusterRoleBinding")
            .unwrap();
        assert_eq!(bound["subjects"][0]["name"], ACCOUNT);
        let unclaimed = binding(&inputs(&[], &[]));
        assert!(!unclaimed.iter().any(|o| o["kind"] == "ClusterRole"));
    }

    #[test]
    fn the_account_may_review_and_read_its_bindings_and_nothing_wider() {
        let account = account();
        let role = account.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
        for rule in role["rules"].as_array().unwrap() {
            let verbs = rule["verbs"].as_array().unwrap();
            assert!(
                !verbs
                    .iter()
                    .any(|v| v == "*" || v == "create" || v == "delete"),
                "{rule}"
            );
            assert!(
                !rule["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r == "*")
            );
        }
        // Namespaces are read (NamespaceLifecycle for creates, the
        // kube-system UID) and watched (provider namespaces follow them),
        // never written.
        let namespaces = &role["rules"][2];
        assert_eq!(namespaces["resources"], json!(["namespaces"]));
        assert_eq!(namespaces["verbs"], json!(["get", "list", "watch"]));
        // Quota admission reads quotas and writes only their status.
        let quotas: Vec<_> = role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| {
                r["resources"][0]
                    .as_str()
                    .unwrap()
                    .starts_with("resourcequotas")
            })
            .collect();
        assert_eq!(
            quotas,
            [
                &json!({"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["list"]}),
                &json!({"apiGroups": [""], "resources": ["resourcequotas/status"], "verbs": ["update"]}),
            ]
        );
        let delegator = account
            .iter()
            .find(|o| o["metadata"]["name"] == AUTH_DELEGATOR_BINDING)
            .unwrap();
        assert_eq!(delegator["roleRef"]["name"], "system:auth-delegator");
        let reader = account.iter().find(|o| o["kind"] == "RoleBinding").unwrap();
        assert_eq!(reader["metadata"]["namespace"], "kube-system");
        assert_eq!(
            reader["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                "name": "extension-apiserver-authentication-reader"})
        );
        assert!(
            account
                .iter()
                .all(|o| o["metadata"]["labels"][MANAGED_BY.0] == MANAGED_BY.1)
        );
    }
}
