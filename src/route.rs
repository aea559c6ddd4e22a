//! The path grammar of bindery's endpoints: which consumer a request is for,
//! and what it asks of it (discovery, OpenAPI, or a resource request with the
//! verb kube-apiserver would derive). Pure parsing, no I/O.

use crate::percent::encode_segment;
use std::fmt;

/// A consumer's id: the suffix of its cluster namespace on the provider
/// (kube-bind's `base36(sha224(identity))`). A DNS label, so it is safe in a
/// path, a namespace name and a label value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConsumerId(String);

impl ConsumerId {
    /// Accepts a non-empty RFC 1123 label of at most 63 characters.
    pub fn parse(raw: &str) -> Option<Self> {
        is_dns_label(raw).then(|| Self(raw.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ConsumerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// True for an RFC 1123 DNS label (lower-case alphanumerics and '-', at most 63).
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Which endpoint a request arrived on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `/clusters/<consumer>/...`
    Consumer { consumer: ConsumerId, path: ApiPath },
    /// `/api...`, `/apis...`, `/openapi...`, `/version` with no consumer in
    /// the path: an app cluster's aggregation layer, whose TLS server name
    /// says the consumer (see `crate::aggregation`).
    Aggregated { path: ApiPath },
    /// `/services/export/<export>/clusters/<consumer or *>/...`: the virtual
    /// workspace of an export for the provider's controllers
    /// (`crate::workspace`). `consumer` is `None` for `*`, every consumer.
    /// `root`: `/services/export/<export>/...` without `clusters/`, the
    /// export's own root (its kcp APIExportEndpointSlice, `crate::workspace::kcp`),
    /// authorized as a request for every consumer (`consumer` is `None`).
    Workspace {
        export: String,
        consumer: Option<ConsumerId>,
        path: ApiPath,
        root: bool,
    },
    /// `/healthz`, `/livez`, `/readyz` of bindery itself.
    Health,
    /// `/metrics`: bindery's own, for the provider's users allowed to get
    /// that path.
    Metrics,
    /// `/bind/...`: the binding API and page (`crate::bind`), with the
    /// segments after `bind` (routes in `crate::bind::routes`).
    Bind(Vec<String>),
    /// Anything else.
    Unknown,
}

/// What a path under an endpoint names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiPath {
    Version,
    Health,
    /// `/api`
    LegacyRoot,
    /// `/api/...` below the root: the core group. bindery serves only a
    /// consumer's own namespaces there (`/api/v1/namespaces/<name>`), which
    /// kubectl reads to word its not-found errors.
    Legacy(Vec<String>),
    /// `/apis`
    GroupList,
    /// `/apis/<group>`
    Group(String),
    /// `/apis/<group>/<version>`
    GroupVersion {
        group: String,
        version: String,
    },
    /// `/apis/<group>/<version>/...` naming a resource.
    Resource(ResourceRequest),
    OpenApiV2,
    OpenApiV3Root,
    OpenApiV3GroupVersion {
        group: String,
        version: String,
    },
    NotFound,
}

/// A request for a resource, as kube-apiserver's request-info parser sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceRequest {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// Set by the deprecated `/watch/` path prefix.
    pub watch_prefix: bool,
}

impl ResourceRequest {
    /// The request's path, each segment percent-encoded: `/apis/<g>/<v>`
    /// (`/api/<v>` for the core group), `/watch` if it came with that
    /// prefix, `/namespaces/<ns>`, the resource, its name and subresource.
    pub fn path(&self) -> String {
        let mut path = self.group_version_path();
        if self.watch_prefix {
            path.push_str("/watch");
        }
        if let Some(namespace) = &self.namespace {
            path.push_str("/namespaces/");
            path.push_str(&encode_segment(namespace));
        }
        for segment in [
            Some(&self.resource),
            self.name.as_ref(),
            self.subresource.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            path.push('/');
            path.push_str(&encode_segment(segment));
        }
        path
    }

    /// `/apis/<g>/<v>`, or `/api/<v>` for the core group: the group
    /// version's discovery path, which every path of it begins with.
    pub fn group_version_path(&self) -> String {
        match self.group.as_str() {
            "" => format!("/api/{}", encode_segment(&self.version)),
            group => format!(
                "/apis/{}/{}",
                encode_segment(group),
                encode_segment(&self.version)
            ),
        }
    }

