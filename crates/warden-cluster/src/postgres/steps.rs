//! The schema steps of the PostgreSQL store (see `warden_task::store::migrations`
//! for how steps are applied and why one is never edited once released).

use warden_task::store::migrations::Step;

/// The steps of the PostgreSQL store, oldest first: the SQLite schema in
/// PostgreSQL types. Ids, owners and nodes compare bytewise (`COLLATE "C"`),
/// as in SQLite, whatever the database's locale; JSON (`error`, `request`)
/// is kept as text, exactly as written (`jsonb` refuses `\u0000`).
pub const POSTGRES: &[Step] = &[
    Step {
        version: 1,
        description: "task records",
        sql: "CREATE TABLE tasks (
            id TEXT COLLATE \"C\" PRIMARY KEY NOT NULL,
            owner TEXT COLLATE \"C\" NOT NULL,
            tool TEXT NOT NULL,
            state TEXT NOT NULL,
            summary TEXT,
            status_message TEXT,
            error TEXT,
            created_ms BIGINT NOT NULL,
            updated_ms BIGINT NOT NULL,
            ttl_ms BIGINT NOT NULL,
            expires_ms BIGINT NOT NULL,
            location TEXT NOT NULL,
            detached BOOLEAN NOT NULL,
            node TEXT COLLATE \"C\" NOT NULL,
            cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
            lease_until_ms BIGINT NOT NULL DEFAULT 0,
            request TEXT
          );
          CREATE INDEX tasks_by_owner ON tasks (owner, created_ms DESC, id DESC);
          CREATE INDEX tasks_ended_by_expiry ON tasks (expires_ms) WHERE state NOT IN ('queued', 'running');
          CREATE INDEX tasks_running ON tasks (lease_until_ms) WHERE state = 'running';
          CREATE INDEX tasks_running_by_node ON tasks (node) WHERE state = 'running';
          CREATE INDEX tasks_queued ON tasks (created_ms, id) WHERE state = 'queued';
          CREATE INDEX tasks_active_by_owner ON tasks (owner) WHERE state IN ('queued', 'running')",
    },
    Step {
        version: 2,
        description: "model token usage per task and day",
        sql: "CREATE TABLE usage (
            task_id TEXT COLLATE \"C\" NOT NULL,
            owner TEXT COLLATE \"C\" NOT NULL,
            day TEXT COLLATE \"C\" NOT NULL,
            model TEXT NOT NULL,
            model_calls BIGINT NOT NULL,
            input_tokens BIGINT NOT NULL,
            output_tokens BIGINT NOT NULL,
            calls_without_usage BIGINT NOT NULL,
            PRIMARY KEY (task_id, day)
          );
          CREATE INDEX usage_by_day ON usage (day, owner)",
    },
    Step {
        version: 3,
        description: "side effects recorded before they run",
        sql: "CREATE TABLE task_side_effects (
            task_id TEXT COLLATE \"C\" NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
            call_id TEXT COLLATE \"C\" NOT NULL,
            seq BIGSERIAL NOT NULL,
            status TEXT NOT NULL,
            side_effect TEXT NOT NULL,
            PRIMARY KEY (task_id, call_id)
          );
          CREATE INDEX task_side_effects_in_order ON task_side_effects (task_id, seq)",
    },
];

#[cfg(test)]
mod tests {
    use warden_task::store::migrations::statements;

    #[test]
    fn versions_count_up_from_one() {
        for (i, step) in super::POSTGRES.iter().enumerate() {
            assert_eq!(step.version, i as i64 + 1, "{}", step.description);
            assert!(statements(step).count() > 0);
        }
    }
}
