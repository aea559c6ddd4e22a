//! The `bindery` command line: one binary, one subcommand per job.
#![forbid(unsafe_code)]

/// jemalloc, not glibc's malloc: with one connection per app cluster and
/// small objects, glibc's per-thread arenas kept about 11 KiB more resident
/// per consumer in `benches/memory` (see benches/RESULTS.md). Built with
/// `--no-default-features`, bindery uses the system malloc, which heap
/// profilers (heaptrack) can see.
#[global_allocator]
#[cfg(feature = "jemalloc")]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::net::IpAddr;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "bindery",
    version,
    about = "Serve provider-cluster APIs to app clusters without copying them"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Make the development PKI: test-cluster CAs and certificates, bindery's
    /// serving certificate and consumer client certificates. Existing files are kept.
    Certs(CertsArgs),
    /// Serve bound resources from the provider cluster (and run the
    /// provider-side controllers, unless --controllers=false).
    Serve(ServeArgs),
    /// Run only the provider-side controllers (leader-elected).
    Controllers(ControllersArgs),
    /// Print a kubeconfig for a consumer of the direct endpoint `/clusters/<consumer>`.
    ConsumerKubeconfig(ConsumerKubeconfigArgs),
    /// Bind a provider's API into an app cluster: pick a template (with
    /// --template, or on bindery's page), then register the APIServices.
    Bind(BindArgs),
    /// Remove a binding and everything `bindery bind` made for it.
    Unbind(UnbindArgs),
    /// Move an app cluster bound by kube-bind's konnector to bindery: stop
    /// the konnector, take the export over, adopt the synced objects on the
    /// provider, remove the copied CRD. Safe to run again.
    Migrate(MigrateArgs),
    /// Serve an app cluster's bound groups from several providers: each
    /// namespace from the provider its Namespace names (label
    /// `bindery.dev/provider`, else the default), lists and watches across
    /// namespaces from all of them as one.
    Route(RouteArgs),
    /// Move one namespace of the app cluster, with every bound object in it, from the provider
    /// that owns it to another of the router's providers.
    MoveNamespace(MoveNamespaceArgs),
}

/// The app cluster and the providers a router serves it from (`bindery
/// route` and `bindery move-namespace` are given the same).
#[derive(clap::Args)]
struct RouterProviderArgs {
    /// The app cluster's kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// A provider, `NAME=KUBECONFIG`: its name (a DNS label, what Namespaces are labelled with)
    /// and the consumer kubeconfig of its bindery (`bindery consumer-kubeconfig`). Repeated.
    #[arg(long = "provider", required = true, value_parser = provider_flag)]
    providers: Vec<(String, PathBuf)>,
    /// The provider of every namespace whose Namespace names none.
    #[arg(long)]
    default_provider: String,
}

#[derive(clap::Args)]
struct MoveNamespaceArgs {
    #[command(flatten)]
    router: RouterProviderArgs,
    /// The namespace to move.
    #[arg(long)]
    namespace: String,
    /// The provider it moves to.
    #[arg(long)]
    to: String,
}

#[derive(clap::Args)]
struct RouteArgs {
    #[command(flatten)]
    router: RouterProviderArgs,
    /// Address to listen on; port 0 picks a free one (the address is printed).
    #[arg(long, default_value = "0.0.0.0:8443")]
    listen: std::net::SocketAddr,
    /// The serving certificate (PEM) the app cluster's APIServices trust.
    #[arg(long)]
    tls_cert_file: PathBuf,
    /// Its key.
    #[arg(long)]
    tls_private_key_file: PathBuf,
    /// How often (seconds) every provider's schema is judged again against the default
    /// provider's; a provider whose schema breaks it has its requests refused until it does not.
    #[arg(long, default_value_t = 30)]
    schema_recheck_seconds: u64,
    /// Point the APIService of every group/version the default provider serves at this Service
    /// of the app cluster (`NAMESPACE/NAME`, which reaches the router), taking them over from
    /// `bindery bind`.
    #[arg(long, requires = "register_ca_file")]
    register_service: Option<String>,
    /// The port of that Service (default: the port listened on).
    #[arg(long)]
    register_port: Option<u16>,
    /// The CA (PEM) of the serving certificate, for the APIServices' caBundle.
    #[arg(long)]
    register_ca_file: Option<PathBuf>,
}

