//! Requests on behalf of an app cluster's users, as its aggregation layer
//! sends them: the app cluster's real front-proxy client certificate with
//! `X-Remote-*` headers, to bindery. The registered front-proxy CA decides
//! the consumer; the app cluster's RBAC decides each request (with
//! kube-apiserver's 403); the headers mean nothing from anyone else, and a
//! front-proxy certificate of another app cluster is refused.

use crate::export_status::{Export, in_sync};
use crate::fixture::{clusters, unique_name};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

const RESOURCE: &str = "postgresqlinstances.db.example.com";

/// Registers the test app cluster for `export`'s consumer, trusting
/// `requestheader_ca` as its front proxy.
pub(crate) fn register(export: &Export, requestheader_ca: &Path) {
    register_with(export, requestheader_ca, &[]);
}

/// [`register`], with more `kubectl create secret generic` arguments.
pub(crate) fn register_with(export: &Export, requestheader_ca: &Path, more: &[String]) {
    let app = &clusters().app;
    let mut args = vec![
        "-n".to_string(),
        export.namespace.clone(),
        "create".into(),
        "secret".into(),
        "generic".into(),
        "app-cluster".into(),
        format!("--from-file=kubeconfig={}", app.kubeconfig.display()),
        format!(
            "--from-file=requestheader-client-ca.crt={}",
            requestheader_ca.display()
        ),
        "--from-literal=requestheader-allowed-names=front-proxy-client".into(),
    ];
    args.extend(more.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    clusters().provider.kubectl(&args);
}

/// curl against the consumer endpoint of `export` with `cert`/`key` and
/// `headers`; returns the status code and body.
fn curl(export: &Export, path: &str, cert: (&Path, &Path), headers: &[&str]) -> (u16, String) {
    curl_as(export, "GET", path, Some(cert), headers)
}

/// `method` on `path` of `export`'s consumer endpoint, with a client
/// certificate or none, and `headers`; returns the status code and body.
pub(crate) fn curl_as(
    export: &Export,
    method: &str,
    path: &str,
    cert: Option<(&Path, &Path)>,
    headers: &[&str],
) -> (u16, String) {
    let mut command = std::process::Command::new("curl");
    command.args(["-sk", "-w", "\n%{http_code}", "-X", method]);
    if let Some((cert, key)) = cert {
        command.arg("--cert").arg(cert).arg("--key").arg(key);
    }
    for header in headers {
        command.args(["-H", header]);
    }
    let output = command
        .arg(format!("{}{path}", export.consumer.base_url))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.parse().unwrap_or(0), body.to_string())
}

/// Retries `curl` until it answers `want` (registrations arrive by watch).
fn eventually(
    export: &Export,
    path: &str,
    cert: (&Path, &Path),
    headers: &[&str],
    want: u16,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, body) = curl(export, path, cert, headers);
        if code == want {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{path}: {code}, not {want}, for 30 s: {body}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn front_proxy_cert() -> (std::path::PathBuf, std::path::PathBuf) {
    let pki = &clusters().app.pki;
    pki.front_proxy_client()
}

fn list_path(namespace: &str) -> String {
    format!("/apis/db.example.com/v1/namespaces/{namespace}/postgresqlinstances")
}

fn bound_export(prefix: &str) -> Export {
    let export = Export::requested(
        &unique_name(prefix),
        &unique_name(&format!("{prefix}-cluster")),
        json!({}),
    );
    register(&export, &clusters().app.pki.front_proxy_ca());
    export.bind(in_sync());
    export.wait_condition("Connected", "True", "APIServiceBindingFound");
    export
}

#[test]
fn the_app_clusters_rbac_decides_with_kube_apiservers_403() {
    let export = bound_export("fp-rbac");
    let user = unique_name("alice");
    let (cert, key) = front_proxy_cert();
    let as_user = [
        format!("X-Remote-User: {user}"),
        "X-Remote-Group: system:authenticated".to_string(),
    ];
    let as_user: Vec<&str> = as_user.iter().map(String::as_str).collect();

    // A Role for the bound resource in one app namespace.
    let app = &clusters().app;
    let allowed = unique_name("fp-allowed");
    app.kubectl(&["create", "namespace", &allowed]);
    // (As YAML: `kubectl create role` insists the resource is served there,
    // and no APIService serves it in the app cluster yet.)
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "db-reader", "namespace": allowed},
        "rules": [{"apiGroups": ["db.example.com"], "resources": ["postgresqlinstances"],
            "verbs": ["get", "list", "watch"]}],
    });
    app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&role.to_string()));
    app.kubectl(&[
        "-n",
        &allowed,
        "create",
        "rolebinding",
        "db-reader",
        "--role=db-reader",
        &format!("--user={user}"),
    ]);
    // The app cluster's own answer, as a SubjectAccessReview (`kubectl auth
    // can-i` needs the resource in discovery, which the APIService of issue 5
    // brings).
    let can_i = |verb: &str, namespace: &str| {
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": ["system:authenticated"],
                "resourceAttributes": {"verb": verb, "group": "db.example.com",
                    "resource": "postgresqlinstances", "namespace": namespace}},
        });
        let allowed = app.kubectl_with_stdin(
            &["create", "-f", "-", "-o", "jsonpath={.status.allowed}"],
            Some(&review.to_string()),
        );
        allowed.trim() == "true"
    };

    // Allowed there: bindery answers the list.
    assert!(can_i("list", &allowed));
    let body = eventually(&export, &list_path(&allowed), (&cert, &key), &as_user, 200);
    let list: serde_json::Value = serde_json::from_str(&body).expect(&body);
    assert_eq!(list["kind"], "PostgreSQLInstanceList");

    // Elsewhere, and for verbs the Role lacks: kube-apiserver's exact 403.
    assert!(!can_i("list", "default"));
    let (code, body) = curl(&export, &list_path("default"), (&cert, &key), &as_user);
    assert_eq!(code, 403, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).expect(&body);
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        format!(
            "{RESOURCE} is forbidden: User \"{user}\" cannot list resource \
             \"postgresqlinstances\" in API group \"db.example.com\" in the namespace \"default\""
        )
    );
    assert!(!can_i("delete", &allowed));
    let path = format!("{}/orders", list_path(&allowed));
    let (code, body) = curl_as(&export, "DELETE", &path, Some((&cert, &key)), &as_user);
    assert_eq!(code, 403, "{body}");
}

