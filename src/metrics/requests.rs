//! Metrics of the requests bindery serves, with kube-apiserver's names and
//! labels (`apiserver_request_total`, `apiserver_request_duration_seconds`,
//! `apiserver_response_sizes`, `apiserver_current_inflight_requests`,
//! `apiserver_longrunning_requests`) plus `endpoint`, the kind of endpoint a
//! request came in on, and bindery's per-phase time. The labels of a request
//! are derived here from its endpoint alone (pure); a resource is named in
//! them only once the handler said it serves it ([`Served`]), so caller
//! input never becomes a label value.

use crate::resolved::Resolved;
use crate::route::{ApiPath, Endpoint, ResourceRequest, Verb};
use crate::wire::query::Query;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// kube-apiserver's buckets for `apiserver_request_duration_seconds`.
const DURATION_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// Buckets of one phase of a request: finer, since most take milliseconds.
const PHASE_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The labels kube-apiserver puts on a request's metrics, and `endpoint`.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub verb: &'static str,
    pub dry_run: &'static str,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub scope: &'static str,
    pub component: &'static str,
    /// `consumer`, `aggregated`, `workspace`, `bind`, `health`, `metrics`
    /// or `unknown`.
    pub endpoint: &'static str,
}

/// [`RequestLabels`] and the response's status code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodedLabels {
    #[prometheus(flatten)]
    pub request: RequestLabels,
    pub code: String,
}

/// `request_kind` of `apiserver_current_inflight_requests`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub request_kind: &'static str,
}

/// One phase of a request's time, by endpoint kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub phase: &'static str,
    pub endpoint: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

pub struct RequestMetrics {
    pub total: Family<CodedLabels, Counter>,
    pub duration: HistogramFamily<RequestLabels>,
    pub response_sizes: HistogramFamily<RequestLabels>,
    pub in_flight: Family<KindLabels, Gauge>,
    pub long_running: Family<RequestLabels, Gauge>,
    pub phases: HistogramFamily<PhaseLabels>,
}

impl RequestMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let total = Family::<CodedLabels, Counter>::default();
        registry.register(
            "apiserver_request",
            "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, endpoint kind and HTTP response code.",
            total.clone(),
        );
        let duration: HistogramFamily<RequestLabels> =
            Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS));
        registry.register(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope, component and endpoint kind (watches: until they end).",
            duration.clone(),
        );
        let response_sizes: HistogramFamily<RequestLabels> = Family::new_with_constructor(|| {
            Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                1000.0, 10.0, 7,
            ))
        });
        registry.register(
            "apiserver_response_sizes",
            "Response size distribution in bytes for each group, version, verb, resource, subresource, scope, component and endpoint kind (gets and lists).",
            response_sizes.clone(),
        );
        let in_flight = Family::<KindLabels, Gauge>::default();
        registry.register(
            "apiserver_current_inflight_requests",
            "Requests being served, long-running ones (watches) apart, by kind (readOnly or mutating).",
            in_flight.clone(),
        );
        let long_running = Family::<RequestLabels, Gauge>::default();
        registry.register(
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests (watches) broken out by verb, group, version, resource, scope, component and endpoint kind.",
            long_running.clone(),
        );
        let phases: HistogramFamily<PhaseLabels> =
            Family::new_with_constructor(|| Histogram::new(PHASE_BUCKETS));
        registry.register(
            "bindery_request_phase_duration_seconds",
            "Where requests' time goes, by phase (authentication, authorization, provider, translation: the rest) and endpoint kind; long-running requests apart.",
            phases.clone(),
        );
        Self {
            total,
            duration,
            response_sizes,
            in_flight,
            long_running,
            phases,
        }
    }
}

/// A response extension: the handler serves this resource (a resource bound
/// for the caller, or the workspace's), so the request's metrics may name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served;

