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
//!
//! SQLite is compiled in (`rusqlite`, bundled) and called only on tokio's
//! blocking pool, through at most `CONNECTIONS` connections (`pool`
//! says why that shape); this module holds the SQL and the file checks.
//! The schema is [`migrations::SQLITE`], the same steps and versions as
//! every earlier Warden wrote, so an existing `tasks.db` opens unchanged.

mod pool;

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, TransactionBehavior, params};
use serde_json::Value;

use self::pool::Pool;
use super::migrations::{self, Step};
use super::{
    Claimed, Ending, Enqueued, State, StoreError, TaskRecord, TaskStore, UsageEntry, UsageRow, usage_column,
};
use warden_calls::tenant::Principal;

/// The store's file name in the artifacts directory.
pub const FILE_NAME: &str = "tasks.db";
/// How long a write waits for another process's write to finish.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections (and so blocking threads) the store uses at most: reads
/// run in parallel with one writer (WAL); a fifth call waits for one.
const CONNECTIONS: u32 = 4;
/// Prepared statements kept per connection: every statement below, once.
const STATEMENT_CACHE: usize = 32;

/// The record columns, in [`Stored::read`]'s terms; a macro so that the
/// statements stay `&'static str` for the statement cache.
macro_rules! columns {
    () => {
        "id, owner, tool, state, summary, status_message, error, created_ms, updated_ms, ttl_ms, \
         location, detached, node, lease_until_ms"
    };
}

/// The SQLite task store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: Pool,
}

impl SqliteStore {
    /// Opens (creating if missing) the store at `path`, checks it and
    /// applies the missing schema steps. Returns the store and whether it
    /// was new (no schema before), so the caller can import task
    /// directories written before the store existed.
    pub async fn open(path: &Path) -> Result<(Self, bool), StoreError> {
        let owned = path.to_path_buf();
        let (first, created) = tokio::task::spawn_blocking(move || open_checked(&owned))
            .await
            .map_err(|e| StoreError::Open {
                location: path.display().to_string(),
                reason: e.to_string(),
            })??;
        let pool = Pool::new(path, first, CONNECTIONS);
        Ok((Self { pool }, created))
    }

    /// Ends task `id` with `ending` if it is in state `from` (the first
    /// ending wins); `false` if it was not.
    async fn end_from(&self, id: &str, from: State, ending: &Ending) -> Result<bool, StoreError> {
        let id = id.to_owned();
        let ending = EndingColumns::from(ending);
        self.pool
            .run(move |c| {
                let done = c
                    .prepare_cached(
                        "UPDATE tasks SET state = ?, summary = ?, error = ?, updated_ms = ?, request = NULL \
                         WHERE id = ? AND state = ?",
                    )?
                    .execute(params![
                        ending.state,
                        ending.summary,
                        ending.error,
                        ending.at_ms,
                        id,
                        from.as_str()
                    ])?;
                Ok(done == 1)
            })
            .await
    }
}

/// Opens the first connection on a blocking thread: makes the files
/// private, checks the database and applies the missing schema steps.
fn open_checked(path: &Path) -> Result<(Connection, bool), StoreError> {
    let fail = |reason: String| StoreError::Open {
        location: path.display().to_string(),
        reason,
    };
    let damaged = |e: rusqlite::Error| match sqlite_code(&e) {
        Some(code) if DAMAGED_CODES.contains(&(code & 0xff)) => fail(format!(
            "{}; the file is damaged or is not a Warden task store. Move it aside (the task \
             directories next to it are kept and are imported again) and restart",
            describe(&e)
        )),
        Some(code) if UNWRITABLE_CODES.contains(&(code & 0xff)) => StoreError::unwritable(path, describe(&e)),
        _ => fail(describe(&e)),
    };
    prepare_files(path)?;
    let mut conn = connect(path).map_err(damaged)?;
    let verdict: String = conn
        .query_row("PRAGMA quick_check(1)", [], |row| row.get(0))
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
    let created = migrate(&mut conn, migrations::SQLITE).map_err(|e| match e {
        StoreError::Query(reason) => fail(reason),
        other => other,
    })?;
    Ok((conn, created))
}

