//! Running bindery as operators run an API server: `/metrics` scraped as
//! Prometheus scrapes it (parsed by the Prometheus project's own text
//! parser, `tests/clients/promtext`), protected as kube-apiserver protects
//! its own; `/readyz` not ready before the watch cache has listed and from
//! the moment bindery is asked to stop, while open watches end cleanly.

use crate::a_soak::go_runner;
use crate::availability::{bindery_reaching_with, postgresql_consumer};
use crate::bindery::{Consumer, bindery};
use crate::cache_stall::SilencingProxy;
use crate::fixture::{clusters, unique_name};
use serde_json::{Value, json};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const COLLECTION: &str = "/apis/db.example.com/v1/namespaces/default/postgresqlinstances";
const RESOURCE: &str = "postgresqlinstances.db.example.com";

/// `curl -sk` of `url` with `args` before it: status, `Content-Type` and body.
fn curl(args: &[&str], url: &str) -> (u16, String, String) {
    let output = Command::new("curl")
        .args([
            "-sk",
            "-m",
            "30",
            "-o",
            "-",
            "-w",
            "\n%{http_code} %{content_type}",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (body, tail) = text.rsplit_once('\n').unwrap_or(("", "0 "));
    let (code, content_type) = tail.split_once(' ').unwrap_or((tail, ""));
    (
        code.parse().unwrap_or(0),
        content_type.to_string(),
        body.to_string(),
    )
}

/// The provider's `system:masters` client certificate, as curl arguments.
fn provider_admin() -> Vec<String> {
    let (cert, key) = clusters().provider.pki.admin();
    vec![
        "--cert".into(),
        cert.to_string_lossy().into_owned(),
        "--key".into(),
        key.to_string_lossy().into_owned(),
    ]
}

fn consumer_args(consumer: &Consumer) -> Vec<String> {
    vec![
        "--cert".into(),
        consumer.cert.to_string_lossy().into_owned(),
        "--key".into(),
        consumer.key.to_string_lossy().into_owned(),
    ]
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// `text` parsed by the Prometheus project's text parser: family name →
/// `{type, help, samples: [{labels, value, sum}]}`.
fn parsed(text: &str) -> Value {
    let parser = go_runner::build_from(
        "tests/clients",
        "promtext",
        "github.com/prometheus/common v0.62.0 from the Go module proxy or cache",
    );
    let mut child = Command::new(parser)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtext runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "Prometheus's parser refused bindery's /metrics: {}\n{text}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("promtext prints JSON")
}

/// The samples of `family` whose labels include every pair of `labels`.
fn samples<'a>(families: &'a Value, family: &str, labels: &[(&str, &str)]) -> Vec<&'a Value> {
    families[family]["samples"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| labels.iter().all(|(k, v)| s["labels"][*k] == *v))
        .collect()
}

/// The sum of the values of [`samples`].
pub(crate) fn total(families: &Value, family: &str, labels: &[(&str, &str)]) -> f64 {
    samples(families, family, labels)
        .iter()
        .map(|s| s["value"].as_f64().unwrap_or(0.0))
        .sum()
}

#[test]
fn metrics_are_prometheus_text_for_the_traffic_sent_and_only_for_who_may_get_them() {
    let consumer = postgresql_consumer("metrics");
    let base = &consumer.base_url;
    let as_consumer = consumer_args(&consumer);
    let name = unique_name("scraped");
    let object = json!({
        "apiVersion": "db.example.com/v1", "kind": "PostgreSQLInstance",
        "metadata": {"name": name}, "spec": {"plan": "small"},
    });
    let mut create = strs(&as_consumer);
    let body = object.to_string();
    create.extend([
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        &body,
    ]);
    let (code, _, answer) = curl(&create, &format!("{base}{COLLECTION}"));
    assert_eq!(code, 201, "{answer}");
    for _ in 0..3 {
        let (code, _, answer) = curl(&strs(&as_consumer), &format!("{base}{COLLECTION}"));
        assert_eq!(code, 200, "{answer}");
        let (code, _, _) = curl(&strs(&as_consumer), &format!("{base}{COLLECTION}/{name}"));
        assert_eq!(code, 200);
    }
    let (code, _, _) = curl(
        &strs(&as_consumer),
        &format!(
            "{base}/apis/made.up/v1/namespaces/default/whatever-{}",
            std::process::id()
        ),
    );
    assert_eq!(code, 404);
    let published = clusters().provider.kubectl(&[
        "-n",
        &consumer.cluster_namespace,
        "get",
        "apiserviceexports",
        "-o",
        "jsonpath={.items[0].status.virtualWorkspaceURL}",
    ]);
    assert!(
        published.starts_with(&bindery().url),
        "the export's workspace: {published:?}"
    );
    let workspace = format!("{published}/apis/db.example.com/v1/postgresqlinstances");
    let (code, _, answer) = curl(&strs(&provider_admin()), &workspace);
    assert_eq!(code, 200, "the workspace: {answer}");
    // A watch open while the metrics are read: long-running.
    let mut watch = Command::new("curl")
        .args(["-sk", "-N", "-m", "20"])
        .args(strs(&as_consumer))
        .arg(format!("{base}{COLLECTION}?watch=true&resourceVersion=0"))
        .stdout(Stdio::null())
        .spawn()
        .expect("curl runs");
    std::thread::sleep(Duration::from_secs(2));

    let metrics = format!("{}/metrics", bindery().url);
    let (code, content_type, text) = curl(&strs(&provider_admin()), &metrics);
    assert_eq!(code, 200, "{text}");
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    let families = parsed(&text);
    let _ = watch.kill();
    let _ = watch.wait();

    let mut missing = Vec::new();
    let mut want = |what: &str, holds: bool| {
        if !holds {
            missing.push(what.to_string());
        }
    };
    let consumer_list = [
        ("endpoint", "consumer"),
        ("verb", "LIST"),
        ("resource", "postgresqlinstances"),
        ("group", "db.example.com"),
        ("scope", "namespace"),
        ("code", "200"),
    ];
    want(
        "apiserver_request_total: 3 consumer LISTs",
        total(&families, "apiserver_request_total", &consumer_list) >= 3.0,
    );
    want(
        "apiserver_request_total: the consumer's POST, 201",
        total(
            &families,
            "apiserver_request_total",
            &[("endpoint", "consumer"), ("verb", "POST"), ("code", "201")],
        ) >= 1.0,
    );
    want(
        "apiserver_request_total: GETs of one object, scope resource",
        total(
            &families,
            "apiserver_request_total",
            &[
                ("verb", "GET"),
                ("scope", "resource"),
                ("resource", "postgresqlinstances"),
            ],
        ) >= 3.0,
    );
    want(
        "apiserver_request_total: the workspace's LIST",
        total(
            &families,
            "apiserver_request_total",
            &[("endpoint", "workspace"), ("verb", "LIST"), ("code", "200")],
        ) >= 1.0,
    );
    want(
        "apiserver_request_total: the 404 of a made-up resource, unnamed",
        total(
            &families,
            "apiserver_request_total",
            &[("endpoint", "consumer"), ("code", "404"), ("resource", "")],
        ) >= 1.0,
    );
    want(
        "apiserver_request_duration_seconds: the consumer's lists observed",
        total(
            &families,
            "apiserver_request_duration_seconds",
            &[("endpoint", "consumer"), ("verb", "LIST")],
        ) >= 3.0,
    );
    want(
        "apiserver_response_sizes",
        total(&families, "apiserver_response_sizes", &[("verb", "LIST")]) >= 3.0,
    );
    want(
        "apiserver_current_inflight_requests: the scrape itself",
        total(
            &families,
            "apiserver_current_inflight_requests",
            &[("request_kind", "readOnly")],
        ) >= 1.0,
    );
    want(
        "apiserver_longrunning_requests: the open watch",
        total(
            &families,
            "apiserver_longrunning_requests",
            &[("verb", "WATCH")],
        ) >= 1.0,
    );
    want(
        "bindery_request_phase_duration_seconds: provider time",
        total(
            &families,
            "bindery_request_phase_duration_seconds",
            &[("phase", "provider")],
        ) >= 1.0,
    );
    let cached = [("resource", RESOURCE)];
    want(
        "bindery_watch_cache_objects",
        total(&families, "bindery_watch_cache_objects", &cached) >= 1.0,
    );
    want(
        "apiserver_watch_cache_events_received_total",
        total(
            &families,
            "apiserver_watch_cache_events_received_total",
            &cached,
        ) >= 1.0,
    );
    want(
        "apiserver_watch_cache_initializations_total",
        total(
            &families,
            "apiserver_watch_cache_initializations_total",
            &cached,
        ) >= 1.0,
    );
    want(
        "bindery_watch_cache_upstream_watches_total",
        total(
            &families,
            "bindery_watch_cache_upstream_watches_total",
            &cached,
        ) >= 1.0,
    );
    want(
        "bindery_watch_cache_watchers: the open watch",
        total(&families, "bindery_watch_cache_watchers", &cached) >= 1.0,
    );
    want(
        "apiserver_watch_cache_resource_version",
        total(&families, "apiserver_watch_cache_resource_version", &cached) >= 1.0,
    );
    want(
        "bindery_watch_cache_read_wait_seconds",
        !samples(&families, "bindery_watch_cache_read_wait_seconds", &cached).is_empty(),
    );
    want(
        "apiserver_terminated_watchers_total, bindery_watch_cache_patience_exhausted_total listed",
        families["apiserver_terminated_watchers_total"].is_object()
            && families["bindery_watch_cache_patience_exhausted_total"].is_object(),
    );
    want(
        "rest_client_requests_total: the provider answered 200s",
        total(&families, "rest_client_requests_total", &[("code", "200")]) >= 1.0,
    );
    want(
        "rest_client_request_duration_seconds",
        total(&families, "rest_client_request_duration_seconds", &[]) >= 1.0,
    );
    want(
        "authentication_attempts_total: success",
        total(
            &families,
            "authentication_attempts_total",
            &[("result", "success")],
        ) >= 1.0,
    );
    want(
        "authorization_attempts_total: the scrape was allowed",
        total(
            &families,
            "authorization_attempts_total",
            &[("result", "allowed")],
        ) >= 1.0,
    );
    want(
        "apiserver_delegated_authz_request_total: SubjectAccessReviews sent",
        total(
            &families,
            "apiserver_delegated_authz_request_total",
            &[("code", "201")],
        ) >= 1.0,
    );
    want(
        "bindery_authorization_cache_request_total",
        total(&families, "bindery_authorization_cache_request_total", &[]) >= 1.0,
    );
    want(
        "controller_runtime_reconcile_total: requests reconciled",
        total(
            &families,
            "controller_runtime_reconcile_total",
            &[("controller", "request"), ("result", "success")],
        ) >= 1.0,
    );
    want(
        "controller_runtime_reconcile_time_seconds",
        total(
            &families,
            "controller_runtime_reconcile_time_seconds",
            &[("controller", "export")],
        ) >= 1.0,
    );
    want(
        "workqueue_depth for every controller",
        ["request", "export", "export-status", "schema", "claims"]
            .iter()
            .all(|name| !samples(&families, "workqueue_depth", &[("name", name)]).is_empty()),
    );
    want(
        "leader_election_master_status",
        !samples(
            &families,
            "leader_election_master_status",
            &[("name", "bindery-controllers")],
        )
        .is_empty(),
    );
    assert!(
        missing.is_empty(),
        "missing from /metrics: {missing:#?}\n{text}"
    );
    // No consumer's id or provider namespace is a label value.
    assert!(
        !text.contains(&consumer.id) && !text.contains(&consumer.cluster_namespace),
        "a consumer is named in /metrics:\n{text}"
    );
    assert!(
        !text.contains("made.up") && !text.contains("whatever-"),
        "caller text in /metrics"
    );

    // OpenMetrics, for a scraper that asks for it.
    let admin = provider_admin();
    let mut openmetrics = strs(&admin);
    openmetrics.extend(["-H", "Accept: application/openmetrics-text;version=1.0.0"]);
    let (code, content_type, text) = curl(&openmetrics, &metrics);
    assert_eq!(code, 200);
    assert_eq!(
        content_type,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(
        text.ends_with("# EOF\n"),
        "{}",
        &text[text.len().saturating_sub(200)..]
    );

    // Nobody: 401. A provider user without `get` on the path: kube-apiserver's 403.
    let (code, _, body) = curl(&[], &metrics);
    assert_eq!(code, 401, "{body}");
    let status: Value = serde_json::from_str(&body).expect("a Status");
    assert_eq!(status["reason"], "Unauthorized");
    let provider = &clusters().provider;
    let account = unique_name("scraper");
    provider.kubectl(&["-n", "default", "create", "serviceaccount", &account]);
    let token = provider.kubectl(&["-n", "default", "create", "token", &account]);
    let authorization = format!("Authorization: Bearer {}", token.trim());
    let (code, _, body) = curl(&["-H", &authorization], &metrics);
    assert_eq!(code, 403, "{body}");
    let status: Value = serde_json::from_str(&body).expect("a Status");
    assert_eq!(
        status["message"],
        format!(
            "forbidden: User \"system:serviceaccount:default:{account}\" cannot get path \"/metrics\""
        )
    );
    assert_eq!(status["details"], json!({}));
    // Granted `get` on /metrics, as a Prometheus is: allowed.
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": account},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    });
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&role.to_string()));
    provider.kubectl(&[
        "create",
        "clusterrolebinding",
        &account,
        &format!("--clusterrole={account}"),
        &format!("--serviceaccount=default:{account}"),
    ]);
    // Refusals are remembered for a few seconds.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, _, body) = curl(&["-H", &authorization], &metrics);
        if code == 200 {
            assert!(body.contains("apiserver_request_total"));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still {code} once granted: {body}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The metrics of the bindery at `url`, scraped as the provider's admin and
/// parsed by Prometheus's parser.
pub(crate) fn scrape(url: &str) -> Value {
    let (code, _, text) = curl(&strs(&provider_admin()), &format!("{url}/metrics"));
    assert_eq!(code, 200, "scraping {url}/metrics: {text}");
    parsed(&text)
}

/// `GET <url><path>` without credentials: status and body.
fn probe(url: &str, path: &str) -> (u16, String) {
    let (code, _, body) = curl(&[], &format!("{url}{path}"));
    (code, body)
}

#[test]
fn readyz_waits_for_the_watch_cache_and_fails_first_when_asked_to_stop() {
    // A bound resource, so that a new bindery reflects it before it is ready.
    let consumer = postgresql_consumer("readyz");
    let proxy = SilencingProxy::start();
    proxy.hold_lists(true);
    let mut second = bindery_reaching_with(&proxy.url, &["--shutdown-delay-duration=4"]);
    let url = second.url.clone();

    // The cache's first list is held: alive, not ready.
    let (code, body) = probe(&url, "/readyz?verbose");
    assert_eq!(code, 500, "{body}");
    for line in [
        "[+]ping ok",
        "[+]provider ok",
        "[+]informer-sync ok",
        "[-]watch-cache failed: reason withheld",
        "[+]shutdown ok",
        "readyz check failed",
    ] {
        assert!(body.contains(line), "{line:?} not in {body}");
    }
    assert_eq!(probe(&url, "/livez"), (200, "ok".into()));
    assert_eq!(probe(&url, "/readyz").0, 500);
    assert_eq!(probe(&url, "/healthz").0, 500);
    let (code, body) = probe(&url, "/readyz/watch-cache");
    assert_eq!(code, 500);
    assert!(body.starts_with("internal server error: "), "{body}");
    assert_eq!(probe(&url, "/readyz/informer-sync"), (200, "ok".into()));
    let (code, body) = probe(&url, "/readyz?exclude=watch-cache&verbose");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("[+]watch-cache excluded: ok"), "{body}");
    assert_eq!(probe(&url, "/readyz/nothing").0, 404);

    // The list answered: ready.
    proxy.hold_lists(false);
    let deadline = Instant::now() + Duration::from_secs(15);
    while probe(&url, "/readyz") != (200, "ok".to_string()) {
        assert!(
            Instant::now() < deadline,
            "not ready 15 s after the cache could list: {:?}",
            probe(&url, "/readyz?verbose")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, body) = probe(&url, "/readyz?verbose");
    assert_eq!(code, 200);
    assert!(
        body.ends_with("[+]shutdown ok\nreadyz check passed\n"),
        "{body}"
    );

    // A watch open when bindery is asked to stop.
    let watch = Command::new("curl")
        .args([
            "-sk",
            "-N",
            "-m",
            "60",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ])
        .args(strs(&consumer_args(&consumer)))
        .arg(format!(
            "{url}/clusters/{}{COLLECTION}?watch=true&resourceVersion=0",
            consumer.id
        ))
        .stdout(Stdio::piped())
        .spawn()
        .expect("curl runs");
    std::thread::sleep(Duration::from_secs(1));
    let asked = Instant::now();
    second.terminate();
    std::thread::sleep(Duration::from_millis(300));
    let (code, body) = probe(&url, "/readyz?verbose");
    assert_eq!(code, 500, "not ready once asked to stop: {body}");
    assert!(
        body.contains("[-]shutdown failed: reason withheld"),
        "{body}"
    );
    assert_eq!(probe(&url, "/livez"), (200, "ok".into()), "still alive");
    assert_eq!(
        probe(&url, "/readyz/shutdown"),
        (
            500,
            "internal server error: process is shutting down\n".into()
        )
    );
    // Still serving during the delay.
    let (code, _, body) = curl(
        &strs(&consumer_args(&consumer)),
        &format!("{url}/clusters/{}{COLLECTION}", consumer.id),
    );
    assert_eq!(code, 200, "serving during the shutdown delay: {body}");
    // After the delay the watch ends cleanly: curl saw the whole response.
    let output = watch.wait_with_output().unwrap();
    let ended = asked.elapsed();
    assert!(
        output.status.success(),
        "the watch did not end cleanly: curl {:?}, {}",
        output.status,
        String::from_utf8_lossy(&output.stdout)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "200");
    assert!(
        ended >= Duration::from_secs(3) && ended < Duration::from_secs(30),
        "the watch ended {ended:?} after SIGTERM (delay 4 s)"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !second.exited() {
        assert!(
            Instant::now() < deadline,
            "bindery did not exit after draining"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
