//! Authorization against a real app cluster: bindery's SubjectAccessReviews
//! decide as the app cluster's RBAC does, and a denial carries exactly the
//! 403 the app cluster's kube-apiserver gives for the same request to a
//! local CRD. Decisions are cached only for their time to live.

use crate::fixture::{clusters, unique_name};
use bindery::authz::Authorizer;
use bindery::authz::attributes::{Attributes, RequestUser};
use bindery::authz::cache::CacheSettings;
use bindery::route::Verb;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::json;
use std::sync::OnceLock;
use std::time::Duration;

const GROUP: &str = "authz.bindery.dev";

/// A local CRD in the app cluster, the reference for kube-apiserver's own
/// answers.
fn install_crd() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("gizmos.{GROUP}")},
            "spec": {"group": GROUP, "scope": "Namespaced",
                "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]},
        });
        let app = &clusters().app;
        app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&crd.to_string()));
        app.kubectl_wait(&[
            "--for=condition=Established",
            "--timeout=60s",
            &format!("crd/gizmos.{GROUP}"),
        ]);
    });
}

async fn app_client(impersonate: Option<&str>) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(&clusters().app.kubeconfig).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    if let Some(user) = impersonate {
        config.auth_info.impersonate = Some(user.to_string());
    }
    kube::Client::try_from(config).unwrap()
}

fn attributes(user: &str, verb: Verb, namespace: &str, name: Option<&str>) -> Attributes {
    Attributes {
        user: RequestUser {
            name: user.to_string(),
            groups: vec!["system:authenticated".into()],
            ..Default::default()
        },
        verb,
        group: GROUP.into(),
        version: "v1".into(),
        resource: "gizmos".into(),
        subresource: None,
        namespace: Some(namespace.to_string()),
        name: name.map(str::to_string),
    }
}

/// A user with a Role on gizmos in `allowed` only.
fn user_with_role(allowed: &str) -> String {
    install_crd();
    let user = unique_name("alice");
    let app = &clusters().app;
    app.kubectl(&["create", "namespace", allowed]);
    app.kubectl(&[
        "-n",
        allowed,
        "create",
        "role",
        "gizmo-reader",
        "--verb=get,list,watch",
        &format!("--resource=gizmos.{GROUP}"),
    ]);
    app.kubectl(&[
        "-n",
        allowed,
        "create",
        "rolebinding",
        "gizmo-reader",
        "--role=gizmo-reader",
        &format!("--user={user}"),
    ]);
    user
}

fn can_i(user: &str, verb: &str, namespace: &str) -> bool {
    let out = clusters().app.kubectl_output(
        &[
            "auth",
            "can-i",
            verb,
            &format!("gizmos.{GROUP}"),
            "-n",
            namespace,
            "--as",
            user,
        ],
        None,
    );
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

#[tokio::test]
async fn decisions_follow_the_app_clusters_rbac_and_denials_match_kube_apiserver() {
    let allowed = unique_name("authz-allowed");
    let elsewhere = unique_name("authz-elsewhere");
    let user = user_with_role(&allowed);
    clusters().app.kubectl(&["create", "namespace", &elsewhere]);
    let app = app_client(None).await;
    let authorizer = Authorizer::new(CacheSettings::default());
    let consumer = "authz-consumer";

    // Allowed where the Role is, as `kubectl auth can-i` says.
    for verb in [Verb::List, Verb::Watch] {
        assert!(can_i(&user, verb.as_str(), &allowed));
        authorizer
            .authorize(&app, consumer, &attributes(&user, verb, &allowed, None))
            .await
            .unwrap_or_else(|e| panic!("{verb:?} in {allowed}: {e:?}"));
    }

    // Denied elsewhere and for verbs the Role lacks, with kube-apiserver's
    // exact 403 for the same request by the same user.
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "Gizmo"), "gizmos");
    let as_user = app_client(Some(&user)).await;
    let cases: Vec<(Verb, &str, Option<&str>)> = vec![
        (Verb::List, &elsewhere, None),
        (Verb::Get, &elsewhere, Some("one")),
        (Verb::Create, &allowed, None),
        (Verb::Delete, &allowed, Some("one")),
    ];
    for (verb, namespace, name) in cases {
        assert!(!can_i(&user, verb.as_str(), namespace));
        let ours = authorizer
            .authorize(&app, consumer, &attributes(&user, verb, namespace, name))
            .await
            .expect_err("denied");
        let api: Api<DynamicObject> = Api::namespaced_with(as_user.clone(), namespace, &resource);
        let theirs = match verb {
            Verb::List => api.list(&Default::default()).await.map(|_| ()),
            Verb::Get => api.get(name.unwrap()).await.map(|_| ()),
            Verb::Create => {
                let object: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": format!("{GROUP}/v1"), "kind": "Gizmo",
                    "metadata": {"name": "one"}}))
                .unwrap();
                api.create(&Default::default(), &object).await.map(|_| ())
            }
            _ => api
                .delete(name.unwrap(), &Default::default())
                .await
                .map(|_| ()),
        };
        let Err(kube::Error::Api(theirs)) = theirs else {
            panic!("kube-apiserver allowed {verb:?} in {namespace}: {theirs:?}");
        };
        assert_eq!(ours.code, theirs.code, "{verb:?}");
        assert_eq!(ours.reason, theirs.reason, "{verb:?}");
        assert_eq!(ours.message, theirs.message, "{verb:?}");
    }
    assert_eq!(authorizer.cached(), (2, 4));
}

#[tokio::test]
async fn decisions_are_cached_for_their_time_to_live_only() {
    let allowed = unique_name("authz-cached");
    let user = user_with_role(&allowed);
    let app = app_client(None).await;
    let authorizer = Authorizer::new(CacheSettings {
        allowed_ttl: Duration::from_secs(3),
        denied_ttl: Duration::from_secs(1),
        capacity: 100,
    });
    let list = attributes(&user, Verb::List, &allowed, None);
    authorizer.authorize(&app, "c", &list).await.unwrap();

    // Revoke: the cached allow stands until it expires, then the app
    // cluster's answer wins.
    clusters()
        .app
        .kubectl(&["-n", &allowed, "delete", "rolebinding", "gizmo-reader"]);
    assert!(
        authorizer.authorize(&app, "c", &list).await.is_ok(),
        "cached"
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        authorizer
            .authorize(&app, "c", &list)
            .await
            .expect_err("revoked")
            .code,
        403
    );
    // Granted again: the denial is forgotten after its (shorter) TTL.
    Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(app.clone(), &allowed)
        .patch(
            "gizmo-reader",
            &PatchParams::apply("authz-test"),
            &Patch::Apply(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "gizmo-reader"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "gizmo-reader"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
            })),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    authorizer
        .authorize(&app, "c", &list)
        .await
        .expect("allowed again once the denial expired");
    // Another consumer never gets this consumer's cached answer.
    assert_eq!(authorizer.cached().0, 1);
    authorizer.authorize(&app, "d", &list).await.unwrap();
    assert_eq!(authorizer.cached().0, 2);
}
