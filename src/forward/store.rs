//! The one forwarding store: a request sent to an upstream (the provider,
//! or a consumer's app cluster for its claims), its answer read whole or
//! as a watch stream, checked and translated through the endpoint's scope
//! (its [`View`]), and encoded as the caller negotiated. Every endpoint
//! that serves resources answers here: one consumer's binding, every
//! consumer of an export (`*`), a consumer's claims, and kcp's bindings
//! differ only in the scope they give the store and in the request they
//! hand it.

use super::answer::{Answer, Shape, View, answer_up, event_up, unreadable, warnings_up};
use super::encode::{self, Failure};
use super::request::ApiRequest;
use super::watch::{EventTranslator, translate_stream};
use crate::sender::{BoxBody, Sender};
use crate::status::ApiError;
use bytes::Bytes;
use http::Response;
use http::header::CONTENT_TYPE;
use http_body_util::BodyExt;
use serde_json::Value;
use tokio::sync::watch as signal;

/// One request's way through the store.
pub struct Store<'a> {
    /// Where the request goes.
    pub upstream: &'a dyn Sender,
    /// The upstream's name in errors: "the provider", "the app cluster".
    pub name: &'static str,
    /// The scope: which upstream objects are the caller's, and how the
    /// caller sees them.
    pub view: &'a dyn View,
    /// What the answer must be.
    pub shape: &'a Shape,
    /// The request as bindery read it: how its answer is encoded, and the
    /// warnings bindery gives with it.
    pub request: &'a ApiRequest,
    /// What the request names: an object the caller may not see is not
    /// found, as kube-apiserver answers for an object that is not there.
    pub named: Named<'a>,
}

/// The object a request names (its name empty for a collection).
#[derive(Clone, Copy)]
pub struct Named<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    pub name: &'a str,
}

impl Named<'_> {
    /// kube-apiserver's 404 for it.
    pub fn not_found(&self) -> ApiError {
        ApiError::object_not_found(self.group, self.resource, self.name)
    }
}

/// An upstream's answer, read whole.
pub struct Read {
    pub status: u16,
    pub body: Bytes,
    /// The upstream's warnings, in the caller's terms.
    pub warnings: Vec<String>,
}

