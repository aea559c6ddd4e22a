//! bindery's listener: TLS only (rustls), HTTP/2 or HTTP/1.1 as ALPN chose,
//! the tower stack around the [`crate::router::Router`] (response headers
//! ([`layers`]), metrics, phase timing and a log line ([`observe`]), gzip
//! for large answers as kube-apiserver sends them ([`compress`]), the `timeout` parameter ([`deadline`]),
//! authentication ([`authn`]), authorization ([`authz`])), an HTTP/1.1
//! body nothing read kept being read ([`unread`]), an HTTP/2 connection's
//! frames written together ([`coalesce`]), and graceful shutdown (stop accepting, end watches, let
//! requests in flight finish).

pub mod authn;
pub mod authz;
pub mod coalesce;
pub mod compress;
pub mod deadline;
pub mod gate;
pub mod goaway;
pub mod idle;
pub mod layers;
pub mod observe;
pub mod tls;
pub mod unread;

use crate::app::App;
use crate::auth::client_cert::peer_certificate;
use crate::router::Router;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tower::ServiceBuilder;

/// The TLS server name (SNI) the client asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerName(pub String);

/// How long requests in flight may take to finish after shutdown begins.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a client may take over the TLS handshake: kube-apiserver's
/// `ReadHeaderTimeout`, which Go's server applies to the handshake too.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(32);

/// How client connections are kept.
#[derive(Clone, Copy, Debug)]
pub struct Connections {
    /// Closed after this long without a request in flight.
    pub idle_timeout: Duration,
    /// Over HTTP/2, each request's chance to send its connection a GOAWAY.
    pub goaway_chance: goaway::GoawayChance,
    /// Over HTTP/2, the streams (requests, watches) one connection carries
    /// at once.
    pub max_streams: u32,
}

/// The streams an aggregated server lets one HTTP/2 connection carry at
/// once (k8s.io/apiserver's recommended options): the aggregator sends all
/// of an app cluster's requests for a group, watches included, over one.
pub const AGGREGATED_MAX_STREAMS: u32 = 1_000;

/// Serves `app` on `listener` until `shutdown` completes.
pub async fn run(
    app: Arc<App>,
    tls: rustls::ServerConfig,
    authentication: authn::Authentication,
    listener: TcpListener,
    connections: Connections,
    shutdown: impl Future<Output = ()>,
) {
    // Outermost first, as a request passes them; no layer reads the body.
    let stack = ServiceBuilder::new()
        .layer(layers::ResponseHeadersLayer)
        .layer(observe::ObserveLayer)
        .layer(compress::CompressLayer)
        .layer(deadline::layer())
        .layer(authn::AuthnLayer::new(Arc::new(authentication)))
        .layer(authz::AuthzLayer::new(authz::Authorization(app.clone())))
        .service(Router::new(app));
    serve(tls, listener, connections, shutdown, stack).await;
}

/// A request as the listener hands it to a service: its body read to its
/// end even when the service does not, the client's certificate
/// ([`crate::auth::PeerCertificate`]) and TLS server name ([`ServerName`])
/// in its extensions.
pub type Incoming = http::Request<unread::Unread<hyper::body::Incoming>>;

/// Serves `stack` on `listener`, over TLS with `tls`, until `shutdown`
/// completes: the connection handling every server of bindery's shares
/// (bindery itself, and the router of `crate::providers`).
pub async fn serve<S, B>(
    tls: rustls::ServerConfig,
    listener: TcpListener,
    connections: Connections,
    shutdown: impl Future<Output = ()>,
    stack: S,
) where
    S: tower::Service<Incoming, Response = http::Response<B>, Error = std::convert::Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let Connections {
        idle_timeout,
        goaway_chance,
        max_streams,
    } = connections;
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    // Every connection holds a receiver: shutdown tells them all to drain,
    // and is over when the last one has been dropped.
    let (stop, stopping) = watch::channel(false);
    let http1 = hyper::server::conn::http1::Builder::new();
    let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    http2.max_concurrent_streams(max_streams);
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
        // As Go does for every TCP connection (so kube-apiserver too): a
        // response's last segment is not held back for the client's ACK.
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, %remote, "setting TCP_NODELAY failed");
        }
        let serving = Serving {
            acceptor: acceptor.clone(),
            stack: stack.clone(),
            http1: http1.clone(),
            http2: http2.clone(),
            stopping: stopping.clone(),
            idle_timeout,
            goaway_chance,
        };
        tokio::spawn(serving.connection(tcp, remote));
    }
    tracing::info!("shutting down: draining connections");
    drop(stopping);
    let _ = stop.send(true);
    tokio::select! {
        _ = stop.closed() => tracing::info!("all connections closed"),
        _ = tokio::time::sleep(DRAIN_TIMEOUT) => tracing::warn!("connections still open after {DRAIN_TIMEOUT:?}; stopping"),
    }
}

/// What serving one connection needs.
struct Serving<S> {
    acceptor: TlsAcceptor,
    stack: S,
    http1: hyper::server::conn::http1::Builder,
    http2: hyper::server::conn::http2::Builder<TokioExecutor>,
    stopping: watch::Receiver<bool>,
    idle_timeout: Duration,
    goaway_chance: goaway::GoawayChance,
}

