//! The conformance app over stdio with rmcp's client: the framework
//! features its fixtures rest on (content blocks, guard progress and log
//! messages, prompts, app resources, completion, subscriptions), checked
//! here on every `cargo test` so a regression shows without Node.
//! scripts/conformance runs the official suite against the same app over
//! HTTP.

// MCP logging is deprecated for 2026-07-28 (SEP-2577); these tests check
// the 2025-11-25 behaviour on purpose.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientInfo, GetPromptRequestParams, LoggingLevel, LoggingMessageNotificationParam,
    NumberOrString, ProgressNotificationParam, ProgressToken, ReadResourceRequestParams, RequestMetaObject,
    SetLevelRequestParams, SubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};

/// A client that records the progress and log notifications it receives.
#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<Value>>>,
}

impl Recorder {
    fn take(&self) -> Vec<Value> {
        std::mem::take(&mut *self.seen.lock().expect("lock"))
    }

    /// What was recorded once `count` notifications are in, or after 5 s.
    ///
    /// rmcp's client runs each notification handler on a task of its own,
    /// so the handler of a notice the server sent just before the answer
    /// can still be running when `call_tool` returns: the order on the
    /// wire (notices, then the answer) is the server's and is checked on
    /// the raw streams (`log_messages_precede_the_answer_on_the_wire`,
    /// and the stateless HTTP test); here the count is awaited.
    async fn take_when(&self, count: usize) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while self.seen.lock().expect("lock").len() < count && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.take()
    }
}

impl ClientHandler for Recorder {
    async fn on_progress(&self, params: ProgressNotificationParam, _: NotificationContext<RoleClient>) {
        let value = json!({"progress": params.progress, "total": params.total});
        self.seen.lock().expect("lock").push(value);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let value = json!({"log": params.data, "logger": params.logger, "level": params.level});
        self.seen.lock().expect("lock").push(value);
    }

    fn get_info(&self) -> ClientInfo {
        ClientInfo::default()
    }
}

/// The app on stdio with a private artifacts directory, and its client.
async fn start() -> (RunningService<RoleClient, Recorder>, Recorder, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_warden-conformance"));
    command
        .env("WARDEN_ARTIFACTS_DIR", dir.path())
        .current_dir(dir.path());
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let recorder = Recorder::default();
    let client = tokio::time::timeout(Duration::from_secs(10), recorder.clone().serve(transport))
        .await
        .expect("initialize in time")
        .expect("initialize");
    (client, recorder, dir)
}

