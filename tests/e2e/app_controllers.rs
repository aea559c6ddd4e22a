//! The app cluster's own kube-controller-manager and bound resources: its
//! resource-quota controller counts bound objects (`count/<resource>.<group>`)
//! through the aggregated path with metadata informers, following
//! deletions; bindery's quota admission charges creations to the quota at
//! once and refuses the one over its limit, as kube-apiserver does for a
//! local CRD; and neither the quota controller nor the garbage collector
//! logs a cache that cannot sync or a watch-list that never ends its
//! initial events.

use crate::fixture::{clusters, unique_name};
use crate::owners::bound;
use serde_json::json;
use std::time::{Duration, Instant};

const COUNT: &str = "count/postgresqlinstances.db.example.com";

/// What the app cluster's kube-controller-manager logs (cluster.sh keeps
/// it beside the cluster's kubeconfig).
fn controller_manager_log() -> String {
    let path = clusters()
        .app
        .kubeconfig
        .parent()
        .expect("the kubeconfig is in the cluster's directory")
        .join("kube-controller-manager.log");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Lines of the controller manager that mean a controller does not see
/// some resource, as `awaiting required bookmark…` and cache-sync timeouts
/// did for bound resources before.
const NOT_SYNCED: [&str; 4] = [
    "awaiting required bookmark event for initial events stream",
    "Unable to sync caches",
    "timed out waiting for quota monitor sync",
    "timed out waiting for dependency graph builder sync",
];

#[test]
fn the_app_clusters_quota_controller_counts_bound_objects_and_its_caches_sync() {
    let _guard = bound();
    let app = &clusters().app;
    let since = controller_manager_log().len();
    let namespace = unique_name("quota");
    app.kubectl(&["create", "namespace", &namespace]);
    for name in ["one", "two", "three"] {
        let instance = json!({"apiVersion": "db.example.com/v1", "kind": "PostgreSQLInstance",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"plan": "small"}});
        app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&instance.to_string()));
    }
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "instances", "namespace": namespace},
        "spec": {"hard": {COUNT: "5"}}});
    app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&quota.to_string()));
    let status = |field: &str| {
        let quota: serde_json::Value = serde_json::from_str(&app.kubectl(&[
            "get",
            "resourcequota",
            "instances",
            "-n",
            &namespace,
            "-o",
            "json",
        ]))
        .expect("kubectl prints JSON");
        quota["status"][field][COUNT]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let used = || status("used");
    // The quota controller finds new resources in discovery every 30 s:
    // wait until it monitors this one and its caches synced after that.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let log = controller_manager_log();
        let monitored = log
            .find("created object count evaluator\" logger=\"resourcequota-controller\" resource=\"postgresqlinstances.db.example.com\"")
            .is_some_and(|at| log[at..].contains("\"Caches are synced\" controller=\"resource quota\""));
        if monitored {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the quota controller never monitored the bound resource"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // A deletion is what makes the quota controller count again (creations
    // are charged by quota admission): its monitor of the bound resource
    // must have listed and be watching.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut deleted = Vec::new();
    for name in ["one", "two"] {
        app.kubectl(&[
            "delete",
            "postgresqlinstances.db.example.com",
            name,
            "-n",
            &namespace,
        ]);
        deleted.push(name);
        let want = (3 - deleted.len()).to_string();
        loop {
            let seen = used();
            if seen == want {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "after deleting {deleted:?}: the quota's used {COUNT} is {seen:?}, not {want}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    // Quota admission: a create is charged before it is answered (the
    // controller does not count creations), a dry run is not, and the
    // create over the limit is refused with kube-apiserver's words.
    let instance = |name: &str| {
        json!({"apiVersion": "db.example.com/v1", "kind": "PostgreSQLInstance",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"plan": "small"}})
        .to_string()
    };
    app.kubectl_with_stdin(&["create", "-f", "-"], Some(&instance("four")));
    assert_eq!(used(), "2", "the create of four was charged to the quota");
    app.kubectl_with_stdin(
        &["create", "--dry-run=server", "-f", "-"],
        Some(&instance("five")),
    );
    assert_eq!(used(), "2", "a dry run is not charged");
    app.kubectl(&[
        "patch",
        "resourcequota",
        "instances",
        "-n",
        &namespace,
        "--type=merge",
        "-p",
        &json!({"spec": {"hard": {COUNT: "2"}}}).to_string(),
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while status("hard") != "2" {
        assert!(
            Instant::now() < deadline,
            "the quota controller never took the new limit"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    // What kube-apiserver checks before quota admission refuses first: an
    // invalid object is invalid, not over quota.
    let invalid = json!({"apiVersion": "db.example.com/v1", "kind": "PostgreSQLInstance",
        "metadata": {"name": "invalid", "namespace": namespace}, "spec": {}});
    let refused = app.kubectl_output(&["create", "-f", "-"], Some(&invalid.to_string()));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("The PostgreSQLInstance \"invalid\" is invalid: spec.plan: Required value"),
        "an invalid create over the quota: {stderr}"
    );
    let refused = app.kubectl_output(&["create", "-f", "-"], Some(&instance("five")));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    let expected = format!(
        "Error from server (Forbidden): error when creating \"STDIN\": postgresqlinstances.db.example.com \"five\" is forbidden: exceeded quota: instances, requested: {COUNT}=1, used: {COUNT}=2, limited: {COUNT}=2"
    );
    assert!(
        !refused.status.success() && stderr.contains(&expected),
        "the create over the quota: {stderr}"
    );
    // A server-side apply that makes its object is a create to quota
    // admission too.
    let applied = app.kubectl_output(
        &["apply", "--server-side", "-f", "-"],
        Some(&instance("six")),
    );
    let stderr = String::from_utf8_lossy(&applied.stderr);
    let expected = format!(
        "postgresqlinstances.db.example.com \"six\" is forbidden: exceeded quota: instances, requested: {COUNT}=1, used: {COUNT}=2, limited: {COUNT}=2"
    );
    assert!(
        !applied.status.success() && stderr.contains(&expected),
        "a server-side apply over the quota: {stderr}"
    );
    let five = app.kubectl_output(
        &[
            "get",
            "postgresqlinstances.db.example.com",
            "five",
            "-n",
            &namespace,
        ],
        None,
    );
    assert!(!five.status.success(), "the refused create made no object");
    assert_eq!(used(), "2", "the refused create was not charged");

    let log = controller_manager_log();
    let window = log.get(since..).unwrap_or_default();
    let failures: Vec<&str> = window
        .lines()
        .filter(|line| NOT_SYNCED.iter().any(|pattern| line.contains(pattern)))
        .collect();
    assert!(
        failures.is_empty(),
        "the app cluster's kube-controller-manager did not sync:\n{}",
        failures.join("\n")
    );
    app.kubectl(&["delete", "namespace", &namespace, "--wait=false"]);
}
