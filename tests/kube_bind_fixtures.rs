//! kube-bind's objects (`tests/fixtures/kube-bind/`, one file per kind and
//! version) decode with bindery's types and mean to bindery what they mean
//! to kube-bind: what each permission claim selects, the isolation in
//! force, the schema served, the phase, the Secret a binding names. No
//! cluster: `tests/e2e/kube_bind_crds.rs` applies the same files to a real
//! kube-apiserver.
//!
//! An object kube-bind wrote at `v1alpha1` is read as bindery reads it: at
//! `v1alpha2`, the CRDs converting with strategy `None` (only `apiVersion`
//! changes).

use bindery::api::service_export::Isolation;
use bindery::api::{
    APIServiceBinding, APIServiceExport, APIServiceExportRequest, APIServiceExportTemplate,
    APIServiceNamespace, BoundSchema, ClaimOwner, ClusterBinding, ExportRequestPhase,
    InformerScope, PermissionClaim, SchemaUpdatePolicy, v1alpha1,
};
use bindery::translate::claim_filter::{ClaimedObject, covers};
use bindery::translate::claim_references::picks;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kube-bind")
}

/// The objects of `<plural>.<version>.yaml`.
fn objects(plural: &str, version: &str) -> Vec<Value> {
    let path = dir().join(format!("{plural}.{version}.yaml"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_norway::Deserializer::from_str(&text)
        .map(|document| Value::deserialize(document).expect("a fixture is YAML"))
        .collect()
}

/// `object` as bindery reads it: at `v1alpha2`.
fn read<T: DeserializeOwned>(object: &Value) -> T {
    let mut object = object.clone();
    object["apiVersion"] = json!("kube-bind.io/v1alpha2");
    serde_json::from_value(object.clone())
        .unwrap_or_else(|e| panic!("{} does not decode: {e}", object["metadata"]["name"]))
}

/// The object named `name` of `<plural>.<version>.yaml`, read by bindery.
fn named<T: DeserializeOwned>(plural: &str, version: &str, name: &str) -> T {
    let all = objects(plural, version);
    let object = all
        .iter()
        .find(|o| o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{plural}.{version}.yaml has no {name}"));
    read(object)
}

#[test]
fn there_are_fixtures_of_every_kind_at_every_version_kube_bind_serves() {
    for crd in bindery::api::crds() {
        let plural = &crd.spec.names.plural;
        for version in &crd.spec.versions {
            let objects = objects(plural, &version.name);
            assert!(!objects.is_empty(), "{plural}.{}", version.name);
            for object in &objects {
                assert_eq!(
                    object["apiVersion"],
                    format!("kube-bind.io/{}", version.name)
                );
                assert_eq!(object["kind"], crd.spec.names.kind.as_str());
            }
        }
    }
}

#[test]
fn every_fixture_decodes_with_binderys_types() {
    fn all<T: DeserializeOwned>(plural: &str, versions: &[&str]) {
        for version in versions {
            for object in objects(plural, version) {
                let _: T = read(&object);
            }
        }
    }
    let both = ["v1alpha1", "v1alpha2"];
    all::<APIServiceBinding>("apiservicebindings", &both);
    all::<APIServiceExportRequest>("apiserviceexportrequests", &both);
    all::<APIServiceExport>("apiserviceexports", &both);
    all::<APIServiceNamespace>("apiservicenamespaces", &both);
    all::<ClusterBinding>("clusterbindings", &both);
    all::<APIServiceExportTemplate>("apiserviceexporttemplates", &["v1alpha2"]);
    all::<BoundSchema>("boundschemas", &["v1alpha2"]);
}

/// One object a claim might cover: (namespace, name, labels).
type Candidate = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// Which of `candidates` `claim` selects, its references reading
/// `referring` under `isolation`, as bindery decides it.
fn selected(
    claim: &PermissionClaim,
    candidates: &[Candidate],
    referring: &[Value],
    isolation: Isolation,
) -> BTreeSet<String> {
    let picked: Vec<_> = claim
        .selector
        .references
        .iter()
        .flat_map(|reference| picks(reference, referring, isolation))
        .collect();
    candidates
        .iter()
        .filter(|(namespace, name, labels)| {
            let labels: BTreeMap<String, String> = labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let object = ClaimedObject {
                name,
                consumer_namespace: Some(namespace),
                labels: &labels,
                side: ClaimOwner::Consumer,
            };
            covers(claim, &object, &picked)
        })
        .map(|(namespace, name, _)| format!("{namespace}/{name}"))
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[test]
fn each_claim_selector_form_selects_what_it_selects_in_kube_bind() {
    let template: APIServiceExportTemplate =
        named("apiserviceexporttemplates", "v1alpha2", "cowboys");
    let claims = &template.spec.permission_claims;
    // The consumer's cowboys, which the references read.
    let referring = [json!({
        "apiVersion": "wildwest.dev/v1alpha1", "kind": "Cowboy",
        "metadata": {"name": "joe", "namespace": "dodge-city"},
        "spec": {"secretRef": {"name": "lasso"},
            "configMapRefs": [{"name": "wanted-list", "namespace": "tombstone"}]}})];
    let secrets: &[Candidate] = &[
        ("dodge-city", "cowboy-boots", &[("app", "cowboy")]),
        ("dodge-city", "saloon-credentials", &[]),
        ("tombstone", "saloon-credentials", &[]),
        ("dodge-city", "lasso", &[]),
        ("tombstone", "lasso", &[]),
        ("dodge-city", "stray", &[("app", "horse")]),
    ];
    let config_maps: &[Candidate] = &[
        ("dodge-city", "horse-feed", &[("app", "horse")]),
        ("dodge-city", "trail-map", &[]),
        ("tombstone", "trail-map", &[]),
        ("tombstone", "sheriff-notes", &[("app", "sheriff")]),
        ("tombstone", "wanted-posters", &[]),
        ("tombstone", "wanted-list", &[]),
        ("dodge-city", "wanted-list", &[]),
    ];
    let namespaced = Isolation::Namespaced;
    let cases: [(&PermissionClaim, &[Candidate], Isolation, BTreeSet<String>); 7] = [
        // labelSelector alone.
        (
            &claims[0],
            secrets,
            namespaced,
            set(&["dodge-city/cowboy-boots"]),
        ),
        // namedResources alone: the name in its namespace.
        (
            &claims[1],
            secrets,
            namespaced,
            set(&["dodge-city/saloon-credentials"]),
        ),
        // references alone, no namespace path: under Namespaced isolation,
        // in the referring cowboy's namespace ...
        (&claims[2], secrets, namespaced, set(&["dodge-city/lasso"])),
        // ... under Prefixed, in any.
        (
            &claims[2],
            secrets,
            Isolation::Prefixed,
            set(&["dodge-city/lasso", "tombstone/lasso"]),
        ),
        // labelSelector (matchExpressions) or namedResources.
        (
            &claims[3],
            config_maps,
            namespaced,
            set(&["dodge-city/horse-feed", "dodge-city/trail-map"]),
        ),
        // All three ORed; the reference's namespace path (a gjson `#` path)
        // names the namespace.
        (
            &claims[4],
            config_maps,
            namespaced,
            set(&[
                "tombstone/sheriff-notes",
                "tombstone/wanted-posters",
                "tombstone/wanted-list",
            ]),
        ),
        // The empty selector selects nothing.
        (&claims[5], secrets, namespaced, set(&[])),
    ];
    for (claim, candidates, isolation, expected) in cases {
        assert_eq!(
            selected(claim, candidates, &referring, isolation),
            expected,
            "{claim:?} under {isolation:?}"
        );
    }
    assert_eq!(claims.len(), 6, "every claim is checked");
}

#[test]
fn templates_say_what_is_offered_and_how_it_is_watched() {
    let cowboys: APIServiceExportTemplate =
        named("apiserviceexporttemplates", "v1alpha2", "cowboys");
    assert_eq!(cowboys.spec.scope, Some(InformerScope::Namespaced));
    assert_eq!(
        cowboys.spec.schema_update_policy,
        Some(SchemaUpdatePolicy::Always)
    );
    assert_eq!(cowboys.spec.namespaces[0].name, "dodge-city");
    let sheriffs: APIServiceExportTemplate =
        named("apiserviceexporttemplates", "v1alpha2", "sheriffs");
    assert_eq!(sheriffs.spec.scope, Some(InformerScope::Cluster));
    // No policy written: the CRD's default (Never) is what the API server
    // serves; the type reads what is written.
    assert_eq!(sheriffs.spec.schema_update_policy, None);
    let databases: APIServiceExportTemplate =
        named("apiserviceexporttemplates", "v1alpha2", "databases");
    let resources = databases.spec.effective_resources();
    assert_eq!(resources.len(), 2);
    assert_eq!(resources[0].versions, ["v1", "v1beta1"]);
    assert!(resources[1].versions.is_empty(), "the provider picks");
}

#[test]
fn requests_carry_their_phase_policy_and_parameters() {
    let cowboys: APIServiceExportRequest = named("apiserviceexportrequests", "v1alpha2", "cowboys");
    assert_eq!(
        cowboys.spec.schema_update_policy,
        SchemaUpdatePolicy::Always
    );
    assert_eq!(cowboys.spec.permission_claims.len(), 2);
    assert!(cowboys.spec.template_ref.is_none());
    let status = cowboys.status.expect("answered");
    assert_eq!(status.phase, Some(ExportRequestPhase::Succeeded));
    assert!(status.conditions[0].reason.is_empty());

    let sheriffs: APIServiceExportRequest =
        named("apiserviceexportrequests", "v1alpha2", "sheriffs");
    assert_eq!(
        sheriffs.spec.schema_update_policy,
        SchemaUpdatePolicy::Never
    );
    assert_eq!(
        sheriffs.spec.parameters.as_ref().unwrap()["backups"]["enabled"],
        true
    );
    assert!(sheriffs.status.is_none(), "the API server defaults it");

    let phantoms: APIServiceExportRequest =
        named("apiserviceexportrequests", "v1alpha2", "phantoms");
    let status = phantoms.status.expect("refused");
    assert_eq!(status.phase, Some(ExportRequestPhase::Failed));
    assert_eq!(status.conditions[0].severity.as_deref(), Some("Error"));

    let old: APIServiceExportRequest = named("apiserviceexportrequests", "v1alpha1", "mangodbs");
    assert_eq!(old.spec.resources[0].resource, "mangodbs");
    assert_eq!(old.spec.parameters.unwrap()["region"], "eu");
}

#[test]
fn exports_serve_their_resources_with_the_isolation_in_force() {
    let cowboys: APIServiceExport = named("apiserviceexports", "v1alpha2", "cowboys");
    assert_eq!(cowboys.spec.effective_isolation(), Isolation::Namespaced);
    assert_eq!(cowboys.spec.informer_scope, InformerScope::Namespaced);
    let conditions = cowboys.status.unwrap().conditions;
    assert_eq!(conditions.len(), 3);
    assert_eq!(conditions[1].severity.as_deref(), Some("Warning"));
    assert!(conditions[0].reason.is_empty() && conditions[0].message.is_empty());
    let sheriffs: APIServiceExport = named("apiserviceexports", "v1alpha2", "sheriffs");
    assert_eq!(
        sheriffs.spec.effective_isolation(),
        Isolation::Prefixed,
        "isolation wins over the deprecated field"
    );

    // v1alpha1: one CRD-like resource; read at v1alpha2, no resources, so
    // nothing is served.
    let all = objects("apiserviceexports", "v1alpha1");
    let old: v1alpha1::APIServiceExport = serde_json::from_value(all[0].clone()).unwrap();
    assert_eq!(
        format!("{}.{}", old.spec.names.plural, old.spec.group),
        old.metadata.name.clone().unwrap()
    );
    assert_eq!(old.spec.cluster_scoped_isolation, Some(Isolation::Prefixed));
    let as_bindery_reads_it: APIServiceExport = read(&all[0]);
    assert!(as_bindery_reads_it.spec.resources.is_empty());
    // Served as the konnector serves it: by `isolation` alone, else None.
    assert_eq!(
        as_bindery_reads_it.spec.effective_isolation(),
        Isolation::None
    );
    assert_eq!(
        as_bindery_reads_it.spec.informer_scope,
        InformerScope::Cluster
    );
}

#[test]
fn bound_schemas_serve_their_schema_in_either_form() {
    for name in [
        "cowboys.wildwest.dev",
        "sheriffs.wildwest.dev",
        "postgresqlinstances.db.example.com",
    ] {
        let schema: BoundSchema = named("boundschemas", "v1alpha2", name);
        assert_eq!(schema.spec.object_name(), name);
        for version in &schema.spec.versions {
            let openapi = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref());
            assert_eq!(
                openapi.and_then(|s| s.type_.as_deref()),
                Some("object"),
                "{name} {}",
                version.name
            );
        }
    }
    let cowboys: BoundSchema = named("boundschemas", "v1alpha2", "cowboys.wildwest.dev");
    assert_eq!(
        cowboys.metadata.owner_references.unwrap()[0].name,
        "cowboys"
    );
    let bare: BoundSchema = named("boundschemas", "v1alpha2", "sheriffs.wildwest.dev");
    let spec = bare.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| s.properties.as_ref())
        .expect("the bare schema's properties");
    assert!(spec.contains_key("spec"));
    let converted: BoundSchema = named(
        "boundschemas",
        "v1alpha2",
        "postgresqlinstances.db.example.com",
    );
    let crd = converted.spec.crd_spec();
    assert_eq!(crd.conversion.unwrap().strategy, "Webhook");
    assert_eq!(crd.versions[1].deprecated, Some(true));
}

#[test]
fn namespaces_map_to_their_provider_namespace() {
    let mapped: APIServiceNamespace = named("apiservicenamespaces", "v1alpha2", "dodge-city");
    assert_eq!(
        mapped.status.and_then(|s| s.namespace).as_deref(),
        Some("kube-bind-fixtures-dodge-city")
    );
    let pending: APIServiceNamespace = named("apiservicenamespaces", "v1alpha2", "tombstone");
    assert!(pending.status.is_none());
    let old: APIServiceNamespace = named("apiservicenamespaces", "v1alpha1", "deadwood");
    assert_eq!(
        old.status.and_then(|s| s.namespace).as_deref(),
        Some("kube-bind-fixtures-deadwood")
    );
}

#[test]
fn cluster_bindings_name_the_kubeconfig_and_keep_the_heartbeat() {
    for version in ["v1alpha2", "v1alpha1"] {
        let binding: ClusterBinding = named("clusterbindings", version, "cluster");
        assert_eq!(binding.spec.kubeconfig_secret_ref.name, "kubeconfig");
        assert_eq!(binding.spec.kubeconfig_secret_ref.key, "kubeconfig");
        assert_eq!(binding.spec.provider_pretty_name, "Wild West Services");
        let status = binding.status.expect("the konnector's heartbeat");
        assert!(status.last_heartbeat_time.is_some());
        assert_eq!(status.heartbeat_interval.as_deref(), Some("5m0s"));
    }
    let current: ClusterBinding = named("clusterbindings", "v1alpha2", "cluster");
    assert_eq!(
        current
            .status
            .unwrap()
            .consumer_secret_ref
            .unwrap()
            .namespace,
        "kube-bind"
    );
}

#[test]
fn api_service_bindings_name_the_provider_secret_and_report_the_binding() {
    let cowboys: APIServiceBinding = named("apiservicebindings", "v1alpha2", "cowboys");
    assert_eq!(cowboys.spec.kubeconfig_secret_ref.name, "kubeconfig-7xk2p");
    assert!(
        cowboys.spec.permission_claims.is_empty(),
        "kube-bind records no decisions"
    );
    let status = cowboys.status.unwrap();
    assert_eq!(status.bound_schemas[0].to_string(), "cowboys.wildwest.dev");
    assert_eq!(status.permission_claims.len(), 2);
    let old: APIServiceBinding = named("apiservicebindings", "v1alpha1", "mangodbs");
    assert_eq!(old.spec.kubeconfig_secret_ref.namespace, "kube-bind");
    assert_eq!(
        old.status.unwrap().provider_pretty_name.as_deref(),
        Some("MangoDB Inc.")
    );
}
