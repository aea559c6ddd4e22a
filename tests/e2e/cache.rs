//! The shared watch cache against the real provider: three consumers list
//! one resource at `resourceVersion=0` many times, and the provider sees no
//! LIST for them and no more WATCHes than after the first (its own metrics
//! say so), while each consumer
//! still sees exactly its own objects, its own writes at once, and no other
//! consumer's. A consistent list (no resourceVersion) still goes to the
//! provider.

use crate::bind::gadget_crd;
use crate::bindery::{Consumer, bindery};
use crate::controllers::install_examples;
use crate::fixture::{clusters, unique_name};
use std::process::Command;

/// The provider's metric samples named `metric` with all of `labels`,
/// summed.
fn provider_metric(metric: &str, labels: &[(&str, &str)]) -> f64 {
    let text = clusters().provider.kubectl(&["get", "--raw", "/metrics"]);
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

/// A GET of `path` through the consumer's endpoint, as JSON.
fn get_raw(consumer: &Consumer, path: &str) -> serde_json::Value {
    let mut curl = Command::new("curl");
    curl.args(["-sk", "--cert"])
        .arg(&consumer.cert)
        .arg("--key")
        .arg(&consumer.key)
        .arg(format!("{}{path}", consumer.base_url));
    let (code, body) = crate::fixture::curl_json(curl);
    assert_eq!(code, 200, "GET {path} as {}: {body}", consumer.id);
    body
}

fn names(list: &serde_json::Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {list}"))
        .iter()
        .map(|i| {
            i["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[test]
fn any_version_lists_of_every_consumer_share_one_upstream_list_and_watch() {
    install_examples();
    let provider = &clusters().provider;
    let group = format!("{}.example.com", unique_name("cached"));
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&gadget_crd(&group)));
    provider.kubectl(&[
        "wait",
        "--for=condition=Established",
        &format!("crd/gadgets.{group}"),
    ]);
    let established = std::time::Instant::now();
    let consumers: Vec<Consumer> = (0..3)
        .map(|_| {
            bindery().consumer(
                &unique_name("cache"),
                &format!("gadgets.{group}"),
                "gadgets",
            )
        })
        .collect();
    let collection = format!("/apis/{group}/v1/namespaces/default/gadgets");
    let any = format!("{collection}?resourceVersion=0");
    for (i, consumer) in consumers.iter().enumerate() {
        let gadget = format!(
            "{{\"apiVersion\":\"{group}/v1\",\"kind\":\"Gadget\",\"metadata\":{{\"name\":\"g{i}\"}}}}"
        );
        let output = crate::workspace::consumer_kubectl(
            consumer,
            &["-n", "default", "create", "-f", "-"],
            Some(&gadget),
        );
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // Its own write, at once, from the cache.
        assert_eq!(
            names(&get_raw(consumer, &any)),
            [format!("g{i}")],
            "consumer {i}"
        );
    }
    let lists = |scope: &str| {
        provider_metric(
            "apiserver_request_total",
            &[
                ("verb", "LIST"),
                ("group", &group),
                ("resource", "gadgets"),
                ("scope", scope),
            ],
        )
    };
    let watching = || {
        provider_metric(
            "apiserver_longrunning_requests",
            &[
                ("verb", "WATCH"),
                ("group", &group),
                ("resource", "gadgets"),
            ],
        )
    };
    let samples = || -> Vec<String> {
        clusters()
            .provider
            .kubectl(&["get", "--raw", "/metrics"])
            .lines()
            .filter(|l| l.contains(&group) && l.contains("WATCH"))
            .map(str::to_string)
            .collect()
    };
    // The provider's kube-controller-manager watches every resource too (its
    // garbage collector and quota controller rediscover resources every
    // 30 s): let those watches start before counting, so that only bindery's
    // could change the count.
    std::thread::sleep(std::time::Duration::from_secs(45).saturating_sub(established.elapsed()));
    let watches_before = watching();
    assert!(watches_before >= 1.0, "no upstream watch: {:#?}", samples());
    let before = (lists("namespace"), lists("cluster"));
    for _ in 0..5 {
        for (i, consumer) in consumers.iter().enumerate() {
            assert_eq!(names(&get_raw(consumer, &any)), [format!("g{i}")]);
            let all = get_raw(
                consumer,
                &format!("/apis/{group}/v1/gadgets?resourceVersion=0"),
            );
            assert_eq!(names(&all), [format!("g{i}")], "another consumer's object");
        }
    }
    assert_eq!(
        (lists("namespace"), lists("cluster")),
        before,
        "resourceVersion=0 lists reached the provider"
    );
    // More consumers and lists add no upstream watch.
    let watches_after = watching();
    assert!(
        watches_after <= watches_before,
        "upstream watches of gadgets.{group} grew from {watches_before} to {watches_after}: {:#?}",
        samples()
    );
    // A consistent list is the provider's.
    assert_eq!(names(&get_raw(&consumers[0], &collection)), ["g0"]);
    assert_eq!(lists("namespace"), before.0 + 1.0);
}
