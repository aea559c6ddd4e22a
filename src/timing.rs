//! Where one request's time goes. The observing layer
//! (`crate::server::observe`) gives each request a [`Trace`], reachable
//! from anything its future runs (a task-local); authentication,
//! authorization and the provider client add their time to it, and what is
//! left of the total is bindery's own: reading, translating, encoding.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// A measured phase of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Authentication,
    Authorization,
    /// Requests to the provider, until their answers' heads.
    Provider,
}

impl Phase {
    pub const ALL: [Phase; 3] = [Phase::Authentication, Phase::Authorization, Phase::Provider];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Authentication => "authentication",
            Phase::Authorization => "authorization",
            Phase::Provider => "provider",
        }
    }
}

/// One request's phases so far, and its consumer once authentication
/// knows it.
#[derive(Debug, Default)]
pub struct Trace {
    nanos: [AtomicU64; 3],
    consumer: OnceLock<String>,
}

impl Trace {
    /// The time spent in `phase`.
    pub fn took(&self, phase: Phase) -> Duration {
        Duration::from_nanos(self.nanos[phase as usize].load(Ordering::Relaxed))
    }

    fn add(&self, phase: Phase, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.nanos[phase as usize].fetch_add(nanos, Ordering::Relaxed);
    }

    /// The consumer the request was for, if it was one's.
    pub fn consumer(&self) -> Option<&str> {
        self.consumer.get().map(String::as_str)
    }

    /// What is left of `total` after the measured phases.
    pub fn rest(&self, total: Duration) -> Duration {
        Phase::ALL
            .iter()
            .fold(total, |left, phase| left.saturating_sub(self.took(*phase)))
    }
}

tokio::task_local! {
    static TRACE: Arc<Trace>;
}

/// Runs `future` with `trace` as its request's trace.
pub async fn traced<F: Future>(trace: Arc<Trace>, future: F) -> F::Output {
    TRACE.scope(trace, future).await
}

/// Adds `took` to `phase` of the current request, if there is one.
pub fn add(phase: Phase, took: Duration) {
    let _ = TRACE.try_with(|trace| trace.add(phase, took));
}

/// Records the current request's consumer, if there is a request.
pub fn set_consumer(consumer: &str) {
    let _ = TRACE.try_with(|trace| trace.consumer.set(consumer.to_string()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn phases_add_up_within_the_request_and_nowhere_else() {
        add(Phase::Provider, Duration::from_millis(5)); // no request: ignored
        let trace = Arc::new(Trace::default());
        traced(trace.clone(), async {
            add(Phase::Provider, Duration::from_millis(3));
            add(Phase::Provider, Duration::from_millis(4));
            add(Phase::Authentication, Duration::from_millis(1));
            set_consumer("c1");
            set_consumer("c2");
        })
        .await;
        assert_eq!(trace.took(Phase::Provider), Duration::from_millis(7));
        assert_eq!(trace.took(Phase::Authorization), Duration::ZERO);
        assert_eq!(trace.consumer(), Some("c1"));
        assert_eq!(
            trace.rest(Duration::from_millis(10)),
            Duration::from_millis(2)
        );
        assert_eq!(trace.rest(Duration::from_millis(1)), Duration::ZERO);
    }
}