/// `NAME=KUBECONFIG`.
fn provider_flag(text: &str) -> Result<(String, PathBuf), String> {
    let (name, path) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not NAME=KUBECONFIG"))?;
    Ok((name.to_string(), PathBuf::from(path)))
}

#[derive(clap::Args)]
struct MigrateArgs {
    /// The app cluster's kubeconfig (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// A kubeconfig for the provider cluster, as its administrator.
    #[arg(long, env = "BINDERY_PROVIDER_KUBECONFIG")]
    provider_kubeconfig: PathBuf,
    /// Consumer cluster namespaces are `<prefix><consumer>`.
    #[arg(long, default_value = "kube-bind-")]
    cluster_namespace_prefix: String,
    /// An export to move (repeatable); default: every kube-bind
    /// APIServiceBinding of the app cluster.
    #[arg(long = "export")]
    exports: Vec<String>,
    /// Say what each step would do, and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// How long to wait for each step.
    #[arg(long, default_value_t = 120)]
    timeout_seconds: u64,
    /// The identity kube-bind bound the app cluster with (its CLI's
    /// `--cluster-identity`), where no konnector kubeconfig Secret says its
    /// cluster namespace any more (default: the kube-system UID).
    #[arg(long)]
    cluster_identity: Option<String>,
    /// bindery's URL: bind each moved export there (as `bindery bind <URL>
    /// --export` would, as the provider kubeconfig's user) right after its
    /// copied CRD goes, so that the app cluster lacks the API no longer than
    /// the switch itself.
    #[arg(long)]
    bindery: Option<String>,
    /// The CA of bindery's serving certificate (with --bindery).
    #[arg(long, default_value = "certs/generated/bindery/serving-ca.crt")]
    certificate_authority: PathBuf,
    /// The DNS name the app cluster's aggregator reaches bindery at (with
    /// --bindery; default: the URL's host, `localhost` for loopback).
    #[arg(long, requires = "bindery", conflicts_with = "in_cluster")]
    service_host: Option<String>,
    /// bindery runs in the app cluster itself (with --bindery).
    #[arg(long, requires = "bindery")]
    in_cluster: bool,
    /// Stop on purpose after a step (`1`..`4`) or after N objects of step 3
    /// or 4 (`3.50`), as an interruption would: for tests.
    #[arg(long, hide = true, env = "BINDERY_MIGRATE_STOP_AFTER")]
    stop_after: Option<bindery::migrate::interrupt::Point>,
}

#[derive(clap::Args)]
struct ProviderArgs {
    /// bindery's URL, e.g. https://127.0.0.1:8443.
    url: String,
    /// The CA of bindery's serving certificate.
    #[arg(long, default_value = "certs/generated/bindery/serving-ca.crt")]
    certificate_authority: PathBuf,
    /// A token the provider cluster accepts (for example `kubectl create
    /// token` of a ServiceAccount holding `bind` on the templates).
    #[arg(
        long,
        env = "BINDERY_TOKEN",
        hide_env_values = true,
        conflicts_with = "token_file"
    )]
    token: Option<String>,
    /// A file holding that token.
    #[arg(long, conflicts_with = "client_certificate")]
    token_file: Option<PathBuf>,
    /// A client certificate of the provider cluster (its client CA issued
    /// it), in place of a token.
    #[arg(long, requires = "client_key", conflicts_with = "token")]
    client_certificate: Option<PathBuf>,
    /// The key of --client-certificate.
    #[arg(long, requires = "client_certificate")]
    client_key: Option<PathBuf>,
    /// Take the credentials (token or client certificate) of this provider
    /// kubeconfig's current user.
    #[arg(long, conflicts_with_all = ["token", "token_file", "client_certificate"])]
    provider_kubeconfig: Option<PathBuf>,
    /// The app cluster's kubeconfig (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
}

