//! The request resolved once: the endpoint its path names, its query as
//! Go's `url.ParseQuery` reads it, the resource it names (a core-group path
//! too) and its verb. The outermost layer makes it and keeps it in the
//! request's extensions; every later step (deadline, authentication,
//! authorization, metrics, the router, the endpoints' pipelines) reads it
//! from there, and none parses the path or the query again.

use crate::route::{ApiPath, Endpoint, ResourceRequest, Verb, parse, parse_legacy_resource};
use crate::wire::query::{ListOptions, Query};

/// A request, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub endpoint: Endpoint,
    pub query: Query,
    /// The resource a core-group path (`/api/v1/...`) names; a resource
    /// path under `/apis` is in the endpoint's [`ApiPath::Resource`].
    legacy: Option<ResourceRequest>,
    /// The verb of a request for a resource, as kube-apiserver's request
    /// info decides it; `None` for anything else, and for a method that
    /// names no verb (OPTIONS, PROPFIND…).
    pub verb: Option<Verb>,
}

impl Resolved {
    /// Resolves a request of `method` for `uri`.
    pub fn of(method: &http::Method, uri: &http::Uri) -> Self {
        let endpoint = parse(uri.path());
        let query = Query::parse(uri.query());
        let legacy = match endpoint.api_path() {
            Some(ApiPath::Legacy(segments)) => parse_legacy_resource(segments),
            _ => None,
        };
        let mut resolved = Self {
            endpoint,
            query,
            legacy,
            verb: None,
        };
        resolved.verb = resolved.resource().and_then(|resource| {
            Verb::of(method, resource, ListOptions::is_watch(&resolved.query))
        });
        resolved
    }

    /// The resource the path names, under `/apis` or `/api`.
    pub fn resource(&self) -> Option<&ResourceRequest> {
        match self.endpoint.api_path() {
            Some(ApiPath::Resource(resource)) => Some(resource),
            _ => self.legacy.as_ref(),
        }
    }
}

/// `request` resolved: by the first layer that asks, then kept in its
/// extensions for the others.
pub fn resolved_of<B>(request: &mut http::Request<B>) -> &Resolved {
    if request.extensions().get::<Resolved>().is_none() {
        let resolved = Resolved::of(request.method(), request.uri());
        request.extensions_mut().insert(resolved);
    }
    request
        .extensions()
        .get::<Resolved>()
        .expect("the resolved request was just kept")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(method: &str, uri: &str) -> Resolved {
        Resolved::of(&method.parse().unwrap(), &uri.parse().unwrap())
    }

    #[test]
    fn a_resources_verb_is_read_from_its_method_path_and_query() {
        let widgets = "/clusters/c1/apis/g/v1/namespaces/n/widgets";
        assert_eq!(resolved("GET", widgets).verb, Some(Verb::List));
        assert_eq!(
            resolved("GET", &format!("{widgets}?watch=1")).verb,
            Some(Verb::Watch)
        );
        assert_eq!(
            resolved("GET", &format!("{widgets}?watch=false")).verb,
            Some(Verb::List)
        );
        assert_eq!(
            resolved("GET", &format!("{widgets}/w?watch=1")).verb,
            Some(Verb::Get)
        );
        // kube-apiserver's rule: every value but 0 and false is a watch.
        for watch in [
            "watch=yes",
            "watch=2",
            "watch=TRUE",
            "watch=",
            "watch",
            "limit=5&watch=1",
        ] {
            let asked = resolved("GET", &format!("{widgets}?{watch}"));
            assert_eq!(asked.verb, Some(Verb::Watch), "{watch}");
        }
        for list in ["watch=false", "watch=0", "watch=False", "limit=5"] {
            let asked = resolved("GET", &format!("{widgets}?{list}"));
            assert_eq!(asked.verb, Some(Verb::List), "{list}");
        }
        assert_eq!(
            resolved("DELETE", widgets).verb,
            Some(Verb::DeleteCollection)
        );
        assert_eq!(resolved("OPTIONS", widgets).verb, None);
        assert_eq!(resolved("GET", "/clusters/c1/apis/g/v1").verb, None);
    }

    #[test]
    fn a_core_group_path_names_its_resource() {
        let secrets = resolved(
            "GET",
            "/services/export/e/clusters/*/api/v1/secrets?watch=true",
        );
        assert_eq!(
            secrets.resource().map(|r| r.resource.as_str()),
            Some("secrets")
        );
        assert_eq!(secrets.verb, Some(Verb::Watch));
        assert_eq!(secrets.query.first("watch"), Some("true"));
    }

    #[test]
    fn the_first_layer_keeps_what_it_resolved() {
        let mut request = http::Request::get("/clusters/c1/apis/g/v1/widgets?limit=5")
            .body(())
            .unwrap();
        assert_eq!(resolved_of(&mut request).verb, Some(Verb::List));
        // The path changed after: what was kept is what later steps read.
        *request.uri_mut() = "/healthz".parse().unwrap();
        assert_eq!(resolved_of(&mut request).query.first("limit"), Some("5"));
    }
}
