//! MCP Tasks bench (issue 13): task creation to first `tasks/get`, the task
//! store's cost per task, and `list` with 10,000 records.
//!
//! ```sh
//! cargo build --release -p warden-finance && \
//!   cargo run --release -p warden-finance --example task_bench [-- --tasks 200 --records 10000]
//! ```
//!
//! (a) Over stdio, a client declaring the tasks extension against the release
//! `warden-finance`: `--tasks` (200) task-augmented `run_script` calls of a
//! trivial script, one at a time; each is timed from sending `tools/call` to
//! the answer of the first `tasks/get` (the task is then polled to its end,
//! untimed). (b) `SqliteStore` directly, in a temp dir, 2,000 tasks one
//! after another: create + note + end (a plain call's task), then enqueue +
//! claim + note + end (an MCP task); target ≤ 1 ms per task. (c) The same
//! store with `--records` (10,000) ended records of one owner (`local`, the
//! stdio principal) and as many of ten others: `list` of the owner's newest
//! 20 and 100; target ≤ 10 ms (p99). (d) The `list_tasks` tool over stdio on
//! that store (limit 20 and 100), end to end through MCP.

// A bench: any failure should stop it loudly.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, GetTaskParams, Implementation,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::json;
use warden::Principal;
use warden::task_store::sqlite::{FILE_NAME, SqliteStore};
use warden::task_store::{Ending, Enqueued, State, TaskRecord, TaskStore, now_ms};

/// Tasks timed in (b).
const STORE_TASKS: usize = 2_000;
/// `list` calls timed per limit in (c).
const LISTS: usize = 200;

