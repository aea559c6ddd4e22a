//! `bindery migrate`: moves an app cluster bound by kube-bind's konnector to
//! bindery, without losing an object. Each step is safe to repeat, so an
//! interrupted move is finished by running the command again; `--dry-run`
//! says what each step would do and changes nothing.
//!
//! 1. The konnector is stopped (its Deployment scaled to 0), so nothing it
//!    would see later (deletions above all) reaches the provider.
//! 2. The export is taken over: labelled bindery's
//!    ([`crate::controllers::ownership`]), with its BoundSchemas, and given
//!    its identity by bindery's controllers.
//! 3. The provider copies the konnector made are adopted: both identity
//!    labels in place, same uid ([`plan`]), and given what their app
//!    objects hold of their own (ownerReferences included). An app object
//!    without a copy stops the move here, before anything is removed.
//! 4. The app cluster's objects owned by moved objects hold those
//!    references aside ([`crate::moved_owners`]), the app objects lose the
//!    konnector's finalizer, and the copied CRD is deleted: its objects go
//!    with it, in the app cluster only. Then kube-bind's APIServiceBinding
//!    of the export goes.
//!
//! 6. Once no binding of the app cluster stays with kube-bind, kube-bind's
//!    account for it on the provider is revoked.
//!
//! What remains is `bindery bind --export`: the app cluster registered for
//! the export and its APIServices made, and the held references put back.
//! With `--bindery` the move does that itself (step 5), right after each
//! export's CRD went, so that the app cluster lacks the API only for the
//! switch.
//!
//! A move can be stopped on purpose after any step, or inside steps 3 and
//! 4 ([`interrupt`]), to show that running it again finishes it.

pub mod cluster;
pub mod interrupt;
pub mod konnectors;
pub mod plan;

use crate::api::{APIServiceExport, BoundSchema};
use crate::bind::connect::{app_config, identity};
use crate::controllers::claim_push::{self, CLAIMED_OBJECTS_ANNOTATION};
use crate::controllers::ownership::MANAGED_LABEL;
use crate::moved_owners::{self, references::Renamed};
use crate::translate::IdentityHash;
use crate::translate::owners::ProviderKind;
use anyhow::{Context as _, Result, anyhow, bail};
use interrupt::StopAfter;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use konnectors::LeaseWatch;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use plan::{Key, Mover, identity_labels};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Where the konnector runs in an app cluster kube-bind's CLI bound.
const KONNECTOR_NAMESPACE: &str = "kube-bind";
const KONNECTOR_DEPLOYMENT: &str = "konnector";
/// kube-bind's account for an app cluster on the provider, in its cluster
/// namespace (and its RoleBinding there), as kube-bind's backend names them.
const KUBE_BIND_ACCOUNT: &str = "kube-binder";

pub struct MigrateOptions {
    /// The app cluster's kubeconfig (default: $KUBECONFIG or ~/.kube/config).
    pub app_kubeconfig: Option<PathBuf>,
    /// A kubeconfig for the provider cluster, as its administrator.
    pub provider_kubeconfig: PathBuf,
    /// Cluster namespaces are `<prefix><consumer>`.
    pub prefix: String,
    /// The exports to move; all the app cluster's kube-bind bindings when empty.
    pub exports: Vec<String>,
    pub dry_run: bool,
    pub timeout: Duration,
    /// The identity kube-bind bound the app cluster with, where its
    /// konnector's kubeconfig Secrets are gone (default: kube-system UID).
    pub cluster_identity: Option<String>,
    /// Where to stop on purpose (hidden; tests interrupt the move with it).
    pub stop_after: StopAfter,
    /// Bind each moved export with bindery right after its copied CRD goes.
    pub bind: Option<BindAfter>,
}

/// What binding a moved export takes (as `bindery bind <url> --export`):
/// bindery's URL, serving CA and the binder's credentials, and how the app
/// cluster's aggregator reaches bindery.
pub struct BindAfter {
    pub provider: crate::bind::connect::Provider,
    pub service_host: Option<String>,
    pub in_cluster: bool,
}

async fn client(path: Option<&std::path::Path>) -> Result<kube::Client> {
    Ok(kube::Client::try_from(app_config(path).await?)?)
}

