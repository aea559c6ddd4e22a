//! Writes to a consumer's claimed objects through its workspace path:
//! create, update, patch and delete, each checked against the accepted
//! claims in both directions. The object as it is must be covered (else it
//! is not found, as on a get), and the object as it will be must be covered
//! too (else the write is forbidden), so that a provider controller can
//! neither reach nor make an object outside the claims. The checked
//! resourceVersion goes with the write ([`crate::translate::claimed_writes`]).
//! Creates, updates and patches are tried with `dryRun=All` first, to see
//! what they make: the app cluster decodes bodies bindery cannot (protobuf,
//! which kubectl sends for built-in kinds) and applies its defaults.

use super::claimed::UpstreamPaths;
use super::respond::{Filter, filtered, upstream_request};
use crate::proxy::full;
use crate::route::{ResourceRequest, Verb};
use crate::status::ApiError;
use crate::translate::claimed::ClaimedView;
use crate::translate::claimed_writes::{pin_delete, pin_patch, pin_update};
use crate::upstream::{BoxBody, KubeUpstream, Upstream};
use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{Method, Response};
use http_body_util::BodyExt;
use serde_json::Value;

const JSON: &str = "application/json";

/// One write on a claimed resource.
pub struct Write<'a> {
    pub client: &'a kube::Client,
    pub view: &'a ClaimedView,
    pub request: &'a ResourceRequest,
    pub verb: Verb,
    pub paths: &'a UpstreamPaths,
}

/// What the app cluster answered: the status and the decoded body.
struct Answer {
    status: http::StatusCode,
    body: Value,
}

