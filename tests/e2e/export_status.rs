//! The APIServiceExport status flow (`seeds/apiserviceexports-controller.txt`),
//! one test per branch, against the real provider and app clusters: an
//! export made from the example template, the consumer's app cluster
//! registered with the provider (Secret `app-cluster`) and its
//! APIServiceBinding made, changed and deleted by hand in the real app
//! cluster.

use crate::bindery::{Consumer, bindery};
use crate::controllers::{install_examples, request_annotated, wait_for_status};
use crate::fixture::{clusters, repo_root, unique_name};
use bindery::controllers::naming::cluster_namespace;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const SCHEMA: &str = "postgresqlinstances.db.example.com";
const PATH: &str = "/apis/db.example.com/v1/namespaces/default/postgresqlinstances";

/// An export of the example template for a new consumer.
pub(crate) struct Export {
    pub name: String,
    pub namespace: String,
    pub consumer: Consumer,
}

impl Export {
    fn new() -> Self {
        Self::requested(
            &unique_name("status"),
            &unique_name("status-cluster"),
            json!({}),
        )
    }

    /// Requests export `name` of the example template for app cluster
    /// `identity`, with `annotations` on the request.
    pub(crate) fn requested(name: &str, identity: &str, annotations: Value) -> Self {
        install_examples();
        let status = request_annotated(
            name,
            identity,
            json!({"templateRef": {"name": "postgresql"}}),
            annotations,
        );
        assert_eq!(status["phase"], "Succeeded", "{status}");
        let namespace = cluster_namespace("kube-bind-", identity);
        let consumer = bindery().endpoint(namespace.strip_prefix("kube-bind-").unwrap());
        Self {
            name: name.to_string(),
            namespace,
            consumer,
        }
    }

    /// Registers the (one) test app cluster as this consumer's app cluster.
    pub(crate) fn register_app_cluster(&self) {
        {
            let _binds = crate::bind::app_cluster_binds();
            install_binding_crd();
        }
        let kubeconfig = clusters().app.kubeconfig.to_string_lossy().to_string();
        clusters().provider.kubectl(&[
            "-n",
            &self.namespace,
            "create",
            "secret",
            "generic",
            "app-cluster",
            &format!("--from-file=kubeconfig={kubeconfig}"),
        ]);
    }

    /// Makes the APIServiceBinding in the app cluster, with `conditions` as
    /// its status (the consumer side's report).
    pub(crate) fn bind(&self, conditions: Value) {
        let binding = json!({
            "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceBinding",
            "metadata": {"name": self.name},
            "spec": {"kubeconfigSecretRef": {"namespace": "kube-bind", "name": "kubeconfig", "key": "kubeconfig"}},
        });
        {
            // Not while a bind test unbinds: the last unbind removes the
            // CRD when no binding is left (this one keeps it once made).
            let _binds = crate::bind::app_cluster_binds();
            install_binding_crd();
            let app = &clusters().app;
            app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&binding.to_string()));
        }
        self.report(conditions);
    }

    fn report(&self, conditions: Value) {
        clusters().app.kubectl(&[
            "patch",
            "apiservicebinding",
            &self.name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &json!({"status": {"conditions": conditions}}).to_string(),
        ]);
    }

    pub(crate) fn get(&self, kind: &str, name: &str) -> Value {
        let text =
            clusters()
                .provider
                .kubectl(&["-n", &self.namespace, "get", kind, name, "-o", "json"]);
        serde_json::from_str(&text).expect("JSON")
    }

    /// Waits until the export's condition `type_` has `status` and `reason`;
    /// returns the condition.
    pub(crate) fn wait_condition(&self, type_: &str, status: &str, reason: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let export = self.get("apiserviceexport", &self.name);
            let found = find(&export["status"]["conditions"], type_);
            if found["status"] == status && found["reason"] == reason {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "{type_} is not {status}/{reason} after 60 s: {}",
                export["status"]
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn find(conditions: &Value, type_: &str) -> Value {
    conditions
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == type_))
        .cloned()
        .unwrap_or(Value::Null)
}

