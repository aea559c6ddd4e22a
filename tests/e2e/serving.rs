//! bindery's consumer endpoint against the real provider: objects go to the
//! provider in the consumer's mapped namespace with identity labels, come
//! back in consumer terms, and two consumers of the same CRD never see each
//! other's objects through any verb, selector, watch or continue token.

use crate::bindery::{Consumer, bindery};
use crate::fixture::clusters;
use futures::{StreamExt, TryStreamExt};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;
use std::sync::OnceLock;

const CRD: &str = "gizmos.e2e.bindery.dev";

fn install_crd() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let provider = &clusters().provider;
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": CRD},
            "spec": {"group": "e2e.bindery.dev", "scope": "Namespaced",
                "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"color": {"type": "string"}}},
                        "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}}]}
        });
        provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&crd.to_string()));
        provider.kubectl_wait(&["--for=condition=Established", "--timeout=60s", &format!("crd/{CRD}")]);
    });
}

pub(crate) fn consumer(id: &str) -> Consumer {
    install_crd();
    bindery().consumer(id, CRD, "gizmos")
}

fn gizmos(client: kube::Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "e2e.bindery.dev".into(),
        version: "v1".into(),
        api_version: "e2e.bindery.dev/v1".into(),
        kind: "Gizmo".into(),
        plural: "gizmos".into(),
    };
    Api::namespaced_with(client, namespace, &resource)
}

fn all_gizmos(client: kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("e2e.bindery.dev", "v1", "Gizmo"),
        "gizmos",
    );
    Api::all_with(client, &resource)
}

fn gizmo(name: &str, color: &str, labels: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "e2e.bindery.dev/v1", "kind": "Gizmo",
        "metadata": {"name": name, "labels": labels},
        "spec": {"color": color},
    }))
    .unwrap()
}

#[tokio::test]
async fn objects_live_on_the_provider_in_the_consumers_namespace() {
    let consumer = consumer("serve-a");
    let api = gizmos(consumer.client().await, "team");
    let created = api
        .create(
            &PostParams::default(),
            &gizmo("g1", "red", json!({"app": "x"})),
        )
        .await
        .expect("create through bindery");
    assert_eq!(created.metadata.namespace.as_deref(), Some("team"));
    assert_eq!(
        created.metadata.labels.as_ref().unwrap().len(),
        1,
        "only the consumer's own labels"
    );

    // On the provider: in the mapped namespace, stamped with the identity labels.
    let provider = clusters().provider.client().await;
    let provider_ns = format!("{}-team", consumer.cluster_namespace);
    let upstream = gizmos(provider, &provider_ns)
        .get("g1")
        .await
        .expect("object is on the provider");
    let labels = upstream.metadata.labels.unwrap();
    assert_eq!(
        labels.get("bindery.dev/consumer").map(String::as_str),
        Some("serve-a")
    );
    assert!(labels.contains_key("bindery.dev/export"));

    // Read back in consumer terms.
    let got = api.get("g1").await.unwrap();
    assert_eq!(got.metadata.namespace.as_deref(), Some("team"));
    assert_eq!(got.data["spec"]["color"], "red");
    assert!(
        !serde_json::to_string(&got)
            .unwrap()
            .contains(&consumer.cluster_namespace)
    );

    // A reserved label is refused with 422.
    let error = api
        .create(
            &PostParams::default(),
            &gizmo("g2", "blue", json!({"bindery.dev/consumer": "other"})),
        )
        .await
        .expect_err("reserved labels are refused");
    match error {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert_eq!(status.reason, "Invalid");
        }
        other => panic!("{other:?}"),
    }
    api.delete("g1", &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn consumers_never_see_each_other() {
    let (one, two) = (consumer("iso-one"), consumer("iso-two"));
    let (api_one, api_two) = (
        gizmos(one.client().await, "shared"),
        gizmos(two.client().await, "shared"),
    );
    for i in 0..3 {
        api_one
            .create(
                &PostParams::default(),
                &gizmo(&format!("one-{i}"), "red", json!({"tier": "a"})),
            )
            .await
            .unwrap();
    }
    api_two
        .create(
            &PostParams::default(),
            &gizmo("two-0", "red", json!({"tier": "a"})),
        )
        .await
        .unwrap();

    let names = |list: kube::core::ObjectList<DynamicObject>| -> Vec<String> {
        list.items
            .into_iter()
            .map(|o| o.metadata.name.unwrap())
            .collect()
    };
    // list, across namespaces, with selectors.
    assert_eq!(
        names(api_two.list(&ListParams::default()).await.unwrap()),
        ["two-0"]
    );
    assert_eq!(
        names(
            all_gizmos(two.client().await)
                .list(&ListParams::default().labels("tier=a"))
                .await
                .unwrap()
        ),
        ["two-0"]
    );
    assert_eq!(
        names(
            api_two
                .list(&ListParams::default().fields("metadata.name=one-0"))
                .await
                .unwrap()
        ),
        Vec::<String>::new()
    );
    // get, update and delete of the other consumer's name: not found.
    for result in [
        api_two.get("one-0").await.map(|_| ()),
        api_two
            .delete("one-0", &DeleteParams::default())
            .await
            .map(|_| ()),
    ] {
        match result {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 404, "{status:?}"),
            other => panic!("expected 404, got {other:?}"),
        }
    }
    // Pages: a continue token of one consumer does not open for the other.
    let page = api_one.list(&ListParams::default().limit(1)).await.unwrap();
    let token = page.metadata.continue_.clone().expect("more pages");
    assert!(!token.contains("kube-bind"), "the token is opaque: {token}");
    let rest = api_one
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(page).len() + names(rest).len(), 3);
    match api_two
        .list(&ListParams::default().continue_token(&token))
        .await
    {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 400, "{status:?}"),
        other => panic!("a foreign continue token must be refused, got {other:?}"),
    }
    // One consumer's certificate does not open the other's endpoint.
    let output = std::process::Command::new("curl")
        .args(["-sk", "-o", "/dev/null", "-w", "%{http_code}", "--cert"])
        .arg(&one.cert)
        .arg("--key")
        .arg(&one.key)
        .arg(format!("{}/apis/e2e.bindery.dev/v1/gizmos", two.base_url))
        .output()
        .unwrap();
    assert_eq!(output.stdout, b"401");
}

