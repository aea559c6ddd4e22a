//! The catalog index: provider records in, per-consumer views out. No I/O.

use crate::quota::caps::Caps;
use crate::route::ConsumerId;
use crate::translate::owners::{ProviderKind, ProviderKinds};
use crate::translate::{BoundResource, IdentityHash, Isolation, NamespaceMap};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionSpec;
use std::collections::BTreeMap;
use std::sync::Arc;

/// An APIServiceExport, as far as serving needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportRecord {
    pub namespace: String,
    pub name: String,
    /// `(group, resource)` pairs.
    pub resources: Vec<(String, String)>,
    pub isolation: Isolation,
    /// `None` until the export has an identity: nothing is served before.
    pub identity: Option<IdentityHash>,
    /// For choosing between two exports of one resource: the older wins.
    pub created: String,
    /// What one consumer may grow through it.
    pub caps: Caps,
}

/// A BoundSchema.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemaRecord {
    pub namespace: String,
    pub name: String,
    /// Shared by every BoundSchema with the same spec.
    pub spec: Arc<CustomResourceDefinitionSpec>,
}

/// An APIServiceNamespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceRecord {
    pub namespace: String,
    /// The consumer namespace.
    pub name: String,
    /// `status.namespace`: the provider namespace, once set.
    pub provider: Option<String>,
}

/// One resource served to a consumer, with the schema it is served with.
#[derive(Clone, Debug)]
pub struct ServedResource {
    pub bound: BoundResource,
    pub spec: Arc<CustomResourceDefinitionSpec>,
    /// Its export's caps, and every `(group, resource)` the export serves
    /// (what the object cap counts).
    pub caps: Caps,
    pub export_resources: Arc<[(String, String)]>,
}

impl ServedResource {
    /// Whether `version` is served.
    pub fn serves(&self, version: &str) -> bool {
        self.spec
            .versions
            .iter()
            .any(|v| v.served && v.name == version)
    }
}

/// Everything one consumer sees.
#[derive(Clone, Debug)]
pub struct ConsumerView {
    pub consumer: ConsumerId,
    pub cluster_namespace: String,
    pub resources: Vec<ServedResource>,
}

impl ConsumerView {
    pub fn find(&self, group: &str, resource: &str) -> Option<&ServedResource> {
        self.resources
            .iter()
            .find(|r| r.bound.group == group && r.bound.resource == resource)
    }

    /// The served schemas, for discovery and OpenAPI.
    /// This view narrowed to the resources bound through export `key` (its
    /// name or identity hash).
    /// Its objects are marked with their consumer in the kcp dialect.
    pub fn through_export(mut self, key: &str) -> Self {
        self.resources
            .retain(|r| r.bound.export == key || r.bound.identity.as_str() == key);
        for resource in &mut self.resources {
            resource.bound.in_workspace = true;
        }
        self
    }

    pub fn specs(&self) -> Vec<CustomResourceDefinitionSpec> {
        self.resources.iter().map(|r| (*r.spec).clone()).collect()
    }

    /// Whether any served resource is in `group` at `version`.
    pub fn serves_group_version(&self, group: &str, version: &str) -> bool {
        self.resources
            .iter()
            .any(|r| r.bound.group == group && r.serves(version))
    }
}

/// The provider records, keyed by `(namespace, name)`.
#[derive(Clone, Debug)]
pub struct Catalog {
    prefix: String,
    exports: BTreeMap<(String, String), ExportRecord>,
    schemas: BTreeMap<(String, String), SchemaRecord>,
    namespaces: BTreeMap<(String, String), NamespaceRecord>,
    /// Each cluster namespace's records as one map, made when they change
    /// rather than per request; absent for a cluster namespace without
    /// records.
    namespace_maps: BTreeMap<String, NamespaceMap>,
    /// Counts the changes, so that long-lived readers (watch streams) know
    /// when what they derived from the catalog is stale.
    generation: u64,
}

