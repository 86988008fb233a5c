//! Guard calls as MCP tasks (`Guard::task_support`), over stdio with
//! rmcp's client against the conformance app's task fixtures: a task that
//! answers the plain call's result, one cancelled while its worker runs,
//! a required-task guard refusing a client without the extension (-32021),
//! a tool error (`completed`, `isError`) and a panic (`failed`), and a task
//! whose two questions are answered one at a time, the second after the
//! server that ran it was killed and another started on the same store.

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, GetTaskResult, Implementation, MetaObject, RequestMetaObject, TaskStatus,
    UpdateTaskParams,
};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

/// The app on stdio over `artifacts`, its client declaring the tasks
/// extension when `tasks`.
async fn start(artifacts: &Path, tasks: bool) -> RunningService<RoleClient, ClientConfig> {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_warden-conformance"));
    command
        .env("WARDEN_ARTIFACTS_DIR", artifacts)
        .current_dir(artifacts);
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let capabilities = if tasks {
        ClientCapabilities::builder().enable_tasks().build()
    } else {
        ClientCapabilities::default()
    };
    let config = ClientConfig::new(capabilities, Implementation::new("guard-task-tests", "0"));
    tokio::time::timeout(Duration::from_secs(10), config.serve(transport))
        .await
        .expect("initialize in time")
        .expect("initialize")
}

/// `tools/call` of `tool`, asking for a task when `task` (`_meta`
/// `warden/task`).
fn call(tool: &str, arguments: Value, task: bool) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let mut params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
    if task {
        let mut meta = serde_json::Map::new();
        meta.insert("warden/task".into(), Value::Bool(true));
        params.meta = Some(RequestMetaObject(MetaObject(meta)));
    }
    params
}

/// The task a task-asking call of `tool` answers with: its id.
async fn start_task(peer: &Peer<RoleClient>, tool: &str, arguments: Value) -> String {
    match peer
        .call_tool_once(call(tool, arguments, true))
        .await
        .expect("tools/call")
    {
        CallToolResponse::Task(task) => task.task.task_id.clone(),
        other => panic!("{tool} did not answer with a task: {other:?}"),
    }
}

async fn get(peer: &Peer<RoleClient>, id: &str) -> GetTaskResult {
    peer.get_task(GetTaskParams::new(id)).await.expect("tasks/get")
}

fn wire(answer: &GetTaskResult) -> Value {
    serde_json::to_value(answer).expect("serializes")
}

