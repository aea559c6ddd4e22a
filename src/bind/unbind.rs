//! `bindery unbind`: removes exactly what `bind` made for one export (the
//! provider's export first, proven with bindery's account in the app
//! cluster), and bindery's shared objects with the last binding, keeping
//! the binding CRD and its namespace while other bindings use them.

use super::app_account::{account_kubeconfig, account_token};
use super::app_writes::{binding_resource, delete_labelled, dynamic};
use super::connect::{Bindery, CONSUMER_ANNOTATION, Provider, app_config, cluster_identity};
use super::wire::UnbindRequest;
use crate::app_binding;
use crate::app_binding::{BINDING_LABEL, MANAGED_BY};
use anyhow::{Result, anyhow};
use kube::api::ListParams;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

pub struct UnbindOptions {
    pub provider: Provider,
    pub app_kubeconfig: Option<PathBuf>,
    pub export: String,
    pub cluster_identity: Option<String>,
}

/// Removes what bind made for `export`, and the shared objects with the
/// last binding.
pub async fn unbind(options: UnbindOptions) -> Result<()> {
    let bindery = Bindery::connect(&options.provider)?;
    let config = app_config(options.app_kubeconfig.as_deref()).await?;
    let app = kube::Client::try_from(config.clone())?;
    let identity = cluster_identity(&app, options.cluster_identity.as_deref()).await?;
    let bindings = dynamic(&app, &binding_resource(), None);
    let binding = app_binding::find(&app, &options.export)
        .await?
        .ok_or_else(|| {
            anyhow!(
                "there is no APIServiceBinding of {} in this cluster",
                options.export
            )
        })?;
    let consumer = binding
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONSUMER_ANNOTATION))
        .cloned()
        .ok_or_else(|| {
            anyhow!(
                "APIServiceBinding {} was not made by bindery bind",
                options.export
            )
        })?;
    let token = account_token(&app, Duration::from_secs(5)).await?;
    let proof = UnbindRequest {
        identity,
        kubeconfig: account_kubeconfig(&config, &token)?,
    };
    let _: Value = bindery
        .call(
            http::Method::DELETE,
            &format!("/bind/bindings/{consumer}/{}", options.export),
            Some(&proof),
        )
        .await?;
    eprintln!("The provider's export {} is deleted", options.export);
    let of_binding = format!(
        "{}={},{}={}",
        MANAGED_BY.0, MANAGED_BY.1, BINDING_LABEL, options.export
    );
    delete_labelled(&app, &of_binding, &[]).await?;
    let managed = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
    let left = bindings
        .list(&ListParams::default().labels(&managed))
        .await?;
    if left.items.is_empty() {
        // kube-bind's bindings (or anyone's) still need the CRD, and the
        // namespace holding their Secrets.
        let others = !bindings
            .list(&ListParams::default())
            .await?
            .items
            .is_empty();
        let kept: &[&str] = match others {
            true => &["Namespace", "CustomResourceDefinition"],
            false => &[],
        };
        delete_labelled(&app, &managed, kept).await?;
        eprintln!("That was the last binding: bindery's account is removed too");
    }
    eprintln!("Unbound {}", options.export);
    Ok(())
}
