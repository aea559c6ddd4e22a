//! Writes to a consumer's claimed objects through its workspace path:
//! create, update, patch and delete, read in full by the forwarding
//! pipeline ([`crate::forward::request`]) and checked against the accepted
//! claims in both directions. The object as it is must be covered (else it
//! is not found, as on a get), and the object as the write makes it must be
//! covered too (else the write is forbidden), so that a provider controller
//! can neither reach nor make an object outside the claims.
//!
//! What the write makes is learned from the app cluster itself: creates,
//! updates and patches are first sent with `dryRun=All`, and the object
//! that trial made (defaults and admission applied) is what is checked.
//! The real write is then pinned to the resourceVersion that was checked
//! ([`crate::translate::claimed_writes`]); if the object moved on in
//! between, it is checked and tried again, as kube-apiserver tries a patch
//! again.
//!
//! Nothing the caller sent is passed on as it came:
//! - JSON and YAML objects are sent as bindery's JSON of what it decoded.
//! - A protobuf object (kubectl sends built-in kinds in protobuf) is a
//!   schema bindery does not have. Only its dry run carries the caller's
//!   bytes; the write sends the JSON of the object that dry run made and
//!   bindery checked, without what the server set (uid, resourceVersion,
//!   timestamps, managed fields, generation).
//! - Patches of every type (JSON, merge, strategic merge, apply) are sent
//!   as bindery's JSON of the patch it decoded, pinned, and applied by the
//!   app cluster. bindery could apply a JSON or merge patch itself, as the
//!   consumer proxy does (where names must be translated), but a claimed
//!   object needs no translation: the app cluster applying it gives
//!   kube-apiserver's own semantics and errors for a built-in kind (a
//!   result of the wrong type is its 422 `patch: Invalid value`), which
//!   bindery cannot reproduce without the kind's schema; a strategic merge
//!   patch bindery could not apply at all.
//! - DeleteOptions are sent as bindery encoded them (protobuf ones, which
//!   bindery decodes, included), with a resourceVersion precondition.
//!
//! Answers are read by what was asked and rebuilt
//! ([`crate::forward::answer`]) through the claims' view, then encoded as
//! the caller negotiated; the app cluster's refusals are rebuilt as
//! `Status`es of the fields kube-apiserver's has, and anything else it
//! answers is bindery's 500.

use crate::forward::answer::{Expected, Shape, View, status_up, unreadable};
use crate::forward::encode::Failure;
use crate::forward::request::{ApiRequest, Body, Options};
use crate::forward::store::{Named, Read, Store};
use crate::route::{ResourceRequest, Verb};
use crate::status::ApiError;
use crate::translate::claimed::{CheckedApart, ClaimedView};
use crate::translate::claimed_writes::{
    Pin, Pinned, create_from_trial, dry_run_delete, pin_delete, pin_object, pin_patch,
    update_from_trial,
};
use crate::translate::request::{include_object, upstream_accept};
use crate::upstream::{BoxBody, KubeUpstream};
use crate::wire::body::PatchType;
use crate::wire::protobuf;
use crate::wire::query::{IncludeObject, Pairs, WriteOptions};
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use http::{HeaderValue, Method, Response};
use serde_json::Value;

const JSON: &str = "application/json";

/// How many times a write is checked and tried again when its object
/// moved on between the check and the write.
const ATTEMPTS: usize = 5;

/// The upstream's name in errors.
pub const APP_CLUSTER: &str = "the app cluster";

/// A read of the app cluster that failed, answered to the provider's
/// controller as 503 without the app cluster's words (they name its users
/// and namespaces, which a claim does not show): those are logged.
pub fn app_cluster_unreachable(error: kube::Error) -> ApiError {
    crate::forward::store::unreachable(APP_CLUSTER, error)
}

/// One write on a claimed resource, read.
pub struct Write<'a> {
    pub app_cluster: &'a KubeUpstream,
    pub view: &'a ClaimedView,
    pub request: &'a ResourceRequest,
    pub api: &'a ApiRequest,
    /// The resource's kind.
    pub kind: &'a str,
    /// The object (or, to create, the collection) in the app cluster.
    pub path: &'a str,
    pub user_agent: Option<&'a HeaderValue>,
}

/// What one attempt of a write came to.
enum Attempt {
    Done(Response<BoxBody>),
    /// The object moved on between its check and the write: the refusal,
    /// unless a new check finds the object unmoved.
    Moved(Failure),
}

