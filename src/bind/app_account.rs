//! bindery's account in the app cluster, as `bind` makes it and `unbind`
//! proves it: the ServiceAccount and its token, and the registration the
//! provider keeps of the app cluster (a kubeconfig of that account, the
//! front-proxy CA the aggregator's requests carry, the service-account
//! issuer when the app cluster publishes one).

use super::app_objects;
use super::app_writes::{apply, create_if_missing, install_binding_crd};
use super::wire::Registration;
use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use serde_json::Value;
use std::time::{Duration, Instant};

/// Makes bindery's account and reads what the provider must know.
pub(super) async fn register(
    app: &kube::Client,
    config: &kube::Config,
    timeout: Duration,
) -> Result<Registration> {
    create_if_missing(app, &app_objects::namespace()).await?;
    install_binding_crd(app).await?;
    for object in app_objects::account() {
        apply(app, &object).await?;
    }
    let token = account_token(app, timeout).await?;
    let authentication = Api::<ConfigMap>::namespaced(app.clone(), "kube-system")
        .get("extension-apiserver-authentication")
        .await
        .context("reading kube-system/extension-apiserver-authentication")?
        .data
        .unwrap_or_default();
    let requestheader_client_ca = authentication
        .get("requestheader-client-ca-file")
        .cloned()
        .ok_or_else(|| anyhow!("the app cluster has no front-proxy CA (requestheader-client-ca-file); is its aggregation layer on?"))?;
    let requestheader_allowed_names: Vec<String> = authentication
        .get("requestheader-allowed-names")
        .map(|names| serde_json::from_str(names).unwrap_or_default())
        .unwrap_or_default();
    let (service_account_issuer, service_account_jwks) = token_issuer(app).await;
    Ok(Registration {
        kubeconfig: account_kubeconfig(config, &token)?,
        requestheader_client_ca,
        requestheader_allowed_names,
        service_account_issuer,
        service_account_jwks,
    })
}

/// The app cluster's service-account issuer and keys, when it publishes
/// them (bindery then reviews tokens with the app cluster instead).
async fn token_issuer(app: &kube::Client) -> (Option<String>, Option<String>) {
    let get = |path: &str| {
        http::Request::get(path)
            .body(Vec::new())
            .expect("a GET request builds")
    };
    let issuer = app
        .request::<Value>(get("/.well-known/openid-configuration"))
        .await
        .ok()
        .and_then(|c| c["issuer"].as_str().map(str::to_string));
    let jwks = app.request_text(get("/openid/v1/jwks")).await.ok();
    match (issuer, jwks) {
        (Some(issuer), Some(jwks)) => (Some(issuer), Some(jwks)),
        _ => (None, None),
    }
}

/// Waits for the token controller to fill the account's token Secret.
pub(super) async fn account_token(app: &kube::Client, timeout: Duration) -> Result<String> {
    let secrets = Api::<Secret>::namespaced(app.clone(), app_objects::NAMESPACE);
    let deadline = Instant::now() + timeout;
    loop {
        let secret = secrets.get(app_objects::TOKEN_SECRET).await?;
        if let Some(token) = secret.data.as_ref().and_then(|d| d.get("token")) {
            return Ok(String::from_utf8(token.0.clone())?);
        }
        if Instant::now() > deadline {
            bail!(
                "the app cluster never issued a token into {}/{} (is kube-controller-manager's token controller running?)",
                app_objects::NAMESPACE,
                app_objects::TOKEN_SECRET
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A kubeconfig that reaches the app cluster (as `config` does) with the
/// account's token.
pub(super) fn account_kubeconfig(config: &kube::Config, token: &str) -> Result<String> {
    let mut ca_pem = String::new();
    if let Some(roots) = &config.root_cert {
        for der in roots {
            let body = base64::engine::general_purpose::STANDARD.encode(der);
            ca_pem.push_str("-----BEGIN CERTIFICATE-----\n");
            for line in body.as_bytes().chunks(64) {
                ca_pem.push_str(std::str::from_utf8(line)?);
                ca_pem.push('\n');
            }
            ca_pem.push_str("-----END CERTIFICATE-----\n");
        }
    } else if let Some(file) = &config.root_cert_file {
        ca_pem = std::fs::read_to_string(file)?;
    }
    let mut cluster =
        serde_json::json!({"server": config.cluster_url.to_string().trim_end_matches('/')});
    if !ca_pem.is_empty() {
        cluster["certificate-authority-data"] = base64::engine::general_purpose::STANDARD
            .encode(ca_pem)
            .into();
    }
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "app",
        "clusters": [{"name": "app", "cluster": cluster}],
        "contexts": [{"name": "app", "context": {"cluster": "app", "user": app_objects::ACCOUNT}}],
        "users": [{"name": app_objects::ACCOUNT, "user": {"token": token}}],
    });
    Ok(serde_norway::to_string(&kubeconfig)?)
}
