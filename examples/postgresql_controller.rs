//! An example provider controller, written with kube-rs, that reconciles
//! `postgresqlinstances` for every consumer at once through bindery's
//! virtual workspace. It watches `clusters/*`, where each object carries its
//! consumer in the `bindery.dev/consumer` annotation and shows its
//! consumer-side namespace. For each instance that is not Ready yet, it
//! writes the connection credentials as a Secret in the consumer's provider
//! namespace. bindery copies that Secret into the app namespace, because the
//! postgresql template claims such Secrets. It then sets `status.phase:
//! Ready` through that consumer's path of the workspace.
//!
//! ```text
//! cargo run --example postgresql_controller -- \
//!   --workspace https://<bindery>/services/export/postgresql/clusters/* \
//!   --certificate-authority certs/generated/bindery/serving-ca.crt \
//!   --token "$(kubectl create token ...)" --provider-kubeconfig provider.kubeconfig
//! ```

use anyhow::{Context, Result};
use bindery::api::APIServiceNamespace;
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::runtime::watcher;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Parser)]
struct Args {
    /// The export's virtual workspace, every consumer (`…/clusters/*`), as
    /// the export's `status.virtualWorkspaceURL` publishes it.
    #[arg(long)]
    workspace: String,
    /// The CA of bindery's serving certificate.
    #[arg(long)]
    certificate_authority: PathBuf,
    /// A provider token allowed on the export's `content`.
    #[arg(long, env = "CONTROLLER_TOKEN", hide_env_values = true)]
    token: String,
    /// The provider, where the credentials Secrets are written.
    #[arg(long)]
    provider_kubeconfig: PathBuf,
    /// Cluster namespaces are `<prefix><consumer>`.
    #[arg(long, default_value = "kube-bind-")]
    cluster_namespace_prefix: String,
}

/// What the credentials Secrets carry, so the template's claim covers them.
const PART_OF: (&str, &str) = ("app.kubernetes.io/part-of", "postgresql");
const CONSUMER_ANNOTATION: &str = "bindery.dev/consumer";

fn instances() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("db.example.com", "v1", "PostgreSQLInstance"),
        "postgresqlinstances",
    )
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = Args::parse();
    let provider = bindery::serve::provider_client(Some(&args.provider_kubeconfig)).await?;
    let every_consumer = workspace_client(&args, &args.workspace)?;
    let events = watcher(
        Api::<DynamicObject>::all_with(every_consumer, &instances()),
        watcher::Config::default(),
    );
    futures::pin_mut!(events);
    println!("watching {}", args.workspace);
    while let Some(event) = events.next().await {
        let instance = match event {
            Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => object,
            Ok(_) => continue,
            Err(error) => {
                eprintln!("watch: {error}");
                continue;
            }
        };
        if let Err(error) = reconcile(&args, &provider, &instance).await {
            eprintln!(
                "{}: {error:#}",
                instance.metadata.name.as_deref().unwrap_or("?")
            );
        }
    }
    Ok(())
}

/// A client for the workspace at `url`.
fn workspace_client(args: &Args, url: &str) -> Result<kube::Client> {
    let pem = std::fs::read(&args.certificate_authority)
        .with_context(|| format!("reading {}", args.certificate_authority.display()))?;
    let roots = bindery::auth::trust::parse_pem_bundle(&pem).map_err(anyhow::Error::msg)?;
    let mut config = kube::Config::new(url.parse().context("the workspace URL")?);
    config.root_cert = Some(roots.into_iter().map(|c| c.to_vec()).collect());
    config.auth_info.token = Some(args.token.clone().into());
    Ok(kube::Client::try_from(config)?)
}

async fn reconcile(args: &Args, provider: &kube::Client, instance: &DynamicObject) -> Result<()> {
    if instance.data["status"]["phase"] == "Ready" {
        return Ok(());
    }
    let name = instance.metadata.name.clone().context("a name")?;
    let namespace = instance.metadata.namespace.clone().context("a namespace")?;
    let consumer = instance
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONSUMER_ANNOTATION))
        .context("the consumer annotation")?;

    // The consumer's namespace on the provider side.
    let cluster_namespace = format!("{}{consumer}", args.cluster_namespace_prefix);
    let record = Api::<APIServiceNamespace>::namespaced(provider.clone(), &cluster_namespace)
        .get(&namespace)
        .await
        .with_context(|| format!("the provider namespace of {consumer}/{namespace}"))?;
    let provider_namespace = record
        .status
        .and_then(|s| s.namespace)
        .context("the namespace record has no provider namespace yet")?;

    let credentials = format!("{name}-credentials");
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": credentials, "namespace": provider_namespace,
            "labels": BTreeMap::from([PART_OF])},
        "stringData": {
            "host": format!("{name}.{namespace}.db.example.com"),
            "username": name,
            "password": format!("secret-of-{}", instance.metadata.uid.as_deref().unwrap_or(&name)),
        },
    });
    Api::<Secret>::namespaced(provider.clone(), &provider_namespace)
        .patch(
            &credentials,
            &PatchParams::apply("postgresql-controller").force(),
            &Patch::Apply(&secret),
        )
        .await
        .context("writing the credentials")?;

    // The status, through this consumer's own path of the workspace.
    let one_consumer = args
        .workspace
        .replace("/clusters/*", &format!("/clusters/{consumer}"));
    let client = workspace_client(args, &one_consumer)?;
    Api::<DynamicObject>::namespaced_with(client, &namespace, &instances())
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}})),
        )
        .await
        .context("writing the status")?;
    println!("{consumer}/{namespace}/{name} is Ready");
    Ok(())
}
