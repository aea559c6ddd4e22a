//! Authorization attributes of one resource request, as kube-apiserver's
//! authorization filter sees them: the user, and verb, group, version,
//! resource, subresource, namespace and name. From them: the
//! SubjectAccessReview that asks the app cluster, and the 403 kube-apiserver
//! answers with when it says no. Pure.

use crate::route::{ResourceRequest, Verb};
use crate::status::ApiError;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};

pub use crate::auth::RequestUser;

/// Everything an authorization decision is taken on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attributes {
    pub user: RequestUser,
    pub verb: Verb,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: Option<String>,
    /// In consumer terms: the app cluster decides on its own namespaces.
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl Attributes {
    /// The attributes of `request` with `verb` by `user`.
    pub fn of(user: RequestUser, verb: Verb, request: &ResourceRequest) -> Self {
        Self {
            user,
            verb,
            group: request.group.clone(),
            version: request.version.clone(),
            resource: request.resource.clone(),
            subresource: request.subresource.clone(),
            namespace: request.namespace.clone(),
            name: request.name.clone(),
        }
    }

    /// The SubjectAccessReview asking whether the user may do this.
    pub fn review(&self) -> SubjectAccessReview {
        let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        review_of(
            &self.user,
            ResourceAttributes {
                verb: Some(self.verb.as_str().to_string()),
                group: Some(self.group.clone()),
                version: Some(self.version.clone()),
                resource: Some(self.resource.clone()),
                subresource: non_empty(&self.subresource),
                namespace: non_empty(&self.namespace),
                name: non_empty(&self.name),
                ..Default::default()
            },
        )
    }

    /// kube-apiserver's 403 for these attributes, with the authorizer's
    /// `reason` appended when there is one.
    pub fn forbidden(&self, reason: &str) -> ApiError {
        let resource = match &self.subresource {
            Some(sub) if !sub.is_empty() => format!("{}/{sub}", self.resource),
            _ => self.resource.clone(),
        };
        let scope = match self.namespace.as_deref().filter(|ns| !ns.is_empty()) {
            Some(ns) => format!("in the namespace {}", quote(ns)),
            None => "at the cluster scope".to_string(),
        };
        let message = format!(
            "User {} cannot {} resource {} in API group {} {scope}",
            quote(&self.user.name),
            self.verb.as_str(),
            quote(&resource),
            quote(&self.group),
        );
        let message = with_reason(&message, reason);
        ApiError::forbidden(
            &self.group,
            &self.resource,
            self.name.as_deref().filter(|n| !n.is_empty()),
            &message,
        )
    }
}

/// The SubjectAccessReview asking whether `user` may act on the resource
/// `resource` names: the one place a review of a resource is written, for
/// an app cluster's users, a binder, and a consumer's provider account.
pub fn review_of(user: &RequestUser, resource: ResourceAttributes) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: user.uid.clone(),
            groups: Some(user.groups.clone()),
            extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
            resource_attributes: Some(resource),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// What an authorizer is asked about: a resource ([`Attributes`]) or a
/// path that names none ([`PathAttributes`]).
pub trait Access {
    /// The SubjectAccessReview asking whether the user may do this.
    fn review(&self) -> SubjectAccessReview;
    /// kube-apiserver's 403, with the authorizer's `reason` if it gave one.
    fn forbidden(&self, reason: &str) -> ApiError;
}

impl Access for Attributes {
    fn review(&self) -> SubjectAccessReview {
        Attributes::review(self)
    }
    fn forbidden(&self, reason: &str) -> ApiError {
        Attributes::forbidden(self, reason)
    }
}

/// A request for a path that names no resource (`/metrics`), as
/// kube-apiserver's authorization filter sees it: the user, the method as
/// a lower-case verb, and the path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathAttributes {
    pub user: RequestUser,
    pub verb: String,
    pub path: String,
}

impl PathAttributes {
    pub fn of(user: RequestUser, method: &http::Method, path: &str) -> Self {
        Self {
            user,
            verb: method.as_str().to_ascii_lowercase(),
            path: path.to_string(),
        }
    }
}

impl Access for PathAttributes {
    fn review(&self) -> SubjectAccessReview {
        let mut review = review_of(&self.user, ResourceAttributes::default());
        review.spec.resource_attributes = None;
        review.spec.non_resource_attributes = Some(NonResourceAttributes {
            verb: Some(self.verb.clone()),
            path: Some(self.path.clone()),
        });
        review
    }

    /// `User "alice" cannot get path "/metrics"`, as kube-apiserver words it.
    fn forbidden(&self, reason: &str) -> ApiError {
        let message = format!(
            "User {} cannot {} path {}",
            quote(&self.user.name),
            self.verb,
            quote(&self.path)
        );
        ApiError::forbidden_path(&with_reason(&message, reason))
    }
}

