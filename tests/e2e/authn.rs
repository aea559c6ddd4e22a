//! Authentication as a layer, against the real clusters: a request without
//! credentials is refused with kube-apiserver's 401 before bindery reads a
//! byte of its body (on `/bind`, the workspace and the consumer endpoint);
//! an authenticated body that does not arrive in time is answered with
//! kube-apiserver's 504; and a bearer token, refused or accepted, costs the
//! cluster that reviews it one TokenReview however often it is sent (the
//! provider's for `/bind` and the workspace, the app cluster's for the
//! consumer endpoint), counted with that kube-apiserver's own metrics.

use crate::binder::{binder_token, curl_with_token};
use crate::bindery::{bindery, serving_only_with_env};
use crate::fixture::{Cluster, clusters, unique_name};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A raw HTTP/1.1 connection over TLS (`openssl s_client`), so a test can
/// send a request head and part of a body and keep the connection open.
struct RawTls {
    child: Child,
    stdin: Option<ChildStdin>,
    received: mpsc::Receiver<Vec<u8>>,
    opened: Instant,
}

impl RawTls {
    /// Connects to `url`'s host and port, with a client certificate if given.
    fn open(url: &str, certificate: Option<(&Path, &Path)>) -> Self {
        let address = url.trim_start_matches("https://");
        let mut command = Command::new("openssl");
        command.args([
            "s_client", "-quiet", "-alpn", "http/1.1", "-connect", address,
        ]);
        if let Some((cert, key)) = certificate {
            command.arg("-cert").arg(cert).arg("-key").arg(key);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("openssl s_client starts");
        let mut stdout = child.stdout.take().expect("piped");
        let (sender, received) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buffer) {
                if n == 0 || sender.send(buffer[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Self {
            stdin: child.stdin.take(),
            child,
            received,
            opened: Instant::now(),
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("open");
        stdin.write_all(bytes).expect("sending");
        stdin.flush().expect("flushing");
    }

    /// The status code and body of the answer, and how long after the
    /// connection was opened it was complete; `None` when none came within
    /// `wait`.
    fn answer(&self, wait: Duration) -> Option<(u16, String, Duration)> {
        let deadline = Instant::now() + wait;
        let mut answer = Vec::new();
        loop {
            if let Some(parsed) = complete(&answer) {
                return Some((parsed.0, parsed.1, self.opened.elapsed()));
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            match self.received.recv_timeout(left) {
                Ok(bytes) => answer.extend(bytes),
                Err(_) => return None,
            }
        }
    }
}

impl Drop for RawTls {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The status and body of a complete HTTP/1.1 answer with a
/// Content-Length (or a chunked one that has ended).
fn complete(answer: &[u8]) -> Option<(u16, String)> {
    let text = String::from_utf8_lossy(answer);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split(' ').nth(1)?.parse().ok()?;
    let header = |name: &str| {
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_string())
        })
    };
    if let Some(length) = header("content-length") {
        let length: usize = length.parse().ok()?;
        return (body.len() >= length).then(|| (code, body[..length].to_string()));
    }
    dechunked(body).map(|body| (code, body))
}

/// A chunked body's content, once its last chunk has come.
fn dechunked(mut body: &str) -> Option<String> {
    let mut content = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n")?;
        let size = usize::from_str_radix(size.trim(), 16).ok()?;
        if size == 0 {
            return Some(content);
        }
        content.push_str(rest.get(..size)?);
        body = rest.get(size..)?.strip_prefix("\r\n")?;
    }
}

/// The head of a POST of `path` announcing a body of `length` bytes.
fn post_head(path: &str, length: usize, token: Option<&str>) -> Vec<u8> {
    let authorization = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    format!(
        "POST {path} HTTP/1.1\r\nHost: bindery\r\nContent-Type: application/json\r\n\
         {authorization}Content-Length: {length}\r\n\r\n"
    )
    .into_bytes()
}

#[test]
fn a_request_without_credentials_is_refused_before_its_body_is_read() {
    let paths = [
        "/bind/bindings".to_string(),
        format!(
            "/services/export/{}/clusters/*/apis/db.example.com/v1/namespaces/default/postgresqlinstances",
            unique_name("unread")
        ),
        "/clusters/unread/apis/db.example.com/v1/namespaces/default/postgresqlinstances".into(),
    ];
    let mut problems = Vec::new();
    for path in paths {
        let mut connection = RawTls::open(&bindery().url, None);
        // 3 MB announced, a few bytes sent, and the connection kept open.
        connection.send(&post_head(&path, 3_000_000, None));
        connection.send(br#"{"apiVersion":"#);
        let Some((code, body, after)) = connection.answer(Duration::from_secs(5)) else {
            problems.push(format!(
                "POST {path}: no answer within 5 s (bindery waits for the body)"
            ));
            continue;
        };
        let status: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let unauthorized = serde_json::json!({"kind": "Status", "apiVersion": "v1",
            "metadata": {}, "status": "Failure", "message": "Unauthorized",
            "reason": "Unauthorized", "code": 401});
        if code != 401 || status != unauthorized {
            problems.push(format!("POST {path}: {code} {body}"));
        } else if after > Duration::from_millis(1500) {
            problems.push(format!("POST {path}: answered after {after:?}"));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn an_authenticated_body_that_does_not_arrive_in_time_is_answered_504() {
    const TIMEOUT: Duration = Duration::from_secs(2);
    let server = serving_only_with_env(
        &clusters().provider.kubeconfig,
        &[],
        &[("BINDERY_REQUEST_BODY_TIMEOUT", "2")],
    );
    let consumer = bindery().endpoint(&unique_name("slow-body"));
    let (_, token) = binder_token(false);
    let requests = [
        (
            format!(
                "/clusters/{}/apis/db.example.com/v1/namespaces/default/postgresqlinstances",
                consumer.id
            ),
            Some((consumer.cert.as_path(), consumer.key.as_path())),
            None,
        ),
        ("/bind/bindings".to_string(), None, Some(token.as_str())),
    ];
    let timeout = serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure",
        "message": "Timeout: request did not complete within the allotted timeout",
        "reason": "Timeout", "details": {}, "code": 504});
    let mut problems = Vec::new();
    for (path, certificate, token) in requests {
        let mut connection = RawTls::open(&server.url, certificate);
        connection.send(&post_head(&path, 1000, token));
        connection.send(br#"{"apiVersion":"#);
        let Some((code, body, after)) = connection.answer(TIMEOUT * 5) else {
            problems.push(format!("POST {path}: no answer within {:?}", TIMEOUT * 5));
            continue;
        };
        let status: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        if code != 504 || status != timeout {
            problems.push(format!("POST {path}: {code} {body}"));
        } else if after < TIMEOUT - Duration::from_millis(200) {
            problems.push(format!(
                "POST {path}: answered after {after:?}, before the timeout"
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The samples of `cluster`'s metric `metric` with all of `labels`, summed.
pub(crate) fn cluster_metric(cluster: &Cluster, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let text = cluster.kubectl(&["get", "--raw", "/metrics"]);
    text.lines()
        .filter(|line| line.starts_with(&format!("{metric}{{")))
        .filter(|line| {
            labels
                .iter()
                .all(|(k, v)| line.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// How many TokenReviews `cluster` has answered.
fn token_reviews(cluster: &Cluster) -> f64 {
    cluster_metric(
        cluster,
        "apiserver_request_total",
        &[("resource", "tokenreviews")],
    )
}

/// Sends a token from `token` ten times with `send`, which returns the
/// status code that must be `want`, and requires that `cluster` reviewed it
/// at most once. Other tests review tokens at the same time, so an attempt
/// that counted more is made again (with a new token), three times at most.
fn reviewed_once(
    what: &str,
    cluster: &Cluster,
    token: impl Fn() -> String,
    want: u16,
    send: impl Fn(&str) -> (u16, String),
) {
    const SENT: usize = 10;
    let mut counted = Vec::new();
    for _ in 0..3 {
        let token = token();
        let before = token_reviews(cluster);
        for _ in 0..SENT {
            let (code, body) = send(&token);
            assert_eq!(code, want, "{what}: {body}");
        }
        // The count is taken after the answer is written.
        std::thread::sleep(Duration::from_millis(300));
        let reviews = token_reviews(cluster) - before;
        if reviews <= 1.0 {
            return;
        }
        counted.push(reviews);
    }
    panic!(
        "{what}: the same token sent {SENT} times cost {} {counted:?} TokenReviews",
        cluster.name
    );
}

fn bad_token() -> String {
    format!("not-a-token-{}", unique_name("bad"))
}

/// GET `url` at the test bindery with a bearer `token`.
fn get_with(url: &str, token: &str) -> (u16, String) {
    let (code, body) = curl_with_token("GET", url, Some(token), None);
    (code, body.to_string())
}

#[test]
fn a_refused_token_costs_the_provider_one_review_on_bind() {
    let templates = format!("{}/bind/templates", bindery().url);
    let provider = &clusters().provider;
    reviewed_once("a bad token on /bind", provider, bad_token, 401, |token| {
        get_with(&templates, token)
    });
}

#[test]
fn a_refused_token_costs_the_provider_one_review_on_the_workspace() {
    let workspace = format!(
        "{}/services/export/{}/clusters/*/apis/db.example.com/v1/postgresqlinstances",
        bindery().url,
        unique_name("reviewed")
    );
    let provider = &clusters().provider;
    reviewed_once(
        "a bad token on the workspace",
        provider,
        bad_token,
        401,
        |token| get_with(&workspace, token),
    );
}

#[test]
fn an_accepted_token_costs_the_provider_one_review() {
    let templates = format!("{}/bind/templates", bindery().url);
    let provider = &clusters().provider;
    let good = || binder_token(false).1;
    reviewed_once("a good token on /bind", provider, good, 200, |token| {
        get_with(&templates, token)
    });
}

/// The consumer endpoint of a consumer whose app cluster is registered
/// without token keys (every bearer token is reviewed by the app cluster),
/// once bindery knows the registration; and a good token of that cluster.
fn registered_for_reviews() -> (String, impl Fn() -> String) {
    let id = unique_name("reviews");
    let namespace = format!("kube-bind-{id}");
    let (provider, app) = (&clusters().provider, &clusters().app);
    provider.kubectl(&["create", "namespace", &namespace]);
    provider.kubectl(&[
        "-n",
        &namespace,
        "create",
        "secret",
        "generic",
        "app-cluster",
        &format!("--from-file=kubeconfig={}", app.kubeconfig.display()),
        &format!(
            "--from-file=requestheader-client-ca.crt={}",
            app.pki.front_proxy_ca().display()
        ),
        "--from-literal=requestheader-allowed-names=front-proxy-client",
    ]);
    let url = format!(
        "{}/clusters/{id}/apis/db.example.com/v1/namespaces/default/postgresqlinstances",
        bindery().url
    );
    let good = || {
        clusters()
            .app
            .kubectl(&["-n", "default", "create", "token", "default"])
            .trim()
            .to_string()
    };
    // Registrations arrive by watch: a good token is known once it has.
    let deadline = Instant::now() + Duration::from_secs(30);
    let token = good();
    while get_with(&url, &token).0 == 401 {
        assert!(Instant::now() < deadline, "the registration never arrived");
        std::thread::sleep(Duration::from_millis(300));
    }
    (url, good)
}

#[test]
fn a_refused_token_costs_the_app_cluster_one_review() {
    let (url, _) = registered_for_reviews();
    let app = &clusters().app;
    reviewed_once(
        "a bad token on the consumer endpoint",
        app,
        bad_token,
        401,
        |token| get_with(&url, token),
    );
}

#[test]
fn an_accepted_token_costs_the_app_cluster_one_review() {
    let (url, good) = registered_for_reviews();
    // Accepted, then refused by the app cluster's RBAC.
    let app = &clusters().app;
    reviewed_once(
        "a good token on the consumer endpoint",
        app,
        good,
        403,
        |token| get_with(&url, token),
    );
}