/// What a request is, for its metrics and its log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestKind {
    /// Its labels, with the resource named (see [`RequestKind::labels`]).
    labels: RequestLabels,
    /// A watch: long-running, not counted in flight.
    pub long_running: bool,
    /// Creates, updates, patches and deletes: `mutating` in flight.
    pub mutating: bool,
    /// A get or a list: its response size is observed.
    pub read: bool,
}

impl RequestKind {
    /// The kind of a `resolved` request with `method`, whose body is of
    /// `content_type`.
    pub fn of(resolved: &Resolved, method: &http::Method, content_type: Option<&str>) -> Self {
        let (endpoint, query) = (&resolved.endpoint, &resolved.query);
        let (kind, path) = match endpoint {
            Endpoint::Consumer { path, .. } => ("consumer", Some(path)),
            Endpoint::Aggregated { path } => ("aggregated", Some(path)),
            Endpoint::Workspace { path, .. } => ("workspace", Some(path)),
            Endpoint::Health => ("health", None),
            Endpoint::Metrics => ("metrics", None),
            Endpoint::Bind(_) => ("bind", None),
            Endpoint::Unknown => ("unknown", None),
        };
        let mut labels = RequestLabels {
            verb: non_resource_verb(method),
            component: "apiserver",
            endpoint: kind,
            ..Default::default()
        };
        let mut this = Self {
            labels: RequestLabels::default(),
            long_running: false,
            mutating: !matches!(*method, http::Method::GET | http::Method::HEAD),
            read: false,
        };
        match path {
            Some(ApiPath::Resource(request)) => {
                let verb = resolved.verb;
                labels.verb = resource_verb(verb, content_type);
                labels.dry_run = dry_run(query);
                labels.scope = scope(request);
                labels.group = request.group.clone();
                labels.version = request.version.clone();
                labels.resource = request.resource.clone();
                labels.subresource = subresource_label(request.subresource.as_deref()).into();
                this.long_running = verb == Some(Verb::Watch);
                this.read = matches!(verb, Some(Verb::Get | Verb::List));
            }
            Some(path) => labels.subresource = non_resource_path(path).to_string(),
            None => {
                labels.subresource = match endpoint {
                    Endpoint::Health => "/healthz",
                    Endpoint::Metrics => "/metrics",
                    Endpoint::Bind(_) => "/bind",
                    _ => "",
                }
                .to_string()
            }
        }
        this.labels = labels;
        this
    }

    /// The labels of this request; the resource named only when `served`.
    pub fn labels(&self, served: bool) -> RequestLabels {
        let mut labels = self.labels.clone();
        if !served {
            labels.group.clear();
            labels.version.clear();
            labels.resource.clear();
            if !labels.scope.is_empty() {
                labels.subresource.clear();
            }
        }
        labels
    }

    /// The endpoint kind.
    pub fn endpoint(&self) -> &'static str {
        self.labels.endpoint
    }

    /// The reported verb.
    pub fn verb(&self) -> &'static str {
        self.labels.verb
    }

    /// `<resource>[/<subresource>].<group>` as asked (for logs, not labels).
    pub fn resource(&self) -> String {
        let l = &self.labels;
        let mut resource = l.resource.clone();
        if l.scope.is_empty() {
            return l.subresource.clone();
        }
        if !l.subresource.is_empty() {
            resource = format!("{resource}/{}", l.subresource);
        }
        if !l.group.is_empty() {
            resource = format!("{resource}.{}", l.group);
        }
        resource
    }
}

/// The `subresource` label of a resource request: the subresources a
/// custom resource has (kube-apiserver counts no other: its handler answers
/// 404 before it measures), anything else one fixed value, so that a caller
/// cannot mint series with made-up names.
fn subresource_label(subresource: Option<&str>) -> &'static str {
    match subresource {
        None => "",
        Some("status") => "status",
        Some("scale") => "scale",
        Some(_) => "other",
    }
}

