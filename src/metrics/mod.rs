//! What bindery counts and how `/metrics` shows it: one registry of
//! Prometheus metric families (prometheus-client), grouped by what they
//! watch — requests served ([`requests`]), the watch cache ([`cache`]), the
//! provider client ([`provider`]), authentication and authorization
//! ([`auth`]) and the controllers ([`controllers`]) — encoded in the
//! Prometheus text format, or OpenMetrics when the scraper asks for it.
//!
//! Names are kube-apiserver's (or client-go's, controller-runtime's) where a
//! metric means the same; bindery's own start with `bindery_`. No label
//! ever holds a consumer, export or object name, so the number of series
//! does not grow with consumers: labels are verbs, codes, endpoint kinds and
//! provider resources.

pub mod auth;
pub mod cache;
pub mod controllers;
pub mod provider;
pub mod requests;

use prometheus_client::registry::Registry;
use std::sync::LazyLock;

/// Every metric family bindery keeps.
pub struct Metrics {
    registry: Registry,
    pub requests: requests::RequestMetrics,
    pub cache: cache::CacheMetrics,
    pub provider: provider::ProviderMetrics,
    pub auth: auth::AuthMetrics,
    pub controllers: controllers::ControllerMetrics,
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::default();
        let requests = requests::RequestMetrics::register(&mut registry);
        let cache = cache::CacheMetrics::register(&mut registry);
        let provider = provider::ProviderMetrics::register(&mut registry);
        let auth = auth::AuthMetrics::register(&mut registry);
        let controllers = controllers::ControllerMetrics::register(&mut registry);
        Self {
            registry,
            requests,
            cache,
            provider,
            auth,
            controllers,
        }
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// The media type of the Prometheus text format, kube-apiserver's default.
pub const PROMETHEUS_TEXT: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
/// The media type of the OpenMetrics text format.
pub const OPENMETRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every metric, in the format `accept` prefers: OpenMetrics when it names
/// `application/openmetrics-text`, else the Prometheus text format (as
/// client_golang's handler negotiates). The media type and the text.
pub fn render(accept: Option<&str>) -> (&'static str, String) {
    render_registry(&metrics().registry, accept)
}

fn render_registry(registry: &Registry, accept: Option<&str>) -> (&'static str, String) {
    let mut text = String::new();
    let openmetrics = accept.is_some_and(|accept| {
        accept.split(',').any(|range| {
            range
                .split(';')
                .next()
                .is_some_and(|media| media.trim() == "application/openmetrics-text")
        })
    });
    // Writing into a String cannot fail.
    if openmetrics {
        let _ = prometheus_client::encoding::text::encode(&mut text, registry);
        (OPENMETRICS_TEXT, text)
    } else {
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, registry);
        (PROMETHEUS_TEXT, text)
    }
}

/// A provider collection path (`/apis/<g>/<v>/<resource>`, `/api/v1/<resource>`)
/// as kube-apiserver's `resource` label names a resource: `<resource>.<group>`,
/// or the bare resource in the core group.
pub fn resource_label(collection: &str) -> String {
    let segments: Vec<&str> = collection.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["apis", group, _version, resource] => format!("{resource}.{group}"),
        ["api", _version, resource] => resource.to_string(),
        _ => "unknown".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;

    #[test]
    fn the_format_follows_accept() {
        let mut registry = Registry::default();
        let counter = Counter::<u64>::default();
        registry.register("things", "Things seen", counter.clone());
        counter.inc();
        let (media, text) = render_registry(&registry, None);
        assert_eq!(media, "text/plain; version=0.0.4; charset=utf-8");
        assert!(
            text.contains("# TYPE things_total counter\nthings_total 1\n"),
            "{text}"
        );
        assert!(!text.contains("# EOF"));
        let (media, text) = render_registry(
            &registry,
            Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
        );
        assert_eq!(media, OPENMETRICS_TEXT);
        assert!(
            text.contains("# TYPE things counter\nthings_total 1\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
        let (media, _) = render_registry(&registry, Some("text/plain"));
        assert_eq!(media, PROMETHEUS_TEXT);
    }

    #[test]
    fn resources_are_labelled_as_kube_apiserver_labels_them() {
        assert_eq!(
            resource_label("/apis/db.example.com/v1/postgresqlinstances"),
            "postgresqlinstances.db.example.com"
        );
        assert_eq!(resource_label("/api/v1/secrets"), "secrets");
        assert_eq!(resource_label("/nonsense"), "unknown");
    }
}
