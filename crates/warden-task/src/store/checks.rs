//! Behaviour every [`TaskStore`] backend must share, as checks a backend's
//! tests run against a real store (SQLite here, PostgreSQL in
//! `warden-cluster`): one definition of "the same", not two copies.

use super::{TaskStore, UsageEntry, UsageRow};
use warden_calls::tenant::Principal;

/// How a backend differs from the shared behaviour: the step and what it
/// saw instead (a store error on the way counts: the behaviour failed).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Differs(String);

impl From<String> for Differs {
    fn from(what: String) -> Self {
        Self(what)
    }
}

impl From<&str> for Differs {
    fn from(what: &str) -> Self {
        Self(what.to_string())
    }
}

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
pub async fn usage_accounting(store: &dyn TaskStore) -> Result<(), Differs> {
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
        return Err(format!("usage from 2026-12-01: {all:?}, expected {expected:?}").into());
    }
    let alice = Principal::new("alice").map_err(|e| e.to_string())?;
    let hers = store
        .usage(Some(&alice), "2026-12-02")
        .await
        .map_err(|e| e.to_string())?;
    if hers != expected[1..2] {
        return Err(format!("alice's usage from 2026-12-02: {hers:?}").into());
    }
    saturation(store).await
}

/// Counts past `i64::MAX` neither fail a write nor the report: they are
/// stored clamped, added and summed saturating (a sum that overflowed
/// would fail the `usage` report and the daily limit for everyone).
async fn saturation(store: &dyn TaskStore) -> Result<(), Differs> {
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
        return Err(format!("carol's saturated usage: {rows:?}, expected {expected:?}").into());
    }
    Ok(())
}

/// A task waiting for the person: only a task running on the node pauses;
/// it holds no node or lease (but counts against its owner's task limit)
/// and keeps its request with `resume` merged in
/// (or the given request, when it had none); `waiting` reads it back; the
/// first answer since it paused queues it again with the new `resume`, a
/// second (stale) one changes nothing; a claimer then gets the request
/// with the answer; a waiting task can be cancelled. `Err` says what
/// differed.
pub async fn waiting_for_the_person(store: &dyn TaskStore) -> Result<(), Differs> {
    let owner = Principal::new("alice").map_err(|e| e.to_string())?;
    let since = pauses(store, &owner).await?;
    answers(store, since).await?;
    direct_task_waits(store, &owner).await
}

fn fail(what: &'static str) -> impl Fn(super::StoreError) -> Differs {
    move |e| format!("{what}: {e}").into()
}

fn record(owner: &Principal, id: &str, state: super::State, node: &str) -> super::TaskRecord {
    super::TaskRecord {
        id: id.into(),
        owner: owner.clone(),
        tool: "run_script".into(),
        state,
        summary: None,
        status_message: None,
        error: None,
        created_ms: 1,
        updated_ms: 1,
        ttl_ms: i64::MAX / 4,
        location: format!("/tmp/{id}"),
        detached: true,
        node: node.into(),
        lease_until_ms: i64::MAX / 4,
    }
}

fn script_request() -> serde_json::Value {
    serde_json::json!({"tool": "run_script", "arguments": {"script": "1"}})
}

fn resume_state() -> serde_json::Value {
    serde_json::json!({"journal": [], "answers": [], "pending": {"key": "call-1"}})
}

/// Only the node running a task pauses it; the paused task holds no node,
/// counts against its owner's limit and keeps its request with `resume`.
/// The time it waits since.
async fn pauses(store: &dyn TaskStore, owner: &Principal) -> Result<i64, Differs> {
    use super::State;
    use serde_json::json;
    let request = script_request();
    let queued = record(owner, "task_w1", State::Queued, "");
    store
        .enqueue(&queued, &request, None, 10)
        .await
        .map_err(fail("enqueue"))?;
    let claimed = store
        .claim("node-a", 10, i64::MAX / 4)
        .await
        .map_err(fail("claim"))?
        .ok_or("nothing to claim")?;
    let resume = resume_state();
    let unused = json!({"tool": "other"});
    if store
        .pause(&claimed.record.id, "node-b", &unused, &resume, "asked", 20, None)
        .await
        .map_err(fail("pause on another node"))?
    {
        return Err("a task paused from a node that does not run it".into());
    }
    if !store
        .pause(&claimed.record.id, "node-a", &unused, &resume, "asked", 20, None)
        .await
        .map_err(fail("pause"))?
    {
        return Err("the running task did not pause".into());
    }
    let got = store.get("task_w1").await.map_err(fail("get"))?.ok_or("gone")?;
    if got.state != State::Waiting || !got.node.is_empty() || got.status_message.as_deref() != Some("asked") {
        return Err(format!("the paused record: {got:?}").into());
    }
    // A waiting task counts against its owner's limit.
    let more = store
        .enqueue(
            &record(owner, "task_w3", State::Queued, ""),
            &request,
            Some(1),
            10,
        )
        .await
        .map_err(fail("enqueue over the owner's limit"))?;
    if more != super::Enqueued::OwnerAtLimit {
        return Err(format!("a waiting task did not count against its owner's limit: {more:?}").into());
    }
    let (kept, since) = store
        .waiting("task_w1")
        .await
        .map_err(fail("waiting"))?
        .ok_or("not waiting")?;
    if kept["tool"] != "run_script" || kept["resume"]["pending"]["key"] != "call-1" || since != 20 {
        return Err(format!("the waiting request: {kept} since {since}").into());
    }
    Ok(since)
}