/// One connection to the store at `path`, set up as every one must be:
/// the busy timeout before anything that may wait for a lock, then WAL,
/// `synchronous=NORMAL` and `secure_delete` (a forgotten request body or
/// a deleted record is overwritten with zeros, not left readable in a
/// free page). The file itself is made by [`prepare_files`] first.
fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let flags =
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA secure_delete = ON")?;
    Ok(conn)
}

/// Applies the steps the store at `conn` lacks, holding the write lock
/// (`BEGIN IMMEDIATE`) for the whole check-and-apply; `true` if the store
/// had no schema before. Any failure rolls the whole of it back.
fn migrate(conn: &mut Connection, steps: &[Step]) -> Result<bool, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(query)?;
    tx.execute(
        "CREATE TABLE IF NOT EXISTS warden_schema (version INTEGER PRIMARY KEY NOT NULL, \
         description TEXT NOT NULL, applied_ms INTEGER NOT NULL)",
        [],
    )
    .map_err(query)?;
    let current: i64 = tx
        .query_row("SELECT COALESCE(MAX(version), 0) FROM warden_schema", [], |row| {
            row.get(0)
        })
        .map_err(query)?;
    migrations::check_version(current, steps, "WARDEN_ARTIFACTS_DIR")
        .map_err(|too_new| StoreError::Query(too_new.to_string()))?;
    for step in steps.iter().filter(|s| s.version > current) {
        for statement in migrations::statements(step) {
            tx.execute(statement, []).map_err(query)?;
        }
        tx.execute(
            "INSERT INTO warden_schema (version, description, applied_ms) VALUES (?, ?, ?)",
            params![step.version, step.description, super::now_ms()],
        )
        .map_err(query)?;
    }
    tx.commit().map_err(query)?;
    Ok(current == 0)
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
fn sqlite_code(e: &rusqlite::Error) -> Option<i32> {
    match e {
        rusqlite::Error::SqliteFailure(failure, _) => Some(failure.extended_code),
        _ => None,
    }
}

/// `e` in the words the store's messages have always used (`error
/// returned from database: (code: N) message`): the extended code tells
/// apart errors whose messages alone are ambiguous (`database is locked`).
fn describe(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(failure, message) => format!(
            "error returned from database: (code: {}) {}",
            failure.extended_code,
            message.clone().unwrap_or_else(|| failure.to_string())
        ),
        other => other.to_string(),
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
        warden_calls::artifacts::safe_path::create_private_dir_all(dir).map_err(|e| {
            match e.raw_os_error() {
                Some(errno) if StoreError::is_unwritable_errno(errno) => StoreError::unwritable(path, &e),
                _ => fail(format!(
                    "cannot create its directory: {e}; set WARDEN_ARTIFACTS_DIR to a writable directory"
                )),
            }
        })?;
    }
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(warden_calls::artifacts::safe_path::FILE_MODE)
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
    warden_calls::artifacts::safe_path::make_private(&file).map_err(|e| {
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
        let made = warden_calls::artifacts::safe_path::create_private(&probe);
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
        let _ = warden_calls::artifacts::safe_path::make_private(&file);
    }
}

fn query(e: rusqlite::Error) -> StoreError {
    StoreError::Query(describe(&e))
}

/// A record's columns as stored, read on the blocking thread;
/// [`Stored::into_record`] checks them on the way out.
struct Stored {
    id: String,
    owner: String,
    tool: String,
    state: String,
    summary: Option<String>,
    status_message: Option<String>,
    error: Option<String>,
    created_ms: i64,
    updated_ms: i64,
    ttl_ms: i64,
    location: String,
    detached: i64,
    node: String,
    lease_until_ms: i64,
}

impl Stored {
    /// The [`columns!`] of `row`.
    fn read(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get("id")?,
            owner: row.get("owner")?,
            tool: row.get("tool")?,
            state: row.get("state")?,
            summary: row.get("summary")?,
            status_message: row.get("status_message")?,
            error: row.get("error")?,
            created_ms: row.get("created_ms")?,
            updated_ms: row.get("updated_ms")?,
            ttl_ms: row.get("ttl_ms")?,
            location: row.get("location")?,
            detached: row.get("detached")?,
            node: row.get("node")?,
            lease_until_ms: row.get("lease_until_ms")?,
        })
    }

    fn into_record(self) -> Result<TaskRecord, StoreError> {
        let owner = Principal::new(&self.owner)
            .map_err(|e| StoreError::Query(format!("record owner '{}': {e}", self.owner)))?;
        let state = State::parse(&self.state)
            .ok_or_else(|| StoreError::Query(format!("record state '{}' is unknown", self.state)))?;
        Ok(TaskRecord {
            id: self.id,
            owner,
            tool: self.tool,
            state,
            summary: self.summary,
            status_message: self.status_message,
            error: self.error.and_then(|text| serde_json::from_str(&text).ok()),
            created_ms: self.created_ms,
            updated_ms: self.updated_ms,
            ttl_ms: self.ttl_ms,
            location: self.location,
            detached: self.detached != 0,
            node: self.node,
            lease_until_ms: self.lease_until_ms,
        })
    }
}

