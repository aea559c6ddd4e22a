//! `bindery bind` and `bindery unbind`: the app-cluster side of binding.
//! bind picks a template (by flag, or on bindery's page in a browser),
//! makes bindery's account in the app cluster, asks bindery to bind with the
//! app cluster's registration, waits for the export, then registers the
//! APIServices and the APIServiceBinding and waits until the aggregator
//! serves them. `-o yaml` prints the app-cluster objects instead of applying
//! them. unbind removes exactly what bind made.

use super::app_objects::{self, BindingInputs, MANAGED_BY, Reach};
use super::wire::{
    BindRequest, BindingState, Offers, Progress, Registration, SessionCreated, SessionState,
    UnbindRequest,
};
use crate::app_binding;
use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const FIELD_MANAGER: &str = "bindery-bind";
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

pub struct UnbindOptions {
    pub provider: Provider,
    pub app_kubeconfig: Option<PathBuf>,
    pub export: String,
    pub cluster_identity: Option<String>,
}

/// A client for bindery's `/bind` endpoints.
struct Bindery {
    client: kube::Client,
    url: String,
}

impl Bindery {
    fn connect(provider: &Provider) -> Result<Self> {
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

    async fn call<T: DeserializeOwned>(
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
    let mut state: BindingState = bindery
        .call(http::Method::POST, "/bind/bindings", Some(&request))
        .await?;
    let deadline = Instant::now() + options.timeout;
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
            bail!(
                "the export of {template} was not ready within {:?}",
                options.timeout
            );
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
        out.push_str(&serde_yaml::to_string(object)?);
    }
    Ok(out)
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
async fn cluster_identity(app: &kube::Client, given: Option<&str>) -> Result<String> {
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

/// Makes bindery's account and reads what the provider must know.
async fn register(
    app: &kube::Client,
    config: &kube::Config,
    timeout: Duration,
) -> Result<Registration> {
    create_if_missing(app, &app_objects::namespace()).await?;
    install_binding_crd(app).await?;
    for object in app_objects::account() {
        apply(app, &object).await?;
    }
    let token = account_token(app, timeout).await?;
    let authentication = Api::<ConfigMap>::namespaced(app.clone(), "kube-system")
        .get("extension-apiserver-authentication")
        .await
        .context("reading kube-system/extension-apiserver-authentication")?
        .data
        .unwrap_or_default();
    let requestheader_client_ca = authentication
        .get("requestheader-client-ca-file")
        .cloned()
        .ok_or_else(|| anyhow!("the app cluster has no front-proxy CA (requestheader-client-ca-file); is its aggregation layer on?"))?;
    let requestheader_allowed_names: Vec<String> = authentication
        .get("requestheader-allowed-names")
        .map(|names| serde_json::from_str(names).unwrap_or_default())
        .unwrap_or_default();
    let (service_account_issuer, service_account_jwks) = token_issuer(app).await;
    Ok(Registration {
        kubeconfig: account_kubeconfig(config, &token)?,
        requestheader_client_ca,
        requestheader_allowed_names,
        service_account_issuer,
        service_account_jwks,
    })
}

/// The app cluster's service-account issuer and keys, when it publishes
/// them (bindery then reviews tokens with the app cluster instead).
async fn token_issuer(app: &kube::Client) -> (Option<String>, Option<String>) {
    let get = |path: &str| {
        http::Request::get(path)
            .body(Vec::new())
            .expect("a GET request builds")
    };
    let issuer = app
        .request::<Value>(get("/.well-known/openid-configuration"))
        .await
        .ok()
        .and_then(|c| c["issuer"].as_str().map(str::to_string));
    let jwks = app.request_text(get("/openid/v1/jwks")).await.ok();
    match (issuer, jwks) {
        (Some(issuer), Some(jwks)) => (Some(issuer), Some(jwks)),
        _ => (None, None),
    }
}

/// Waits for the token controller to fill the account's token Secret.
async fn account_token(app: &kube::Client, timeout: Duration) -> Result<String> {
    let secrets = Api::<Secret>::namespaced(app.clone(), app_objects::NAMESPACE);
    let deadline = Instant::now() + timeout;
    loop {
        let secret = secrets.get(app_objects::TOKEN_SECRET).await?;
        if let Some(token) = secret.data.as_ref().and_then(|d| d.get("token")) {
            return Ok(String::from_utf8(token.0.clone())?);
        }
        if Instant::now() > deadline {
            bail!(
                "the app cluster never issued a token into {}/{} (is kube-controller-manager's token controller running?)",
                app_objects::NAMESPACE,
                app_objects::TOKEN_SECRET
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A kubeconfig that reaches the app cluster (as `config` does) with the
/// account's token.
fn account_kubeconfig(config: &kube::Config, token: &str) -> Result<String> {
    let mut ca_pem = String::new();
    if let Some(roots) = &config.root_cert {
        for der in roots {
            let body = base64::engine::general_purpose::STANDARD.encode(der);
            ca_pem.push_str("-----BEGIN CERTIFICATE-----\n");
            for line in body.as_bytes().chunks(64) {
                ca_pem.push_str(std::str::from_utf8(line)?);
                ca_pem.push('\n');
            }
            ca_pem.push_str("-----END CERTIFICATE-----\n");
        }
    } else if let Some(file) = &config.root_cert_file {
        ca_pem = std::fs::read_to_string(file)?;
    }
    let mut cluster =
        serde_json::json!({"server": config.cluster_url.to_string().trim_end_matches('/')});
    if !ca_pem.is_empty() {
        cluster["certificate-authority-data"] = base64::engine::general_purpose::STANDARD
            .encode(ca_pem)
            .into();
    }
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "app",
        "clusters": [{"name": "app", "cluster": cluster}],
        "contexts": [{"name": "app", "context": {"cluster": "app", "user": app_objects::ACCOUNT}}],
        "users": [{"name": app_objects::ACCOUNT, "user": {"token": token}}],
    });
    Ok(serde_yaml::to_string(&kubeconfig)?)
}

/// Makes the APIServiceBinding CRD bindery's: created when missing; one
/// kube-bind installed (it lacks `spec.permissionClaims`, which kube-apiserver
/// would refuse on bindery's binding as a field not declared in schema) gets
/// bindery's schema, a superset of kube-bind's, without bindery's labels, so
/// that unbinding never removes a CRD kube-bind's own bindings still use.
async fn install_binding_crd(app: &kube::Client) -> Result<()> {
    let crd = app_objects::binding_crd();
    let (resource, _, name) = locate(&crd)?;
    let Some(existing) = dynamic(app, &resource, None).get_opt(&name).await? else {
        return create_if_missing(app, &crd).await;
    };
    if app_objects::binding_crd_is_bindery_s(&existing.data) {
        return Ok(());
    }
    let mut schema_only = crd;
    if let Some(metadata) = schema_only["metadata"].as_object_mut() {
        metadata.remove("labels");
    }
    apply(app, &schema_only).await?;
    eprintln!("The app cluster's APIServiceBinding CRD (kube-bind's) now has bindery's fields too");
    Ok(())
}

async fn apply(app: &kube::Client, object: &Value) -> Result<()> {
    let (resource, namespace, name) = locate(object)?;
    dynamic(app, &resource, namespace.as_deref())
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(object),
        )
        .await
        .with_context(|| format!("applying {} {name}", object["kind"]))?;
    Ok(())
}

/// Deletes bindery's binding of `export` named as the export, as bindery
/// named its bindings before [`app_binding`]; whether there was one.
/// kube-bind's binding of that name (`bindery migrate` deletes it) stays.
async fn retire_binding_named_as_export(app: &kube::Client, export: &str) -> Result<bool> {
    let bindings = dynamic(app, &binding_resource(), None);
    let Some(old) = bindings.get_opt(export).await? else {
        return Ok(false);
    };
    if kube::ResourceExt::labels(&old)
        .get(app_objects::BINDING_LABEL)
        .map(String::as_str)
        != Some(export)
    {
        return Ok(false);
    }
    match bindings.delete(export, &DeleteParams::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// Creates `object` unless one of its name exists (kept as it is then). One
/// being deleted (a namespace or CRD an unbind just removed) is waited for.
async fn create_if_missing(app: &kube::Client, object: &Value) -> Result<()> {
    let (resource, namespace, name) = locate(object)?;
    let api = dynamic(app, &resource, namespace.as_deref());
    let deadline = Instant::now() + Duration::from_secs(120);
    let existing = loop {
        match api.get_opt(&name).await? {
            Some(found) if found.metadata.deletion_timestamp.is_some() => {
                if Instant::now() > deadline {
                    bail!("{} {name} is still being deleted", object["kind"]);
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            other => break other,
        }
    };
    if existing.is_none() {
        let typed: DynamicObject = serde_json::from_value(object.clone())?;
        api.create(&Default::default(), &typed)
            .await
            .with_context(|| format!("creating {} {name}", object["kind"]))?;
    }
    Ok(())
}

fn dynamic(
    app: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(app.clone(), ns, resource),
        None => Api::all_with(app.clone(), resource),
    }
}

/// The API resource, namespace and name of `object`.
fn locate(object: &Value) -> Result<(ApiResource, Option<String>, String)> {
    let resource = resource_of(
        object["apiVersion"].as_str().unwrap_or_default(),
        object["kind"].as_str().unwrap_or_default(),
    )?;
    Ok((
        resource,
        object["metadata"]["namespace"].as_str().map(str::to_string),
        object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    ))
}

/// The API resource of a kind bind writes.
fn resource_of(api_version: &str, kind: &str) -> Result<ApiResource> {
    let plural = plural_of(kind).ok_or_else(|| anyhow!("bind does not write {kind}"))?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Ok(ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        plural,
    ))
}

fn plural_of(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "Namespace" => "namespaces",
        "ServiceAccount" => "serviceaccounts",
        "Secret" => "secrets",
        "ConfigMap" => "configmaps",
        "Service" => "services",
        "ClusterRole" => "clusterroles",
        "ClusterRoleBinding" => "clusterrolebindings",
        "RoleBinding" => "rolebindings",
        "APIService" => "apiservices",
        "APIServiceBinding" => "apiservicebindings",
        "CustomResourceDefinition" => "customresourcedefinitions",
        _ => return None,
    })
}

/// Waits until the aggregator reports every APIService Available.
async fn wait_available(app: &kube::Client, names: &[String], timeout: Duration) -> Result<()> {
    let api: Api<DynamicObject> = Api::all_with(app.clone(), &app_objects::api_service_resource());
    let deadline = Instant::now() + timeout;
    for name in names {
        loop {
            let (available, message) = app_objects::availability(&api.get(name).await?.data);
            if available {
                break;
            }
            if Instant::now() > deadline {
                bail!("APIService {name} is not Available: {message}");
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    Ok(())
}

/// Waits until the app cluster's aggregated discovery (what kubectl reads to
/// map kinds) and its OpenAPI v3 index (what `kubectl explain` reads) list
/// every bound group/version. The aggregator refreshes both on its own after
/// an APIService turns Available, and until then kubectl cannot map or
/// explain the bound kinds.
async fn wait_discovered(
    app: &kube::Client,
    bound: &[super::wire::GroupVersion],
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let documents: [(&str, &str, &str, ListsGroupVersion); 2] = [
        (
            "/apis",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            "discovery",
            discovered,
        ),
        (
            "/openapi/v3",
            "application/json",
            "OpenAPI v3 index",
            in_openapi_index,
        ),
    ];
    for (uri, accept, what, lists) in documents {
        loop {
            let request = http::Request::builder()
                .uri(uri)
                .header(http::header::ACCEPT, accept)
                .body(Vec::new())?;
            let document: Value = app.request(request).await?;
            let missing: Vec<String> = bound
                .iter()
                .filter(|gv| !lists(&document, &gv.group, &gv.version))
                .map(|gv| format!("{}/{}", gv.group, gv.version))
                .collect();
            if missing.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "the app cluster's {what} does not list {} yet",
                    missing.join(", ")
                );
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    Ok(())
}

/// Whether a document lists a group/version.
type ListsGroupVersion = fn(&Value, &str, &str) -> bool;

/// Whether an OpenAPI v3 index (`/openapi/v3`) has `group`/`version`.
fn in_openapi_index(document: &Value, group: &str, version: &str) -> bool {
    let path = match group {
        "" => format!("api/{version}"),
        group => format!("apis/{group}/{version}"),
    };
    document["paths"].get(&path).is_some()
}

/// Whether an aggregated discovery document lists `group`/`version` with
/// resources, and not as stale.
fn discovered(document: &Value, group: &str, version: &str) -> bool {
    document["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| g["metadata"]["name"] == group)
        .flat_map(|g| g["versions"].as_array().into_iter().flatten())
        .any(|v| {
            v["version"] == version
                && v["freshness"] != "Stale"
                && v["resources"].as_array().is_some_and(|r| !r.is_empty())
        })
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
        MANAGED_BY.0,
        MANAGED_BY.1,
        app_objects::BINDING_LABEL,
        options.export
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

fn binding_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kube-bind.io", "v1alpha2", "APIServiceBinding"),
        "apiservicebindings",
    )
}

/// Deletes bind's objects carrying `labels`, bindings and APIServices first,
/// the namespace and the CRD last; none of the kinds `kept`.
async fn delete_labelled(app: &kube::Client, labels: &str, kept: &[&str]) -> Result<()> {
    let kinds = [
        ("kube-bind.io/v1alpha2", "APIServiceBinding", false),
        ("apiregistration.k8s.io/v1", "APIService", false),
        ("v1", "Secret", true),
        ("v1", "ConfigMap", true),
        ("v1", "Service", true),
        ("v1", "ServiceAccount", true),
        ("rbac.authorization.k8s.io/v1", "RoleBinding", true),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", false),
        ("rbac.authorization.k8s.io/v1", "ClusterRole", false),
        ("v1", "Namespace", false),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition", false),
    ];
    for (api_version, kind, namespaced) in kinds {
        if kept.contains(&kind) {
            continue;
        }
        let resource = resource_of(api_version, kind)?;
        // Namespaced kinds in every namespace: the claimed objects copied
        // into consumer namespaces carry the binding's labels too.
        let found = match dynamic(app, &resource, None)
            .list(&ListParams::default().labels(labels))
            .await
        {
            Ok(list) => list.items,
            Err(kube::Error::Api(s)) if s.code == 404 => continue,
            Err(e) => return Err(e.into()),
        };
        for object in found {
            let name = object.metadata.name.clone().unwrap_or_default();
            let namespace = object.metadata.namespace.clone();
            let api = dynamic(app, &resource, namespace.as_deref().filter(|_| namespaced));
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(anyhow!(e).context(format!("deleting {kind} {name}"))),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_openapi_index_must_have_the_group_version() {
        let index = serde_json::json!({"paths": {"apis/db.example.com/v1": {"serverRelativeURL": "/openapi/v3/apis/db.example.com/v1?hash=X"},
            "api/v1": {}}});
        assert!(in_openapi_index(&index, "db.example.com", "v1"));
        assert!(in_openapi_index(&index, "", "v1"));
        assert!(!in_openapi_index(&index, "db.example.com", "v1beta1"));
        assert!(!in_openapi_index(
            &serde_json::json!({}),
            "db.example.com",
            "v1"
        ));
    }

    #[test]
    fn discovery_must_list_the_version_with_resources_and_fresh() {
        let document = serde_json::json!({"items": [
            {"metadata": {"name": "db.example.com"}, "versions": [
                {"version": "v1", "resources": [{"resource": "postgresqlinstances"}], "freshness": "Current"},
                {"version": "v1beta1", "resources": [{"resource": "postgresqlinstances"}], "freshness": "Stale"},
                {"version": "v2", "resources": []},
            ]},
        ]});
        assert!(discovered(&document, "db.example.com", "v1"));
        assert!(!discovered(&document, "db.example.com", "v1beta1"), "stale");
        assert!(
            !discovered(&document, "db.example.com", "v2"),
            "no resources"
        );
        assert!(!discovered(&document, "other.io", "v1"));
        assert!(!discovered(&serde_json::json!({}), "db.example.com", "v1"));
    }

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

    #[test]
    fn every_kind_bind_writes_can_be_located() {
        let mut all = vec![app_objects::namespace(), app_objects::binding_crd()];
        all.extend(app_objects::account());
        for object in &all {
            let (_, _, name) = locate(object).unwrap();
            assert!(!name.is_empty());
        }
    }
}
