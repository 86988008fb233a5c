//! The embedded task store: one SQLite file, `tasks.db` in the artifacts
//! directory, needing no setup.
//!
//! WAL journal with `synchronous=NORMAL`: each write is one transaction,
//! atomic across a crash of the server (a killed process loses nothing
//! committed; a power cut may lose the last moments but never leaves a
//! half-written record). Several server processes may share the file (a
//! stdio server finishing a detached task while a new one starts): SQLite
//! serialises their writes, waiting up to [`BUSY_TIMEOUT`] for the lock.
//! Opening runs `quick_check`, so a damaged file (truncated, overwritten)
//! is a clear startup error naming it, not a failure at the first task.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Connection, Row};

use super::migrations::{self, Step};
use serde_json::Value;

use super::{Claimed, Ending, Enqueued, State, StoreError, TaskRecord, TaskStore};
use crate::tenant::Principal;

/// The store's file name in the artifacts directory.
pub const FILE_NAME: &str = "tasks.db";
/// How long a write waits for another process's write to finish.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections in the pool: reads run in parallel with one writer (WAL).
const CONNECTIONS: u32 = 4;

const COLUMNS: &str = "id, owner, tool, state, summary, status_message, error, created_ms, updated_ms, \
                       ttl_ms, location, detached, node, lease_until_ms";

/// The SQLite task store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// Ends task `id` with `ending` if it is in state `from` (the first
    /// ending wins); `false` if it was not.
    async fn end_from(&self, id: &str, from: State, ending: &Ending) -> Result<bool, StoreError> {
        let statement = sqlx::query(
            "UPDATE tasks SET state = ?, summary = ?, error = ?, updated_ms = ?, request = NULL \
             WHERE id = ? AND state = ?",
        );
        let done = bind_ending(statement, ending)
            .bind(id)
            .bind(from.as_str())
            .execute(&self.pool)
            .await
            .map_err(query)?;
        Ok(done.rows_affected() == 1)
    }

    /// Opens (creating if missing) the store at `path`, checks it and
    /// applies the missing schema steps. Returns the store and whether it
    /// was new (no schema before), so the caller can import task
    /// directories written before the store existed.
    pub async fn open(path: &Path) -> Result<(Self, bool), StoreError> {
        let fail = |reason: String| StoreError::Open {
            location: path.display().to_string(),
            reason,
        };
        let damaged = |e: sqlx::Error| match sqlite_code(&e) {
            Some(code) if DAMAGED_CODES.contains(&(code & 0xff)) => fail(format!(
                "{e}; the file is damaged or is not a Warden task store. Move it aside (the task \
                 directories next to it are kept and are imported again) and restart"
            )),
            Some(code) if UNWRITABLE_CODES.contains(&(code & 0xff)) => StoreError::unwritable(path, e),
            _ => fail(e.to_string()),
        };
        prepare_files(path)?;
        let options = SqliteConnectOptions::from_str("sqlite:")
            .map_err(|e| fail(e.to_string()))?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            // A forgotten request body or a deleted record is overwritten
            // with zeros, not left readable in a free page.
            .pragma("secure_delete", "ON")
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(CONNECTIONS)
            .connect_with(options)
            .await
            .map_err(damaged)?;
        let verdict: String = sqlx::query_scalar("PRAGMA quick_check(1)")
            .fetch_one(&pool)
            .await
            .map_err(damaged)?;
        if verdict != "ok" {
            return Err(fail(format!(
                "integrity check failed ({verdict}); the file is damaged. Move it aside (the task \
                 directories next to it are kept and are imported again) and restart"
            )));
        }
        // SQLite made its journal files with the database file's mode; an
        // older Warden's may be readable by others.
        for suffix in JOURNAL_SUFFIXES {
            harden_existing(&journal_path(path, suffix));
        }
        let store = Self { pool };
        let created = store.migrate(migrations::SQLITE).await.map_err(|e| match e {
            StoreError::Query(reason) => fail(reason),
            other => other,
        })?;
        Ok((store, created))
    }

    /// Applies the steps this store lacks, holding the write lock for the
    /// whole check-and-apply; `true` if the store had no schema before.
    async fn migrate(&self, steps: &[Step]) -> Result<bool, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(query)?;
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut *conn)
            .await
            .map_err(query)?;
        let applied = async {
            sqlx::query(
                "CREATE TABLE IF NOT EXISTS warden_schema (version INTEGER PRIMARY KEY NOT NULL, \
                 description TEXT NOT NULL, applied_ms INTEGER NOT NULL)",
            )
            .execute(&mut *conn)
            .await?;
            let current: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM warden_schema")
                .fetch_one(&mut *conn)
                .await?;
            if let Err(too_new) = migrations::check_version(current, steps, "WARDEN_ARTIFACTS_DIR") {
                return Ok(Err(too_new));
            }
            for step in steps.iter().filter(|s| s.version > current) {
                for statement in migrations::statements(step) {
                    sqlx::query(statement).execute(&mut *conn).await?;
                }
                sqlx::query("INSERT INTO warden_schema (version, description, applied_ms) VALUES (?, ?, ?)")
                    .bind(step.version)
                    .bind(step.description)
                    .bind(super::now_ms())
                    .execute(&mut *conn)
                    .await?;
            }
            Ok::<_, sqlx::Error>(Ok(current == 0))
        }
        .await;
        match applied {
            Ok(Ok(created)) => {
                sqlx::query("COMMIT").execute(&mut *conn).await.map_err(query)?;
                Ok(created)
            }
            Ok(Err(too_new)) => {
                let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
                Err(StoreError::Query(too_new.to_string()))
            }
            Err(e) => {
                let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
                // A connection mid-transaction must not go back to the pool.
                let _ = conn.detach().close().await;
                Err(query(e))
            }
        }
    }
}

