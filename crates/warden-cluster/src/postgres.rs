//! The shared task store: one PostgreSQL database, so that several Warden
//! nodes see the same records and the same queue (`WARDEN_DATABASE_URL=
//! postgres://…`). Same semantics as the embedded
//! `warden_task::store::sqlite` store, method for method; the runner opens
//! it through [`Opener`], the [`StoreOpener`] the facade hands it when
//! built with the `postgres` feature. Its schema steps are [`steps`].
//!
//! Concurrency: every method is one statement or one transaction.
//! [`TaskStore::claim`] takes the oldest queued row `FOR UPDATE SKIP
//! LOCKED`, so claimers on any number of nodes never wait for each other
//! and never share a task. [`TaskStore::enqueue`] counts and inserts under
//! one cluster-wide advisory lock ([`ENQUEUE_LOCK`], held until commit):
//! the queue limit spans every owner, so a per-owner key could not keep
//! it, and SERIALIZABLE would need a retry loop that a lock makes
//! needless; direct [`TaskStore::create`]s take the same lock shared.
//! Every other change is a single `UPDATE … WHERE state = …` (or
//! `DELETE`): a row lock and PostgreSQL's re-check after it make the
//! first ending win and expire a lapsed lease once.
//!
//! Wake-ups: enqueueing sends `NOTIFY warden_tasks, 'queued'` and a
//! cancel request `'cancel'` (delivered at commit). A background task
//! listens on its own connection and wakes [`TaskStore::wake`]'s `Notify`
//! for each one, and after each (re)connection, since notifications sent
//! meanwhile are lost. It is a hint: callers keep polling.
//!
//! While the database is down (restart, failover, network): a call waits
//! up to [`ACQUIRE_TIMEOUT`] for a connection (a restart shorter than that
//! only slows it down), then fails with [`StoreError::Query`]; a call in
//! flight when the server goes fails at once. Nothing is buffered or
//! retried here: the runner retries at its next claim or heartbeat.
//! Pooled connections are tested before use, so the first call after the
//! database is back opens fresh ones; the listener reconnects every
//! [`RELISTEN_DELAY`]. A write whose commit acknowledgement is lost may
//! have happened: it reads as an error.
//!
//! Plain TCP, no TLS (sqlx is built without it): for loopback and private
//! networks only; a URL asking for TLS (`sslmode=require`, `verify-ca`,
//! `verify-full`) is refused at open. Connect to PostgreSQL itself, not
//! through a transaction-pooling proxy: the listener needs a session.

use std::borrow::Cow;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use sqlx::Row;
use sqlx::postgres::{PgArguments, PgConnectOptions, PgListener, PgPool, PgPoolOptions, PgRow, PgSslMode};
use tokio::sync::Notify;

use warden_calls::events::recovered::SideEffect;
use warden_calls::tenant::Principal;
use warden_task::store::migrations::{self, SchemaTooNew, Step};
use warden_task::store::{
    Claimed, Ending, Enqueued, Lapsed, State, StoreError, StoreOpener, TaskRecord, TaskStore, UsageEntry,
    UsageRow,
};

pub mod steps;

/// How long a call waits for a connection (opening one if needed) before
/// it fails: the bound on a call while the database is unreachable.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the listener waits before connecting again after it lost its
/// connection or could not open one.
pub const RELISTEN_DELAY: Duration = Duration::from_secs(1);
/// Connections a node keeps for its calls (the listener has its own).
const PG_CONNECTIONS: u32 = 8;
/// The channel of the wake-up notifications.
pub const CHANNEL: &str = "warden_tasks";
/// Advisory lock held while the schema steps are checked and applied
/// ("warden" then 1).
pub const MIGRATION_LOCK: i64 = 0x7761_7264_656e_0001;
/// Advisory lock held while an enqueue counts and inserts ("warden" then 2).
pub const ENQUEUE_LOCK: i64 = 0x7761_7264_656e_0002;

const PG_COLUMNS: &str = "id, owner, tool, state, summary, status_message, error, created_ms, \
                          updated_ms, ttl_ms, location, detached, node, lease_until_ms";

type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, PgArguments>;

