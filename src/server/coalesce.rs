//! An HTTP/2 connection's writes gathered into few TLS writes: what the
//! connection writes is held, and written once each time its task has
//! done all it could, after letting the streams that are ready add their
//! frames. So one event fanned out to many watches on one connection (an
//! app cluster's aggregator holds all of them on one) leaves in a few TLS
//! records and system calls, not one of each per watch.
//!
//! Why the wait: each stream's body is sent by a task of its own (hyper's),
//! and the first frame a stream hands the connection wakes the
//! connection's task, which tokio then runs next on that worker (its LIFO
//! slot): it would write that one frame before the next stream runs. A task
//! that wakes itself while it runs goes to the back of the run queue,
//! behind those streams. And why the writing happens here, after the
//! connection's poll, not in `poll_flush`: h2 flushes once per DATA frame
//! whose payload it keeps apart from its buffer, so a flush is no batch.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// At most this much is held before it is written whatever follows (four
/// TLS records of the largest size).
const HELD_AT_MOST: usize = 64 * 1024;
/// What a batch starts with, so that it rarely grows: one TLS record.
const BATCH: usize = 16 * 1024;

/// Splits `io` into the I/O the connection is served over, whose writes
/// are held, and the [`Writes`] that write them.
pub fn coalesced<T>(io: T) -> (Coalesced<T>, Writes<T>) {
    let shared = Arc::new(Mutex::new(Shared {
        io,
        held: Vec::new(),
        written: 0,
        failed: None,
    }));
    (
        Coalesced {
            shared: shared.clone(),
        },
        Writes { shared },
    )
}

/// The I/O one connection is served over. Its flush writes nothing: the
/// connection's future, wrapped by [`Writes::drive`], does. Only that one
/// task uses either, so the lock between them is never contended.
pub struct Coalesced<T> {
    shared: Arc<Mutex<Shared<T>>>,
}

/// What writes a connection's held bytes.
pub struct Writes<T> {
    shared: Arc<Mutex<Shared<T>>>,
}

struct Shared<T> {
    io: T,
    held: Vec<u8>,
    /// How much of `held` has been written already.
    written: usize,
    /// A write of held bytes failed: the connection is told at its next
    /// read or write.
    failed: Option<io::Error>,
}

fn lock<T>(shared: &Mutex<Shared<T>>) -> MutexGuard<'_, Shared<T>> {
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<T> Shared<T> {
    fn holds(&self) -> bool {
        self.held.len() > self.written
    }

    fn failure(&mut self) -> io::Result<()> {
        match self.failed.take() {
            Some(error) => {
                self.failed = Some(io::ErrorKind::BrokenPipe.into());
                Err(error)
            }
            None => Ok(()),
        }
    }
}

impl<T: AsyncWrite + Unpin> Shared<T> {
    /// Writes everything held, then flushes; the batch's buffer goes, so
    /// that an idle connection holds none.
    fn poll_write_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.holds() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.held[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.held = Vec::new();
        self.written = 0;
        Pin::new(&mut self.io).poll_flush(cx)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalesced<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut shared = lock(&self.shared);
        shared.failure()?;
        if shared.held.len() + buf.len() > HELD_AT_MOST {
            ready!(shared.poll_write_out(cx))?;
            if buf.len() >= HELD_AT_MOST {
                return Pin::new(&mut shared.io).poll_write(cx, buf);
            }
        }
        if shared.held.capacity() == 0 {
            shared.held.reserve(BATCH.max(buf.len()));
        }
        shared.held.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    /// Deliberately writes nothing: the held bytes go when the connection's
    /// task has done all it could ([`Writes::drive`]).
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(lock(&self.shared).failure())
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut shared = lock(&self.shared);
        shared.failure()?;
        ready!(shared.poll_write_out(cx))?;
        Pin::new(&mut shared.io).poll_shutdown(cx)
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Coalesced<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut shared = lock(&self.shared);
        shared.failure()?;
        Pin::new(&mut shared.io).poll_read(cx, buf)
    }
}

impl<T> Writes<T> {
    /// `connection`, served over this [`Coalesced`], with its held bytes
    /// written each time it has done all it could.
    pub fn drive<C: Future>(self, connection: C) -> Driven<C, T> {
        Driven {
            connection: Box::pin(connection),
            shared: self.shared,
            waited: false,
        }
    }
}

/// A connection's future, writing what it held ([`Writes::drive`]).
pub struct Driven<C, T> {
    connection: Pin<Box<C>>,
    shared: Arc<Mutex<Shared<T>>>,
    /// Whether the streams were let add their frames since the last write.
    waited: bool,
}

