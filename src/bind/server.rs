//! bindery's `/bind` endpoints: the templates a binder may bind, binding one
//! for an app cluster (cluster namespace, `app-cluster` registration and
//! APIServiceExportRequest in the provider), where a bind stands, unbinding,
//! and the browser sessions of the interactive bind with their page.

use super::binder::{self, Action, Binder};
use super::offers::offer;
use super::page;
use super::proof;
use super::routes::{BindRoute, html};
use super::sessions::Sessions;
use super::wire::{
    BindRequest, BindingState, GroupVersion, Offers, Progress, Registration, SessionCreated,
    UnbindRequest,
};
use crate::api::keys::{AUTHOR_ANNOTATION, IDENTITY_ANNOTATION};
use crate::api::{
    APIServiceExport, APIServiceExportRequest, APIServiceExportRequestStatus,
    APIServiceExportTemplate, BoundSchema, ExportRequestPhase,
};
use crate::app_cluster;
use crate::authz::Authorizer;
use crate::controllers::kube_bind_rbac_guard::{CLUSTER_NAMESPACE_LABEL, label_if_made_by_bindery};
use crate::controllers::legacy_identity;
use crate::controllers::naming::cluster_namespace;
use crate::controllers::ownership::{MANAGED_LABEL, Ours};
use crate::proxy::{error, full};
use crate::status::ApiError;
use crate::upstream::BoxBody;
use bytes::Bytes;
use http::Response;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// The field manager of what binding writes in the provider.
const FIELD_MANAGER: &str = "bindery-bind";

/// Whether an app cluster may be named by the identity its cluster
/// namespace records rather than its kube-system UID (see
/// [`proof::prove_identity`]): for binds of exports that exist, which only
/// their administrators make, and unbinds by the registered app cluster.
#[derive(Clone, Copy)]
enum Recorded {
    Accepted,
    Ignored,
}

/// Serves `/bind`.
pub struct BindService {
    pub provider: kube::Client,
    /// Cluster namespaces are `<prefix><consumer>`.
    pub prefix: String,
    /// PEM of the CA of bindery's serving certificate, for APIService caBundles.
    pub serving_ca: String,
    pub sessions: Sessions,
    /// Asks the provider whether a binder may bind a template (or act as
    /// an administrator), remembering its answers briefly.
    pub authorizer: Arc<Authorizer>,
    /// bindery's own reach to Secrets in the cluster namespaces it makes,
    /// when its provider role holds none cluster-wide.
    pub namespace_access: Option<crate::namespace_access::NamespaceAccess>,
}

type Reply = Result<Response<BoxBody>, ApiError>;

impl BindService {
    /// Answers `route`, whose caller the authentication layer has
    /// authenticated: `binder` is the provider user behind routes that take
    /// provider credentials.
    pub async fn serve(
        &self,
        route: &BindRoute,
        binder: Option<&Binder>,
        body: Bytes,
    ) -> Response<BoxBody> {
        self.reply(route, binder, body)
            .await
            .unwrap_or_else(|e| error(&e))
    }

    async fn reply(&self, route: &BindRoute, binder: Option<&Binder>, body: Bytes) -> Reply {
        let binder = || binder.ok_or_else(ApiError::unauthorized);
        match route {
            BindRoute::Templates => self.templates(binder()?).await,
            BindRoute::Bind => self.bind(binder()?, &body).await,
            BindRoute::BindingState { consumer, export } => {
                self.binding_state(binder()?, consumer, export).await
            }
            BindRoute::Unbind { consumer, export } => {
                self.unbind(binder()?, consumer, export, &body).await
            }
            BindRoute::OpenSession => self.open_session(binder()?),
            BindRoute::SessionPage(id) => Ok(self.session_page(id).await),
            BindRoute::Choose(id) => Ok(self.choose(id, &body).await),
            BindRoute::SessionState(id) => self.session_state(id),
            BindRoute::Progress(id) => self.progress(binder()?, id, &body),
            BindRoute::MethodNotAllowed(method) => Err(ApiError {
                code: 405,
                reason: "MethodNotAllowed",
                message: format!("{method} is not supported here"),
                details: None,
                plain_text: false,
                retry_after: None,
            }),
            BindRoute::NotFound => Err(ApiError::page_not_found()),
        }
    }

