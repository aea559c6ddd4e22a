//! A request body that is read to its end even when nothing asks for it:
//! when the handler lets go of an HTTP/1.1 body before its end (a refusal
//! answered before the body was read), the rest is read and dropped in the
//! background, at most [`MAX_DISCARDED`] bytes within [`DISCARD_WITHIN`].
//! Go's server does the same for kube-apiserver (it reads up to 256 KiB
//! of an unread body), and for the same reason: hyper would otherwise stop
//! reading and close the connection, and a client still sending its body
//! to a closed socket is reset by the kernel, losing the answer it had not
//! read yet. Over HTTP/2 the same holds for one stream: h2 resets a stream
//! whose body was dropped unread, and a client caught sending reports an
//! error for the answer it was given.

use bytes::Buf;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// How much of an unread body is read and dropped: Go's
/// `maxPostHandlerReadBytes`. Past it the connection is closed.
pub const MAX_DISCARDED: usize = 256 << 10;

/// How long the rest of a body may take to arrive: kube-apiserver's
/// default request timeout. Past it the connection is closed.
pub const DISCARD_WITHIN: Duration = Duration::from_secs(60);

/// A request body (`B`) whose unread rest is discarded when it is dropped.
pub struct Unread<B>
where
    B: Body + Send + Unpin + 'static,
{
    body: Option<B>,
}

impl<B> Unread<B>
where
    B: Body + Send + Unpin + 'static,
{
    /// `body`, its rest discarded on drop, over HTTP/1.1 and HTTP/2 alike.
    pub fn new(body: B) -> Self {
        Unread { body: Some(body) }
    }
}

impl<B> Body for Unread<B>
where
    B: Body + Send + Unpin + 'static,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        match self.body.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl<B> Drop for Unread<B>
where
    B: Body + Send + Unpin + 'static,
{
    fn drop(&mut self) {
        let Some(body) = self.body.take() else {
            return;
        };
        if body.is_end_stream() {
            return;
        }
        // No runtime (a test dropping a request outside one): nothing to
        // keep open.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(discard(body));
    }
}

/// Reads `body` to its end and drops what it read; gives up (dropping the
/// body, which closes the connection) past [`MAX_DISCARDED`] bytes or
/// [`DISCARD_WITHIN`].
async fn discard<B>(mut body: B)
where
    B: Body + Send + Unpin + 'static,
{
    let _ = tokio::time::timeout(DISCARD_WITHIN, async {
        let mut discarded = 0;
        while let Some(Ok(frame)) = body.frame().await {
            discarded += frame.data_ref().map_or(0, Buf::remaining);
            if discarded > MAX_DISCARDED {
                break;
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::StreamBody;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A body of `chunks` chunks of one KiB each, counting those read.
    fn counted(
        chunks: usize,
    ) -> (
        impl Body<Data = Bytes, Error = std::convert::Infallible> + Send + Unpin + 'static,
        Arc<AtomicUsize>,
    ) {
        let read = Arc::new(AtomicUsize::new(0));
        let counter = read.clone();
        let stream = futures::stream::iter((0..chunks).map(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(Frame::data(Bytes::from(vec![b'x'; 1024])))
        }));
        (StreamBody::new(stream), read)
    }

    async fn settle() {
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn an_unread_body_is_read_to_its_end_when_dropped() {
        let (body, read) = counted(10);
        drop(Unread::new(body));
        settle().await;
        assert_eq!(read.load(Ordering::SeqCst), 10);
    }

    #[tokio::test]
    async fn no_more_than_go_reads_is_read() {
        let (body, read) = counted(1024);
        drop(Unread::new(body));
        settle().await;
        // The chunk that crosses the limit is read, then reading stops.
        assert_eq!(read.load(Ordering::SeqCst), MAX_DISCARDED / 1024 + 1);
    }

    #[tokio::test]
    async fn a_read_body_reads_as_the_body() {
        let (body, _) = counted(3);
        let whole = Unread::new(body).collect().await.unwrap().to_bytes();
        assert_eq!(whole.len(), 3 * 1024);
    }
}