impl Store<'_> {
    /// Sends `request` to the upstream; one that cannot be reached is
    /// kube-apiserver aggregator's 503.
    pub async fn send(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<BoxBody>, Failure> {
        self.upstream
            .send(request)
            .await
            .map_err(|e| unreachable(self.name, e).into())
    }

    /// Sends `request` and reads its whole answer.
    pub async fn exchange(&self, request: http::Request<Bytes>) -> Result<Read, Failure> {
        let response = self.send(request).await?;
        self.read(response).await
    }

    /// `response` read whole. A success must be JSON; an error may come as
    /// text that is a Status (kube-apiserver's timeout filter writes its
    /// 504 so), and is read as one or refused.
    pub async fn read(&self, response: http::Response<BoxBody>) -> Result<Read, Failure> {
        let status = response.status();
        let warnings = warnings_up(self.view, response.headers());
        let json = is_json(response.headers()) || !status.is_success();
        let body = read_body(response, self.name).await?;
        if !json {
            return Err(self.unreadable());
        }
        Ok(Read {
            status: status.as_u16(),
            body,
            warnings,
        })
    }

    /// `read` in the caller's terms: a success as what was asked for, a
    /// refusal as the upstream's Status rebuilt ([`Failure::Upstream`]).
    pub fn up(&self, read: &Read) -> Result<Answer, Failure> {
        let answer = answer_up(self.view, self.shape, read.status, &read.body)
            .map_err(|refused| refused.to_error(self.name, || self.named.not_found()))?;
        if !(200..300).contains(&answer.status) {
            return Err(Failure::Upstream(answer.status, answer.value));
        }
        Ok(answer)
    }

    /// `read` translated and encoded.
    pub fn answer(&self, read: Read) -> Result<Response<BoxBody>, Failure> {
        let answer = self.up(&read)?;
        self.respond(answer.status, &answer.value, read.warnings)
    }

    /// `response` read whole, translated and encoded.
    pub async fn answered(
        &self,
        response: http::Response<BoxBody>,
    ) -> Result<Response<BoxBody>, Failure> {
        let read = self.read(response).await?;
        self.answer(read)
    }

    /// `value`, an answer in the caller's terms, encoded as negotiated with
    /// bindery's warnings and the upstream's. A Table whose options
    /// kube-apiserver would refuse once it has an answer is refused here.
    pub fn respond(
        &self,
        status: u16,
        value: &Value,
        warnings: Vec<String>,
    ) -> Result<Response<BoxBody>, Failure> {
        if let Err(error) = &self.request.table {
            return Err(error.clone().into());
        }
        let output = self.request.output;
        let (content_type, bytes) = encode::encode(value, output.media, self.request.pretty)
            .map_err(|e| e.to_error(|| unreadable(self.name)))?;
        let mut response = encode::full(status, content_type, bytes);
        encode::add_warnings(&mut response, &self.all_warnings(warnings));
        Ok(response)
    }

    /// A body already in the caller's terms (the watch cache's consumer
    /// form, JSON): as it is when JSON was asked for, else decoded to be
    /// encoded as asked.
    pub fn translated(
        &self,
        status: u16,
        json: &[u8],
        warnings: Vec<String>,
    ) -> Result<Response<BoxBody>, Failure> {
        let output = self.request.output;
        if output.media != crate::wire::accept::Media::Json || self.request.pretty {
            let value: Value = crate::deep::from_slice(json).map_err(|_| self.unreadable())?;
            return self.respond(status, &value, warnings);
        }
        if let Err(error) = &self.request.table {
            return Err(error.clone().into());
        }
        let mut response = encode::full(status, "application/json", Bytes::copy_from_slice(json));
        encode::add_warnings(&mut response, &self.all_warnings(warnings));
        Ok(response)
    }

    /// A watch's answer: a refusal read whole and answered; a stream of
    /// JSON events, each made by `each` into what the caller gets (the
    /// scope's events, encoded as negotiated), until the upstream ends it,
    /// the caller goes, or bindery shuts down.
    pub async fn watch(
        &self,
        response: http::Response<BoxBody>,
        each: EventTranslator,
        shutdown: signal::Receiver<bool>,
    ) -> Result<Response<BoxBody>, Failure> {
        let status = response.status();
        if !status.is_success() {
            return self.answered(response).await;
        }
        if !is_json(response.headers()) {
            return Err(self.unreadable());
        }
        if let Err(error) = &self.request.table {
            return Err(error.clone().into());
        }
        let media = self.request.output.media;
        let body = translate_stream(response.into_body(), each, shutdown);
        Ok(encode::watch_response(status, body, media))
    }

    /// bindery's own warnings (of the request), then the upstream's.
    fn all_warnings(&self, upstream: Vec<String>) -> Vec<String> {
        let mut all = self.request.warnings.clone();
        all.extend(upstream);
        all
    }

    /// The error for an answer bindery cannot read.
    pub fn unreadable(&self) -> Failure {
        Failure::Api(unreadable(self.name))
    }
}

/// One upstream watch event as the caller gets it through `view`: read by
/// `shape`, encoded in `media`; `None` drops it.
pub fn event(
    view: &dyn View,
    shape: &Shape,
    event: Value,
    media: crate::wire::accept::Media,
) -> Option<Bytes> {
    encode::event(&event_up(view, shape, event)?, media)
}

/// Whether an upstream answer says it is JSON.
pub fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .is_some_and(|ct| ct.as_bytes().starts_with(b"application/json"))
}

/// `response`'s whole body; one that breaks off is `name`'s 503.
pub async fn read_body(response: http::Response<BoxBody>, name: &str) -> Result<Bytes, Failure> {
    response
        .into_body()
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .map_err(|error| {
            tracing::warn!(%error, upstream = name, "an answer broke off");
            ApiError::unavailable(format!("{name}'s answer broke off")).into()
        })
}

