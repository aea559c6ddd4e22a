//! Service-account bearer tokens of the app cluster on the consumer
//! endpoint: verified against the issuer and keys the app cluster
//! registered (or, when bindery does not know the key, reviewed by the app
//! cluster with a TokenReview), then authorized by the app cluster's RBAC.
//! An expired token
//! (signed with the app cluster's real key), a token for another audience
//! and a token of another cluster are each refused.

use crate::export_status::{Export, in_sync};
use crate::fixture::{clusters, unique_name};
use serde_json::json;

fn curl(export: &Export, path: &str, token: &str) -> (u16, String) {
    let bearer = format!("Authorization: Bearer {token}");
    crate::front_proxy::curl_as(export, "GET", path, None, &[&bearer])
}

fn list_path(namespace: &str) -> String {
    format!("/apis/db.example.com/v1/namespaces/{namespace}/postgresqlinstances")
}

/// Registers the app cluster with its front proxy and its token issuer.
fn register_with_issuer(export: &Export) {
    let app = &clusters().app;
    let jwks = app.kubectl(&["get", "--raw", "/openid/v1/jwks"]);
    let jwks_file = crate::fixture::scratch_dir().join(format!("{}-jwks.json", export.name));
    std::fs::write(&jwks_file, jwks).unwrap();
    crate::front_proxy::register_with(
        export,
        &app.pki.front_proxy_ca(),
        &[
            format!("--from-literal=service-account-issuer={}", app.server),
            format!("--from-file=service-account-jwks={}", jwks_file.display()),
        ],
    );
}

#[test]
fn service_account_tokens_authenticate_and_strangers_do_not() {
    let export = Export::requested(
        &unique_name("tokens"),
        &unique_name("tokens-cluster"),
        json!({}),
    );
    register_with_issuer(&export);
    export.bind(in_sync());
    export.wait_condition("Connected", "True", "APIServiceBindingFound");

    // A service account with a Role in one namespace of the app cluster.
    let app = &clusters().app;
    let team = unique_name("tokens-team");
    app.kubectl(&["create", "namespace", &team]);
    app.kubectl(&["-n", &team, "create", "serviceaccount", "reader"]);
    let rbac = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "db-reader", "namespace": team},
         "rules": [{"apiGroups": ["db.example.com"], "resources": ["postgresqlinstances"],
            "verbs": ["list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "db-reader", "namespace": team},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "db-reader"},
         "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": team}]},
    ]});
    app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&rbac.to_string()));
    let token = app.kubectl(&["-n", &team, "create", "token", "reader"]);
    let token = token.trim();

    // Registrations arrive by watch: wait until the token is known.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (code, body) = loop {
        let (code, body) = curl(&export, &list_path(&team), token);
        if code != 401 || std::time::Instant::now() > deadline {
            break (code, body);
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    assert_eq!(code, 200, "{body}");
    let (code, body) = curl(&export, &list_path("default"), token);
    assert_eq!(code, 403, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        status["message"],
        format!(
            "postgresqlinstances.db.example.com is forbidden: User \
             \"system:serviceaccount:{team}:reader\" cannot list resource \
             \"postgresqlinstances\" in API group \"db.example.com\" in the namespace \"default\""
        )
    );

    // Expired: the app cluster's own signing key, the real key id, an
    // expiry in the past.
    let header = jsonwebtoken::decode_header(token).unwrap();
    let claims: serde_json::Value =
        jsonwebtoken::dangerous::insecure_decode::<serde_json::Value>(token)
            .unwrap()
            .claims;
    let mut expired = claims.clone();
    expired["exp"] = json!(1_700_000_000u64);
    expired["iat"] = json!(1_699_990_000u64);
    expired["nbf"] = json!(1_699_990_000u64);
    let key = std::fs::read(clusters().app.pki.service_account().0).unwrap();
    let signed = |claims: &serde_json::Value| {
        jsonwebtoken::encode(
            &header,
            claims,
            &jsonwebtoken::EncodingKey::from_ec_pem(&key).unwrap(),
        )
        .unwrap()
    };
    // The same claims re-signed are accepted: the refusal below is the expiry.
    assert_eq!(curl(&export, &list_path(&team), &signed(&claims)).0, 200);
    assert_eq!(curl(&export, &list_path(&team), &signed(&expired)).0, 401);

    // Another audience.
    let other_audience = app.kubectl(&[
        "-n",
        &team,
        "create",
        "token",
        "reader",
        "--audience",
        "https://somewhere-else",
    ]);
    assert_eq!(
        curl(&export, &list_path(&team), other_audience.trim()).0,
        401
    );

    // Another cluster's token: the provider's.
    let provider = &clusters().provider;
    let _ = provider.kubectl_output(
        &["-n", "default", "create", "serviceaccount", "stranger"],
        None,
    );
    let foreign = provider.kubectl(&["-n", "default", "create", "token", "stranger"]);
    assert_eq!(curl(&export, &list_path(&team), foreign.trim()).0, 401);
    // A legacy Secret token of the same ServiceAccount: not a key bindery
    // knows (another issuer), so the app cluster reviews it, and accepts.
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "reader-legacy", "namespace": team,
            "annotations": {"kubernetes.io/service-account.name": "reader"}}});
    app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&secret.to_string()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let legacy = loop {
        let data = app.kubectl(&[
            "-n",
            &team,
            "get",
            "secret",
            "reader-legacy",
            "-o",
            "jsonpath={.data.token}",
        ]);
        if !data.trim().is_empty() {
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .unwrap();
            break String::from_utf8(bytes).unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the legacy token never appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    let (code, body) = curl(&export, &list_path(&team), &legacy);
    assert_eq!(code, 200, "reviewed by the app cluster: {body}");
    let (code, _) = curl(&export, &list_path("default"), &legacy);
    assert_eq!(code, 403, "and authorized by it");

    // And a forged signature on otherwise valid claims.
    let mut forged = signed(&claims);
    forged.truncate(forged.len() - 4);
    forged.push_str("AAAA");
    assert_eq!(curl(&export, &list_path(&team), &forged).0, 401);
}
