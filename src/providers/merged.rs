//! Reads that ask every provider, answered as one (the I/O around
//! [`super::merge`] and [`super::pages`]): a list or deletecollection, a
//! page of a list, a watch; and a watch of one namespace ended when the
//! namespace changes provider.

use super::answers::{passed_back, read_list};
use super::merge::{self, Watches};
use super::requests::{
    ListQuery, is_json, json_accept, negotiated_list, query_value, rewritten_query,
};
use super::router::{Ownership, Router};
use super::version::{Asked, Versions};
use crate::status::ApiError;
use crate::upstream::{BoxBody, BoxError};
use crate::wire::accept::Output;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http::header::CONTENT_TYPE;
use http::{Method, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use serde_json::Value;

impl Router {
    /// A list (or a deletecollection) across namespaces: every provider's,
    /// whole, joined into one at the merged resourceVersion; with a limit
    /// (but at any version, `0`, where kube-apiserver's watch cache ignores
    /// it) or a continue token, one page of it ([`Router::merged_page`]).
    pub(super) async fn merged_list(
        &self,
        parts: &http::request::Parts,
        body: Bytes,
    ) -> Result<Response<BoxBody>, ApiError> {
        let providers = self.routes.len();
        let query = ListQuery::of(parts.uri.query().unwrap_or_default());
        // At any version kube-apiserver's watch cache answers the whole list
        // whatever the limit; so does the router.
        let any_version = query.resource_version == "0";
        let paged = !query.continue_token.is_empty() || (query.limit.is_some() && !any_version);
        if parts.method == Method::GET && paged {
            return self.merged_page(parts, &query).await;
        }
        let asked = Asked::for_list(&query.resource_version, &query.matching, providers)?;
        let (headers, output) = negotiated_list(&parts.headers)?;
        let requests = (0..providers).map(|index| {
            let query = rewritten_query(&query.asked, |key, value| match key {
                "resourceVersion" => Some(asked.of(index).to_string()),
                // The most recent state: no version, and so no match.
                "resourceVersionMatch" if asked.of(index).is_empty() => None,
                "limit" | "continue" => None,
                _ => Some(value.to_string()),
            });
            let request = self.request(parts, Some(&query), &headers, body.clone());
            async move { self.send(index, request?).await }
        });
        let answers = futures::future::join_all(requests).await;
        let mut lists = Vec::with_capacity(providers);
        let mut versions = Versions::all("0", providers);
        for (index, answer) in answers.into_iter().enumerate() {
            let answer = answer?;
            if answer.status() != StatusCode::OK {
                return Ok(passed_back(answer));
            }
            let list = read_list(answer).await?;
            versions.advance(
                index,
                list["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default(),
            );
            lists.push(list);
        }
        let ownership = &self.ownership;
        let mut merged = merge::lists(lists, &versions, &|index, metadata| {
            ownership.shows(index, metadata)
        })?;
        if query.no_row_objects {
            merge::without_row_objects(&mut merged);
        }
        answer(&merged, output)
    }

    /// One page of a list across namespaces ([`super::pages`]): each
    /// provider asked for its next entries from its cursor, at the first
    /// page's versions, and the first `limit` of them all given, with a
    /// token for the rest.
    pub(super) async fn merged_page(
        &self,
        parts: &http::request::Parts,
        query: &ListQuery,
    ) -> Result<Response<BoxBody>, ApiError> {
        use super::pages::{Continue, Read, first, next_cursors, read, start_of};
        let providers = self.routes.len();
        let (headers, output) = negotiated_list(&parts.headers)?;
        let limit = query.limit.unwrap_or(usize::MAX);
        let (mut cursors, start) = start_of(
            &query.continue_token,
            (&query.resource_version, &query.matching),
            providers,
        )?;
        let answers = match self
            .page_answers(parts, &query.asked, &headers, &mut cursors, (&start, limit))
            .await
        {
            Ok(answers) => answers,
            Err(stop) => return stop.into(),
        };
        let Read {
            envelope,
            field,
            tagged,
            batches,
            versions,
        } = read(answers, &cursors, &start)?;
        let more: Vec<bool> = batches
            .iter()
            .map(|batch| batch.as_ref().is_some_and(|b| b.next.is_some()))
            .collect();
        let ownership = &self.ownership;
        let (page, taken) = first(
            tagged,
            limit,
            &more,
            |entry| merge::key_of(entry, field),
            |index, entry| {
                merge::is_owned(entry, field, index, &|i, metadata| {
                    ownership.shows(i, metadata)
                })
            },
        );
        // kube-apiserver counts what remains of a list that selects nothing.
        let remaining = super::pages::remaining(&batches, &taken).filter(|_| !query.selects);
        let cursors = next_cursors(&cursors, &batches, &taken);
        let next = (!cursors.iter().all(|c| c.done)).then(|| {
            Continue {
                version: versions.text(),
                cursors,
            }
            .encode()
        });
        let envelope = envelope.unwrap_or_else(
            || serde_json::json!({"kind": "List", "apiVersion": "v1", "items": []}),
        );
        let mut merged = merge::page(envelope, field, page, &versions, (next, remaining));
        if query.no_row_objects {
            merge::without_row_objects(&mut merged);
        }
        answer(&merged, output)
    }

    /// Each provider's answer to a page of `limit` from its cursor (`None`:
    /// its cursor is done), asked with the query `raw`
    /// ([`ListQuery::asked`]); a cursor far into its entries first moved to
    /// a token past them.
    async fn page_answers(
        &self,
        parts: &http::request::Parts,
        raw: &str,
        headers: &http::HeaderMap,
        cursors: &mut [super::pages::Cursor],
        (start, limit): (&super::pages::Start, usize),
    ) -> Result<Vec<Option<Value>>, Stop> {
        use super::pages::{past, query_for};
        let ask = |index: usize, query: String| {
            let request = self.request(parts, Some(&query), headers, Bytes::new());
            async move {
                let answer = self.send(index, request?).await?;
                if answer.status() != StatusCode::OK {
                    return Err(Stop::Answered(passed_back(answer)));
                }
                Ok(read_list(answer).await?)
            }
        };
        for (index, cursor) in cursors.iter_mut().enumerate() {
            if cursor.needs_token(limit) {
                let query = query_for(raw, index, cursor, start, Some(cursor.skip));
                let list = ask(index, query).await?;
                *cursor = past(cursor, list["metadata"]["continue"].as_str());
            }
        }
        let asks = cursors.iter().enumerate().map(|(index, cursor)| {
            let count = Some(cursor.skip.saturating_add(limit));
            let query = (!cursor.done).then(|| query_for(raw, index, cursor, start, count));
            async move {
                match query {
                    Some(query) => ask(index, query).await.map(Some),
                    None => Ok(None),
                }
            }
        });
        futures::future::join_all(asks).await.into_iter().collect()
    }

    /// A watch across namespaces: every provider's watch, from its own
    /// version, interleaved into one stream ([`Watches`]). The stream ends
    /// when any provider's does (the client resumes from the last version
    /// it was given), or at an error event.
    pub(super) async fn merged_watch(
        &self,
        parts: &http::request::Parts,
    ) -> Result<Response<BoxBody>, ApiError> {
        let providers = self.routes.len();
        let raw = parts.uri.query().unwrap_or_default();
        let asked = Asked::parse(&query_value(raw, "resourceVersion"), providers)?;
        let initial_events = query_value(raw, "sendInitialEvents") == "true";
        let headers = json_accept(&parts.headers)?;
        let requests = (0..providers).map(|index| {
            let query = rewritten_query(raw, |key, value| match key {
                "resourceVersion" => Some(asked.of(index).to_string()),
                _ => Some(value.to_string()),
            });
            let request = self.request(parts, Some(&query), &headers, Bytes::new());
            async move { self.send(index, request?).await }
        });
        let answers = futures::future::join_all(requests).await;
        let mut streams = Vec::with_capacity(providers);
        for answer in answers {
            let answer = answer?;
            if answer.status() != StatusCode::OK {
                return Ok(passed_back(answer));
            }
            if !is_json(answer.headers()) {
                return Err(crate::forward::answer::unreadable("a provider"));
            }
            streams.push(answer.into_body());
        }
        let start = match &asked {
            Asked::Exact(versions) => versions.clone(),
            _ => Versions::all("0", providers),
        };
        let watches = Watches::new(start, providers, initial_events);
        let body = interleaved(streams, watches, self.ownership.clone());
        Ok(crate::forward::encode::watch_response(
            StatusCode::OK,
            body,
            crate::wire::accept::Media::Json,
        ))
    }

    /// A watch of one namespace at provider `index`, as it came, ended with
    /// kube-apiserver's 410 once the namespace belongs to another provider
    /// (its objects are then the other provider's, and the versions too).
    pub(super) fn ended_when_moved(
        &self,
        response: Response<BoxBody>,
        namespace: &str,
        index: usize,
    ) -> Response<BoxBody> {
        let (head, mut upstream) = response.into_parts();
        let media = match head.headers.get(CONTENT_TYPE) {
            Some(ct)
                if ct
                    .as_bytes()
                    .starts_with(b"application/vnd.kubernetes.protobuf") =>
            {
                crate::wire::accept::Media::Protobuf
            }
            _ => crate::wire::accept::Media::Json,
        };
        let ownership = self.ownership.clone();
        let namespace = namespace.to_string();
        let (mut tx, rx) = futures::channel::mpsc::channel::<Bytes>(64);
        tokio::spawn(async move {
            let mut moved = ownership.moved.clone();
            moved.mark_unchanged();
            loop {
                tokio::select! {
                    frame = upstream.frame() => {
                        let Some(Ok(frame)) = frame else { break };
                        let Ok(data) = frame.into_data() else { continue };
                        if tx.send(data).await.is_err() {
                            break;
                        }
                    }
                    _ = moved.changed() => {
                        if !ownership.owns(index, &namespace) {
                            let _ = tx.send(gone(media)).await;
                            break;
                        }
                    }
                }
            }
        });
        let body =
            StreamBody::new(rx.map(|bytes| Ok::<_, BoxError>(hyper::body::Frame::data(bytes))))
                .boxed_unsync();
        Response::from_parts(head, body)
    }
}

/// The providers' watch `streams` as one, each event through `watches`,
/// ended with kube-apiserver's 410 when a namespace changes provider (what
/// the client holds of it is then another provider's: it lists again).
fn interleaved(
    streams: Vec<kube::client::Body>,
    mut watches: Watches,
    ownership: Ownership,
) -> BoxBody {
    let (events_tx, mut events) = tokio::sync::mpsc::channel::<(usize, Option<Value>)>(64);
    let mut readers = tokio::task::JoinSet::new();
    for (index, mut stream) in streams.into_iter().enumerate() {
        let events_tx = events_tx.clone();
        readers.spawn(async move {
            let mut pending = bytes::BytesMut::new();
            while let Some(Ok(frame)) = stream.frame().await {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                for line in crate::forward::watch::complete_lines(&mut pending, &data) {
                    let Some(event) = crate::forward::watch::event_of(&line) else {
                        continue;
                    };
                    if events_tx.send((index, Some(event))).await.is_err() {
                        return;
                    }
                }
            }
            let _ = events_tx.send((index, None)).await;
        });
    }
    drop(events_tx);
    let (mut tx, rx) = futures::channel::mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        // The readers end with this task: when a provider's stream ends,
        // or the client goes away.
        let _readers = readers;
        let mut moved = ownership.moved.clone();
        moved.mark_unchanged();
        loop {
            let (index, event) = tokio::select! {
                next = events.recv() => match next {
                    Some((index, Some(event))) => (index, event),
                    _ => break,
                },
                _ = moved.changed() => {
                    let _ = tx.send(gone(crate::wire::accept::Media::Json)).await;
                    break;
                }
            };
            let error = event["type"] == "ERROR";
            let owns = |index: usize, metadata: &Value| ownership.shows(index, metadata);
            let Some(out) = watches.event(index, event, &owns) else {
                continue;
            };
            let Some(line) = crate::forward::encode::event(&out, crate::wire::accept::Media::Json)
            else {
                continue;
            };
            if tx.send(line).await.is_err() || error {
                break;
            }
        }
    });
    StreamBody::new(rx.map(|bytes| Ok::<_, BoxError>(hyper::body::Frame::data(bytes))))
        .boxed_unsync()
}

