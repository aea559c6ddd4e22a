//! Metrics of bindery's requests to the provider, with client-go's names
//! (`rest_client_requests_total`, `rest_client_request_duration_seconds`),
//! and the tower layer that keeps them around a provider client. Only
//! provider clients carry it: `host` is then one value, never an app
//! cluster's. The time to the response's head is also the request's
//! `provider` phase ([`crate::timing`]).

use futures::future::BoxFuture;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::task::{Context, Poll};
use std::time::Instant;

/// client-go's buckets for `rest_client_request_duration_seconds`.
const DURATION_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// The status code, or `<error>` when no response came.
    pub code: String,
    pub host: String,
    pub method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    pub verb: String,
    pub host: String,
}

pub struct ProviderMetrics {
    pub requests: Family<ResultLabels, Counter>,
    pub duration: Family<LatencyLabels, Histogram, fn() -> Histogram>,
}

impl ProviderMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let requests = Family::<ResultLabels, Counter>::default();
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests to the provider, partitioned by status code, method, and host.",
            requests.clone(),
        );
        let duration: Family<LatencyLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS));
        registry.register(
            "rest_client_request_duration_seconds",
            "Latency of requests to the provider until their response's head, by verb and host.",
            duration.clone(),
        );
        Self { requests, duration }
    }

    fn observe(&self, host: &str, method: &http::Method, code: Option<u16>, started: Instant) {
        let elapsed = started.elapsed();
        self.requests
            .get_or_create(&ResultLabels {
                code: code.map_or_else(|| "<error>".to_string(), |c| c.to_string()),
                host: host.to_string(),
                method: method.as_str().to_string(),
            })
            .inc();
        self.duration
            .get_or_create(&LatencyLabels {
                verb: method.as_str().to_string(),
                host: host.to_string(),
            })
            .observe(elapsed.as_secs_f64());
        crate::timing::add(crate::timing::Phase::Provider, elapsed);
    }
}

/// Counts and times every request to the provider at `host`.
#[derive(Clone, Debug)]
pub struct ProviderMetricsLayer {
    host: String,
}

impl ProviderMetricsLayer {
    /// For the provider at `url` (its `host:port` becomes the label).
    pub fn new(url: &http::Uri) -> Self {
        let host = url
            .authority()
            .map_or_else(|| "unknown".to_string(), |a| a.to_string());
        Self { host }
    }
}

impl<S> tower::Layer<S> for ProviderMetricsLayer {
    type Service = ProviderMetricsService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        ProviderMetricsService {
            inner,
            host: self.host.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct ProviderMetricsService<S> {
    inner: S,
    host: String,
}

impl<S, B, R> tower::Service<http::Request<B>> for ProviderMetricsService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.method().clone();
        let host = self.host.clone();
        let started = Instant::now();
        let future = self.inner.call(request);
        Box::pin(async move {
            let result = future.await;
            let code = result.as_ref().ok().map(|r| r.status().as_u16());
            super::metrics()
                .provider
                .observe(&host, &method, code, started);
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer, ServiceExt};

    #[tokio::test]
    async fn requests_are_counted_by_code_and_errors_as_client_go_counts_them() {
        let host = "provider.test.metrics:6443";
        let layer = ProviderMetricsLayer::new(&format!("https://{host}/").parse().unwrap());
        let answering = tower::service_fn(|request: http::Request<()>| async move {
            let status = if request.uri().path() == "/missing" {
                404
            } else {
                200
            };
            let response = http::Response::builder().status(status).body(()).unwrap();
            Ok::<_, std::io::Error>(response)
        });
        let service = layer.layer(answering);
        for path in ["/a", "/b", "/missing"] {
            let request = http::Request::get(path).body(()).unwrap();
            service.clone().oneshot(request).await.unwrap();
        }
        let failing = layer.layer(tower::service_fn(|_: http::Request<()>| async {
            Err::<http::Response<()>, _>(std::io::Error::other("refused"))
        }));
        let request = http::Request::post("/x").body(()).unwrap();
        assert!(failing.oneshot(request).await.is_err());
        let count = |code: &str, method: &str| {
            super::super::metrics()
                .provider
                .requests
                .get_or_create(&ResultLabels {
                    code: code.into(),
                    host: host.into(),
                    method: method.into(),
                })
                .get()
        };
        assert_eq!(count("200", "GET"), 2);
        assert_eq!(count("404", "GET"), 1);
        assert_eq!(count("<error>", "POST"), 1);
    }
}
