//! `bindery bind`: picks a template (by flag, or on bindery's page in a
//! browser), makes bindery's account in the app cluster, asks bindery to
//! bind with the app cluster's registration, waits for the export, then
//! registers the APIServices and the APIServiceBinding and waits until the
//! aggregator serves them. `-o yaml` prints the app-cluster objects instead
//! of applying them. Reaching both sides is `connect`'s, the writes
//! `app_writes`', the account `app_account`'s, the waits
//! `aggregator_wait`'s; `unbind` removes what bind made.

use super::aggregator_wait::{wait_available, wait_discovered};
use super::app_account::register;
use super::app_objects::{self, BindingInputs, Reach};
use super::app_writes::{apply, retire_binding_named_as_export};
use super::connect::{Bindery, CONSUMER_ANNOTATION, Provider, app_config, cluster_identity};
use super::wire::{BindRequest, BindingState, Offers, Progress, SessionCreated, SessionState};
use crate::app_binding;
use anyhow::{Context, Result, bail};
use kube::api::{Api, ListParams};
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub struct BindOptions {
    pub provider: Provider,
    /// The app cluster's kubeconfig (default: $KUBECONFIG or ~/.kube/config).
    pub app_kubeconfig: Option<PathBuf>,
    /// Bind this template; without it, the user picks one on bindery's page.
    pub template: Option<String>,
    /// Bind this export, which exists already (one `bindery migrate` moved
    /// from kube-bind), instead of a template.
    pub export: Option<String>,
    /// Print the app-cluster objects as YAML instead of applying them.
    pub print_yaml: bool,
    /// The DNS name the app cluster's aggregator reaches bindery at
    /// (default: the URL's host, `localhost` for loopback addresses).
    pub service_host: Option<String>,
    /// bindery runs in the app cluster itself (`deploy/bindery/`): the
    /// consumer's Service selects its pods instead of naming a host.
    pub in_cluster: bool,
    pub timeout: Duration,
    /// The app cluster's identity, when not its kube-system UID (see
    /// [`cluster_identity`]).
    pub cluster_identity: Option<String>,
}

/// Says what is happening, in the terminal and, for an interactive bind, on
/// the page.
struct Reporter<'a> {
    bindery: &'a Bindery,
    session: Option<String>,
}

impl Reporter<'_> {
    async fn step(&self, step: impl Into<String>) {
        let step = step.into();
        eprintln!("{step}");
        self.send(Progress {
            step: Some(step),
            ..Default::default()
        })
        .await;
    }

    async fn send(&self, progress: Progress) {
        if let Some(id) = &self.session {
            let _: Result<Value> = self
                .bindery
                .call(
                    http::Method::POST,
                    &format!("/bind/sessions/{id}/progress"),
                    Some(&progress),
                )
                .await;
        }
    }
}

/// Runs a bind; prints the YAML on stdout when asked to.
pub async fn bind(options: BindOptions) -> Result<()> {
    let bindery = Bindery::connect(&options.provider)?;
    let app_config = app_config(options.app_kubeconfig.as_deref()).await?;
    let app = kube::Client::try_from(app_config.clone())?;
    let identity = cluster_identity(&app, options.cluster_identity.as_deref()).await?;
    let mut reporter = Reporter {
        bindery: &bindery,
        session: None,
    };
    let template = match (&options.export, &options.template) {
        (Some(export), _) => export.clone(),
        (None, Some(template)) => {
            let offers: Offers = bindery
                .call(http::Method::GET, "/bind/templates", None::<&()>)
                .await?;
            if !offers.offers.iter().any(|o| &o.name == template) {
                bail!(
                    "you may not bind template {template:?}: it does not exist, or you do not \
                     hold the bind verb on it in the provider"
                );
            }
            template.clone()
        }
        (None, None) => pick_on_the_page(&bindery, &mut reporter, options.timeout).await?,
    };
    let outcome = bind_template(
        &options,
        &bindery,
        &reporter,
        &app,
        &app_config,
        &identity,
        &template,
    )
    .await;
    match &outcome {
        Ok(()) => {
            reporter
                .send(Progress {
                    done: true,
                    ..Default::default()
                })
                .await
        }
        Err(error) => {
            reporter
                .send(Progress {
                    error: Some(format!("{error:#}")),
                    ..Default::default()
                })
                .await
        }
    }
    outcome
}