    /// The offers of every template `binder` may bind.
    async fn offers(&self, binder: &Binder) -> Result<Offers, ApiError> {
        let templates = Api::<APIServiceExportTemplate>::all(self.provider.clone())
            .list(&ListParams::default())
            .await
            .map_err(internal)?;
        let crds = Api::<CustomResourceDefinition>::all(self.provider.clone())
            .list(&ListParams::default())
            .await
            .map_err(internal)?
            .items
            .into_iter()
            .map(|crd| (crd.name_any(), crd))
            .collect::<BTreeMap<_, _>>();
        let mut offers = Vec::new();
        for template in &templates.items {
            if binder::may_bind(
                &self.authorizer,
                &self.provider,
                binder,
                &template.name_any(),
            )
            .await?
            {
                offers.push(offer(template, &crds));
            }
        }
        Ok(Offers { offers })
    }

    async fn templates(&self, binder: &Binder) -> Reply {
        Ok(json_reply(200, &self.offers(binder).await?))
    }

    async fn bind(&self, binder: &Binder, body: &[u8]) -> Reply {
        let request: BindRequest = decode(body)?;
        if request.identity.len() > 253 || request.identity.chars().any(char::is_control) {
            return Err(ApiError::bad_request(
                "identity is not a kube-system namespace UID",
            ));
        }
        if let Some(export) = request.export.clone() {
            return self.bind_existing(binder, &request, &export).await;
        }
        if request.template.is_empty() || request.identity.is_empty() {
            return Err(ApiError::bad_request("template and identity are required"));
        }
        self.check_may_bind(binder, &request.template).await?;
        Api::<APIServiceExportTemplate>::all(self.provider.clone())
            .get_opt(&request.template)
            .await
            .map_err(internal)?
            .ok_or_else(|| {
                ApiError::object_not_found(
                    binder::TEMPLATE_GROUP,
                    binder::TEMPLATE_RESOURCE,
                    &request.template,
                )
            })?;
        let namespace = cluster_namespace(&self.prefix, &request.identity);
        self.claim_and_register(binder, &request, &namespace, Recorded::Ignored)
            .await?;
        let export_request = json!({
            "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportRequest",
            "metadata": {
                "name": request.template,
                "namespace": namespace,
                "labels": {MANAGED_LABEL: "true"},
                "annotations": {
                    IDENTITY_ANNOTATION: request.identity,
                    AUTHOR_ANNOTATION: binder.name,
                },
            },
            "spec": {"templateRef": {"name": request.template}},
        });
        Api::<APIServiceExportRequest>::namespaced(self.provider.clone(), &namespace)
            .patch(&request.template, &apply(), &Patch::Apply(export_request))
            .await
            .map_err(internal)?;
        tracing::info!(binder = %binder.name, template = %request.template, %namespace, "bind requested");
        if let Some(session) = &request.session {
            self.sessions.update(session, Instant::now(), |s| {
                s.steps.push(format!(
                    "Requested {} for your cluster; waiting for the provider",
                    request.template
                ));
            });
        }
        let consumer = namespace
            .strip_prefix(&self.prefix)
            .unwrap_or(&namespace)
            .to_string();
        Ok(json_reply(
            201,
            &self.state_of(&consumer, &request.template).await?,
        ))
    }