/// A partial answer keeps the task waiting; the first whole answer since
/// it paused queues it with the answer, a stale or second one changes
/// nothing; a claimer gets the request with the answer.
async fn answers(store: &dyn TaskStore, since: i64) -> Result<(), Differs> {
    use serde_json::json;
    // A partial answer keeps it waiting, from a new time on.
    let partial = json!({"responses": {"a": {"action": "accept"}}, "asked": {"b": {}}});
    if !store
        .answer("task_w1", since, &partial, 25, false)
        .await
        .map_err(fail("partial answer"))?
    {
        return Err("the partial answer was not taken".into());
    }
    let (kept, since) = store
        .waiting("task_w1")
        .await
        .map_err(fail("waiting after a partial answer"))?
        .ok_or("a partial answer ended the wait")?;
    if since != 25 || kept["resume"]["asked"]["b"] != json!({}) {
        return Err(format!("after a partial answer: {kept} since {since}").into());
    }
    let answered = json!({"journal": [], "answers": [{"key": "call-1"}]});
    if store
        .answer("task_w1", 20, &answered, 30, true)
        .await
        .map_err(fail("stale answer"))?
    {
        return Err("an answer to a question asked at another time was taken".into());
    }
    if !store
        .answer("task_w1", since, &answered, 30, true)
        .await
        .map_err(fail("answer"))?
    {
        return Err("the answer was not taken".into());
    }
    if store
        .answer("task_w1", since, &answered, 31, true)
        .await
        .map_err(fail("second answer"))?
    {
        return Err("a second answer to the same question was taken".into());
    }
    let resumed = store
        .claim("node-b", 40, i64::MAX / 4)
        .await
        .map_err(fail("claim again"))?
        .ok_or("the answered task was not queued")?;
    if resumed.request["resume"]["answers"][0]["key"] != "call-1" || resumed.request["tool"] != "run_script" {
        return Err(format!("the resumed request: {}", resumed.request).into());
    }
    Ok(())
}

/// A task that was not queued keeps the given request when it pauses,
/// waits only until its question expires, and can be cancelled.
async fn direct_task_waits(store: &dyn TaskStore, owner: &Principal) -> Result<(), Differs> {
    use super::{Ending, State};
    let (request, resume) = (script_request(), resume_state());
    // A task that was not queued keeps the given request when it pauses.
    store
        .create(&record(owner, "task_w2", State::Running, "node-a"))
        .await
        .map_err(fail("create"))?;
    store
        .pause("task_w2", "node-a", &request, &resume, "asked", 50, Some(5_000))
        .await
        .map_err(fail("pause a direct task"))?;
    // It waits only until its question can no longer be answered.
    let direct = store.get("task_w2").await.map_err(fail("get"))?.ok_or("gone")?;
    if direct.expires_ms() != 5_000 {
        return Err(format!("the direct task expires at {}, not 5000", direct.expires_ms()).into());
    }
    let (kept, _) = store
        .waiting("task_w2")
        .await
        .map_err(fail("waiting"))?
        .ok_or("not waiting")?;
    if kept["arguments"]["script"] != "1" || kept["resume"]["pending"]["key"] != "call-1" {
        return Err(format!("the direct task's kept request: {kept}").into());
    }
    let ending = Ending {
        status: super::TaskStatus::Cancelled,
        summary: "cancelled".into(),
        error: None,
        at_ms: 60,
    };
    if !store
        .cancel_queued("task_w2", &ending)
        .await
        .map_err(fail("cancel"))?
    {
        return Err("a waiting task could not be cancelled".into());
    }
    Ok(())
}
