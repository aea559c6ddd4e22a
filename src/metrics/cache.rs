//! Metrics of the shared watch cache, by provider resource (`resource`,
//! kube-apiserver's `<resource>.<group>`): what its upstream watch brings,
//! how often it lists, what it holds, who watches it, and how far behind
//! readers find it. One [`ResourceMetrics`] per reflected resource, made
//! when its reflector starts.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// How long readers wait for the cache to reach a version: from nothing to
/// the cache's patience (3 s) and beyond.
const WAIT_BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    pub resource: String,
}

type Counters = Family<ResourceLabels, Counter>;
type Gauges = Family<ResourceLabels, Gauge>;

pub struct CacheMetrics {
    events: Counters,
    lists: Counters,
    objects: Gauges,
    resource_version: Gauges,
    watchers: Gauges,
    terminated_watchers: Counters,
    upstream_watches: Counters,
    silences: Counters,
    behind: Counters,
    impatient: Counters,
    unreadable: Counters,
    wait: Family<ResourceLabels, Histogram, fn() -> Histogram>,
}

impl CacheMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let mut counter = |name: &str, help: &str| {
            let family = Counters::default();
            registry.register(name, help, family.clone());
            family
        };
        let events = counter(
            "apiserver_watch_cache_events_received",
            "Counter of events received by the watch cache from the provider, by resource.",
        );
        let lists = counter(
            "apiserver_watch_cache_initializations",
            "Counter of watch cache initializations (the first list and every relist), by resource.",
        );
        let terminated_watchers = counter(
            "apiserver_terminated_watchers",
            "Counter of watchers closed due to unresponsiveness (their queue was full), by resource.",
        );
        let upstream_watches = counter(
            "bindery_watch_cache_upstream_watches",
            "Counter of watches the cache opened on the provider, by resource.",
        );
        let silences = counter(
            "bindery_watch_cache_upstream_silences",
            "Counter of provider watches replaced because they sent nothing, not even a bookmark, for 75 s, by resource.",
        );
        let behind = counter(
            "bindery_watch_cache_behind",
            "Counter of times a new provider watch brought a version readers had been waiting for: the cache was behind, by resource.",
        );
        let impatient = counter(
            "bindery_watch_cache_patience_exhausted",
            "Counter of reads that waited the cache's full patience for a version and were sent to the provider instead, by resource.",
        );
        let unreadable = counter(
            "bindery_watch_cache_unreadable_objects",
            "Counter of provider objects (in lists and watch events) the watch cache could not read and left out, each named in a warning, by resource.",
        );
        let mut gauge = |name: &str, help: &str| {
            let family = Gauges::default();
            registry.register(name, help, family.clone());
            family
        };
        let objects = gauge(
            "bindery_watch_cache_objects",
            "Objects held by the watch cache, by resource.",
        );
        let resource_version = gauge(
            "apiserver_watch_cache_resource_version",
            "Current resource version of the watch cache, by resource.",
        );
        let watchers = gauge(
            "bindery_watch_cache_watchers",
            "Client watches attached to the watch cache, by resource.",
        );
        let wait: Family<ResourceLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(WAIT_BUCKETS));
        registry.register(
            "bindery_watch_cache_read_wait_seconds",
            "How long reads waited for the watch cache to reach the version they need (its lag as readers see it), by resource.",
            wait.clone(),
        );
        Self {
            events,
            lists,
            objects,
            resource_version,
            watchers,
            terminated_watchers,
            upstream_watches,
            silences,
            behind,
            impatient,
            unreadable,
            wait,
        }
    }

    /// The metrics of one resource (`resource` as [`super::resource_label`]
    /// names it).
    pub fn resource(&self, resource: String) -> ResourceMetrics {
        let labels = ResourceLabels { resource };
        ResourceMetrics {
            events: self.events.get_or_create_owned(&labels),
            lists: self.lists.get_or_create_owned(&labels),
            objects: self.objects.get_or_create_owned(&labels),
            resource_version: self.resource_version.get_or_create_owned(&labels),
            watchers: self.watchers.get_or_create_owned(&labels),
            terminated_watchers: self.terminated_watchers.get_or_create_owned(&labels),
            upstream_watches: self.upstream_watches.get_or_create_owned(&labels),
            silences: self.silences.get_or_create_owned(&labels),
            behind: self.behind.get_or_create_owned(&labels),
            impatient: self.impatient.get_or_create_owned(&labels),
            unreadable: self.unreadable.get_or_create_owned(&labels),
            wait: self.wait.get_or_create_owned(&labels),
        }
    }
}

/// One reflected resource's metrics (handles sharing the registry's values).
#[derive(Clone, Debug)]
pub struct ResourceMetrics {
    pub events: Counter,
    pub lists: Counter,
    pub objects: Gauge,
    pub resource_version: Gauge,
    pub watchers: Gauge,
    pub terminated_watchers: Counter,
    pub upstream_watches: Counter,
    pub silences: Counter,
    pub behind: Counter,
    pub impatient: Counter,
    pub unreadable: Counter,
    pub wait: Histogram,
}

impl ResourceMetrics {
    /// Metrics no registry shows, for a reflector made in a unit test.
    pub fn detached() -> Self {
        Self {
            events: Counter::default(),
            lists: Counter::default(),
            objects: Gauge::default(),
            resource_version: Gauge::default(),
            watchers: Gauge::default(),
            terminated_watchers: Counter::default(),
            upstream_watches: Counter::default(),
            silences: Counter::default(),
            behind: Counter::default(),
            impatient: Counter::default(),
            unreadable: Counter::default(),
            wait: Histogram::new(WAIT_BUCKETS),
        }
    }
}