/// The PostgreSQL task store. Clones share the pool and the listener.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    /// Woken by the listener task for every notification on [`CHANNEL`]
    /// and after each (re)connection; never signalled otherwise.
    wake: Arc<Notify>,
    /// The listener task; aborted when the last clone of the store drops.
    listener: Arc<Listener>,
}

/// The background listener's handle: dropping it stops the task.
#[derive(Debug)]
struct Listener(tokio::task::JoinHandle<()>);

impl Drop for Listener {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl PgStore {
    /// Ends task `id` with `ending` if it is in state `from` (the first
    /// ending wins); `false` if it was not.
    async fn end_from(&self, id: &str, from: State, ending: &Ending) -> Result<bool, StoreError> {
        let statement = sqlx::query(
            "UPDATE tasks SET state = $1, summary = $2, error = $3, updated_ms = $4, request = NULL \
             WHERE id = $5 AND state = $6",
        );
        let done = bind_ending(statement, ending)
            .bind(id)
            .bind(from.as_str())
            .execute(&self.pool)
            .await
            .map_err(query)?;
        Ok(done.rows_affected() == 1)
    }

    /// Connects to the database at `url`, applies the missing schema steps
    /// (one transaction under [`MIGRATION_LOCK`], so nodes starting at once
    /// apply each step once) and starts the listener. Returns the store and
    /// whether it was new (no schema before). Errors name the URL without
    /// its password.
    pub async fn open(url: &str) -> Result<(Self, bool), StoreError> {
        let location = redact(url);
        let fail = |reason: String| StoreError::Open {
            location: location.clone(),
            reason: scrub(&reason, url),
        };
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| {
                fail(format!(
                    "{e}; set WARDEN_DATABASE_URL to postgres://user[:password]@host[:port]/database"
                ))
            })?
            .application_name("warden");
        if matches!(
            options.get_ssl_mode(),
            PgSslMode::Require | PgSslMode::VerifyCa | PgSslMode::VerifyFull
        ) {
            return Err(fail(
                "the URL asks for TLS (sslmode), but this Warden speaks plain TCP only: reach \
                 PostgreSQL over loopback or a private network and drop sslmode (or set it to \
                 disable or prefer)"
                    .into(),
            ));
        }
        let pool = pool_options()
            .max_connections(PG_CONNECTIONS)
            .connect_with(options.clone())
            .await
            .map_err(|e| {
                fail(format!(
                    "{e}; check that PostgreSQL runs at this address, that it accepts this user \
                     and that the database exists (WARDEN_DATABASE_URL)"
                ))
            })?;
        let created = match migrate(&pool, steps::POSTGRES).await {
            Ok(Ok(created)) => created,
            Ok(Err(too_new)) => return Err(fail(too_new.to_string())),
            Err(e) => return Err(fail(format!("applying the schema: {e}"))),
        };
        let wake = Arc::new(Notify::new());
        let listener_pool = pool_options()
            .max_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_lazy_with(options);
        let task = tokio::spawn(listen(listener_pool, wake.clone()));
        Ok((
            Self {
                pool,
                wake,
                listener: Arc::new(Listener(task)),
            },
            created,
        ))
    }
}

/// Opens [`PgStore`]s: what the runner holds to open
/// `WARDEN_DATABASE_URL` (see [`StoreOpener`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Opener;

#[async_trait::async_trait]
impl StoreOpener for Opener {
    async fn open(&self, url: &str) -> Result<Arc<dyn TaskStore>, StoreError> {
        let (store, _) = PgStore::open(url).await?;
        Ok(Arc::new(store))
    }
}

/// The pool settings of both pools: bounded waits, connections checked
/// before use (so a restarted database costs one failed ping, not a call).
fn pool_options() -> PgPoolOptions {
    PgPoolOptions::new()
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .test_before_acquire(true)
}