impl Catalog {
    /// A catalog whose cluster namespaces are `<prefix><consumer>`.
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
            exports: BTreeMap::new(),
            schemas: BTreeMap::new(),
            namespaces: BTreeMap::new(),
            namespace_maps: BTreeMap::new(),
            generation: 0,
        }
    }

    /// Changes with every `set_*`.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn cluster_namespace(&self, consumer: &ConsumerId) -> String {
        format!("{}{consumer}", self.prefix)
    }

    pub fn set_exports(&mut self, exports: impl IntoIterator<Item = ExportRecord>) {
        self.generation += 1;
        self.exports = exports
            .into_iter()
            .map(|e| ((e.namespace.clone(), e.name.clone()), e))
            .collect();
    }

    pub fn set_schemas(&mut self, schemas: impl IntoIterator<Item = SchemaRecord>) {
        self.generation += 1;
        self.schemas = schemas
            .into_iter()
            .map(|s| ((s.namespace.clone(), s.name.clone()), s))
            .collect();
    }

    pub fn set_namespaces(&mut self, namespaces: impl IntoIterator<Item = NamespaceRecord>) {
        self.generation += 1;
        self.namespaces = namespaces
            .into_iter()
            .map(|n| ((n.namespace.clone(), n.name.clone()), n))
            .collect();
        let mut cluster_namespaces: Vec<String> = self.namespace_maps.keys().cloned().collect();
        cluster_namespaces.extend(self.namespaces.keys().map(|(ns, _)| ns.clone()));
        cluster_namespaces.sort();
        cluster_namespaces.dedup();
        for cluster_namespace in cluster_namespaces {
            self.remap(&cluster_namespace);
        }
    }

    /// Makes `cluster_namespace`'s map again from its records, keeping the
    /// old map (and its generation) when the records map alike.
    fn remap(&mut self, cluster_namespace: &str) {
        let mut map = NamespaceMap::new(cluster_namespace);
        for record in self.in_namespace(&self.namespaces, cluster_namespace) {
            if let Some(provider) = &record.provider {
                map.insert(record.name.clone(), provider.clone());
            }
        }
        if map.generation() == 0 {
            self.namespace_maps.remove(cluster_namespace);
        } else if self.namespace_maps.get(cluster_namespace) != Some(&map) {
            self.namespace_maps
                .insert(cluster_namespace.to_string(), map);
        }
    }

    /// Adds or replaces one export.
    pub fn upsert_export(&mut self, export: ExportRecord) {
        self.generation += 1;
        self.exports
            .insert((export.namespace.clone(), export.name.clone()), export);
    }

    /// Adds or replaces one BoundSchema.
    pub fn upsert_schema(&mut self, schema: SchemaRecord) {
        self.generation += 1;
        self.schemas
            .insert((schema.namespace.clone(), schema.name.clone()), schema);
    }

    /// Adds or replaces one APIServiceNamespace.
    pub fn upsert_namespace(&mut self, namespace: NamespaceRecord) {
        self.generation += 1;
        let cluster_namespace = namespace.namespace.clone();
        self.namespaces.insert(
            (namespace.namespace.clone(), namespace.name.clone()),
            namespace,
        );
        self.remap(&cluster_namespace);
    }

    pub fn remove_export(&mut self, key: &(String, String)) {
        self.generation += 1;
        self.exports.remove(key);
    }

    pub fn remove_schema(&mut self, key: &(String, String)) {
        self.generation += 1;
        self.schemas.remove(key);
    }

    pub fn remove_namespace(&mut self, key: &(String, String)) {
        self.generation += 1;
        self.namespaces.remove(key);
        self.remap(&key.0);
    }

    /// The consumers with an export named `key`, or whose export's identity
    /// hash is `key`, each with that export's name; sorted by consumer.
    pub fn consumers_of(&self, key: &str) -> Vec<(ConsumerId, String)> {
        let mut found: Vec<(ConsumerId, String)> = self
            .exports
            .values()
            .filter(|e| e.name == key || e.identity.as_ref().is_some_and(|i| i.as_str() == key))
            .filter_map(|e| {
                let consumer = ConsumerId::parse(e.namespace.strip_prefix(&self.prefix)?)?;
                Some((consumer, e.name.clone()))
            })
            .collect();
        found.sort();
        found
    }

    /// The view of `consumer`: each exported resource that has an identity
    /// and a BoundSchema in the consumer's cluster namespace.
    pub fn view(&self, consumer: &ConsumerId) -> ConsumerView {
        self.view_where(consumer, |_, _| true)
    }

    /// What `consumer` or any of `others` serves, for discovery only: each
    /// resource once, from the first consumer that serves it.
    pub fn union_view(&self, consumer: &ConsumerId, others: &[ConsumerId]) -> ConsumerView {
        let mut union = self.view(consumer);
        for view in others.iter().map(|other| self.view(other)) {
            for resource in view.resources {
                let bound = &resource.bound;
                if union.find(&bound.group, &bound.resource).is_none() {
                    union.resources.push(resource);
                }
            }
        }
        union
    }

    /// [`Self::view`] narrowed to one resource: what a resource request
    /// needs, without building the consumer's other bindings.
    pub fn resource_view(
        &self,
        consumer: &ConsumerId,
        group: &str,
        resource: &str,
    ) -> ConsumerView {
        self.view_where(consumer, |g, r| g == group && r == resource)
    }

    /// The provider collections the bound resources are served from, each
    /// at its schema's storage version (`/apis/<group>/<version>/<resource>`):
    /// the watch cache reflects them before bindery says it is ready.
    pub fn served_collections(&self) -> std::collections::BTreeSet<String> {
        let mut collections = std::collections::BTreeSet::new();
        for export in self.exports.values().filter(|e| e.identity.is_some()) {
            for (group, resource) in &export.resources {
                let schema_name = if group.is_empty() {
                    resource.clone()
                } else {
                    format!("{resource}.{group}")
                };
                let key = (export.namespace.clone(), schema_name);
                let Some(schema) = self.schemas.get(&key) else {
                    continue;
                };
                let versions = &schema.spec.versions;
                let Some(version) = versions
                    .iter()
                    .find(|v| v.storage && v.served)
                    .or_else(|| versions.iter().find(|v| v.served))
                else {
                    continue;
                };
                collections.insert(if group.is_empty() {
                    format!("/api/{}/{resource}", version.name)
                } else {
                    format!("/apis/{group}/{}/{resource}", version.name)
                });
            }
        }
        collections
    }

    /// The consumer's view of the resources `wanted` (group, plural) picks.
    fn view_where(
        &self,
        consumer: &ConsumerId,
        wanted: impl Fn(&str, &str) -> bool,
    ) -> ConsumerView {
        let cluster_namespace = self.cluster_namespace(consumer);
        let map = self
            .namespace_maps
            .get(&cluster_namespace)
            .cloned()
            .unwrap_or_else(|| NamespaceMap::new(cluster_namespace.clone()));
        let mut exports: Vec<&ExportRecord> = self
            .in_namespace(&self.exports, &cluster_namespace)
            .collect();
        exports.sort_by(|a, b| (&a.created, &a.name).cmp(&(&b.created, &b.name)));
        let provider_kinds = self.provider_kinds(&cluster_namespace, &exports);
        let mut resources: Vec<ServedResource> = Vec::new();
        for export in exports {
            let Some(identity) = &export.identity else {
                continue;
            };
            let export_resources: Arc<[(String, String)]> = export.resources.clone().into();
            for (group, resource) in &export.resources {
                if !wanted(group, resource) {
                    continue;
                }
                if resources
                    .iter()
                    .any(|r| &r.bound.group == group && &r.bound.resource == resource)
                {
                    continue;
                }
                let schema_name = if group.is_empty() {
                    resource.clone()
                } else {
                    format!("{resource}.{group}")
                };
                let Some(schema) = self.schemas.get(&(cluster_namespace.clone(), schema_name))
                else {
                    continue;
                };
                if &schema.spec.group != group || &schema.spec.names.plural != resource {
                    continue;
                }
                let served = schema.spec.versions.iter().filter(|v| v.served);
                let has = |pick: fn(&k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceSubresources) -> bool| {
                    served.clone().any(|v| v.subresources.as_ref().is_some_and(pick))
                };
                resources.push(ServedResource {
                    bound: BoundResource {
                        consumer: consumer.clone(),
                        group: group.clone(),
                        resource: resource.clone(),
                        kind: schema.spec.names.kind.clone(),
                        namespaced: schema.spec.scope == "Namespaced",
                        isolation: export.isolation,
                        export: export.name.clone(),
                        identity: identity.clone(),
                        has_status: has(|s| s.status.is_some()),
                        has_scale: has(|s| s.scale.is_some()),
                        namespaces: map.clone(),
                        provider_kinds: provider_kinds.clone(),
                        in_workspace: false,
                    },
                    spec: schema.spec.clone(),
                    caps: export.caps,
                    export_resources: export_resources.clone(),
                });
            }
        }
        ConsumerView {
            consumer: consumer.clone(),
            cluster_namespace,
            resources,
        }
    }

    /// Every kind bound through `exports` (of `cluster_namespace`) that has
    /// a BoundSchema: the kinds whose objects are on the provider.
    fn provider_kinds(&self, cluster_namespace: &str, exports: &[&ExportRecord]) -> ProviderKinds {
        let mut kinds: Vec<ProviderKind> = exports
            .iter()
            .filter(|export| export.identity.is_some())
            .flat_map(|export| {
                export.resources.iter().filter_map(|(group, resource)| {
                    let schema_name = if group.is_empty() {
                        resource.clone()
                    } else {
                        format!("{resource}.{group}")
                    };
                    let schema = self
                        .schemas
                        .get(&(cluster_namespace.to_string(), schema_name))?;
                    Some(ProviderKind {
                        group: group.clone(),
                        kind: schema.spec.names.kind.clone(),
                        prefixed: schema.spec.scope != "Namespaced"
                            && export.isolation == Isolation::Prefixed,
                    })
                })
            })
            .collect();
        kinds.sort();
        kinds.dedup();
        kinds.into()
    }

    fn in_namespace<'a, T>(
        &'a self,
        records: &'a BTreeMap<(String, String), T>,
        namespace: &'a str,
    ) -> impl Iterator<Item = &'a T> + 'a {
        records
            .range((namespace.to_string(), String::new())..)
            .take_while(move |((ns, _), _)| ns == namespace)
            .map(|(_, record)| record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceDefinitionNames, CustomResourceDefinitionVersion,
    };

    fn schema(ns: &str, plural: &str) -> SchemaRecord {
        SchemaRecord {
            namespace: ns.into(),
            name: format!("{plural}.example.com"),
            spec: Arc::new(CustomResourceDefinitionSpec {
                group: "example.com".into(),
                names: CustomResourceDefinitionNames {
                    plural: plural.into(),
                    kind: "Widget".into(),
                    ..Default::default()
                },
                scope: "Namespaced".into(),
                versions: vec![CustomResourceDefinitionVersion {
                    name: "v1".into(),
                    served: true,
                    storage: true,
                    ..Default::default()
                }],
                ..Default::default()
            }),
        }
    }

    fn export(ns: &str, name: &str, created: &str, identity: Option<&[u8]>) -> ExportRecord {
        ExportRecord {
            namespace: ns.into(),
            name: name.into(),
            resources: vec![("example.com".into(), "widgets".into())],
            isolation: Isolation::Prefixed,
            identity: identity.map(IdentityHash::of_secret),
            created: created.into(),
            caps: Caps::DEFAULT,
        }
    }

    /// Each request's view shares its consumer's namespace map, made when
    /// a record changes; the translation key follows the records.
    #[test]
    fn a_views_namespace_map_is_made_when_records_change() {
        let mut catalog = Catalog::new("kube-bind-");
        catalog.set_schemas([schema("kube-bind-c1", "widgets")]);
        catalog.set_exports([export("kube-bind-c1", "w", "2026-01-01", Some(b"1"))]);
        let c1 = ConsumerId::parse("c1").unwrap();
        let bound = |catalog: &Catalog| {
            let view = catalog.resource_view(&c1, "example.com", "widgets");
            view.resources[0].bound.clone()
        };
        let record = |name: &str, provider: &str| NamespaceRecord {
            namespace: "kube-bind-c1".into(),
            name: name.into(),
            provider: Some(provider.into()),
        };
        let none = bound(&catalog);
        assert_eq!(none.translation_key(), bound(&catalog).translation_key());
        assert_eq!(none.namespaces.to_provider("team"), "kube-bind-c1-team");

        catalog.upsert_namespace(record("team", "p-team"));
        let one = bound(&catalog);
        assert_eq!(one.namespaces.to_provider("team"), "p-team");
        assert_ne!(one.translation_key(), none.translation_key());
        assert_eq!(one.translation_key(), bound(&catalog).translation_key());

        // A relist with the same records keeps the map, and so the key.
        catalog.set_namespaces([record("team", "p-team")]);
        assert_eq!(bound(&catalog).translation_key(), one.translation_key());

        catalog.upsert_namespace(record("team", "p-team-2"));
        let moved = bound(&catalog);
        assert_eq!(moved.namespaces.to_provider("team"), "p-team-2");
        assert_ne!(moved.translation_key(), one.translation_key());

        catalog.remove_namespace(&("kube-bind-c1".into(), "team".into()));
        let gone = bound(&catalog);
        assert_eq!(gone.namespaces.to_provider("team"), "kube-bind-c1-team");
        assert_eq!(gone.translation_key(), none.translation_key());
    }

    #[test]
    fn a_union_view_serves_each_resource_once_first_consumer_first() {
        let mut catalog = Catalog::new("kube-bind-");
        catalog.set_schemas([
            schema("kube-bind-c1", "widgets"),
            schema("kube-bind-c2", "widgets"),
            schema("kube-bind-c2", "gadgets"),
        ]);
        catalog.set_exports([
            export("kube-bind-c1", "w", "2026-01-01", Some(b"1")),
            export("kube-bind-c2", "w", "2026-01-01", Some(b"2")),
        ]);
        let id = |name| ConsumerId::parse(name).unwrap();
        let (c1, c2, c3) = (id("c1"), id("c2"), id("c3"));
        let union = catalog.union_view(&c3, &[c1.clone(), c2.clone()]);
        let plurals: Vec<&str> = union
            .resources
            .iter()
            .map(|r| r.bound.resource.as_str())
            .collect();
        assert_eq!(plurals.len(), catalog.view(&c2).resources.len());
        let widgets = union.find("example.com", "widgets").unwrap();
        assert_eq!(widgets.bound.identity, IdentityHash::of_secret(b"1"));
        assert_eq!(union.consumer, c3);
        assert!(catalog.union_view(&c3, &[]).resources.is_empty());
    }

    #[test]
    fn views_are_per_consumer() {
        let mut catalog = Catalog::new("kube-bind-");
        catalog.set_schemas([
            schema("kube-bind-c1", "widgets"),
            schema("kube-bind-c2", "widgets"),
        ]);
        catalog.set_exports([
            export("kube-bind-c1", "w", "2026-01-01", Some(b"1")),
            export("kube-bind-c2", "w", "2026-01-01", Some(b"2")),
        ]);
        catalog.set_namespaces([NamespaceRecord {
            namespace: "kube-bind-c1".into(),
            name: "team".into(),
            provider: Some("p-team".into()),
        }]);
        let c1 = catalog.view(&ConsumerId::parse("c1").unwrap());
        let widgets = c1.find("example.com", "widgets").unwrap();
        assert_eq!(widgets.bound.identity, IdentityHash::of_secret(b"1"));
        assert_eq!(widgets.bound.namespaces.to_provider("team"), "p-team");
        assert!(c1.serves_group_version("example.com", "v1"));
        assert!(!c1.serves_group_version("example.com", "v2"));

        let c2 = catalog.view(&ConsumerId::parse("c2").unwrap());
        assert_eq!(
            c2.find("example.com", "widgets").unwrap().bound.identity,
            IdentityHash::of_secret(b"2")
        );
        assert_eq!(
            c2.find("example.com", "widgets")
                .unwrap()
                .bound
                .namespaces
                .to_provider("team"),
            "kube-bind-c2-team"
        );

        assert!(
            catalog
                .view(&ConsumerId::parse("c3").unwrap())
                .resources
                .is_empty()
        );
    }

    #[test]
    fn an_exports_consumers_are_found_by_name_or_identity_and_views_narrow_to_it() {
        let mut catalog = Catalog::new("kube-bind-");
        catalog.set_schemas([
            schema("kube-bind-c1", "widgets"),
            schema("kube-bind-c2", "widgets"),
        ]);
        catalog.set_exports([
            export("kube-bind-c2", "w", "2026", Some(b"2")),
            export("kube-bind-c1", "w", "2026", Some(b"1")),
            export("kube-bind-c1", "other", "2027", Some(b"o")),
            export("elsewhere", "w", "2026", Some(b"x")),
        ]);
        let id = |s: &str| ConsumerId::parse(s).unwrap();
        assert_eq!(
            catalog.consumers_of("w"),
            vec![(id("c1"), "w".to_string()), (id("c2"), "w".to_string())],
            "sorted, and only in cluster namespaces"
        );
        let identity = IdentityHash::of_secret(b"2");
        assert_eq!(
            catalog.consumers_of(identity.as_str()),
            vec![(id("c2"), "w".to_string())]
        );
        assert!(catalog.consumers_of("missing").is_empty());
        let before = catalog.generation();
        catalog.set_namespaces([]);
        assert_ne!(catalog.generation(), before, "a change is counted");
        let view = catalog.view(&id("c1"));
        assert_eq!(view.clone().through_export("w").resources.len(), 1);
        assert!(view.through_export("other").resources.is_empty());
    }

    #[test]
    fn exports_without_identity_or_schema_serve_nothing_and_the_oldest_wins() {
        let mut catalog = Catalog::new("kube-bind-");
        catalog.set_exports([export("kube-bind-c1", "w", "2026", None)]);
        catalog.set_schemas([schema("kube-bind-c1", "widgets")]);
        assert!(
            catalog
                .view(&ConsumerId::parse("c1").unwrap())
                .resources
                .is_empty()
        );

        catalog.set_exports([
            export("kube-bind-c1", "newer", "2026-02", Some(b"new")),
            export("kube-bind-c1", "older", "2026-01", Some(b"old")),
        ]);
        let view = catalog.view(&ConsumerId::parse("c1").unwrap());
        assert_eq!(view.resources.len(), 1);
        assert_eq!(view.resources[0].bound.export, "older");

        catalog.set_schemas([]);
        assert!(
            catalog
                .view(&ConsumerId::parse("c1").unwrap())
                .resources
                .is_empty()
        );
    }

    #[test]
    fn served_collections_are_the_bound_resources_at_their_storage_versions() {
        let mut catalog = Catalog::new("kube-bind-");
        assert!(catalog.served_collections().is_empty());
        let mut gadgets = schema("kube-bind-c2", "gadgets");
        let spec = Arc::make_mut(&mut gadgets.spec);
        spec.versions[0].storage = false;
        spec.versions.push(CustomResourceDefinitionVersion {
            name: "v2".into(),
            served: true,
            storage: true,
            ..Default::default()
        });
        catalog.set_schemas([
            schema("kube-bind-c1", "widgets"),
            schema("kube-bind-c2", "widgets"),
            gadgets,
        ]);
        let mut c2 = export("kube-bind-c2", "g", "2026", Some(b"2"));
        c2.resources.push(("example.com".into(), "gadgets".into()));
        catalog.set_exports([
            export("kube-bind-c1", "w", "2026", Some(b"1")),
            c2,
            export("kube-bind-c3", "w", "2026", Some(b"3")), // no schema
            export("kube-bind-c4", "w", "2026", None),       // no identity
        ]);
        assert_eq!(
            catalog.served_collections().into_iter().collect::<Vec<_>>(),
            [
                "/apis/example.com/v1/widgets",
                "/apis/example.com/v2/gadgets"
            ]
        );
    }

    #[test]
    fn a_resource_view_holds_what_the_whole_view_serves_for_that_resource() {
        let mut catalog = Catalog::new("kube-bind-");
        catalog.set_schemas([
            schema("kube-bind-c1", "widgets"),
            schema("kube-bind-c1", "gadgets"),
        ]);
        let mut both = export("kube-bind-c1", "newer", "2026-02", Some(b"new"));
        both.resources
            .push(("example.com".into(), "gadgets".into()));
        catalog.set_exports([
            both,
            export("kube-bind-c1", "older", "2026-01", Some(b"old")),
        ]);
        let c1 = ConsumerId::parse("c1").unwrap();
        let whole = catalog.view(&c1);
        assert_eq!(whole.resources.len(), 2);
        for plural in ["widgets", "gadgets"] {
            let narrowed = catalog.resource_view(&c1, "example.com", plural);
            assert_eq!(narrowed.resources.len(), 1, "{plural}");
            let (one, all) = (
                &narrowed.resources[0].bound,
                &whole.find("example.com", plural).unwrap().bound,
            );
            assert_eq!(format!("{one:?}"), format!("{all:?}"), "{plural}");
        }
        // The oldest export still wins the resource both bind.
        let widgets = catalog.resource_view(&c1, "example.com", "widgets");
        assert_eq!(widgets.resources[0].bound.export, "older");
        assert!(
            catalog
                .resource_view(&c1, "example.com", "missing")
                .resources
                .is_empty()
        );
        assert_eq!(widgets.cluster_namespace, whole.cluster_namespace);
    }
}