/// The ending columns, owned for the blocking thread, bound in order:
/// state, summary, error, updated_ms.
struct EndingColumns {
    state: &'static str,
    summary: String,
    error: Option<String>,
    at_ms: i64,
}

impl From<&Ending> for EndingColumns {
    fn from(ending: &Ending) -> Self {
        Self {
            state: State::Ended(ending.status).as_str(),
            summary: ending.summary.clone(),
            error: ending.error.as_ref().map(|e| e.to_string()),
            at_ms: ending.at_ms,
        }
    }
}

/// Every row `sql` yields, mapped by `map`. Always steps to the end, so a
/// write with `RETURNING` has committed (or reported why not) when this
/// returns.
fn all<T>(
    c: &Connection,
    sql: &str,
    values: impl rusqlite::Params,
    map: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    let mut statement = c.prepare_cached(sql)?;
    statement.query_map(values, map)?.collect()
}

/// The records of `stored`, checked.
fn records(stored: Vec<Stored>) -> Result<Vec<TaskRecord>, StoreError> {
    stored.into_iter().map(Stored::into_record).collect()
}

/// A `COUNT(*)` as the unsigned number it is.
fn count_of(c: &Connection, sql: &str) -> rusqlite::Result<u64> {
    let n: i64 = c.prepare_cached(sql)?.query_row([], |row| row.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

#[async_trait::async_trait]
impl TaskStore for SqliteStore {
    async fn create(&self, r: &TaskRecord) -> Result<(), StoreError> {
        let r = r.clone();
        self.pool
            .run(move |c| {
                c.prepare_cached(
                    "INSERT INTO tasks (id, owner, tool, state, summary, status_message, error, created_ms, \
                     updated_ms, ttl_ms, expires_ms, location, detached, node, lease_until_ms) \
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                )?
                .execute(params![
                    r.id,
                    r.owner.as_str(),
                    r.tool,
                    r.state.as_str(),
                    r.summary,
                    r.status_message,
                    r.error.as_ref().map(|e| e.to_string()),
                    r.created_ms,
                    r.updated_ms,
                    r.ttl_ms,
                    r.expires_ms(),
                    r.location,
                    i64::from(r.detached),
                    r.node,
                    r.lease_until_ms,
                ])?;
                Ok(())
            })
            .await
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
        let r = r.clone();
        let request = request.to_string();
        self.pool
            .run(move |c| {
                // One statement, so one write transaction: the counts and
                // the insert cannot interleave with another writer.
                let done = c
                    .prepare_cached(
                        "INSERT INTO tasks (id, owner, tool, state, summary, status_message, error, created_ms, \
                         updated_ms, ttl_ms, expires_ms, location, detached, node, lease_until_ms, request) \
                         SELECT ?, ?, ?, 'queued', NULL, 'queued', NULL, ?, ?, ?, ?, ?, ?, '', 0, ? \
                         WHERE (? IS NULL OR (SELECT COUNT(*) FROM tasks WHERE owner = ? AND state IN ('queued', 'running', 'input_required')) < ?) \
                         AND (SELECT COUNT(*) FROM tasks WHERE state = 'queued') < ?",
                    )?
                    .execute(params![
                        r.id,
                        r.owner.as_str(),
                        r.tool,
                        r.created_ms,
                        r.updated_ms,
                        r.ttl_ms,
                        r.expires_ms(),
                        r.location,
                        i64::from(r.detached),
                        request,
                        owner_limit,
                        r.owner.as_str(),
                        owner_limit,
                        queue_limit,
                    ])?;
                if done == 1 {
                    return Ok(Enqueued::Accepted);
                }
                // Which limit it was: a read after the refused insert.
                let queued = count_of(c, QUEUED)?;
                if queued >= u64::try_from(queue_limit).unwrap_or(0) {
                    return Ok(Enqueued::QueueFull);
                }
                Ok(Enqueued::OwnerAtLimit)
            })
            .await
    }

    async fn claim(
        &self,
        node: &str,
        now_ms: i64,
        lease_until_ms: i64,
    ) -> Result<Option<Claimed>, StoreError> {
        let node = node.to_owned();
        let claimed = self
            .pool
            .run(move |c| {
                all(
                    c,
                    concat!(
                        "UPDATE tasks SET state = 'running', node = ?, lease_until_ms = ?, updated_ms = ?, \
                         status_message = 'started' WHERE id = (SELECT id FROM tasks WHERE state = 'queued' \
                         ORDER BY created_ms, id LIMIT 1) RETURNING ",
                        columns!(),
                        ", request"
                    ),
                    params![node, lease_until_ms, now_ms],
                    |row| Ok((Stored::read(row)?, row.get::<_, Option<String>>("request")?)),
                )
            })
            .await?;
        let Some((stored, request)) = claimed.into_iter().next() else {
            return Ok(None);
        };
        Ok(Some(Claimed {
            record: stored.into_record()?,
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
        let node = node.to_owned();
        let ids = serde_json::json!(ids).to_string();
        self.pool
            .run(move |c| {
                all(
                    c,
                    "UPDATE tasks SET lease_until_ms = ? WHERE node = ? AND state = 'running' \
                     AND id IN (SELECT value FROM json_each(?)) RETURNING id",
                    params![lease_until_ms, node, ids],
                    |row| row.get(0),
                )
            })
            .await
    }

    async fn expire_leases(&self, now_ms: i64, ending: &Ending) -> Result<Vec<String>, StoreError> {
        let ending = EndingColumns::from(ending);
        self.pool
            .run(move |c| {
                all(
                    c,
                    "UPDATE tasks SET state = ?, summary = ?, error = ?, updated_ms = ?, request = NULL \
                     WHERE state = 'running' AND lease_until_ms < ? RETURNING id",
                    params![ending.state, ending.summary, ending.error, ending.at_ms, now_ms],
                    |row| row.get(0),
                )
            })
            .await
    }

    async fn end_lapsed(&self, id: &str, now_ms: i64, ending: &Ending) -> Result<bool, StoreError> {
        let id = id.to_owned();
        let ending = EndingColumns::from(ending);
        self.pool
            .run(move |c| {
                let done = c.execute(
                    "UPDATE tasks SET state = ?, summary = ?, error = ?, updated_ms = ?, request = NULL \
                     WHERE id = ? AND state = 'running' AND lease_until_ms < ?",
                    params![
                        ending.state,
                        ending.summary,
                        ending.error,
                        ending.at_ms,
                        id,
                        now_ms
                    ],
                )?;
                Ok(done == 1)
            })
            .await
    }

    async fn queued(&self) -> Result<u64, StoreError> {
        self.pool.run(|c| count_of(c, QUEUED)).await
    }

    async fn cancel_queued(&self, id: &str, ending: &Ending) -> Result<bool, StoreError> {
        Ok(self.end_from(id, State::Queued, ending).await?
            || self.end_from(id, State::Waiting, ending).await?)
    }

    async fn pause(
        &self,
        id: &str,
        node: &str,
        request: &Value,
        resume: &Value,
        message: &str,
        at_ms: i64,
        until_ms: Option<i64>,
    ) -> Result<bool, StoreError> {
        let (id, node, message) = (id.to_owned(), node.to_owned(), message.to_owned());
        let (request, resume) = (request.to_string(), resume.to_string());
        self.pool
            .run(move |c| {
                let done = c
                    .prepare_cached(
                        "UPDATE tasks SET state = 'input_required', request = json_set(COALESCE(request, json(?)), '$.resume', json(?)), \
                         status_message = ?, node = '', lease_until_ms = 0, updated_ms = ?, \
                         ttl_ms = COALESCE(? - created_ms, ttl_ms), expires_ms = COALESCE(?, expires_ms) \
                         WHERE id = ? AND state = 'running' AND node = ?",
                    )?
                    .execute(params![request, resume, message, at_ms, until_ms, until_ms, id, node])?;
                Ok(done == 1)
            })
            .await
    }

    async fn waiting(&self, id: &str) -> Result<Option<(Value, i64)>, StoreError> {
        let id = id.to_owned();
        let row = self
            .pool
            .run(move |c| {
                c.prepare_cached(
                    "SELECT request, updated_ms FROM tasks WHERE id = ? AND state = 'input_required'",
                )?
                .query_row([id], |row| {
                    Ok((row.get::<_, Option<String>>(0)?, row.get::<_, i64>(1)?))
                })
                .optional()
            })
            .await?;
        Ok(row.map(|(request, since)| {
            let request = request
                .and_then(|text| serde_json::from_str(&text).ok())
                .unwrap_or(Value::Null);
            (request, since)
        }))
    }

    async fn answer(
        &self,
        id: &str,
        since_ms: i64,
        resume: &Value,
        at_ms: i64,
        queue: bool,
    ) -> Result<bool, StoreError> {
        let (id, request) = (id.to_owned(), resume.to_string());
        self.pool
            .run(move |c| {
                let done = c
                    .prepare_cached(
                        "UPDATE tasks SET state = CASE WHEN ? THEN 'queued' ELSE 'input_required' END, \
                         request = json_set(COALESCE(request, '{}'), '$.resume', json(?)), \
                         status_message = CASE WHEN ? THEN 'answered; queued to resume' ELSE status_message END, \
                         updated_ms = ? \
                         WHERE id = ? AND state = 'input_required' AND updated_ms = ?",
                    )?
                    .execute(params![queue, request, queue, at_ms, id, since_ms])?;
                Ok(done == 1)
            })
            .await
    }

    async fn note(&self, id: &str, message: &str, at_ms: i64) -> Result<(), StoreError> {
        let id = id.to_owned();
        let message = message.to_owned();
        self.pool
            .run(move |c| {
                c.prepare_cached(
                    "UPDATE tasks SET status_message = ?, updated_ms = ? WHERE id = ? AND state = 'running'",
                )?
                .execute(params![message, at_ms, id])?;
                Ok(())
            })
            .await
    }

    async fn end(&self, id: &str, ending: &Ending) -> Result<bool, StoreError> {
        self.end_from(id, State::Running, ending).await
    }

    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let id = id.to_owned();
        let stored = self
            .pool
            .run(move |c| {
                c.prepare_cached(concat!("SELECT ", columns!(), " FROM tasks WHERE id = ?"))?
                    .query_row([id], Stored::read)
                    .optional()
            })
            .await?;
        stored.map(Stored::into_record).transpose()
    }

    async fn list(&self, owner: &Principal, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        let owner = owner.as_str().to_owned();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let stored = self
            .pool
            .run(move |c| {
                all(
                    c,
                    concat!(
                        "SELECT ",
                        columns!(),
                        " FROM tasks WHERE owner = ? ORDER BY created_ms DESC, id DESC LIMIT ?"
                    ),
                    params![owner, limit],
                    Stored::read,
                )
            })
            .await?;
        records(stored)
    }

    async fn running(&self) -> Result<Vec<TaskRecord>, StoreError> {
        let stored = self
            .pool
            .run(|c| {
                all(
                    c,
                    concat!("SELECT ", columns!(), " FROM tasks WHERE state = 'running'"),
                    [],
                    Stored::read,
                )
            })
            .await?;
        records(stored)
    }

    async fn request_cancel(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.pool
            .run(move |c| {
                let done = c
                    .prepare_cached(
                        "UPDATE tasks SET cancel_requested = 1 WHERE id = ? AND state = 'running'",
                    )?
                    .execute([id])?;
                Ok(done == 1)
            })
            .await
    }

    async fn cancels_for(&self, node: &str) -> Result<Vec<String>, StoreError> {
        let node = node.to_owned();
        self.pool
            .run(move |c| {
                all(
                    c,
                    "SELECT id FROM tasks WHERE state = 'running' AND cancel_requested = 1 AND node = ?",
                    [node],
                    |row| row.get(0),
                )
            })
            .await
    }

    async fn take_expired(&self, now_ms: i64) -> Result<Vec<(String, String)>, StoreError> {
        self.pool
            .run(move |c| {
                let gone = all(
                    c,
                    "DELETE FROM tasks WHERE state NOT IN ('queued', 'running') AND expires_ms <= ? \
                     RETURNING id, location",
                    [now_ms],
                    |row| Ok((row.get("id")?, row.get("location")?)),
                )?;
                if !gone.is_empty() {
                    // The removed records' pages were zeroed (secure_delete);
                    // their older copies in the write-ahead log go too. Best
                    // effort: a reader holding the log open makes it wait for
                    // the next sweep.
                    let _ = c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
                }
                Ok(gone)
            })
            .await
    }

    async fn delete(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.pool
            .run(move |c| {
                c.prepare_cached("DELETE FROM tasks WHERE id = ?")?
                    .execute([id])?;
                Ok(())
            })
            .await
    }

    async fn count(&self) -> Result<u64, StoreError> {
        self.pool.run(|c| count_of(c, "SELECT COUNT(*) FROM tasks")).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.pool.run(|c| c.query_row("SELECT 1", [], |_| Ok(()))).await
    }

    /// Adds `entry` to its task's row for the day. Counts are stored
    /// clamped to [`super::USAGE_COLUMN_MAX`] and added saturating (`MIN(old,
    /// MAX - new) + new`, where `new` is never negative), so no write
    /// overflows and no row wraps negative.
    async fn add_usage(&self, entry: &UsageEntry) -> Result<(), StoreError> {
        let entry = entry.clone();
        self.pool
            .run(move |c| {
                c.prepare_cached(
                    "INSERT INTO usage (task_id, owner, day, model, model_calls, input_tokens, output_tokens, calls_without_usage)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                     ON CONFLICT (task_id, day) DO UPDATE SET
                       model_calls = MIN(model_calls, 9223372036854775807 - excluded.model_calls) + excluded.model_calls,
                       input_tokens = MIN(input_tokens, 9223372036854775807 - excluded.input_tokens) + excluded.input_tokens,
                       output_tokens = MIN(output_tokens, 9223372036854775807 - excluded.output_tokens) + excluded.output_tokens,
                       calls_without_usage = MIN(calls_without_usage, 9223372036854775807 - excluded.calls_without_usage) + excluded.calls_without_usage",
                )?
                .execute(params![
                    entry.task_id,
                    entry.owner.as_str(),
                    entry.day,
                    entry.model,
                    usage_column(entry.model_calls),
                    usage_column(entry.input_tokens),
                    usage_column(entry.output_tokens),
                    usage_column(entry.calls_without_usage)
                ])?;
                Ok(())
            })
            .await
    }

    /// Sums per principal and day with `TOTAL` (a double, which never
    /// overflows, exact below 2^53) over each row's value floored at 0,
    /// cast back to an integer, which saturates at [`super::USAGE_COLUMN_MAX`]:
    /// `SUM` would fail the whole report with "integer overflow" once one
    /// principal's rows added past `i64::MAX` (rows written before counts
    /// were clamped may hold such values, or negative ones).
    async fn usage(&self, owner: Option<&Principal>, from_day: &str) -> Result<Vec<UsageRow>, StoreError> {
        let owner = owner.map(|o| o.as_str().to_owned());
        let from_day = from_day.to_owned();
        self.pool
            .run(move |c| {
                let mut statement = c.prepare_cached(
                    "SELECT owner, day, COUNT(*), CAST(TOTAL(MAX(model_calls, 0)) AS INTEGER),
                            CAST(TOTAL(MAX(input_tokens, 0)) AS INTEGER), CAST(TOTAL(MAX(output_tokens, 0)) AS INTEGER),
                            CAST(TOTAL(MAX(calls_without_usage, 0)) AS INTEGER)
                     FROM usage WHERE day >= ?1 AND (?2 IS NULL OR owner = ?2)
                     GROUP BY day, owner ORDER BY day, owner",
                )?;
                let rows = statement.query_map(params![from_day, owner], |row| {
                    let n = |i: usize| row.get::<_, i64>(i);
                    let sums = [n(2)?, n(3)?, n(4)?, n(5)?, n(6)?];
                    Ok(UsageRow::from_sums(row.get(0)?, row.get(1)?, sums))
                })?;
                rows.collect()
            })
            .await
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

/// How many tasks are queued.
const QUEUED: &str = "SELECT COUNT(*) FROM tasks WHERE state = 'queued'";

#[cfg(test)]
mod tests;
