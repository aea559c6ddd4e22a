//! An app cluster's aggregator sends every request of a bound group over
//! one HTTP/2 connection, watches included, and holds each watch's stream
//! for as long as it lasts. So one connection must carry as many streams as
//! kube's aggregated servers allow (`HTTP2MaxStreamsPerConnection`, 1,000
//! in k8s.io/apiserver's recommended options): 1,000 watches at once on one
//! connection are each answered with the object, and each sees its change.

use crate::serving::consumer;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use std::time::Duration;

const WATCHES: usize = 1_000;

/// Reads `body` until a line has `wanted`, or `within` passes.
async fn until_seen(
    body: &mut kube::client::Body,
    seen: &mut String,
    wanted: &str,
    within: Duration,
) -> bool {
    let until = tokio::time::Instant::now() + within;
    while !seen.lines().any(|l| l.contains(wanted)) {
        match tokio::time::timeout_at(until, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    seen.push_str(&String::from_utf8_lossy(&data));
                }
            }
            _ => return false,
        }
    }
    true
}

#[tokio::test]
async fn one_http2_connection_carries_a_thousand_watches() {
    let consumer = consumer("streams");
    let client = consumer.client().await;
    let collection = "/apis/e2e.bindery.dev/v1/namespaces/many/gizmos";
    let probe = json!({"apiVersion": "e2e.bindery.dev/v1", "kind": "Gizmo",
        "metadata": {"name": "probe"}, "spec": {"color": "red"}});
    let created: Value = client
        .request(
            http::Request::post(collection)
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&probe).unwrap())
                .unwrap(),
        )
        .await
        .expect("the probe is created");
    let version = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let kubeconfig = kube::config::Kubeconfig::read_from(&consumer.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    // Every watch below goes over this one connection.
    let one_connection = crate::http2::client(&config).await;
    let (started_tx, mut started) = tokio::sync::mpsc::channel::<Result<(), String>>(WATCHES);
    let (changed_tx, mut changed) = tokio::sync::mpsc::channel::<Result<(), String>>(WATCHES);
    for i in 0..WATCHES {
        let one_connection = one_connection.clone();
        let (started_tx, changed_tx) = (started_tx.clone(), changed_tx.clone());
        let uri = format!("{collection}?watch=1&resourceVersion={version}&timeoutSeconds=600");
        tokio::spawn(async move {
            let request = http::Request::get(uri)
                .body(kube::client::Body::empty())
                .unwrap();
            let response = match one_connection.send(request).await {
                Ok(response) => response,
                Err(error) => {
                    let _ = started_tx.send(Err(format!("watch {i}: {error}"))).await;
                    return;
                }
            };
            if response.status() != 200 {
                let _ = started_tx
                    .send(Err(format!("watch {i}: {}", response.status())))
                    .await;
                return;
            }
            let _ = started_tx.send(Ok(())).await;
            let mut body = response.into_body();
            let mut seen = String::new();
            let outcome = match until_seen(
                &mut body,
                &mut seen,
                "\"blue\"",
                Duration::from_secs(120),
            )
            .await
            {
                true => Ok(()),
                false => Err(format!("watch {i} saw no change: {seen}")),
            };
            let _ = changed_tx.send(outcome).await;
            // Held open until the test is over.
            std::future::pending::<()>().await;
        });
    }
    drop((started_tx, changed_tx));
    // Every watch is answered while all the others stay open.
    for n in 0..WATCHES {
        let outcome = tokio::time::timeout(Duration::from_secs(120), started.recv())
            .await
            .unwrap_or_else(|_| panic!("{n} of {WATCHES} watches answered in 120 s"));
        outcome
            .expect("a watch task")
            .expect("a watch answered 200");
    }
    let patch = json!({"spec": {"color": "blue"}});
    client
        .request::<Value>(
            http::Request::patch(format!("{collection}/probe"))
                .header("content-type", "application/merge-patch+json")
                .body(serde_json::to_vec(&patch).unwrap())
                .unwrap(),
        )
        .await
        .expect("the probe changes");
    for _ in 0..WATCHES {
        let outcome = changed.recv().await.expect("every watch reports");
        outcome.expect("every watch sees the change");
    }
}
