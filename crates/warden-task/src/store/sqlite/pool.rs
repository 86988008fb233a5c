//! The embedded store's connections, and the one way to use them: a
//! closure run on tokio's blocking pool ([`Pool::run`]).
//!
//! SQLite calls block (disk I/O, fsync at a checkpoint, up to
//! [`super::BUSY_TIMEOUT`] waiting for another process's write), so no
//! call runs on an async worker thread. Why a small pool of equal
//! connections rather than one writer and separate readers: under WAL the
//! readers run beside the one writer anyway, and SQLite itself serialises
//! the writers of this process exactly as it must those of other
//! processes sharing the file (the busy timeout), so routing each method
//! to a "writer" or a "reader" would add a second lock that still could
//! not replace SQLite's. Each write is one statement (or one explicit
//! transaction) that takes the write lock when it starts, so the busy
//! timeout applies and no reader-upgrades-to-writer deadlock can arise.
//!
//! This module knows nothing of tasks; [`super`] holds the SQL.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::Connection;
use tokio::sync::Semaphore;

use crate::store::StoreError;

/// A bounded set of connections to one database file, opened lazily.
#[derive(Clone)]
pub(super) struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    /// The database file, for the connections opened after the first.
    path: PathBuf,
    /// Connections not in use. A call pops one (or opens one if none is
    /// idle) on the blocking thread and pushes it back there when its
    /// closure returns, so a caller that stops waiting (a cancelled
    /// request) never loses a connection. A connection whose closure
    /// panicked is dropped instead (rolling back whatever it had begun).
    idle: Mutex<Vec<Connection>>,
    /// One permit per connection that may exist: taken before a call
    /// starts, moved into its blocking closure and released when that
    /// closure ends, so at most this many connections (and blocking
    /// threads) are ever busy with the store. [`Pool::close`] takes them
    /// all and closes the semaphore: every later call fails.
    permits: Arc<Semaphore>,
    /// How many permits there are in all.
    size: u32,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("path", &self.inner.path)
            .field("available", &self.inner.permits.available_permits())
            .finish()
    }
}

impl Pool {
    /// A pool of at most `size` connections to `path`, starting with the
    /// already opened and checked `first`.
    pub(super) fn new(path: &Path, first: Connection, size: u32) -> Self {
        let size = size.max(1);
        Self {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                idle: Mutex::new(vec![first]),
                permits: Arc::new(Semaphore::new(size as usize)),
                size,
            }),
        }
    }

    /// Runs `call` with a connection on the blocking pool, waiting for a
    /// free connection first. SQLite errors become [`StoreError::Query`];
    /// so does a closed store.
    pub(super) async fn run<T, F>(&self, call: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let permit = Arc::clone(&self.inner.permits)
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Query("the task store is closed".into()))?;
        let inner = Arc::clone(&self.inner);
        let ran = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let idle = inner.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
            let mut conn = match idle {
                Some(conn) => conn,
                None => super::connect(&inner.path)?,
            };
            let result = call(&mut conn);
            inner
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(conn);
            result
        })
        .await;
        match ran {
            Ok(result) => result.map_err(super::query),
            Err(e) => Err(StoreError::Query(format!("a task store call failed: {e}"))),
        }
    }

    /// Waits for the calls under way, then closes every connection (the
    /// last one to close folds the write-ahead log back into the database
    /// file and removes it). Later calls fail.
    pub(super) async fn close(&self) {
        let Ok(all) = self.inner.permits.acquire_many(self.inner.size).await else {
            return; // already closed
        };
        // Every connection is idle now; closing before letting go of the
        // permits means no new call can start.
        self.inner.permits.close();
        drop(all);
        let conns = std::mem::take(&mut *self.inner.idle.lock().unwrap_or_else(PoisonError::into_inner));
        let _ = tokio::task::spawn_blocking(move || drop(conns)).await;
    }
}
