//! Behaviour every [`TaskStore`] backend must share, as checks a backend's
//! tests run against a real store (SQLite here, PostgreSQL in
//! `warden-cluster`): one definition of "the same", not two copies.

use super::{TaskStore, UsageEntry, UsageRow};
use crate::tenant::Principal;

fn entry(task: &str, owner: &str, day: &str, input: u64, output: u64, unknown: u64) -> UsageEntry {
    UsageEntry {
        task_id: task.into(),
        owner: Principal::new(owner).unwrap_or_else(|_| Principal::local()),
        day: day.into(),
        model: "m".into(),
        model_calls: 1,
        input_tokens: input,
        output_tokens: output,
        calls_without_usage: unknown,
    }
}

/// Usage adds up per task and day, sums per principal and day, filters by
/// owner and first day, and orders by day then principal. `Err` says what
/// differed.
pub async fn usage_accounting(store: &dyn TaskStore) -> Result<(), String> {
    let entries = [
        entry("task_a", "alice", "2026-12-01", 100, 20, 0),
        entry("task_a", "alice", "2026-12-01", 50, 10, 0),
        entry("task_a", "alice", "2026-12-02", 1, 1, 0),
        entry("task_b", "alice", "2026-12-02", 0, 0, 1),
        entry("task_c", "bob", "2026-12-02", 7, 3, 0),
    ];
    for e in &entries {
        store.add_usage(e).await.map_err(|e| e.to_string())?;
    }
    let row = |principal: &str, day: &str, tasks, calls, input, output, unknown| UsageRow {
        principal: principal.into(),
        day: day.into(),
        tasks,
        model_calls: calls,
        input_tokens: input,
        output_tokens: output,
        total_tokens: input + output,
        calls_without_usage: unknown,
    };
    let all = store.usage(None, "2026-12-01").await.map_err(|e| e.to_string())?;
    let expected = vec![
        row("alice", "2026-12-01", 1, 2, 150, 30, 0),
        row("alice", "2026-12-02", 2, 2, 1, 1, 1),
        row("bob", "2026-12-02", 1, 1, 7, 3, 0),
    ];
    if all != expected {
        return Err(format!("usage from 2026-12-01: {all:?}, expected {expected:?}"));
    }
    let alice = Principal::new("alice").map_err(|e| e.to_string())?;
    let hers = store
        .usage(Some(&alice), "2026-12-02")
        .await
        .map_err(|e| e.to_string())?;
    if hers != expected[1..2] {
        return Err(format!("alice's usage from 2026-12-02: {hers:?}"));
    }
    saturation(store).await
}

/// Counts past `i64::MAX` neither fail a write nor the report: they are
/// stored clamped, added and summed saturating (a sum that overflowed
/// would fail the `usage` report and the daily limit for everyone).
async fn saturation(store: &dyn TaskStore) -> Result<(), String> {
    let huge = [
        entry("task_d", "carol", "2026-12-09", u64::MAX, 0, 0),
        entry("task_d", "carol", "2026-12-09", u64::MAX, 0, 0),
        entry("task_e", "carol", "2026-12-09", 5, i64::MAX as u64, 1),
    ];
    for e in &huge {
        store
            .add_usage(e)
            .await
            .map_err(|e| format!("a huge count was not stored: {e}"))?;
    }
    let carol = Principal::new("carol").map_err(|e| e.to_string())?;
    let rows = store
        .usage(Some(&carol), "2026-12-09")
        .await
        .map_err(|e| format!("the report failed over huge counts: {e}"))?;
    let max = i64::MAX as u64;
    let expected = vec![UsageRow {
        principal: "carol".into(),
        day: "2026-12-09".into(),
        tasks: 2,
        model_calls: 3,
        input_tokens: max,
        output_tokens: max,
        total_tokens: max + max,
        calls_without_usage: 1,
    }];
    if rows != expected {
        return Err(format!(
            "carol's saturated usage: {rows:?}, expected {expected:?}"
        ));
    }
    Ok(())
}
