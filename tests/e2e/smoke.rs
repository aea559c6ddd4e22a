//! Smoke tests of the test clusters themselves, with real kubectl: both are
//! ready, the provider serves CRDs, the app cluster runs its namespace
//! controller, and the app cluster's aggregator reaches a loopback HTTPS
//! server through an ExternalName Service with its front-proxy identity.

use crate::fixture::{Cluster, clusters, unique_name};
use crate::recording_server::RecordingServer;
use base64::Engine;
use k8s_openapi::api::core::v1::Namespace;
use std::time::{Duration, Instant};

#[test]
fn both_clusters_are_ready() {
    let clusters = clusters();
    for cluster in [&clusters.provider, &clusters.app] {
        let body = cluster.kubectl(&["get", "--raw", "/readyz"]);
        assert_eq!(body.trim(), "ok", "{} /readyz", cluster.name);
        let version = cluster.kubectl(&["version", "-o", "json"]);
        let version: serde_json::Value = serde_json::from_str(&version).unwrap();
        assert_eq!(
            version["serverVersion"]["gitVersion"], "v1.34.10",
            "{} runs the pinned Kubernetes version",
            cluster.name
        );
    }
}

#[test]
fn clusters_are_separate() {
    let clusters = clusters();
    assert_ne!(clusters.provider.server, clusters.app.server);
    let name = unique_name("only-in-provider");
    clusters.provider.kubectl(&["create", "namespace", &name]);
    let in_app = clusters
        .app
        .kubectl_output(&["get", "namespace", &name], None);
    assert!(
        !in_app.status.success(),
        "a provider namespace must not exist in the app cluster"
    );
    clusters
        .provider
        .kubectl(&["delete", "namespace", &name, "--wait=false"]);
}

#[test]
fn provider_serves_a_crd_and_its_objects() {
    let provider = &clusters().provider;
    let group = format!("{}.smoke.bindery.test", unique_name("g"));
    let crd = format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {{type: integer}}
"#
    );
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&crd));
    provider.kubectl_wait(&[
        "--for=condition=Established",
        &format!("crd/widgets.{group}"),
        "--timeout=60s",
    ]);
    let widget = format!(
        "apiVersion: {group}/v1\nkind: Widget\nmetadata: {{name: w1, namespace: default}}\nspec: {{size: 3}}\n"
    );
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(&widget));
    let got = provider.kubectl(&[
        "get",
        &format!("widgets.{group}"),
        "w1",
        "-n",
        "default",
        "-o",
        "json",
    ]);
    let got: serde_json::Value = serde_json::from_str(&got).unwrap();
    assert_eq!(got["spec"]["size"], 3);
    assert_eq!(got["kind"], "Widget");

    // Schema validation is live: a wrongly typed field is rejected with 422.
    let invalid = widget.replace("size: 3", "size: three");
    let rejected = provider.kubectl_output(&["apply", "-f", "-"], Some(&invalid));
    assert!(!rejected.status.success());
    let stderr = String::from_utf8_lossy(&rejected.stderr);
    assert!(stderr.contains("Invalid value"), "{stderr}");

    provider.kubectl(&["delete", "crd", &format!("widgets.{group}"), "--wait=false"]);
}

#[tokio::test]
async fn app_cluster_runs_the_namespace_lifecycle() {
    let app = &clusters().app;
    let name = unique_name("smoke-ns");
    app.kubectl(&["create", "namespace", &name]);
    let phase = app.kubectl(&["get", "namespace", &name, "-o", "jsonpath={.status.phase}"]);
    assert_eq!(phase, "Active");

    // The controller-manager's root-CA publisher fills every new namespace.
    wait_until(
        Duration::from_secs(30),
        "kube-root-ca.crt in the new namespace",
        || {
            app.kubectl_output(&["-n", &name, "get", "configmap", "kube-root-ca.crt"], None)
                .status
                .success()
        },
    )
    .await;

    // Namespace deletion finishes only if the namespace controller runs.
    app.kubectl(&["delete", "namespace", &name, "--timeout=60s"]);
    let namespaces: kube::Api<Namespace> = kube::Api::all(app.client().await);
    assert!(
        namespaces.get_opt(&name).await.unwrap().is_none(),
        "namespace {name} is gone"
    );
}

/// Deletes the objects a test registered in a cluster, also when it fails:
/// a stale APIService would break discovery for every later test.
struct Cleanup<'a> {
    cluster: &'a Cluster,
    objects: Vec<String>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        for object in &self.objects {
            let _ = self.cluster.kubectl_output(
                &["delete", object, "--ignore-not-found", "--wait=false"],
                None,
            );
        }
    }
}

#[tokio::test]
async fn aggregator_reaches_loopback_server_with_front_proxy_identity() {
    let app = &clusters().app;
    let front_proxy_ca = std::fs::read_to_string(app.pki.front_proxy_ca()).unwrap();
    let group = format!("{}.smoke.bindery.test", unique_name("agg"));
    let group_version = format!("{group}/v1");
    let service = unique_name("smoke-aggregation");
    let server = RecordingServer::start(
        &group_version,
        &format!("{service}.default.svc"),
        &front_proxy_ca,
    );
    let port = server.addr.port();
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&server.ca_pem);

    let _cleanup = Cleanup {
        cluster: app,
        objects: vec![
            format!("apiservice/v1.{group}"),
            format!("service/{service}"),
        ],
    };
    let manifests = format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: {service}, namespace: default}}
spec:
  type: ExternalName
  externalName: localhost
  ports: [{{port: {port}, protocol: TCP}}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: v1.{group}}}
spec:
  group: {group}
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: 15
  caBundle: {ca_bundle}
  service: {{namespace: default, name: {service}, port: {port}}}
"#
    );
    app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&manifests));
    app.kubectl_wait(&[
        "--for=condition=Available",
        &format!("apiservice/v1.{group}"),
        "--timeout=90s",
    ]);

    let body = app.kubectl(&["get", "--raw", &format!("/apis/{group_version}")]);
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["groupVersion"],
        group_version.as_str(),
        "served by the loopback server"
    );

    let seen = server.requests_for(&format!("/apis/{group_version}"));
    let from_admin: Vec<_> = seen
        .iter()
        .filter(|r| r.remote_user.as_deref() == Some("bindery-admin"))
        .collect();
    assert!(
        !from_admin.is_empty(),
        "a proxied request names the kubectl user in X-Remote-User; saw {seen:?}"
    );
    for request in &from_admin {
        assert_eq!(
            request.client_common_name.as_deref(),
            Some(bindery::certs::store::FRONT_PROXY_CLIENT_NAME),
            "the aggregator authenticates with its front-proxy client certificate"
        );
        assert!(
            request.remote_groups.iter().any(|g| g == "system:masters"),
            "X-Remote-Group carries the user's groups: {request:?}"
        );
    }
}

async fn wait_until(timeout: Duration, what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