#[test]
fn remote_user_headers_mean_nothing_from_anyone_but_the_front_proxy() {
    let export = bound_export("fp-forged");
    let consumer = &export.consumer;
    // The consumer's own certificate with forged headers: still the
    // consumer, not "alice" (who has no RBAC in the app cluster at all).
    let forged = ["X-Remote-User: alice", "X-Remote-Group: system:masters"];
    let body = eventually(
        &export,
        &list_path("default"),
        (&consumer.cert, &consumer.key),
        &forged,
        200,
    );
    assert!(body.contains("PostgreSQLInstanceList"), "{body}");
    // No certificate: headers alone authenticate nobody.
    let (code, _) = curl_as(&export, "GET", &list_path("default"), None, &forged);
    assert_eq!(code, 401);
    // The front proxy without a user: nobody either.
    let (cert, key) = front_proxy_cert();
    let (code, _) = curl(&export, &list_path("default"), (&cert, &key), &[]);
    assert_eq!(code, 401);
}

#[test]
fn another_app_clusters_front_proxy_certificate_is_refused() {
    // This consumer's app cluster trusts the provider cluster's front-proxy
    // CA, not the app cluster's: the app cluster's front proxy is a stranger.
    let export = Export::requested(
        &unique_name("fp-foreign"),
        &unique_name("fp-foreign-cluster"),
        json!({}),
    );
    register(&export, &clusters().provider.pki.front_proxy_ca());
    export.bind(in_sync());
    export.wait_condition("Connected", "True", "APIServiceBindingFound");
    let (cert, key) = front_proxy_cert();
    let headers = ["X-Remote-User: alice", "X-Remote-Group: system:masters"];
    // Give the registration time to arrive, then it must still be refused.
    std::thread::sleep(Duration::from_secs(2));
    let (code, body) = curl(&export, &list_path("default"), (&cert, &key), &headers);
    assert_eq!(code, 401, "{body}");
    // The provider's own front proxy, which this registration trusts, is
    // believed: the registration is in effect.
    let (provider_cert, provider_key) = clusters().provider.pki.front_proxy_client();
    let (code, body) = curl(
        &export,
        &list_path("default"),
        (&provider_cert, &provider_key),
        &headers,
    );
    assert_ne!(code, 401, "{body}");
}

/// The user kube-aggregator's availability checks send as.
const AGGREGATOR: [&str; 2] = [
    "X-Remote-User: system:kube-aggregator",
    "X-Remote-Group: system:masters",
];

/// GET `path` at bindery's aggregated paths (no server name, as
/// kube-aggregator before 1.36 sends) as the app cluster's front proxy
/// speaking for kube-aggregator.
fn aggregated_get(path: &str) -> (u16, String) {
    let (cert, key) = front_proxy_cert();
    let output = std::process::Command::new("curl")
        .args(["-sk", "-w", "\n%{http_code}"])
        .args(AGGREGATOR.iter().flat_map(|header| ["-H", header]))
        .arg("--cert")
        .arg(&cert)
        .arg("--key")
        .arg(&key)
        .arg(format!("{}{path}", crate::bindery::bindery().url))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.parse().unwrap_or(0), body.to_string())
}

#[test]
fn discovery_for_an_app_cluster_registered_twice_shows_what_either_serves() {
    let export = bound_export("fp-twice");
    // The same app cluster registered again, for a consumer that binds
    // nothing and whose name sorts before every other.
    let id = unique_name("0twice");
    let namespace = format!("kube-bind-{id}");
    clusters()
        .provider
        .kubectl(&["create", "namespace", &namespace]);
    let twice = Export {
        name: String::new(),
        consumer: crate::bindery::bindery().endpoint(&id),
        namespace,
    };
    register(&twice, &clusters().app.pki.front_proxy_ca());
    let (cert, key) = front_proxy_cert();
    eventually(&twice, "/apis", (&cert, &key), &AGGREGATOR, 200);
    eventually(
        &export,
        "/apis/db.example.com/v1",
        (&cert, &key),
        &AGGREGATOR,
        200,
    );

    // kube-aggregator's availability check and its discovery both name no
    // consumer: they see what any registration of the cluster serves.
    let (code, body) = aggregated_get("/apis/db.example.com/v1");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"postgresqlinstances\""), "{body}");
    let (code, body) = aggregated_get("/apis");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("db.example.com"), "{body}");
    // Objects are another matter: which consumer's they are cannot be told.
    let (code, body) = aggregated_get(&list_path("default"));
    assert_eq!(code, 401, "{body}");
}
