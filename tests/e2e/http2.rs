//! One HTTP/2 connection to bindery, as an app cluster's aggregator holds
//! one per APIService (the benchmarks include this file as `http2`).

use kube::client::ConfigExt;

/// A kube-rs client over one HTTP/2 connection, as an app cluster's
/// aggregator reaches bindery: every request, watches included, goes over it.
pub async fn client(config: &kube::Config) -> kube::Client {
    let sender = connection(config).await;
    let send = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let mut sender = sender.clone();
        async move { sender.send_request(request).await }
    });
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .service(send);
    kube::Client::new(service, config.default_namespace.clone())
}

/// One HTTP/2 connection to the server `config` names, as Go's transport
/// makes one (ALPN `h2`, TCP_NODELAY): requests on it need absolute URIs.
pub async fn connection(
    config: &kube::Config,
) -> hyper::client::conn::http2::SendRequest<kube::client::Body> {
    let mut tls = config.rustls_client_config().expect("a TLS config");
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let url = &config.cluster_url;
    let (host, port) = (
        url.host().expect("a host").to_string(),
        url.port_u16().expect("a port"),
    );
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .expect("connecting to the server");
    // Go (so an aggregator) sets TCP_NODELAY on every connection: without
    // it a request's body waits for the ACK of its headers (Nagle against
    // delayed ACKs, about 40 ms on loopback).
    tcp.set_nodelay(true).expect("TCP_NODELAY");
    let server_name = rustls_pki_types::ServerName::try_from(host).expect("a server name");
    let stream = tokio_rustls::TlsConnector::from(std::sync::Arc::new(tls))
        .connect(server_name, tcp)
        .await
        .expect("a TLS handshake");
    assert_eq!(
        stream.get_ref().1.alpn_protocol(),
        Some(&b"h2"[..]),
        "the server speaks HTTP/2"
    );
    let (sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("an HTTP/2 handshake");
    tokio::spawn(connection);
    sender
}
