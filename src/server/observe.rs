//! The observing layer, outermost but for the response headers: each
//! request's metrics (kube-apiserver's, [`crate::metrics::requests`]), the
//! [`Trace`] its phases are timed in, and its log line: at debug for every
//! request, at info with the time of each phase for one slower than
//! [`SLOW`] (watches apart). What is measured ends when the response's body
//! has been sent (or dropped), as kube-apiserver's handlers end when they
//! have written it.

use super::layers::REQUEST_ID;
use crate::metrics::requests::{KindLabels, PhaseLabels, RequestKind, RequestLabels, Served};
use crate::resolved::resolved_of;
use crate::timing::{Phase, Trace, traced};
use crate::upstream::BoxBody;
use futures::future::BoxFuture;
use http::{Request, Response};
use http_body_util::BodyExt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tower::{Layer, Service};

/// A request slower than this is logged at info with its phases, as
/// kube-apiserver traces requests over 500 ms.
pub const SLOW: Duration = Duration::from_millis(500);

#[derive(Clone, Default)]
pub struct ObserveLayer;

impl<S> Layer<S> for ObserveLayer {
    type Service = Observe<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Observe { inner }
    }
}

#[derive(Clone)]
pub struct Observe<S> {
    inner: S,
}

impl<S, B> Service<Request<B>> for Observe<S>
where
    S: Service<Request<B>, Response = Response<BoxBody>> + Send,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let started = Instant::now();
        let content_type = request
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let (method, uri) = (request.method().clone(), request.uri().clone());
        let kind = RequestKind::of(resolved_of(&mut request), &method, content_type.as_deref());
        let id = request
            .headers()
            .get(REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let metrics = &crate::metrics::metrics().requests;
        let in_flight = (!kind.long_running).then(|| {
            let request_kind = if kind.mutating {
                "mutating"
            } else {
                "readOnly"
            };
            InFlight::begin(
                metrics
                    .in_flight
                    .get_or_create_owned(&KindLabels { request_kind }),
            )
        });
        let trace = Arc::new(Trace::default());
        let future = traced(trace.clone(), self.inner.call(request));
        Box::pin(async move {
            let response = future.await?;
            let served = response.extensions().get::<Served>().is_some();
            let labels = kind.labels(served);
            let long_running = kind.long_running.then(|| {
                let gauge = metrics.long_running.get_or_create_owned(&labels);
                gauge.inc();
                gauge
            });
            let mut done = Done {
                kind,
                labels,
                code: response.status().as_u16(),
                method,
                path: uri.path().to_string(),
                id,
                started,
                trace,
                bytes: 0,
                _in_flight: in_flight,
                long_running,
            };
            Ok(response.map(|body| {
                // The whole `Done` moves into the body (a method call
                // captures it whole), so it is dropped with the body.
                body.map_frame(move |frame| {
                    done.sent(frame.data_ref().map_or(0, bytes::Bytes::len));
                    frame
                })
                .boxed_unsync()
            }))
        })
    }
}

/// A request whose response is being sent: recorded when it is dropped.
struct Done {
    kind: RequestKind,
    labels: RequestLabels,
    code: u16,
    method: http::Method,
    path: String,
    id: String,
    started: Instant,
    trace: Arc<Trace>,
    bytes: usize,
    /// Held until the body is sent, then dropped.
    _in_flight: Option<InFlight>,
    long_running: Option<prometheus_client::metrics::gauge::Gauge>,
}

/// A request counted in flight until this is dropped: with its response's
/// body, or with the request's future when the client goes before the
/// answer.
struct InFlight(prometheus_client::metrics::gauge::Gauge);

