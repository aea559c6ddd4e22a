//! App cluster registrations: the Secret `app-cluster` in a consumer's
//! cluster namespace registers its app cluster with the provider. Its keys:
//! `kubeconfig` (reaches the app cluster; `bindery bind` writes one for a
//! least-privilege account), `requestheader-client-ca.crt` and
//! `requestheader-allowed-names` (comma-separated) to recognise the app
//! cluster's front proxy, and optionally `service-account-issuer` and
//! `service-account-jwks` to verify its service-account tokens. This module reads such Secrets, and keeps the
//! serving side's [`Registrations`] and the listener's trusted CAs in step
//! with them.

use crate::auth::registrations::{Registration, Registrations, TokenIssuer};
use crate::auth::trust::{CaVerifier, DynamicClientVerifier, parse_pem_bundle};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use rustls_pki_types::CertificateDer;
use std::collections::HashMap;
use std::sync::Arc;

/// The Secret's name, in every cluster namespace.
pub const SECRET_NAME: &str = "app-cluster";
pub const KUBECONFIG_KEY: &str = "kubeconfig";
pub const REQUESTHEADER_CA_KEY: &str = "requestheader-client-ca.crt";
pub const ALLOWED_NAMES_KEY: &str = "requestheader-allowed-names";
/// The app cluster's service-account issuer (`--service-account-issuer`).
pub const TOKEN_ISSUER_KEY: &str = "service-account-issuer";
/// Its public keys, as the app cluster serves them at `/openid/v1/jwks`.
pub const TOKEN_KEYS_KEY: &str = "service-account-jwks";

fn key<'a>(secret: &'a Secret, key: &str) -> Option<&'a [u8]> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.as_slice())
}

/// A client for the app cluster the Secret reaches.
pub async fn client_from(secret: &Secret) -> Result<kube::Client, String> {
    let bytes = key(secret, KUBECONFIG_KEY)
        .ok_or_else(|| format!("Secret {SECRET_NAME} has no key {KUBECONFIG_KEY}"))?;
    let text = std::str::from_utf8(bytes).map_err(|e| format!("kubeconfig: {e}"))?;
    client_from_kubeconfig(text).await
}

/// A client for the app cluster a kubeconfig (its current context) reaches.
pub async fn client_from_kubeconfig(text: &str) -> Result<kube::Client, String> {
    let config = config_from_kubeconfig(text).await?;
    kube::Client::try_from(config).map_err(|e| format!("client: {e}"))
}

/// The client configuration of a kubeconfig's current context.
pub async fn config_from_kubeconfig(text: &str) -> Result<kube::Config, String> {
    let kubeconfig = Kubeconfig::from_yaml(text).map_err(|e| format!("kubeconfig: {e}"))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("kubeconfig: {e}"))
}

/// The registration the Secret makes, with its front-proxy CA certificates.
pub async fn registration_from(
    secret: &Secret,
) -> Result<(Registration, Vec<CertificateDer<'static>>), String> {
    let ca = key(secret, REQUESTHEADER_CA_KEY)
        .ok_or_else(|| format!("Secret {SECRET_NAME} has no key {REQUESTHEADER_CA_KEY}"))?;
    let allowed_names = key(secret, ALLOWED_NAMES_KEY)
        .map(|names| {
            String::from_utf8_lossy(names)
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let token_issuer = match (key(secret, TOKEN_ISSUER_KEY), key(secret, TOKEN_KEYS_KEY)) {
        (Some(issuer), Some(keys)) => Some(TokenIssuer {
            issuer: String::from_utf8_lossy(issuer).trim().to_string(),
            keys: serde_json::from_slice(keys)
                .map_err(|e| format!("{TOKEN_KEYS_KEY} is not a JWKS: {e}"))?,
        }),
        _ => None,
    };
    let registration = Registration {
        requestheader_ca: CaVerifier::from_pem(ca)?,
        allowed_names,
        app: client_from(secret).await?,
        token_issuer,
    };
    Ok((registration, parse_pem_bundle(ca)?))
}

/// Keeps `registrations` and the listener's trusted CAs (`base` plus every
/// registered front-proxy CA) in step with the `app-cluster` Secrets of
/// cluster namespaces named `<prefix><consumer>`. Runs until dropped.
pub async fn follow(
    provider: kube::Client,
    prefix: String,
    registrations: Registrations,
    verifier: Arc<DynamicClientVerifier>,
    base: Vec<CertificateDer<'static>>,
) {
    let api: Api<Secret> = Api::all(provider);
    let config = watcher::Config::default().fields(&format!("metadata.name={SECRET_NAME}"));
    let writer = reflector::store::Writer::default();
    let store: Store<Secret> = writer.as_reader();
    let mut events = watcher(api, config)
        .default_backoff()
        .reflect(writer)
        .boxed();
    // Registrations are rebuilt only when their Secret changed.
    let mut built: HashMap<String, (String, Option<Built>)> = HashMap::new();
    while let Some(event) = events.next().await {
        if let Err(error) = event {
            tracing::warn!(%error, "watching app cluster registrations failed; retrying");
            continue;
        }
        let mut all = HashMap::new();
        let mut roots = base.clone();
        let mut seen = HashMap::new();
        for secret in store.state() {
            let namespace = secret.namespace().unwrap_or_default();
            let Some(consumer) = namespace.strip_prefix(&prefix) else {
                continue;
            };
            let version = secret.resource_version().unwrap_or_default();
            let current = match built.remove(&namespace) {
                Some((v, current)) if v == version => current,
                _ => build(&namespace, &secret).await,
            };
            if let Some((registration, cas)) = &current {
                all.insert(consumer.to_string(), registration.clone());
                roots.extend(cas.iter().cloned());
            }
            seen.insert(namespace, (version, current));
        }
        built = seen;
        registrations.replace(all);
        if let Err(error) = verifier.set_roots(&roots) {
            tracing::warn!(%error, "updating the trusted client CAs failed");
        }
    }
}

type Built = (Arc<Registration>, Vec<CertificateDer<'static>>);

/// The registration of one Secret; `None` when it registers no front proxy
/// (a kubeconfig alone serves the controllers) or cannot be used.
async fn build(namespace: &str, secret: &Secret) -> Option<Built> {
    if key(secret, REQUESTHEADER_CA_KEY).is_none() {
        tracing::debug!(%namespace, "app cluster registered without a front proxy");
        return None;
    }
    match registration_from(secret).await {
        Ok((registration, cas)) => Some((Arc::new(registration), cas)),
        Err(error) => {
            tracing::warn!(%namespace, %error, "app cluster registration unusable");
            None
        }
    }
}
