//! The shared watch cache against the real provider: three consumers list
//! one resource many times (at `resourceVersion=0`, in pages not older than
//! a version and their continue tokens, exactly at a version) and keep two
//! watches each open, and the provider sees no LIST for them and no more
//! WATCHes than after the first (its own metrics say so), while each
//! consumer still sees exactly its own objects and events, its own writes
//! at once, and no other consumer's. A consistent list (no resourceVersion)
//! asks the provider only which objects at which versions, and its bodies
//! come from the cache.

use crate::bind::gadget_crd;
use crate::bindery::{Consumer, bindery};
use crate::controllers::install_examples;
use crate::fixture::{clusters, unique_name};
use std::process::Command;

/// The provider's metric samples named `metric` with all of `labels`,
/// summed.
fn provider_metric(metric: &str, labels: &[(&str, &str)]) -> f64 {
    crate::authn::cluster_metric(&clusters().provider, metric, labels)
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

/// A client watch through a consumer's endpoint, its events written to a
/// file as they come.
pub(crate) struct ClientWatch {
    child: std::process::Child,
    events: std::path::PathBuf,
}

impl ClientWatch {
    pub(crate) fn start(consumer: &Consumer, url: &str, path: &str) -> Self {
        let events = crate::fixture::scratch_dir().join(unique_name("client-watch"));
        let child = Command::new("curl")
            .args(["-sk", "-N", "--cert"])
            .arg(&consumer.cert)
            .arg("--key")
            .arg(&consumer.key)
            .arg(format!("{url}{path}"))
            .stdout(std::fs::File::create(&events).expect("an events file"))
            .spawn()
            .expect("curl starts");
        Self { child, events }
    }

    /// The events so far, as (type, name, resourceVersion).
    pub(crate) fn events(&self) -> Vec<(String, String, String)> {
        std::fs::read_to_string(&self.events)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .map(|event| {
                let field = |pointer: &str| {
                    event
                        .pointer(pointer)
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                (
                    field("/type"),
                    field("/object/metadata/name"),
                    field("/object/metadata/resourceVersion"),
                )
            })
            .collect()
    }

    /// Waits until `done` holds for the events, at most `seconds`.
    pub(crate) fn wait_for(
        &self,
        seconds: u64,
        what: &str,
        done: impl Fn(&[(String, String, String)]) -> bool,
    ) -> Vec<(String, String, String)> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
        loop {
            let events = self.events();
            if done(&events) {
                return events;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the watch never saw {what}: {events:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// Whether the stream is still open.
    pub(crate) fn is_open(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for ClientWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.events);
    }
}

/// The size of each Gadget's spec: far more than its metadata.
const SPEC_BYTES: usize = 8_000;

/// Creates Gadget `name` in the consumer's `default` namespace.
fn create_gadget(consumer: &Consumer, group: &str, name: &str) {
    let gadget = serde_json::json!({
        "apiVersion": format!("{group}/v1"), "kind": "Gadget",
        "metadata": {"name": name},
        "spec": {"blob": "x".repeat(SPEC_BYTES)},
    })
    .to_string();
    crate::workspace::consumer_write(consumer, &["create", "-f", "-"], Some(&gadget));
}

/// A gadget CRD of a group of its own (named after `group`) on the
/// provider, and a consumer (named after `consumer`) bound to it.
fn gadgets_of_a_consumer(group: &str, consumer: &str) -> (String, Consumer) {
    let provider = &clusters().provider;
    let group = format!("{}.example.com", unique_name(group));
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&gadget_crd(&group)));
    provider.kubectl_wait(&[
        "--for=condition=Established",
        &format!("crd/gadgets.{group}"),
    ]);
    let consumer = bindery().consumer(
        &unique_name(consumer),
        &format!("gadgets.{group}"),
        "gadgets",
    );
    (group, consumer)
}

/// The names of a list's items.
pub(crate) fn names(list: &serde_json::Value) -> Vec<String> {
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

/// Consumer `i`'s lists at the version of `listed` (its any-version list of
/// namespace `default`, `g{i}` and `h{i}`): limits ignored at version 0,
/// pages not older than it that go on with their token, exactly at it, and
/// pages across namespaces that count only its own objects.
fn paged_and_exact_lists(consumer: &Consumer, group: &str, listed: &serde_json::Value, i: usize) {
    let version = listed["metadata"]["resourceVersion"].as_str().unwrap();
    let collection = format!("/apis/{group}/v1/namespaces/default/gadgets");
    let whole = get_raw(consumer, &format!("{collection}?resourceVersion=0&limit=1"));
    assert_eq!(names(&whole), [format!("g{i}"), format!("h{i}")]);
    let first = get_raw(
        consumer,
        &format!(
            "{collection}?resourceVersion={version}&resourceVersionMatch=NotOlderThan&limit=1"
        ),
    );
    assert_eq!(names(&first), [format!("g{i}")]);
    assert_eq!(first["metadata"]["remainingItemCount"], 1, "{first}");
    let token = first["metadata"]["continue"].as_str().unwrap();
    let next = get_raw(consumer, &format!("{collection}?limit=1&continue={token}"));
    assert_eq!(names(&next), [format!("h{i}")]);
    assert_eq!(next["metadata"]["continue"], "");
    let exact = get_raw(
        consumer,
        &format!("{collection}?resourceVersion={version}&resourceVersionMatch=Exact"),
    );
    assert_eq!(names(&exact), [format!("g{i}"), format!("h{i}")]);
    assert_eq!(exact["metadata"]["resourceVersion"], version);
    let across = get_raw(
        consumer,
        &format!("/apis/{group}/v1/gadgets?resourceVersion={version}&limit=1"),
    );
    assert_eq!(names(&across), [format!("g{i}")]);
    assert_eq!(
        across["metadata"]["remainingItemCount"], 1,
        "only its own objects count: {across}"
    );
}

#[test]
fn any_version_lists_and_watches_of_every_consumer_share_one_upstream_list_and_watch() {
    install_examples();
    let provider = &clusters().provider;
    let group = format!("{}.example.com", unique_name("cached"));
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&gadget_crd(&group)));
    provider.kubectl_wait(&[
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
    let own = |i: usize| [format!("g{i}"), format!("h{i}")];
    for (i, consumer) in consumers.iter().enumerate() {
        create_gadget(consumer, &group, &format!("g{i}"));
        create_gadget(consumer, &group, &format!("h{i}"));
        // Its own writes, at once, from the cache.
        assert_eq!(names(&get_raw(consumer, &any)), own(i), "consumer {i}");
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
            let listed = get_raw(consumer, &any);
            assert_eq!(names(&listed), own(i));
            let all = get_raw(
                consumer,
                &format!("/apis/{group}/v1/gadgets?resourceVersion=0"),
            );
            assert_eq!(names(&all), own(i), "another consumer's object");
            paged_and_exact_lists(consumer, &group, &listed, i);
        }
    }
    assert_eq!(
        (lists("namespace"), lists("cluster")),
        before,
        "versioned lists and their pages reached the provider"
    );
    // Two client watches per consumer: from any version (the state first)
    // and from a cached list's version.
    let watches: Vec<[ClientWatch; 2]> = consumers
        .iter()
        .map(|consumer| {
            let version = get_raw(consumer, &any)["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_string();
            [
                ClientWatch::start(
                    consumer,
                    &consumer.base_url,
                    &format!("{collection}?watch=true&resourceVersion=0&timeoutSeconds=120"),
                ),
                ClientWatch::start(
                    consumer,
                    &consumer.base_url,
                    &format!(
                        "/apis/{group}/v1/gadgets?watch=true&resourceVersion={version}&timeoutSeconds=120"
                    ),
                ),
            ]
        })
        .collect();
    for (i, [from_zero, _]) in watches.iter().enumerate() {
        from_zero.wait_for(20, "the state", |events| {
            events
                .iter()
                .any(|(t, n, _)| t == "ADDED" && *n == format!("g{i}"))
        });
    }
    for (i, consumer) in consumers.iter().enumerate() {
        create_gadget(consumer, &group, &format!("w{i}"));
    }
    for (i, pair) in watches.iter().enumerate() {
        for watch in pair {
            let events = watch.wait_for(20, &format!("w{i}"), |events| {
                events
                    .iter()
                    .any(|(t, n, _)| t == "ADDED" && *n == format!("w{i}"))
            });
            let names: Vec<&str> = events.iter().map(|(_, n, _)| n.as_str()).collect();
            assert!(
                names.iter().all(|n| n.ends_with(&i.to_string())),
                "consumer {i}'s watch saw another consumer's objects: {events:?}"
            );
        }
    }
    // More consumers, lists and client watches add no upstream watch.
    let watches_after = watching();
    assert!(
        watches_after <= watches_before,
        "upstream watches of gadgets.{group} grew from {watches_before} to {watches_after} \
         with {} client watches open: {:#?}",
        watches.len() * 2,
        samples()
    );
    drop(watches);
    // A consistent list: the provider names the objects and their
    // versions in a metadata list (one LIST, a few hundred bytes per
    // object), and the bodies are the cache's.
    let sent = || {
        provider_metric(
            "apiserver_response_sizes_sum",
            &[("verb", "LIST"), ("group", &group), ("resource", "gadgets")],
        )
    };
    let sent_before = sent();
    let consistent = get_raw(&consumers[0], &collection);
    assert_eq!(names(&consistent), ["g0", "h0", "w0"]);
    assert_eq!(
        consistent["items"][2]["spec"]["blob"]
            .as_str()
            .map(str::len),
        Some(SPEC_BYTES)
    );
    assert_eq!(lists("namespace"), before.0 + 1.0);
    let provider_bytes = sent() - sent_before;
    assert!(
        provider_bytes > 0.0 && provider_bytes < SPEC_BYTES as f64,
        "the provider sent {provider_bytes} bytes for a consistent list of three objects \
         of {SPEC_BYTES} bytes each: the bodies did not come from the cache"
    );
}

/// A client lists (consistently, so the provider names the version: its
/// revision, moved on by writes anywhere) and then watches from the list's
/// version, as every informer does. On a resource no one writes, the
/// cache's own watch never reaches that version by itself. The cache still
/// answers the watch, at once, instead of waiting and handing it to the
/// provider: the provider sees no watch of the consumer's namespace.
#[tokio::test]
async fn a_watch_from_a_consistent_lists_version_of_a_quiet_resource_is_answered_by_the_cache() {
    use futures::{AsyncBufReadExt, TryStreamExt};
    let provider = &clusters().provider;
    let (group, consumer) = gadgets_of_a_consumer("quiet", "quiet");
    let collection = format!("/apis/{group}/v1/namespaces/default/gadgets");
    create_gadget(&consumer, &group, "before");
    // The cache has listed and holds the write.
    assert_eq!(
        names(&get_raw(
            &consumer,
            &format!("{collection}?resourceVersion=0")
        )),
        ["before"]
    );
    // The provider's revision moves on with a write elsewhere.
    provider.kubectl(&[
        "create",
        "configmap",
        &unique_name("elsewhere"),
        "-n",
        "default",
    ]);
    let listed = get_raw(&consumer, &collection);
    assert_eq!(names(&listed), ["before"]);
    let version = listed["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let namespaced_watches = || {
        provider_metric(
            "apiserver_longrunning_requests",
            &[
                ("verb", "WATCH"),
                ("group", &group),
                ("resource", "gadgets"),
                ("scope", "namespace"),
            ],
        )
    };
    let client = consumer.client().await;
    let asked = std::time::Instant::now();
    let request = http::Request::get(format!(
        "{collection}?watch=true&resourceVersion={version}&allowWatchBookmarks=true&timeoutSeconds=60"
    ))
    .body(Vec::new())
    .unwrap();
    let stream = client
        .request_stream(request)
        .await
        .expect("bindery answers the watch");
    let answered = asked.elapsed();
    assert_eq!(
        namespaced_watches(),
        0.0,
        "bindery handed the watch from {version} to the provider (answered after {answered:?})"
    );
    create_gadget(&consumer, &group, "after");
    let mut lines = stream.lines();
    let added = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while let Some(line) = lines.try_next().await.expect("the watch goes on") {
            let event: serde_json::Value = serde_json::from_str(&line).expect("a watch event");
            if event["type"] == "ADDED" {
                return event["object"]["metadata"]["name"]
                    .as_str()
                    .map(str::to_string);
            }
        }
        None
    })
    .await
    .expect("the watch delivers the write within 20 s");
    assert_eq!(
        added.as_deref(),
        Some("after"),
        "only the write after the list"
    );
}

/// A delete through bindery is read at once from the cache: kube-apiserver
/// answers an immediate delete with a `Status` that names no version, so
/// bindery asks the provider for its version after the delete, and a list
/// at any version waits for the store to reach it. Each list here follows
/// its delete on the same connection at once, before the provider's watch
/// event can have reached the store by itself; 150 times, as the race it
/// closes is narrow (without the fix it failed at the 2nd and the 43rd).
#[tokio::test]
async fn a_delete_through_bindery_is_read_at_once_from_the_cache() {
    install_examples();
    let (group, consumer) = gadgets_of_a_consumer("deleted", "deletes");
    let client = consumer.client_without_retries().await;
    let collection = format!("/apis/{group}/v1/namespaces/default/gadgets");
    let send = |method: &str, path: String, body: Option<serde_json::Value>| {
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(body.map_or_else(kube::client::Body::empty, |b| {
                kube::client::Body::from(b.to_string().into_bytes())
            }))
            .expect("a request");
        let client = client.clone();
        async move {
            let response = client.send(request).await.expect("bindery answers");
            let status = response.status();
            let body = http_body_util::BodyExt::collect(response.into_body())
                .await
                .expect("a body")
                .to_bytes();
            let value: serde_json::Value =
                serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
            (status, value)
        }
    };
    let any = format!("{collection}?resourceVersion=0");
    for i in 0..150 {
        let name = format!("d{i}");
        let gadget = serde_json::json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget",
            "metadata": {"name": name}, "spec": {"blob": "x"}});
        let (created, body) = send("POST", collection.clone(), Some(gadget)).await;
        assert!(created.is_success(), "{created}: {body}");
        let (_, listed) = send("GET", any.clone(), None).await;
        assert!(
            names(&listed).contains(&name),
            "{name} not listed: {listed}"
        );
        let (deleted, body) = send("DELETE", format!("{collection}/{name}"), None).await;
        assert!(deleted.is_success(), "{deleted}: {body}");
        let (_, listed) = send("GET", any.clone(), None).await;
        assert!(
            !names(&listed).contains(&name),
            "{name} deleted through bindery, still listed at once: {listed}"
        );
    }
}
