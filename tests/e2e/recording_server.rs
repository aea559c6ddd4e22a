//! A loopback HTTPS listener for tests that records who called it: the
//! verified client certificate's common name and the request headers. It
//! requires client certificates from one CA, as an aggregated API server does
//! with the front-proxy CA.

use bindery::certs::authority::{Authority, Usage};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// One request as the listener saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    pub client_common_name: Option<String>,
    pub remote_user: Option<String>,
    pub remote_groups: Vec<String>,
}

/// A running recording listener.
pub struct RecordingServer {
    pub addr: SocketAddr,
    /// PEM of the CA that signed the serving certificate (the APIService caBundle).
    pub ca_pem: String,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
}

/// Answers `GET /apis/<group>/<version>` with an empty APIResourceList and
/// anything else with a 404 Status.
fn respond(group_version: &str, path: &str) -> Response<Full<Bytes>> {
    let (status, body) = if path == format!("/apis/{group_version}") {
        (
            StatusCode::OK,
            serde_json::json!({
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": group_version,
                "resources": [],
            }),
        )
    } else {
        (
            StatusCode::NOT_FOUND,
            serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "reason": "NotFound", "code": 404,
                "message": "the server could not find the requested resource",
            }),
        )
    };
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("valid response")
}

impl RecordingServer {
    /// Starts a listener on a free loopback port, serving `group_version`,
    /// with a certificate for `dns_name` and requiring client certificates
    /// signed by `client_ca_pem`. It runs on its own thread and runtime, so a
    /// test blocked on kubectl does not stall it.
    pub fn start(group_version: &str, dns_name: &str, client_ca_pem: &str) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = Authority::generate("recording-server-ca").expect("CA");
        let serving = ca
            .issue(
                dns_name,
                &Usage::Server {
                    dns_names: vec![dns_name.to_string()],
                    ips: vec![],
                },
            )
            .expect("serving certificate");

        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
            roots.add(cert.expect("client CA PEM")).expect("client CA");
        }
        let verifier = WebPkiClientVerifier::builder(Arc::new(roots))
            .build()
            .expect("client verifier");
        let chain = vec![CertificateDer::from_pem_slice(serving.cert_pem.as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes()).unwrap();
        let mut config = rustls::ServerConfig::builder()
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .expect("server config");
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));

        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("server runtime");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = requests.clone();
        let group_version = group_version.to_string();
        std::thread::spawn(move || {
            runtime.block_on(async move {
                let listener = TcpListener::from_std(listener).expect("tokio listener");
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        return;
                    };
                    let acceptor = acceptor.clone();
                    let recorded = recorded.clone();
                    let group_version = group_version.clone();
                    tokio::spawn(async move {
                        // A handshake without a valid client certificate fails here.
                        let Ok(tls) = acceptor.accept(tcp).await else {
                            return;
                        };
                        let client_common_name = tls
                            .get_ref()
                            .1
                            .peer_certificates()
                            .and_then(|chain| chain.first())
                            .and_then(|der| common_name(der.as_ref()));
                        let service =
                            hyper::service::service_fn(move |request: Request<Incoming>| {
                                let headers = request.headers();
                                let header_values = |name: &str| -> Vec<String> {
                                    headers
                                        .get_all(name)
                                        .iter()
                                        .filter_map(|v| v.to_str().ok().map(str::to_string))
                                        .collect()
                                };
                                let path = request.uri().path().to_string();
                                recorded.lock().unwrap().push(Recorded {
                                    path: path.clone(),
                                    client_common_name: client_common_name.clone(),
                                    remote_user: header_values("x-remote-user").into_iter().next(),
                                    remote_groups: header_values("x-remote-group"),
                                });
                                let response = respond(&group_version, &path);
                                async move { Ok::<_, std::convert::Infallible>(response) }
                            });
                        let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                            .serve_connection(TokioIo::new(tls), service)
                            .await;
                    });
                }
            })
        });
        RecordingServer {
            addr,
            ca_pem: ca.pem().cert_pem.clone(),
            requests,
        }
    }

    /// Requests recorded so far for `path`.
    pub fn requests_for(&self, path: &str) -> Vec<Recorded> {
        let requests = self.requests.lock().unwrap();
        requests
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }
}

fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_string)
}