/// kube-apiserver's reported verb for a resource request.
fn resource_verb(verb: Option<Verb>, content_type: Option<&str>) -> &'static str {
    match verb {
        Some(Verb::Get) => "GET",
        Some(Verb::List) => "LIST",
        Some(Verb::Watch) => "WATCH",
        Some(Verb::Create) => "POST",
        Some(Verb::Update) => "PUT",
        Some(Verb::Patch) if content_type == Some("application/apply-patch+yaml") => "APPLY",
        Some(Verb::Patch) => "PATCH",
        Some(Verb::Delete) => "DELETE",
        Some(Verb::DeleteCollection) => "DELETECOLLECTION",
        None => "other",
    }
}

/// The verb of a request for no resource: its method, when it is one
/// kube-apiserver reports.
fn non_resource_verb(method: &http::Method) -> &'static str {
    match *method {
        http::Method::GET => "GET",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::PATCH => "PATCH",
        http::Method::DELETE => "DELETE",
        _ => "other",
    }
}

/// kube-apiserver's `scope`: one object, a namespace, or the cluster.
fn scope(request: &ResourceRequest) -> &'static str {
    if request.name.is_some() {
        "resource"
    } else if request.namespace.is_some() {
        "namespace"
    } else {
        "cluster"
    }
}

/// kube-apiserver's `dry_run`: empty without `dryRun`, `All` when every
/// value is `All` (the only valid one), else `invalid`.
fn dry_run(query: &Query) -> &'static str {
    match query.all("dryRun").as_slice() {
        [] => "",
        values if values.iter().all(|v| v == "All") => "All",
        _ => "invalid",
    }
}

