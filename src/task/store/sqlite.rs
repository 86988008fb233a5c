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
            "UPDATE tasks SET state = ?, summary = ?, error = ?, updated_ms = ? WHERE id = ? AND state = ?",
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
        let damaged = |e: sqlx::Error| {
            fail(format!(
                "{e}; the file is damaged or is not a Warden task store. Move it aside (the task \
                 directories next to it are kept and are imported again) and restart"
            ))
        };
        let options = SqliteConnectOptions::from_str("sqlite:")
            .map_err(|e| fail(e.to_string()))?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
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
            "UPDATE tasks SET state = ?, summary = ?, error = ?, updated_ms = ? \
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
}