    /// Registers the app cluster for `export`, an export of its own that
    /// exists already and is bindery's (taken over from kube-bind by `bindery
    /// migrate`). No template names it, so the binder must be one who may
    /// update it: a provider administrator.
    async fn bind_existing(&self, binder: &Binder, request: &BindRequest, export: &str) -> Reply {
        if request.identity.is_empty() || export.is_empty() {
            return Err(ApiError::bad_request("export and identity are required"));
        }
        let namespace = cluster_namespace(&self.prefix, &request.identity);
        self.require_administrator(
            binder,
            &update_export(&namespace, export),
            "binding an export that exists",
        )
        .await?;
        let found = Api::<APIServiceExport>::namespaced(self.provider.clone(), &namespace)
            .get_opt(export)
            .await
            .map_err(internal)?
            .ok_or_else(|| {
                ApiError::object_not_found("kube-bind.io", "apiserviceexports", export)
            })?;
        if !found.ours(&self.prefix) {
            return Err(ApiError::forbidden(
                "kube-bind.io",
                "apiserviceexports",
                Some(export),
                "the export is kube-bind's: run `bindery migrate` to move it to bindery first",
            ));
        }
        // An administrator binds an export that exists: the app cluster may
        // be named by the identity kube-bind recorded for it.
        self.claim_and_register(binder, request, &namespace, Recorded::Accepted)
            .await?;
        tracing::info!(binder = %binder.name, %export, %namespace, "bind of an existing export");
        let consumer = self.consumer_of(&namespace).to_string();
        Ok(json_reply(201, &self.state_of(&consumer, export).await?))
    }

    /// Whether `binder` may see or undo the bind of `export`: it holds
    /// `bind` on the template of that name, or may update the export (an
    /// administrator, who binds exports that exist).
    async fn check_may_bind_export(
        &self,
        binder: &Binder,
        consumer: &str,
        export: &str,
    ) -> Result<(), ApiError> {
        if binder::may_bind(&self.authorizer, &self.provider, binder, export).await? {
            return Ok(());
        }
        let namespace = format!("{}{consumer}", self.prefix);
        let update = update_export(&namespace, export);
        if binder::may(&self.authorizer, &self.provider, binder, &update).await? {
            return Ok(());
        }
        Err(binder::forbidden(binder, export))
    }

    /// Claims the consumer's cluster namespace and records the app
    /// cluster's registration, when the bind brings one.
    async fn claim_and_register(
        &self,
        binder: &Binder,
        request: &BindRequest,
        namespace: &str,
        recorded_identity: Recorded,
    ) -> Result<(), ApiError> {
        let recorded = match &request.registration {
            Some(claimed) => Some(
                self.checked_registration(
                    binder,
                    namespace,
                    &request.identity,
                    claimed,
                    recorded_identity,
                )
                .await?,
            ),
            None => None,
        };
        self.claim_cluster_namespace(namespace, &request.identity, binder)
            .await?;
        if let Some(access) = &self.namespace_access {
            access
                .grant_in_force(&self.provider, namespace)
                .await
                .map_err(internal)?;
        }
        if let Some((registration, existing)) = recorded {
            self.register(namespace, &registration, existing).await?;
        }
        Ok(())
    }

    async fn check_may_bind(&self, binder: &Binder, template: &str) -> Result<(), ApiError> {
        if binder::may_bind(&self.authorizer, &self.provider, binder, template).await? {
            Ok(())
        } else {
            Err(binder::forbidden(binder, template))
        }
    }

