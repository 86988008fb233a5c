//! Long work as MCP Tasks (SEP-2663, `io.modelcontextprotocol/tasks`):
//! a client that declared the extension gets a task at once from
//! `run_script`, polls `tasks/get` (progress in `statusMessage`, the
//! result at the end), cancels with `tasks/cancel`, and finds the task
//! again after disconnecting, after a server restart (then `failed`,
//! "interrupted"), never after its TTL, and never as another principal.
//! Plain calls, clients without tasks and requests that do not ask for a
//! task (`_meta` `warden/task`) behave as before. The records
//! live in `tasks.db`, opened in the background at start; a damaged one
//! is the error of every task tool while guards keep answering.
//!
//! Scenarios that hold for both transports are written once over a
//! [`Peer`] and run over stdio and over a Streamable HTTP session.

use std::path::Path;
use std::time::Duration;

use rmcp::model::{CallToolResponse, ClientConfig, TaskStatus};
use rmcp::service::{ClientLifecycleMode, Peer, RoleClient, RunningService};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::http::HttpServer;
use crate::common::tasks::*;
use crate::common::*;

/// A task id that no task has.
const UNKNOWN: &str = "task_0123456789abcdef0123456789abcdef";

/// The default and largest TTL: `WARDEN_TASKS_MAX_AGE_HOURS` (30 days), in ms.
const MAX_TTL_MS: u64 = 30 * 24 * 3600 * 1000;

/// A busy wait of `s` seconds (scripts have no sleep), defined in a script.
const PAUSE: &str = "fn pause(s) { let t = timestamp(); while t.elapsed < s {} }\n";

