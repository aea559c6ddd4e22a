//! kube-bind's layouts on the provider, as its backend and konnector make
//! them: under `Namespaced` isolation a namespaced provider CRD is bound
//! cluster-scoped, each consumer's objects live in its cluster namespace,
//! and its account is granted there alone, never cluster-wide.

use crate::bindery::bindery;
use crate::fixture::{clusters, unique_name};
use bindery::controllers::naming::export_cluster_role;
use bindery::provider_namespace::role_binding_name;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;
use std::time::{Duration, Instant};

const GROUP: &str = "layout.bindery.dev";
const CRD: &str = "lockers.layout.bindery.dev";

#[tokio::test]
async fn under_namespaced_isolation_a_consumers_objects_and_rights_stay_in_its_cluster_namespace() {
    let provider = &clusters().provider;
    provider.install_open_crd(GROUP, "lockers", "Locker", "Namespaced");
    let consumer =
        bindery().consumer_laid_out("layout-ns", CRD, "lockers", Some("Cluster"), "Namespaced");
    let home = consumer.cluster_namespace.clone();

    // The grant: a RoleBinding in the cluster namespace, no
    // ClusterRoleBinding (on main it was cluster-wide: every consumer's
    // lockers, in every namespace of the provider).
    let role = export_cluster_role(&home, "lockers");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let bound_here = provider
            .kubectl_output(
                &[
                    "-n",
                    &home,
                    "get",
                    "rolebinding",
                    &role_binding_name("lockers"),
                ],
                None,
            )
            .status
            .success();
        if bound_here {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no RoleBinding in {home} for the export"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Bound to a Role of the exported resource alone: the cluster
    // namespace also holds the export's identity Secret, and claims are
    // never granted there.
    let role_ref = provider.kubectl(&[
        "-n",
        &home,
        "get",
        "rolebinding",
        &role_binding_name("lockers"),
        "-o",
        "jsonpath={.roleRef.kind}/{.roleRef.name}",
    ]);
    assert_eq!(
        role_ref.trim(),
        format!("Role/{}", role_binding_name("lockers"))
    );
    let granted = provider.kubectl(&[
        "-n",
        &home,
        "get",
        "role",
        &role_binding_name("lockers"),
        "-o",
        "jsonpath={.rules[*].resources}",
    ]);
    assert_eq!(
        granted.trim(),
        r#"["lockers","lockers/status","lockers/scale"]"#,
        "the exported resource alone"
    );
    let cluster_wide = provider.kubectl_output(&["get", "clusterrolebinding", &role], None);
    assert!(
        !cluster_wide.status.success(),
        "no cluster-wide grant under Namespaced isolation"
    );

    // The BoundSchema, cluster-scoped over a namespaced CRD, is in sync
    // with it (on main: an update waiting, and the export not Ready).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let in_sync = provider.kubectl(&[
            "-n",
            &home,
            "get",
            "boundschema",
            CRD,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"SchemaInSync\")].status}",
        ]);
        if in_sync.trim() == "True" {
            break;
        }
        assert!(Instant::now() < deadline, "SchemaInSync is {in_sync:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // The consumer's lockers are cluster-scoped to it, namespaced on the
    // provider, in its cluster namespace, under their own names.
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(GROUP, "v1", "Locker"));
    let api: Api<DynamicObject> = Api::all_with(consumer.client().await, &resource);
    let name = unique_name("locker");
    let locker: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "Locker",
        "metadata": {"name": name}, "spec": {"size": 3}}))
    .unwrap();
    let created = api
        .create(&PostParams::default(), &locker)
        .await
        .expect("created");
    assert_eq!(
        created.metadata.namespace, None,
        "cluster-scoped to the consumer"
    );
    let stored = provider.kubectl(&[
        "-n",
        &home,
        "get",
        CRD,
        &name,
        "-o",
        "jsonpath={.spec.size}",
    ]);
    assert_eq!(stored.trim(), "3", "stored in {home} under its own name");
    let listed = api.list(&Default::default()).await.expect("listed");
    let names: Vec<_> = listed
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    assert_eq!(names, vec![name.clone()]);
    let read = api.get(&name).await.expect("read back");
    assert_eq!(read.metadata.namespace, None);
    assert_eq!(
        read.metadata.owner_references, None,
        "no Namespace reference under Namespaced"
    );

    api.delete(&name, &Default::default())
        .await
        .expect("deleted");
    let gone = provider.kubectl_output(&["-n", &home, "get", CRD, &name], None);
    assert!(!gone.status.success(), "gone from the provider");
}

/// A cluster-scoped export under `Prefixed` isolation grants its resources
/// cluster-wide (RBAC cannot narrow by name prefix), but never its claims:
/// on the old code the one ClusterRoleBinding named the whole export
/// ClusterRole, so a Secrets claim let the consumer's account read every
/// Secret of the provider (issue 34, item 5).
#[test]
fn a_cluster_scoped_exports_claims_are_never_granted_cluster_wide() {
    let provider = &clusters().provider;
    provider.install_open_crd(GROUP, "racks", "Rack", "Cluster");
    let id = unique_name("layout-claims");
    let consumer = bindery().consumer_claiming(
        &id,
        &format!("racks.{GROUP}"),
        "racks",
        None,
        "Prefixed",
        json!([{"group": "", "resource": "secrets",
            "selector": {"labelSelector": {"matchLabels": {"app": "racks"}}}}]),
    );
    let account = format!(
        "system:serviceaccount:{}:bindery-consumer",
        consumer.cluster_namespace
    );
    let can = |args: &[&str]| {
        let mut all = vec!["auth", "can-i", "--as", &account];
        all.extend_from_slice(args);
        let output = provider.kubectl_output(&all, None);
        String::from_utf8_lossy(&output.stdout).trim() == "yes"
    };
    let role = export_cluster_role(&consumer.cluster_namespace, "racks");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !can(&["create", &format!("racks.{GROUP}")]) {
        assert!(
            Instant::now() < deadline,
            "the consumer's account was never granted its racks ({role})"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    for args in [
        ["get", "secrets", "-n", "kube-system"],
        ["list", "secrets", "-n", "default"],
    ] {
        assert!(
            !can(&args),
            "{account} may {args:?}: a claim granted cluster-wide"
        );
    }
    assert!(!can(&["list", "secrets", "--all-namespaces"]));
    let bound = provider.kubectl(&[
        "get",
        "clusterrolebinding",
        &role,
        "-o",
        "jsonpath={.roleRef.name}",
    ]);
    assert_eq!(bound, format!("{role}:resources"));
}