/// Runs the move; says each step on stderr.
pub async fn migrate(options: MigrateOptions) -> Result<()> {
    let app = client(options.app_kubeconfig.as_deref()).await?;
    let provider = client(Some(&options.provider_kubeconfig)).await?;
    let kube_system_uid = identity(&app).await?;
    let exports = match options.exports.is_empty() {
        false => options.exports.clone(),
        true => kube_bind_bindings(&app).await?,
    };
    if exports.is_empty() {
        eprintln!(
            "Nothing to move: the app cluster has no kube-bind APIServiceBinding (a moved \
             export's binding is bindery's once `bindery bind --export` ran)"
        );
        return Ok(());
    }
    // The cluster namespace the konnector's kubeconfigs name, and the
    // identity kube-bind recorded on it.
    let named = cluster::named_by_konnector_secrets(&app, &binding_resource(), &exports).await?;
    let recorded = match named.first() {
        Some(namespace) => cluster::recorded_identity(&provider, namespace).await?,
        None => None,
    };
    let bound = cluster::decide(
        &options.prefix,
        &named,
        recorded.as_deref(),
        options
            .cluster_identity
            .as_deref()
            .unwrap_or(&kube_system_uid),
    )?;
    let consumer = bound
        .cluster_namespace
        .strip_prefix(&options.prefix)
        .unwrap_or(&bound.cluster_namespace)
        .to_string();
    let move_ = Move {
        app,
        provider,
        cluster_namespace: bound.cluster_namespace,
        consumer,
        dry_run: options.dry_run,
        timeout: options.timeout,
        stop: options.stop_after,
    };
    let how = if options.dry_run { " (dry run)" } else { "" };
    eprintln!(
        "Moving {} from kube-bind to bindery{how}; cluster namespace {}",
        exports.join(", "),
        move_.cluster_namespace
    );
    move_.stop_konnector().await?;
    let konnectors = move_.no_konnector_runs().await?;
    move_.stop.step_done(1)?;
    // kube-bind bound the app cluster with an identity of its own: bind
    // and unbind name it.
    let own_identity = (bound.identity != kube_system_uid).then_some(bound.identity);
    for export in &exports {
        move_.move_export(export, &konnectors).await?;
        if let Some(bind) = &options.bind {
            move_
                .bind(export, bind, &options, own_identity.clone())
                .await?;
        }
    }
    move_.revoke_kube_binds_account(&exports).await?;
    if options.bind.is_some() {
        eprintln!("Done{how}: bindery serves {}", exports.join(", "));
        return Ok(());
    }
    let identity_flag = match &own_identity {
        None => String::new(),
        Some(identity) => format!(" --cluster-identity {identity}"),
    };
    eprintln!(
        "Done{how}. Next, as a provider administrator: `bindery bind <bindery URL> --export \
         <export>{identity_flag}` registers the app cluster for {}",
        exports.join(", ")
    );
    Ok(())
}

/// The names of the app cluster's kube-bind APIServiceBindings (those
/// bindery's bind did not make): the exports they bind.
async fn kube_bind_bindings(app: &kube::Client) -> Result<Vec<String>> {
    let list = Api::<DynamicObject>::all_with(app.clone(), &binding_resource())
        .list(&ListParams::default())
        .await
        .context("listing the app cluster's APIServiceBindings")?;
    Ok(list
        .items
        .iter()
        .filter(|b| !b.labels().contains_key(crate::app_binding::BINDING_LABEL))
        .map(ResourceExt::name_any)
        .collect())
}

struct Move {
    app: kube::Client,
    provider: kube::Client,
    cluster_namespace: String,
    consumer: String,
    dry_run: bool,
    timeout: Duration,
    stop: StopAfter,
}

impl Move {
    /// Step 5, with `--bindery`: the moved export bound with bindery, as
    /// `bindery bind <url> --export` binds it, at once after its CRD went.
    async fn bind(
        &self,
        export: &str,
        bind: &BindAfter,
        options: &MigrateOptions,
        cluster_identity: Option<String>,
    ) -> Result<()> {
        eprintln!(
            "5. {export}: binding it with bindery at {}",
            bind.provider.url
        );
        if self.dry_run {
            return Ok(());
        }
        crate::bind::cli::bind(crate::bind::cli::BindOptions {
            provider: bind.provider.clone(),
            app_kubeconfig: options.app_kubeconfig.clone(),
            template: None,
            export: Some(export.to_string()),
            print_yaml: false,
            service_host: bind.service_host.clone(),
            in_cluster: bind.in_cluster,
            timeout: self.timeout,
            cluster_identity,
        })
        .await
        .with_context(|| {
            format!(
                "binding {export} with bindery (the move itself is done: `bindery bind {} \
                 --export {export}` finishes it)",
                bind.provider.url
            )
        })
    }

