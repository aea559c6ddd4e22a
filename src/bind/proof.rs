//! Proving control of an app cluster. A binder claims an identity (a
//! kube-system namespace UID, which is no secret) and hands bindery a
//! kubeconfig; the proof is that the kubeconfig reads that UID. Once an app
//! cluster is registered, only the registered trust material proves: the
//! kubeconfig must name the registered server, and the server is verified
//! with the registered CA, never the caller's ([`pinned`]). So a server the
//! caller runs, answering someone else's UID, proves nothing.

use super::wire::Registration;
use crate::app_cluster;
use crate::status::ApiError;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::Api;
use std::time::{Duration, Instant};

/// The values of a registration Secret (`app-cluster`), as a
/// [`Registration`]; keys it lacks are left empty.
pub fn registered(secret: &Secret) -> Registration {
    let text = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| String::from_utf8_lossy(&b.0).to_string())
    };
    Registration {
        kubeconfig: text(app_cluster::KUBECONFIG_KEY).unwrap_or_default(),
        requestheader_client_ca: text(app_cluster::REQUESTHEADER_CA_KEY).unwrap_or_default(),
        requestheader_allowed_names: text(app_cluster::ALLOWED_NAMES_KEY)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect(),
        service_account_issuer: text(app_cluster::TOKEN_ISSUER_KEY),
        service_account_jwks: text(app_cluster::TOKEN_KEYS_KEY),
    }
}

/// The client configuration of the caller's kubeconfig; 400 when it is none.
pub async fn config(kubeconfig: &str) -> Result<kube::Config, ApiError> {
    app_cluster::config_from_kubeconfig(kubeconfig)
        .await
        .map_err(|e| ApiError::bad_request(format!("registration kubeconfig: {e}")))
}

/// The caller's kubeconfig, pinned to the registered app cluster: `Some`
/// when it names the registered server with the registered CA (see
/// [`same_cluster`]), and then it verifies the server with the registered
/// kubeconfig's TLS settings. `None` when it points elsewhere, carries
/// another CA, or the registered kubeconfig pins nothing.
pub async fn pinned(registered: &str, kubeconfig: &str) -> Result<Option<kube::Config>, ApiError> {
    let mut caller = config(kubeconfig).await?;
    let Ok(registered) = app_cluster::config_from_kubeconfig(registered).await else {
        return Ok(None);
    };
    if !same_cluster(&registered, &caller) {
        return Ok(None);
    }
    caller.cluster_url = registered.cluster_url;
    caller.root_cert = registered.root_cert;
    caller.tls_server_name = registered.tls_server_name;
    caller.accept_invalid_certs = false;
    caller.proxy_url = None;
    Ok(Some(caller))
}

/// Whether `caller` reaches the server `registered` reaches, verified the
/// same way: the same URL, server name and CA certificates, TLS verified
/// and no proxy on either side.
pub fn same_cluster(registered: &kube::Config, caller: &kube::Config) -> bool {
    let verified = |c: &kube::Config| !c.accept_invalid_certs && c.proxy_url.is_none();
    let roots = |c: &kube::Config| {
        let mut roots = c.root_cert.clone().unwrap_or_default();
        roots.sort();
        roots
    };
    verified(registered)
        && verified(caller)
        && registered.cluster_url == caller.cluster_url
        && registered.tls_server_name == caller.tls_server_name
        && roots(registered) == roots(caller)
}

/// A client for a proven (or to be proven) connection.
pub fn client(config: kube::Config) -> Result<kube::Client, ApiError> {
    kube::Client::try_from(config)
        .map_err(|e| ApiError::bad_request(format!("registration kubeconfig: {e}")))
}

/// The app cluster identity cluster namespace `namespace` records on the
/// provider (`backend.kube-bind.io/identity`, as kube-bind's backend and
/// bindery's bind write it, or the key of early kube-bind backends), if it
/// exists and records one.
pub async fn recorded_identity(
    provider: &kube::Client,
    namespace: &str,
) -> kube::Result<Option<String>> {
    Ok(Api::<Namespace>::all(provider.clone())
        .get_opt(namespace)
        .await?
        .and_then(|n| {
            crate::controllers::legacy_identity::recorded(&n.metadata.annotations?)
                .map(str::to_string)
        }))
}