impl ProviderArgs {
    async fn provider(&self) -> anyhow::Result<bindery::bind::connect::Provider> {
        use kube::config::AuthInfo;
        let credentials = if let Some(token) = &self.token {
            AuthInfo {
                token: Some(token.trim().to_string().into()),
                ..Default::default()
            }
        } else if let Some(file) = &self.token_file {
            let token = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            AuthInfo {
                token: Some(token.trim().to_string().into()),
                ..Default::default()
            }
        } else if let (Some(certificate), Some(key)) = (&self.client_certificate, &self.client_key)
        {
            AuthInfo {
                client_certificate: Some(certificate.to_string_lossy().into()),
                client_key: Some(key.to_string_lossy().into()),
                ..Default::default()
            }
        } else if let Some(path) = &self.provider_kubeconfig {
            user_of_kubeconfig(path).await?
        } else {
            anyhow::bail!(
                "provider credentials are needed: --token, --token-file, $BINDERY_TOKEN, \
                 --client-certificate with --client-key, or --provider-kubeconfig"
            )
        };
        Ok(bindery::bind::connect::Provider {
            url: self.url.clone(),
            certificate_authority: self.certificate_authority.clone(),
            credentials,
        })
    }
}

/// The credentials (token or client certificate) of the current user of
/// the kubeconfig at `path`.
async fn user_of_kubeconfig(path: &std::path::Path) -> anyhow::Result<kube::config::AuthInfo> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("reading {}", path.display()))?;
    Ok(
        kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .with_context(|| format!("loading {}", path.display()))?
            .auth_info,
    )
}

#[derive(clap::Args)]
struct BindArgs {
    #[command(flatten)]
    provider: ProviderArgs,
    /// Bind this template without a browser.
    #[arg(long)]
    template: Option<String>,
    /// Bind this export of the app cluster, which exists already (one
    /// `bindery migrate` moved from kube-bind); needs a provider
    /// administrator's token (update on the export).
    #[arg(long, conflicts_with = "template")]
    export: Option<String>,
    /// `yaml`: print the app cluster's objects instead of applying them.
    #[arg(short, long, value_parser = ["yaml"])]
    output: Option<String>,
    /// The DNS name the app cluster's aggregator reaches bindery at
    /// (default: the URL's host; `localhost` for loopback addresses).
    #[arg(long, conflicts_with = "in_cluster")]
    service_host: Option<String>,
    /// bindery runs in the app cluster itself (deploy/bindery/): the
    /// APIServices reach its pods through a ClusterIP Service.
    #[arg(long)]
    in_cluster: bool,
    /// How long to wait for each stage.
    #[arg(long, default_value_t = 120)]
    timeout_seconds: u64,
    /// The app cluster's identity, when kube-bind bound it with one other
    /// than its kube-system UID (its CLI's `--cluster-identity`, or its UI);
    /// `bindery migrate` prints it. Accepted for `--export` only.
    #[arg(long, requires = "export")]
    cluster_identity: Option<String>,
}