impl<S, B> Serving<S>
where
    S: tower::Service<Incoming, Response = http::Response<B>, Error = std::convert::Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    /// One accepted connection, from its TLS handshake until it ends.
    async fn connection(self, tcp: tokio::net::TcpStream, remote: std::net::SocketAddr) {
        let Serving {
            acceptor,
            stack,
            http1,
            http2,
            stopping,
            idle_timeout,
            goaway_chance,
        } = self;
        let Some(tls) = handshake(&acceptor, tcp, remote).await else {
            return;
        };
        let Told {
            peer,
            server_name,
            speaks_h2,
        } = told(tls.get_ref().1);
        tracing::debug!(%remote, h2 = speaks_h2, "connection accepted");
        let activity = idle::Activity::new();
        let requests = activity.clone();
        let goaway = speaks_h2.then(goaway::Goaway::default);
        let goaway_asked = goaway.clone();
        let service = tower::service_fn(move |request: http::Request<hyper::body::Incoming>| {
            if let Some(goaway) = &goaway_asked {
                goaway.request(goaway_chance);
            }
            let mut request = request.map(unread::Unread::new);
            if let Some(peer) = &peer {
                request.extensions_mut().insert(peer.clone());
            }
            if let Some(name) = &server_name {
                request.extensions_mut().insert(name.clone());
            }
            let mut stack = stack.clone();
            let in_flight = requests.begin();
            // Boxed per request: hyper keeps one slot for the request
            // future for as long as the connection is open, and
            // unboxed it would be the size of the whole handler.
            Box::pin(async move {
                let response = tower::Service::call(&mut stack, request).await?;
                // In flight until its body has been sent (or dropped).
                Ok::<_, std::convert::Infallible>(response.map(|body| {
                    body.map_frame(move |frame| {
                        let _ = &in_flight;
                        frame
                    })
                }))
            })
        });
        let service = TowerToHyperService::new(service);
        // Boxed: the connection task then holds only the protocol in use.
        let ends = Ends {
            stopping,
            activity: &activity,
            idle_timeout,
            goaway: goaway.as_ref(),
        };
        let ended = if speaks_h2 {
            // Its streams' frames written together (see `coalesce`).
            let (io, writes) = coalesce::coalesced(tls);
            let connection =
                Box::pin(writes.drive(http2.serve_connection(TokioIo::new(io), service)));
            until_drained(
                connection,
                |c| c.get_mut().connection().graceful_shutdown(),
                ends,
            )
            .await
        } else {
            let io = TokioIo::new(tls);
            let connection = Box::pin(http1.serve_connection(io, service).with_upgrades());
            until_drained(connection, |c| c.graceful_shutdown(), ends).await
        };
        if let Err(error) = ended {
            tracing::debug!(%error, %remote, "connection ended with an error");
        }
    }
}

/// What a connection's TLS handshake told.
struct Told {
    /// The client's certificate, if it showed one.
    peer: Option<crate::auth::PeerCertificate>,
    /// The server name (SNI) it asked for.
    server_name: Option<ServerName>,
    /// Whether ALPN agreed on HTTP/2: the protocol is the one ALPN agreed
    /// on, as Go's server (and so kube-apiserver) decides it, HTTP/2 only
    /// for "h2". Not sniffing the first bytes also keeps hyper's HTTP/1
    /// read buffer at its initial 8 KiB (a replayed prefix makes it grow to
    /// 16 KiB).
    speaks_h2: bool,
}

fn told(tls: &rustls::ServerConnection) -> Told {
    Told {
        peer: tls
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(|der| peer_certificate(der)),
        server_name: tls.server_name().map(|n| ServerName(n.to_string())),
        speaks_h2: tls.alpn_protocol() == Some(b"h2"),
    }
}

/// The TLS handshake of a connection from `remote`, within
/// [`TLS_HANDSHAKE_TIMEOUT`]; `None` when it failed or timed out.
async fn handshake(
    acceptor: &TlsAcceptor,
    tcp: tokio::net::TcpStream,
    remote: std::net::SocketAddr,
) -> Option<tokio_rustls::server::TlsStream<tokio::net::TcpStream>> {
    // Boxed, as the connection is: the task itself then stays small for
    // the connection's whole life.
    let handshake = Box::pin(acceptor.accept(tcp));
    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(error)) => {
            tracing::debug!(%error, %remote, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%remote, "TLS handshake timed out");
            None
        }
    }
}

/// What ends a connection: bindery's shutdown (`stopping` turns true, or
/// its sender is gone), being idle for `idle_timeout`, or a request that
/// drew the GOAWAY (HTTP/2).
struct Ends<'a> {
    stopping: watch::Receiver<bool>,
    activity: &'a idle::Activity,
    idle_timeout: Duration,
    goaway: Option<&'a goaway::Goaway>,
}

/// Serves `connection` until it ends; once [`Ends`] says so, `drain` asks it
/// to finish the requests in flight and take no more, and it is served until
/// it has.
async fn until_drained<C, T>(
    mut connection: Pin<Box<C>>,
    drain: impl FnOnce(Pin<&mut C>),
    ends: Ends<'_>,
) -> T
where
    C: Future<Output = T>,
{
    let Ends {
        mut stopping,
        activity,
        idle_timeout,
        goaway,
    } = ends;
    let goaway_asked = async {
        match goaway {
            Some(goaway) => goaway.asked().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        ended = connection.as_mut() => return ended,
        _ = stopping.wait_for(|stop| *stop) => {}
        _ = activity.idle_for(idle_timeout) => {}
        _ = goaway_asked => {}
    }
    drain(connection.as_mut());
    connection.await
}
