//! `bindery serve`: connect to the provider, start the catalog watches, and
//! run the server until SIGTERM or Ctrl-C.

use crate::app::App;
use crate::auth::client_cert::ConsumerCertificates;
use crate::auth::front_proxy::FrontProxy;
use crate::auth::provider::ProviderUsers;
use crate::auth::registrations::Registrations;
use crate::auth::service_account::ServiceAccountTokens;
use crate::auth::token_review::TokenReviews;
use crate::auth::trust::{CaVerifier, DynamicClientVerifier, parse_pem_bundle};
use crate::cache::CachedUpstream;
use crate::catalog;
use crate::proxy::Proxy;
use crate::proxy::namespaces::NamespaceProvisioner;
use crate::server::authn::Authentication;
use crate::translate::continue_token::ContinueTokens;
use crate::upstream::ProviderUpstream;
use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::watch as signal;

pub struct Options {
    pub provider_kubeconfig: Option<PathBuf>,
    pub listen: SocketAddr,
    pub pki: PathBuf,
    pub cluster_namespace_prefix: String,
    /// The provider-side controllers to run beside serving, if any.
    pub controllers: Option<crate::controllers::Options>,
    /// `--external-url`: where exports' virtual workspaces are reached, for
    /// serving and the controllers alike; `None`: where the caller reached
    /// bindery (serving), its listening address (controllers).
    pub external_url: Option<String>,
    /// Answer the lists it can from the shared watch cache ([`crate::cache`]).
    pub watch_cache: bool,
    /// Where the continue-token key every replica shares is kept.
    pub token_key: crate::token_key::KeySecret,
    /// How long a client connection may stay with no request in flight.
    pub idle_connection_timeout: std::time::Duration,
    /// Over HTTP/2, each request's chance to send its connection a GOAWAY.
    pub goaway_chance: crate::server::goaway::GoawayChance,
    /// Over HTTP/2, the streams one connection carries at once.
    pub http2_max_streams: u32,
    /// Make consumers' requests as their own provider-side accounts.
    pub impersonate: bool,
    /// How long a request body may take to arrive ([`crate::request_body`]).
    pub request_body_timeout: std::time::Duration,
    /// How long to keep serving, not ready, after SIGTERM before draining.
    pub shutdown_delay: std::time::Duration,
    /// `--namespace-data-role`: the ClusterRole bindery binds to itself in
    /// each namespace it serves, when its provider role holds no Secrets
    /// cluster-wide ([`crate::namespace_access`]).
    pub namespace_data_role: Option<String>,
}