/// A quick script: a guard call, then a final answer.
const QUICK: &str = r#"let q = get_quote(#{symbol: "AAPL"});
final_answer(#{task_type: "analysis", summary: "quoted", metrics: #{price: q.price}})"#;

/// A script calling a guard `calls` times with `pause` seconds of work
/// after each, writing a file, then answering.
fn slow_script(calls: usize, pause: f64) -> String {
    format!(
        r#"{PAUSE}
let symbols = ["AAPL", "MSFT", "GOOGL", "AMZN", "NVDA", "JPM", "TSLA", "SAP"];
let total = 0.0;
for i in 0..{calls} {{
    total += get_quote(#{{symbol: symbols[i % 8]}}).price;
    pause({pause});
}}
write_artifact("total.txt", `${{total}}`);
final_answer(#{{task_type: "analysis", summary: "summed", metrics: #{{total: total}}}})"#
    )
}

fn endless() -> Value {
    json!({"script": ENDLESS, "timeout_seconds": 30})
}

/// A client on a Streamable HTTP session declaring tasks (or not).
async fn http_client(
    server: &HttpServer,
    token: Option<&str>,
    tasks: bool,
) -> RunningService<RoleClient, ClientConfig> {
    server
        .client_with(client_config(tasks), token, ClientLifecycleMode::Initialize)
        .await
        .expect("initialize over HTTP")
}

/// A plain `tools/call` (never a task): its structured content.
async fn plain(peer: &Peer<RoleClient>, tool: &str, arguments: Value) -> Value {
    let result = peer
        .call_tool(call_params(tool, arguments, None))
        .await
        .expect("tools/call answered");
    structured(&result)
}

/// The caller's `list_tasks` item for `task_id`.
async fn listed(peer: &Peer<RoleClient>, task_id: &str) -> Option<Value> {
    plain(peer, "list_tasks", json!({"limit": 100})).await["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .find(|t| t["task_id"] == task_id)
        .cloned()
}

/// The JSON-RPC error of a failed request: code and message.
fn rpc_error(error: rmcp::ServiceError) -> (i32, String) {
    match error {
        rmcp::ServiceError::McpError(data) => (data.code.0, data.message.to_string()),
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

/// Checks a fresh `CreateTaskResult`: the wire shape the brief promises.
fn check_created(created: &rmcp::model::CreateTaskResult) -> String {
    let wire = serde_json::to_value(created).expect("serializes");
    assert_eq!(wire["resultType"], "task", "{wire}");
    assert_eq!(wire["status"], "working", "{wire}");
    let id = created.task.task_id.clone();
    let hex = id.strip_prefix("task_").unwrap_or("");
    assert!(
        hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit()),
        "taskId is not task_<32 hex>: {id}"
    );
    assert!(!created.task.created_at.is_empty(), "{wire}");
    assert!(!created.task.last_updated_at.is_empty(), "{wire}");
    assert!(created.task.ttl_ms.is_some(), "ttlMs missing: {wire}");
    assert!(
        created.task.poll_interval_ms.is_some(),
        "pollIntervalMs missing: {wire}"
    );
    id
}

/// Live child processes of `pid` that were not in `before`.
fn new_children(pid: u32, before: &[u32]) -> Vec<u32> {
    children_of(pid)
        .into_iter()
        .filter(|c| !before.contains(c))
        .collect()
}

// ---- scenarios over any transport ----

/// Task-augmented run_script → a task at once → polled to completed with
/// the plain call's result; list_tasks shows it; a late cancel changes nothing.
async fn poll_to_result(peer: Peer<RoleClient>, _server_pid: u32) {
    let peer = &peer;
    let info = peer.peer_info().expect("initialized");
    assert!(
        info.capabilities.supports_tasks(),
        "server does not declare the tasks extension: {:?}",
        info.capabilities
    );
    let created = start_task(peer, "run_script", json!({"script": QUICK}), None).await;
    let id = check_created(&created);
    assert_eq!(created.task.ttl_ms, Some(MAX_TTL_MS), "default TTL");

    let answers = poll_until_ended(peer, &id, Duration::from_secs(60)).await;
    let last = answers.last().expect("an answer");
    let ended = wire(last);
    assert_eq!(ended["resultType"], "complete", "{ended}");
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(ended["taskId"], id.as_str(), "{ended}");
    let result = &ended["result"];
    assert_eq!(result["structuredContent"]["status"], "success", "{ended}");
    assert_eq!(result["structuredContent"]["task_id"], id.as_str(), "{ended}");
    assert_ne!(result["isError"], true, "{ended}");

    let item = listed(peer, &id).await.expect("list_tasks shows the task");
    assert_eq!(item["status"], "success", "{item}");
    assert_eq!(item["tool"], "run_script", "{item}");
    assert!(item["created_at"].is_string(), "{item}");

    // Cancelling an ended task changes nothing: on a 2025-11-25 session it is
    // refused naming its status; a 2026-07-28 request gets the idempotent ack.
    let stateless = info.protocol_version == rmcp::model::ProtocolVersion::V_2026_07_28;
    let cancelled = cancel_task(peer, &id).await;
    if stateless {
        cancelled.expect("cancel of an ended task is acknowledged on 2026-07-28");
    } else {
        let (code, message) = rpc_error(cancelled.expect_err("cancel of an ended task is refused"));
        assert_eq!(code, -32602, "{message}");
        assert!(message.contains("already ended (success)"), "{message}");
    }
    let again = get_task(peer, &id).await.expect("tasks/get");
    let again = wire(&again);
    assert_eq!(again["status"], "completed", "{again}");
    assert_eq!(
        again["result"]["structuredContent"]["status"], "success",
        "{again}"
    );
}

/// While a longer script runs, tasks/get shows `working` with the latest
/// progress note as `statusMessage`.
async fn progress_in_status_message(peer: Peer<RoleClient>, _server_pid: u32) {
    let peer = &peer;
    let created = start_task(
        peer,
        "run_script",
        json!({"script": slow_script(6, 0.4), "timeout_seconds": 60}),
        None,
    )
    .await;
    let id = check_created(&created);
    let answers = poll_until_ended(peer, &id, Duration::from_secs(60)).await;
    let notes: Vec<String> = answers
        .iter()
        .filter(|a| has_status(a, TaskStatus::Working))
        .filter_map(|a| a.task.task.status_message.clone())
        .filter(|m| !m.is_empty())
        .collect();
    assert!(
        !notes.is_empty(),
        "no statusMessage in {} working answers: {:?}",
        answers
            .iter()
            .filter(|a| has_status(a, TaskStatus::Working))
            .count(),
        answers.iter().map(wire).collect::<Vec<_>>()
    );
    assert!(
        notes.iter().any(|n| n.contains("get_quote")),
        "no note names the guard: {notes:?}"
    );
    let last = wire(answers.last().expect("an answer"));
    assert_eq!(last["status"], "completed", "{last}");
    assert_eq!(last["result"]["structuredContent"]["status"], "success", "{last}");
}

/// tasks/cancel on an endless script: acknowledged, then `cancelled`,
/// and its worker process is gone.
async fn cancel_kills_the_worker(peer: Peer<RoleClient>, server_pid: u32) {
    let peer = &peer;
    let before = children_of(server_pid);
    let created = start_task(peer, "run_script", endless(), None).await;
    let id = check_created(&created);
    let started = eventually(Duration::from_secs(10), || {
        !new_children(server_pid, &before).is_empty()
    })
    .await;
    assert!(started, "no script worker started");
    let workers = new_children(server_pid, &before);
    let running = get_task(peer, &id).await.expect("tasks/get");
    assert!(has_status(&running, TaskStatus::Working), "{}", wire(&running));

    cancel_task(peer, &id).await.expect("tasks/cancel acknowledged");
    let answers = poll_until_ended(peer, &id, Duration::from_secs(20)).await;
    let last = answers.last().expect("an answer");
    assert!(has_status(last, TaskStatus::Cancelled), "{}", wire(last));
    let gone = eventually(Duration::from_secs(10), || {
        let now = children_of(server_pid);
        workers.iter().all(|w| !now.contains(w))
    })
    .await;
    assert!(gone, "script worker {workers:?} survived tasks/cancel");
    let item = listed(peer, &id).await.expect("list_tasks shows the task");
    assert_eq!(item["status"], "cancelled", "{item}");
}

// ---- 1-3 over stdio and HTTP ----

/// Runs `scenario` with a client declaring tasks on a fresh stdio server
/// (the peer and the server's pid).
async fn on_stdio<F: Future<Output = ()>>(scenario: impl FnOnce(Peer<RoleClient>, u32) -> F) {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = StdioServer::start(FINANCE, dir.path(), &[], true).await;
    scenario(server.peer().clone(), server.pid).await;
}

/// Runs `scenario` on a Streamable HTTP session declaring tasks.
async fn on_http<F: Future<Output = ()>>(scenario: impl FnOnce(Peer<RoleClient>, u32) -> F) {
    let server = HttpServer::start(FINANCE, &[]).await;
    let client = http_client(&server, None, true).await;
    scenario(client.peer().clone(), server.pid()).await;
}

#[tokio::test]
async fn stdio_task_augmented_run_script_polls_to_its_result() {
    // run_script as a task: CreateTaskResult at once, tasks/get until completed with the result.
    on_stdio(poll_to_result).await;
}

#[tokio::test]
async fn http_task_augmented_run_script_polls_to_its_result() {
    // run_script as a task over a Streamable HTTP session: the same as over stdio.
    on_http(poll_to_result).await;
}

#[tokio::test]
async fn stateless_http_task_augmented_run_script_polls_to_its_result() {
    // 2026-07-28 stateless requests declare tasks in each request's _meta client capabilities.
    let server = HttpServer::start(FINANCE, &[]).await;
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    let client = server
        .client_with(client_config(true), None, lifecycle)
        .await
        .expect("discover over HTTP");
    poll_to_result(client.peer().clone(), server.pid()).await;
}

#[tokio::test]
async fn stdio_progress_shows_in_tasks_get_status_message() {
    // A working task's tasks/get carries its latest progress note as statusMessage.
    on_stdio(progress_in_status_message).await;
}

#[tokio::test]
async fn http_progress_shows_in_tasks_get_status_message() {
    // Over HTTP too: statusMessage while working.
    on_http(progress_in_status_message).await;
}

#[tokio::test]
async fn stdio_tasks_cancel_kills_the_worker_and_says_cancelled() {
    // tasks/cancel: ack, then cancelled, and the script worker is gone.
    on_stdio(cancel_kills_the_worker).await;
}

#[tokio::test]
async fn http_tasks_cancel_kills_the_worker_and_says_cancelled() {
    // Over HTTP too: tasks/cancel kills the worker.
    on_http(cancel_kills_the_worker).await;
}

// ---- 4: plain calls ----

#[tokio::test]
async fn plain_calls_and_non_task_tools_answer_as_before() {
    // A client without tasks gets a plain run_script result; a client with tasks gets plain
    // results from other tools and from arguments refused before a task exists.
    let server = Server::start(FINANCE).await;
    let answer = server
        .client
        .call_tool_once(call_params("run_script", json!({"script": QUICK}), None))
        .await
        .expect("tools/call answered");
    let CallToolResponse::Complete(result) = answer else {
        panic!("a client without tasks got {answer:?}")
    };
    assert_eq!(structured(&result)["status"], "success", "{result:?}");
    assert!(
        structured(&result)["task_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("task_")),
        "{result:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let tasks = StdioServer::start(FINANCE, dir.path(), &[], true).await;
    for (tool, arguments) in [
        ("get_quote", json!({"symbol": "AAPL"})),
        ("list_guards", json!({})),
        ("price_option_t", call_args()),
    ] {
        let answer = tasks
            .peer()
            .call_tool_once(call_params(tool, arguments, None))
            .await
            .expect("tools/call answered");
        let CallToolResponse::Complete(result) = answer else {
            panic!("{tool} with a tasks client: {answer:?}")
        };
        assert!(!is_error(&result), "{tool}: {result:?}");
    }
    assert_eq!(
        plain(tasks.peer(), "get_quote", json!({"symbol": "MSFT"})).await["symbol"],
        "MSFT"
    );
    // Bad arguments are found before a task exists: a plain error result.
    let answer = tasks
        .peer()
        .call_tool_once(call_params("run_script", json!({"script": 5}), None))
        .await
        .expect("tools/call answered");
    let CallToolResponse::Complete(result) = answer else {
        panic!("bad arguments made a task: {answer:?}")
    };
    assert!(is_error(&result), "{result:?}");
}

// ---- 5: disconnect and reconnect ----

/// Starts a task that runs about 3 s (six guard calls, 0.5 s apart).
async fn start_three_second_task(peer: &Peer<RoleClient>) -> String {
    let arguments = json!({"script": slow_script(6, 0.5), "timeout_seconds": 60});
    check_created(&start_task(peer, "run_script", arguments, None).await)
}

/// Polls `id` from a new client: still working at first (its old client
/// left mid-task), then completed with a successful result.
async fn finishes_after_its_client_left(peer: &Peer<RoleClient>, id: &str) {
    let answers = poll_until_ended(peer, id, Duration::from_secs(60)).await;
    assert!(
        has_status(&answers[0], TaskStatus::Working),
        "the task had ended before its client left: {}",
        wire(&answers[0])
    );
    let last = wire(answers.last().expect("an answer"));
    assert_eq!(last["status"], "completed", "{last}");
    assert_eq!(last["result"]["structuredContent"]["status"], "success", "{last}");
    assert_eq!(last["result"]["structuredContent"]["task_id"], id, "{last}");
}

#[tokio::test]
async fn stdio_a_task_outlives_its_client_and_a_new_server_reads_its_result() {
    // The client goes away mid-task: the server finishes the task, then exits; a new server
    // on the same artifacts directory answers tasks/get with the result.
    let dir = tempfile::tempdir().unwrap();
    let mut first = StdioServer::start(FINANCE, dir.path(), &[], true).await;
    let id = start_three_second_task(first.peer()).await;
    let mut process = first.disconnect().await;

    let second = StdioServer::start(FINANCE, dir.path(), &[], true).await;
    finishes_after_its_client_left(second.peer(), &id).await;

    // With its detached task done and its stdin closed, the first server exits by itself.
    let status = tokio::time::timeout(Duration::from_secs(30), process.wait())
        .await
        .expect("the first server exits once its task ended")
        .expect("wait");
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[tokio::test]
async fn http_a_task_outlives_its_session_and_a_new_client_reads_its_result() {
    // Closing the session that started a task does not cancel it; a new session fetches it.
    let server = HttpServer::start(FINANCE, &[]).await;
    let first = http_client(&server, None, true).await;
    let id = start_three_second_task(first.peer()).await;
    first.cancel().await.expect("close the first session");

    let second = http_client(&server, None, true).await;
    finishes_after_its_client_left(second.peer(), &id).await;
}

// ---- 6: SIGKILL mid-task ----

#[tokio::test]
async fn a_task_whose_server_was_killed_is_failed_interrupted_after_restart() {
    // SIGKILL the server mid-task; a new server on the same store reports the task failed,
    // "interrupted", in tasks/get and in list_tasks.
    let dir = tempfile::tempdir().unwrap();
    let mut first = StdioServer::start(FINANCE, dir.path(), &[], true).await;
    let created = start_task(first.peer(), "run_script", endless(), None).await;
    let id = check_created(&created);
    let pid = first.pid;
    assert!(
        eventually(Duration::from_secs(10), || !children_of(pid).is_empty()).await,
        "no script worker started"
    );
    let workers: Vec<Seen> = children_of(pid).into_iter().filter_map(Seen::now).collect();
    let running = get_task(first.peer(), &id).await.expect("tasks/get");
    assert!(has_status(&running, TaskStatus::Working), "{}", wire(&running));
    first.kill().await;

    let second = StdioServer::start(FINANCE, dir.path(), &[], true).await;
    let answer = get_task(second.peer(), &id)
        .await
        .expect("tasks/get after restart");
    let failed = wire(&answer);
    assert_eq!(failed["status"], "failed", "{failed}");
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("interrupted"), "{failed}");
    let item = listed(second.peer(), &id)
        .await
        .expect("list_tasks shows the task");
    assert_eq!(item["status"], "failed", "{item}");

    // Whatever the kill left behind must not spin on for the rest of the run.
    for worker in workers {
        worker.kill();
    }
}

// ---- 7: TTL ----

#[tokio::test]
async fn an_expired_task_loses_its_record_and_its_directory() {
    // A 1 s TTL: once it has passed, tasks/get says unknown (-32602), get_task_result
    // not_found, and the task directory is gone. Requested TTLs are clamped to [1 s, 30 days].
    let dir = tempfile::tempdir().unwrap();
    let server = StdioServer::start(FINANCE, dir.path(), &[], true).await;
    let peer = server.peer();
    let ttl = |ms: u64| Some(json!({"warden/taskTtlMs": ms}));
    let created = start_task(peer, "run_script", json!({"script": QUICK}), ttl(1000)).await;
    let id = check_created(&created);
    assert_eq!(created.task.ttl_ms, Some(1000));
    let last = wire(
        poll_until_ended(peer, &id, Duration::from_secs(60))
            .await
            .last()
            .expect("an answer"),
    );
    assert_eq!(last["result"]["structuredContent"]["status"], "success", "{last}");
    let task_dir = dir.path().join(&id);
    assert!(
        task_dir.is_dir(),
        "task directory {task_dir:?} while the task lives"
    );

    let mut last_answer = String::new();
    let mut expired = false;
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(15) {
        match get_task(peer, &id).await {
            Ok(answer) => last_answer = wire(&answer).to_string(),
            Err(error) => {
                let (code, message) = rpc_error(error);
                assert_eq!(code, -32602, "{message}");
                expired = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(expired, "still there 15 s after a 1 s TTL: {last_answer}");
    let result = peer
        .call_tool(call_params("get_task_result", json!({"task_id": id}), None))
        .await
        .expect("tools/call answered");
    assert!(is_error(&result), "{result:?}");
    assert_eq!(error_code(&result), "not_found", "{:?}", structured(&result));
    // An expired record reads as unknown at once; the sweep that removes it with its
    // directory runs on reads at most once per TASK_SWEEP_MIN_INTERVAL (1 s): read again
    // until it has.
    let swept = std::time::Instant::now();
    while task_dir.exists() && swept.elapsed() < Duration::from_secs(5) {
        let _ = listed(peer, &id).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!task_dir.exists(), "task directory {task_dir:?} outlived its TTL");
    assert!(listed(peer, &id).await.is_none(), "list_tasks still shows {id}");

    // Clamping: below 1 s → 1 s; above the maximum → the maximum.
    for (asked, given) in [(5, 1000), (MAX_TTL_MS * 10, MAX_TTL_MS)] {
        let created = start_task(peer, "run_script", json!({"script": "1"}), ttl(asked)).await;
        assert_eq!(created.task.ttl_ms, Some(given), "asked for {asked} ms");
        poll_until_ended(peer, &created.task.task_id, Duration::from_secs(60)).await;
    }
}

// ---- 8: another principal's task ----

/// Test principals over HTTP: name and API token (the tokens file holds
/// the token's SHA-256).
const TEAM: [(&str, &str); 2] = [("alice", "alice-mcp-tasks-5b0e"), ("bob", "bob-mcp-tasks-c41a")];

fn sha256_hex(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn another_principals_task_id_is_unknown() {
    // Bob's tasks/get and tasks/cancel of alice's task id answer exactly as for a made-up id.
    let tokens = tempfile::tempdir().unwrap();
    let file = tokens.path().join("tokens");
    let lines: String = TEAM
        .iter()
        .map(|(name, token)| format!("{name} {}\n", sha256_hex(token)))
        .collect();
    std::fs::write(&file, lines).unwrap();
    let file = file.display().to_string();
    let server = HttpServer::start(FINANCE, &[("WARDEN_API_TOKENS_FILE", &file)]).await;
    let alice = http_client(&server, Some(TEAM[0].1), true).await;
    let bob = http_client(&server, Some(TEAM[1].1), true).await;

    let created = start_task(alice.peer(), "run_script", json!({"script": QUICK}), None).await;
    let hers = check_created(&created);
    poll_until_ended(alice.peer(), &hers, Duration::from_secs(60)).await;

    // The message may echo the id asked for; compare with it masked.
    let masked = |(code, message): (i32, String), id: &str| (code, message.replace(id, "<task>"));
    let foreign = masked(rpc_error(get_task(bob.peer(), &hers).await.unwrap_err()), &hers);
    let unknown = masked(
        rpc_error(get_task(bob.peer(), UNKNOWN).await.unwrap_err()),
        UNKNOWN,
    );
    assert_eq!(foreign.0, -32602, "{foreign:?}");
    assert_eq!(foreign, unknown, "tasks/get leaks that alice's task exists");

    let foreign = cancel_task(bob.peer(), &hers)
        .await
        .map_err(|e| masked(rpc_error(e), &hers));
    let unknown = cancel_task(bob.peer(), UNKNOWN)
        .await
        .map_err(|e| masked(rpc_error(e), UNKNOWN));
    assert_eq!(foreign, unknown, "tasks/cancel leaks that alice's task exists");
    assert!(listed(bob.peer(), &hers).await.is_none());

    // Alice's task is untouched.
    let answer = wire(&get_task(alice.peer(), &hers).await.expect("alice's tasks/get"));
    assert_eq!(answer["status"], "completed", "{answer}");
}

// ---- 9: a damaged store ----

/// Starts a stdio server on `artifacts` with no client (stdin closed):
/// its exit code and stderr.
async fn start_on(artifacts: &Path) -> (Option<i32>, String) {
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(FINANCE)
            .env("WARDEN_ARTIFACTS_DIR", artifacts)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the server exits in time")
    .expect("run the server");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_damaged_task_store_is_the_error_of_the_task_tools_and_the_server_keeps_serving() {
    // A truncated tasks.db, or one that is not a database: the server starts and answers
    // guards; every task tool answers with an error naming the file and the fix, without a
    // panic; the server is still serving afterwards. The intact store restarts cleanly.
    let dir = tempfile::tempdir().unwrap();
    let mut server = StdioServer::start(FINANCE, dir.path(), &[], true).await;
    let created = start_task(server.peer(), "run_script", json!({"script": QUICK}), None).await;
    poll_until_ended(server.peer(), &created.task.task_id, Duration::from_secs(60)).await;
    let mut process = server.disconnect().await;
    tokio::time::timeout(Duration::from_secs(30), process.wait())
        .await
        .expect("the server exits at the end of its input")
        .expect("wait");
    let (code, stderr) = start_on(dir.path()).await;
    assert_eq!(code, Some(0), "the intact store: {stderr}");

    let db = dir.path().join("tasks.db");
    let bytes = std::fs::read(&db).expect("the server made tasks.db");
    // The server leaves its latest pages in tasks.db-wal (it does not checkpoint at exit), so
    // the main file may hold little beyond its first page: cut it after the 100-byte header
    // and drop the WAL, which leaves the schema page unreadable whatever the WAL held.
    assert!(bytes.len() >= 4096, "tasks.db is {} bytes", bytes.len());
    let garbage: Vec<u8> = b"this is not a Warden task store\n".repeat(300);
    let quote = || call_params("get_quote", json!({"symbol": "AAPL"}), None);
    for (case, content) in [("truncated", bytes[..100].to_vec()), ("garbage", garbage)] {
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(dir.path().join(format!("tasks.db{suffix}")));
        }
        std::fs::write(&db, &content).unwrap();
        let server = StdioServer::start(FINANCE, dir.path(), &[], false).await;
        let answer = server
            .peer()
            .call_tool(quote())
            .await
            .expect("get_quote answered");
        assert_ne!(answer.is_error, Some(true), "{case}: a guard: {answer:?}");
        for (tool, arguments) in [
            ("run_script", json!({"script": QUICK})),
            ("list_tasks", json!({})),
        ] {
            let answer = server
                .peer()
                .call_tool(call_params(tool, arguments, None))
                .await
                .expect("answered");
            assert_eq!(answer.is_error, Some(true), "{case}: {tool}: {answer:?}");
            let text = serde_json::to_string(&answer.structured_content).unwrap();
            assert!(
                text.contains(&db.display().to_string()),
                "{case}: {tool}: the file is not named: {text}"
            );
            assert!(
                text.contains("Move it aside"),
                "{case}: {tool}: no fix named: {text}"
            );
        }
        let answer = server.peer().call_tool(quote()).await.expect("still serving");
        assert_ne!(
            answer.is_error,
            Some(true),
            "{case}: after the refusals: {answer:?}"
        );
        let (code, stderr) = start_on(dir.path()).await;
        assert_eq!(
            code,
            Some(0),
            "{case}: a damaged store is no dead server: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{case}: {stderr}");
        assert!(!stderr.contains("stack backtrace"), "{case}: {stderr}");
    }
}
