//! The trust material bindery records for an app cluster, read from the app
//! cluster itself over a proven connection rather than taken from the
//! binder's word: the front-proxy CA and allowed names from
//! `kube-system/extension-apiserver-authentication` (what kube-apiserver
//! publishes for aggregated API servers), the service-account issuer and
//! keys from its discovery documents. Where the app cluster does not let
//! the account read them (an account made by an older `bindery bind`), the
//! binder's values stand only while they change nothing registered.

use super::wire::Registration;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Where kube-apiserver publishes its front-proxy CA.
pub const AUTHENTICATION_CONFIG_MAP: &str = "extension-apiserver-authentication";
const CA_KEY: &str = "requestheader-client-ca-file";
const NAMES_KEY: &str = "requestheader-allowed-names";
/// How long a refused read of the ConfigMap is retried: the account's new
/// RoleBinding may take a moment to be seen.
const RBAC_GRACE: Duration = Duration::from_secs(2);

/// What to record for the app cluster `client` reaches (proven to be the one
/// the binder claims): `claimed` with the trust material the app cluster
/// publishes. `registered` is what is recorded now, when that is the same
/// app cluster. `Err` says why the binder's word would have to be taken for
/// a change to the registered front-proxy CA.
pub async fn trust(
    client: &kube::Client,
    claimed: &Registration,
    registered: Option<&Registration>,
) -> Result<Registration, String> {
    let mut recorded = claimed.clone();
    match front_proxy(client).await {
        Some((ca, names)) => {
            recorded.requestheader_client_ca = ca;
            recorded.requestheader_allowed_names = names;
        }
        None if registered.is_none_or(|r| same_front_proxy(r, claimed)) => {}
        None => {
            return Err(format!(
                "the front-proxy CA differs from the registered one and cannot be read from the \
                 app cluster's kube-system/{AUTHENTICATION_CONFIG_MAP} to confirm it"
            ));
        }
    }
    match token_issuer(client).await {
        Some((issuer, keys)) => {
            recorded.service_account_issuer = Some(issuer);
            recorded.service_account_jwks = Some(keys);
        }
        None if registered.is_none_or(|r| same_token_issuer(r, claimed)) => {}
        // Unconfirmed keys are not recorded: tokens are then reviewed by the
        // app cluster itself (TokenReview), which is proven.
        None => {
            recorded.service_account_issuer = None;
            recorded.service_account_jwks = None;
        }
    }
    Ok(recorded)
}

fn same_front_proxy(a: &Registration, b: &Registration) -> bool {
    a.requestheader_client_ca.trim() == b.requestheader_client_ca.trim()
        && a.requestheader_allowed_names == b.requestheader_allowed_names
}

fn same_token_issuer(a: &Registration, b: &Registration) -> bool {
    a.service_account_issuer == b.service_account_issuer
        && a.service_account_jwks == b.service_account_jwks
}

/// The front-proxy CA and allowed names the app cluster publishes; `None`
/// when they cannot be read.
pub async fn front_proxy(client: &kube::Client) -> Option<(String, Vec<String>)> {
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), "kube-system");
    let deadline = Instant::now() + RBAC_GRACE;
    loop {
        match config_maps.get(AUTHENTICATION_CONFIG_MAP).await {
            Ok(found) => return front_proxy_of(&found.data.unwrap_or_default()),
            Err(kube::Error::Api(s)) if s.code == 403 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => {
                tracing::info!(%error, "the app cluster's front-proxy CA cannot be read");
                return None;
            }
        }
    }
}

/// The front-proxy CA and allowed names in the ConfigMap's data, as
/// kube-apiserver writes them (the names as a JSON list).
fn front_proxy_of(data: &BTreeMap<String, String>) -> Option<(String, Vec<String>)> {
    let ca = data.get(CA_KEY).filter(|ca| !ca.trim().is_empty())?;
    let names = data
        .get(NAMES_KEY)
        .and_then(|names| serde_json::from_str(names).ok())
        .unwrap_or_default();
    Some((ca.clone(), names))
}

/// The service-account issuer and its keys (JWKS) the app cluster serves;
/// `None` when either cannot be read.
async fn token_issuer(client: &kube::Client) -> Option<(String, String)> {
    let get = |path: &str| {
        http::Request::get(path)
            .body(Vec::new())
            .expect("a GET request builds")
    };
    let discovery: Value = client
        .request(get("/.well-known/openid-configuration"))
        .await
        .ok()?;
    let issuer = discovery["issuer"].as_str()?.to_string();
    let keys = client.request_text(get("/openid/v1/jwks")).await.ok()?;
    Some((issuer, keys))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_map_is_read_as_kube_apiserver_writes_it() {
        let data = BTreeMap::from([
            (CA_KEY.to_string(), "PEM".to_string()),
            (
                NAMES_KEY.to_string(),
                r#"["front-proxy-client","aggregator"]"#.to_string(),
            ),
        ]);
        assert_eq!(
            front_proxy_of(&data),
            Some((
                "PEM".to_string(),
                vec!["front-proxy-client".to_string(), "aggregator".to_string()]
            ))
        );
        let no_names = BTreeMap::from([(CA_KEY.to_string(), "PEM".to_string())]);
        assert_eq!(front_proxy_of(&no_names), Some(("PEM".into(), vec![])));
        assert_eq!(front_proxy_of(&BTreeMap::new()), None, "no front proxy");
    }

    #[test]
    fn registrations_compare_by_their_trust_material() {
        let a = Registration {
            kubeconfig: "one".into(),
            requestheader_client_ca: "PEM\n".into(),
            requestheader_allowed_names: vec!["front-proxy-client".into()],
            ..Default::default()
        };
        let b = Registration {
            kubeconfig: "another token".into(),
            requestheader_client_ca: "PEM".into(),
            ..a.clone()
        };
        assert!(
            same_front_proxy(&a, &b),
            "the kubeconfig is not trust material"
        );
        let other_names = Registration {
            requestheader_allowed_names: vec![],
            ..a.clone()
        };
        assert!(!same_front_proxy(&a, &other_names));
        let keys = Registration {
            service_account_jwks: Some("{}".into()),
            ..a.clone()
        };
        assert!(!same_token_issuer(&a, &keys));
    }
}
