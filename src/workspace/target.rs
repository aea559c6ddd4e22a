//! What a workspace request is for, told once by the authorization layer
//! before its body is read: the export the path's key names, the consumers
//! it is for (one, or every consumer of the export for `*`), and what the
//! provider must allow the caller: the verb asked on the export's `content`
//! subresource (`kube-bind.io` `apiserviceexports/content`), in that
//! consumer's cluster namespace for one consumer, cluster-wide for all.
//! Pure over the catalog.

use crate::auth::RequestUser;
use crate::authz::attributes::Attributes;
use crate::catalog::Catalog;
use crate::resolved::Resolved;
use crate::route::{ConsumerId, ResourceRequest, Verb};

/// The group, version and resource whose `content` subresource the
/// workspace is authorized on.
const EXPORT_GROUP: &str = "kube-bind.io";
const EXPORT_VERSION: &str = "v1alpha2";
const EXPORT_RESOURCE: &str = "apiserviceexports";
const CONTENT: &str = "content";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The key in the path: an export's name or identity hash.
    pub key: String,
    /// The export's name, when some consumer the path names has it.
    pub export_name: Option<String>,
    /// The consumers the request is for; empty when none has the export.
    pub consumers: Vec<ConsumerId>,
    /// Where the provider is asked: the one consumer's cluster namespace,
    /// or `None` (cluster-wide) for every consumer.
    pub namespace: Option<String>,
}

impl Target {
    /// The target of `/services/export/<key>/clusters/<consumer or *>`.
    pub fn resolve(catalog: &Catalog, key: &str, consumer: Option<&ConsumerId>) -> Self {
        let all = catalog.consumers_of(key);
        let export_name = all.first().map(|(_, name)| name.clone());
        let consumers: Vec<ConsumerId> = all
            .into_iter()
            .map(|(c, _)| c)
            .filter(|c| consumer.is_none_or(|one| one == c))
            .collect();
        Self {
            key: key.to_string(),
            export_name: export_name.filter(|_| !consumers.is_empty()),
            consumers,
            namespace: consumer.map(|c| catalog.cluster_namespace(c)),
        }
    }

    /// What the provider must allow `user` for `method` on `path` with
    /// `query`; `None` for a method no resource serves (answered 405). The
    /// export is named by its name, or by the path's key when it is not
    /// found: a caller the provider would not let in then gets 403, and
    /// learns nothing about which exports exist.
    pub fn attributes(&self, user: RequestUser, resolved: &Resolved) -> Option<Attributes> {
        let verb = match resolved.resource() {
            Some(_) => resolved.verb?,
            None => Verb::Get,
        };
        let content = ResourceRequest {
            group: EXPORT_GROUP.into(),
            version: EXPORT_VERSION.into(),
            namespace: self.namespace.clone(),
            resource: EXPORT_RESOURCE.into(),
            name: Some(self.export_name.clone().unwrap_or_else(|| self.key.clone())),
            subresource: Some(CONTENT.into()),
            watch_prefix: false,
        };
        Some(Attributes::of(user, verb, &content))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::Endpoint;

    fn workspace(method: http::Method, uri: &str) -> Resolved {
        let resolved = Resolved::of(&method, &uri.parse().unwrap());
        assert!(matches!(resolved.endpoint, Endpoint::Workspace { .. }));
        resolved
    }

    fn target(export_name: Option<&str>, namespace: Option<&str>) -> Target {
        Target {
            key: "key".into(),
            export_name: export_name.map(str::to_string),
            consumers: Vec::new(),
            namespace: namespace.map(str::to_string),
        }
    }

    #[test]
    fn the_verb_asked_is_on_the_exports_content() {
        let patch = workspace(
            http::Method::PATCH,
            "/services/export/e/clusters/c1/apis/db.example.com/v1/namespaces/default/things/x",
        );
        let attributes = target(Some("pg"), Some("kube-bind-c1"))
            .attributes(RequestUser::default(), &patch)
            .unwrap();
        assert_eq!(attributes.verb, Verb::Patch);
        assert_eq!(
            (
                attributes.group.as_str(),
                attributes.resource.as_str(),
                attributes.subresource.as_deref()
            ),
            ("kube-bind.io", "apiserviceexports", Some("content"))
        );
        assert_eq!(attributes.name.as_deref(), Some("pg"));
        assert_eq!(attributes.namespace.as_deref(), Some("kube-bind-c1"));
    }

    #[test]
    fn every_consumer_is_asked_cluster_wide_and_a_missing_export_by_its_key() {
        let watch = workspace(
            http::Method::GET,
            "/services/export/e/clusters/*/apis/db.example.com/v1/things?watch=1",
        );
        let attributes = target(None, None)
            .attributes(RequestUser::default(), &watch)
            .unwrap();
        assert_eq!(attributes.verb, Verb::Watch);
        assert_eq!(attributes.namespace, None);
        assert_eq!(attributes.name.as_deref(), Some("key"));
    }

    #[test]
    fn discovery_is_a_get_and_unknown_methods_ask_nothing() {
        let discovery = workspace(http::Method::GET, "/services/export/e/clusters/*/apis");
        let attributes = target(Some("pg"), None)
            .attributes(RequestUser::default(), &discovery)
            .unwrap();
        assert_eq!(attributes.verb, Verb::Get);
        let options = workspace(
            http::Method::OPTIONS,
            "/services/export/e/clusters/*/apis/g/v1/things",
        );
        assert!(
            target(Some("pg"), None)
                .attributes(RequestUser::default(), &options)
                .is_none()
        );
    }
}