#[derive(clap::Args)]
struct UnbindArgs {
    #[command(flatten)]
    provider: ProviderArgs,
    /// The binding (export) to remove.
    export: String,
    /// The identity the app cluster was bound with, when not its
    /// kube-system UID (as `bind --cluster-identity`).
    #[arg(long)]
    cluster_identity: Option<String>,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Kubeconfig of the provider cluster (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "BINDERY_PROVIDER_KUBECONFIG")]
    provider_kubeconfig: Option<PathBuf>,
    /// Address to listen on; port 0 picks a free one (the address is printed).
    #[arg(long, default_value = "0.0.0.0:8443")]
    listen: std::net::SocketAddr,
    /// The PKI made by `bindery certs` (serving certificate, consumer CA).
    #[arg(long, default_value = "certs/generated")]
    pki: PathBuf,
    /// Consumer cluster namespaces are `<prefix><consumer>` (kube-bind's Helm default).
    #[arg(long, default_value = "kube-bind-")]
    cluster_namespace_prefix: String,
    /// Also run the provider-side controllers (leader-elected).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    controllers: bool,
    /// The URL the provider's controllers reach bindery at (default: https://<listen address>): each export
    /// publishes its virtual workspace under it.
    #[arg(long)]
    external_url: Option<String>,
    /// Answer `resourceVersion=0` and `NotOlderThan` lists from a shared watch cache: one
    /// list+watch per provider resource (`BINDERY_WATCH_CACHE`).
    #[arg(long, env = "BINDERY_WATCH_CACHE", default_value_t = true, action = clap::ArgAction::Set)]
    watch_cache: bool,
    /// The provider Secret (`<namespace>/<name>`) holding the key continue tokens are sealed
    /// with, shared by every replica; made when missing.
    #[arg(long, default_value = "kube-system/bindery-continue-tokens")]
    continue_token_secret: bindery::token_key::KeySecret,
    /// Close a client connection that has had no request in flight for this long (seconds),
    /// as kube-apiserver does after 90.
    #[arg(long, default_value_t = bindery::server::idle::KUBE_APISERVER_IDLE_TIMEOUT.as_secs())]
    idle_connection_timeout: u64,
    /// Over HTTP/2, each request's chance (0 to 0.02) to end its connection gracefully with a
    /// GOAWAY, so that clients reconnect to any replica behind the Service, as kube-apiserver's
    /// `--goaway-chance` does (`BINDERY_GOAWAY_CHANCE`; 0, off, by default).
    #[arg(long, env = "BINDERY_GOAWAY_CHANCE", default_value = "0", value_parser = bindery::server::goaway::GoawayChance::parse)]
    goaway_chance: bindery::server::goaway::GoawayChance,
    /// The streams (requests, watches) one HTTP/2 connection carries at once: an app cluster's
    /// aggregator sends all its requests for a bound group over one connection
    /// (`BINDERY_HTTP2_MAX_STREAMS_PER_CONNECTION`; 1,000, as kube's aggregated servers).
    #[arg(long, env = "BINDERY_HTTP2_MAX_STREAMS_PER_CONNECTION", default_value_t = bindery::server::AGGREGATED_MAX_STREAMS, value_parser = clap::value_parser!(u32).range(1..))]
    http2_max_streams_per_connection: u32,
    /// Make each consumer's gets and writes as its own provider-side ServiceAccount
    /// (`bindery-consumer` in its cluster namespace), so that the provider's RBAC and admission
    /// hold what it can do (`BINDERY_IMPERSONATE`). Needs `impersonate` on those
    /// ServiceAccounts and on the user extra `bindery.dev/export`.
    #[arg(long, env = "BINDERY_IMPERSONATE", default_value_t = true, action = clap::ArgAction::Set)]
    impersonate: bool,
    /// How long a request's body may take to arrive once bindery reads it (seconds), as
    /// kube-apiserver bounds a request at 60; slower bodies get 504 Timeout
    /// (`BINDERY_REQUEST_BODY_TIMEOUT`).
    #[arg(long, env = "BINDERY_REQUEST_BODY_TIMEOUT", default_value_t = bindery::request_body::DEFAULT_TIMEOUT.as_secs())]
    request_body_timeout: u64,
    /// After SIGTERM, keep serving this long with `/readyz` failing before connections are
    /// drained (seconds), as kube-apiserver's `--shutdown-delay-duration`: load balancers
    /// then stop sending new requests first (`BINDERY_SHUTDOWN_DELAY_DURATION`).
    #[arg(long, env = "BINDERY_SHUTDOWN_DELAY_DURATION", default_value_t = 0)]
    shutdown_delay_duration: u64,
    #[command(flatten)]
    lease: LeaseArgs,
}