/// Opens a session, shows its page's address and waits for the pick.
async fn pick_on_the_page(
    bindery: &Bindery,
    reporter: &mut Reporter<'_>,
    timeout: Duration,
) -> Result<String> {
    let offers: Offers = bindery
        .call(http::Method::GET, "/bind/templates", None::<&()>)
        .await?;
    if offers.offers.is_empty() {
        bail!("there is nothing you may bind: no template grants you the bind verb");
    }
    let session: SessionCreated = bindery
        .call(http::Method::POST, "/bind/sessions", None::<&()>)
        .await?;
    println!(
        "Open this page to pick the API to bind:\n  {}{}",
        bindery.url, session.path
    );
    reporter.session = Some(session.id.clone());
    let deadline = Instant::now() + timeout;
    loop {
        let state: SessionState = bindery
            .call(
                http::Method::GET,
                &format!("/bind/sessions/{}/state", session.id),
                None::<&()>,
            )
            .await?;
        if let Some(template) = state.template {
            eprintln!("Picked {template}");
            return Ok(template);
        }
        if Instant::now() > deadline {
            bail!("no API was picked on the page within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn bind_template(
    options: &BindOptions,
    bindery: &Bindery,
    reporter: &Reporter<'_>,
    app: &kube::Client,
    app_config: &kube::Config,
    identity: &str,
    template: &str,
) -> Result<()> {
    let registration = if options.print_yaml {
        None
    } else {
        reporter
            .step("Making bindery's account in your cluster")
            .await;
        Some(register(app, app_config, options.timeout).await?)
    };
    reporter
        .step(format!("Asking the provider to bind {template}"))
        .await;
    let request = BindRequest {
        template: match options.export {
            Some(_) => String::new(),
            None => template.to_string(),
        },
        export: options.export.clone(),
        identity: identity.to_string(),
        registration,
        session: reporter.session.clone(),
    };
    let first: BindingState = bindery
        .call(http::Method::POST, "/bind/bindings", Some(&request))
        .await?;
    let state = export_ready(bindery, reporter, first, template, options.timeout).await?;
    let binding = binding_objects(options, bindery, &state)?;
    if options.print_yaml {
        let mut all = vec![app_objects::namespace(), app_objects::binding_crd()];
        all.extend(app_objects::account());
        all.extend(binding);
        print!("{}", yaml_documents(&all, template, &options.provider.url)?);
        return Ok(());
    }
    refuse_local_crds(app, &state.group_versions).await?;
    reporter
        .step("Registering the APIServices and the APIServiceBinding")
        .await;
    for object in &binding {
        apply(app, object).await?;
    }
    let names: Vec<String> = state
        .group_versions
        .iter()
        .map(app_objects::api_service_name)
        .collect();
    wait_available(app, &names, options.timeout).await?;
    wait_discovered(app, &state.group_versions, options.timeout).await?;
    settle_the_binding(app, reporter, &state).await?;
    let resources: Vec<String> = state
        .group_versions
        .iter()
        .map(|gv| gv.group.clone())
        .collect();
    reporter
        .step(format!(
            "Bound {template}: kubectl in your cluster now serves group {} from the provider",
            resources.first().cloned().unwrap_or_default()
        ))
        .await;
    Ok(())
}

/// The app cluster's objects of the binding `state` describes, reaching
/// bindery as `options` say.
fn binding_objects(
    options: &BindOptions,
    bindery: &Bindery,
    state: &BindingState,
) -> Result<Vec<Value>> {
    let url: http::Uri = options.provider.url.parse()?;
    let service_host = options
        .service_host
        .clone()
        .unwrap_or_else(|| loopback_as_localhost(url.host().unwrap_or("localhost")));
    let reach = if options.in_cluster {
        Reach::InCluster
    } else {
        Reach::External {
            host: &service_host,
            port: url.port_u16().unwrap_or(443),
        }
    };
    let inputs = BindingInputs {
        consumer: &state.consumer,
        export: &state.export,
        bindery_url: &bindery.url,
        reach,
        serving_ca_pem: &state.serving_ca,
        group_versions: &state.group_versions,
        claims: &state.claims,
    };
    let mut binding = app_objects::binding(&inputs);
    if let Some(b) = binding
        .iter_mut()
        .find(|o| o["kind"] == "APIServiceBinding")
    {
        b["metadata"]["annotations"][CONSUMER_ANNOTATION] = serde_json::json!(state.consumer);
    }
    Ok(binding)
}

/// Follows the provider's export from `state` until it is ready (or failed,
/// or `timeout` passes), reporting each phase.
async fn export_ready(
    bindery: &Bindery,
    reporter: &Reporter<'_>,
    mut state: BindingState,
    template: &str,
    timeout: Duration,
) -> Result<BindingState> {
    let deadline = Instant::now() + timeout;
    let mut last_phase = String::new();
    while state.phase != "Succeeded" || state.group_versions.is_empty() {
        if state.phase == "Failed" {
            bail!("the provider could not bind {template}: {}", state.message);
        }
        if state.phase != last_phase {
            reporter
                .step(format!("The provider's export is {}", state.phase))
                .await;
            last_phase = state.phase.clone();
        }
        if Instant::now() > deadline {
            bail!("the export of {template} was not ready within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        state = bindery
            .call(
                http::Method::GET,
                &format!("/bind/bindings/{}/{}", state.consumer, state.export),
                None::<&()>,
            )
            .await?;
    }
    reporter.step("The provider's export is ready").await;
    Ok(state)
}

/// Once the aggregator serves the binding: the binding bindery named as
/// its export before goes, kube-bind's konnector's judgement on it is
/// taken back, and objects owned by moved objects get their owners back.
/// What cannot be done now is reported, and done by the next bind.
async fn settle_the_binding(
    app: &kube::Client,
    reporter: &Reporter<'_>,
    state: &BindingState,
) -> Result<()> {
    if retire_binding_named_as_export(app, &state.export).await? {
        reporter
            .step(format!(
                "The binding bindery named {} before is now {}",
                state.export,
                app_binding::binding_name(&state.export)
            ))
            .await;
    }
    match super::konnector::take_back_judgement(app, &app_binding::binding_name(&state.export))
        .await
    {
        Ok(false) => {}
        Ok(true) => {
            reporter
                .step("kube-bind's konnector's conditions on the binding are taken back")
                .await
        }
        Err(error) => {
            reporter
                .step(format!(
                    "kube-bind's konnector's conditions stay on the binding ({error}); \
                     run this bind again to take them back"
                ))
                .await
        }
    }
    // An app cluster moved from kube-bind by `bindery migrate`: its objects
    // owned by moved objects get those references back, now that the
    // owners are served.
    let served: Vec<String> = state
        .group_versions
        .iter()
        .map(|gv| format!("{}/{}", gv.group, gv.version))
        .collect();
    // The binding stands either way: what is not put back stays held, and
    // the next bind puts it back.
    match crate::moved_owners::put_back_all(app, &served).await {
        Ok(0) => {}
        Ok(put_back) => {
            reporter
                .step(format!(
                    "{put_back} objects owned by moved objects have their ownerReferences back"
                ))
                .await
        }
        Err(error) => {
            reporter
                .step(format!(
                    "Objects owned by moved objects keep their ownerReferences held aside \
                     ({error:#}); run this bind again to put them back"
                ))
                .await
        }
    }
    Ok(())
}

/// Refuses to bind a group/version the app cluster serves itself from a
/// CustomResourceDefinition: kube-apiserver registers a local APIService for
/// it and would take the bound one back, so reads and writes would land in
/// the app cluster's own storage instead of the provider.
async fn refuse_local_crds(app: &kube::Client, bound: &[super::wire::GroupVersion]) -> Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds = Api::<CustomResourceDefinition>::all(app.clone())
        .list(&ListParams::default())
        .await
        .context("listing the app cluster's CustomResourceDefinitions")?;
    for gv in bound {
        if let Some(crd) = crds.items.iter().find(|crd| {
            crd.spec.group == gv.group && crd.spec.versions.iter().any(|v| v.name == gv.version)
        }) {
            bail!(
                "the app cluster serves {}/{} itself (CustomResourceDefinition {}); \
                 delete it before binding, or bind another API",
                gv.group,
                gv.version,
                crd.metadata.name.as_deref().unwrap_or_default()
            );
        }
    }
    Ok(())
}

/// `localhost` for loopback addresses (an ExternalName is a DNS name).
fn loopback_as_localhost(host: &str) -> String {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) if ip.is_loopback() => "localhost".into(),
        _ => bare.to_string(),
    }
}

fn yaml_documents(objects: &[Value], template: &str, url: &str) -> Result<String> {
    let mut out = format!(
        "# bindery bind {url} --template {template}: the app cluster's side.\n\
         # Apply it to the app cluster, then run the same bind without -o yaml once:\n\
         # it records bindery's account with the provider and changes nothing here.\n"
    );
    for object in objects {
        out.push_str("---\n");
        out.push_str(&serde_norway::to_string(object)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_become_localhost() {
        assert_eq!(loopback_as_localhost("127.0.0.1"), "localhost");
        assert_eq!(loopback_as_localhost("[::1]"), "localhost");
        assert_eq!(
            loopback_as_localhost("bindery.example.com"),
            "bindery.example.com"
        );
        assert_eq!(loopback_as_localhost("10.0.0.5"), "10.0.0.5");
    }
}