fn call(name: &'static str) -> CallToolRequestParams {
    CallToolRequestParams::new(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_guards_answer_with_blocks_and_no_output_schema() {
    // A Vec<Content> guard lists no outputSchema and answers with its blocks as they are.
    let (client, _, _dir) = start().await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let image = tools
        .iter()
        .find(|t| t.name == "test_image_content")
        .expect("listed");
    assert!(image.output_schema.is_none(), "{image:?}");
    let mut describe = call("describe_guard");
    describe.arguments = serde_json::from_value(json!({"name": "test_image_content"})).ok();
    let described = client.call_tool(describe).await.expect("describe_guard");
    let entry = described.structured_content.expect("structured");
    assert!(
        entry.get("output_schema").is_none() && entry.get("input_schema").is_some(),
        "{entry}"
    );
    let result = client
        .call_tool(call("test_multiple_content_types"))
        .await
        .expect("call");
    assert!(result.structured_content.is_none() && result.is_error != Some(true));
    let content = serde_json::to_value(&result.content).expect("json");
    let types: Vec<&str> = content
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(types, ["text", "image", "resource"]);
    assert_eq!(content[2]["resource"]["uri"], "test://mixed-content-resource");
    assert_eq!(content[1]["mimeType"], "image/png");
    let audio = client.call_tool(call("test_audio_content")).await.expect("call");
    assert_eq!(
        serde_json::to_value(&audio.content).expect("json")[0]["mimeType"],
        "audio/wav"
    );
    let failed = client.call_tool(call("test_error_handling")).await.expect("call");
    assert_eq!(failed.is_error, Some(true));
    let text = serde_json::to_value(&failed.content).expect("json")[0]["text"].to_string();
    assert!(text.contains("intentionally returns an error"), "{text}");
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_messages_precede_the_answer_on_the_wire() {
    // Raw JSON-RPC on stdio: every log message of a call is written before its answer.
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_warden-conformance"))
        .env("WARDEN_ARTIFACTS_DIR", dir.path())
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut stdin = server.stdin.take().expect("stdin");
    let mut lines = tokio::io::BufReader::new(server.stdout.take().expect("stdout")).lines();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "wire", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "test_tool_with_logging", "arguments": {}}}),
    ];
    for message in messages {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .expect("write");
    }
    let mut before = Vec::new();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("answered in time")
            .expect("stdout")
            .expect("a line");
        let message: Value = serde_json::from_str(&line).expect("JSON-RPC");
        if message["id"] == 2 {
            break;
        }
        if message["method"] == "notifications/message" {
            before.push(message["params"]["data"].clone());
        }
    }
    assert_eq!(
        before,
        [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_and_log_messages_arrive_before_the_result() {
    // An isolated worker's progress and an in-process guard's logs reach the client before the answer;
    // logging/setLevel filters the logs of this session.
    let (client, recorder, _dir) = start().await;
    let token = ProgressToken(NumberOrString::String("p1".into()));
    let mut progress = call("test_tool_with_progress");
    progress.meta = Some(RequestMetaObject::with_progress_token(token));
    client.call_tool(progress).await.expect("call");
    let seen = recorder.take_when(3).await;
    let values: Vec<f64> = seen.iter().filter_map(|n| n["progress"].as_f64()).collect();
    assert_eq!(values, [0.0, 50.0, 100.0], "{seen:?}");
    assert!(seen.iter().all(|n| n["total"] == 100.0), "{seen:?}");

    client
        .call_tool(call("test_tool_with_logging"))
        .await
        .expect("call");
    let seen = recorder.take_when(3).await;
    let logs: Vec<&str> = seen.iter().filter_map(|n| n["log"].as_str()).collect();
    assert_eq!(
        logs,
        [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed"
        ],
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .all(|n| n["logger"] == "test_tool_with_logging" && n["level"] == "info")
    );

    client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Warning))
        .await
        .expect("setLevel");
    client
        .call_tool(call("test_tool_with_logging"))
        .await
        .expect("call");
    // Nothing is awaited, so give a wrongly sent notice's handler time to run.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(recorder.take(), Vec::<Value>::new(), "info is below warning");
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_resources_templates_and_completion_answer_from_the_app() {
    // App-registered prompts, static resources and templates are served as registered; bad input names the fix.
    let (client, _, _dir) = start().await;
    let prompts = client.list_all_prompts().await.expect("prompts/list");
    // The suite's four, and the one that asks (input-required-result-non-tool-request).
    assert_eq!(prompts.len(), 5);
    let mut get = GetPromptRequestParams::new("test_prompt_with_arguments");
    get.arguments = serde_json::from_value(json!({"arg1": "one", "arg2": "two"})).ok();
    let prompt = client.get_prompt(get).await.expect("prompts/get");
    let text = serde_json::to_value(&prompt.messages).expect("json")[0]["content"]["text"].clone();
    assert_eq!(text, "Prompt with arguments: arg1='one', arg2='two'");
    let missing = client
        .get_prompt(GetPromptRequestParams::new("test_prompt_with_arguments"))
        .await
        .expect_err("arg1 is required");
    assert!(
        missing.to_string().contains("needs the argument 'arg1'"),
        "{missing}"
    );
    let offered = client
        .complete_prompt_simple("test_prompt_with_arguments", "arg1", "te")
        .await
        .expect("completion/complete");
    assert_eq!(offered, ["test", "testing"]);

    let resources = client.list_all_resources().await.expect("resources/list");
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            // Warden's own MCP App view of a task, then the app's resources.
            "ui://warden/task.html",
            "test://static-binary",
            "test://static-text",
            "test://watched-resource"
        ]
    );
    let templates = client
        .list_all_resource_templates()
        .await
        .expect("templates/list");
    let patterns: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert!(patterns.contains(&"test://template/{id}/data"), "{patterns:?}");
    assert!(
        patterns.iter().any(|p| p.starts_with("warden://artifacts/")),
        "{patterns:?}"
    );
    let read = |uri: &str| client.read_resource(ReadResourceRequestParams::new(uri));
    let data =
        serde_json::to_value(read("test://template/123/data").await.expect("read").contents).expect("json");
    assert_eq!(
        data[0]["text"],
        r#"{"id":"123","templateTest":true,"data":"Data for ID: 123"}"#
    );
    assert_eq!(data[0]["uri"], "test://template/123/data");
    let binary =
        serde_json::to_value(read("test://static-binary").await.expect("read").contents).expect("json");
    assert!(
        binary[0]["blob"]
            .as_str()
            .is_some_and(|b| b.starts_with("iVBORw0K")),
        "{binary}"
    );
    assert!(read("test://nothing-here").await.is_err());

    client
        .subscribe(SubscribeRequestParams::new("test://watched-resource"))
        .await
        .expect("subscribe");
    let unknown = client
        .subscribe(SubscribeRequestParams::new("test://nothing-here"))
        .await
        .expect_err("unknown URI");
    assert!(unknown.to_string().contains("unknown resource"), "{unknown}");
    client.cancel().await.expect("close");
}

