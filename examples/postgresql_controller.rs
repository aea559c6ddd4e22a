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
//! Two consumers may each have an instance of the same namespace and name:
//! at `clusters/*` they are two objects, told apart only by their consumer
//! (`bindery.dev/consumer`, or kcp's `kcp.io/cluster`, which bindery sets
//! alike). A store keyed by namespace/name, as kube-rs' reflector keys
//! (`ObjectRef`), would keep one of them: the controller keeps its own
//! [`ClusterIndex`], keyed by (consumer, namespace, name).
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
    let mut index = ClusterIndex::default();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                eprintln!("watch: {error}");
                continue;
            }
        };
        let Some(key) = index.apply(&event) else {
            continue;
        };
        let Some(instance) = index.get(&key).cloned() else {
            continue;
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

/// An object's key across consumers: its consumer, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ClusterKey {
    consumer: String,
    namespace: String,
    name: String,
}

/// The consumer annotations bindery sets on every object of the workspace.
const CLUSTER_ANNOTATIONS: [&str; 2] = ["kcp.io/cluster", CONSUMER_ANNOTATION];

impl ClusterKey {
    /// The key of an object from `clusters/*`; `None` without a consumer.
    fn of(object: &DynamicObject) -> Option<Self> {
        let annotations = object.metadata.annotations.as_ref()?;
        let consumer = CLUSTER_ANNOTATIONS
            .iter()
            .find_map(|a| annotations.get(*a))?;
        Some(Self {
            consumer: consumer.clone(),
            namespace: object.metadata.namespace.clone().unwrap_or_default(),
            name: object.metadata.name.clone()?,
        })
    }
}

/// The watch's objects by [`ClusterKey`]: a cluster-aware store, so two
/// consumers' objects of the same namespace and name are both kept.
#[derive(Default)]
struct ClusterIndex {
    objects: BTreeMap<ClusterKey, DynamicObject>,
    /// A relist's objects, until it is done.
    listing: BTreeMap<ClusterKey, DynamicObject>,
}

impl ClusterIndex {
    /// Applies one watcher event; the key of the object to reconcile.
    fn apply(&mut self, event: &watcher::Event<DynamicObject>) -> Option<ClusterKey> {
        match event {
            watcher::Event::Init => {
                self.listing.clear();
                None
            }
            watcher::Event::InitApply(object) => {
                let key = ClusterKey::of(object)?;
                self.listing.insert(key.clone(), object.clone());
                self.objects.insert(key.clone(), object.clone());
                Some(key)
            }
            watcher::Event::InitDone => {
                self.objects = std::mem::take(&mut self.listing);
                None
            }
            watcher::Event::Apply(object) => {
                let key = ClusterKey::of(object)?;
                self.objects.insert(key.clone(), object.clone());
                Some(key)
            }
            watcher::Event::Delete(object) => {
                self.objects.remove(&ClusterKey::of(object)?);
                None
            }
        }
    }

    fn get(&self, key: &ClusterKey) -> Option<&DynamicObject> {
        self.objects.get(key)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(consumer: &str, uid: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "db.example.com/v1", "kind": "PostgreSQLInstance",
            "metadata": {"name": "db", "namespace": "default", "uid": uid,
                "annotations": {"kcp.io/cluster": consumer, CONSUMER_ANNOTATION: consumer}},
        }))
        .unwrap()
    }

    #[test]
    fn two_consumers_objects_of_one_namespace_and_name_are_both_kept() {
        let mut index = ClusterIndex::default();
        let (one, two) = (instance("c1", "u1"), instance("c2", "u2"));
        let first = index.apply(&watcher::Event::Apply(one.clone())).unwrap();
        let second = index.apply(&watcher::Event::Apply(two.clone())).unwrap();
        assert_ne!(first, second);
        assert_eq!(
            index.get(&first).unwrap().metadata.uid.as_deref(),
            Some("u1")
        );
        assert_eq!(
            index.get(&second).unwrap().metadata.uid.as_deref(),
            Some("u2")
        );
        index.apply(&watcher::Event::Delete(one));
        assert!(index.get(&first).is_none());
        assert_eq!(
            index.get(&second).unwrap().metadata.uid.as_deref(),
            Some("u2")
        );
        // A relist keeps exactly what it listed.
        index.apply(&watcher::Event::Init);
        index.apply(&watcher::Event::InitApply(instance("c1", "u3")));
        index.apply(&watcher::Event::InitDone);
        assert_eq!(
            index.get(&first).unwrap().metadata.uid.as_deref(),
            Some("u3")
        );
        assert!(index.get(&second).is_none(), "c2 left with the relist");
        // An object without a consumer has no key.
        let mut bare = instance("c1", "u4");
        bare.metadata.annotations = None;
        assert_eq!(index.apply(&watcher::Event::Apply(bare)), None);
    }
}