#[derive(clap::Args)]
struct ControllersArgs {
    /// Kubeconfig of the provider cluster (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "BINDERY_PROVIDER_KUBECONFIG")]
    provider_kubeconfig: Option<PathBuf>,
    /// Consumer cluster namespaces are `<prefix><consumer>` (kube-bind's Helm default).
    #[arg(long, default_value = "kube-bind-")]
    cluster_namespace_prefix: String,
    /// The URL the provider's controllers reach bindery at: each export
    /// publishes its virtual workspace under it.
    #[arg(long)]
    external_url: Option<String>,
    #[command(flatten)]
    lease: LeaseArgs,
}

/// How the provider-side controllers run: their leader Lease, and the
/// exports they make.
#[derive(clap::Args)]
struct LeaseArgs {
    /// Namespace of the leader Lease.
    #[arg(long, default_value = "kube-system")]
    lease_namespace: String,
    /// Name of the leader Lease.
    #[arg(long, default_value = "bindery-controllers")]
    lease_name: String,
    /// This replica's name in the Lease (default: host name and process id).
    #[arg(long)]
    lease_identity: Option<String>,
    /// Seconds a leader keeps the Lease without renewing it.
    #[arg(long, default_value_t = 15)]
    lease_seconds: u64,
    /// How the exports the controllers make keep consumers' cluster-scoped
    /// objects apart on the provider, as kube-bind's backend's `--isolation`:
    /// Prefixed, Namespaced or None.
    #[arg(long, default_value = "Prefixed", value_parser = bindery::api::Isolation::from_flag)]
    isolation: bindery::api::Isolation,
    /// The informer scope of every export the controllers make (Namespaced
    /// or Cluster), as kube-bind's backend's `--consumer-scope`, whatever the
    /// template says; unset, the template's scope, else Namespaced.
    #[arg(long, value_parser = bindery::api::InformerScope::from_flag)]
    consumer_scope: Option<bindery::api::InformerScope>,
    /// A ClusterRole of Secrets and ConfigMaps (the chart's `<release>:namespace-data`) that
    /// bindery binds to itself in each namespace it serves, for a provider role that holds none
    /// cluster-wide; unset, bindery binds nothing and needs them cluster-wide.
    #[arg(long)]
    namespace_data_role: Option<String>,
}

impl LeaseArgs {
    fn options(self, prefix: &str) -> bindery::controllers::Options {
        let mut options = bindery::controllers::Options::new(prefix);
        options.lease.namespace = self.lease_namespace;
        options.lease.name = self.lease_name;
        if let Some(identity) = self.lease_identity {
            options.lease.identity = identity;
        }
        options.lease.duration = std::time::Duration::from_secs(self.lease_seconds);
        options.isolation = self.isolation;
        options.consumer_scope = self.consumer_scope;
        options
    }
}

#[derive(clap::Args)]
struct ConsumerKubeconfigArgs {
    /// The consumer id (its certificate is made if missing).
    #[arg(long)]
    consumer: String,
    /// bindery's base URL.
    #[arg(long)]
    server: String,
    /// The PKI made by `bindery certs`.
    #[arg(long, default_value = "certs/generated")]
    pki: PathBuf,
}