    /// Makes the consumer's cluster namespace, refusing one that another
    /// identity holds.
    async fn claim_cluster_namespace(
        &self,
        namespace: &str,
        identity: &str,
        binder: &Binder,
    ) -> Result<(), ApiError> {
        let namespaces = Api::<Namespace>::all(self.provider.clone());
        if let Some(existing) = namespaces.get_opt(namespace).await.map_err(internal)? {
            if legacy_identity::recorded(existing.annotations())
                .is_some_and(|recorded| recorded != identity)
            {
                return Err(ApiError {
                    code: 409,
                    reason: "Conflict",
                    message: format!(
                        "cluster namespace {namespace} belongs to another app cluster identity"
                    ),
                    details: None,
                    plain_text: false,
                    retry_after: None,
                });
            }
            label_if_made_by_bindery(&namespaces, &existing, FIELD_MANAGER)
                .await
                .map_err(internal)?;
            legacy_identity::move_to_current_key(&namespaces, &existing, identity, FIELD_MANAGER)
                .await
                .map_err(internal)?;
            return Ok(());
        }
        // Made by bindery, not kube-bind: kube-bind's backend may grant no
        // rights for its exports (`kube_bind_rbac_guard`).
        let object = json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace, "annotations": {
                IDENTITY_ANNOTATION: identity,
                AUTHOR_ANNOTATION: binder.name,
            }, "labels": {CLUSTER_NAMESPACE_LABEL: "true"}},
        });
        namespaces
            .patch(namespace, &apply(), &Patch::Apply(object))
            .await
            .map_err(internal)?;
        Ok(())
    }

    /// The registration to record for the app cluster `identity`, with the
    /// `app-cluster` Secret it replaces. Its kubeconfig must reach that app
    /// cluster ([`proof::prove_identity`]); when one is registered, through
    /// the registered server and CA ([`proof::pinned`]), unless the binder is
    /// a provider administrator. The trust material is what the app cluster
    /// publishes ([`super::published::trust`]).
    async fn checked_registration(
        &self,
        binder: &Binder,
        namespace: &str,
        identity: &str,
        claimed: &Registration,
        recorded_identity: Recorded,
    ) -> Result<(Registration, Option<Secret>), ApiError> {
        super::kubeconfig_check::check(&claimed.kubeconfig)
            .map_err(|e| ApiError::bad_request(format!("registration kubeconfig: {e}")))?;
        let existing = self.registration_secret(namespace).await?;
        let registered = existing.as_ref().map(proof::registered);
        let consumer = self.consumer_of(namespace);
        let pinned = match &registered {
            Some(r) => proof::pinned(&r.kubeconfig, &claimed.kubeconfig).await?,
            None => None,
        };
        let (config, trusted) = match (pinned, &registered) {
            (Some(config), _) => (config, registered.as_ref()),
            (None, None) => {
                // A consumer bound without a registration (with `bind -o
                // yaml`, or moved from kube-bind): its identity is no
                // secret, so the first to register would take it. A bind of
                // an export that exists was checked as its administrator's.
                let administrator = matches!(recorded_identity, Recorded::Accepted);
                if !administrator && self.has_bindings(namespace).await? {
                    self.require_administrator(
                        binder,
                        &replace(namespace),
                        &proof::unregistered(consumer),
                    )
                    .await?;
                }
                (proof::config(&claimed.kubeconfig).await?, None)
            }
            (None, Some(_)) => {
                self.require_administrator(
                    binder,
                    &replace(namespace),
                    &proof::other_trust(consumer),
                )
                .await?;
                (proof::config(&claimed.kubeconfig).await?, None)
            }
        };
        let client = proof::client(config)?;
        let recorded = match recorded_identity {
            Recorded::Accepted => self.recorded_identity(namespace).await?,
            Recorded::Ignored => None,
        };
        proof::prove_identity(&client, identity, recorded.as_deref()).await?;
        let recorded = match super::published::trust(&client, claimed, trusted).await {
            Ok(recorded) => recorded,
            Err(why) => {
                self.require_administrator(binder, &replace(namespace), &why)
                    .await?;
                claimed.clone()
            }
        };
        Ok((recorded, existing))
    }

    /// The app cluster identity cluster namespace `namespace` records.
    async fn recorded_identity(&self, namespace: &str) -> Result<Option<String>, ApiError> {
        proof::recorded_identity(&self.provider, namespace)
            .await
            .map_err(internal)
    }

    /// Whether cluster namespace `namespace` holds an export or a request
    /// that is not being deleted: a consumer bound already. (Its last
    /// unbind takes its registration; binding again is a new bind.)
    async fn has_bindings(&self, namespace: &str) -> Result<bool, ApiError> {
        let live = |meta: &kube::api::ObjectMeta| meta.deletion_timestamp.is_none();
        let exports = Api::<APIServiceExport>::namespaced(self.provider.clone(), namespace)
            .list(&ListParams::default())
            .await
            .map_err(internal)?;
        if exports.items.iter().any(|e| live(&e.metadata)) {
            return Ok(true);
        }
        let requests = Api::<APIServiceExportRequest>::namespaced(self.provider.clone(), namespace)
            .list(&ListParams::default())
            .await
            .map_err(internal)?;
        Ok(requests.items.iter().any(|r| live(&r.metadata)))
    }

    /// The `app-cluster` Secret of `namespace`, if any.
    async fn registration_secret(&self, namespace: &str) -> Result<Option<Secret>, ApiError> {
        Api::<Secret>::namespaced(self.provider.clone(), namespace)
            .get_opt(app_cluster::SECRET_NAME)
            .await
            .map_err(internal)
    }

    /// Passes when the provider allows `binder` `action` itself (a provider
    /// administrator), else kube-apiserver's 403 after `why`.
    async fn require_administrator(
        &self,
        binder: &Binder,
        action: &Action<'_>,
        why: &str,
    ) -> Result<(), ApiError> {
        if binder::may(&self.authorizer, &self.provider, binder, action).await? {
            tracing::info!(binder = %binder.name, verb = action.verb, resource = action.resource,
                namespace = action.namespace, "allowed as a provider administrator: {why}");
            return Ok(());
        }
        Err(binder::refused(binder, action, Some(why)))
    }

    fn consumer_of<'a>(&self, namespace: &'a str) -> &'a str {
        namespace.strip_prefix(&self.prefix).unwrap_or(namespace)
    }

    /// Writes the `app-cluster` Secret (see `crate::app_cluster`): made when
    /// there was none, else replaced at the version that was checked, so
    /// that a registration changed meanwhile is not overwritten.
    async fn register(
        &self,
        namespace: &str,
        registration: &Registration,
        existing: Option<Secret>,
    ) -> Result<(), ApiError> {
        let api = Api::<Secret>::namespaced(self.provider.clone(), namespace);
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let written = match existing {
            Some(mut secret) => {
                secret.data = Some(registration_data(registration));
                secret.string_data = None;
                secret.metadata.managed_fields = None;
                api.replace(app_cluster::SECRET_NAME, &params, &secret)
                    .await
            }
            None => {
                let mut secret = Secret {
                    data: Some(registration_data(registration)),
                    type_: Some("Opaque".into()),
                    ..Default::default()
                };
                secret.metadata.name = Some(app_cluster::SECRET_NAME.into());
                secret.metadata.namespace = Some(namespace.into());
                api.create(&params, &secret).await
            }
        };
        match written {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Err(ApiError {
                code: 409,
                reason: "Conflict",
                message: format!(
                    "Operation cannot be fulfilled on secrets \"{}\": the app cluster's \
                     registration changed while this bind was checked; bind again",
                    app_cluster::SECRET_NAME
                ),
                details: None,
                plain_text: false,
                retry_after: None,
            }),
            Err(e) => Err(internal(e)),
        }
    }

    async fn binding_state(&self, binder: &Binder, consumer: &str, export: &str) -> Reply {
        self.check_may_bind_export(binder, consumer, export).await?;
        Ok(json_reply(200, &self.state_of(consumer, export).await?))
    }

    /// Where the bind of `export` for `consumer` stands.
    async fn state_of(&self, consumer: &str, export: &str) -> Result<BindingState, ApiError> {
        let namespace = format!("{}{consumer}", self.prefix);
        let request = Api::<APIServiceExportRequest>::namespaced(self.provider.clone(), &namespace)
            .get_opt(export)
            .await
            .map_err(internal)?;
        let existing = Api::<APIServiceExport>::namespaced(self.provider.clone(), &namespace)
            .get_opt(export)
            .await
            .map_err(internal)?;
        let status = match (&request, &existing) {
            (Some(request), _) => request.status.clone().unwrap_or_default(),
            // An export made without a request of bindery's (kube-bind's,
            // taken over): made once it has its identity.
            (None, Some(found)) if found.ours(&self.prefix) => APIServiceExportRequestStatus {
                phase: Some(
                    match found.status.as_ref().and_then(|s| s.identity_hash.as_ref()) {
                        Some(_) => ExportRequestPhase::Succeeded,
                        None => ExportRequestPhase::Pending,
                    },
                ),
                ..Default::default()
            },
            _ => {
                return Err(ApiError::object_not_found(
                    "kube-bind.io",
                    "apiserviceexportrequests",
                    export,
                ));
            }
        };
        let phase = status
            .phase
            .map(|p| format!("{p:?}"))
            .unwrap_or_else(|| "Pending".into());
        let mut state = BindingState {
            consumer: consumer.to_string(),
            cluster_namespace: namespace.clone(),
            export: export.to_string(),
            phase,
            message: status.terminal_message.unwrap_or_default(),
            serving_ca: self.serving_ca.clone(),
            ..Default::default()
        };
        if state.phase != "Succeeded" {
            return Ok(state);
        }
        let Some(found) = existing else {
            state.phase = "Pending".into();
            state.message = "the export is being made".into();
            return Ok(state);
        };
        state.claims = found.spec.permission_claims.clone();
        let schemas = Api::<BoundSchema>::namespaced(self.provider.clone(), &namespace);
        for resource in &found.spec.resources {
            let name = resource.group_resource().to_string();
            let Some(schema) = schemas.get_opt(&name).await.map_err(internal)? else {
                continue;
            };
            let mut versions: Vec<String> = schema
                .spec
                .versions
                .iter()
                .filter(|v| v.served)
                .map(|v| v.name.clone())
                .collect();
            crate::discovery::version::sort_by_priority(&mut versions);
            for version in versions {
                let gv = GroupVersion {
                    group: schema.spec.group.clone(),
                    version,
                };
                if !state.group_versions.contains(&gv) {
                    state.group_versions.push(gv);
                }
            }
        }
        Ok(state)
    }

    async fn unbind(&self, binder: &Binder, consumer: &str, export: &str, body: &[u8]) -> Reply {
        // An export bound as it exists (`bind --export`) has no template.
        self.check_may_bind_export(binder, consumer, export).await?;
        let proof: UnbindRequest = decode(body)?;
        let namespace = cluster_namespace(&self.prefix, &proof.identity);
        if namespace != format!("{}{consumer}", self.prefix) {
            return Err(ApiError::bad_request(format!(
                "identity {} is not consumer {consumer}",
                proof.identity
            )));
        }
        super::kubeconfig_check::check(&proof.kubeconfig)
            .map_err(|e| ApiError::bad_request(format!("kubeconfig: {e}")))?;
        self.prove_unbind(binder, &namespace, export, &proof)
            .await?;
        let requests =
            Api::<APIServiceExportRequest>::namespaced(self.provider.clone(), &namespace);
        let exports = Api::<APIServiceExport>::namespaced(self.provider.clone(), &namespace);
        let gone = |r: kube::Result<_>| match r {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(internal(e)),
        };
        gone(
            requests
                .delete(export, &DeleteParams::default())
                .await
                .map(|_| ()),
        )?;
        gone(
            exports
                .delete(export, &DeleteParams::default())
                .await
                .map(|_| ()),
        )?;
        // The registration goes with the last export.
        let others = exports
            .list(&ListParams::default())
            .await
            .map_err(internal)?
            .items
            .into_iter()
            .filter(|e| e.name_any() != export && e.metadata.deletion_timestamp.is_none())
            .count();
        if others == 0 {
            gone(
                Api::<Secret>::namespaced(self.provider.clone(), &namespace)
                    .delete(app_cluster::SECRET_NAME, &DeleteParams::default())
                    .await
                    .map(|_| ()),
            )?;
        }
        tracing::info!(binder = %binder.name, %export, %namespace, "unbound");
        Ok(json_reply(
            200,
            &json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        ))
    }

    /// An unbind is proven through the registered app cluster, reached as
    /// registered ([`proof::pinned`]). Without that (another server or CA, or
    /// no registration, as `-o yaml` leaves it), only a provider
    /// administrator, who may delete the export itself, unbinds.
    async fn prove_unbind(
        &self,
        binder: &Binder,
        namespace: &str,
        export: &str,
        request: &UnbindRequest,
    ) -> Result<(), ApiError> {
        let consumer = self.consumer_of(namespace);
        let registered = self.registration_secret(namespace).await?;
        let why = match registered.as_ref().map(proof::registered) {
            None => format!(
                "consumer {consumer} has no registered app cluster to prove the unbind against"
            ),
            Some(r) => match proof::pinned(&r.kubeconfig, &request.kubeconfig).await? {
                // The registered app cluster itself: the identity its
                // cluster namespace records names it too.
                Some(config) => {
                    let recorded = self.recorded_identity(namespace).await?;
                    return proof::prove_identity(
                        &proof::client(config)?,
                        &request.identity,
                        recorded.as_deref(),
                    )
                    .await;
                }
                None => proof::other_trust(consumer),
            },
        };
        let delete = Action {
            verb: "delete",
            group: binder::TEMPLATE_GROUP,
            resource: "apiserviceexports",
            namespace: Some(namespace),
            name: export,
        };
        self.require_administrator(binder, &delete, &why).await
    }

    fn open_session(&self, binder: &Binder) -> Reply {
        let id = self
            .sessions
            .open(binder.clone(), Instant::now())
            .ok_or_else(|| ApiError::unavailable("too many bind sessions are open"))?;
        Ok(json_reply(
            201,
            &SessionCreated {
                path: format!("/bind/sessions/{id}"),
                id,
            },
        ))
    }

    async fn session_page(&self, id: &str) -> Response<BoxBody> {
        let Some(session) = self.sessions.get(id, Instant::now()) else {
            return html(404, page::problem(page::EXPIRED));
        };
        if session.state.template.is_some() {
            return html(
                200,
                page::render(id, &session.binder.name, &[], &session.state),
            );
        }
        match self.offers(&session.binder).await {
            Ok(offers) => html(
                200,
                page::render(id, &session.binder.name, &offers.offers, &session.state),
            ),
            Err(e) => html(e.code, page::problem(&e.message)),
        }
    }

    async fn choose(&self, id: &str, body: &[u8]) -> Response<BoxBody> {
        let now = Instant::now();
        let Some(session) = self.sessions.get(id, now) else {
            return html(404, page::problem(page::EXPIRED));
        };
        let Some(template) = form_urlencoded::parse(body)
            .find(|(k, _)| k == "template")
            .map(|(_, v)| v.into_owned())
        else {
            return html(400, page::problem("No template was picked."));
        };
        match binder::may_bind(&self.authorizer, &self.provider, &session.binder, &template).await {
            Ok(true) => {}
            Ok(false) => {
                return html(
                    403,
                    page::problem(&binder::forbidden(&session.binder, &template).message),
                );
            }
            Err(e) => return html(e.code, page::problem(&e.message)),
        }
        self.sessions.update(id, now, |state| {
            if state.template.is_none() {
                state.template = Some(template.clone());
                state.steps.push(format!("You picked {template}"));
            }
        });
        let mut response = full(303, "text/plain; charset=utf-8", "");
        if let Ok(location) = http::HeaderValue::from_str(&format!("/bind/sessions/{id}")) {
            response
                .headers_mut()
                .insert(http::header::LOCATION, location);
        }
        response
    }

    fn session_state(&self, id: &str) -> Reply {
        let session = self
            .sessions
            .get(id, Instant::now())
            .ok_or_else(|| ApiError::object_not_found("", "bind sessions", id))?;
        Ok(json_reply(200, &session.state))
    }

    fn progress(&self, binder: &Binder, id: &str, body: &[u8]) -> Reply {
        let progress: Progress = decode(body)?;
        let now = Instant::now();
        let session = self
            .sessions
            .get(id, now)
            .ok_or_else(|| ApiError::object_not_found("", "bind sessions", id))?;
        if session.binder.name != binder.name {
            return Err(ApiError::forbidden(
                "",
                "bind sessions",
                Some(id),
                "the session is another binder's",
            ));
        }
        self.sessions.update(id, now, |state| {
            state.steps.extend(progress.step);
            state.done |= progress.done;
            if progress.error.is_some() {
                state.error = progress.error;
            }
        });
        Ok(json_reply(
            200,
            &self.sessions.get(id, now).map(|s| s.state),
        ))
    }
}

