//! `bindery route`: reads the app cluster's front-proxy CA, reaches each
//! provider's bindery with the consumer kubeconfig it was given, and serves
//! the router ([`super::router`]) over TLS until SIGTERM, its large answers
//! compressed as kube-apiserver compresses them.

use super::router::{FrontProxy, Provider, Router};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::sync::Arc;

/// What `bindery route` is told.
pub struct Options {
    /// The app cluster's kubeconfig (`None`: inferred, in-cluster included).
    pub kubeconfig: Option<PathBuf>,
    /// Each provider's name and the consumer kubeconfig of its bindery.
    pub providers: Vec<(String, PathBuf)>,
    pub default_provider: String,
    pub listen: std::net::SocketAddr,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    /// How often the providers' schemas are judged again.
    pub schema_recheck: std::time::Duration,
    /// The app cluster's Service (`NAMESPACE/NAME`) the router's APIServices
    /// name, its port (default: the one listened on), and the CA of the
    /// serving certificate; `None`: the APIServices are left as they are.
    pub register: Option<Registration>,
}

/// Where the APIServices the router registers send their requests.
pub struct Registration {
    pub service: String,
    pub port: Option<u16>,
    pub ca_file: PathBuf,
}

/// A client of each provider's bindery (`providers`: name and the
/// consumer kubeconfig), by name.
pub async fn provider_clients(
    providers: &[(String, PathBuf)],
) -> Result<std::collections::HashMap<String, kube::Client>> {
    let mut clients = std::collections::HashMap::new();
    for (name, kubeconfig) in providers {
        let mut config = crate::serve::provider_config(Some(kubeconfig))
            .await
            .with_context(|| format!("the provider {name}'s kubeconfig"))?;
        // Watches last as long as the provider keeps them.
        config.read_timeout = None;
        let client = kube::Client::try_from(config)
            .with_context(|| format!("a client for the provider {name}"))?;
        clients.insert(name.clone(), client);
    }
    Ok(clients)
}

/// Serves until SIGTERM or Ctrl-C.
pub async fn run(options: Options) -> Result<()> {
    let app = crate::serve::provider_client(options.kubeconfig.as_deref())
        .await
        .context("reaching the app cluster")?;
    let (ca, allowed_names) = crate::bind::published::front_proxy(&app)
        .await
        .context("the app cluster's front-proxy CA (kube-system/extension-apiserver-authentication) cannot be read")?;
    let roots = crate::auth::trust::parse_pem_bundle(ca.as_bytes()).map_err(anyhow::Error::msg)?;
    let front_proxy = FrontProxy {
        ca: crate::auth::trust::CaVerifier::from_pem(ca.as_bytes()).map_err(anyhow::Error::msg)?,
        allowed_names,
    };
    let providers: Vec<Provider> = provider_clients(&options.providers)
        .await?
        .into_iter()
        .map(|(name, client)| Provider { name, client })
        .collect();
    let app_client = app.clone();
    let default_client = providers
        .iter()
        .find(|provider: &&Provider| provider.name == options.default_provider)
        .map(|provider| provider.client.clone())
        .with_context(|| format!("no --provider is named {}", options.default_provider))?;
    let group_versions = super::registration::served(&default_client).await?;
    let teller = Arc::new(super::events::Teller::new(
        app.clone(),
        super::registration::names(&group_versions),
    ));
    let router = Router::new(
        app,
        providers,
        &options.default_provider,
        front_proxy,
        &teller,
    )
    .await?;
    tokio::spawn(super::schema_reads::rejudge(
        router.routes.clone(),
        router.providers.clone(),
        router.held.clone(),
        options.schema_recheck,
        teller,
    ));
    let verifier =
        crate::auth::trust::DynamicClientVerifier::new(&roots).map_err(anyhow::Error::msg)?;
    let tls = crate::server::tls::server_config(
        &options.serving_cert,
        &options.serving_key,
        Arc::new(verifier),
    )?;
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("listening on {}", options.listen))?;
    println!(
        "bindery route listening on https://{}",
        listener.local_addr()?
    );
    if let Some(registration) = &options.register {
        let port = registration.port.unwrap_or(listener.local_addr()?.port());
        let service = super::registration::service_ref(&registration.service, port)
            .map_err(anyhow::Error::msg)?;
        let ca = std::fs::read(&registration.ca_file)
            .with_context(|| format!("reading {}", registration.ca_file.display()))?;
        let written =
            super::registration::register(&app_client, &group_versions, &service, &ca).await?;
        tracing::info!(apiservices = %written.join(", "), "the APIServices name the router");
    }
    // Large answers gzip-compressed as kube-apiserver sends them (a merged
    // list is the router's own; a provider's passes back as it came).
    let service = tower::ServiceBuilder::new()
        .layer(crate::server::compress::CompressLayer)
        .service_fn(move |request: crate::server::Incoming| {
            let router = router.clone();
            async move { Ok::<_, std::convert::Infallible>(router.serve(request).await) }
        });
    let connections = crate::server::Connections {
        idle_timeout: crate::server::idle::KUBE_APISERVER_IDLE_TIMEOUT,
        goaway_chance: Default::default(),
        max_streams: crate::server::AGGREGATED_MAX_STREAMS,
    };
    crate::server::serve(
        tls,
        listener,
        connections,
        crate::serve::wait_for_signal(),
        service,
    )
    .await;
    Ok(())
}
