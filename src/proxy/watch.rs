//! Watch streams in consumer terms: the provider's newline-delimited events
//! are translated one by one as they arrive; events of other exports are
//! dropped. The stream ends when the provider ends it, the client goes away,
//! or bindery shuts down.

use crate::upstream::{BoxBody, BoxError};
use bytes::{Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tokio::sync::watch as signal;

/// Rewrites one decoded event in place; `None` drops it.
pub type EventTranslator = Box<dyn FnMut(&mut serde_json::Value) -> Option<()> + Send>;

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
            pending.extend_from_slice(&data);
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line = pending.split_to(end + 1);
                if let Some(out) = translate_line(&mut translate, &line)
                    && tx.send(out).await.is_err()
                {
                    return;
                }
            }
        }
        if !pending.is_empty()
            && let Some(out) = translate_line(&mut translate, &pending)
        {
            let _ = tx.send(out).await;
        }
    });
    StreamBody::new(rx.map(|bytes| Ok::<_, BoxError>(Frame::data(bytes)))).boxed_unsync()
}

/// One event line; `None` drops it.
fn translate_line(translate: &mut EventTranslator, line: &[u8]) -> Option<Bytes> {
    let trimmed = line.trim_ascii();
    if trimmed.is_empty() {
        return None;
    }
    let mut event: serde_json::Value = match serde_json::from_slice(trimmed) {
        Ok(event) => event,
        // Not JSON: nothing bindery can read, so nothing it may pass on.
        Err(_) => return None,
    };
    translate(&mut event)?;
    let mut out = serde_json::to_vec(&event).expect("a JSON value serializes");
    out.push(b'\n');
    Some(Bytes::from(out))
}