    /// The request's resource across namespaces: no namespace, name,
    /// subresource or `/watch/` prefix.
    pub fn across_namespaces(&self) -> ResourceRequest {
        ResourceRequest {
            group: self.group.clone(),
            version: self.version.clone(),
            namespace: None,
            resource: self.resource.clone(),
            name: None,
            subresource: None,
            watch_prefix: false,
        }
    }

    /// The collection across namespaces the request's resource is
    /// (`/apis/<g>/<v>/<resource>`), as the watch cache keeps one per
    /// resource.
    pub fn collection(&self) -> String {
        format!(
            "{}/{}",
            self.group_version_path(),
            encode_segment(&self.resource)
        )
    }
}

pub use crate::wire::verb::Verb;

/// How a request's verb is worked out from its method, path and query.
impl Verb {
    /// The verb for `method` on `request`; `watch` says whether the query
    /// asks for a watch. `None` for a method the API does not serve.
    pub fn of(method: &http::Method, request: &ResourceRequest, watch: bool) -> Option<Verb> {
        let named = request.name.is_some();
        // The `/watch/` path prefix makes any request a watch, as
        // kube-apiserver's request info decides; `?watch` turns a list into
        // a watch, and on a named object is a get.
        if request.watch_prefix {
            return matches!(
                *method,
                http::Method::GET
                    | http::Method::HEAD
                    | http::Method::POST
                    | http::Method::PUT
                    | http::Method::PATCH
                    | http::Method::DELETE
            )
            .then_some(Verb::Watch);
        }
        let watch = !named && watch;
        Some(match *method {
            http::Method::GET | http::Method::HEAD if watch => Verb::Watch,
            http::Method::GET | http::Method::HEAD if named => Verb::Get,
            http::Method::GET | http::Method::HEAD => Verb::List,
            http::Method::POST => Verb::Create,
            http::Method::PUT => Verb::Update,
            http::Method::PATCH => Verb::Patch,
            http::Method::DELETE if named => Verb::Delete,
            http::Method::DELETE => Verb::DeleteCollection,
            _ => return None,
        })
    }
}

impl Endpoint {
    /// The API path under a consumer, aggregated or workspace endpoint.
    pub fn api_path(&self) -> Option<&ApiPath> {
        match self {
            Endpoint::Consumer { path, .. }
            | Endpoint::Aggregated { path }
            | Endpoint::Workspace { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// Parses a request path (without the query).
pub fn parse(path: &str) -> Endpoint {
    let Some(owned) = split(path) else {
        return Endpoint::Unknown;
    };
    let segments: Vec<&str> = owned.iter().map(String::as_str).collect();
    match segments.as_slice() {
        ["healthz" | "livez" | "readyz", ..] => Endpoint::Health,
        ["metrics"] => Endpoint::Metrics,
        ["bind", rest @ ..] => Endpoint::Bind(rest.iter().map(|s| s.to_string()).collect()),
        ["clusters", consumer, rest @ ..] => match ConsumerId::parse(consumer) {
            Some(consumer) => Endpoint::Consumer {
                consumer,
                path: parse_api(rest),
            },
            None => Endpoint::Unknown,
        },
        [
            "services",
            "export",
            export,
            "clusters",
            consumer,
            rest @ ..,
        ] if is_export_key(export) => {
            let consumer = match *consumer {
                "*" => None,
                id => match ConsumerId::parse(id) {
                    Some(id) => Some(id),
                    None => return Endpoint::Unknown,
                },
            };
            Endpoint::Workspace {
                export: export.to_string(),
                consumer,
                path: parse_api(rest),
                root: false,
            }
        }
        ["services", "export", export, rest @ ..]
            if is_export_key(export) && rest.first() != Some(&"clusters") =>
        {
            Endpoint::Workspace {
                export: export.to_string(),
                consumer: None,
                path: parse_api(rest),
                root: true,
            }
        }
        ["api" | "apis" | "openapi" | "version", ..] => Endpoint::Aggregated {
            path: parse_api(&segments),
        },
        _ => Endpoint::Unknown,
    }
}

/// An export's name (a DNS subdomain, as object names are) or its identity
/// hash (64 lower-case hex digits, which is also such a name).
fn is_export_key(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// Splits a path into its percent-decoded segments; `None` for a relative
/// path, bad percent-encoding, `.`/`..` segments, or an empty segment
/// inside it (`//`): kube-apiserver trims the path's slashes at both ends
/// and splits the rest, so an inner empty segment names nothing it serves.
fn split(path: &str) -> Option<Vec<String>> {
    let rest = path.strip_prefix('/')?.trim_matches('/');
    if rest.is_empty() {
        return Some(Vec::new());
    }
    let segments = rest
        .split('/')
        .map(|s| {
            if s.is_empty() {
                None
            } else {
                crate::percent::decode(s)
            }
        })
        .collect::<Option<Vec<String>>>()?;
    if segments
        .iter()
        .any(|s| s == "." || s == ".." || s.contains('/'))
    {
        return None;
    }
    Some(segments)
}

/// Parses what follows an endpoint prefix.
pub fn parse_api(segments: &[&str]) -> ApiPath {
    match segments {
        ["version"] => ApiPath::Version,
        ["healthz" | "livez" | "readyz", ..] => ApiPath::Health,
        ["api"] => ApiPath::LegacyRoot,
        ["api", rest @ ..] => ApiPath::Legacy(rest.iter().map(|s| s.to_string()).collect()),
        ["apis"] => ApiPath::GroupList,
        ["apis", group] => ApiPath::Group(group.to_string()),
        ["apis", group, version] => ApiPath::GroupVersion {
            group: group.to_string(),
            version: version.to_string(),
        },
        ["apis", group, version, rest @ ..] => match parse_resource(group, version, rest) {
            Some(request) => ApiPath::Resource(request),
            None => ApiPath::NotFound,
        },
        ["openapi", "v2"] => ApiPath::OpenApiV2,
        ["openapi", "v3"] => ApiPath::OpenApiV3Root,
        ["openapi", "v3", "apis", group, version] => ApiPath::OpenApiV3GroupVersion {
            group: group.to_string(),
            version: version.to_string(),
        },
        ["openapi", "v3", "api", version] => ApiPath::OpenApiV3GroupVersion {
            group: String::new(),
            version: version.to_string(),
        },
        _ => ApiPath::NotFound,
    }
}

/// A core-group resource request from the segments after `/api`
/// (`v1/namespaces/<ns>/configmaps/<name>`); `None` for anything else.
pub fn parse_legacy_resource(segments: &[String]) -> Option<ResourceRequest> {
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    match segments.as_slice() {
        [version, rest @ ..] if !rest.is_empty() => parse_resource("", version, rest),
        _ => None,
    }
}

/// kube-apiserver's RequestInfo rules for the part after `/apis/<g>/<v>/`.
fn parse_resource(group: &str, version: &str, mut rest: &[&str]) -> Option<ResourceRequest> {
    let mut watch_prefix = false;
    if let ["watch", tail @ ..] = rest {
        watch_prefix = true;
        rest = tail;
    }
    let mut namespace = None;
    if let ["namespaces", ns, tail @ ..] = rest {
        namespace = Some(ns.to_string());
        if tail.is_empty() {
            // `/namespaces/<ns>` names the namespace object itself.
            return Some(ResourceRequest {
                group: group.into(),
                version: version.into(),
                namespace: None,
                resource: "namespaces".into(),
                name: Some(ns.to_string()),
                subresource: None,
                watch_prefix,
            });
        }
        rest = tail;
    }
    let (resource, name, subresource) = match rest {
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some(*name), None),
        [resource, name, subresource] => (*resource, Some(*name), Some(*subresource)),
        _ => return None,
    };
    Some(ResourceRequest {
        group: group.into(),
        version: version.into(),
        namespace,
        resource: resource.into(),
        name: name.map(Into::into),
        subresource: subresource.map(Into::into),
        watch_prefix,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn consumer_path(path: &str) -> ApiPath {
        match parse(path) {
            Endpoint::Consumer { consumer, path } => {
                assert_eq!(consumer.as_str(), "c1");
                path
            }
            other => panic!("{path}: {other:?}"),
        }
    }

    fn resource(path: &str) -> ResourceRequest {
        match consumer_path(path) {
            ApiPath::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn discovery_paths() {
        assert_eq!(consumer_path("/clusters/c1/api"), ApiPath::LegacyRoot);
        assert_eq!(
            consumer_path("/clusters/c1/api/v1/pods"),
            ApiPath::Legacy(vec!["v1".into(), "pods".into()])
        );
        assert_eq!(consumer_path("/clusters/c1/apis"), ApiPath::GroupList);
        assert_eq!(consumer_path("/clusters/c1/apis/"), ApiPath::GroupList);
        assert_eq!(
            consumer_path("/clusters/c1/apis/g.io"),
            ApiPath::Group("g.io".into())
        );
        assert_eq!(
            consumer_path("/clusters/c1/apis/g.io/v1"),
            ApiPath::GroupVersion {
                group: "g.io".into(),
                version: "v1".into()
            }
        );
        assert_eq!(consumer_path("/clusters/c1/openapi/v2"), ApiPath::OpenApiV2);
        assert_eq!(
            consumer_path("/clusters/c1/openapi/v3"),
            ApiPath::OpenApiV3Root
        );
        assert_eq!(
            consumer_path("/clusters/c1/openapi/v3/apis/g.io/v1"),
            ApiPath::OpenApiV3GroupVersion {
                group: "g.io".into(),
                version: "v1".into()
            }
        );
        assert_eq!(consumer_path("/clusters/c1/version"), ApiPath::Version);
        assert_eq!(consumer_path("/clusters/c1/nope"), ApiPath::NotFound);
    }

    #[test]
    fn resource_paths() {
        let r = resource("/clusters/c1/apis/g.io/v1/namespaces/ns/widgets/w/status");
        assert_eq!(r.namespace.as_deref(), Some("ns"));
        assert_eq!(r.resource, "widgets");
        assert_eq!(r.name.as_deref(), Some("w"));
        assert_eq!(r.subresource.as_deref(), Some("status"));

        let r = resource("/clusters/c1/apis/g.io/v1/widgets");
        assert_eq!((r.namespace, r.name), (None, None));

        let r = resource("/clusters/c1/apis/g.io/v1/watch/namespaces/ns/widgets");
        assert!(r.watch_prefix);
        assert_eq!(r.namespace.as_deref(), Some("ns"));

        let r = resource("/clusters/c1/apis/g.io/v1/namespaces/ns");
        assert_eq!(r.resource, "namespaces");
        assert_eq!(r.name.as_deref(), Some("ns"));

        assert_eq!(
            consumer_path("/clusters/c1/apis/g.io/v1/namespaces/ns/widgets/w/status/x"),
            ApiPath::NotFound
        );
    }

    #[test]
    fn a_resource_requests_path_is_made_back_from_its_parts() {
        for path in [
            "/clusters/c1/apis/g.io/v1/namespaces/ns/widgets/w/status",
            "/clusters/c1/apis/g.io/v1/watch/namespaces/ns/widgets",
            "/clusters/c1/apis/g.io/v1/widgets/a%20b%23c",
        ] {
            let made = resource(path).path();
            assert_eq!(
                Some(made.as_str()),
                path.strip_prefix("/clusters/c1"),
                "{path}"
            );
        }
        let secrets = ResourceRequest {
            group: String::new(),
            version: "v1".into(),
            namespace: Some("team".into()),
            resource: "secrets".into(),
            name: Some("s".into()),
            subresource: None,
            watch_prefix: false,
        };
        assert_eq!(secrets.path(), "/api/v1/namespaces/team/secrets/s");
        assert_eq!(secrets.collection(), "/api/v1/secrets");
        let status = resource("/clusters/c1/apis/g.io/v1/watch/namespaces/ns/widgets/w/status");
        assert_eq!(status.collection(), "/apis/g.io/v1/widgets");
    }

    #[test]
    fn verbs() {
        let named = resource("/clusters/c1/apis/g.io/v1/namespaces/ns/widgets/w");
        let collection = resource("/clusters/c1/apis/g.io/v1/namespaces/ns/widgets");
        let get = http::Method::GET;
        assert_eq!(Verb::of(&get, &named, false), Some(Verb::Get));
        assert_eq!(Verb::of(&get, &collection, false), Some(Verb::List));
        assert_eq!(Verb::of(&get, &collection, true), Some(Verb::Watch));
        assert_eq!(Verb::of(&get, &named, true), Some(Verb::Get));
        assert_eq!(
            Verb::of(&http::Method::DELETE, &collection, false),
            Some(Verb::DeleteCollection)
        );
        assert_eq!(
            Verb::of(&http::Method::DELETE, &named, false),
            Some(Verb::Delete)
        );
        assert_eq!(Verb::of(&http::Method::OPTIONS, &named, false), None);
    }

    #[test]
    fn paths_without_a_consumer_are_the_aggregation_layers() {
        assert_eq!(
            parse("/apis/db.example.com/v1"),
            Endpoint::Aggregated {
                path: ApiPath::GroupVersion {
                    group: "db.example.com".into(),
                    version: "v1".into()
                }
            }
        );
        assert_eq!(
            parse("/version"),
            Endpoint::Aggregated {
                path: ApiPath::Version
            }
        );
        assert!(matches!(
            parse("/apis/db.example.com/v1/namespaces/a/things/b"),
            Endpoint::Aggregated {
                path: ApiPath::Resource(_)
            }
        ));
        assert_eq!(parse("/"), Endpoint::Unknown);
        assert_eq!(parse("/bind"), Endpoint::Bind(vec![]));
        assert_eq!(
            parse("/bind/sessions/abc"),
            Endpoint::Bind(vec!["sessions".into(), "abc".into()])
        );
        assert_eq!(parse("/bind/../clusters/c1/apis"), Endpoint::Unknown);
        assert_eq!(parse("/apis/%2e%2e"), Endpoint::Unknown);
    }

    #[test]
    fn rejects_bad_consumers_and_dot_segments() {
        assert_eq!(parse("/clusters/C1/apis"), Endpoint::Unknown);
        assert_eq!(parse("/clusters/-a/apis"), Endpoint::Unknown);
        assert_eq!(parse("/clusters/c1/../c2/apis"), Endpoint::Unknown);
        assert_eq!(parse("clusters/c1/apis"), Endpoint::Unknown);
        assert_eq!(parse("/readyz"), Endpoint::Health);
        assert_eq!(parse("/metrics"), Endpoint::Metrics);
        assert_eq!(parse("/metrics/x"), Endpoint::Unknown);
        assert_eq!(parse("/clusters/c1/apis/%2e%2e"), Endpoint::Unknown);
        assert_eq!(parse("/clusters/c1/apis/a%2Fb"), Endpoint::Unknown);
        assert_eq!(parse("/clusters/c1/apis/%zz"), Endpoint::Unknown);
    }

    #[test]
    fn segments_are_percent_decoded() {
        let r = resource("/clusters/c1/apis/g.io/v1/namespaces/%64efault/widgets");
        assert_eq!(r.namespace.as_deref(), Some("default"));
    }

    #[test]
    fn workspace_paths_name_the_export_and_one_or_every_consumer() {
        match parse("/services/export/postgresql/clusters/*/apis/db.example.com/v1/things") {
            Endpoint::Workspace {
                export,
                consumer: None,
                path: ApiPath::Resource(r),
                root: false,
            } => {
                assert_eq!(export, "postgresql");
                assert_eq!(
                    (r.group.as_str(), r.resource.as_str()),
                    ("db.example.com", "things")
                );
            }
            other => panic!("{other:?}"),
        }
        match parse("/services/export/postgresql/clusters/c1/apis") {
            Endpoint::Workspace {
                consumer: Some(c),
                path: ApiPath::GroupList,
                ..
            } => assert_eq!(c.as_str(), "c1"),
            other => panic!("{other:?}"),
        }
        for unknown in [
            "/services/export/Postgres/clusters/*/apis",
            "/services/export/postgresql/clusters/C1/apis",
            "/services/export/postgresql/clusters/**/apis",
            "/services/other/postgresql/clusters/*/apis",
            "/services/export/a..b/clusters/*/apis",
        ] {
            assert_eq!(parse(unknown), Endpoint::Unknown, "{unknown}");
        }
        // The export's own root, where its kcp endpoint slice is served.
        assert_eq!(
            parse("/services/export/postgresql/apis"),
            Endpoint::Workspace {
                export: "postgresql".into(),
                consumer: None,
                path: ApiPath::GroupList,
                root: true,
            }
        );
    }

    #[test]
    fn core_group_resources_parse_after_api() {
        let segments = |p: &str| p.split('/').map(str::to_string).collect::<Vec<_>>();
        let r = parse_legacy_resource(&segments("v1/namespaces/team/configmaps/c")).unwrap();
        assert_eq!(
            (
                r.group.as_str(),
                r.version.as_str(),
                r.namespace.as_deref(),
                r.resource.as_str(),
                r.name.as_deref()
            ),
            ("", "v1", Some("team"), "configmaps", Some("c"))
        );
        assert_eq!(parse_legacy_resource(&segments("v1")), None);
        assert!(parse_legacy_resource(&segments("v1/secrets")).is_some());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(path in "(/[a-z0-9.%-]{0,8}){0,10}/?") {
            let _ = parse(&path);
        }

        #[test]
        fn consumer_is_always_a_dns_label(path in "/clusters/[ -~]{0,20}/apis") {
            if let Endpoint::Consumer { consumer, .. } = parse(&path) {
                proptest::prop_assert!(is_dns_label(consumer.as_str()));
            }
        }
    }
}