impl Write<'_> {
    pub async fn send(&self) -> Result<Response<BoxBody>, Failure> {
        match self.api.verb {
            Verb::Create => self.create().await,
            Verb::Update | Verb::Patch | Verb::Delete => self.change().await,
            _ => Err(ApiError::internal("a claimed write that is no write").into()),
        }
    }

    /// The one store, through `view` (the claims, or none on a trial whose
    /// result is checked after), with `shape` the answer's.
    fn store<'s>(&'s self, view: &'s dyn View, shape: &'s Shape) -> Store<'s> {
        Store {
            upstream: self.app_cluster,
            name: APP_CLUSTER,
            view,
            shape,
            request: self.api,
            named: Named {
                group: &self.request.group,
                resource: &self.request.resource,
                name: self.request.name.as_deref().unwrap_or_default(),
            },
        }
    }

    /// A create: tried, its result checked, then made from bindery's
    /// encoding (of the body, or of what the trial made of a protobuf one).
    async fn create(&self) -> Result<Response<BoxBody>, Failure> {
        let Options::Create(options) = &self.api.options else {
            return Err(ApiError::internal("a create without create options").into());
        };
        let body = match &self.api.body {
            Some(Body::Object(object)) => {
                let body = to_json(object);
                self.trial(Method::POST, JSON, body.clone(), options)
                    .await?;
                body
            }
            Some(Body::Protobuf(bytes)) => {
                let made = self
                    .trial(Method::POST, protobuf::MEDIA_TYPE, bytes.clone(), options)
                    .await?;
                to_json(&create_from_trial(made))
            }
            _ => return Err(ApiError::internal("a create without an object").into()),
        };
        let answer = self
            .exchange(
                Method::POST,
                &self.write_query(options),
                self.accept(),
                Some(JSON),
                body,
            )
            .await?;
        self.answer(answer)
    }

    /// An update, patch or delete of the object as it is, checked; tried
    /// again while its object moves on between the check and the write.
    async fn change(&self) -> Result<Response<BoxBody>, Failure> {
        let mut moved: Option<(String, Failure)> = None;
        for _ in 0..ATTEMPTS {
            let current = self.current().await?;
            // A patch kube-apiserver cannot read is refused once its object
            // is found: a missing object is not found first.
            if let Some(error) = &self.api.patch_error {
                return Err(error.clone().into());
            }
            let checked = current
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if let Some((version, refusal)) = moved.take()
                && version == checked
            {
                // It did not move: the refusal stands.
                return Err(refusal);
            }
            let attempt = match (&self.api.body, &self.api.options) {
                (Some(Body::Object(object)), Options::Update(options)) => {
                    let pinned = pin_object(object.clone(), &checked);
                    self.pinned_write(Method::PUT, JSON, pinned, &checked, options)
                        .await?
                }
                (Some(Body::Protobuf(bytes)), Options::Update(options)) => {
                    // Read by its trial alone, which cannot be pinned (a
                    // conflict there is the caller's own precondition): the
                    // write of what it made is.
                    let made = self
                        .trial(Method::PUT, protobuf::MEDIA_TYPE, bytes.clone(), options)
                        .await?;
                    let pinned = update_from_trial(made, &checked);
                    self.write(Method::PUT, JSON, &pinned, options).await?
                }
                (Some(Body::Patch(patch_type, patch)), Options::Patch(options)) => {
                    let pinned = pin_patch(*patch_type, patch.clone(), &checked);
                    self.pinned_write(
                        Method::PATCH,
                        patch_type.content_type(),
                        pinned,
                        &checked,
                        options,
                    )
                    .await?
                }
                (None, Options::Delete(options)) => {
                    self.delete(pin_delete(options.clone(), &checked), &checked)
                        .await?
                }
                _ => return Err(ApiError::internal("a claimed write without its body").into()),
            };
            match attempt {
                Attempt::Done(response) => return Ok(response),
                Attempt::Moved(refusal) => moved = Some((checked, refusal)),
            }
        }
        Err(moved.map_or_else(
            || ApiError::internal("a claimed write was not tried").into(),
            |(_, refusal)| refusal,
        ))
    }

    /// A pinned update or patch: tried, its result checked, then written.
    async fn pinned_write(
        &self,
        method: Method,
        content_type: &str,
        pinned: Pinned,
        checked: &str,
        options: &WriteOptions,
    ) -> Result<Attempt, Failure> {
        match self
            .trial(method.clone(), content_type, to_json(&pinned.body), options)
            .await
        {
            Ok(_) => {}
            Err(refusal) if pinned.pin == Pin::Checked && self.moved_on(&refusal) => {
                return Ok(Attempt::Moved(refusal));
            }
            Err(refusal) => return Err(refusal),
        }
        match &pinned.pin {
            Pin::Unpinned => {
                return Err(ApiError::internal("a write bindery cannot pin").into());
            }
            // The trial found the caller's version, not the checked one:
            // the object moved on, and the caller's version is checked next.
            Pin::Callers(version) if version != checked => {
                return Ok(Attempt::Moved(self.conflict().into()));
            }
            _ => {}
        }
        self.write(method, content_type, &pinned, options).await
    }

    /// The write itself; a conflict with bindery's own pin is the object
    /// moving on.
    async fn write(
        &self,
        method: Method,
        content_type: &str,
        pinned: &Pinned,
        options: &WriteOptions,
    ) -> Result<Attempt, Failure> {
        if pinned.pin == Pin::Unpinned {
            return Err(ApiError::internal("a write bindery cannot pin").into());
        }
        let answer = self
            .exchange(
                method,
                &self.write_query(options),
                self.accept(),
                Some(content_type),
                to_json(&pinned.body),
            )
            .await?;
        if pinned.pin == Pin::Checked {
            let refusal = self.refusal(&answer);
            if let Some(refusal) = refusal.filter(|r| self.moved_on(r)) {
                return Ok(Attempt::Moved(refusal));
            }
        }
        self.answer(answer).map(Attempt::Done)
    }

    /// A delete, pinned. A precondition of the caller's that is not the
    /// checked version is tried first: its refusal is the app cluster's.
    async fn delete(&self, pinned: Pinned, checked: &str) -> Result<Attempt, Failure> {
        match &pinned.pin {
            Pin::Unpinned => {
                return Err(ApiError::internal("a delete bindery cannot pin").into());
            }
            Pin::Callers(version) if version != checked => {
                let trial = dry_run_delete(pinned.body.clone());
                let answer = self
                    .exchange(
                        Method::DELETE,
                        &self.timeout_query(),
                        JSON.into(),
                        Some(JSON),
                        to_json(&trial),
                    )
                    .await?;
                return match self.refusal(&answer) {
                    Some(refusal) => Err(refusal),
                    None => Ok(Attempt::Moved(self.conflict().into())),
                };
            }
            _ => {}
        }
        let answer = self
            .exchange(
                Method::DELETE,
                &self.timeout_query(),
                self.accept(),
                Some(JSON),
                to_json(&pinned.body),
            )
            .await?;
        if pinned.pin == Pin::Checked
            && let Some(refusal) = self.refusal(&answer).filter(conflict)
        {
            return Ok(Attempt::Moved(refusal));
        }
        self.answer(answer).map(Attempt::Done)
    }

    /// Whether `refusal` may be the object moving on under a write pinned
    /// by bindery: a conflict, or a JSON patch's failed `test`.
    fn moved_on(&self, refusal: &Failure) -> bool {
        conflict(refusal)
            || matches!(
                (refusal, &self.api.body),
                (
                    Failure::Upstream(422, _),
                    Some(Body::Patch(PatchType::Json, _))
                )
            )
    }

    /// The named object as it is, if a claim covers it.
    async fn current(&self) -> Result<Value, Failure> {
        let read = self
            .exchange(Method::GET, "", JSON.into(), None, Vec::new())
            .await?;
        let shape = self.object_shape();
        let answer = self.store(self.view, &shape).up(&read)?;
        if answer.status != 200 {
            return Err(Failure::Upstream(answer.status, answer.value));
        }
        Ok(answer.value)
    }

    /// Sends the write with `dryRun=All`: the object it would make, if a
    /// claim covers that; an uncovered result is forbidden.
    async fn trial(
        &self,
        method: Method,
        content_type: &str,
        body: Vec<u8>,
        options: &WriteOptions,
    ) -> Result<Value, Failure> {
        let mut dry_run = options.clone();
        dry_run.dry_run = vec!["All".into()];
        let mut query = Pairs::new();
        dry_run.encode(&mut query);
        self.add_timeout(&mut query);
        let read = self
            .exchange(
                method,
                &to_query(&query),
                JSON.into(),
                Some(content_type),
                body,
            )
            .await?;
        let shape = self.object_shape();
        let answer = self.store(&CheckedApart, &shape).up(&read)?;
        if self.view.covers(&answer.value) {
            return Ok(answer.value);
        }
        let name = answer
            .value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty());
        Err(ApiError::forbidden(
            &self.request.group,
            &self.request.resource,
            name,
            "the object would not be covered by the export's accepted permission claims",
        )
        .into())
    }

    /// The app cluster's refusal in `answer`, rebuilt; `None` for a success.
    fn refusal(&self, read: &Read) -> Option<Failure> {
        if (200..300).contains(&read.status) {
            return None;
        }
        Some(
            match crate::deep::from_slice(&read.body)
                .ok()
                .and_then(|value| status_up(self.view, &value))
            {
                Some(status) => Failure::Upstream(read.status, status),
                None => unreadable(APP_CLUSTER).into(),
            },
        )
    }

    /// The write's answer, read by what the caller asked, through the
    /// claims, encoded as negotiated.
    fn answer(&self, read: Read) -> Result<Response<BoxBody>, Failure> {
        let shape = Shape::of(self.api, None, self.kind, &self.api_version());
        self.store(self.view, &shape).answer(read)
    }

    /// kube-apiserver's 409 for a write whose object moved on.
    fn conflict(&self) -> ApiError {
        ApiError::conflict(
            &self.request.group,
            &self.request.resource,
            self.request.name.as_deref().unwrap_or_default(),
        )
    }

    fn api_version(&self) -> String {
        if self.request.group.is_empty() {
            self.request.version.clone()
        } else {
            format!("{}/{}", self.request.group, self.request.version)
        }
    }

    /// An object of the resource's kind, nothing else.
    fn object_shape(&self) -> Shape {
        Shape {
            expected: Expected::Object,
            kind: self.kind.to_string(),
            api_version: self.api_version(),
            include: IncludeObject::default(),
        }
    }

    /// The caller's options, as bindery read them, and what a Table needs.
    fn write_query(&self, options: &WriteOptions) -> String {
        let mut query = Pairs::new();
        options.encode(&mut query);
        self.add_timeout(&mut query);
        query.extend(include_object(self.api));
        to_query(&query)
    }

    fn timeout_query(&self) -> String {
        let mut query = Pairs::new();
        self.add_timeout(&mut query);
        to_query(&query)
    }

    fn add_timeout(&self, query: &mut Pairs) {
        if let Some(timeout) = &self.api.timeout {
            query.push(("timeout".into(), timeout.clone()));
        }
    }

    /// What a write asks for: what the caller negotiated, in JSON.
    fn accept(&self) -> String {
        upstream_accept(self.api.output.target)
    }

    /// Sends one request to the app cluster (the named object, or the
    /// collection to create in, with `query`) and reads its whole answer.
    async fn exchange(
        &self,
        method: Method,
        query: &str,
        accept: String,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Result<Read, Failure> {
        let uri = if query.is_empty() {
            self.path.to_string()
        } else {
            format!("{}?{query}", self.path)
        };
        let mut request = http::Request::builder()
            .method(method)
            .uri(uri)
            .header(ACCEPT, accept);
        if let Some(content_type) = content_type {
            request = request.header(CONTENT_TYPE, content_type);
        }
        if let Some(agent) = self.user_agent {
            request = request.header(USER_AGENT, agent);
        }
        let request = request
            .body(Bytes::from(body))
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let shape = self.object_shape();
        self.store(self.view, &shape).exchange(request).await
    }
}

/// Whether `refusal` is the app cluster's 409.
fn conflict(refusal: &Failure) -> bool {
    matches!(refusal, Failure::Upstream(409, _))
}

fn to_json(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("a JSON value serializes")
}

fn to_query(pairs: &Pairs) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_app_clusters_words_stay_in_the_log() {
        let said = kube::core::Status::failure(
            "secrets is forbidden: User \"system:serviceaccount:team-a:deployer\" cannot list",
            "Forbidden",
        )
        .with_code(403);
        let answered = app_cluster_unreachable(kube::Error::Api(Box::new(said)));
        assert_eq!(answered.code, 503);
        assert_eq!(answered.message, "the app cluster cannot be reached");
    }
}