/// Applies the steps the database lacks under [`MIGRATION_LOCK`];
/// `Ok(Ok(true))` if it had no schema, `Ok(Err(_))` if its schema is newer
/// than `steps`.
async fn migrate(pool: &PgPool, steps: &[Step]) -> Result<Result<bool, SchemaTooNew>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    // Its own statement: the reads below take their snapshot after it.
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS warden_schema (version BIGINT PRIMARY KEY NOT NULL, \
         description TEXT NOT NULL, applied_ms BIGINT NOT NULL)",
    )
    .execute(&mut *tx)
    .await?;
    let current: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM warden_schema")
        .fetch_one(&mut *tx)
        .await?;
    if let Err(too_new) = migrations::check_version(current, steps, "WARDEN_DATABASE_URL") {
        return Ok(Err(too_new));
    }
    for step in steps.iter().filter(|s| s.version > current) {
        for statement in migrations::statements(step) {
            sqlx::query(statement).execute(&mut *tx).await?;
        }
        sqlx::query("INSERT INTO warden_schema (version, description, applied_ms) VALUES ($1, $2, $3)")
            .bind(step.version)
            .bind(step.description)
            .bind(warden_task::store::now_ms())
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(Ok(current == 0))
}

/// The listener task: `LISTEN warden_tasks` on its own connection and
/// wake `wake` for each notification; on any error, connect again after
/// [`RELISTEN_DELAY`]. Runs until aborted (the store dropped).
async fn listen(pool: PgPool, wake: Arc<Notify>) {
    loop {
        if let Ok(mut listener) = PgListener::connect_with(&pool).await
            && listener.listen(CHANNEL).await.is_ok()
        {
            // Anything sent while not listening is lost: look again.
            wake.notify_waiters();
            // `Ok(None)`: the connection dropped and was opened again.
            while listener.try_recv().await.is_ok() {
                wake.notify_waiters();
            }
        }
        tokio::time::sleep(RELISTEN_DELAY).await;
    }
}

/// `url` without its password: `postgres://user:***@host/db`, and
/// `password=***` in the query.
pub fn redact(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (url, None),
    };
    let mut out = match head.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.find('/').map_or((rest, ""), |at| rest.split_at(at));
            let authority = match authority.rsplit_once('@') {
                Some((userinfo, host)) => match userinfo.split_once(':') {
                    Some((user, _)) => format!("{user}:***@{host}"),
                    None => format!("{userinfo}@{host}"),
                },
                None => authority.to_string(),
            };
            format!("{scheme}://{authority}{path}")
        }
        None => head.to_string(),
    };
    if let Some(query) = query {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                _ => pair.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    out
}

/// `text` with the password of `url` masked (a driver message quoting it).
fn scrub(text: &str, url: &str) -> String {
    let head = url.split_once('?').map_or(url, |(head, _)| head);
    let in_userinfo = head
        .split_once("://")
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|authority| authority.rsplit_once('@'))
        .and_then(|(userinfo, _)| userinfo.split_once(':'))
        .map(|(_, password)| password);
    let in_query = url.split_once('?').and_then(|(_, query)| {
        query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(key, _)| key.eq_ignore_ascii_case("password"))
            .map(|(_, value)| value)
    });
    [in_userinfo, in_query]
        .into_iter()
        .flatten()
        .filter(|password| !password.is_empty())
        .fold(text.to_string(), |text, password| text.replace(password, "***"))
}

fn query(e: sqlx::Error) -> StoreError {
    match e {
        sqlx::Error::PoolTimedOut => StoreError::Query(format!(
            "no connection to PostgreSQL within {} s: the database is down, restarting or \
             unreachable (the call can be retried)",
            ACQUIRE_TIMEOUT.as_secs()
        )),
        e => StoreError::Query(e.to_string()),
    }
}

/// `text` storable in PostgreSQL, which refuses NUL in text: each NUL
/// becomes U+FFFD (SQLite would have kept it).
fn clean(text: &str) -> Cow<'_, str> {
    if text.contains('\0') {
        Cow::Owned(text.replace('\0', "\u{FFFD}"))
    } else {
        Cow::Borrowed(text)
    }
}

fn clean_owned(text: Option<&String>) -> Option<String> {
    text.map(|t| clean(t).into_owned())
}

fn record(row: &PgRow) -> Result<TaskRecord, StoreError> {
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
        detached: row.try_get("detached").map_err(query)?,
        node: get_text("node")?,
        lease_until_ms: row.try_get("lease_until_ms").map_err(query)?,
    })
}