#[test]
fn outside_an_mcp_call_notices_go_nowhere_and_the_call_answers() {
    // `call` runs the isolated progress guard with no client listening: its notice lines are skipped, the answer read.
    let dir = tempfile::tempdir().expect("temp dir");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_warden-conformance"))
        .args(["call", "test_tool_with_progress", "{}"])
        .env("WARDEN_ARTIFACTS_DIR", dir.path())
        .current_dir(dir.path())
        .output()
        .expect("runs");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("Tool with progress executed successfully"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_http_call_of_a_guard_that_logs_streams_its_messages_then_the_answer() {
    // 2026-07-28 over HTTP: a guard that logs before it returns is answered with an SSE
    // stream carrying its log messages in order, then the result (as rmcp's stateless path does).
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_warden-conformance"))
        .args(["serve", "--http", "127.0.0.1:0"])
        .env("WARDEN_ARTIFACTS_DIR", dir.path())
        .current_dir(dir.path())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut lines = tokio::io::BufReader::new(server.stderr.take().expect("stderr")).lines();
    let url = loop {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("listening in time")
            .expect("stderr")
            .expect("a listening line");
        if let Some(at) = line.find("http://") {
            break line[at..].split_whitespace().next().expect("url").to_string();
        }
    };
    // The request asks for log messages (SEP-2575: without a level it gets none).
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "test_tool_with_logging", "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {},
                  "io.modelcontextprotocol/logLevel": "info"}}});
    let answer = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "test_tool_with_logging")
        .body(body.to_string())
        .send()
        .await
        .expect("answered");
    assert_eq!(answer.status(), 200);
    assert_eq!(
        answer.headers()["content-type"].to_str().expect("text"),
        "text/event-stream"
    );
    let text = answer.text().await.expect("body");
    let messages: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).expect("JSON event"))
        .collect();
    let logs: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| &m["params"]["data"])
        .collect();
    assert_eq!(
        logs,
        [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed"
        ],
        "{text}"
    );
    let last = messages.last().expect("events");
    assert_eq!(last["id"], 3, "the answer comes last: {text}");
    assert_eq!(
        last["result"]["content"][0]["text"], "Tool with logging executed successfully",
        "{text}"
    );
    let _ = server.kill().await;
}