/// `name` could not be reached: kube-apiserver aggregator's 503. The
/// transport's error is logged, not sent: its text names the upstream's
/// address, which is not the caller's to see.
pub fn unreachable(name: &str, error: impl std::fmt::Display) -> ApiError {
    tracing::warn!(%error, upstream = name, "cannot be reached");
    ApiError::unavailable(format!("{name} cannot be reached"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forward::answer::{Expected, Visibility};
    use crate::forward::request::Options;
    use crate::route::Verb;
    use crate::sender::Sent;
    use crate::wire::accept::{Media, Output, Target};
    use crate::wire::query::IncludeObject;
    use http_body_util::Full;
    use serde_json::json;

    /// Objects labelled `owner: me`, in namespace `p-ns` upstream and `ns`
    /// for the caller.
    struct Mine;

    impl View for Mine {
        fn object_up(&self, object: &mut Value) -> crate::forward::answer::Visibility {
            if object.pointer("/metadata/labels/owner") != Some(&json!("me")) {
                return Visibility::Hidden;
            }
            object["metadata"]["namespace"] = json!("ns");
            Visibility::Visible
        }
        fn scale_up(&self, _scale: &mut Value) -> Visibility {
            Visibility::Hidden
        }
        fn text_up(&self, text: &str) -> String {
            text.replace("p-ns", "ns")
        }
        fn continue_up(&self, token: &str) -> String {
            token.to_string()
        }
    }

    /// An upstream that answers every request with one scripted answer, or
    /// cannot be reached.
    struct Scripted(Option<Answered>);

    /// A status, a body and headers.
    type Answered = (u16, &'static str, Vec<(&'static str, &'static str)>);

    impl Sender for Scripted {
        fn send(&self, _request: http::Request<Bytes>) -> Sent<'_> {
            let answer = self.0.clone();
            Box::pin(async move {
                let (status, body, headers) =
                    answer.ok_or("tcp connect error: 10.96.0.1:6443: connection refused")?;
                let mut response = http::Response::new(
                    Full::new(Bytes::from(body))
                        .map_err(|never| match never {})
                        .boxed_unsync(),
                );
                *response.status_mut() = http::StatusCode::from_u16(status)?;
                for (name, value) in headers {
                    response
                        .headers_mut()
                        .append(name, http::HeaderValue::from_static(value));
                }
                Ok(response)
            })
        }
    }

    fn get(warnings: Vec<String>, table: Result<(), ApiError>) -> ApiRequest {
        ApiRequest {
            verb: Verb::Get,
            options: Options::Get(Default::default()),
            output: Output {
                media: Media::Json,
                target: Target::Resource,
                pretty: false,
            },
            pretty: false,
            table: table.map(|()| Default::default()),
            body: None,
            patch_error: None,
            timeout: None,
            warnings,
        }
    }

    fn shape() -> Shape {
        Shape {
            expected: Expected::Object,
            kind: "Widget".into(),
            api_version: "g/v1".into(),
            include: IncludeObject::default(),
        }
    }

    /// The store for widget `w` of the caller's, from `upstream`.
    fn widgets<'a>(upstream: &'a Scripted, shape: &'a Shape, request: &'a ApiRequest) -> Store<'a> {
        Store {
            upstream,
            name: "the provider",
            view: &Mine,
            shape,
            request,
            named: Named {
                group: "g",
                resource: "widgets",
                name: "w",
            },
        }
    }

    /// What `request` is answered when the upstream answers `scripted`.
    async fn answered(
        scripted: Scripted,
        request: &ApiRequest,
    ) -> Result<Response<BoxBody>, Failure> {
        let shape = shape();
        let store = widgets(&scripted, &shape, request);
        store
            .exchange(http::Request::new(Bytes::new()))
            .await
            .and_then(|read| store.answer(read))
    }

    const JSON_TYPE: (&str, &str) = ("content-type", "application/json");
    const MINE: &str = r#"{"kind":"Widget","apiVersion":"g/v1","metadata":{"name":"w","namespace":"p-ns","labels":{"owner":"me"}}}"#;
    const THEIRS: &str = r#"{"kind":"Widget","apiVersion":"g/v1","metadata":{"name":"w","namespace":"p-ns","labels":{"owner":"them"}}}"#;

    fn api_error(failure: Result<Response<BoxBody>, Failure>) -> ApiError {
        match failure {
            Err(Failure::Api(error)) => error,
            Err(Failure::Upstream(code, status)) => panic!("the upstream's {code}: {status}"),
            Ok(response) => panic!("answered {}", response.status()),
        }
    }

    #[tokio::test]
    async fn the_callers_object_is_answered_in_its_terms_with_every_warning() {
        let scripted = Scripted(Some((
            200,
            MINE,
            vec![JSON_TYPE, ("warning", "299 - \"deprecated in p-ns\"")],
        )));
        let request = get(vec!["duplicate field \"x\"".into()], Ok(()));
        let response = answered(scripted, &request).await.expect("answered");
        let warnings: Vec<&str> = response
            .headers()
            .get_all("warning")
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(
            warnings,
            [
                "299 - \"duplicate field \\\"x\\\"\"",
                "299 - \"deprecated in ns\""
            ],
            "bindery's own first, then the upstream's in the caller's terms"
        );
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let object: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(object["metadata"]["namespace"], "ns");
    }

    #[tokio::test]
    async fn another_callers_object_is_the_named_objects_404() {
        let scripted = Scripted(Some((200, THEIRS, vec![JSON_TYPE])));
        let error = api_error(answered(scripted, &get(vec![], Ok(()))).await);
        assert_eq!(error.code, 404);
        assert_eq!(error.message, "widgets.g \"w\" not found");
    }

    #[tokio::test]
    async fn a_success_that_is_not_json_is_refused_naming_nothing_of_it() {
        let scripted = Scripted(Some((200, MINE, vec![("content-type", "text/plain")])));
        let error = api_error(answered(scripted, &get(vec![], Ok(()))).await);
        assert_eq!(error.code, 500);
        assert_eq!(
            error.message,
            "Internal error occurred: the provider's answer could not be read"
        );
    }

    #[tokio::test]
    async fn a_refusal_in_text_is_read_as_its_status_and_comes_before_a_table_error() {
        let status = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"timed out in p-ns","reason":"Timeout","code":504}"#;
        let scripted = Scripted(Some((504, status, vec![("content-type", "text/plain")])));
        let request = get(vec![], Err(ApiError::bad_request("bad includeObject")));
        match answered(scripted, &request).await {
            Err(Failure::Upstream(504, status)) => {
                assert_eq!(status["message"], "timed out in ns");
            }
            other => panic!("not the upstream's 504: {:?}", other.map(|r| r.status())),
        }
        // The same Table options, once the answer succeeded.
        let scripted = Scripted(Some((200, MINE, vec![JSON_TYPE])));
        let error = api_error(answered(scripted, &request).await);
        assert_eq!(error.message, "bad includeObject");
    }

    #[tokio::test]
    async fn an_upstream_that_cannot_be_reached_is_a_503_naming_only_it() {
        let error = api_error(answered(Scripted(None), &get(vec![], Ok(()))).await);
        assert_eq!(error.code, 503);
        assert_eq!(
            error.message, "the provider cannot be reached",
            "the transport's error (the upstream's address) is not the caller's"
        );
    }

    #[tokio::test]
    async fn a_watch_streams_only_what_its_scope_makes_of_each_event() {
        let events = format!(
            "{{\"type\":\"ADDED\",\"object\":{MINE}}}\nnot json\n{{\"type\":\"ADDED\",\"object\":{THEIRS}}}\n"
        );
        let events: &'static str = Box::leak(events.into_boxed_str());
        let scripted = Scripted(Some((200, events, vec![JSON_TYPE])));
        let mut request = get(vec![], Ok(()));
        request.verb = Verb::Watch;
        let shape = shape();
        let store = widgets(&scripted, &shape, &request);
        let response = store.send(http::Request::new(Bytes::new())).await.unwrap();
        let (_stop, shutdown) = signal::channel(false);
        let each = Box::new(event_made);
        let response = store
            .watch(response, each, shutdown)
            .await
            .expect("a stream");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let lines: Vec<Value> = body
            .split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .map(|line| serde_json::from_slice(line).unwrap())
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "the other caller's event and the line that is not JSON are dropped: {lines:?}"
        );
        assert_eq!(lines[0]["object"]["metadata"]["namespace"], "ns");
    }

    fn event_made(each: Value) -> Option<Bytes> {
        event(&Mine, &shape(), each, Media::Json)
    }
}
