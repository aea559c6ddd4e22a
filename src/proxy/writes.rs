//! The steps a write takes besides the exchange itself: the ownership read
//! of its target (and the uid a delete is pinned to), the app cluster's quota
//! and the export's caps, the trial admission and the provisioning of a new
//! namespace, the remake of a namespace gone under a create, and the patch
//! loop bindery applies JSON and merge patches in.

use super::{Exchange, PATCH_ATTEMPTS, creates, patch, request_error};
use crate::forward::answer::{Expected, Shape};
use crate::forward::encode::Failure;
use crate::forward::request::{Body, Options};
use crate::forward::store::Store;
use crate::quota::Subject;
use crate::route::Verb;
use crate::status::ApiError;
use crate::translate::request::{
    ProviderRequest, RequestError, provider_target, request_down, update_down,
};
use crate::translate::scale;
use crate::upstream::BoxBody;
use crate::wire::body::PatchType;
use http::{Method, Response, StatusCode};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceSubresourceScale;
use serde_json::Value;

impl Exchange<'_> {
    /// A delete of `current`, the object read first, pinned to its uid.
    pub(super) fn pin_delete(&self, provider: &mut ProviderRequest, current: Option<&Value>) {
        if let (Verb::Delete, Some(current)) = (self.request.verb, current) {
            pin_uid(provider, current);
        }
    }

    /// The object behind a named write, or a Scale, read first: it must be
    /// the consumer's own (the Scale itself carries no labels to tell).
    pub(super) async fn checked_target(&self) -> Result<Option<Value>, Failure> {
        let scale = self.resource.subresource.as_deref() == Some("scale");
        Ok(match (&self.resource.name, self.request.verb) {
            (Some(_), Verb::Update | Verb::Patch | Verb::Delete) => self.current().await?,
            (Some(_), Verb::Get) if scale => {
                Some(self.current().await?.ok_or_else(|| self.not_found())?)
            }
            _ => None,
        })
    }

    /// The app cluster's quota and the export's object cap, for a create of
    /// a new object.
    pub(super) async fn quota_admits(&self) -> Result<(), Failure> {
        if let Some(namespace) = &self.resource.namespace {
            self.proxy
                .quota
                .namespace_admits(self.bound().consumer.as_str(), namespace, &self.subject())
                .await?;
        }
        self.object_cap()?;
        Ok(())
    }

    /// A create (or an apply): when the provider says its namespace is not
    /// there or is going (deleted on the provider, or with its app
    /// namespace, while bindery still knew it), the namespace is made again
    /// and the create sent once more, within the request's time.
    pub(super) async fn create(
        &self,
        provider: ProviderRequest,
    ) -> Result<Response<BoxBody>, Failure> {
        let answer = self.exchange(provider.clone()).await;
        let (Some(namespace), Err(Failure::Upstream(code, status))) =
            (&self.resource.namespace, &answer)
        else {
            return answer;
        };
        let gone = *code == 404 && status["details"]["kind"] == "namespaces";
        let going = *code == 403
            && status["details"]["causes"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|cause| cause["reason"] == "NamespaceTerminating");
        if !(gone || going) {
            return answer;
        }
        tracing::info!(consumer = %self.bound().consumer, %namespace,
            "a provider namespace bindery knew is gone; making it again");
        if !self
            .proxy
            .namespaces
            .remake(self.bound(), namespace, self.deadline)
            .await
        {
            return answer;
        }
        self.exchange(provider).await
    }

    /// The consumer namespace a create goes to that has no provider
    /// namespace yet, if any; kube-apiserver's 404 for a namespace no
    /// namespace can have (`UPPER`, `a.b`, 64 characters), before anything
    /// reaches the provider.
    pub(super) fn unprovisioned(&self) -> Result<Option<String>, ApiError> {
        let (Some(namespace), true) = (&self.resource.namespace, creates(&self.request)) else {
            return Ok(None);
        };
        if !crate::route::is_dns_label(namespace) {
            return Err(ApiError::object_not_found("", "namespaces", namespace));
        }
        if self.proxy.namespaces.exists(self.bound(), namespace) {
            return Ok(None);
        }
        self.namespace_cap(self.proxy.namespaces.used(self.bound()))?;
        Ok(Some(namespace.clone()))
    }

    /// The export's cap on provider namespaces, beside `used` of them.
    pub(super) fn namespace_cap(&self, used: u64) -> Result<(), ApiError> {
        self.served
            .caps
            .one_more_namespace(&self.bound().export, used)
            .map_err(|refusal| crate::quota::refused(&self.subject(), &refusal))
    }

    /// The export's cap on the consumer's objects of its resources; open
    /// when the cache cannot count them (as kcp's object count fails open).
    fn object_cap(&self) -> Result<(), ApiError> {
        let bound = self.bound();
        let export = bound.identity.label_value();
        let mut used = None;
        for (group, resource) in self.served.export_resources.iter() {
            if let Some(owned) =
                self.proxy
                    .upstream
                    .owned_by(group, resource, bound.consumer.as_str(), export)
            {
                *used.get_or_insert(0) += owned;
            }
        }
        let Some(used) = used else {
            return Ok(());
        };
        self.served
            .caps
            .one_more_object(&bound.export, used)
            .map_err(|refusal| crate::quota::refused(&self.subject(), &refusal))
    }

    /// The object a create's refusal names.
    fn subject(&self) -> Subject<'_> {
        Subject {
            group: &self.bound().group,
            resource: &self.bound().resource,
            name: self.created_name(),
        }
    }

    /// Admission for a create: tried first as a dry run when its namespace
    /// has no provider namespace yet (so that an invalid create, or a dry
    /// run, makes none), or when a ResourceQuota of the app cluster
    /// constrains it (so that what kube-apiserver checks before its quota
    /// admission, validation, the provider's own admission, a name in use,
    /// refuses first and an invalid create is never charged); then the
    /// quota is charged, and the create goes on as it came. A dry run's
    /// answer is the answer to a dry run.
    pub(super) async fn admit(
        &self,
        provider: &ProviderRequest,
        current: Option<&Value>,
        unprovisioned: Option<&str>,
    ) -> Result<Option<Response<BoxBody>>, Failure> {
        let bound = self.bound();
        // An apply creates only when there is no object yet.
        let creates =
            creates(&self.request) && (self.request.verb == Verb::Create || current.is_none());
        let (true, Some(namespace), None) = (
            creates,
            &self.resource.namespace,
            &self.resource.subresource,
        ) else {
            return Ok(None);
        };
        let pending = self
            .proxy
            .quota
            .pending(
                bound.consumer.as_str(),
                namespace,
                &bound.group,
                &bound.resource,
            )
            .await?;
        if pending.is_none() && unprovisioned.is_none() {
            return Ok(None);
        }
        let dry_run = match &self.request.options {
            Options::Create(options) | Options::Patch(options) => !options.dry_run.is_empty(),
            _ => false,
        };
        let answer = match unprovisioned {
            Some(namespace) => self.trial_elsewhere(namespace).await?,
            None => {
                let mut trial = provider.clone();
                if !dry_run {
                    trial.query.push(("dryRun".into(), "All".into()));
                }
                self.exchange(trial).await?
            }
        };
        if !answer.status().is_success() {
            return Ok(Some(answer));
        }
        if let Some(pending) = pending {
            pending.charge(&self.subject(), dry_run).await?;
        }
        Ok(dry_run.then_some(answer))
    }

    /// The create as a dry run in the consumer's cluster namespace, for a
    /// consumer namespace that has no provider namespace yet: the
    /// provider's validation and admission of it, without making the
    /// namespace first. Its answer is in the consumer's terms, the object in
    /// the namespace it was asked for.
    async fn trial_elsewhere(&self, namespace: &str) -> Result<Response<BoxBody>, Failure> {
        let mut elsewhere = self.bound().clone();
        let cluster_namespace = elsewhere.namespaces.cluster_namespace().to_string();
        elsewhere
            .namespaces
            .insert(namespace.to_string(), cluster_namespace.clone());
        let mut trial = request_down(
            &elsewhere,
            self.resource,
            &self.request,
            &self.proxy.tokens,
            None,
        )
        .map_err(|e| request_error(&elsewhere, e))?;
        if !trial.query.iter().any(|(key, _)| key == "dryRun") {
            trial.query.push(("dryRun".into(), "All".into()));
        }
        let store = self.store();
        let mut read = store.exchange(self.build(&trial)?).await?;
        let mut answer: Value =
            crate::deep::from_slice(&read.body).map_err(|_| store.unreadable())?;
        if let Some(metadata) = answer.get_mut("metadata").and_then(Value::as_object_mut)
            && metadata.get("namespace").and_then(Value::as_str) == Some(&cluster_namespace)
        {
            let provider_ns = self.bound().namespaces.to_provider(namespace);
            metadata.insert("namespace".into(), provider_ns.into());
        }
        read.body = serde_json::to_vec(&answer)
            .map_err(|_| store.unreadable())?
            .into();
        store.answer(read)
    }

    /// For a create of a cluster-scoped object beside every other
    /// consumer's, the reference to the consumer's cluster Namespace that
    /// kube-bind's konnector gives it, as a stored object holding it.
    pub(super) async fn cluster_namespace_owner(
        &self,
        current: Option<&Value>,
    ) -> Result<Option<Value>, Failure> {
        let bound = self.bound();
        let plain_create = self.request.verb == Verb::Create && self.resource.subresource.is_none();
        if current.is_some() || !plain_create || !bound.owned_by_cluster_namespace() {
            return Ok(None);
        }
        let uid = self.proxy.namespaces.cluster_namespace_uid(bound).await?;
        Ok(uid.map(|uid| {
            crate::translate::owners::owned_by_cluster_namespace(
                bound.namespaces.cluster_namespace(),
                &uid,
            )
        }))
    }

    /// The name a create's refusal gives its object, as kube-apiserver's
    /// admission errors do: its name, else its `generateName`, else
    /// `Unknown`.
    fn created_name(&self) -> &str {
        if let Some(name) = &self.resource.name {
            return name;
        }
        let metadata = match &self.request.body {
            Some(Body::Object(object)) => &object["metadata"],
            _ => &Value::Null,
        };
        ["name", "generateName"]
            .iter()
            .filter_map(|key| metadata[key].as_str())
            .find(|value| !value.is_empty())
            .unwrap_or("Unknown")
    }

    /// The provider's current object behind the request's name, in provider
    /// terms; `None` when there is none. Anything but the consumer's own
    /// object or a plain "not found" stops the request: a throttled or
    /// failing read is no proof of ownership.
    async fn current(&self) -> Result<Option<Value>, Failure> {
        let mut main = self.resource.clone();
        main.subresource = None;
        let target = provider_target(self.bound(), &main);
        let read = self.get(target, None).await?;
        if read.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let shape = Shape {
            expected: Expected::Object,
            ..self.shape.clone()
        };
        let store = Store {
            shape: &shape,
            ..self.store()
        };
        // Visible: the provider's own form is what a patch applies to.
        store.up(&read)?;
        if read.status != StatusCode::OK {
            return Err(store.unreadable());
        }
        let object = crate::deep::from_slice(&read.body).map_err(|_| store.unreadable())?;
        Ok(Some(object))
    }

    /// The scale subresource's paths in the requested version's schema.
    fn scale_paths(&self) -> Option<CustomResourceSubresourceScale> {
        self.served
            .spec
            .versions
            .iter()
            .find(|version| version.name == self.resource.version)?
            .subresources
            .as_ref()?
            .scale
            .clone()
    }

    /// A JSON or merge patch: applied by bindery to the consumer's form of
    /// the object as it is, and its result stored with an update pinned to
    /// the version it was applied to; applied again when the object
    /// changed in between, as kube-apiserver applies a patch again.
    pub(super) async fn patch(
        &self,
        patch_type: PatchType,
        patch: &Value,
        mut current: Option<Value>,
    ) -> Result<Response<BoxBody>, Failure> {
        let bound = self.bound();
        let Options::Patch(options) = &self.request.options else {
            return Err(ApiError::internal("a patch without patch options").into());
        };
        let scale = self.resource.subresource.as_deref() == Some("scale");
        let target = provider_target(bound, self.resource);
        for attempt in 0.. {
            let Some(object) = current.take() else {
                return Err(self.not_found().into());
            };
            // A Scale is patched as kube-apiserver patches it: made from
            // the object (its GET of the Scale fails where the object has
            // no replicas yet, its patch does not).
            let scale_paths = scale.then(|| self.scale_paths()).flatten();
            let base = match &scale_paths {
                Some(paths) => match scale::scale_to_patch(&object, paths) {
                    Ok(made) => made,
                    Err(scale::Unscalable::NotAnInteger) => {
                        let read = self.get(target.clone(), Some("scale")).await?;
                        if !(200..300).contains(&read.status) {
                            return self.store().answer(read);
                        }
                        crate::deep::from_slice(&read.body)
                            .map_err(|_| self.store().unreadable())?
                    }
                },
                None => object,
            };
            let mut result = patch::patched(bound, patch_type, patch, &base, !scale)?;
            if let Some(paths) = &scale_paths {
                scale::check_patched(&result, paths)?;
            }
            let pinned = result.pointer("/metadata/resourceVersion")
                == base.pointer("/metadata/resourceVersion");
            let body = update_down(bound, self.resource, &mut result, &base)
                .map_err(|refusal| request_error(bound, RequestError::Refused(refusal)))?;
            let mut query = Vec::new();
            options.encode(&mut query);
            query.retain(|(key, _)| key != "force");
            let provider = ProviderRequest {
                method: Method::PUT,
                target: target.clone(),
                query,
                accept: crate::translate::request::upstream_accept(self.request.output.target),
                body: Some(body),
            };
            let subresource = self.resource.subresource.as_deref();
            let response = self
                .send_as_consumer(|| self.build(&provider), "update", subresource)
                .await?;
            let read = self.store().read(response).await?;
            if read.status == StatusCode::CONFLICT && pinned && attempt + 1 < PATCH_ATTEMPTS {
                current = self.current().await?;
                continue;
            }
            return self.store().answer(read);
        }
        unreachable!("the loop returns")
    }
}

/// A delete removes exactly the object whose ownership was checked: its
/// uid is a precondition (unless the caller gave one).
fn pin_uid(provider: &mut ProviderRequest, current: &Value) {
    let Some(uid) = current.pointer("/metadata/uid").and_then(Value::as_str) else {
        return;
    };
    let Some((_, bytes)) = &mut provider.body else {
        return;
    };
    let Ok(mut options) = crate::deep::from_slice::<Value>(bytes) else {
        return;
    };
    let preconditions = options.as_object_mut().map(|o| {
        o.entry("preconditions")
            .or_insert_with(|| serde_json::json!({}))
    });
    if let Some(Value::Object(preconditions)) = preconditions
        && !preconditions.contains_key("uid")
    {
        preconditions.insert("uid".into(), Value::String(uid.to_string()));
        *bytes = serde_json::to_vec(&options).expect("a JSON value serializes");
    }
}