/// kube-apiserver's 410 `Expired` watch event, in `media`: the namespaces
/// a watch covers changed provider.
fn gone(media: crate::wire::accept::Media) -> Bytes {
    let event = serde_json::json!({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "reason": "Expired", "code": 410,
        "message": "a namespace moved to another provider: list again",
    }});
    crate::forward::encode::event(&event, media).unwrap_or_default()
}

/// Why a merged page stops early: a provider's answer that is not a list
/// (passed back as it came), or an error of the router's.
enum Stop {
    Answered(Response<BoxBody>),
    Failed(ApiError),
}

impl From<ApiError> for Stop {
    fn from(error: ApiError) -> Self {
        Stop::Failed(error)
    }
}

impl From<Stop> for Result<Response<BoxBody>, ApiError> {
    fn from(stop: Stop) -> Self {
        match stop {
            Stop::Answered(answer) => Ok(answer),
            Stop::Failed(error) => Err(error),
        }
    }
}

/// `value` as a 200 answer in the form `output` negotiated.
fn answer(value: &Value, output: Output) -> Result<Response<BoxBody>, ApiError> {
    let (content_type, bytes) = crate::forward::encode::encode(value, output.media, output.pretty)
        .map_err(|unencoded| {
            unencoded.to_error(|| ApiError::internal("the merged list has no such form"))
        })?;
    Ok(crate::forward::encode::full(200, content_type, bytes))
}
