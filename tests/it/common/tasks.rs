//! MCP Tasks (SEP-2663) from the client side: a client configuration that
//! declares the tasks extension, a stdio server the test can disconnect
//! from without killing it, and task-augmented calls and polling.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    CreateTaskResult, GetTaskParams, GetTaskResult, Implementation, MetaObject, RequestMetaObject,
    TaskStatus,
};
use rmcp::service::{Peer, RoleClient, RunningService};
use serde_json::Value;

/// What a client declares at initialize: the tasks extension, or nothing.
pub fn client_config(tasks: bool) -> ClientConfig {
    let capabilities = if tasks {
        ClientCapabilities::builder().enable_tasks().build()
    } else {
        ClientCapabilities::default()
    };
    ClientConfig::new(capabilities, Implementation::new("warden-tests", "0"))
}

/// A stdio server spawned by the test itself (not through rmcp's child
/// transport, which kills the process when dropped): disconnecting the
/// client only closes its stdin. [`Drop`] kills it if it is still there.
pub struct StdioServer {
    pub client: Option<RunningService<RoleClient, ClientConfig>>,
    pub child: Option<tokio::process::Child>,
    pub pid: u32,
}

impl StdioServer {
    /// Starts `binary` on `artifacts` with `env`, its client declaring the
    /// tasks extension when `tasks`.
    pub async fn start(binary: &str, artifacts: &Path, env: &[(&str, &str)], tasks: bool) -> StdioServer {
        let mut command = tokio::process::Command::new(binary);
        command
            .env("WARDEN_ARTIFACTS_DIR", artifacts)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // A server that dies says why in the test's output (a panic
            // prints whatever the log level); its warnings stay quiet.
            .stderr(Stdio::inherit())
            .env("RUST_LOG", "error")
            .kill_on_drop(false);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("spawn server");
        let pid = child.id().expect("server pid");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take().expect("stdin");
        let client = tokio::time::timeout(
            Duration::from_secs(10),
            client_config(tasks).serve((stdout, stdin)),
        )
        .await
        .expect("initialize in time")
        .expect("initialize");
        StdioServer {
            client: Some(client),
            child: Some(child),
            pid,
        }
    }

    pub fn peer(&self) -> &Peer<RoleClient> {
        self.client.as_ref().expect("connected").peer()
    }

    /// Closes the client (the server's stdin ends) and leaves the server
    /// running; returns the process to wait for.
    pub async fn disconnect(&mut self) -> tokio::process::Child {
        if let Some(client) = self.client.take() {
            let _ = client.cancel().await;
        }
        self.child.take().expect("the server process")
    }

    /// Sends SIGKILL and waits for the process to be gone.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
        }
        if let Some(client) = self.client.take() {
            drop(client);
        }
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
        }
    }
}

/// `tools/call` params with `arguments` (an object) and request `_meta`.
pub fn call_params(tool: &str, arguments: Value, meta: Option<Value>) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let mut params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
    if let Some(Value::Object(meta)) = meta {
        params.meta = Some(RequestMetaObject(MetaObject(meta)));
    }
    params
}

/// The request `_meta` key that asks for a task (Warden's
/// `mcp::tasks::TASK_META_KEY`): declaring the extension is not asking.
pub const TASK_META_KEY: &str = "warden/task";

/// A task-augmented call that must answer with a task: it asks for one
/// (`_meta` [`TASK_META_KEY`]) beside whatever `meta` holds.
pub async fn start_task(
    peer: &Peer<RoleClient>,
    tool: &str,
    arguments: Value,
    meta: Option<Value>,
) -> CreateTaskResult {
    let mut meta = match meta {
        Some(Value::Object(meta)) => meta,
        _ => serde_json::Map::new(),
    };
    meta.insert(TASK_META_KEY.into(), Value::Bool(true));
    let answer = tokio::time::timeout(
        Duration::from_secs(10),
        peer.call_tool_once(call_params(tool, arguments, Some(Value::Object(meta)))),
    )
    .await
    .expect("tools/call answered in time")
    .expect("tools/call answered");
    match answer {
        CallToolResponse::Task(task) => task,
        other => panic!("expected a CreateTaskResult, got {other:?}"),
    }
}

/// `tasks/get`.
pub async fn get_task(peer: &Peer<RoleClient>, task_id: &str) -> Result<GetTaskResult, rmcp::ServiceError> {
    tokio::time::timeout(
        Duration::from_secs(10),
        peer.get_task(GetTaskParams::new(task_id)),
    )
    .await
    .expect("tasks/get answered in time")
}

/// `tasks/cancel`.
pub async fn cancel_task(peer: &Peer<RoleClient>, task_id: &str) -> Result<(), rmcp::ServiceError> {
    tokio::time::timeout(
        Duration::from_secs(10),
        peer.cancel_task(CancelTaskParams::new(task_id)),
    )
    .await
    .expect("tasks/cancel answered in time")
}

/// Polls `tasks/get` until the task is no longer `working` (at most
/// `limit`); returns every answer, the last one ended.
pub async fn poll_until_ended(peer: &Peer<RoleClient>, task_id: &str, limit: Duration) -> Vec<GetTaskResult> {
    let start = Instant::now();
    let mut answers = Vec::new();
    loop {
        let answer = get_task(peer, task_id).await.expect("tasks/get of a known task");
        let ended = answer.task.status().is_terminal();
        answers.push(answer);
        if ended {
            return answers;
        }
        assert!(
            start.elapsed() < limit,
            "task {task_id} still not ended after {limit:?}: {:?}",
            answers.last()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The wire form of a `tasks/get` answer (`result`, `error`, … inlined).
pub fn wire(answer: &GetTaskResult) -> Value {
    serde_json::to_value(answer).expect("GetTaskResult serializes")
}

/// Whether a `tasks/get` answer says `status`.
pub fn has_status(answer: &GetTaskResult, status: TaskStatus) -> bool {
    answer.task.status() == status
}
