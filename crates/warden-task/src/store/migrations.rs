//! The task store's schema, as numbered steps applied in order at startup.
//!
//! A step is never edited once released: a change is a new step. The
//! store records each applied step in `warden_schema`; opening a store
//! applies the missing ones in one transaction that holds the database's
//! write lock (SQLite) or a fixed advisory lock (PostgreSQL), so two
//! servers starting at once apply each step once. A
//! store whose newest step is unknown here was written by a newer Warden
//! and is refused rather than misread.

/// A store written by a newer Warden (its newest step is unknown here):
/// refused rather than misread. `variable` names the setting that points
/// at the store.
#[derive(Debug, thiserror::Error)]
#[error(
    "the store has schema version {current}, newer than this Warden knows ({newest}): run a newer Warden, or point {variable} elsewhere"
)]
pub struct SchemaTooNew {
    pub current: i64,
    pub newest: i64,
    pub variable: &'static str,
}

/// Refuses a store at schema version `current` when `steps` end before it.
pub fn check_version(current: i64, steps: &[Step], variable: &'static str) -> Result<(), SchemaTooNew> {
    let newest = steps.last().map_or(0, |s| s.version);
    if current > newest {
        return Err(SchemaTooNew {
            current,
            newest,
            variable,
        });
    }
    Ok(())
}

/// One schema step.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub version: i64,
    pub description: &'static str,
    /// Statements separated by `;` (no `;` inside a statement).
    pub sql: &'static str,
}

/// The steps of the SQLite store, oldest first (the PostgreSQL store's are
/// `warden_cluster::postgres::steps::POSTGRES`, the same versions).
pub const SQLITE: &[Step] = &[
    Step {
        version: 1,
        description: "task records",
        sql: "CREATE TABLE tasks (
            id TEXT PRIMARY KEY NOT NULL,
            owner TEXT NOT NULL,
            tool TEXT NOT NULL,
            state TEXT NOT NULL,
            summary TEXT,
            status_message TEXT,
            error TEXT,
            created_ms INTEGER NOT NULL,
            updated_ms INTEGER NOT NULL,
            ttl_ms INTEGER NOT NULL,
            expires_ms INTEGER NOT NULL,
            location TEXT NOT NULL,
            detached INTEGER NOT NULL,
            node TEXT NOT NULL,
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            lease_until_ms INTEGER NOT NULL DEFAULT 0,
            request TEXT
          ) STRICT;
          CREATE INDEX tasks_by_owner ON tasks (owner, created_ms DESC, id DESC);
          CREATE INDEX tasks_ended_by_expiry ON tasks (expires_ms) WHERE state NOT IN ('queued', 'running');
          CREATE INDEX tasks_running ON tasks (lease_until_ms) WHERE state = 'running';
          CREATE INDEX tasks_queued ON tasks (created_ms, id) WHERE state = 'queued';
          CREATE INDEX tasks_active_by_owner ON tasks (owner) WHERE state IN ('queued', 'running')",
    },
    Step {
        version: 2,
        description: "model token usage per task and day",
        sql: "CREATE TABLE usage (
            task_id TEXT NOT NULL,
            owner TEXT NOT NULL,
            day TEXT NOT NULL,
            model TEXT NOT NULL,
            model_calls INTEGER NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            calls_without_usage INTEGER NOT NULL,
            PRIMARY KEY (task_id, day)
          ) STRICT;
          CREATE INDEX usage_by_day ON usage (day, owner)",
    },
];

/// The statements of `step`, without blanks.
pub fn statements(step: &Step) -> impl Iterator<Item = &'static str> {
    step.sql.split(';').map(str::trim).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_up_from_one(steps: &[Step]) {
        for (i, step) in steps.iter().enumerate() {
            assert_eq!(step.version, i as i64 + 1, "{}", step.description);
            assert!(statements(step).count() > 0);
        }
    }

    #[test]
    fn versions_count_up_from_one() {
        count_up_from_one(SQLITE);
    }
}
