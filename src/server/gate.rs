//! A layer that lets a request through only when an asynchronous check of
//! its head passes, and answers it itself otherwise: the shape both
//! authentication ([`super::authn`]) and authorization ([`super::authz`])
//! take. The check sees the request before anything reads its body, and
//! may leave what it found in the request's extensions.

use crate::upstream::BoxBody;
use futures::future::BoxFuture;
use http::{Request, Response};
use std::task::{Context, Poll};
use tower::{Layer, Service};

/// What a [`GateLayer`] checks.
pub trait Check: Clone + Send + Sync + 'static {
    /// `Ok` to let `request` through; else the answer to it.
    fn check<'a, B: Send + 'a>(
        &'a self,
        request: &'a mut Request<B>,
    ) -> BoxFuture<'a, Result<(), Response<BoxBody>>>;
}

#[derive(Clone)]
pub struct GateLayer<C> {
    check: C,
}

impl<C> GateLayer<C> {
    pub fn new(check: C) -> Self {
        Self { check }
    }
}

impl<S, C: Clone> Layer<S> for GateLayer<C> {
    type Service = Gate<S, C>;
    fn layer(&self, inner: S) -> Self::Service {
        Gate {
            inner,
            check: self.check.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Gate<S, C> {
    inner: S,
    check: C,
}

impl<S, C, B> Service<Request<B>> for Gate<S, C>
where
    S: Service<Request<B>, Response = Response<BoxBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    C: Check,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let check = self.check.clone();
        // The service that was made ready goes with this request.
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        Box::pin(async move {
            match check.check(&mut request).await {
                Ok(()) => inner.call(request).await,
                Err(answer) => Ok(answer),
            }
        })
    }
}