#[derive(clap::Args)]
struct CertsArgs {
    /// Directory to write into (git-ignored by default).
    #[arg(long, default_value = "certs/generated")]
    out: PathBuf,
    /// Test clusters to make a PKI for.
    #[arg(long = "cluster", default_values = ["provider", "app"])]
    clusters: Vec<String>,
    /// Extra DNS names for bindery's serving certificate (the aggregator
    /// verifies `<service>.<namespace>.svc`).
    #[arg(long = "server-dns", default_values = ["bindery.bindery-system.svc", "*.bindery-system.svc"])]
    server_dns: Vec<String>,
    /// Extra IP addresses for bindery's serving certificate.
    #[arg(long = "server-ip")]
    server_ips: Vec<IpAddr>,
    /// Consumers to issue a client certificate for.
    #[arg(long = "consumer")]
    consumers: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    // Without `RUST_LOG`, bindery's own messages from info up, and every
    // other crate's warnings and errors.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,bindery=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Certs(args) => certs(args),
        Command::Serve(args) => serve(args),
        Command::Controllers(args) => controllers(args),
        Command::ConsumerKubeconfig(args) => consumer_kubeconfig(args),
        Command::Bind(args) => bind(args),
        Command::Unbind(args) => unbind(args),
        Command::Migrate(args) => migrate(args),
        Command::Route(args) => route(args),
        Command::MoveNamespace(args) => move_namespace(args),
    }
}

fn consumer_kubeconfig(args: ConsumerKubeconfigArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        bindery::route::ConsumerId::parse(&args.consumer).is_some(),
        "consumer id {:?} must be a DNS label",
        args.consumer
    );
    let pki =
        bindery::certs::ensure_bindery(&args.pki, &[], &[]).context("reading bindery's PKI")?;
    bindery::certs::ensure_consumer(&pki, &args.consumer)
        .context("making the consumer certificate")?;
    let (cert, key) = pki.consumer(&args.consumer);
    let read = |path: &std::path::Path| {
        std::fs::read(path).with_context(|| format!("reading {}", path.display()))
    };
    print!(
        "{}",
        bindery::kubeconfig::consumer_kubeconfig(
            &args.server,
            &args.consumer,
            &read(&pki.serving_ca())?,
            &read(&cert)?,
            &read(&key)?
        )
    );
    Ok(())
}

fn bind(args: BindArgs) -> anyhow::Result<()> {
    let runtime = bindery::deep::runtime().context("starting the async runtime")?;
    runtime.block_on(async {
        let options = bindery::bind::cli::BindOptions {
            provider: args.provider.provider().await?,
            app_kubeconfig: args.provider.kubeconfig.clone(),
            template: args.template,
            export: args.export,
            print_yaml: args.output.is_some(),
            service_host: args.service_host,
            in_cluster: args.in_cluster,
            timeout: std::time::Duration::from_secs(args.timeout_seconds),
            cluster_identity: args.cluster_identity,
        };
        bindery::bind::cli::bind(options).await
    })
}

fn unbind(args: UnbindArgs) -> anyhow::Result<()> {
    let runtime = bindery::deep::runtime().context("starting the async runtime")?;
    runtime.block_on(async {
        let options = bindery::bind::unbind::UnbindOptions {
            provider: args.provider.provider().await?,
            app_kubeconfig: args.provider.kubeconfig.clone(),
            export: args.export,
            cluster_identity: args.cluster_identity,
        };
        bindery::bind::unbind::unbind(options).await
    })
}

fn migrate(args: MigrateArgs) -> anyhow::Result<()> {
    let runtime = bindery::deep::runtime().context("starting the async runtime")?;
    runtime.block_on(async {
        let bind = match &args.bindery {
            None => None,
            Some(url) => Some(bindery::migrate::BindAfter {
                provider: bindery::bind::connect::Provider {
                    url: url.clone(),
                    certificate_authority: args.certificate_authority.clone(),
                    credentials: user_of_kubeconfig(&args.provider_kubeconfig).await?,
                },
                service_host: args.service_host.clone(),
                in_cluster: args.in_cluster,
            }),
        };
        bindery::migrate::migrate(bindery::migrate::MigrateOptions {
            app_kubeconfig: args.kubeconfig,
            provider_kubeconfig: args.provider_kubeconfig,
            prefix: args.cluster_namespace_prefix,
            exports: args.exports,
            dry_run: args.dry_run,
            timeout: std::time::Duration::from_secs(args.timeout_seconds),
            cluster_identity: args.cluster_identity,
            stop_after: bindery::migrate::interrupt::StopAfter(args.stop_after),
            bind,
        })
        .await
    })
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let namespace_data_role = args.lease.namespace_data_role.clone();
    on_runtime(bindery::serve::run(bindery::serve::Options {
        provider_kubeconfig: args.provider_kubeconfig,
        listen: args.listen,
        pki: args.pki,
        controllers: args
            .controllers
            .then(|| args.lease.options(&args.cluster_namespace_prefix)),
        external_url: args.external_url,
        cluster_namespace_prefix: args.cluster_namespace_prefix,
        watch_cache: args.watch_cache,
        token_key: args.continue_token_secret,
        idle_connection_timeout: std::time::Duration::from_secs(args.idle_connection_timeout),
        goaway_chance: args.goaway_chance,
        http2_max_streams: args.http2_max_streams_per_connection,
        impersonate: args.impersonate,
        request_body_timeout: std::time::Duration::from_secs(args.request_body_timeout),
        shutdown_delay: std::time::Duration::from_secs(args.shutdown_delay_duration),
        namespace_data_role,
    }))
}

