//! bindery's own reach to Secrets follows the namespaces it serves, and only
//! them (`src/namespace_access.rs`), on a provider of the test's own with
//! bindery under the chart's provider role and `--namespace-data-role`: a
//! marked namespace gets bindery's RoleBinding; that RoleBinding, deleted,
//! comes back without anything else happening to the namespace; and once
//! the namespace loses its mark, the RoleBinding goes and bindery can no
//! longer read the namespace's Secrets.

use crate::fixture::{Cluster, own_provider_cluster};
use crate::kube_bind_live::{Running, install_bindery, wait_for};
use bindery::namespace_access::BINDING_NAME;
use bindery::translate::identity::CONSUMER_LABEL;

/// bindery's account on the provider, as the chart makes it.
const ACCOUNT: &str = "system:serviceaccount:bindery-system:bindery";

/// Whether bindery's RoleBinding is in `namespace`.
fn bound(provider: &Cluster, namespace: &str) -> bool {
    provider
        .kubectl_output(&["-n", namespace, "get", "rolebinding", BINDING_NAME], None)
        .status
        .success()
}

/// What `kubectl auth can-i <verb> secrets` says for bindery in `namespace`.
fn may(provider: &Cluster, verb: &str, namespace: &str) -> String {
    let answer = provider.kubectl_output(
        &[
            "auth", "can-i", verb, "secrets", "-n", namespace, "--as", ACCOUNT,
        ],
        None,
    );
    String::from_utf8_lossy(&answer.stdout).trim().to_string()
}

#[test]
fn bindery_holds_secrets_exactly_where_it_serves() {
    let provider = own_provider_cluster("namespace-access");
    let bindery: Running = install_bindery(&provider, "namespace-access", &[]);
    let served = "team-served";
    provider.kubectl(&["create", "namespace", served]);
    provider.kubectl(&[
        "label",
        "namespace",
        served,
        &format!("{CONSUMER_LABEL}=c1"),
    ]);
    wait_for(
        "bindery's RoleBinding in a marked namespace",
        60,
        &[&bindery],
        || bound(&provider, served),
    );
    assert_eq!(may(&provider, "get", served), "yes");

    // Deleted by someone, it comes back while the namespace stays as it is.
    provider.kubectl(&["-n", served, "delete", "rolebinding", BINDING_NAME]);
    wait_for(
        "bindery's deleted RoleBinding made again, the namespace untouched",
        30,
        &[&bindery],
        || bound(&provider, served),
    );

    // The mark goes: so does bindery's reach.
    provider.kubectl(&["label", "namespace", served, &format!("{CONSUMER_LABEL}-")]);
    wait_for(
        "bindery's RoleBinding gone from a namespace no longer marked",
        30,
        &[&bindery],
        || !bound(&provider, served),
    );
    assert_eq!(may(&provider, "get", served), "no");
    assert_eq!(may(&provider, "create", served), "no");

    // A namespace never marked never had it.
    provider.kubectl(&["create", "namespace", "team-unserved"]);
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(!bound(&provider, "team-unserved"));
    assert_eq!(may(&provider, "get", "team-unserved"), "no");
}