/// The APIServiceBinding CRD in the shared app cluster, applied at each
/// binding made by hand: an unbind elsewhere that leaves no binding (none of
/// this file's at that moment) removes the CRD bind installed.
fn install_binding_crd() {
    let crd = repo_root().join("deploy/crds/apiservicebindings.kube-bind.io.yaml");
    let crd = crd.to_string_lossy();
    let app = &clusters().app;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        // `<deletionTimestamp>|<Established>`; one being deleted is waited
        // out, one missing is made, one just made is waited for (`kubectl
        // wait` fails on a CRD without conditions yet).
        let state = app.kubectl_output(
            &[
                "get",
                "crd",
                "apiservicebindings.kube-bind.io",
                "-o",
                "jsonpath={.metadata.deletionTimestamp}|{.status.conditions[?(@.type==\"Established\")].status}",
            ],
            None,
        );
        let text = String::from_utf8_lossy(&state.stdout).to_string();
        if state.status.success() && text == "|True" {
            return;
        }
        if !state.status.success() {
            app.kubectl(&["apply", "-f", &crd]);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the APIServiceBinding CRD never served: {text}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

pub(crate) fn in_sync() -> Value {
    json!([{"type": "SchemaInSync", "status": "True", "reason": "InSync", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}])
}

#[test]
fn without_an_app_cluster_connected_is_unknown_and_the_export_is_served() {
    let export = Export::new();
    let connected = export.wait_condition("Connected", "Unknown", "AppClusterNotRegistered");
    assert!(
        connected["message"]
            .as_str()
            .unwrap()
            .contains("consumer endpoint only")
    );
    export.wait_condition("ConsumerInSync", "Unknown", "AppClusterNotRegistered");
    export.wait_condition("Ready", "False", "AppClusterNotRegistered");
    wait_for_status(&export.consumer, PATH, 200);
}

#[test]
fn no_binding_in_the_app_cluster_disconnects_and_stops_serving_until_bound() {
    let export = Export::new();
    wait_for_status(&export.consumer, PATH, 200);
    export.register_app_cluster();
    // Branch "APIServiceBinding exists? no": Connected=False, sync stopped.
    let connected = export.wait_condition("Connected", "False", "APIServiceBindingNotFound");
    assert!(
        connected["message"]
            .as_str()
            .unwrap()
            .contains("no APIServiceBinding")
    );
    export.wait_condition("ConsumerInSync", "False", "APIServiceBindingNotFound");
    wait_for_status(&export.consumer, PATH, 404);

    // Branch "exists? yes": Connected=True, served again.
    export.bind(in_sync());
    export.wait_condition("Connected", "True", "APIServiceBindingFound");
    wait_for_status(&export.consumer, PATH, 200);

    // Deleting the binding disconnects again.
    clusters()
        .app
        .kubectl(&["delete", "apiservicebinding", &export.name]);
    export.wait_condition("Connected", "False", "APIServiceBindingNotFound");
    wait_for_status(&export.consumer, PATH, 404);
}

#[test]
fn consumer_in_sync_follows_the_binding_schema_in_sync() {
    let export = Export::new();
    export.register_app_cluster();
    // No SchemaInSync on the binding yet.
    export.bind(json!([]));
    export.wait_condition("Connected", "True", "APIServiceBindingFound");
    export.wait_condition("ConsumerInSync", "False", "SchemaInSyncUnknown");
    // Branch "has SchemaInSync? yes".
    export.report(in_sync());
    export.wait_condition("ConsumerInSync", "True", "SchemaInSync");
    // Branch "has SchemaInSync? no".
    export.report(
        json!([{"type": "SchemaInSync", "status": "False", "reason": "Drifted",
        "message": "v1beta1 is missing", "lastTransitionTime": "2026-01-01T00:00:00Z"}]),
    );
    let in_sync = export.wait_condition("ConsumerInSync", "False", "SchemaNotInSync");
    assert!(
        in_sync["message"]
            .as_str()
            .unwrap()
            .contains("v1beta1 is missing"),
        "{in_sync}"
    );
    let ready = export.wait_condition("Ready", "False", "SchemaNotInSync");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .starts_with("ConsumerInSync is False"),
        "{ready}"
    );
    // Still served: a consumer's report does not stop serving.
    wait_for_status(&export.consumer, PATH, 200);
}

#[test]
fn crd_conditions_are_copied_and_ready_summarises_them() {
    let export = Export::new();
    export.register_app_cluster();
    export.bind(in_sync());
    let established = export.wait_condition("Established", "True", "InitialNamesAccepted");
    let crd: Value = serde_json::from_str(
        &clusters()
            .provider
            .kubectl(&["get", "crd", SCHEMA, "-o", "json"]),
    )
    .unwrap();
    let source = find(&crd["status"]["conditions"], "Established");
    assert_eq!(established["message"], source["message"], "copied as is");
    export.wait_condition("NamesAccepted", "True", "NoConflicts");
    let ready = export.wait_condition("Ready", "True", "Ready");
    let generation = export.get("apiserviceexport", &export.name)["metadata"]["generation"].clone();
    assert_eq!(ready["observedGeneration"], generation);
}

#[test]
fn bound_schema_status_is_updated() {
    let export = Export::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let schema = export.get("boundschema", SCHEMA);
        if find(&schema["status"]["conditions"], "Valid")["reason"] == "Accepted" {
            break schema["status"].clone();
        }
        assert!(Instant::now() < deadline, "never Valid: {schema}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(status["acceptedNames"]["plural"], "postgresqlinstances");
    assert_eq!(status["acceptedNames"]["kind"], "PostgreSQLInstance");
    assert_eq!(status["storedVersions"], json!(["v1"]), "{status}");
    assert_eq!(find(&status["conditions"], "Valid")["status"], "True");
}

#[test]
fn a_missing_bound_schema_stops_serving() {
    let export = Export::new();
    wait_for_status(&export.consumer, PATH, 200);
    clusters()
        .provider
        .kubectl(&["-n", &export.namespace, "delete", "boundschema", SCHEMA]);
    let ready = export.wait_condition("Ready", "False", "BoundSchemaNotFound");
    assert!(
        ready["message"].as_str().unwrap().contains(SCHEMA),
        "{ready}"
    );
    wait_for_status(&export.consumer, PATH, 404);
}

#[test]
fn a_deleted_export_is_gone_and_stays_gone() {
    let export = Export::new();
    wait_for_status(&export.consumer, PATH, 200);
    crate::deletion::delete_export(&export);
    wait_for_status(&export.consumer, PATH, 404);
    std::thread::sleep(Duration::from_secs(2));
    let left = clusters().provider.kubectl(&[
        "-n",
        &export.namespace,
        "get",
        "apiserviceexports",
        "-o",
        "name",
    ]);
    assert!(left.trim().is_empty(), "nothing recreates it: {left}");
}
