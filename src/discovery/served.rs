//! The served set, normalized once for every document: per CRD the names with
//! kube-apiserver's defaults applied and only the served versions, and the
//! groups with their versions in priority order.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion,
};

use super::version;

/// One CRD of the served set.
pub(crate) struct Crd<'a> {
    pub spec: &'a CustomResourceDefinitionSpec,
    pub group: &'a str,
    pub plural: &'a str,
    pub singular: String,
    pub kind: &'a str,
    pub list_kind: String,
    pub short_names: &'a [String],
    pub categories: &'a [String],
    pub namespaced: bool,
    /// Served versions, in the spec's order.
    pub versions: Vec<&'a CustomResourceDefinitionVersion>,
}

impl<'a> Crd<'a> {
    fn new(spec: &'a CustomResourceDefinitionSpec) -> Option<Self> {
        let versions: Vec<_> = spec.versions.iter().filter(|v| v.served).collect();
        if versions.is_empty() {
            return None;
        }
        let names = &spec.names;
        // kube-apiserver defaults these when the CRD is created.
        let singular = match names.singular.as_deref() {
            Some(s) if !s.is_empty() => s.to_string(),
            _ => names.kind.to_lowercase(),
        };
        let list_kind = match names.list_kind.as_deref() {
            Some(s) if !s.is_empty() => s.to_string(),
            _ => format!("{}List", names.kind),
        };
        Some(Crd {
            spec,
            group: &spec.group,
            plural: &names.plural,
            singular,
            kind: &names.kind,
            list_kind,
            short_names: names.short_names.as_deref().unwrap_or_default(),
            categories: names.categories.as_deref().unwrap_or_default(),
            namespaced: spec.scope == "Namespaced",
            versions,
        })
    }

    /// The served version called `name`.
    pub fn version(&self, name: &str) -> Option<&'a CustomResourceDefinitionVersion> {
        self.versions.iter().copied().find(|v| v.name == name)
    }

    /// The served storage version's name, if the storage version is served.
    pub fn storage_version(&self) -> Option<&'a str> {
        // kube-apiserver keeps the last served storage version it sees.
        self.versions
            .iter()
            .rev()
            .find(|v| v.storage)
            .map(|v| v.name.as_str())
    }
}

/// A group and its served versions, preferred first.
pub(crate) struct Group<'a> {
    pub name: &'a str,
    pub versions: Vec<&'a str>,
}

/// The normalized served set.
pub(crate) struct Served<'a> {
    /// Sorted by group, then plural (kube-apiserver lists a group-version's
    /// CRDs in its informer's arbitrary order; this order is stable).
    pub crds: Vec<Crd<'a>>,
    /// Sorted by name.
    pub groups: Vec<Group<'a>>,
}

impl<'a> Served<'a> {
    pub fn new(specs: &'a [CustomResourceDefinitionSpec]) -> Self {
        let mut crds: Vec<Crd<'a>> = specs.iter().filter_map(Crd::new).collect();
        crds.sort_by(|a, b| (a.group, a.plural).cmp(&(b.group, b.plural)));
        let mut by_group: BTreeMap<&'a str, Vec<&'a str>> = BTreeMap::new();
        for crd in &crds {
            let versions = by_group.entry(crd.group).or_default();
            for v in &crd.versions {
                if !versions.contains(&v.name.as_str()) {
                    versions.push(&v.name);
                }
            }
        }
        let groups = by_group
            .into_iter()
            .map(|(name, mut versions)| {
                version::sort_by_priority(&mut versions);
                Group { name, versions }
            })
            .collect();
        Served { crds, groups }
    }

    pub fn group(&self, name: &str) -> Option<&Group<'a>> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// The CRDs serving `group`/`version`, sorted by plural.
    pub fn crds_in(&self, group: &str, version: &str) -> Vec<&Crd<'a>> {
        self.crds
            .iter()
            .filter(|c| c.group == group && c.version(version).is_some())
            .collect()
    }
}
