//! Metrics of the provider-side controllers, with controller-runtime's and
//! client-go's names: reconciles by result and their time, reconciles
//! running, objects waiting for a reconcile (the work queue's depth), and
//! whether this replica leads.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub controller: &'static str,
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    pub name: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaseLabels {
    pub name: String,
}

pub struct ControllerMetrics {
    reconciles: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    time: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    active: Family<ControllerLabels, Gauge>,
    depth: Family<QueueLabels, Gauge>,
    leader: Family<LeaseLabels, Gauge>,
}

impl ControllerMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let reconciles = Family::<ResultLabels, Counter>::default();
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller, by result (success, error).",
            reconciles.clone(),
        );
        let errors = Family::<ControllerLabels, Counter>::default();
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller.",
            errors.clone(),
        );
        let time: Family<ControllerLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.001, 2.0, 16)));
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller.",
            time.clone(),
        );
        let active = Family::<ControllerLabels, Gauge>::default();
        registry.register(
            "controller_runtime_active_workers",
            "Number of reconciles running per controller.",
            active.clone(),
        );
        let depth = Family::<QueueLabels, Gauge>::default();
        registry.register(
            "workqueue_depth",
            "Objects waiting for their reconcile, per controller.",
            depth.clone(),
        );
        let leader = Family::<LeaseLabels, Gauge>::default();
        registry.register(
            "leader_election_master_status",
            "1 while this replica holds the controllers' Lease (name), else 0.",
            leader.clone(),
        );
        Self {
            reconciles,
            errors,
            time,
            active,
            depth,
            leader,
        }
    }

    /// A reconcile of `controller` began; the returned guard ends it.
    pub fn reconcile(&'static self, controller: &'static str) -> Reconcile {
        let labels = ControllerLabels { controller };
        self.active.get_or_create(&labels).inc();
        Reconcile {
            metrics: self,
            controller,
            started: std::time::Instant::now(),
        }
    }

    /// The work queue of `controller`.
    pub fn queue(&self, controller: &'static str) -> Gauge {
        self.depth
            .get_or_create_owned(&QueueLabels { name: controller })
    }

    /// Whether this replica holds the Lease `name`.
    pub fn leading(&self, name: &str, leading: bool) {
        let gauge = self.leader.get_or_create(&LeaseLabels {
            name: name.to_string(),
        });
        gauge.set(i64::from(leading));
    }

    fn finished(&self, controller: &'static str, ok: bool, took: Duration) {
        let labels = ControllerLabels { controller };
        self.active.get_or_create(&labels).dec();
        self.time.get_or_create(&labels).observe(took.as_secs_f64());
        let result = if ok { "success" } else { "error" };
        self.reconciles
            .get_or_create(&ResultLabels { controller, result })
            .inc();
        if !ok {
            self.errors.get_or_create(&labels).inc();
        }
    }
}

/// A running reconcile; [`Reconcile::finish`] records its result. Dropped
/// unfinished (the controllers stopped), it counts as an error.
pub struct Reconcile {
    metrics: &'static ControllerMetrics,
    controller: &'static str,
    started: std::time::Instant,
}

impl Reconcile {
    pub fn finish(self, ok: bool) {
        let this = std::mem::ManuallyDrop::new(self);
        this.metrics
            .finished(this.controller, ok, this.started.elapsed());
    }
}

impl Drop for Reconcile {
    fn drop(&mut self) {
        self.metrics
            .finished(self.controller, false, self.started.elapsed());
    }
}