/// Binds the ending columns in order: state, summary, error, updated_ms.
fn bind_ending<'q>(statement: PgQuery<'q>, ending: &'q Ending) -> PgQuery<'q> {
    statement
        .bind(State::Ended(ending.status).as_str())
        .bind(clean(&ending.summary).into_owned())
        .bind(ending.error.as_ref().map(|e| e.to_string()))
        .bind(ending.at_ms)
}

#[async_trait::async_trait]
impl TaskStore for PgStore {
    async fn create(&self, r: &TaskRecord) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(query)?;
        // Shared: creates run side by side, but not inside an enqueue's
        // count-and-insert.
        sqlx::query("SELECT pg_advisory_xact_lock_shared($1)")
            .bind(ENQUEUE_LOCK)
            .execute(&mut *tx)
            .await
            .map_err(query)?;
        sqlx::query(
            "INSERT INTO tasks (id, owner, tool, state, summary, status_message, error, created_ms, \
             updated_ms, ttl_ms, expires_ms, location, detached, node, lease_until_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
        )
        .bind(&r.id)
        .bind(r.owner.as_str())
        .bind(&r.tool)
        .bind(r.state.as_str())
        .bind(clean_owned(r.summary.as_ref()))
        .bind(clean_owned(r.status_message.as_ref()))
        .bind(r.error.as_ref().map(|e| e.to_string()))
        .bind(r.created_ms)
        .bind(r.updated_ms)
        .bind(r.ttl_ms)
        .bind(r.expires_ms())
        .bind(&r.location)
        .bind(r.detached)
        .bind(&r.node)
        .bind(r.lease_until_ms)
        .execute(&mut *tx)
        .await
        .map_err(query)?;
        tx.commit().await.map_err(query)
    }

    async fn enqueue(
        &self,
        r: &TaskRecord,
        request: &Value,
        owner_limit: Option<u64>,
        queue_limit: u64,
    ) -> Result<Enqueued, StoreError> {
        let mut tx = self.pool.begin().await.map_err(query)?;
        // Its own statement, so the counts below see every enqueue that
        // held the lock before (READ COMMITTED: a snapshot per statement).
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(ENQUEUE_LOCK)
            .execute(&mut *tx)
            .await
            .map_err(query)?;
        let counts = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM tasks WHERE state = 'queued') AS queued, \
             (SELECT COUNT(*) FROM tasks WHERE owner = $1 AND state IN ('queued', 'running', 'input_required')) AS owned",
        )
        .bind(r.owner.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(query)?;
        let queued: i64 = counts.try_get("queued").map_err(query)?;
        let owned: i64 = counts.try_get("owned").map_err(query)?;
        // Refusals roll back (the transaction drops) and release the lock.
        if u64::try_from(queued).unwrap_or(0) >= queue_limit {
            return Ok(Enqueued::QueueFull);
        }
        if owner_limit.is_some_and(|limit| u64::try_from(owned).unwrap_or(0) >= limit) {
            return Ok(Enqueued::OwnerAtLimit);
        }
        sqlx::query(
            "WITH added AS (INSERT INTO tasks (id, owner, tool, state, summary, status_message, error, \
             created_ms, updated_ms, ttl_ms, expires_ms, location, detached, node, lease_until_ms, request) \
             VALUES ($1, $2, $3, 'queued', NULL, 'queued', NULL, $4, $5, $6, $7, $8, $9, '', 0, $10) \
             RETURNING id) SELECT pg_notify($11, 'queued') FROM added",
        )
        .bind(&r.id)
        .bind(r.owner.as_str())
        .bind(&r.tool)
        .bind(r.created_ms)
        .bind(r.updated_ms)
        .bind(r.ttl_ms)
        .bind(r.expires_ms())
        .bind(&r.location)
        .bind(r.detached)
        .bind(request.to_string())
        .bind(CHANNEL)
        .execute(&mut *tx)
        .await
        .map_err(query)?;
        tx.commit().await.map_err(query)?;
        Ok(Enqueued::Accepted)
    }

    async fn claim(
        &self,
        node: &str,
        now_ms: i64,
        lease_until_ms: i64,
    ) -> Result<Option<Claimed>, StoreError> {
        let row = sqlx::query(&format!(
            "UPDATE tasks SET state = 'running', node = $1, lease_until_ms = $2, updated_ms = $3, \
             status_message = 'started' WHERE state = 'queued' AND id = (SELECT id FROM tasks \
             WHERE state = 'queued' ORDER BY created_ms, id LIMIT 1 FOR UPDATE SKIP LOCKED) \
             RETURNING {PG_COLUMNS}, request"
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
            "UPDATE tasks SET lease_until_ms = $1 WHERE node = $2 AND state = 'running' AND id = ANY($3) RETURNING id",
        )
        .bind(lease_until_ms)
        .bind(node)
        .bind(ids)
        .fetch_all(&self.pool)
        .await
        .map_err(query)
    }

    async fn expire_leases(&self, now_ms: i64, ending: &Ending) -> Result<Vec<String>, StoreError> {
        let statement = sqlx::query(
            "UPDATE tasks SET state = $1, summary = $2, error = $3, updated_ms = $4, request = NULL \
             WHERE state = 'running' AND lease_until_ms < $5 \
             AND NOT EXISTS (SELECT 1 FROM task_side_effects s WHERE s.task_id = tasks.id) RETURNING id",
        );
        let rows = bind_ending(statement, ending)
            .bind(now_ms)
            .fetch_all(&self.pool)
            .await
            .map_err(query)?;
        rows.iter().map(|row| row.try_get("id").map_err(query)).collect()
    }

    /// One row per call (`task_id`, `call_id`), its status beside the
    /// side effect's JSON; removed with the task's record.
    async fn put_side_effect(
        &self,
        id: &str,
        call_id: &str,
        side_effect: &SideEffect,
    ) -> Result<(), StoreError> {
        let text = serde_json::to_string(side_effect).map_err(|e| StoreError::Query(e.to_string()))?;
        sqlx::query(
            "INSERT INTO task_side_effects (task_id, call_id, status, side_effect) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (task_id, call_id) DO UPDATE SET status = EXCLUDED.status, side_effect = EXCLUDED.side_effect",
        )
        .bind(id)
        .bind(clean(call_id).into_owned())
        .bind(clean(&side_effect.status).into_owned())
        .bind(text)
        .execute(&self.pool)
        .await
        .map_err(query)?;
        Ok(())
    }

    async fn lapsed_with_side_effects(&self, now_ms: i64, limit: usize) -> Result<Vec<Lapsed>, StoreError> {
        let lapsed: Vec<(String, String)> = sqlx::query_as(
            "SELECT id, owner FROM tasks WHERE state = 'running' AND lease_until_ms < $1 \
             AND EXISTS (SELECT 1 FROM task_side_effects s WHERE s.task_id = tasks.id)",
        )
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(query)?;
        let mut found = Vec::with_capacity(lapsed.len());
        for (id, owner) in lapsed {
            let mut last: Vec<String> = sqlx::query_scalar(
                "SELECT side_effect FROM task_side_effects WHERE task_id = $1 ORDER BY seq DESC LIMIT $2",
            )
            .bind(&id)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await
            .map_err(query)?;
            last.reverse();
            let counts: Vec<(String, i64)> = sqlx::query_as(
                "SELECT status, COUNT(*) FROM task_side_effects WHERE task_id = $1 GROUP BY status",
            )
            .bind(&id)
            .fetch_all(&self.pool)
            .await
            .map_err(query)?;
            found.push(Lapsed {
                side_effects: last
                    .iter()
                    .filter_map(|text| serde_json::from_str(text).ok())
                    .collect(),
                by_status: counts
                    .into_iter()
                    .map(|(status, n)| (status, u64::try_from(n).unwrap_or(0)))
                    .collect(),
                owner: Principal::new(&owner)
                    .map_err(|e| StoreError::Query(format!("record owner '{owner}': {e}")))?,
                id,
            });
        }
        Ok(found)
    }

    /// One `UPDATE … WHERE` the lease still lapsed: a renewal or another
    /// node's ending in between wins.
    async fn end_lapsed(&self, id: &str, now_ms: i64, ending: &Ending) -> Result<bool, StoreError> {
        let statement = sqlx::query(
            "UPDATE tasks SET state = $1, summary = $2, error = $3, updated_ms = $4, request = NULL \
             WHERE id = $5 AND state = 'running' AND lease_until_ms < $6",
        );
        let done = bind_ending(statement, ending)
            .bind(id)
            .bind(now_ms)
            .execute(&self.pool)
            .await
            .map_err(query)?;
        Ok(done.rows_affected() == 1)
    }

    async fn queued(&self) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tasks WHERE state = 'queued'")
            .fetch_one(&self.pool)
            .await
            .map_err(query)?;
        Ok(u64::try_from(n).unwrap_or(0))
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
        let done = sqlx::query(
            "UPDATE tasks SET state = 'input_required', \
             request = (COALESCE(request, $6)::jsonb || jsonb_build_object('resume', $1::jsonb))::text, \
             status_message = $2, node = '', lease_until_ms = 0, updated_ms = $3, \
             ttl_ms = COALESCE($7::BIGINT - created_ms, ttl_ms), expires_ms = COALESCE($7::BIGINT, expires_ms) \
             WHERE id = $4 AND state = 'running' AND node = $5",
        )
        .bind(resume.to_string())
        .bind(clean(message).into_owned())
        .bind(at_ms)
        .bind(id)
        .bind(node)
        .bind(request.to_string())
        .bind(until_ms)
        .execute(&self.pool)
        .await
        .map_err(query)?;
        Ok(done.rows_affected() == 1)
    }

    async fn waiting(&self, id: &str) -> Result<Option<(Value, i64)>, StoreError> {
        let row: Option<(Option<String>, i64)> = sqlx::query_as(
            "SELECT request, updated_ms FROM tasks WHERE id = $1 AND state = 'input_required'",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(query)?;
        Ok(row.map(|(request, since)| {
            let request = request
                .and_then(|text| serde_json::from_str(&text).ok())
                .unwrap_or(Value::Null);
            (request, since)
        }))
    }

    /// Queues the answered task again and wakes every node's claimer, as
    /// enqueueing does.
    async fn answer(
        &self,
        id: &str,
        since_ms: i64,
        resume: &Value,
        at_ms: i64,
        queue: bool,
    ) -> Result<bool, StoreError> {
        // A partial answer keeps the task waiting and wakes nobody.
        let done: Option<(String,)> = sqlx::query_as(
            "WITH answered AS (UPDATE tasks SET state = CASE WHEN $6 THEN 'queued' ELSE 'input_required' END, \
             request = (COALESCE(request, '{}')::jsonb || jsonb_build_object('resume', $1::jsonb))::text, \
             status_message = CASE WHEN $6 THEN 'answered; queued to resume' ELSE status_message END, \
             updated_ms = $2 \
             WHERE id = $3 AND state = 'input_required' AND updated_ms = $4 RETURNING id) \
             SELECT id FROM answered, pg_notify($5, CASE WHEN $6 THEN 'queued' ELSE 'answered' END)",
        )
        .bind(resume.to_string())
        .bind(at_ms)
        .bind(id)
        .bind(since_ms)
        .bind(CHANNEL)
        .bind(queue)
        .fetch_optional(&self.pool)
        .await
        .map_err(query)?;
        Ok(done.is_some())
    }

    async fn note(&self, id: &str, message: &str, at_ms: i64) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE tasks SET status_message = $1, updated_ms = $2 WHERE id = $3 AND state = 'running'",
        )
        .bind(clean(message).into_owned())
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
        let row = sqlx::query(&format!("SELECT {PG_COLUMNS} FROM tasks WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(query)?;
        row.as_ref().map(record).transpose()
    }

    async fn list(&self, owner: &Principal, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {PG_COLUMNS} FROM tasks WHERE owner = $1 ORDER BY created_ms DESC, id DESC LIMIT $2"
        ))
        .bind(owner.as_str())
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(query)?;
        rows.iter().map(record).collect()
    }

    async fn running(&self) -> Result<Vec<TaskRecord>, StoreError> {
        let rows = sqlx::query(&format!("SELECT {PG_COLUMNS} FROM tasks WHERE state = 'running'"))
            .fetch_all(&self.pool)
            .await
            .map_err(query)?;
        rows.iter().map(record).collect()
    }

    async fn request_cancel(&self, id: &str) -> Result<bool, StoreError> {
        // One statement: the flag and the notification commit together.
        let rows = sqlx::query(
            "WITH asked AS (UPDATE tasks SET cancel_requested = TRUE WHERE id = $1 AND state = 'running' \
             RETURNING id) SELECT pg_notify($2, 'cancel') FROM asked",
        )
        .bind(id)
        .bind(CHANNEL)
        .fetch_all(&self.pool)
        .await
        .map_err(query)?;
        Ok(rows.len() == 1)
    }

    async fn cancels_for(&self, node: &str) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar("SELECT id FROM tasks WHERE state = 'running' AND cancel_requested AND node = $1")
            .bind(node)
            .fetch_all(&self.pool)
            .await
            .map_err(query)
    }

    async fn take_expired(&self, now_ms: i64) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query(
            "DELETE FROM tasks WHERE state NOT IN ('queued', 'running') AND expires_ms <= $1 \
             RETURNING id, location",
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
        sqlx::query("DELETE FROM tasks WHERE id = $1")
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

    /// As SQLite's: counts clamped to `i64::MAX` and added saturating
    /// (`LEAST(old, MAX - new) + new`, `new` never negative).
    async fn add_usage(&self, entry: &UsageEntry) -> Result<(), StoreError> {
        let n = warden_task::store::usage_column;
        sqlx::query(
            "INSERT INTO usage (task_id, owner, day, model, model_calls, input_tokens, output_tokens, calls_without_usage)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (task_id, day) DO UPDATE SET
               model_calls = LEAST(usage.model_calls, 9223372036854775807 - EXCLUDED.model_calls) + EXCLUDED.model_calls,
               input_tokens = LEAST(usage.input_tokens, 9223372036854775807 - EXCLUDED.input_tokens) + EXCLUDED.input_tokens,
               output_tokens = LEAST(usage.output_tokens, 9223372036854775807 - EXCLUDED.output_tokens) + EXCLUDED.output_tokens,
               calls_without_usage = LEAST(usage.calls_without_usage, 9223372036854775807 - EXCLUDED.calls_without_usage)
                 + EXCLUDED.calls_without_usage",
        )
        .bind(&entry.task_id)
        .bind(clean(entry.owner.as_str()).into_owned())
        .bind(&entry.day)
        .bind(clean(&entry.model).into_owned())
        .bind(n(entry.model_calls))
        .bind(n(entry.input_tokens))
        .bind(n(entry.output_tokens))
        .bind(n(entry.calls_without_usage))
        .execute(&self.pool)
        .await
        .map_err(query)?;
        Ok(())
    }

    /// As SQLite's: each row floored at 0, the sums (`numeric`, exact)
    /// capped at `i64::MAX` before the cast to `BIGINT`, which would
    /// otherwise fail the report with "bigint out of range".
    async fn usage(&self, owner: Option<&Principal>, from_day: &str) -> Result<Vec<UsageRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT owner, day, COUNT(*)::BIGINT,
                    LEAST(SUM(GREATEST(model_calls, 0)), 9223372036854775807)::BIGINT,
                    LEAST(SUM(GREATEST(input_tokens, 0)), 9223372036854775807)::BIGINT,
                    LEAST(SUM(GREATEST(output_tokens, 0)), 9223372036854775807)::BIGINT,
                    LEAST(SUM(GREATEST(calls_without_usage, 0)), 9223372036854775807)::BIGINT
             FROM usage WHERE day >= $1 AND ($2::TEXT IS NULL OR owner = $2)
             GROUP BY day, owner ORDER BY day, owner",
        )
        .bind(from_day)
        .bind(owner.map(|o| o.as_str().to_owned()))
        .fetch_all(&self.pool)
        .await
        .map_err(query)?;
        rows.iter()
            .map(|row| {
                let n = |i: usize| row.try_get::<i64, _>(i);
                let sums = [n(2)?, n(3)?, n(4)?, n(5)?, n(6)?];
                Ok(UsageRow::from_sums(row.try_get(0)?, row.try_get(1)?, sums))
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .map_err(query)
    }

    fn wake(&self) -> Option<Arc<Notify>> {
        Some(self.wake.clone())
    }

    /// Stops the listener and closes the pool's connections (waiting for
    /// calls in flight to return theirs).
    async fn close(&self) {
        self.listener.0.abort();
        self.pool.close().await;
    }
}

#[cfg(test)]
mod tests;
