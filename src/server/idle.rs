//! When a connection has been idle long enough to close: no request (or
//! watch) in flight on it for the idle timeout, as kube-apiserver closes
//! HTTP/1.1 keep-alive and HTTP/2 connections after 90 s
//! (`IdleTimeout` in k8s.io/apiserver's `secure_serving.go`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// kube-apiserver's idle timeout for both protocols.
pub const KUBE_APISERVER_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// The requests in flight on one connection, and since when it has had none.
#[derive(Debug)]
pub struct Activity {
    in_flight: AtomicUsize,
    idle_since: Mutex<Instant>,
    changed: Notify,
}

/// One request in flight; it ends when this is dropped (with the response
/// body, so a watch counts for as long as it streams).
#[derive(Debug)]
pub struct InFlight(Arc<Activity>);

impl Activity {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            in_flight: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
            changed: Notify::new(),
        })
    }

    /// A request begins. Nobody is woken: a waiter finds it in flight when
    /// its deadline comes.
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone())
    }

    /// Completes once no request has been in flight for `limit`.
    pub async fn idle_for(&self, limit: Duration) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.in_flight.load(Ordering::SeqCst) > 0 {
                changed.await;
                continue;
            }
            let deadline = *self.idle_since.lock().unwrap_or_else(|p| p.into_inner()) + limit;
            if Instant::now() >= deadline {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {}
                _ = changed => {}
            }
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // Only the last request's end changes what a waiter waits for.
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            *self.0.idle_since.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
            self.0.changed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = KUBE_APISERVER_IDLE_TIMEOUT;

    /// Whether `idle_for(LIMIT)` completes within `within` from now.
    async fn idles_within(activity: &Activity, within: Duration) -> bool {
        tokio::time::timeout(within, activity.idle_for(LIMIT))
            .await
            .is_ok()
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_requests_is_idle_after_the_limit() {
        let activity = Activity::new();
        assert!(!idles_within(&activity, LIMIT - Duration::from_secs(1)).await);
        assert!(idles_within(&activity, Duration::from_secs(2)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_keeps_it_open_however_long() {
        let activity = Activity::new();
        let request = activity.begin();
        assert!(!idles_within(&activity, LIMIT * 10).await);
        drop(request);
        // The limit counts from the end of the last request.
        assert!(!idles_within(&activity, LIMIT - Duration::from_secs(1)).await);
        assert!(idles_within(&activity, Duration::from_secs(2)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn each_request_restarts_the_count() {
        let activity = Activity::new();
        for _ in 0..3 {
            tokio::time::sleep(LIMIT - Duration::from_secs(10)).await;
            drop(activity.begin());
        }
        assert!(!idles_within(&activity, LIMIT - Duration::from_secs(1)).await);
        assert!(idles_within(&activity, Duration::from_secs(2)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn overlapping_requests_count_until_the_last_ends() {
        let activity = Activity::new();
        let first = activity.begin();
        let second = activity.begin();
        drop(first);
        assert!(!idles_within(&activity, LIMIT * 2).await);
        drop(second);
        assert!(idles_within(&activity, LIMIT + Duration::from_secs(1)).await);
    }
}
