//! How the command line reaches both sides of a binding: bindery's `/bind`
//! endpoints as a binder (with the binder's provider credentials, trusting
//! bindery's serving CA), the app cluster (its kubeconfig), and the identity
//! the app cluster binds as.

use anyhow::{Context, Result, anyhow};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::PathBuf;
use std::time::Duration;

/// Annotation on the APIServiceBinding: the consumer id bindery knows the app
/// cluster by, which unbind needs.
pub const CONSUMER_ANNOTATION: &str = "bindery.dev/consumer";

/// How to reach bindery as a binder.
#[derive(Clone)]
pub struct Provider {
    /// bindery's base URL.
    pub url: String,
    /// The CA of bindery's serving certificate.
    pub certificate_authority: PathBuf,
    /// The binder's provider credentials, as a kubeconfig user: a token the
    /// provider accepts, or a client certificate of the provider's client CA.
    pub credentials: kube::config::AuthInfo,
}

/// A client for bindery's `/bind` endpoints.
pub(super) struct Bindery {
    client: kube::Client,
    pub(super) url: String,
}

impl Bindery {
    pub(super) fn connect(provider: &Provider) -> Result<Self> {
        let pem = std::fs::read(&provider.certificate_authority)
            .with_context(|| format!("reading {}", provider.certificate_authority.display()))?;
        let roots = crate::auth::trust::parse_pem_bundle(&pem).map_err(anyhow::Error::msg)?;
        let mut config = kube::Config::new(provider.url.parse().context("bindery's URL")?);
        config.root_cert = Some(roots.into_iter().map(|c| c.to_vec()).collect());
        config.auth_info = provider.credentials.clone();
        config.read_timeout = Some(Duration::from_secs(60));
        Ok(Self {
            client: kube::Client::try_from(config)?,
            url: provider.url.trim_end_matches('/').to_string(),
        })
    }

    pub(super) async fn call<T: DeserializeOwned>(
        &self,
        method: http::Method,
        path: &str,
        body: Option<&impl Serialize>,
    ) -> Result<T> {
        let bytes = body
            .map(serde_json::to_vec)
            .transpose()?
            .unwrap_or_default();
        let request = http::Request::builder()
            .method(method.clone())
            .uri(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(bytes)?;
        self.client
            .request(request)
            .await
            .map_err(|e| match e {
                kube::Error::Api(status) => anyhow!("{}", status.message),
                other => anyhow!(other),
            })
            .with_context(|| format!("{method} {path} at bindery"))
    }
}

pub(crate) async fn app_config(path: Option<&std::path::Path>) -> Result<kube::Config> {
    match path {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Ok(kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?)
        }
        None => Ok(kube::Config::infer().await?),
    }
}

/// The identity the app cluster binds as: `given` (kube-bind's
/// `--cluster-identity`, which `bindery migrate` reads from the cluster
/// namespace kube-bind made), else its kube-system namespace UID.
pub(super) async fn cluster_identity(app: &kube::Client, given: Option<&str>) -> Result<String> {
    match given {
        Some(identity) => Ok(identity.to_string()),
        None => identity(app).await,
    }
}

/// The app cluster's identity: its kube-system namespace UID.
pub(crate) async fn identity(app: &kube::Client) -> Result<String> {
    Api::<Namespace>::all(app.clone())
        .get("kube-system")
        .await
        .context("reading the app cluster's kube-system namespace")?
        .metadata
        .uid
        .ok_or_else(|| anyhow!("namespace kube-system has no UID"))
}
