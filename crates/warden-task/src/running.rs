//! The tasks this server is running, so that they can be cancelled when
//! the server stops or its client goes away.
//!
//! A [`super::Task`] registers its cancellation token when it begins and
//! removes it when its record is written (or when it is dropped).
//! [`super::TaskRunner::shutdown`] cancels them all and waits for the map
//! to empty; [`CancelOnEof`] cancels, when the stdio input ends, the tasks
//! whose client waits for them, and leaves the *detached* ones (asked for
//! as MCP tasks) running: their client comes back for the result.
//! `tasks/cancel` cancels one. A cancelled task ends through its normal
//! path and is recorded `cancelled`.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Running tasks' tokens (and whether each is detached) by task id;
/// `done` is notified on every removal.
#[derive(Default)]
pub struct Running {
    tokens: Mutex<HashMap<String, (CancellationToken, bool)>>,
    pub done: Notify,
    /// Set by [`Running::cancel_all`]: the server is stopping.
    stopping: std::sync::atomic::AtomicBool,
}

impl Running {
    pub fn insert(&self, id: &str, token: &CancellationToken, detached: bool) {
        lock(&self.tokens).insert(id.to_string(), (token.clone(), detached));
    }

    /// Cancels task `id`; `false` if it is not running here.
    pub fn cancel(&self, id: &str) -> bool {
        match lock(&self.tokens).get(id) {
            Some((token, _)) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// The ids of the tasks running here.
    pub fn ids(&self) -> Vec<String> {
        lock(&self.tokens).keys().cloned().collect()
    }

    /// How many detached tasks run here.
    pub fn detached(&self) -> usize {
        lock(&self.tokens)
            .values()
            .filter(|(_, detached)| *detached)
            .count()
    }

    /// Whether the server is stopping (its tasks were all cancelled).
    pub fn stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Cancels the tasks whose client waits for them (not the detached).
    pub fn cancel_attached(&self) {
        for (token, detached) in lock(&self.tokens).values() {
            if !detached {
                token.cancel();
            }
        }
    }

    pub fn remove(&self, id: &str) {
        lock(&self.tokens).remove(id);
        self.done.notify_waiters();
    }

    pub fn count(&self) -> usize {
        lock(&self.tokens).len()
    }

    /// Cancels every running task; returns at once.
    pub fn cancel_all(&self) {
        self.stopping.store(true, std::sync::atomic::Ordering::Relaxed);
        for (token, _) in lock(&self.tokens).values() {
            token.cancel();
        }
    }
}

/// The server's input, cancelling the running tasks a client waits for
/// when it ends.
///
/// The MCP stdio transport, at the end of its input, waits a few seconds
/// for in-flight requests before it cancels them; a task's client that
/// closed the pipe is gone, so its tasks are cancelled at the end of input
/// itself (a read error counts as the end too). Detached tasks go on.
pub struct CancelOnEof<R> {
    input: R,
    running: Arc<Running>,
}

impl<R> CancelOnEof<R> {
    pub fn new(input: R, running: Arc<Running>) -> Self {
        Self { input, running }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for CancelOnEof<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let wanted = buf.remaining() > 0;
        let polled = Pin::new(&mut self.input).poll_read(cx, buf);
        let ended = match &polled {
            Poll::Ready(Ok(())) => wanted && buf.filled().len() == before,
            Poll::Ready(Err(_)) => true,
            Poll::Pending => false,
        };
        if ended {
            self.running.cancel_attached();
        }
        polled
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn the_end_of_input_cancels_the_tasks_a_client_waits_for() {
        // Bytes pass through untouched; the read that hits the end cancels the attached
        // task's token, not the detached one's.
        let running = Arc::new(Running::default());
        let token = CancellationToken::new();
        let detached = CancellationToken::new();
        running.insert("task_a", &token, false);
        running.insert("task_b", &detached, true);
        let mut input = CancelOnEof::new(&b"hello"[..], running.clone());
        let mut text = String::new();
        input.read_to_string(&mut text).await.expect("read");
        assert_eq!(text, "hello");
        assert!(token.is_cancelled());
        assert!(!detached.is_cancelled());
        assert_eq!(running.detached(), 1);
    }
}