/// SQLite result codes (primary, the low byte) that mean the file is not
/// a sound database: `SQLITE_CORRUPT` (11) and `SQLITE_NOTADB` (26). Only
/// these earn "damaged; move it aside".
const DAMAGED_CODES: [i32; 2] = [11, 26];

/// SQLite result codes that mean the file or its directory cannot be
/// written now: `SQLITE_PERM` (3), `SQLITE_READONLY` (8), `SQLITE_FULL`
/// (13), `SQLITE_CANTOPEN` (14, e.g. no room or no permission for the
/// `-wal`/`-shm` files).
const UNWRITABLE_CODES: [i32; 4] = [3, 8, 13, 14];

/// The files SQLite keeps beside the database in WAL mode.
const JOURNAL_SUFFIXES: [&str; 2] = ["-wal", "-shm"];

/// The (extended) SQLite result code of `e`, if it came from SQLite.
fn sqlite_code(e: &sqlx::Error) -> Option<i32> {
    match e {
        sqlx::Error::Database(db) => db.code().and_then(|code| code.parse().ok()),
        _ => None,
    }
}

/// `<path>-wal` and the like.
fn journal_path(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    std::path::PathBuf::from(name)
}

/// Creates the database file (if missing) the way every file under the
/// artifacts directory is made: a regular file, 0600, never through a
/// link, so SQLite (which creates its `-wal` and `-shm` files with the
/// database file's mode) makes those 0600 too. A directory or file that
/// cannot be written is [`StoreError::Unwritable`]; a link or something
/// other than a regular file is refused with the fix.
fn prepare_files(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |reason: String| StoreError::Open {
        location: path.display().to_string(),
        reason,
    };
    if let Some(dir) = path.parent() {
        crate::artifacts::safe_path::create_private_dir_all(dir).map_err(|e| match e.raw_os_error() {
            Some(errno) if StoreError::is_unwritable_errno(errno) => StoreError::unwritable(path, &e),
            _ => fail(format!(
                "cannot create its directory: {e}; set WARDEN_ARTIFACTS_DIR to a writable directory"
            )),
        })?;
    }
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(crate::artifacts::safe_path::FILE_MODE)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.raw_os_error().is_some_and(StoreError::is_unwritable_errno) => {
            return Err(StoreError::unwritable(path, &e));
        }
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(fail(
                "it is a symbolic link, which Warden never follows there; move it aside (or point \
                 WARDEN_ARTIFACTS_DIR at the real directory) and restart"
                    .into(),
            ));
        }
        Err(e) => {
            return Err(fail(format!(
                "{e}; it is not a Warden task store file. Move it aside (the task directories next to \
                 it are kept and are imported again) and restart"
            )));
        }
    };
    crate::artifacts::safe_path::make_private(&file).map_err(|e| {
        fail(format!(
            "{e}; it is not a Warden task store file. Move it aside (the task directories next to it \
             are kept and are imported again) and restart"
        ))
    })?;
    // SQLite must also create `-wal` and `-shm` beside it: a directory that
    // takes no new file is "cannot be written", found here rather than as
    // SQLITE_CANTOPEN later.
    let missing = JOURNAL_SUFFIXES
        .iter()
        .any(|suffix| std::fs::symlink_metadata(journal_path(path, suffix)).is_err());
    if missing {
        let probe = journal_path(path, &format!(".probe-{}", std::process::id()));
        let made = crate::artifacts::safe_path::create_private(&probe);
        let _ = std::fs::remove_file(&probe);
        if let Err(e) = made
            && e.raw_os_error().is_some_and(StoreError::is_unwritable_errno)
        {
            return Err(StoreError::unwritable(path, &e));
        }
    }
    Ok(())
}