#[tokio::test]
async fn watches_carry_consumer_terms_and_only_the_consumers_objects() {
    let (one, two) = (consumer("watch-one"), consumer("watch-two"));
    let api_one = gizmos(one.client().await, "w");
    let api_two = gizmos(two.client().await, "w");
    let list = api_one.list(&ListParams::default()).await.unwrap();
    let version = list.metadata.resource_version.unwrap();
    let mut events = api_one
        .watch(&WatchParams::default().timeout(20), &version)
        .await
        .unwrap()
        .boxed();
    api_two
        .create(&PostParams::default(), &gizmo("theirs", "red", json!({})))
        .await
        .unwrap();
    api_one
        .create(&PostParams::default(), &gizmo("mine", "blue", json!({})))
        .await
        .unwrap();
    let first = tokio::time::timeout(std::time::Duration::from_secs(15), events.try_next())
        .await
        .expect("an event within 15 s")
        .unwrap()
        .expect("the stream is open");
    match first {
        WatchEvent::Added(object) => {
            assert_eq!(object.metadata.name.as_deref(), Some("mine"));
            assert_eq!(object.metadata.namespace.as_deref(), Some("w"));
            assert!(object.metadata.labels.is_none_or(|l| l.is_empty()));
        }
        other => panic!("expected ADDED of mine, got {other:?}"),
    }
}

/// Objects in the consumer's own provider namespace that another export made
/// (another identity hash), or that nobody labelled, are not the consumer's:
/// no verb reaches them, and they are left as they were.
#[tokio::test]
async fn objects_of_another_export_stay_hidden_in_the_consumers_namespace() {
    let consumer = consumer("other-export");
    let api = gizmos(consumer.client().await, "mixed");
    api.create(&PostParams::default(), &gizmo("mine", "red", json!({})))
        .await
        .expect("create through bindery");
    let provider_ns = format!("{}-mixed", consumer.cluster_namespace);
    let upstream = gizmos(clusters().provider.client().await, &provider_ns);
    let stale_export = "0".repeat(32);
    for (name, labels) in [
        (
            "foreign",
            json!({"bindery.dev/consumer": "other-export", "bindery.dev/export": stale_export}),
        ),
        ("bare", json!({})),
    ] {
        upstream
            .create(&PostParams::default(), &gizmo(name, "green", labels))
            .await
            .expect("create directly on the provider");
    }

    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    assert_eq!(names, ["mine"]);
    let everywhere = all_gizmos(consumer.client().await)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(everywhere.items.len(), 1);
    for name in ["foreign", "bare"] {
        for result in [
            api.get(name).await.map(|_| ()),
            api.patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"spec": {"color": "stolen"}})),
            )
            .await
            .map(|_| ()),
            api.delete(name, &DeleteParams::default()).await.map(|_| ()),
        ] {
            match result {
                Err(kube::Error::Api(status)) => assert_eq!(status.code, 404, "{name}: {status:?}"),
                other => panic!("{name}: expected 404, got {other:?}"),
            }
        }
        let kept = upstream.get(name).await.expect("still on the provider");
        assert_eq!(kept.data["spec"]["color"], "green");
    }

    let mut events = api
        .watch(&WatchParams::default().timeout(5), "0")
        .await
        .unwrap()
        .boxed();
    let mut seen = Vec::new();
    while let Some(event) = events.try_next().await.unwrap() {
        if let WatchEvent::Added(object) = event {
            seen.extend(object.metadata.name);
        }
    }
    assert_eq!(seen, ["mine"]);
}
