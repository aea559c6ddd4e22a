//! The authorization layer: the one place that decides, per endpoint and
//! caller, which authority is asked, before anything reads the request's
//! body. All questions go to the one cached [`crate::authz::Authorizer`].
//!
//! - A consumer's endpoints: an app cluster's user (front proxy, app-cluster
//!   token) is asked of that app cluster, with the attributes kube-apiserver
//!   would check for a local CRD; a consumer certificate is the consumer
//!   itself (held by its export and the provider's RBAC). Discovery and
//!   OpenAPI are not asked: `system:discovery` allows them to everyone
//!   authenticated.
//! - The virtual workspace: the provider is asked for the verb on the
//!   export's `content` ([`Target`]), which is kept for the handler.
//! - `/metrics`: the provider is asked for `get` on the path, as
//!   kube-apiserver protects its own.
//! - `/bind`: any provider user may ask; each template is checked by the
//!   handler with the same Authorizer (offers are filtered by it, so it is
//!   no yes-or-no for the request).

use super::gate::{Check, GateLayer};
use crate::app::App;
use crate::auth::{ProviderUser, RequestUser, User};
use crate::authz::PROVIDER;
use crate::authz::attributes::{Attributes, PathAttributes};
use crate::proxy::error;
use crate::resolved::Resolved;
use crate::route::{ApiPath, ConsumerId, Endpoint};
use crate::status::ApiError;
use crate::upstream::BoxBody;
use crate::workspace::target::Target;
use futures::future::BoxFuture;
use http::{Request, Response};
use std::sync::Arc;

/// Who is asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Authority {
    /// The app cluster registered for this consumer.
    AppCluster(ConsumerId),
    Provider,
}

/// What a request needs allowed, and by whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    pub authority: Authority,
    pub attributes: Attributes,
}

/// The question `request` raises, if any. `target` is the workspace
/// request's resolved target. Pure.
pub fn question<B>(request: &Request<B>, target: Option<&Target>) -> Option<Question> {
    let resolved = request.extensions().get::<Resolved>()?;
    match &resolved.endpoint {
        Endpoint::Consumer { path, .. } | Endpoint::Aggregated { path } => {
            let user = request.extensions().get::<User>()?;
            if !user.via.is_app_cluster_user() {
                return None;
            }
            let ApiPath::Resource(resource) = path else {
                return None; // Discovery and OpenAPI.
            };
            // A method no resource serves is answered 405 by the proxy.
            let verb = resolved.verb?;
            Some(Question {
                authority: Authority::AppCluster(user.consumer.clone()),
                attributes: Attributes::of(user.identity(), verb, resource),
            })
        }
        Endpoint::Workspace { .. } => {
            let user = provider_user(request);
            let attributes = target?.attributes(user, resolved)?;
            Some(Question {
                authority: Authority::Provider,
                attributes,
            })
        }
        Endpoint::Bind(_) | Endpoint::Health | Endpoint::Metrics | Endpoint::Unknown => None,
    }
}

/// A resource path asked with a method that names no verb (OPTIONS,
/// PROPFIND, TRACE…): the 405 kube-apiserver's handler gives, made from the
/// path alone and before anything looks the resource up or asks who may
/// use it, so that the answer is the same whether the resource, export or
/// consumer exists or not. A custom resource's words name the path's
/// resource; a built-in kind's (the core group, claimed ConfigMaps and
/// Secrets) are go-restful's.
pub fn method_without_verb<B>(request: &Request<B>) -> Option<ApiError> {
    let resolved = request.extensions().get::<Resolved>()?;
    let resource = resolved.resource()?;
    if resolved.verb.is_some() {
        return None;
    }
    Some(if resource.group.is_empty() {
        ApiError::route_method_not_allowed()
    } else {
        ApiError::method_not_allowed("", &resource.group, &resource.resource)
    })
}

fn provider_user<B>(request: &Request<B>) -> RequestUser {
    request
        .extensions()
        .get::<ProviderUser>()
        .map(|u| u.0.clone())
        .unwrap_or_default()
}

/// Authorizes `request`, keeping a workspace request's [`Target`] in its
/// extensions; else kube-apiserver's 403 (or 500 when the authority cannot
/// be asked).
pub async fn authorize<B>(app: &App, request: &mut Request<B>) -> Result<(), ApiError> {
    let endpoint = request.extensions().get::<Resolved>().map(|r| &r.endpoint);
    if let Some(Endpoint::Metrics) = endpoint {
        // As kube-apiserver protects its own: `get` on the path, asked of
        // the provider, whose users read bindery's metrics.
        let Some(ProviderUser(user)) = request.extensions().get::<ProviderUser>() else {
            return Err(ApiError::unauthorized());
        };
        let access = PathAttributes::of(user.clone(), request.method(), request.uri().path());
        return app
            .authorizer
            .authorize(app.provider(), PROVIDER, &access)
            .await;
    }
    let target = match endpoint {
        Some(Endpoint::Workspace {
            export, consumer, ..
        }) => {
            if request.extensions().get::<ProviderUser>().is_none() {
                return Err(ApiError::unauthorized());
            }
            if let Some(refused) = method_without_verb(request) {
                return Err(refused);
            }
            Some(
                app.catalog
                    .read(|catalog| Target::resolve(catalog, export, consumer.as_ref())),
            )
        }
        _ => {
            if let Some(refused) = method_without_verb(request) {
                return Err(refused);
            }
            None
        }
    };
    if let Some(Question {
        authority,
        attributes,
    }) = question(request, target.as_ref())
    {
        match authority {
            Authority::AppCluster(consumer) => {
                let registration = app
                    .registrations
                    .get(consumer.as_str())
                    .ok_or_else(|| ApiError::internal("the app cluster's registration is gone"))?;
                app.authorizer
                    .authorize(&registration.app, consumer.as_str(), &attributes)
                    .await?
            }
            Authority::Provider => {
                app.authorizer
                    .authorize(app.provider(), PROVIDER, &attributes)
                    .await?
            }
        }
    }
    if let Some(target) = target {
        request.extensions_mut().insert(target);
    }
    Ok(())
}

