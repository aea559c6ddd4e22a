//! Watch streams in the caller's terms: the upstream's newline-delimited
//! JSON events are decoded one by one as they arrive and handed to a
//! translator, which answers with the bytes the caller gets for each (a
//! JSON line, a protobuf frame) or drops it. A line that is not JSON is
//! dropped: nothing bindery cannot read is passed on. The stream ends when
//! the upstream ends it, the client goes away, or bindery shuts down.

use crate::sender::{BoxBody, BoxError};
use crate::wire::accept::MetaVersion;
use crate::wire::object_meta;
use bytes::{Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tokio::sync::watch as signal;

/// One decoded event into the bytes the caller gets for it; `None` drops it.
pub type EventTranslator = Box<dyn FnMut(serde_json::Value) -> Option<Bytes> + Send>;

/// A translator that rewrites each event in place and sends it as a JSON
/// line.
pub fn json_lines(
    mut rewrite: impl FnMut(&mut serde_json::Value) -> Option<()> + Send + 'static,
) -> EventTranslator {
    Box::new(move |mut event| {
        rewrite(&mut event)?;
        let mut line = serde_json::to_vec(&event).ok()?;
        line.push(b'\n');
        Some(Bytes::from(line))
    })
}

/// A whole object's watch event as a metadata watch has it: the object
/// (of an object event or a bookmark) becomes a `PartialObjectMetadata`
/// of `meta`'s version with the object's metadata, its fields in
/// `ObjectMeta`'s order as kube-apiserver writes them. An error's Status,
/// or an object already partial, is left as it is.
pub fn cut_to_metadata(event: &mut serde_json::Value, meta: MetaVersion) {
    let object = &mut event["object"];
    if !object.is_object() || object["kind"] == "Status" {
        return;
    }
    let metadata = object
        .get_mut("metadata")
        .map(serde_json::Value::take)
        .unwrap_or(serde_json::Value::Null);
    let metadata = object_meta::in_struct_order(&metadata.to_string())
        .and_then(|ordered| crate::deep::from_str(&ordered).ok())
        .unwrap_or(metadata);
    *object = serde_json::json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": meta.api_version(),
        "metadata": metadata,
    });
}

/// Translates a watch response body, event by event, with `translate`.
pub fn translate_stream(
    mut upstream: BoxBody,
    mut translate: EventTranslator,
    mut shutdown: signal::Receiver<bool>,
) -> BoxBody {
    let (mut tx, rx) = futures::channel::mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let mut pending = BytesMut::new();
        loop {
            let frame = tokio::select! {
                frame = upstream.frame() => frame,
                _ = shutdown.wait_for(|stop| *stop) => break,
            };
            let Some(Ok(frame)) = frame else { break };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            for line in complete_lines(&mut pending, &data) {
                if let Some(out) = event_of(&line).and_then(&mut translate)
                    && tx.send(out).await.is_err()
                {
                    return;
                }
            }
        }
        if let Some(out) = event_of(&pending).and_then(&mut translate) {
            let _ = tx.send(out).await;
        }
    });
    StreamBody::new(rx.map(|bytes| Ok::<_, BoxError>(Frame::data(bytes)))).boxed_unsync()
}

/// The lines `data` completes, after what is `pending` of the stream; what
/// is left of a line stays pending.
pub fn complete_lines(pending: &mut BytesMut, data: &[u8]) -> Vec<BytesMut> {
    pending.extend_from_slice(data);
    let mut lines = Vec::new();
    while let Some(end) = pending.iter().position(|b| *b == b'\n') {
        lines.push(pending.split_to(end + 1));
    }
    lines
}

/// The event on one line of a stream; `None` for an empty line, and for
/// one that is not JSON: nothing bindery can read, so nothing it may pass on.
pub fn event_of(line: &[u8]) -> Option<serde_json::Value> {
    let trimmed = line.trim_ascii();
    if trimmed.is_empty() {
        return None;
    }
    crate::deep::from_slice(trimmed).ok()
}

/// The body of a stream whose frames come from `rx`, ending when its
/// sender goes.
pub fn channel_body(rx: tokio::sync::mpsc::Receiver<Bytes>) -> BoxBody {
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        let bytes = rx.recv().await?;
        Some((Ok::<_, BoxError>(Frame::data(bytes)), rx))
    });
    StreamBody::new(frames).boxed_unsync()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_whole_objects_event_is_cut_to_its_metadata() {
        let mut event = json!({"type": "MODIFIED", "object": {"apiVersion": "g/v1", "kind": "Thing",
            "metadata": {"name": "a", "resourceVersion": "7"}, "spec": {"secret": 1}}});
        cut_to_metadata(&mut event, MetaVersion::V1);
        assert_eq!(
            event,
            json!({"type": "MODIFIED", "object": {"kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a", "resourceVersion": "7"}}})
        );
        let mut bookmark = json!({"type": "BOOKMARK", "object": {"apiVersion": "g/v1", "kind": "Thing",
            "metadata": {"resourceVersion": "9"}}});
        cut_to_metadata(&mut bookmark, MetaVersion::V1beta1);
        assert_eq!(bookmark["object"]["apiVersion"], "meta.k8s.io/v1beta1");
        assert_eq!(
            bookmark["object"]["metadata"],
            json!({"resourceVersion": "9"})
        );
        let mut event = json!({"type": "ADDED", "object": {"apiVersion": "g/v1", "kind": "Thing",
            "metadata": {"labels": {"a": "2", "b": "1"}, "name": "a", "namespace": "n",
                "resourceVersion": "7", "uid": "u"}}});
        cut_to_metadata(&mut event, MetaVersion::V1);
        assert_eq!(
            serde_json::to_string(&event["object"]["metadata"]).unwrap(),
            r#"{"name":"a","namespace":"n","uid":"u","resourceVersion":"7","labels":{"a":"2","b":"1"}}"#,
            "ObjectMeta's order, as kube-apiserver writes it"
        );
        let error =
            json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "code": 410}});
        let mut cut = error.clone();
        cut_to_metadata(&mut cut, MetaVersion::V1);
        assert_eq!(cut, error, "a Status stays a Status");
    }
}