/// Runs `work` to its end on bindery's runtime.
fn on_runtime(work: impl std::future::Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    let runtime = bindery::deep::runtime().context("starting the async runtime")?;
    runtime.block_on(work)
}

fn route(args: RouteArgs) -> anyhow::Result<()> {
    on_runtime(bindery::providers::serve::run(
        bindery::providers::serve::Options {
            kubeconfig: args.router.kubeconfig,
            providers: args.router.providers,
            default_provider: args.router.default_provider,
            listen: args.listen,
            serving_cert: args.tls_cert_file,
            serving_key: args.tls_private_key_file,
            schema_recheck: std::time::Duration::from_secs(args.schema_recheck_seconds.max(1)),
            register: args.register_service.map(|service| {
                bindery::providers::serve::Registration {
                    service,
                    port: args.register_port,
                    ca_file: args.register_ca_file.unwrap_or_default(),
                }
            }),
        },
    ))
}

fn move_namespace(args: MoveNamespaceArgs) -> anyhow::Result<()> {
    on_runtime(bindery::providers::relocate::run(
        bindery::providers::relocate::Options {
            kubeconfig: args.router.kubeconfig,
            providers: args.router.providers,
            default_provider: args.router.default_provider,
            namespace: args.namespace,
            to: args.to,
        },
    ))
}

fn controllers(args: ControllersArgs) -> anyhow::Result<()> {
    let runtime = bindery::deep::runtime().context("starting the async runtime")?;
    runtime.block_on(async {
        let client = bindery::serve::provider_client(args.provider_kubeconfig.as_deref()).await?;
        let role = args.lease.namespace_data_role.clone();
        let mut options = args.lease.options(&args.cluster_namespace_prefix);
        options.external_url = args.external_url;
        options.namespace_access =
            bindery::namespace_access::NamespaceAccess::of_flag(&client, role).await?;
        println!("bindery controllers: {}", options.lease.identity);
        tokio::select! {
            _ = bindery::controllers::run(client, options) => {}
            _ = bindery::serve::wait_for_signal() => {}
        }
        Ok(())
    })
}

fn certs(args: CertsArgs) -> anyhow::Result<()> {
    for cluster in &args.clusters {
        let pki = bindery::certs::ensure_cluster(&args.out, cluster)
            .with_context(|| format!("making the PKI of cluster {cluster}"))?;
        println!("cluster {cluster}: {}", pki.dir.display());
    }
    let pki = bindery::certs::ensure_bindery(&args.out, &args.server_dns, &args.server_ips)
        .context("making bindery's PKI")?;
    println!("bindery: {}", pki.dir.display());
    for consumer in &args.consumers {
        let cert = bindery::certs::ensure_consumer(&pki, consumer)
            .with_context(|| format!("making the client certificate of consumer {consumer}"))?;
        println!("consumer {consumer}: {}", cert.display());
    }
    Ok(())
}