/// Authorization against what the [`App`] holds: its registrations, its
/// catalog and its Authorizer.
#[derive(Clone)]
pub struct Authorization(pub Arc<App>);

/// The authorization layer.
pub type AuthzLayer = GateLayer<Authorization>;

impl Check for Authorization {
    fn check<'a, B: Send + 'a>(
        &'a self,
        request: &'a mut Request<B>,
    ) -> BoxFuture<'a, Result<(), Response<BoxBody>>> {
        Box::pin(async move {
            authorize(&self.0, request)
                .await
                .map_err(|denied| error(&denied))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Via;
    use crate::resolved::resolved_of;
    use crate::route::Verb;

    fn request_as(method: http::Method, path: &str, via: Option<Via>) -> Request<()> {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap();
        resolved_of(&mut request);
        if let Some(via) = via {
            let alice = RequestUser {
                name: "alice".into(),
                ..Default::default()
            };
            let c1 = ConsumerId::parse("c1").unwrap();
            request.extensions_mut().insert(User::new(alice, &c1, via));
        }
        request
    }

    #[test]
    fn a_method_without_a_verb_is_405_from_the_path_alone() {
        let refused = |method: &str, path: &str| {
            let method = http::Method::from_bytes(method.as_bytes()).unwrap();
            method_without_verb(&request_as(method, path, None))
        };
        let custom = ApiError::method_not_allowed("", "g", "things");
        for method in ["OPTIONS", "PROPFIND", "TRACE", "CONNECT", "FOO"] {
            for path in [
                "/clusters/c1/apis/g/v1/namespaces/team/things",
                "/clusters/no-such-consumer/apis/g/v1/things/x/junk",
                "/apis/g/v1/namespaces/team/things/x",
                "/services/export/made-up/clusters/*/apis/g/v1/things",
                "/services/export/e/clusters/c1/apis/g/v1/namespaces/n/things",
            ] {
                assert_eq!(
                    refused(method, path),
                    Some(custom.clone()),
                    "{method} {path}"
                );
            }
            assert_eq!(
                refused(method, "/services/export/e/clusters/*/api/v1/configmaps"),
                Some(ApiError::route_method_not_allowed())
            );
            // Discovery answers any method, as kube-apiserver's does.
            assert_eq!(refused(method, "/clusters/c1/apis/g/v1"), None);
            assert_eq!(refused(method, "/healthz"), None);
        }
        for method in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] {
            assert_eq!(refused(method, "/apis/g/v1/namespaces/team/things"), None);
        }
    }

    #[test]
    fn an_app_clusters_users_are_asked_of_their_app_cluster() {
        for via in [Via::FrontProxy, Via::AppClusterToken] {
            let request = request_as(
                http::Method::DELETE,
                "/clusters/c1/apis/g/v1/namespaces/team/things/x",
                Some(via),
            );
            let question = question(&request, None).expect("a question");
            assert_eq!(
                question.authority,
                Authority::AppCluster(ConsumerId::parse("c1").unwrap())
            );
            let a = &question.attributes;
            assert_eq!(
                (a.verb, a.namespace.as_deref(), a.name.as_deref()),
                (Verb::Delete, Some("team"), Some("x"))
            );
            assert_eq!(a.user.name, "alice");
        }
    }

    #[test]
    fn the_consumer_itself_and_discovery_are_not_asked() {
        let path = "/clusters/c1/apis/g/v1/things";
        let consumer = request_as(http::Method::GET, path, Some(Via::ConsumerCertificate));
        assert_eq!(question(&consumer, None), None);
        let discovery = request_as(http::Method::GET, "/apis/g/v1", Some(Via::FrontProxy));
        assert_eq!(question(&discovery, None), None);
        let bind = request_as(http::Method::POST, "/bind/bindings", None);
        assert_eq!(question(&bind, None), None);
    }

    #[test]
    fn workspace_callers_are_asked_of_the_provider_on_the_exports_content() {
        let mut request = request_as(
            http::Method::GET,
            "/services/export/pg/clusters/*/apis/g/v1/things",
            None,
        );
        request.extensions_mut().insert(ProviderUser(RequestUser {
            name: "controller".into(),
            ..Default::default()
        }));
        let target = Target {
            key: "pg".into(),
            export_name: Some("pg".into()),
            consumers: vec![ConsumerId::parse("c1").unwrap()],
            namespace: None,
        };
        let question = question(&request, Some(&target)).expect("a question");
        assert_eq!(question.authority, Authority::Provider);
        let a = &question.attributes;
        assert_eq!(
            (
                a.verb,
                a.resource.as_str(),
                a.subresource.as_deref(),
                a.user.name.as_str()
            ),
            (
                Verb::List,
                "apiserviceexports",
                Some("content"),
                "controller"
            )
        );
    }
}