/// The number after `name` on the command line, or `default`.
fn arg(name: &str, default: usize) -> usize {
    let mut args = std::env::args().skip_while(|a| a != name).skip(1);
    args.next().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The `q` quantile of sorted `samples`, in ms.
fn ms(samples: &[Duration], q: f64) -> f64 {
    let i = ((samples.len() as f64 * q) as usize).min(samples.len() - 1);
    samples[i].as_secs_f64() * 1000.0
}

fn row(name: &str, samples: &mut [Duration], target_ms: Option<f64>) {
    samples.sort();
    let target = target_ms.map_or(String::new(), |t| {
        format!("   target ≤ {t} ms: p99 is {:.2}× it", ms(samples, 0.99) / t)
    });
    println!(
        "{name:<44} p50 {:>8.3} ms   p99 {:>8.3} ms   (n={}){target}",
        ms(samples, 0.50),
        ms(samples, 0.99),
        samples.len()
    );
}

#[tokio::main]
async fn main() {
    let tasks = arg("--tasks", 200);
    let records = arg("--records", 10_000);
    println!(
        "MCP Tasks bench: {tasks} stdio tasks; store {STORE_TASKS} tasks; list over {records}+{records} records"
    );
    creation_to_first_get(tasks).await;
    store_cost().await;
    let filled = tempfile::tempdir().unwrap();
    list_cost(filled.path(), records).await;
    list_tasks_cost(filled.path(), records).await;
}

/// A client (declaring tasks or not) of the release `warden-finance` over
/// stdio on `artifacts`.
async fn serve(artifacts: &Path, tasks: bool) -> RunningService<RoleClient, ClientConfig> {
    let exe = std::env::current_exe().unwrap();
    let server_bin = exe.parent().unwrap().parent().unwrap().join("warden-finance");
    assert!(
        server_bin.exists(),
        "build it first: cargo build --release -p warden-finance"
    );
    let mut command = tokio::process::Command::new(&server_bin);
    command.env("WARDEN_ARTIFACTS_DIR", artifacts);
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let capabilities = if tasks {
        ClientCapabilities::builder().enable_tasks().build()
    } else {
        ClientCapabilities::default()
    };
    let config = ClientConfig::new(capabilities, Implementation::new("task-bench", "0"));
    config.serve(transport).await.unwrap()
}

/// (a) tools/call (task-augmented) → CreateTaskResult → first tasks/get.
async fn creation_to_first_get(tasks: usize) {
    let artifacts = tempfile::tempdir().unwrap();
    let client = serve(artifacts.path(), true).await;
    let arguments = json!({"script": "1"}).as_object().cloned().unwrap();
    let (mut created, mut first_get, mut ended) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..tasks {
        let start = Instant::now();
        let answer = client
            .call_tool_once(CallToolRequestParams::new("run_script").with_arguments(arguments.clone()))
            .await
            .unwrap();
        let CallToolResponse::Task(task) = answer else {
            panic!("not a task: {answer:?}")
        };
        created.push(start.elapsed());
        let id = task.task.task_id;
        let mut state = client.get_task(GetTaskParams::new(id.as_str())).await.unwrap();
        first_get.push(start.elapsed());
        while !state.task.status().is_terminal() {
            tokio::time::sleep(Duration::from_millis(5)).await;
            state = client.get_task(GetTaskParams::new(id.as_str())).await.unwrap();
        }
        ended.push(start.elapsed());
        let wire = serde_json::to_value(&state).unwrap();
        assert_eq!(wire["result"]["structuredContent"]["status"], "success", "{wire}");
    }
    client.cancel().await.unwrap();
    row("(a) tools/call → CreateTaskResult", &mut created, None);
    row("(a) tools/call → first tasks/get answered", &mut first_get, None);
    row("(a) tools/call → completed (5 ms polls)", &mut ended, None);
}

fn record(id: String, owner: &Principal, state: State, created_ms: i64) -> TaskRecord {
    TaskRecord {
        location: format!("/tmp/bench/{id}"),
        id,
        owner: owner.clone(),
        tool: "run_script".into(),
        state,
        summary: None,
        status_message: None,
        error: None,
        created_ms,
        updated_ms: created_ms,
        ttl_ms: 30 * 24 * 3600 * 1000,
        detached: true,
        node: "bench".into(),
        lease_until_ms: created_ms + 30_000,
    }
}

fn task_id(i: usize) -> String {
    format!("task_{i:032x}")
}

/// (b) The store writes of one task, one task after another: create +
/// note + end (a plain call's task), and enqueue + claim + note + end (an
/// MCP task, queued and claimed by a server with a free slot).
async fn store_cost() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = SqliteStore::open(&dir.path().join(FILE_NAME)).await.unwrap();
    let owner = Principal::new("alice").unwrap();
    // The ended state's status (its type is not exported by name).
    let Some(State::Ended(success)) = State::parse("success") else {
        panic!("'success' is an ended state")
    };
    let ending = |at_ms| Ending {
        status: success,
        summary: "done".into(),
        error: None,
        at_ms,
    };
    let request = json!({"tool": "run_script", "arguments": {"script": "1"}});
    for queued in [false, true] {
        let mut per_task = Vec::with_capacity(STORE_TASKS);
        // Time in each write: create or enqueue, claim, note, end.
        let mut steps = [Duration::ZERO; 4];
        let all = Instant::now();
        for i in 0..STORE_TASKS {
            let start = Instant::now();
            let id = task_id(i + usize::from(queued) * STORE_TASKS);
            let at = now_ms();
            if queued {
                let task = record(id.clone(), &owner, State::Queued, at);
                let answer = store.enqueue(&task, &request, Some(64), 1_000).await.unwrap();
                assert_eq!(answer, Enqueued::Accepted);
                steps[0] += start.elapsed();
                let step = Instant::now();
                let claimed = store.claim("bench", at, at + 30_000).await.unwrap().unwrap();
                assert_eq!(claimed.record.id, id);
                steps[1] += step.elapsed();
            } else {
                let task = record(id.clone(), &owner, State::Running, at);
                store.create(&task).await.unwrap();
                steps[0] += start.elapsed();
            }
            let step = Instant::now();
            store.note(&id, "calling get_quote", at).await.unwrap();
            steps[2] += step.elapsed();
            let step = Instant::now();
            assert!(store.end(&id, &ending(at)).await.unwrap());
            steps[3] += step.elapsed();
            per_task.push(start.elapsed());
        }
        let (what, first) = if queued {
            ("enqueue + claim + note + end", "enqueue")
        } else {
            ("create + note + end", "create")
        };
        let mean_us = all.elapsed().as_secs_f64() * 1e6 / STORE_TASKS as f64;
        let each = |d: Duration| d.as_secs_f64() * 1e6 / STORE_TASKS as f64;
        let claim = if queued {
            format!(" claim {:.0}", each(steps[1]))
        } else {
            String::new()
        };
        println!(
            "(b) store: {what}, mean {mean_us:.1} µs per task ({:.2}× the 1 ms target); \
             µs each: {first} {:.0}{claim} note {:.0} end {:.0}",
            mean_us / 1000.0,
            each(steps[0]),
            each(steps[2]),
            each(steps[3]),
        );
        row(&format!("(b) store: {what}"), &mut per_task, Some(1.0));
    }
}