/// A fixed name for a path that names no resource: never the caller's text.
fn non_resource_path(path: &ApiPath) -> &'static str {
    match path {
        ApiPath::Version => "/version",
        ApiPath::Health => "/healthz",
        ApiPath::LegacyRoot | ApiPath::Legacy(_) => "/api",
        ApiPath::GroupList | ApiPath::Group(_) | ApiPath::GroupVersion { .. } => "/apis",
        ApiPath::OpenApiV2 => "/openapi/v2",
        ApiPath::OpenApiV3Root | ApiPath::OpenApiV3GroupVersion { .. } => "/openapi/v3",
        ApiPath::Resource(_) | ApiPath::NotFound => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_subresources_and_methods_share_one_set_of_labels() {
        let labels: std::collections::HashSet<RequestLabels> = (0..10_000)
            .flat_map(|i| {
                let path = format!("/apis/g/v1/namespaces/a/things/x/made-up-{i}");
                let method = http::Method::from_bytes(format!("M{i}").as_bytes()).unwrap();
                [
                    kind("GET", &path, None).labels(true),
                    RequestKind::of(
                        &Resolved::of(&method, &"/apis/g/v1/things".parse().unwrap()),
                        &method,
                        None,
                    )
                    .labels(true),
                ]
            })
            .collect();
        assert_eq!(labels.len(), 2, "{labels:#?}");
        assert!(
            labels
                .iter()
                .any(|l| l.subresource == "other" && l.verb == "GET")
        );
        assert!(
            labels
                .iter()
                .any(|l| l.subresource.is_empty() && l.verb == "other")
        );
    }

    fn kind(method: &str, uri: &str, content_type: Option<&str>) -> RequestKind {
        let uri: http::Uri = uri.parse().unwrap();
        let method = http::Method::from_bytes(method.as_bytes()).unwrap();
        RequestKind::of(&Resolved::of(&method, &uri), &method, content_type)
    }

    #[test]
    fn resource_requests_carry_kube_apiservers_labels() {
        let k = kind("GET", "/apis/db.example.com/v1/namespaces/a/things/x", None);
        let labels = k.labels(true);
        assert_eq!(
            (labels.verb, labels.scope, labels.endpoint, labels.component),
            ("GET", "resource", "aggregated", "apiserver")
        );
        assert_eq!(
            (
                labels.group.as_str(),
                labels.version.as_str(),
                labels.resource.as_str()
            ),
            ("db.example.com", "v1", "things")
        );
        assert!(k.read && !k.long_running && !k.mutating);
        for (method, uri, content_type, verb, scope) in [
            ("GET", "/apis/g/v1/things", None, "LIST", "cluster"),
            (
                "GET",
                "/apis/g/v1/namespaces/a/things?watch=yes",
                None,
                "WATCH",
                "namespace",
            ),
            ("GET", "/apis/g/v1/things?watch=0", None, "LIST", "cluster"),
            (
                "POST",
                "/apis/g/v1/namespaces/a/things",
                None,
                "POST",
                "namespace",
            ),
            (
                "PUT",
                "/apis/g/v1/namespaces/a/things/x",
                None,
                "PUT",
                "resource",
            ),
            (
                "PATCH",
                "/apis/g/v1/namespaces/a/things/x",
                Some("application/merge-patch+json"),
                "PATCH",
                "resource",
            ),
            (
                "PATCH",
                "/apis/g/v1/namespaces/a/things/x",
                Some("application/apply-patch+yaml"),
                "APPLY",
                "resource",
            ),
            (
                "DELETE",
                "/apis/g/v1/namespaces/a/things/x",
                None,
                "DELETE",
                "resource",
            ),
            (
                "DELETE",
                "/apis/g/v1/namespaces/a/things",
                None,
                "DELETECOLLECTION",
                "namespace",
            ),
            (
                "OPTIONS",
                "/apis/g/v1/namespaces/a/things",
                None,
                "other",
                "namespace",
            ),
        ] {
            let labels = kind(method, uri, content_type).labels(true);
            assert_eq!((labels.verb, labels.scope), (verb, scope), "{method} {uri}");
        }
        let watch = kind("GET", "/clusters/c1/apis/g/v1/things?watch=true", None);
        assert!(watch.long_running);
        assert_eq!(watch.endpoint(), "consumer");
        let status = kind("PUT", "/apis/g/v1/namespaces/a/things/x/status", None);
        assert_eq!(status.labels(true).subresource, "status");
        assert!(status.mutating);
    }

    #[test]
    fn caller_text_becomes_a_label_only_for_served_resources() {
        let k = kind(
            "GET",
            "/apis/made.up/v9/namespaces/a/whatever-1234/x/y",
            None,
        );
        let labels = k.labels(false);
        assert_eq!(
            (
                labels.group.as_str(),
                labels.version.as_str(),
                labels.resource.as_str(),
                labels.subresource.as_str()
            ),
            ("", "", "", "")
        );
        assert_eq!(labels.verb, "GET");
        // Paths naming no resource get a fixed name, whatever they say.
        for (uri, fixed) in [
            ("/apis/made.up.group", "/apis"),
            ("/apis/made.up/v1", "/apis"),
            ("/openapi/v3/apis/made.up/v1", "/openapi/v3"),
            ("/readyz/anything", "/healthz"),
            ("/metrics", "/metrics"),
            ("/bind/whatever", "/bind"),
            ("/somewhere/else", ""),
        ] {
            let labels = kind("GET", uri, None).labels(false);
            assert_eq!(labels.subresource, fixed, "{uri}");
            assert!(
                labels.group.is_empty() && labels.resource.is_empty(),
                "{uri}"
            );
        }
    }

    #[test]
    fn dry_run_is_reported_as_kube_apiserver_reports_it() {
        let dry_run = |query| dry_run(&Query::parse(query));
        assert_eq!(dry_run(None), "");
        assert_eq!(dry_run(Some("pretty=1")), "");
        assert_eq!(dry_run(Some("dryRun=All")), "All");
        assert_eq!(dry_run(Some("dryRun=All&dryRun=All")), "All");
        assert_eq!(dry_run(Some("dryRun=all")), "invalid");
        assert_eq!(dry_run(Some("dryRun=")), "invalid");
    }
}