impl InFlight {
    fn begin(gauge: prometheus_client::metrics::gauge::Gauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Done {
    fn sent(&mut self, bytes: usize) {
        self.bytes += bytes;
    }
}

impl Drop for Done {
    fn drop(&mut self) {
        let took = self.started.elapsed();
        let metrics = &crate::metrics::metrics().requests;
        let labels = std::mem::take(&mut self.labels);
        if let Some(gauge) = &self.long_running {
            gauge.dec();
        }
        metrics
            .duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        if self.kind.read {
            metrics
                .response_sizes
                .get_or_create(&labels)
                .observe(self.bytes as f64);
        }
        let endpoint = self.kind.endpoint();
        let trace = &self.trace;
        if !self.kind.long_running {
            for phase in Phase::ALL {
                let spent = trace.took(phase);
                if !spent.is_zero() {
                    let phase = phase.name();
                    metrics
                        .phases
                        .get_or_create(&PhaseLabels { phase, endpoint })
                        .observe(spent.as_secs_f64());
                }
            }
            let phase = "translation";
            metrics
                .phases
                .get_or_create(&PhaseLabels { phase, endpoint })
                .observe(trace.rest(took).as_secs_f64());
        }
        metrics
            .total
            .get_or_create(&crate::metrics::requests::CodedLabels {
                request: labels,
                code: self.code.to_string(),
            })
            .inc();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let (method, path, id, status) = (&self.method, &self.path, &self.id, self.code);
        let (verb, resource) = (self.kind.verb(), self.kind.resource());
        let consumer = trace.consumer().unwrap_or_default();
        let provider_ms = ms(trace.took(Phase::Provider));
        if took >= SLOW && !self.kind.long_running {
            tracing::info!(
                request_id = %id, %endpoint, %consumer, %verb, %resource, status,
                total_ms = ms(took),
                authentication_ms = ms(trace.took(Phase::Authentication)),
                authorization_ms = ms(trace.took(Phase::Authorization)),
                provider_ms,
                translation_ms = ms(trace.rest(took)),
                "slow request"
            );
        } else {
            tracing::debug!(
                request_id = %id, %method, %path, %endpoint, %consumer, %verb, %resource, status,
                total_ms = ms(took), provider_ms, "request"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::requests::CodedLabels;
    use http_body_util::Full;

    /// The handler's answer: a body of `size` bytes, `Served` when it says so,
    /// after `provider` spent in the provider.
    fn handler(
        size: usize,
        served: bool,
        provider: Duration,
    ) -> impl Service<
        Request<()>,
        Response = Response<BoxBody>,
        Error = std::convert::Infallible,
        Future = BoxFuture<'static, Result<Response<BoxBody>, std::convert::Infallible>>,
    > + Clone {
        tower::service_fn(move |_: Request<()>| -> BoxFuture<'static, _> {
            Box::pin(async move {
                crate::timing::add(Phase::Provider, provider);
                let body = Full::new(bytes::Bytes::from(vec![b'x'; size]))
                    .map_err(|never| match never {})
                    .boxed_unsync();
                let mut response = Response::new(body);
                if served {
                    response.extensions_mut().insert(Served);
                }
                Ok(response)
            })
        })
    }

    fn count(labels: &RequestLabels, code: &str) -> u64 {
        crate::metrics::metrics()
            .requests
            .total
            .get_or_create(&CodedLabels {
                request: labels.clone(),
                code: code.into(),
            })
            .get()
    }

    /// A request whose caller went before the answer is no longer in
    /// flight.
    #[tokio::test]
    async fn a_request_given_up_leaves_no_request_in_flight() {
        let pending = tower::service_fn(|_: Request<()>| -> BoxFuture<'static, _> {
            Box::pin(std::future::pending::<
                Result<Response<BoxBody>, std::convert::Infallible>,
            >())
        });
        let gauge = || {
            crate::metrics::metrics()
                .requests
                .in_flight
                .get_or_create(&KindLabels {
                    request_kind: "mutating",
                })
                .get()
        };
        let before = gauge();
        let mut service = ObserveLayer.layer(pending);
        let future = service.call(
            Request::post("/apis/observe.test/v1/namespaces/a/given-up")
                .body(())
                .unwrap(),
        );
        assert_eq!(gauge(), before + 1);
        drop(future);
        assert_eq!(gauge(), before);
    }

    #[tokio::test]
    async fn a_request_is_counted_once_its_body_is_sent_with_its_resource_only_when_served() {
        let path = "/apis/observe.test/v1/namespaces/a/things/x";
        let get = http::Method::GET;
        let kind = RequestKind::of(
            &crate::resolved::Resolved::of(&get, &path.parse().unwrap()),
            &get,
            None,
        );
        let (named, unnamed) = (kind.labels(true), kind.labels(false));
        let before = (count(&named, "200"), count(&unnamed, "200"));
        let mut service = ObserveLayer.layer(handler(1500, true, Duration::from_millis(2)));
        let response = service
            .call(Request::get(path).body(()).unwrap())
            .await
            .unwrap();
        assert_eq!(
            count(&named, "200"),
            before.0,
            "not before the body is sent"
        );
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body.len(), 1500);
        assert_eq!(count(&named, "200"), before.0 + 1);

        let mut service = ObserveLayer.layer(handler(10, false, Duration::ZERO));
        let response = service
            .call(Request::get(path).body(()).unwrap())
            .await
            .unwrap();
        drop(response);
        assert_eq!(count(&unnamed, "200"), before.1 + 1, "counted when dropped");
        assert_eq!(count(&named, "200"), before.0 + 1, "not named: not served");
        let sizes = crate::metrics::metrics()
            .requests
            .response_sizes
            .get_or_create(&named)
            .count();
        assert!(sizes >= 1);
        let provider = crate::metrics::metrics()
            .requests
            .phases
            .get_or_create(&PhaseLabels {
                phase: "provider",
                endpoint: "aggregated",
            })
            .sum();
        assert!(provider >= 0.002, "{provider}");
    }
}