    /// The end of the move, once the app cluster has no kube-bind binding
    /// left: kube-bind's account for it on the provider (`kube-binder` in
    /// the cluster namespace, which kube-bind's backend makes only when an
    /// app cluster binds) and its RoleBinding are deleted, so the token
    /// kube-bind left in the app cluster (the konnector's kubeconfig
    /// Secret) no longer works. While a binding stays with kube-bind, its
    /// konnector needs them, and they stay. `moved` are the exports this
    /// move moved (a dry run has not removed their bindings).
    async fn revoke_kube_binds_account(&self, moved: &[String]) -> Result<()> {
        let staying: Vec<String> = kube_bind_bindings(&self.app)
            .await?
            .into_iter()
            .filter(|binding| !moved.contains(binding))
            .collect();
        if !staying.is_empty() {
            eprintln!(
                "6. kube-bind's account kube-binder in {} stays: {} still bound by kube-bind",
                self.cluster_namespace,
                staying.join(", ")
            );
            return Ok(());
        }
        eprintln!(
            "6. revoking kube-bind's account kube-binder in {} (its token in the app cluster \
             stops working)",
            self.cluster_namespace
        );
        if self.dry_run {
            return Ok(());
        }
        let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(self.provider.clone(), &self.cluster_namespace);
        let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
            Api::namespaced(self.provider.clone(), &self.cluster_namespace);
        for deleted in [
            bindings
                .delete(KUBE_BIND_ACCOUNT, &DeleteParams::default())
                .await
                .map(|_| ()),
            accounts
                .delete(KUBE_BIND_ACCOUNT, &DeleteParams::default())
                .await
                .map(|_| ()),
        ] {
            match deleted {
                Ok(()) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }

    /// Step 1: the konnector scaled to 0, and its pods gone.
    async fn stop_konnector(&self) -> Result<()> {
        let deployments: Api<Deployment> = Api::namespaced(self.app.clone(), KONNECTOR_NAMESPACE);
        let Some(konnector) = deployments.get_opt(KONNECTOR_DEPLOYMENT).await? else {
            eprintln!("1. the konnector: none in {KONNECTOR_NAMESPACE}; nothing to stop");
            return Ok(());
        };
        let running = konnector
            .status
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(0);
        if konnector.spec.as_ref().and_then(|s| s.replicas) == Some(0) && running == 0 {
            eprintln!("1. the konnector: stopped already");
            return Ok(());
        }
        eprintln!("1. the konnector: scaling {KONNECTOR_NAMESPACE}/{KONNECTOR_DEPLOYMENT} to 0");
        if self.dry_run {
            return Ok(());
        }
        deployments
            .patch(
                KONNECTOR_DEPLOYMENT,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": 0}})),
            )
            .await
            .context("scaling the konnector to 0")?;
        self.until("the konnector's pods are gone", || async {
            let konnector = deployments.get(KONNECTOR_DEPLOYMENT).await?;
            Ok(konnector.status.and_then(|s| s.replicas).unwrap_or(0) == 0)
        })
        .await
    }

    /// Watches the app cluster's konnector Leases for [`konnectors::WATCH`]
    /// and stops the move when any konnector runs (one another Deployment
    /// runs, say): it would delete the provider copies as the CRD goes.
    async fn no_konnector_runs(&self) -> Result<LeaseWatch> {
        let watch = LeaseWatch::start(&self.app).await?;
        if !self.dry_run {
            eprintln!(
                "1. no other konnector: watching the app cluster's `{}` Leases for {} s",
                konnectors::KONNECTOR_LEASE,
                konnectors::WATCH.as_secs()
            );
            self.refuse_running_konnectors(&watch).await?;
        }
        Ok(watch)
    }

    async fn refuse_running_konnectors(&self, watch: &LeaseWatch) -> Result<()> {
        let running = watch.running(&self.app).await?;
        if !running.is_empty() {
            bail!(
                "a kube-bind konnector still runs in the app cluster ({}): stop every                  konnector of this app cluster, then run the move again; nothing was removed",
                running.join("; ")
            );
        }
        Ok(())
    }

    async fn move_export(&self, name: &str, konnectors: &LeaseWatch) -> Result<()> {
        let exports: Api<APIServiceExport> =
            Api::namespaced(self.provider.clone(), &self.cluster_namespace);
        let export = exports.get_opt(name).await?.ok_or_else(|| {
            anyhow!(
                "the provider has no export {name} in {}",
                self.cluster_namespace
            )
        })?;
        let hash = self.take_over(&exports, &export).await?;
        self.stop.step_done(2)?;
        let prefixed = crate::api::isolation_in_force(export.spec.isolation)
            == crate::api::Isolation::Prefixed;
        let mut listed = Vec::new();
        for resource in &export.spec.resources {
            listed.push(
                self.list_both(&resource.group_resource().to_string())
                    .await?,
            );
        }
        let kinds: Vec<ProviderKind> = listed
            .iter()
            .map(|l| ProviderKind {
                group: l.provider_resource.group.clone(),
                kind: l.provider_resource.kind.clone(),
                prefixed: prefixed && !l.namespaced,
            })
            .collect();
        let export_label = hash
            .map(|h| h.label_value().to_string())
            .unwrap_or_default();
        let renamed: Renamed = listed
            .iter()
            .flat_map(|l| {
                plan::renamed(&self.cluster_namespace, &l.app_objects, &l.provider_objects)
            })
            .collect();
        let mover = Mover {
            cluster_namespace: &self.cluster_namespace,
            export_label: &export_label,
            consumer: &self.consumer,
            kinds: &kinds,
            renamed: &renamed,
        };
        for resource in &listed {
            self.adopt(&mover, resource).await?;
        }
        self.hold_references(&renamed).await?;
        for resource in &listed {
            self.remove_app_crd(&mover, resource, konnectors).await?;
        }
        self.remove_kube_bind_binding(name).await
    }

    /// The end of step 4: kube-bind's APIServiceBinding of the export, whose
    /// copied CRDs are gone. `bindery bind --export` writes bindery's own
    /// (kube-bind's `kubeconfigSecretRef` is immutable, and names the
    /// konnector's Secret).
    async fn remove_kube_bind_binding(&self, export: &str) -> Result<()> {
        let bindings: Api<DynamicObject> = Api::all_with(self.app.clone(), &binding_resource());
        let Some(binding) = bindings.get_opt(export).await? else {
            return Ok(());
        };
        if binding
            .labels()
            .contains_key(crate::app_binding::BINDING_LABEL)
        {
            return Ok(());
        }
        eprintln!("4. {export}: deleting kube-bind's APIServiceBinding");
        if self.dry_run {
            return Ok(());
        }
        match bindings.delete(export, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Step 2: the export (and its BoundSchemas) labelled bindery's; its
    /// identity hash once bindery's controllers gave it one.
    async fn take_over(
        &self,
        exports: &Api<APIServiceExport>,
        export: &APIServiceExport,
    ) -> Result<Option<IdentityHash>> {
        let name = export.name_any();
        let label = json!({"metadata": {"labels": {MANAGED_LABEL: "true"}}});
        let schemas: Api<BoundSchema> =
            Api::namespaced(self.provider.clone(), &self.cluster_namespace);
        let owned: Vec<String> = schemas
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|s| {
                s.owner_references()
                    .iter()
                    .any(|o| o.kind == "APIServiceExport" && o.name == name)
            })
            .map(ResourceExt::name_any)
            .collect();
        eprintln!(
            "2. export {name}: taking it over with its BoundSchemas ({})",
            owned.join(", ")
        );
        if self.dry_run {
            return Ok(hash_of(export));
        }
        // The export keeps kube-bind's way with consumer-owned claimed
        // objects: copied into the provider namespaces, where the
        // provider's controllers read them.
        let export_marks = json!({"metadata": {
            "labels": {MANAGED_LABEL: "true"},
            "annotations": {CLAIMED_OBJECTS_ANNOTATION: claim_push::COPIED},
        }});
        exports
            .patch(&name, &PatchParams::default(), &Patch::Merge(&export_marks))
            .await?;
        for schema in &owned {
            schemas
                .patch(schema, &PatchParams::default(), &Patch::Merge(&label))
                .await?;
        }
        self.until("the export has its identity from bindery", || async {
            Ok(hash_of(&exports.get(&name).await?).is_some())
        })
        .await?;
        Ok(hash_of(&exports.get(&name).await?))
    }

    /// Lists one bound resource (CRD `crd_name`) on both sides.
    async fn list_both(&self, crd_name: &str) -> Result<Listed> {
        let (provider_resource, namespaced) = storage_resource(&self.provider, crd_name)
            .await?
            .ok_or_else(|| anyhow!("the provider has no CRD {crd_name}"))?;
        let provider_objects = list(&self.provider, &provider_resource).await?;
        let app_resource = storage_resource(&self.app, crd_name)
            .await?
            .map(|(resource, _)| resource);
        let app_objects = match &app_resource {
            Some(resource) => list(&self.app, resource).await?,
            None => Vec::new(),
        };
        Ok(Listed {
            crd_name: crd_name.to_string(),
            namespaced,
            provider_resource,
            provider_objects,
            app_resource,
            app_objects,
        })
    }

    /// Step 3 for one resource: its provider copies adopted and given what
    /// their app objects hold; stops at an app object without a copy.
    async fn adopt(&self, mover: &Mover<'_>, listed: &Listed) -> Result<()> {
        let crd_name = &listed.crd_name;
        let provider_resource = &listed.provider_resource;
        let plan = mover.plan(&listed.app_objects, &listed.provider_objects);
        eprintln!(
            "3. {crd_name}: {} provider copies to adopt, {} adopted already, {} app objects",
            plan.adopt.len(),
            plan.adopted,
            listed.app_objects.len()
        );
        for foreign in &plan.foreign {
            eprintln!("   {foreign} carries another consumer's or export's identity; left alone");
        }
        if !self.dry_run {
            let labels = json!({"metadata": {"labels": identity_labels(mover)}});
            for (done, key) in plan.adopt.iter().enumerate() {
                api_for(&self.provider, provider_resource, key)
                    .patch(&key.name, &PatchParams::default(), &Patch::Merge(&labels))
                    .await
                    .with_context(|| format!("adopting {key}"))?;
                self.stop.objects_done(3, done + 1)?;
            }
            if !plan.carry.is_empty() {
                eprintln!(
                    "   carrying what {} app objects hold of their own (spec edits not synced, \
                     labels, annotations, finalizers, owners) to their provider copies",
                    plan.carry.len()
                );
            }
            for (key, patch) in &plan.carry {
                api_for(&self.provider, provider_resource, key)
                    .patch(&key.name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .with_context(|| format!("carrying the app's changes to {key}"))?;
            }
            for key in &plan.delete {
                eprintln!("   {key} is being deleted in the app cluster: deleting its copy too");
                api_for(&self.provider, provider_resource, key)
                    .delete(&key.name, &DeleteParams::default())
                    .await
                    .with_context(|| format!("deleting {key}, being deleted in the app cluster"))?;
            }
        }
        if !plan.unsynced.is_empty() {
            let names: Vec<String> = plan.unsynced.iter().map(ToString::to_string).collect();
            bail!(
                "{crd_name}: these app objects have no provider copy, so removing the CRD \
                 would lose them: {}. Let the konnector sync them (scale it up again), or \
                 delete them, then run the move again",
                names.join(", ")
            );
        }
        self.stop.step_done(3)
    }

    /// The start of step 4: the app cluster's objects owned by moved
    /// objects hold those references aside ([`moved_owners`]), so that the
    /// app cluster's garbage collector does not delete them as the CRD
    /// goes; `bindery bind` puts them back once bindery serves the owners.
    async fn hold_references(&self, renamed: &Renamed) -> Result<()> {
        // Nothing moves (the app cluster's CRDs are gone already).
        if renamed.is_empty() {
            return Ok(());
        }
        if self.dry_run {
            eprintln!("4. would hold aside the app objects' references to moved objects");
            return Ok(());
        }
        let held = moved_owners::hold_all(&self.app, renamed).await?;
        eprintln!(
            "4. {held} app objects owned by moved objects hold those references aside until \
             `bindery bind` serves their owners"
        );
        Ok(())
    }

    /// The rest of step 4 for one resource: its app objects released from
    /// their finalizers, then the app cluster's copy of its CRD deleted.
    async fn remove_app_crd(
        &self,
        mover: &Mover<'_>,
        listed: &Listed,
        konnectors: &LeaseWatch,
    ) -> Result<()> {
        let crd_name = &listed.crd_name;
        let Some(app_resource) = &listed.app_resource else {
            eprintln!("4. {crd_name}: the app cluster's CRD is gone already");
            return Ok(());
        };
        let plan = mover.plan(&listed.app_objects, &listed.provider_objects);
        eprintln!(
            "4. {crd_name}: releasing {} app objects from their finalizers (the konnector's; \
             the others went to the provider copies in step 3), then deleting the app \
             cluster's copy of the CRD",
            plan.unfinalize.len()
        );
        if self.dry_run {
            return Ok(());
        }
        // A konnector started since step 1 would delete every provider copy
        // as the CRD goes.
        self.refuse_running_konnectors(konnectors).await?;
        for (done, key) in plan.unfinalize.iter().enumerate() {
            let api = api_for(&self.app, app_resource, key);
            let Some(object) = api.get_opt(&key.name).await? else {
                continue;
            };
            // The konnector's goes; the others are on the provider copy now.
            let kept: [&str; 0] = [];
            api.patch(
                &key.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {
                    "finalizers": kept,
                    "resourceVersion": object.resource_version(),
                }})),
            )
            .await
            .with_context(|| format!("releasing {key}"))?;
            self.stop.objects_done(4, done + 1)?;
        }
        let crds: Api<CustomResourceDefinition> = Api::all(self.app.clone());
        match crds.delete(crd_name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
        self.until("the app cluster's CRD is gone", || async {
            Ok(crds.get_opt(crd_name).await?.is_none())
        })
        .await?;
        self.stop.step_done(4)
    }

    /// Waits until `done` says so, for at most the move's timeout.
    async fn until<F, Fut>(&self, what: &str, mut done: F) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<bool>>,
    {
        let deadline = Instant::now() + self.timeout;
        while !done().await? {
            if Instant::now() > deadline {
                bail!("{what}: not within {:?}", self.timeout);
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        Ok(())
    }
}

/// The app cluster's APIServiceBindings.
fn binding_resource() -> ApiResource {
    ApiResource {
        group: "kube-bind.io".into(),
        version: "v1alpha2".into(),
        api_version: "kube-bind.io/v1alpha2".into(),
        kind: "APIServiceBinding".into(),
        plural: "apiservicebindings".into(),
    }
}

fn hash_of(export: &APIServiceExport) -> Option<IdentityHash> {
    export
        .status
        .as_ref()
        .and_then(|s| s.identity_hash.as_deref())
        .and_then(IdentityHash::parse)
}

/// The CRD `name`'s resource at its storage version, and whether it is
/// namespaced, if the cluster has it.
async fn storage_resource(
    client: &kube::Client,
    name: &str,
) -> Result<Option<(ApiResource, bool)>> {
    let Some(crd) = Api::<CustomResourceDefinition>::all(client.clone())
        .get_opt(name)
        .await?
    else {
        return Ok(None);
    };
    let version = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .ok_or_else(|| anyhow!("CRD {name} has no storage version"))?;
    let resource = ApiResource {
        group: crd.spec.group.clone(),
        version: version.name.clone(),
        api_version: format!("{}/{}", crd.spec.group, version.name),
        kind: crd.spec.names.kind.clone(),
        plural: crd.spec.names.plural.clone(),
    };
    Ok(Some((resource, crd.spec.scope == "Namespaced")))
}

/// One bound resource, listed on both sides.
struct Listed {
    crd_name: String,
    namespaced: bool,
    provider_resource: ApiResource,
    provider_objects: Vec<Value>,
    /// `None` once the app cluster's copy of the CRD is gone.
    app_resource: Option<ApiResource>,
    app_objects: Vec<Value>,
}

async fn list(client: &kube::Client, resource: &ApiResource) -> Result<Vec<Value>> {
    let list = Api::<DynamicObject>::all_with(client.clone(), resource)
        .list(&ListParams::default())
        .await?;
    Ok(list
        .items
        .iter()
        .map(|o| serde_json::to_value(o).unwrap_or_default())
        .collect())
}

fn api_for(client: &kube::Client, resource: &ApiResource, key: &Key) -> Api<DynamicObject> {
    match &key.namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    }
}
