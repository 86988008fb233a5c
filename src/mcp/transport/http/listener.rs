//! A TCP listener that holds at most `max` connections open, and closes
//! connections that go quiet.
//!
//! `axum::serve` accepts every connection it is offered; one client opening
//! sockets in a loop would exhaust file descriptors and memory. Here each
//! accepted connection carries a semaphore permit, released when hyper drops
//! the connection; at the cap `accept` waits for a permit, so new clients
//! queue in the kernel's backlog (and time out there) while the connections
//! already open keep being served.
//!
//! A cap alone would let one client hold every permit with connections that
//! send nothing. So a connection on which no byte was read or written for
//! `idle` while no request of its own was in progress is closed. A request
//! in progress (a long call, an SSE stream) marks its connection busy
//! through [`Busy`], which the router receives as connect info.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

pub(crate) struct LimitedListener {
    inner: TcpListener,
    permits: Arc<Semaphore>,
    idle: Duration,
}

impl LimitedListener {
    pub(crate) fn new(inner: TcpListener, max: usize, idle: Duration) -> Self {
        Self {
            inner,
            permits: Arc::new(Semaphore::new(max.max(1))),
            idle,
        }
    }
}

impl axum::serve::Listener for LimitedListener {
    type Io = LimitedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            // The semaphore is never closed, so this only fails if it were.
            let Ok(permit) = self.permits.clone().acquire_owned().await else {
                std::future::pending::<()>().await;
                continue;
            };
            let (stream, addr) = axum::serve::Listener::accept(&mut self.inner).await;
            // Small request/response messages: send them at once.
            let _ = stream.set_nodelay(true);
            return (
                LimitedStream {
                    stream,
                    _permit: permit,
                    idle: self.idle,
                    quiet_until: Box::pin(tokio::time::sleep(self.idle)),
                    busy: Busy::default(),
                },
                addr,
            );
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// An accepted connection, its permit and its quiet deadline.
pub(crate) struct LimitedStream {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
    idle: Duration,
    /// When the connection counts as idle if nothing moves before.
    quiet_until: Pin<Box<Sleep>>,
    busy: Busy,
}

/// Requests in progress on one connection, shared with the router (axum
/// connect info): a busy connection is never closed as idle.
#[derive(Debug, Clone, Default)]
pub(crate) struct Busy(Arc<AtomicUsize>);

/// One request in progress; dropping it ends it.
pub(crate) struct BusyGuard(Arc<AtomicUsize>);

impl Busy {
    pub(crate) fn enter(&self) -> BusyGuard {
        self.0.fetch_add(1, Ordering::SeqCst);
        BusyGuard(self.0.clone())
    }

    fn is_busy(&self) -> bool {
        self.0.load(Ordering::SeqCst) > 0
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, LimitedListener>> for Busy {
    fn connect_info(stream: axum::serve::IncomingStream<'_, LimitedListener>) -> Self {
        stream.io().busy.clone()
    }
}

impl LimitedStream {
    fn moved(&mut self) {
        let next = Instant::now() + self.idle;
        self.quiet_until.as_mut().reset(next);
    }
}

impl AsyncRead for LimitedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    self.moved();
                }
                Poll::Ready(result)
            }
            Poll::Pending => loop {
                match self.quiet_until.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    // Busy: look again one idle period later.
                    Poll::Ready(()) if self.busy.is_busy() => self.moved(),
                    Poll::Ready(()) => {
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "connection idle past WARDEN_HTTP_IDLE_SECONDS",
                        )));
                    }
                }
            },
        }
    }
}

impl AsyncWrite for LimitedStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write(cx, buf);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.moved();
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.moved();
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