impl<C, T> Driven<C, T> {
    /// The connection itself (to ask it to shut down gracefully).
    pub fn connection(&mut self) -> Pin<&mut C> {
        self.connection.as_mut()
    }
}

impl<C: Future, T: AsyncWrite + Unpin> Future for Driven<C, T> {
    type Output = C::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<C::Output> {
        let this = self.get_mut();
        if let Poll::Ready(ended) = this.connection.as_mut().poll(cx) {
            return Poll::Ready(ended);
        }
        let mut shared = lock(&this.shared);
        if !shared.holds() {
            this.waited = false;
            return Poll::Pending;
        }
        if !this.waited {
            this.waited = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        match shared.poll_write_out(cx) {
            Poll::Ready(Ok(())) => this.waited = false,
            Poll::Ready(Err(error)) => {
                // The connection meets it at its next read or write.
                shared.failed = Some(error);
                cx.waker().wake_by_ref();
            }
            // The socket wakes this task when it takes more.
            Poll::Pending => {}
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    /// Records each write it is given (or, `broken`, fails it).
    #[derive(Default)]
    struct Recorded {
        writes: Vec<Vec<u8>>,
        shut: bool,
        broken: bool,
    }

    impl AsyncWrite for Recorded {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            if this.broken {
                return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
            }
            this.writes.push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.get_mut().shut = true;
            Poll::Ready(Ok(()))
        }
    }

    fn cx() -> Context<'static> {
        Context::from_waker(Waker::noop())
    }

    fn write(io: &mut Coalesced<Recorded>, bytes: &[u8]) {
        let written = Pin::new(io).poll_write(&mut cx(), bytes);
        assert!(matches!(written, Poll::Ready(Ok(n)) if n == bytes.len()));
    }

    fn flush(io: &mut Coalesced<Recorded>) {
        assert!(matches!(
            Pin::new(io).poll_flush(&mut cx()),
            Poll::Ready(Ok(()))
        ));
    }

    fn writes(io: &Coalesced<Recorded>) -> Vec<Vec<u8>> {
        lock(&io.shared).io.writes.clone()
    }

    #[test]
    fn frames_flushed_apart_leave_in_one_write_after_the_streams_had_their_turn() {
        let (mut io, writes_of) = coalesced(Recorded::default());
        let mut driven = writes_of.drive(std::future::pending::<()>());
        let mut poll = || Pin::new(&mut driven).poll(&mut cx()).is_pending();
        write(&mut io, b"header-1");
        write(&mut io, b"payload-1");
        flush(&mut io);
        assert!(poll());
        assert!(
            writes(&io).is_empty(),
            "the first turn waits for the streams"
        );
        // A stream that was ready adds its frame, flushed apart.
        write(&mut io, b"header-2");
        flush(&mut io);
        write(&mut io, b"payload-2");
        flush(&mut io);
        assert!(poll());
        assert_eq!(
            writes(&io),
            [b"header-1payload-1header-2payload-2".to_vec()]
        );
        assert_eq!(
            lock(&io.shared).held.capacity(),
            0,
            "an idle connection holds no buffer"
        );
        // Nothing held: no write, and no wait before the next batch's.
        assert!(poll());
        write(&mut io, b"ping");
        assert!(poll());
        assert_eq!(writes(&io).len(), 1, "a new batch waits once");
        assert!(poll());
        assert_eq!(writes(&io)[1], b"ping");
    }

    #[test]
    fn more_than_is_held_at_most_is_written_without_waiting() {
        let (mut io, _writes) = coalesced(Recorded::default());
        let frame = vec![7u8; HELD_AT_MOST / 2 + 1];
        write(&mut io, &frame);
        assert!(writes(&io).is_empty());
        write(&mut io, &frame);
        assert_eq!(
            writes(&io),
            std::slice::from_ref(&frame),
            "the first goes to make room"
        );
        write(&mut io, &vec![9u8; HELD_AT_MOST]);
        let written = writes(&io);
        assert_eq!(written.len(), 3, "one too large to hold goes at once");
        assert_eq!(written[1], frame);
        assert!(!lock(&io.shared).holds());
    }

    #[test]
    fn shutdown_writes_what_is_held_first() {
        let (mut io, _writes) = coalesced(Recorded::default());
        write(&mut io, b"goaway");
        assert!(Pin::new(&mut io).poll_shutdown(&mut cx()).is_ready());
        let shared = lock(&io.shared);
        assert_eq!(shared.io.writes, [b"goaway".to_vec()]);
        assert!(shared.io.shut);
    }

    #[test]
    fn a_failed_write_of_held_bytes_reaches_the_connection() {
        let (mut io, writes_of) = coalesced(Recorded {
            broken: true,
            ..Recorded::default()
        });
        let mut driven = writes_of.drive(std::future::pending::<()>());
        let written = Pin::new(&mut io).poll_write(&mut cx(), b"frame");
        assert!(matches!(written, Poll::Ready(Ok(5))));
        assert!(Pin::new(&mut driven).poll(&mut cx()).is_pending());
        assert!(Pin::new(&mut driven).poll(&mut cx()).is_pending());
        let again = Pin::new(&mut io).poll_write(&mut cx(), b"more");
        assert!(
            matches!(&again, Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::ConnectionReset),
            "{again:?}"
        );
        let after = Pin::new(&mut io).poll_flush(&mut cx());
        assert!(matches!(&after, Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::BrokenPipe));
    }

    /// Counts the writes it passes on.
    struct Counted<T> {
        io: T,
        writes: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl<T: AsyncRead + Unpin> AsyncRead for Counted<T> {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
        }
    }

    impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<T> {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            let written = Pin::new(&mut this.io).poll_write(cx, buf);
            if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
                this.writes
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            written
        }
        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().io).poll_flush(cx)
        }
        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
        }
    }

    /// How many writes hyper's HTTP/2 server, over [`coalesced`] I/O, makes
    /// to hand one `payload`-byte chunk to each of `streams` response
    /// bodies at once (as a change reaches every watch on one connection).
    async fn writes_to_fan_out(streams: usize, payload: usize) -> usize {
        use http_body_util::BodyExt;
        use hyper_util::rt::{TokioExecutor, TokioIo};
        type Chunk = Result<hyper::body::Frame<bytes::Bytes>, std::convert::Infallible>;
        let (client_io, server_io) = tokio::io::duplex(16 << 20);
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (io, writes) = coalesced(Counted {
            io: server_io,
            writes: count.clone(),
        });
        let (feeds, mut fed) = tokio::sync::mpsc::unbounded_channel();
        let service = hyper::service::service_fn(move |_: http::Request<hyper::body::Incoming>| {
            let (feed, chunks) = tokio::sync::mpsc::channel::<Chunk>(4);
            let _ = feeds.send(feed);
            let body = http_body_util::StreamBody::new(futures::stream::unfold(
                chunks,
                |mut chunks| async move { chunks.recv().await.map(|chunk| (chunk, chunks)) },
            ));
            async move { Ok::<_, std::convert::Infallible>(http::Response::new(body)) }
        });
        let mut server = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        server.max_concurrent_streams(u32::try_from(streams).unwrap());
        let serving = server.serve_connection(TokioIo::new(io), service);
        tokio::spawn(writes.drive(serving));
        let (sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(client_io))
                .await
                .unwrap();
        tokio::spawn(connection);
        let mut bodies = Vec::new();
        for _ in 0..streams {
            let mut sender = sender.clone();
            sender.ready().await.unwrap();
            let request = http::Request::new(http_body_util::Empty::<bytes::Bytes>::new());
            bodies.push(sender.send_request(request).await.unwrap().into_body());
        }
        let mut feeds = Vec::new();
        while feeds.len() < streams {
            feeds.push(fed.recv().await.unwrap());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let before = count.load(std::sync::atomic::Ordering::Relaxed);
        let chunk = bytes::Bytes::from(vec![b'x'; payload]);
        for feed in &feeds {
            feed.try_send(Ok(hyper::body::Frame::data(chunk.clone())))
                .unwrap();
        }
        futures::future::join_all(bodies.iter_mut().map(|body| async move {
            let mut read = 0;
            while read < payload {
                let frame = body.frame().await.unwrap().unwrap();
                read += frame.into_data().map_or(0, |data| data.len());
            }
        }))
        .await;
        count.load(std::sync::atomic::Ordering::Relaxed) - before
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_chunk_to_many_streams_of_a_real_http2_connection_leaves_in_a_few_writes() {
        // Below and above the size from which h2 keeps a DATA frame's
        // payload apart from its buffer and flushes once per frame. Measured
        // here without coalescing: 2,048 bytes took 400 writes every time
        // (a header and a payload per stream), 600 bytes 9 to 197; with it,
        // 7 to 14 and 2 to 19.
        for payload in [600, 2048] {
            let writes = writes_to_fan_out(200, payload).await;
            assert!(
                writes <= 200 / 4,
                "{payload}-byte chunks to 200 streams took {writes} writes"
            );
        }
    }
}