/// Proves that `client` reaches the app cluster `identity` names: its
/// kube-system namespace has that UID, or `recorded` (the identity its
/// cluster namespace records, offered only where the caller is trusted to
/// name the cluster otherwise) is that identity. kube-bind's CLI binds with
/// any identity (`--cluster-identity`, or its UI's), and its backend records
/// it on the cluster namespace. A new account's token and RBAC may take a
/// moment to work, so failures are retried briefly.
pub async fn prove_identity(
    client: &kube::Client,
    identity: &str,
    recorded: Option<&str>,
) -> Result<(), ApiError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let outcome = Api::<Namespace>::all(client.clone())
            .get("kube-system")
            .await;
        let error = match outcome {
            Ok(ns) if ns.metadata.uid.as_deref() == Some(identity) => return Ok(()),
            Ok(_) if recorded == Some(identity) => return Ok(()),
            // Nothing the named server answered is echoed: it is the
            // binder's choice of server, maybe one only bindery reaches.
            Ok(_) => {
                return Err(ApiError::bad_request(format!(
                    "the kubeconfig reaches an app cluster whose kube-system UID is not {identity}"
                )));
            }
            Err(e) => e,
        };
        if Instant::now() > deadline {
            // The whole error is the provider's to read, not the binder's.
            tracing::info!(%error, "a registration kubeconfig cannot read kube-system");
            return Err(ApiError::bad_request(format!(
                "the registration kubeconfig cannot read namespace kube-system in the app \
                 cluster ({})",
                unechoed(&error)
            )));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// What a failed request to the binder's server was, without what that
/// server said: its HTTP status, else the kind of failure.
fn unechoed(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("it answered HTTP {}", status.code),
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            "it cannot be reached: the connection or TLS failed".into()
        }
        kube::Error::SerdeError(_) => "it answered no Namespace".into(),
        _ => "the request failed".into(),
    }
}

/// Why a registration of a consumer that exists without one is refused to
/// a binder who is not a provider administrator.
pub fn unregistered(consumer: &str) -> String {
    format!(
        "consumer {consumer} is bound without a registered app cluster, and its identity \
         proves nothing"
    )
}

/// Why a registration is refused to a binder who cannot prove with the
/// registered trust material.
pub fn other_trust(consumer: &str) -> String {
    format!(
        "the app cluster of consumer {consumer} is registered with other trust material \
         (another server or certificate authority)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use k8s_openapi::ByteString;

    const CA_A: &[u8] = b"-----BEGIN CERTIFICATE-----\nQUFB\n-----END CERTIFICATE-----\n";
    const CA_B: &[u8] = b"-----BEGIN CERTIFICATE-----\nQkJC\n-----END CERTIFICATE-----\n";

    fn kubeconfig(server: &str, ca: &[u8], extra: &str, token: &str) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(ca);
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: app\n\
             contexts: [{{name: app, context: {{cluster: app, user: u}}}}]\n\
             clusters: [{{name: app, cluster: {{server: '{server}', certificate-authority-data: {ca}{extra}}}}}]\n\
             users: [{{name: u, user: {{token: {token}}}}}]\n"
        )
    }

    #[tokio::test]
    async fn only_the_registered_server_and_ca_pin() {
        let registered = kubeconfig("https://10.0.0.1:6443", CA_A, "", "old");
        let again = kubeconfig("https://10.0.0.1:6443", CA_A, "", "new");
        let pinned_config = pinned(&registered, &again).await.unwrap().expect("pinned");
        assert_eq!(pinned_config.cluster_url, "https://10.0.0.1:6443");
        assert_eq!(
            serde_json::to_value(&pinned_config.auth_info).unwrap()["token"],
            "new",
            "the caller's credentials"
        );
        for (elsewhere, why) in [
            (
                kubeconfig("https://10.6.6.6:6443", CA_A, "", "new"),
                "another server",
            ),
            (
                kubeconfig("https://10.0.0.1:6443", CA_B, "", "new"),
                "another CA",
            ),
            (
                kubeconfig(
                    "https://10.0.0.1:6443",
                    CA_A,
                    ", tls-server-name: evil",
                    "new",
                ),
                "another server name",
            ),
        ] {
            assert!(
                pinned(&registered, &elsewhere).await.unwrap().is_none(),
                "{why}"
            );
        }
        let unverified = kubeconfig(
            "https://10.0.0.1:6443",
            CA_A,
            ", insecure-skip-tls-verify: true",
            "x",
        );
        assert!(
            pinned(&unverified, &again).await.unwrap().is_none(),
            "a registration that skips verification pins nothing"
        );
        assert!(
            pinned("not: [a kubeconfig", &again)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(pinned(&registered, "nope").await.unwrap_err().code, 400);
    }

    #[test]
    fn a_registration_secret_reads_back_as_registered() {
        let data = [
            ("kubeconfig", "k"),
            ("requestheader-client-ca.crt", "ca"),
            ("requestheader-allowed-names", "front-proxy-client, other,"),
        ];
        let secret = Secret {
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Default::default()
        };
        let values = registered(&secret);
        assert_eq!(values.kubeconfig, "k");
        assert_eq!(values.requestheader_client_ca, "ca");
        assert_eq!(
            values.requestheader_allowed_names,
            ["front-proxy-client", "other"]
        );
        assert_eq!(values.service_account_jwks, None);
    }
}