/// `tasks/get` until the task is in `status` or ended (at most 30 s).
async fn until(peer: &Peer<RoleClient>, id: &str, status: TaskStatus) -> GetTaskResult {
    let start = Instant::now();
    loop {
        let answer = get(peer, id).await;
        let now = answer.task.status();
        if now == status || now.is_terminal() {
            return answer;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "still {now:?}: {}",
            wire(&answer)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn update(peer: &Peer<RoleClient>, id: &str, responses: Value) -> Result<(), rmcp::ServiceError> {
    let Value::Object(map) = responses else {
        panic!("object")
    };
    peer.update_task(UpdateTaskParams::new(id, map.into_iter().collect()))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_task_answers_what_the_plain_call_answers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = start(dir.path(), true).await;
    let arguments = json!({"seconds": 0.2, "label": "sum"});
    // Not asked for: the plain call.
    let plain = match client
        .call_tool_once(call("slow_compute", arguments.clone(), false))
        .await
        .expect("plain call")
    {
        CallToolResponse::Complete(result) => result,
        other => panic!("a call that did not ask got {other:?}"),
    };
    let id = start_task(client.peer(), "slow_compute", arguments).await;
    let first = get(client.peer(), &id).await;
    assert_eq!(first.task.status(), TaskStatus::Working, "{}", wire(&first));
    let ended = until(client.peer(), &id, TaskStatus::Completed).await;
    let ended = wire(&ended);
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(ended["result"]["content"], json!(plain.content), "{ended}");
    assert_eq!(ended["result"]["content"][0]["text"], "sum: computed after 0.2 s");
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_guard_task_stops_its_worker_and_ends_it_cancelled() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = start(dir.path(), true).await;
    let id = start_task(client.peer(), "slow_compute", json!({"seconds": 60})).await;
    until(client.peer(), &id, TaskStatus::Working).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = Instant::now();
    client
        .peer()
        .cancel_task(CancelTaskParams::new(id.as_str()))
        .await
        .expect("tasks/cancel");
    let ended = until(client.peer(), &id, TaskStatus::Cancelled).await;
    assert_eq!(ended.task.status(), TaskStatus::Cancelled, "{}", wire(&ended));
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "the 60 s call was not stopped: {:?}",
        asked.elapsed()
    );
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_task_guard_refuses_a_client_without_the_extension() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = start(dir.path(), false).await;
    let error = client
        .call_tool_once(call("failing_job", json!({}), false))
        .await
        .expect_err("refused");
    let rmcp::ServiceError::McpError(error) = error else {
        panic!("not an MCP error: {error:?}")
    };
    assert_eq!(error.code.0, -32021, "{error:?}");
    assert!(
        error.message.contains("io.modelcontextprotocol/tasks"),
        "{}",
        error.message
    );
    assert_eq!(
        error.data.expect("data")["requiredCapabilities"]["extensions"],
        json!({"io.modelcontextprotocol/tasks": {}})
    );
    // An optional one runs plainly for that client, asked or not.
    let plain = client
        .call_tool_once(call("slow_compute", json!({"seconds": 0}), true))
        .await
        .expect("plain call");
    assert!(matches!(plain, CallToolResponse::Complete(_)), "{plain:?}");
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_error_completes_with_is_error_and_a_panic_fails_the_task() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = start(dir.path(), true).await;
    // Required: a task without asking.
    let failing = match client
        .call_tool_once(call("failing_job", json!({}), false))
        .await
        .expect("tools/call")
    {
        CallToolResponse::Task(task) => task.task.task_id.clone(),
        other => panic!("a required-task guard answered {other:?}"),
    };
    let ended = wire(&until(client.peer(), &failing, TaskStatus::Completed).await);
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(ended["result"]["isError"], true, "{ended}");
    assert!(ended.get("error").is_none(), "{ended}");
    let panicked = start_task(client.peer(), "protocol_error_job", json!({})).await;
    let ended = wire(&until(client.peer(), &panicked, TaskStatus::Failed).await);
    assert_eq!(ended["status"], "failed", "{ended}");
    assert!(ended.get("result").is_none(), "{ended}");
    assert_eq!(ended["error"]["code"], -32603, "{ended}");
    assert!(
        ended["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("guard_panicked")),
        "{ended}"
    );
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_task_waits_for_each_answer_and_resumes_on_another_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = start(dir.path(), true).await;
    let id = start_task(client.peer(), "multi_input", json!({})).await;
    let waiting = wire(&until(client.peer(), &id, TaskStatus::InputRequired).await);
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    let mut keys: Vec<&String> = waiting["inputRequests"]
        .as_object()
        .expect("inputRequests")
        .keys()
        .collect();
    keys.sort();
    assert_eq!(keys, ["confirm", "name"], "{waiting}");
    assert_eq!(
        waiting["inputRequests"]["name"]["method"], "elicitation/create",
        "{waiting}"
    );
    // A wrong answer to an open question is refused and changes nothing.
    let error = update(client.peer(), &id, json!({"name": "Ada"}))
        .await
        .expect_err("not a form's answer");
    assert!(error.to_string().contains("inputResponses.name"), "{error}");
    // One answer (and a key nobody asked, ignored): the other stays open.
    update(
        client.peer(),
        &id,
        json!({"name": {"action": "accept", "content": {"name": "Ada"}}, "other": {"x": 1}}),
    )
    .await
    .expect("a partial answer");
    let partial = wire(&get(client.peer(), &id).await);
    assert_eq!(partial["status"], "input_required", "{partial}");
    let open: Vec<&String> = partial["inputRequests"]
        .as_object()
        .expect("open")
        .keys()
        .collect();
    assert_eq!(open, ["confirm"], "{partial}");
    // The server goes away; another on the same store takes the last answer.
    client.cancel().await.expect("close");
    let client = start(dir.path(), true).await;
    update(
        client.peer(),
        &id,
        json!({"confirm": {"action": "accept", "content": {"confirm": true}}}),
    )
    .await
    .expect("the last answer");
    let ended = wire(&until(client.peer(), &id, TaskStatus::Completed).await);
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(
        ended["result"]["content"][0]["text"], "name: Ada, confirmed: true",
        "{ended}"
    );
    // Nothing waits any more: answering again is refused.
    let again = update(
        client.peer(),
        &id,
        json!({"confirm": {"action": "accept", "content": {"confirm": true}}}),
    )
    .await
    .expect_err("nothing to answer");
    assert!(again.to_string().contains("not waiting"), "{again}");
    client.cancel().await.expect("close");
}
