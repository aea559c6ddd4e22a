//! A door's client: HTTPS over HTTP/1.1 or HTTP/2 (chosen by ALPN, as
//! real clients choose it), with a client certificate or a bearer token,
//! reading every answer to its end (a watch until the server ends it).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How a door authenticates.
#[derive(Clone)]
pub enum Credential {
    Certificate { cert: Vec<u8>, key: Vec<u8> },
    Token(String),
}

/// One server, one credential, one protocol.
pub struct Client {
    address: String,
    tls: Arc<rustls::ClientConfig>,
    token: Option<String>,
    h2: bool,
    sender: Option<Sender>,
}

enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

/// An answer: status, Content-Type and the whole body.
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub body: Bytes,
}

impl Client {
    /// A client of `url` (`https://127.0.0.1:<port>`) trusting `ca`.
    pub fn new(url: &str, ca: &Path, credential: &Credential, h2: bool) -> Self {
        let mut roots = rustls::RootCertStore::empty();
        let ca_pem = std::fs::read(ca).unwrap_or_else(|e| panic!("reading {}: {e}", ca.display()));
        for cert in CertificateDer::pem_slice_iter(&ca_pem) {
            roots
                .add(cert.expect("a CA certificate"))
                .expect("a usable CA");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots);
        let (mut config, token) = match credential {
            Credential::Certificate { cert, key } => {
                let chain: Vec<_> = CertificateDer::pem_slice_iter(cert)
                    .collect::<Result<_, _>>()
                    .expect("a certificate");
                let key = PrivateKeyDer::from_pem_slice(key).expect("a key");
                (
                    builder
                        .with_client_auth_cert(chain, key)
                        .expect("a client identity"),
                    None,
                )
            }
            Credential::Token(token) => (builder.with_no_client_auth(), Some(token.clone())),
        };
        config.alpn_protocols = vec![if h2 {
            b"h2".to_vec()
        } else {
            b"http/1.1".to_vec()
        }];
        Self {
            address: url
                .trim_start_matches("https://")
                .trim_end_matches('/')
                .to_string(),
            tls: Arc::new(config),
            token,
            h2,
            sender: None,
        }
    }

    async fn connect(&mut self) -> Result<(), String> {
        let tcp = tokio::net::TcpStream::connect(&self.address)
            .await
            .map_err(|e| format!("connect {}: {e}", self.address))?;
        let host = self
            .address
            .rsplit_once(':')
            .map_or(self.address.as_str(), |(h, _)| h);
        let name = ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
        let tls = tokio_rustls::TlsConnector::from(self.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        let io = hyper_util::rt::TokioIo::new(tls);
        self.sender = Some(if self.h2 {
            let (sender, connection) =
                hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
                    .await
                    .map_err(|e| format!("h2: {e}"))?;
            tokio::spawn(connection);
            Sender::H2(sender)
        } else {
            let (sender, connection) = hyper::client::conn::http1::handshake(io)
                .await
                .map_err(|e| format!("http/1.1: {e}"))?;
            tokio::spawn(connection);
            Sender::H1(sender)
        });
        Ok(())
    }

    /// Sends one request; `Err` for a transport failure (the connection is
    /// made anew for the next one).
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&'static str, String)],
        body: &[u8],
    ) -> Result<Answer, String> {
        let result = tokio::time::timeout(
            Duration::from_secs(20),
            self.send_once(method, path, headers, body),
        )
        .await;
        match result {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => {
                self.sender = None;
                Err(e)
            }
            Err(_) => {
                self.sender = None;
                Err("no answer within 20 s".into())
            }
        }
    }

    async fn send_once(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&'static str, String)],
        body: &[u8],
    ) -> Result<Answer, String> {
        if self.sender.is_none() {
            self.connect().await?;
        }
        let uri = if self.h2 {
            format!("https://{}{path}", self.address)
        } else {
            path.to_string()
        };
        let mut request = http::Request::builder()
            .method(method)
            .uri(&uri)
            .header("host", &self.address)
            .header("user-agent", "bindery-fuzz/1");
        if let Some(token) = &self.token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let request = request
            .body(Full::new(Bytes::copy_from_slice(body)))
            .map_err(|e| format!("request: {e}"))?;
        let response = match self.sender.as_mut().expect("connected") {
            Sender::H1(sender) => {
                sender.ready().await.map_err(|e| e.to_string())?;
                sender.send_request(request).await
            }
            Sender::H2(sender) => {
                sender.ready().await.map_err(|e| e.to_string())?;
                sender.send_request(request).await
            }
        }
        .map_err(|e| format!("send: {e}"))?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        Ok(Answer {
            status,
            content_type,
            body,
        })
    }
}