/// Makes an existing journal file private (0600); best effort, never
/// following a link or opening anything but a regular file.
fn harden_existing(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    if let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
    {
        let _ = crate::artifacts::safe_path::make_private(&file);
    }
}

fn query(e: sqlx::Error) -> StoreError {
    StoreError::Query(e.to_string())
}

fn record(row: &SqliteRow) -> Result<TaskRecord, StoreError> {
    let get_text = |name: &str| row.try_get::<String, _>(name).map_err(query);
    let state = get_text("state")?;
    let owner = get_text("owner")?;
    let error: Option<String> = row.try_get("error").map_err(query)?;
    Ok(TaskRecord {
        id: get_text("id")?,
        owner: Principal::new(&owner)
            .map_err(|e| StoreError::Query(format!("record owner '{owner}': {e}")))?,
        tool: get_text("tool")?,
        state: State::parse(&state)
            .ok_or_else(|| StoreError::Query(format!("record state '{state}' is unknown")))?,
        summary: row.try_get("summary").map_err(query)?,
        status_message: row.try_get("status_message").map_err(query)?,
        error: error.and_then(|text| serde_json::from_str(&text).ok()),
        created_ms: row.try_get("created_ms").map_err(query)?,
        updated_ms: row.try_get("updated_ms").map_err(query)?,
        ttl_ms: row.try_get("ttl_ms").map_err(query)?,
        location: get_text("location")?,
        detached: row.try_get::<i64, _>("detached").map_err(query)? != 0,
        node: get_text("node")?,
        lease_until_ms: row.try_get("lease_until_ms").map_err(query)?,
    })
}

/// The ending columns bound in order: state, summary, error, updated_ms.
fn bind_ending<'q>(
    statement: sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>>,
    ending: &'q Ending,
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>> {
    statement
        .bind(State::Ended(ending.status).as_str())
        .bind(&ending.summary)
        .bind(ending.error.as_ref().map(|e| e.to_string()))
        .bind(ending.at_ms)
}