/// A denial's `message` as kube-apiserver writes it: `&`, `<` and `>`
/// escaped, then the authorizer's `reason` after a colon, if it gave one.
fn with_reason(message: &str, reason: &str) -> String {
    let message = message
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    if reason.is_empty() {
        message
    } else {
        format!("{message}: {reason}")
    }
}

/// Go's `%q` for the strings that reach it here (names, verbs, groups):
/// double quotes, with `"` and `\` escaped and control characters written
/// as Go writes them.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attributes(verb: Verb, namespace: Option<&str>, name: Option<&str>) -> Attributes {
        Attributes {
            user: RequestUser {
                name: "alice".into(),
                groups: vec!["system:authenticated".into()],
                ..Default::default()
            },
            verb,
            group: "db.example.com".into(),
            version: "v1".into(),
            resource: "postgresqlinstances".into(),
            subresource: None,
            namespace: namespace.map(str::to_string),
            name: name.map(str::to_string),
        }
    }

    #[test]
    fn a_namespaced_list_is_worded_like_kube_apiserver() {
        let error = attributes(Verb::List, Some("default"), None).forbidden("");
        assert_eq!(error.code, 403);
        assert_eq!(error.reason, "Forbidden");
        assert_eq!(
            error.message,
            "postgresqlinstances.db.example.com is forbidden: User \"alice\" cannot list \
             resource \"postgresqlinstances\" in API group \"db.example.com\" in the namespace \
             \"default\""
        );
        let status = error.to_status();
        assert_eq!(status["details"]["kind"], "postgresqlinstances");
        assert!(status["details"].get("name").is_none());
    }

    #[test]
    fn a_named_subresource_at_cluster_scope_with_a_reason() {
        let mut attrs = attributes(Verb::Patch, None, Some("orders"));
        attrs.subresource = Some("status".into());
        let error = attrs.forbidden("no RBAC policy matched");
        assert_eq!(
            error.message,
            "postgresqlinstances.db.example.com \"orders\" is forbidden: User \"alice\" cannot \
             patch resource \"postgresqlinstances/status\" in API group \"db.example.com\" at \
             the cluster scope: no RBAC policy matched"
        );
        assert_eq!(error.to_status()["details"]["name"], "orders");
    }

    #[test]
    fn user_names_are_quoted_and_escaped_as_go_does() {
        let mut attrs = attributes(Verb::Get, Some("default"), Some("x"));
        attrs.user.name = "eve \"<admin>\"\n".into();
        let message = attrs.forbidden("").message;
        assert!(
            message.contains(r#"User "eve \"&lt;admin&gt;\"\n" cannot get"#),
            "{message}"
        );
    }

    #[test]
    fn the_review_carries_every_attribute() {
        let mut attrs = attributes(Verb::Get, Some("default"), Some("orders"));
        attrs.subresource = Some("status".into());
        attrs.user.uid = Some("u-1".into());
        attrs
            .user
            .extra
            .insert("scopes".into(), vec!["a".into(), "b".into()]);
        let review = serde_json::to_value(attrs.review()).unwrap();
        assert_eq!(review["spec"]["user"], "alice");
        assert_eq!(review["spec"]["uid"], "u-1");
        assert_eq!(review["spec"]["groups"][0], "system:authenticated");
        assert_eq!(review["spec"]["extra"]["scopes"][1], "b");
        let resource = &review["spec"]["resourceAttributes"];
        assert_eq!(resource["verb"], "get");
        assert_eq!(resource["group"], "db.example.com");
        assert_eq!(resource["version"], "v1");
        assert_eq!(resource["resource"], "postgresqlinstances");
        assert_eq!(resource["subresource"], "status");
        assert_eq!(resource["namespace"], "default");
        assert_eq!(resource["name"], "orders");

        let listing = serde_json::to_value(attributes(Verb::List, None, None).review()).unwrap();
        let resource = &listing["spec"]["resourceAttributes"];
        assert!(resource.get("namespace").is_none() && resource.get("name").is_none());
    }

    /// `/metrics` is asked as kube-apiserver asks for a non-resource URL,
    /// and refused in its words.
    #[test]
    fn a_path_is_asked_and_refused_as_kube_apiserver_does() {
        let user = attributes(Verb::Get, None, None).user;
        let access = PathAttributes::of(user, &http::Method::GET, "/metrics");
        let review = serde_json::to_value(Access::review(&access)).unwrap();
        assert_eq!(
            review["spec"]["nonResourceAttributes"],
            serde_json::json!({"path": "/metrics", "verb": "get"})
        );
        assert!(review["spec"].get("resourceAttributes").is_none());
        let denied = Access::forbidden(&access, "");
        assert_eq!(denied.code, 403);
        assert_eq!(
            denied.message,
            r#"forbidden: User "alice" cannot get path "/metrics""#
        );
        assert_eq!(denied.details, Some(serde_json::json!({})));
        let denied = Access::forbidden(&access, "no RBAC policy matched");
        assert!(
            denied
                .message
                .ends_with(r#""/metrics": no RBAC policy matched"#)
        );
    }
}
