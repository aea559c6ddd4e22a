//! bindery's listener: TLS only (rustls), HTTP/2 and HTTP/1.1, the tower
//! stack of [`layers`] around the [`crate::router::Router`], and graceful
//! shutdown (stop accepting, end watches, let requests in flight finish).

pub mod layers;
pub mod tls;

use crate::auth::Authenticator;
use crate::auth::client_cert::peer_certificate;
use crate::router::{App, Router};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceBuilder;

/// The TLS server name (SNI) the client asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerName(pub String);

/// How long requests in flight may take to finish after shutdown begins.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

/// Serves `app` on `listener` until `shutdown` completes.
pub async fn run(
    app: Arc<App>,
    tls: rustls::ServerConfig,
    authenticators: Vec<Box<dyn Authenticator>>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    let stack = ServiceBuilder::new()
        .layer(layers::RequestIdLayer)
        .layer(layers::LogLayer)
        .layer(layers::AuthnLayer::new(authenticators))
        .service(Router::new(app));
    let graceful = GracefulShutdown::new();
    let builder = Builder::new(TokioExecutor::new());
    tokio::pin!(shutdown);
    loop {
        let (tcp, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accepting a connection failed");
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let acceptor = acceptor.clone();
        let stack = stack.clone();
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls = match acceptor.accept(tcp).await {
                Ok(tls) => tls,
                Err(error) => {
                    tracing::debug!(%error, %remote, "TLS handshake failed");
                    return;
                }
            };
            let peer = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .and_then(|der| peer_certificate(der));
            let server_name = tls
                .get_ref()
                .1
                .server_name()
                .map(|n| ServerName(n.to_string()));
            let service =
                tower::service_fn(move |mut request: http::Request<hyper::body::Incoming>| {
                    if let Some(peer) = &peer {
                        request.extensions_mut().insert(peer.clone());
                    }
                    if let Some(name) = &server_name {
                        request.extensions_mut().insert(name.clone());
                    }
                    let mut stack = stack.clone();
                    async move { tower::Service::call(&mut stack, request).await }
                });
            let connection = builder.serve_connection_with_upgrades(
                TokioIo::new(tls),
                TowerToHyperService::new(service),
            );
            if let Err(error) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(%error, %remote, "connection ended with an error");
            }
        });
    }
    tracing::info!("shutting down: draining connections");
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("all connections closed"),
        _ = tokio::time::sleep(DRAIN_TIMEOUT) => tracing::warn!("connections still open after {DRAIN_TIMEOUT:?}; stopping"),
    }
}