#[async_trait::async_trait]
impl TaskStore for SqliteStore {
    async fn create(&self, r: &TaskRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO tasks (id, owner, tool, state, summary, status_message, error, created_ms, \
             updated_ms, ttl_ms, expires_ms, location, detached, node, lease_until_ms) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&r.id)
        .bind(r.owner.as_str())
        .bind(&r.tool)
        .bind(r.state.as_str())
        .bind(&r.summary)
        .bind(&r.status_message)
        .bind(r.error.as_ref().map(|e| e.to_string()))
        .bind(r.created_ms)
        .bind(r.updated_ms)
        .bind(r.ttl_ms)
        .bind(r.expires_ms())
        .bind(&r.location)
        .bind(i64::from(r.detached))
        .bind(&r.node)
        .bind(r.lease_until_ms)
        .execute(&self.pool)
        .await
        .map_err(query)?;
        Ok(())
    }

    async fn enqueue(
        &self,
        r: &TaskRecord,
        request: &Value,
        owner_limit: Option<u64>,
        queue_limit: u64,
    ) -> Result<Enqueued, StoreError> {
        let owner_limit = owner_limit.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        let queue_limit = i64::try_from(queue_limit).unwrap_or(i64::MAX);
        // One statement, so one write transaction: the counts and the
        // insert cannot interleave with another writer.
        let done = sqlx::query(
            "INSERT INTO tasks (id, owner, tool, state, summary, status_message, error, created_ms, \
             updated_ms, ttl_ms, expires_ms, location, detached, node, lease_until_ms, request) \
             SELECT ?, ?, ?, 'queued', NULL, 'queued', NULL, ?, ?, ?, ?, ?, ?, '', 0, ? \
             WHERE (? IS NULL OR (SELECT COUNT(*) FROM tasks WHERE owner = ? AND state IN ('queued', 'running')) < ?) \
             AND (SELECT COUNT(*) FROM tasks WHERE state = 'queued') < ?",
        )
        .bind(&r.id)
        .bind(r.owner.as_str())
        .bind(&r.tool)
        .bind(r.created_ms)
        .bind(r.updated_ms)
        .bind(r.ttl_ms)
        .bind(r.expires_ms())
        .bind(&r.location)
        .bind(i64::from(r.detached))
        .bind(request.to_string())
        .bind(owner_limit)
        .bind(r.owner.as_str())
        .bind(owner_limit)
        .bind(queue_limit)
        .execute(&self.pool)
        .await
        .map_err(query)?;
        if done.rows_affected() == 1 {
            return Ok(Enqueued::Accepted);
        }
        if self.queued().await? >= u64::try_from(queue_limit).unwrap_or(0) {
            return Ok(Enqueued::QueueFull);
        }
        Ok(Enqueued::OwnerAtLimit)
    }

    async fn claim(
        &self,
        node: &str,
        now_ms: i64,
        lease_until_ms: i64,
    ) -> Result<Option<Claimed>, StoreError> {
        let row = sqlx::query(&format!(
            "UPDATE tasks SET state = 'running', node = ?, lease_until_ms = ?, updated_ms = ?, \
             status_message = 'started' WHERE id = (SELECT id FROM tasks WHERE state = 'queued' \
             ORDER BY created_ms, id LIMIT 1) RETURNING {COLUMNS}, request"
        ))
        .bind(node)
        .bind(lease_until_ms)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await
        .map_err(query)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let request: Option<String> = row.try_get("request").map_err(query)?;
        Ok(Some(Claimed {
            record: record(&row)?,
            request: request
                .and_then(|text| serde_json::from_str(&text).ok())
                .unwrap_or(Value::Null),
        }))
    }

    async fn renew(
        &self,
        node: &str,
        ids: &[String],
        lease_until_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar(
            "UPDATE tasks SET lease_until_ms = ? WHERE node = ? AND state = 'running' \
             AND id IN (SELECT value FROM json_each(?)) RETURNING id",
        )
        .bind(lease_until_ms)
        .bind(node)
        .bind(serde_json::json!(ids).to_string())
        .fetch_all(&self.pool)
        .await
        .map_err(query)
    }

    async fn expire_leases(&self, now_ms: i64, ending: &Ending) -> Result<Vec<String>, StoreError> {
        let statement = sqlx::query_scalar::<_, String>(
            "UPDATE tasks SET state = ?, summary = ?, error = ?, updated_ms = ?, request = NULL \
             WHERE state = 'running' AND lease_until_ms < ? RETURNING id",
        )
        .bind(State::Ended(ending.status).as_str())
        .bind(&ending.summary)
        .bind(ending.error.as_ref().map(|e| e.to_string()))
        .bind(ending.at_ms)
        .bind(now_ms);
        statement.fetch_all(&self.pool).await.map_err(query)
    }

    async fn queued(&self) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tasks WHERE state = 'queued'")
            .fetch_one(&self.pool)
            .await
            .map_err(query)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn cancel_queued(&self, id: &str, ending: &Ending) -> Result<bool, StoreError> {
        self.end_from(id, State::Queued, ending).await
    }

    async fn note(&self, id: &str, message: &str, at_ms: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE tasks SET status_message = ?, updated_ms = ? WHERE id = ? AND state = 'running'")
            .bind(message)
            .bind(at_ms)
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(query)?;
        Ok(())
    }

    async fn end(&self, id: &str, ending: &Ending) -> Result<bool, StoreError> {
        self.end_from(id, State::Running, ending).await
    }

    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM tasks WHERE id = ?"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(query)?;
        row.as_ref().map(record).transpose()
    }

    async fn list(&self, owner: &Principal, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM tasks WHERE owner = ? ORDER BY created_ms DESC, id DESC LIMIT ?"
        ))
        .bind(owner.as_str())
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(query)?;
        rows.iter().map(record).collect()
    }

    async fn running(&self) -> Result<Vec<TaskRecord>, StoreError> {
        let rows = sqlx::query(&format!("SELECT {COLUMNS} FROM tasks WHERE state = 'running'"))
            .fetch_all(&self.pool)
            .await
            .map_err(query)?;
        rows.iter().map(record).collect()
    }

    async fn request_cancel(&self, id: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("UPDATE tasks SET cancel_requested = 1 WHERE id = ? AND state = 'running'")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(query)?;
        Ok(done.rows_affected() == 1)
    }

    async fn cancels_for(&self, node: &str) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar(
            "SELECT id FROM tasks WHERE state = 'running' AND cancel_requested = 1 AND node = ?",
        )
        .bind(node)
        .fetch_all(&self.pool)
        .await
        .map_err(query)
    }

    async fn take_expired(&self, now_ms: i64) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query(
            "DELETE FROM tasks WHERE state NOT IN ('queued', 'running') AND expires_ms <= ? RETURNING id, location",
        )
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(query)?;
        if !rows.is_empty() {
            // The removed records' pages were zeroed (secure_delete); their
            // older copies in the write-ahead log go too. Best effort: a
            // reader holding the log open makes it wait for the next sweep.
            let _ = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(&self.pool)
                .await;
        }
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get("id").map_err(query)?,
                    row.try_get("location").map_err(query)?,
                ))
            })
            .collect()
    }

    async fn delete(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM tasks WHERE id = ?")
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(query)?;
        Ok(())
    }

    async fn count(&self) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tasks")
            .fetch_one(&self.pool)
            .await
            .map_err(query)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await.map_err(query)?;
        Ok(())
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::TaskStatus;

    fn sample(id: &str, owner: &str, created_ms: i64) -> TaskRecord {
        TaskRecord {
            id: id.into(),
            owner: Principal::new(owner).expect("principal"),
            tool: "run_script".into(),
            state: State::Running,
            summary: None,
            status_message: None,
            error: None,
            created_ms,
            updated_ms: created_ms,
            ttl_ms: 1_000,
            location: format!("/tmp/{id}"),
            detached: true,
            node: crate::node::name(),
            lease_until_ms: created_ms + 60_000,
        }
    }

    #[tokio::test]
    async fn records_round_trip_end_once_and_expire_after_their_ttl() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, created) = SqliteStore::open(&dir.path().join(FILE_NAME))
            .await
            .expect("open");
        assert!(created);
        let a = sample("task_a", "alice", 1_000);
        store.create(&a).await.expect("create");
        store
            .create(&sample("task_b", "bob", 2_000))
            .await
            .expect("create");
        assert!(store.create(&a).await.is_err(), "ids are unique");
        store.note("task_a", "step 1 ok", 1_500).await.expect("note");
        let ending = Ending {
            status: TaskStatus::Success,
            summary: "done".into(),
            error: None,
            at_ms: 1_600,
        };
        assert!(store.end("task_a", &ending).await.expect("end"));
        let cancelled = Ending {
            status: TaskStatus::Cancelled,
            ..ending.clone()
        };
        assert!(
            !store.end("task_a", &cancelled).await.expect("end"),
            "the first ending stands"
        );
        let got = store.get("task_a").await.expect("get").expect("present");
        assert_eq!(got.state, State::Ended(TaskStatus::Success));
        assert_eq!(got.status_message.as_deref(), Some("step 1 ok"));
        assert_eq!(got.summary.as_deref(), Some("done"));
        let alice = Principal::new("alice").expect("principal");
        assert_eq!(store.list(&alice, 10).await.expect("list").len(), 1);
        assert_eq!(
            store.running().await.expect("running").len(),
            1,
            "bob's still runs"
        );
        // a ended at 1_000 + 1_000 ttl; bob's is running, so it stays.
        assert!(store.take_expired(1_999).await.expect("expire").is_empty());
        let gone = store.take_expired(2_000).await.expect("expire");
        assert_eq!(gone, vec![("task_a".to_string(), "/tmp/task_a".to_string())]);
        assert!(store.get("task_a").await.expect("get").is_none());
        assert_eq!(store.count().await.expect("count"), 1);
        // Reopening applies nothing new and keeps the records.
        drop(store);
        let (again, created) = SqliteStore::open(&dir.path().join(FILE_NAME))
            .await
            .expect("reopen");
        assert!(!created);
        assert_eq!(again.count().await.expect("count"), 1);
    }

    #[tokio::test]
    async fn the_queue_hands_each_task_to_one_claimer_within_its_limits_and_leases_run_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = SqliteStore::open(&dir.path().join(FILE_NAME))
            .await
            .expect("open");
        let queued = |id: &str, owner: &str, at: i64| TaskRecord {
            state: State::Queued,
            node: String::new(),
            lease_until_ms: 0,
            ..sample(id, owner, at)
        };
        let request = serde_json::json!({"tool": "run_script", "arguments": {"script": "1"}});
        let accepted = store
            .enqueue(&queued("task_q1", "alice", 1), &request, Some(2), 10)
            .await;
        assert_eq!(accepted.expect("enqueue"), Enqueued::Accepted);
        store
            .enqueue(&queued("task_q2", "alice", 2), &request, Some(2), 10)
            .await
            .expect("enqueue");
        let third = store
            .enqueue(&queued("task_q3", "alice", 3), &request, Some(2), 10)
            .await;
        assert_eq!(third.expect("enqueue"), Enqueued::OwnerAtLimit);
        let full = store
            .enqueue(&queued("task_q4", "bob", 4), &request, None, 2)
            .await;
        assert_eq!(full.expect("enqueue"), Enqueued::QueueFull);
        // 16 concurrent claimers take the two tasks once each, oldest first.
        let claims = futures_claims(&store, 16).await;
        assert_eq!(claims, vec!["task_q1".to_string(), "task_q2".to_string()]);
        let one = store.get("task_q1").await.expect("get").expect("present");
        assert_eq!(one.state, State::Running);
        // q1's server renews; a task held by any other server lapses and is
        // interrupted, once.
        let holder = one.node.clone();
        let ids = ["task_q1".to_string(), "task_q2".to_string()];
        let held = store.renew(&holder, &ids, 10_000).await.expect("renew");
        assert!(held.contains(&"task_q1".to_string()), "{held:?}");
        let q2 = store.get("task_q2").await.expect("get").expect("present");
        let lapsing: Vec<String> = if q2.node == holder {
            vec![]
        } else {
            vec!["task_q2".into()]
        };
        let ending = Ending {
            status: TaskStatus::Failed,
            summary: "interrupted".into(),
            error: Some(serde_json::json!({"kind": "interrupted"})),
            at_ms: 5_000,
        };
        let expired = store.expire_leases(5_000, &ending).await.expect("expire");
        assert_eq!(expired, lapsing);
        assert!(
            store
                .expire_leases(5_000, &ending)
                .await
                .expect("expire")
                .is_empty()
        );
        assert!(
            !store.cancel_queued("task_q1", &ending).await.expect("cancel"),
            "running, not queued"
        );
    }

    /// Claims with `n` concurrent claimers until the queue is empty; the
    /// claimed ids, sorted.
    async fn futures_claims(store: &SqliteStore, n: usize) -> Vec<String> {
        let mut claimers = tokio::task::JoinSet::new();
        for i in 0..n {
            let store = store.clone();
            claimers.spawn(async move {
                let mut mine = Vec::new();
                while let Some(claimed) = store
                    .claim(&format!("n{i}/1/1"), 1_000, 2_000)
                    .await
                    .expect("claim")
                {
                    mine.push(claimed.record.id);
                }
                mine
            });
        }
        let mut all = Vec::new();
        while let Some(mine) = claimers.join_next().await {
            all.extend(mine.expect("claimer"));
        }
        all.sort();
        all
    }

    #[tokio::test]
    async fn a_damaged_or_newer_store_is_refused_with_its_path_and_the_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(FILE_NAME);
        {
            let (store, _) = SqliteStore::open(&path).await.expect("open");
            for i in 0..200 {
                store
                    .create(&sample(&format!("task_{i}"), "alice", i))
                    .await
                    .expect("create");
            }
            store.pool.close().await;
        }
        let bytes = std::fs::read(&path).expect("read");
        std::fs::write(&path, &bytes[..bytes.len() / 3]).expect("truncate");
        let _ = std::fs::remove_file(dir.path().join("tasks.db-wal"));
        let error = SqliteStore::open(&path).await.expect_err("damaged");
        let text = error.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains("Move it aside"), "{text}");

        let newer = dir.path().join("newer.db");
        {
            let (store, _) = SqliteStore::open(&newer).await.expect("open");
            sqlx::query("INSERT INTO warden_schema VALUES (99, 'future', 0)")
                .execute(&store.pool)
                .await
                .expect("insert");
            store.pool.close().await;
        }
        let error = SqliteStore::open(&newer).await.expect_err("newer");
        assert!(error.to_string().contains("schema version 99"), "{error}");
    }

    #[tokio::test]
    async fn ended_tasks_forget_their_request_bodies_and_expired_ones_leave_no_trace_in_the_file() {
        // Ending a task (run, lapsed, or cancelled while queued) clears its stored request;
        // status and summary stay until the TTL; after expiry the file holds no byte of it.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(FILE_NAME);
        let (store, _) = SqliteStore::open(&path).await.expect("open");
        let marker = "SECRET-SCRIPT-BODY-7f3a9c";
        let queued = |id: &str| TaskRecord {
            state: State::Queued,
            node: String::new(),
            lease_until_ms: 0,
            ..sample(id, "alice", 1)
        };
        for id in ["task_r1", "task_r2", "task_r3"] {
            let request =
                serde_json::json!({"tool": "run_script", "arguments": {"script": format!("{marker} {id}")}});
            store
                .enqueue(&queued(id), &request, None, 10)
                .await
                .expect("enqueue");
        }
        let ending = |status| Ending {
            status,
            summary: "done".into(),
            error: None,
            at_ms: 50,
        };
        assert!(
            store
                .cancel_queued("task_r3", &ending(TaskStatus::Cancelled))
                .await
                .expect("cancel")
        );
        let first = store.claim("n/1/1", 10, 20).await.expect("claim").expect("task");
        assert!(
            first.request.to_string().contains(marker),
            "the claim gets the request"
        );
        store.claim("n/1/1", 10, 20).await.expect("claim").expect("task");
        assert!(
            store
                .end(&first.record.id, &ending(TaskStatus::Success))
                .await
                .expect("end")
        );
        store
            .expire_leases(1_000, &ending(TaskStatus::Failed))
            .await
            .expect("expire");
        for id in ["task_r1", "task_r2", "task_r3"] {
            let body: Option<String> = sqlx::query_scalar("SELECT request FROM tasks WHERE id = ?")
                .bind(id)
                .fetch_one(&store.pool)
                .await
                .expect("select");
            assert_eq!(body, None, "{id} kept its request");
            let record = store.get(id).await.expect("get").expect("kept until its TTL");
            assert!(matches!(record.state, State::Ended(_)), "{id}: {record:?}");
            assert_eq!(record.summary.as_deref(), Some("done"), "{id}");
        }
        assert_eq!(store.take_expired(1_001).await.expect("expire").len(), 3);
        store.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let bytes = std::fs::read(journal_path(&path, suffix)).unwrap_or_default();
            let found = bytes.windows(marker.len()).any(|w| w == marker.as_bytes());
            assert!(!found, "{FILE_NAME}{suffix} still holds a request body");
        }
    }

    #[tokio::test]
    async fn store_files_are_private_and_a_read_only_directory_is_not_called_damaged() {
        // tasks.db, -wal and -shm are 0600 whatever the umask; a store that cannot be written is
        // Unwritable naming the directory and WARDEN_ARTIFACTS_DIR, never "damaged".
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("store");
        let path = root.join(FILE_NAME);
        let (store, _) = SqliteStore::open(&path).await.expect("open");
        store.create(&sample("task_p", "alice", 1)).await.expect("create");
        let mode = |p: &std::path::Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&root), 0o700);
        for suffix in ["", "-wal", "-shm"] {
            assert_eq!(mode(&journal_path(&path, suffix)), 0o600, "{FILE_NAME}{suffix}");
        }
        store.close().await;
        // A path under a regular file can never be written, root or not.
        let blocked = dir.path().join("file");
        std::fs::write(&blocked, b"x").expect("file");
        let error = SqliteStore::open(&blocked.join("sub").join(FILE_NAME))
            .await
            .expect_err("not a dir");
        assert!(!error.to_string().contains("damaged"), "{error}");
        // A non-store file is damaged.
        let bogus = dir.path().join("bogus.db");
        std::fs::write(&bogus, vec![b'x'; 8192]).expect("bogus");
        let error = SqliteStore::open(&bogus).await.expect_err("not a store");
        assert!(error.to_string().contains("Move it aside"), "{error}");
        assert!(matches!(error, StoreError::Open { .. }), "{error:?}");
        // Permission: only meaningful when not root (root writes through 0500).
        if nix::unistd::geteuid().is_root() {
            return;
        }
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).expect("dir");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).expect("chmod");
        let error = SqliteStore::open(&locked.join(FILE_NAME))
            .await
            .expect_err("read-only");
        assert!(matches!(error, StoreError::Unwritable { .. }), "{error:?}");
        let text = error.to_string();
        assert!(
            text.contains("WARDEN_ARTIFACTS_DIR") && text.contains(&locked.display().to_string()),
            "{text}"
        );
    }
}