pub async fn run(options: Options) -> Result<()> {
    let config = provider_config(options.provider_kubeconfig.as_deref()).await?;
    let client = client_of(config.clone())?;
    let upstream = Arc::new(
        ProviderUpstream::new(&config).context("making the provider client of the proxy")?,
    );
    let version = client
        .apiserver_version()
        .await
        .context("asking the provider for its version")?;
    let namespace_access = crate::namespace_access::NamespaceAccess::of_flag(
        &client,
        options.namespace_data_role.clone(),
    )
    .await?;
    let pki =
        crate::certs::ensure_bindery(&options.pki, &[], &[]).context("reading bindery's PKI")?;
    // Client certificates: bindery's consumer CA, plus the front-proxy CA
    // of every registered app cluster as registrations come and go.
    let consumer_ca_pem = std::fs::read(pki.consumer_ca()).context("reading the consumer CA")?;
    let mut base_roots = parse_pem_bundle(&consumer_ca_pem).map_err(anyhow::Error::msg)?;
    // And the provider's client CA, for binders who show a provider certificate.
    let provider_client_ca = match crate::auth::provider::provider_client_ca(&client).await {
        Ok(Some(pem)) => {
            base_roots.extend(parse_pem_bundle(pem.as_bytes()).map_err(anyhow::Error::msg)?);
            Some(CaVerifier::from_pem(pem.as_bytes()).map_err(anyhow::Error::msg)?)
        }
        Ok(None) => None,
        Err(error) => {
            tracing::warn!(%error, "cannot read the provider's client CA; binders need tokens");
            None
        }
    };
    let verifier = Arc::new(DynamicClientVerifier::new(&base_roots).map_err(anyhow::Error::msg)?);
    let tls = crate::server::tls::server_config(
        &pki.dir.join("serving.crt"),
        &pki.dir.join("serving.key"),
        verifier.clone(),
    )?;
    let registrations = Registrations::default();
    tokio::spawn(crate::app_cluster::follow(
        client.clone(),
        options.cluster_namespace_prefix.clone(),
        registrations.clone(),
        verifier,
        base_roots,
    ));
    let catalog = catalog::watch::start(client.clone(), &options.cluster_namespace_prefix);
    let (stop_tx, stop_rx) = signal::channel(false);
    let provider = client.clone();
    let authorizer = Arc::new(crate::authz::Authorizer::new(Default::default()));
    let sessions = crate::bind::sessions::Sessions::default();
    let cache = options.watch_cache.then(|| {
        Arc::new(CachedUpstream::new(
            upstream.clone(),
            client.clone(),
            stop_rx.clone(),
        ))
    });
    let health = Arc::new(crate::health::Health::new(
        catalog.clone(),
        cache.clone(),
        client.clone(),
    ));
    let app = Arc::new(App {
        catalog: catalog.clone(),
        proxy: Proxy {
            upstream: match &cache {
                Some(cache) => cache.clone() as Arc<dyn crate::upstream::Upstream>,
                None => upstream,
            },
            tokens: Arc::new(continue_tokens(&client, &options.token_key).await),
            namespaces: NamespaceProvisioner::new(client.clone()),
            shutdown: stop_rx,
            access: options
                .impersonate
                .then(|| crate::proxy::access::Access::new(client.clone())),
            quota: crate::quota::QuotaAdmission::new(registrations.clone()),
            fairness: crate::fairness::Fairness::new(Default::default()),
        },
        version: serde_json::to_value(&version).context("encoding the provider's version")?,
        registrations: registrations.clone(),
        authorizer: authorizer.clone(),
        bind: crate::bind::server::BindService {
            provider: provider.clone(),
            prefix: options.cluster_namespace_prefix.clone(),
            serving_ca: std::fs::read_to_string(pki.serving_ca())
                .context("reading the serving CA")?,
            sessions: sessions.clone(),
            authorizer,
            namespace_access: namespace_access.clone(),
        },
        body_timeout: options.request_body_timeout,
        health: health.clone(),
        external_url: options.external_url.clone(),
    });
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("listening on {}", options.listen))?;
    let address = listener.local_addr()?;
    let controllers = options.controllers.map(|mut controllers| {
        controllers.namespace_access = namespace_access;
        controllers.external_url = options
            .external_url
            .clone()
            .or_else(|| Some(listen_url(address)));
        tokio::spawn(crate::controllers::run(client.clone(), controllers))
    });
    catalog.wait_synced().await;
    if let Some(cache) = cache {
        tokio::spawn(warm(catalog.clone(), cache));
    }
    println!("bindery listening on https://{address}");
    tracing::info!(%address, "serving");
    let authentication = Authentication {
        consumers: vec![
            Box::new(ConsumerCertificates {
                ca: CaVerifier::from_pem(&consumer_ca_pem).map_err(anyhow::Error::msg)?,
            }),
            Box::new(FrontProxy {
                registrations: registrations.clone(),
            }),
            Box::new(ServiceAccountTokens {
                registrations: registrations.clone(),
                reviews: TokenReviews::default(),
            }),
        ],
        provider: ProviderUsers {
            provider,
            client_ca: provider_client_ca,
            reviews: TokenReviews::default(),
        },
        sessions,
    };
    let delay = options.shutdown_delay;
    let shutdown = async move {
        wait_for_signal().await;
        // Not ready from now on, still serving for the delay, then draining:
        // as kube-apiserver shuts down.
        health.stop();
        tracing::info!(
            ?delay,
            "asked to stop: /readyz fails; serving on for the shutdown delay"
        );
        tokio::time::sleep(delay).await;
        let _ = stop_tx.send(true);
    };
    let connections = crate::server::Connections {
        idle_timeout: options.idle_connection_timeout,
        goaway_chance: options.goaway_chance,
        max_streams: options.http2_max_streams,
    };
    crate::server::run(app, tls, authentication, listener, connections, shutdown).await;
    // The controllers stop before the runtime does: dropped whole, rather
    // than task by task as the runtime shuts down (which cancelled a
    // reconcile under a controller still polling it).
    if let Some(controllers) = controllers {
        controllers.abort();
        let _ = controllers.await;
    }
    Ok(())
}

/// Keeps the watch cache reflecting every bound resource: the ones bound at
/// start before bindery says it is ready, later ones as they are bound.
async fn warm(catalog: catalog::watch::SharedCatalog, cache: Arc<CachedUpstream>) {
    let mut seen = None;
    loop {
        let generation = catalog.read(|c| c.generation());
        if seen != Some(generation) {
            seen = Some(generation);
            cache.warm(catalog.read(|c| c.served_collections()));
        }
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
}

/// The provider's client, its requests counted and timed
/// ([`crate::metrics::provider`]).
pub fn client_of(config: kube::Config) -> Result<kube::Client> {
    let layer = crate::metrics::provider::ProviderMetricsLayer::new(&config.cluster_url);
    Ok(kube::client::ClientBuilder::try_from(config)
        .context("making the provider client")?
        .with_layer(&layer)
        .build())
}

/// `https://<address>`, with `localhost` for an unspecified address.
fn listen_url(address: SocketAddr) -> String {
    if address.ip().is_unspecified() {
        format!("https://localhost:{}", address.port())
    } else {
        format!("https://{address}")
    }
}

/// Continue tokens under the key every replica shares; under a key of this
/// process alone when the shared one cannot be had (its tokens then open
/// only here, which a single replica does not notice).
async fn continue_tokens(
    client: &kube::Client,
    secret: &crate::token_key::KeySecret,
) -> ContinueTokens {
    match crate::token_key::shared_key(client, secret).await {
        Ok(key) => ContinueTokens::new(key),
        Err(error) => {
            tracing::warn!(%error, namespace = %secret.namespace, name = %secret.name,
                "no shared continue-token key; tokens will open on this replica only");
            ContinueTokens::random()
        }
    }
}

pub async fn provider_client(kubeconfig: Option<&std::path::Path>) -> Result<kube::Client> {
    client_of(provider_config(kubeconfig).await?)
}

/// The provider's client config: from `kubeconfig`, else inferred (in-cluster
/// or the default kubeconfig).
pub async fn provider_config(kubeconfig: Option<&std::path::Path>) -> Result<kube::Config> {
    Ok(match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .context("loading the provider kubeconfig")?
        }
        None => kube::Config::infer()
            .await
            .context("finding the provider's kubeconfig")?,
    })
}

pub async fn wait_for_signal() {
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match terminate.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
}