/// (c) `list` of one owner's newest 20 and 100 among `records` of theirs
/// and `records` of ten other owners, in a store made in `artifacts`.
async fn list_cost(artifacts: &Path, records: usize) {
    let (store, _) = SqliteStore::open(&artifacts.join(FILE_NAME)).await.unwrap();
    let owner = Principal::local();
    let others: Vec<Principal> = (0..10)
        .map(|i| Principal::new(&format!("other{i}")).unwrap())
        .collect();
    let ended = State::parse("success").unwrap();
    let fill = Instant::now();
    let base = now_ms();
    // Interleaved, so the owner's rows are spread through the table.
    for i in 0..records * 2 {
        let who = if i % 2 == 0 {
            &owner
        } else {
            &others[(i / 2) % others.len()]
        };
        let mut task = record(task_id(i), who, ended, base + i as i64);
        task.summary = Some("done".into());
        store.create(&task).await.unwrap();
    }
    println!(
        "(c) filled {} records in {:.1} s",
        store.count().await.unwrap(),
        fill.elapsed().as_secs_f64()
    );
    for limit in [20, 100] {
        let mut samples = Vec::with_capacity(LISTS);
        for _ in 0..LISTS {
            let start = Instant::now();
            let got = store.list(&owner, limit).await.unwrap();
            samples.push(start.elapsed());
            assert_eq!(got.len(), limit);
        }
        row(
            &format!("(c) store list newest {limit} of {records}"),
            &mut samples,
            Some(10.0),
        );
    }
    // An MCP task of an owner with this many records: enqueue checks the
    // owner's queued and running count. Each is claimed and ended at once.
    let Some(State::Ended(success)) = State::parse("success") else {
        panic!("'success' is an ended state")
    };
    let request = json!({"tool": "run_script", "arguments": {"script": "1"}});
    let mut samples = Vec::with_capacity(LISTS);
    for i in 0..LISTS {
        let id = task_id(records * 2 + i);
        let at = now_ms();
        let task = record(id.clone(), &owner, State::Queued, at);
        let start = Instant::now();
        let answer = store.enqueue(&task, &request, Some(64), 1_000).await.unwrap();
        samples.push(start.elapsed());
        assert_eq!(answer, Enqueued::Accepted);
        store.claim("bench", at, at + 30_000).await.unwrap().unwrap();
        let ending = Ending {
            status: success,
            summary: "done".into(),
            error: None,
            at_ms: at,
        };
        assert!(store.end(&id, &ending).await.unwrap());
    }
    row(
        &format!("(c) store enqueue, owner has {records}"),
        &mut samples,
        Some(1.0),
    );
}

/// (d) `list_tasks` over stdio on the store (c) filled in `artifacts`.
async fn list_tasks_cost(artifacts: &Path, records: usize) {
    let client = serve(artifacts, false).await;
    for limit in [20, 100] {
        let arguments = json!({"limit": limit}).as_object().cloned().unwrap();
        let mut samples = Vec::with_capacity(LISTS);
        for _ in 0..LISTS {
            let start = Instant::now();
            let result = client
                .call_tool(CallToolRequestParams::new("list_tasks").with_arguments(arguments.clone()))
                .await
                .unwrap();
            samples.push(start.elapsed());
            let listed = result.structured_content.unwrap()["tasks"]
                .as_array()
                .unwrap()
                .len();
            assert_eq!(listed, limit);
        }
        row(
            &format!("(d) list_tasks over stdio, {limit} of {records}"),
            &mut samples,
            Some(10.0),
        );
    }
    client.cancel().await.unwrap();
}
