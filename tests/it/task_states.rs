//! Issue 24: cancelling a task in each of its states, and a task only for
//! a request that asks for one.
//!
//! `tasks/cancel` on a queued task ends it `cancelled` and it never runs;
//! on a running one (covered for stdio and HTTP in `mcp_tasks.rs`) the
//! worker is killed and it ends `cancelled`; on an ended one it is refused
//! (-32602) with the task's status and the record stays as it was. The
//! plain-call path (`notifications/cancelled`) stops a call waiting for a
//! task slot before anything runs. A client declaring the tasks extension
//! without asking for a task (the MCP Inspector on a 2025-11-25 session)
//! gets plain results from the three task tools.

use std::time::Duration;

use rmcp::model::{CallToolResponse, TaskStatus};
use rmcp::service::{ClientLifecycleMode, Peer, RoleClient};
use serde_json::{Value, json};

use crate::common::http::HttpServer;
use crate::common::tasks::*;
use crate::common::*;

/// A script that writes `ran.txt` and answers: proof that it ran.
const WRITES: &str = r#"write_artifact("ran.txt", "it ran"); 1"#;

/// The `list_tasks` status of `task_id`, if listed.
async fn listed_status(peer: &Peer<RoleClient>, task_id: &str) -> Option<String> {
    let result = peer
        .call_tool(call_params("list_tasks", json!({"limit": 100}), None))
        .await
        .expect("list_tasks answered");
    structured(&result)["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .find(|t| t["task_id"] == task_id)
        .and_then(|t| t["status"].as_str().map(str::to_string))
}

/// Waits up to `limit` until `task_id` is listed with `status`.
async fn until_status(peer: &Peer<RoleClient>, task_id: &str, status: &str, limit: Duration) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if listed_status(peer, task_id).await.as_deref() == Some(status) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// The JSON-RPC error of a failed request: code and message.
fn rpc_error(error: rmcp::ServiceError) -> (i32, String) {
    match error {
        rmcp::ServiceError::McpError(data) => (data.code.0, data.message.to_string()),
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_queued_task_cancelled_never_runs_and_ends_cancelled() {
    // One task slot held by an endless task: a second task waits queued; tasks/cancel ends it
    // cancelled, and once the slot frees it still never runs (no directory, no ran.txt).
    let dir = tempfile::tempdir().unwrap();
    let server = StdioServer::start(FINANCE, dir.path(), &[("WARDEN_MAX_CONCURRENT_TASKS", "1")], true).await;
    let peer = server.peer();
    let holder = start_task(
        peer,
        "run_script",
        json!({"script": ENDLESS, "timeout_seconds": 30}),
        None,
    )
    .await;
    let holder = holder.task.task_id;
    assert!(
        until_status(peer, &holder, "running", Duration::from_secs(10)).await,
        "the first task never ran"
    );
    let queued = start_task(peer, "run_script", json!({"script": WRITES}), None).await;
    let queued = queued.task.task_id;
    assert_eq!(listed_status(peer, &queued).await.as_deref(), Some("queued"));

    cancel_task(peer, &queued)
        .await
        .expect("tasks/cancel of a queued task");
    let answer = get_task(peer, &queued).await.expect("tasks/get");
    assert!(has_status(&answer, TaskStatus::Cancelled), "{}", wire(&answer));
    assert_eq!(listed_status(peer, &queued).await.as_deref(), Some("cancelled"));
    let saved = peer
        .call_tool(call_params("get_task_result", json!({"task_id": queued}), None))
        .await
        .expect("get_task_result answered");
    // Like any task that did not succeed, an error result: its record, not "no such task".
    let saved = structured(&saved);
    assert_eq!(saved["status"], "cancelled", "{saved}");
    assert!(
        saved["note"]
            .as_str()
            .unwrap_or_default()
            .contains("never started"),
        "{saved}"
    );

    // Free the slot; the cancelled task must not be claimed now.
    cancel_task(peer, &holder)
        .await
        .expect("tasks/cancel of the running task");
    let ended = poll_until_ended(peer, &holder, Duration::from_secs(20)).await;
    assert!(has_status(ended.last().unwrap(), TaskStatus::Cancelled));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let answer = get_task(peer, &queued).await.expect("tasks/get");
    assert!(has_status(&answer, TaskStatus::Cancelled), "{}", wire(&answer));
    assert!(
        !dir.path().join(&queued).exists(),
        "the cancelled task got a directory: it ran"
    );
    let events = read_jsonl(&dir.path().join("events.jsonl"));
    assert!(
        !events
            .iter()
            .any(|e| e["event"] == "task_created" && e["task_id"] == queued.as_str()),
        "the cancelled queued task was started"
    );
}

#[tokio::test]
async fn cancelling_an_ended_task_is_refused_with_its_status_and_changes_nothing() {
    // tasks/cancel of a completed task: -32602 naming its status; tasks/get and list_tasks
    // still show the same result.
    let dir = tempfile::tempdir().unwrap();
    let server = StdioServer::start(FINANCE, dir.path(), &[], true).await;
    let peer = server.peer();
    let created = start_task(peer, "run_script", json!({"script": WRITES}), None).await;
    let id = created.task.task_id;
    let before = wire(
        poll_until_ended(peer, &id, Duration::from_secs(60))
            .await
            .last()
            .expect("an answer"),
    );
    assert_eq!(before["status"], "completed", "{before}");

    let (code, message) = rpc_error(cancel_task(peer, &id).await.expect_err("an ended task"));
    assert_eq!(code, -32602, "{message}");
    assert!(message.contains("already ended"), "{message}");
    assert!(message.contains("success"), "the status is not named: {message}");
    let after = wire(&get_task(peer, &id).await.expect("tasks/get"));
    assert_eq!(after["status"], "completed", "{after}");
    assert_eq!(after["result"], before["result"], "the result changed");
    assert_eq!(listed_status(peer, &id).await.as_deref(), Some("success"));
}

#[tokio::test]
async fn a_plain_call_cancelled_while_it_waits_for_a_task_slot_never_runs() {
    // The plain path: a run_script waiting for the only task slot is cancelled by its client
    // (notifications/cancelled); when the slot frees it does not run.
    let server = Server::start_with_env(
        FINANCE,
        &[
            ("WARDEN_MAX_CONCURRENT_TASKS", "1"),
            ("WARDEN_ADMISSION_WAIT_MS", "10000"),
        ],
    )
    .await;
    let holder = server.call("run_script", json!({"script": ENDLESS, "timeout_seconds": 2}));
    let (holder, ()) = tokio::join!(holder, async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let waiting = server.call("run_script", json!({"script": WRITES}));
        assert!(
            tokio::time::timeout(Duration::from_millis(500), waiting)
                .await
                .is_err(),
            "the second call did not wait for the slot"
        );
    });
    assert_eq!(structured(&holder)["status"], "timed_out");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let tasks = structured(&server.call("list_tasks", json!({})).await);
    let listed = tasks["tasks"].as_array().expect("tasks");
    assert_eq!(listed.len(), 1, "the cancelled call made a task: {tasks}");
    let ran = std::fs::read_dir(server.artifacts.path())
        .unwrap()
        .flatten()
        .any(|e| e.path().join("outputs/ran.txt").exists());
    assert!(!ran, "the cancelled call ran");
}

/// Calls the three task tools without asking for a task: each answer must
/// be a plain result (`run_coding_task`, with no model configured, a plain
/// error result).
async fn plain_without_asking(peer: &Peer<RoleClient>, meta: Option<Value>) {
    let batch = json!({"calls": [{"name": "get_quote", "arguments": {"symbol": "AAPL"}}]});
    let mut tools = vec![("run_script", json!({"script": "40 + 2"})), ("run_batch", batch)];
    // Never a live model: only when none is configured (then a plain error result).
    if std::env::var_os("WARDEN_MODEL_API_KEY").is_none()
        && std::env::var_os("WARDEN_MODEL_API_BASE").is_none()
    {
        tools.push(("run_coding_task", json!({"prompt": "price a call"})));
    }
    for (tool, arguments) in tools {
        let answer = tokio::time::timeout(
            Duration::from_secs(60),
            peer.call_tool_once(call_params(tool, arguments, meta.clone())),
        )
        .await
        .expect("answered in time")
        .expect("tools/call answered");
        let CallToolResponse::Complete(result) = answer else {
            panic!("{tool} made a task nobody asked for: {answer:?}")
        };
        if tool == "run_script" {
            assert_eq!(structured(&result)["value"], 42, "{result:?}");
        }
        if tool == "run_batch" {
            assert!(!is_error(&result), "{result:?}");
        }
    }
}

#[tokio::test]
async fn a_client_declaring_tasks_without_asking_gets_plain_results() {
    // The MCP Inspector case: the extension declared on a 2025-11-25 session (stdio and HTTP),
    // no task asked for; also a 2026-07-28 request saying warden/task: false.
    let dir = tempfile::tempdir().unwrap();
    let stdio = StdioServer::start(FINANCE, dir.path(), &[], true).await;
    plain_without_asking(stdio.peer(), None).await;

    let http = HttpServer::start(FINANCE, &[]).await;
    let session = http
        .client_with(client_config(true), None, ClientLifecycleMode::Initialize)
        .await
        .expect("initialize over HTTP");
    plain_without_asking(session.peer(), None).await;

    let stateless = http
        .client_with(
            client_config(true),
            None,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover over HTTP");
    plain_without_asking(stateless.peer(), Some(json!({TASK_META_KEY: false}))).await;

    // Asking explicitly still makes a task; a malformed ask is an error naming the key.
    let created = start_task(stdio.peer(), "run_script", json!({"script": "1"}), None).await;
    poll_until_ended(stdio.peer(), &created.task.task_id, Duration::from_secs(60)).await;
    let error = stdio
        .peer()
        .call_tool_once(call_params(
            "run_script",
            json!({"script": "1"}),
            Some(json!({TASK_META_KEY: "yes"})),
        ))
        .await
        .expect_err("a malformed ask");
    let (code, message) = rpc_error(error);
    assert_eq!(code, -32602, "{message}");
    assert!(message.contains(TASK_META_KEY), "{message}");
}