/// Replacing the `app-cluster` registration of `namespace`, which a
/// provider administrator may do.
/// `update` on export `name` in cluster namespace `namespace`.
fn update_export<'a>(namespace: &'a str, name: &'a str) -> Action<'a> {
    Action {
        verb: "update",
        group: "kube-bind.io",
        resource: "apiserviceexports",
        namespace: Some(namespace),
        name,
    }
}

fn replace(namespace: &str) -> Action<'_> {
    Action {
        verb: "update",
        group: "",
        resource: "secrets",
        namespace: Some(namespace),
        name: app_cluster::SECRET_NAME,
    }
}

/// The `app-cluster` Secret's data for `registration`.
fn registration_data(registration: &Registration) -> BTreeMap<String, ByteString> {
    let mut data = BTreeMap::from([
        (app_cluster::KUBECONFIG_KEY, registration.kubeconfig.clone()),
        (
            app_cluster::REQUESTHEADER_CA_KEY,
            registration.requestheader_client_ca.clone(),
        ),
        (
            app_cluster::ALLOWED_NAMES_KEY,
            registration.requestheader_allowed_names.join(","),
        ),
    ]);
    if let (Some(issuer), Some(jwks)) = (
        &registration.service_account_issuer,
        &registration.service_account_jwks,
    ) {
        data.insert(app_cluster::TOKEN_ISSUER_KEY, issuer.clone());
        data.insert(app_cluster::TOKEN_KEYS_KEY, jwks.clone());
    }
    data.into_iter()
        .map(|(key, value)| (key.to_string(), ByteString(value.into_bytes())))
        .collect()
}

fn apply() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

/// A provider request of bind's own that failed: a 500 whose error is
/// logged, not sent, since its text can name provider objects the binder
/// does not see.
fn internal(error: kube::Error) -> ApiError {
    tracing::warn!(%error, "a provider request made for a bind failed");
    ApiError::internal("a provider request failed; bindery's log has its error")
}

fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("the body: {e}")))
}

fn json_reply(status: u16, value: &impl serde::Serialize) -> Response<BoxBody> {
    full(
        status,
        "application/json",
        serde_json::to_vec(value).expect("JSON serializes"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_provider_request_names_nothing_of_the_provider() {
        let status = kube::core::Status::failure(
            "namespaces \"kube-bind-other-team\" is forbidden",
            "Forbidden",
        )
        .with_code(403);
        let error = internal(kube::Error::Api(Box::new(status)));
        assert_eq!(error.code, 500);
        assert!(
            !error.message.contains("kube-bind-other-team"),
            "{}",
            error.message
        );
    }
}