impl Write<'_> {
    pub async fn send(
        &self,
        parts: &http::request::Parts,
        body: Bytes,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Result<Response<BoxBody>, ApiError> {
        let content_type = parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or(JSON)
            .to_string();
        let (method, content_type, body) = match self.verb {
            Verb::Create => {
                // What the create makes, defaults and all; the body may be
                // protobuf, which only the app cluster reads.
                if let Err(answer) = self
                    .trial(Method::POST, &content_type, body.clone())
                    .await?
                {
                    return Ok(answer);
                }
                (Method::POST, content_type, body)
            }
            Verb::Update => {
                let version = match self.current().await? {
                    Ok(version) => version,
                    Err(answer) => return Ok(answer),
                };
                let made = match self.trial(Method::PUT, &content_type, body.clone()).await? {
                    Ok(made) => made,
                    Err(answer) => return Ok(answer),
                };
                // Pinned: the caller's JSON or YAML as given, any other
                // encoding as the JSON of what the trial made.
                let object = self.decode_object(&content_type, &body).unwrap_or(made);
                let pinned = pin_update(object, &version);
                (Method::PUT, JSON.to_string(), to_bytes(&pinned))
            }
            Verb::Patch => {
                let version = match self.current().await? {
                    Ok(version) => version,
                    Err(answer) => return Ok(answer),
                };
                let pinned =
                    pin_patch(&content_type, &body, &version).map_err(ApiError::bad_request)?;
                if let Err(answer) = self
                    .trial(Method::PATCH, &content_type, pinned.clone().into())
                    .await?
                {
                    return Ok(answer);
                }
                (Method::PATCH, content_type, Bytes::from(pinned))
            }
            Verb::Delete => {
                let version = match self.current().await? {
                    Ok(version) => version,
                    Err(answer) => return Ok(answer),
                };
                match pin_delete(&body, &version) {
                    Ok(pinned) => (Method::DELETE, JSON.to_string(), Bytes::from(pinned)),
                    // Protobuf DeleteOptions (typed clients): checked, not
                    // pinned.
                    Err(_) if !content_type.contains("json") && !body.is_empty() => {
                        (Method::DELETE, content_type, body)
                    }
                    Err(e) => return Err(ApiError::bad_request(e)),
                }
            }
            _ => {
                return Err(ApiError::method_not_allowed(
                    parts.method.as_str(),
                    &self.request.group,
                    &self.request.resource,
                ));
            }
        };
        let uri = self.paths.target_with_query(&[]);
        let (upstream, to_yaml) = upstream_request(
            method,
            &uri,
            &parts.headers,
            false,
            Some((&content_type, body)),
        )?;
        let response = KubeUpstream::new(self.client.clone())
            .send(upstream)
            .await
            .map_err(unreachable)?;
        let filter = Filter {
            watch: None,
            // What the write made goes back only if a claim covers it (the
            // trial said it would); a Status is the app cluster's answer.
            rewrite: |made: &mut Value| {
                if made.get("kind").and_then(Value::as_str) == Some("Status")
                    || self.view.covers(made)
                {
                    Ok(())
                } else {
                    Err(self.not_found())
                }
            },
            to_yaml,
            upstream: "the app cluster",
        };
        filtered(response, filter, shutdown).await
    }

    /// The resourceVersion of the named object as it is, if a claim covers
    /// it; `Err(answer)`: the app cluster's answer to pass on (not found).
    async fn current(&self) -> Result<Result<String, Response<BoxBody>>, ApiError> {
        let answer = self
            .exchange(Method::GET, &self.paths.target, JSON, Bytes::new())
            .await?;
        if !answer.status.is_success() {
            return Ok(Err(answered(answer)));
        }
        if !self.view.covers(&answer.body) {
            return Err(self.not_found());
        }
        let version = answer.body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Ok(Ok(version))
    }

    /// Sends the write with `dryRun=All`: `Ok` with the object it would
    /// make, if a claim covers that; `Err(answer)`: the app cluster's refusal
    /// to pass on. An uncovered result is forbidden.
    async fn trial(
        &self,
        method: Method,
        content_type: &str,
        body: Bytes,
    ) -> Result<Result<Value, Response<BoxBody>>, ApiError> {
        let uri = self.paths.target_with_query(&[("dryRun", "All")]);
        let trial = self.exchange(method, &uri, content_type, body).await?;
        if !trial.status.is_success() {
            return Ok(Err(answered(trial)));
        }
        if self.view.covers(&trial.body) {
            return Ok(Ok(trial.body));
        }
        let name = trial.body["metadata"]["name"]
            .as_str()
            .filter(|n| !n.is_empty());
        Err(ApiError::forbidden(
            &self.request.group,
            &self.request.resource,
            name,
            "the object would not be covered by the export's accepted permission claims",
        ))
    }

    /// The caller's body, if it is JSON or YAML (not protobuf).
    fn decode_object(&self, content_type: &str, body: &[u8]) -> Option<Value> {
        let decoded: Option<Value> = if content_type.contains("yaml") {
            serde_yaml::from_slice(body).ok()
        } else if content_type.contains("json") {
            serde_json::from_slice(body).ok()
        } else {
            None
        };
        decoded.filter(Value::is_object)
    }

    fn not_found(&self) -> ApiError {
        ApiError::object_not_found(
            &self.request.group,
            &self.request.resource,
            self.request.name.as_deref().unwrap_or_default(),
        )
    }

    /// Sends one request to the app cluster and reads the whole answer.
    async fn exchange(
        &self,
        method: Method,
        uri: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<Answer, ApiError> {
        let request = http::Request::builder()
            .method(method)
            .uri(uri)
            .header(http::header::ACCEPT, JSON)
            .header(CONTENT_TYPE, content_type)
            .body(body)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let response = KubeUpstream::new(self.client.clone())
            .send(request)
            .await
            .map_err(unreachable)?;
        let (head, body) = response.into_parts();
        let bytes = body
            .collect()
            .await
            .map_err(|e| ApiError::unavailable(format!("reading the app cluster's answer: {e}")))?
            .to_bytes();
        let body = serde_json::from_slice(&bytes)
            .map_err(|_| ApiError::internal("the app cluster's answer is not JSON"))?;
        Ok(Answer {
            status: head.status,
            body,
        })
    }
}

/// The app cluster's answer, passed on as it is.
fn answered(answer: Answer) -> Response<BoxBody> {
    full(answer.status.as_u16(), JSON, to_bytes(&answer.body))
}

fn to_bytes(value: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(value).unwrap_or_default())
}

fn unreachable(e: impl std::fmt::Display) -> ApiError {
    ApiError::unavailable(format!("the app cluster cannot be reached: {e}"))
}
