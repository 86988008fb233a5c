//! Tenants: every task (its artifacts and resources) belongs to the
//! principal that created it, and every lookup shows only the caller's own;
//! another principal's task answers exactly as an unknown id. Over stdio the
//! caller is `local`, which per-principal limits never bind. A task another
//! principal owns is made here by rewriting a task's owner record to name
//! it, which is what a task that principal created holds on disk.

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::ReadResourceRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};

use crate::common::*;

/// A task id that no task has.
const UNKNOWN: &str = "task_0123456789abcdef0123456789abcdef";

/// The owner record of a task, as the server wrote it.
fn owner_path(artifacts: &Path, task_id: &str) -> std::path::PathBuf {
    artifacts.join(task_id).join("owner.json")
}

/// Rewrites a task's owner record to name `principal`, or, with `None`, to
/// the record of a task from before principals (no `principal` field).
fn hand_to(artifacts: &Path, task_id: &str, principal: Option<&str>) {
    let path = owner_path(artifacts, task_id);
    let mut owner: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("owner record"))
        .expect("owner record is JSON");
    assert_eq!(owner["principal"], "local", "a stdio task is local's: {owner}");
    match principal {
        Some(name) => owner["principal"] = json!(name),
        None => {
            owner.as_object_mut().expect("an object").remove("principal");
        }
    }
    std::fs::write(&path, owner.to_string()).expect("rewrite owner record");
}

/// A finished task of the caller that wrote `outputs/data.csv`.
async fn task_with_csv(client: &RunningService<RoleClient, ()>) -> String {
    let result = call(
        client,
        "run_script",
        json!({"script": "write_artifact(\"data.csv\", \"close\\n1.5\\n2.5\\n\"); 1"}),
    )
    .await;
    assert_eq!(result["status"], "success", "{result}");
    result["task_id"].as_str().expect("task_id").to_string()
}

/// Calls a tool; its structured answer (an error's JSON too).
async fn call(client: &RunningService<RoleClient, ()>, tool: &str, arguments: Value) -> Value {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let result = client
        .call_tool(rmcp::model::CallToolRequestParams::new(tool.to_string()).with_arguments(arguments))
        .await
        .expect("tools/call answered");
    structured(&result)
}

/// Every lookup of `task_id` a client can make — the four artifact tools,
/// a `run_batch` `$artifact` reference and `resources/read` — each answer
/// with the id replaced by `<task>` and the per-request fields removed, so
/// answers for different ids compare equal exactly when they say the same.
async fn lookups(client: &RunningService<RoleClient, ()>, task_id: &str) -> Vec<Value> {
    let source = json!({"task_id": task_id, "filename": "outputs/data.csv"});
    let mut answers = vec![
        call(client, "get_task_result", json!({"task_id": task_id})).await,
        call(client, "list_artifacts", json!({"task_id": task_id})).await,
        call(
            client,
            "read_artifact",
            json!({"task_id": task_id, "filename": "outputs/data.csv"}),
        )
        .await,
        call(
            client,
            "read_artifact",
            json!({"task_id": task_id, "filename": "result.json"}),
        )
        .await,
        call(
            client,
            "run_batch",
            json!({"calls": [{"name": "check_performance",
                              "arguments": {"returns": {"$artifact": source, "column": "close"}}}]}),
        )
        .await,
    ];
    let uri = format!("warden://artifacts/{task_id}/outputs/data.csv");
    answers.push(
        match client.read_resource(ReadResourceRequestParams::new(uri)).await {
            Ok(read) => json!({"ok": serde_json::to_value(read).expect("serialise")}),
            Err(rmcp::ServiceError::McpError(error)) => json!({"error": error}),
            Err(other) => panic!("resources/read: {other}"),
        },
    );
    answers
        .into_iter()
        .map(|answer| {
            let text = answer.to_string().replace(task_id, "<task>");
            let mut answer: Value = serde_json::from_str(&text).expect("JSON");
            if let Some(map) = answer.as_object_mut() {
                map.remove("request_id");
                map.remove("duration_ms");
            }
            answer
        })
        .collect()
}

/// Whether an answer of [`lookups`] is a refusal.
fn refused(answer: &Value) -> bool {
    answer.get("error").is_some() || answer["status"] == "failed"
}

/// The task ids `list_tasks` shows the caller.
async fn listed(client: &RunningService<RoleClient, ()>) -> Vec<String> {
    call(client, "list_tasks", json!({"limit": 100})).await["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["task_id"].as_str().expect("task_id").to_string())
        .collect()
}

#[tokio::test]
async fn another_principals_task_answers_every_lookup_exactly_as_an_unknown_id() {
    // Over stdio (local): alice's task is absent from list_tasks, and each artifact tool,
    // a batch reference and resources/read answer for it exactly what they answer for an unknown id.
    let server = Server::start(FINANCE).await;
    let mine = task_with_csv(&server.client).await;
    let hers = task_with_csv(&server.client).await;
    hand_to(server.artifacts.path(), &hers, Some("alice"));

    let own = lookups(&server.client, &mine).await;
    assert!(
        own.iter().all(|a| !refused(a)),
        "the owner reads its task: {own:#?}"
    );
    let foreign = lookups(&server.client, &hers).await;
    let unknown = lookups(&server.client, UNKNOWN).await;
    assert!(foreign.iter().all(refused), "{foreign:#?}");
    assert_eq!(foreign, unknown, "no existence leak");
    assert_eq!(foreign[0]["error"]["code"], "not_found", "{}", foreign[0]);

    assert_eq!(listed(&server.client).await, vec![mine.clone()]);
}

#[tokio::test]
async fn ownership_survives_a_restart_and_tasks_from_before_principals_are_locals() {
    // A second server on the same store lists local's own and pre-principal tasks, never alice's.
    let store = tempfile::tempdir().expect("temp dir");
    let dir = store.path().to_string_lossy().to_string();
    let env = [("WARDEN_ARTIFACTS_DIR", dir.as_str())];
    let first = Server::start_with_env(FINANCE, &env).await;
    let mine = task_with_csv(&first.client).await;
    let legacy = task_with_csv(&first.client).await;
    let hers = task_with_csv(&first.client).await;
    drop(first);
    hand_to(store.path(), &legacy, None);
    hand_to(store.path(), &hers, Some("alice"));

    let second = Server::start_with_env(FINANCE, &env).await;
    let mut seen = listed(&second.client).await;
    seen.sort();
    let mut expected = vec![mine, legacy.clone()];
    expected.sort();
    assert_eq!(seen, expected);
    assert!(lookups(&second.client, &legacy).await.iter().all(|a| !refused(a)));
    assert_eq!(
        lookups(&second.client, &hers).await,
        lookups(&second.client, UNKNOWN).await
    );
}

#[tokio::test]
async fn a_new_task_records_its_principal_durably_in_its_owner_record() {
    // owner.json names the principal (local over stdio) beside the server process.
    let server = Server::start(FINANCE).await;
    let task = task_with_csv(&server.client).await;
    let owner: Value =
        serde_json::from_str(&std::fs::read_to_string(owner_path(server.artifacts.path(), &task)).unwrap())
            .unwrap();
    assert_eq!(owner["principal"], "local");
    assert_eq!(owner["pid"], json!(server.pid));
    // No set-up directory is left behind.
    let leftovers: Vec<String> = std::fs::read_dir(server.artifacts.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with('.') && name != ".diagnostics")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[tokio::test]
async fn per_principal_limits_never_bind_local_over_stdio() {
    // With every per-principal limit at its minimum, a stdio client still runs calls past the
    // rate, two calls and two tasks at once, and artifacts past the principal budget.
    let server = Server::start_with_env(
        TESTBED,
        &[
            ("WARDEN_CALLS_PER_MINUTE", "1"),
            ("WARDEN_PRINCIPAL_CALL_SHARE_PERCENT", "1"),
            ("WARDEN_TASKS_PER_PRINCIPAL", "1"),
            ("WARDEN_PRINCIPAL_ARTIFACT_MB", "1"),
            ("WARDEN_MAX_CONCURRENT_CALLS", "2"),
            ("WARDEN_MAX_CONCURRENT_TASKS", "2"),
        ],
    )
    .await;
    for _ in 0..5 {
        let result = server.call("add_pure", json!({"a": 1, "b": 2})).await;
        assert!(!is_error(&result), "{:?}", result);
    }
    // Two 800 ms calls at once: with a share of 1 slot the second would wait past the
    // 1 s admission wait or run after the first.
    let started = Instant::now();
    let slow = || server.call("slow_echo", json!({"millis": 800, "tag": "x"}));
    let (a, b) = tokio::join!(slow(), slow());
    assert!(!is_error(&a) && !is_error(&b), "{a:?} {b:?}");
    assert!(
        started.elapsed() < Duration::from_millis(1550),
        "both call slots were used at once: {:?}",
        started.elapsed()
    );
    // Two 1.5 s tasks at once, together writing 1.6 MB (over the 1 MiB principal budget).
    let script = json!({"script": "let s = \"x\"; while s.len() < 800000 { s += s; } write_artifact(\"big.txt\", s.sub_string(0, 800000)); slow_echo(#{millis: 1500, tag: \"t\"}); 1"});
    let (a, b) = tokio::join!(
        server.call("run_script", script.clone()),
        server.call("run_script", script)
    );
    for result in [&a, &b] {
        assert_eq!(structured(result)["status"], "success", "{}", structured(result));
    }
    let events = server.events_until(|_| true).await;
    assert!(events.iter().all(|e| e["principal"] == "local"));
    assert!(!events.iter().any(|e| e["event"] == "request_rejected"));
}

#[tokio::test]
async fn the_request_span_carries_the_principal() {
    // mcp.tool.call has warden.principal, as events have principal.
    let trace_dir = tempfile::tempdir().expect("temp dir");
    let trace_file = trace_dir.path().join("spans.jsonl");
    let file = trace_file.to_string_lossy().to_string();
    let server = Server::start_with_env(
        FINANCE,
        &[
            ("WARDEN_TRACE_EXPORTER", "file"),
            ("WARDEN_TRACE_FILE", file.as_str()),
        ],
    )
    .await;
    assert!(!is_error(&server.call("price_option_t", call_args()).await));
    let mut spans = Vec::new();
    for _ in 0..120 {
        spans = read_jsonl(&trace_file);
        if spans.iter().any(|s| s["name"] == "mcp.tool.call") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let span = spans
        .iter()
        .find(|s| s["name"] == "mcp.tool.call")
        .expect("an mcp.tool.call span");
    assert_eq!(span["attributes"]["warden.principal"], "local", "{span}");
}

/// An OpenAI-compatible endpoint on 127.0.0.1 that refuses every request
/// with HTTP 401, quoting the request's Authorization header back, as a
/// careless proxy might. Returns its base URL with `userinfo` in it.
async fn echoing_endpoint(userinfo: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{userinfo}@{}/v1", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 4096];
                while !String::from_utf8_lossy(&request).contains("\r\n\r\n") {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&request).to_string();
                let authorization = head
                    .lines()
                    .find(|l| l.to_ascii_lowercase().starts_with("authorization:"))
                    .unwrap_or_default()
                    .to_string();
                let body = json!({"error": {"message": format!("invalid credentials: {authorization}")}})
                    .to_string();
                let response = format!(
                    "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    base
}

/// Every answer a client can get about the task `task_id`, and the task
/// files themselves, as one text.
async fn everything_about(client: &RunningService<RoleClient, ()>, task_id: &str) -> String {
    let mut seen = String::new();
    for tool in ["list_tasks", "get_task_result", "list_artifacts"] {
        let arguments = if tool == "list_tasks" {
            json!({})
        } else {
            json!({"task_id": task_id})
        };
        seen.push_str(&call(client, tool, arguments).await.to_string());
    }
    let files = call(
        client,
        "list_artifacts",
        json!({"task_id": task_id, "limit": 500}),
    )
    .await;
    for file in files["files"].as_array().expect("files") {
        let filename = file["filename"].as_str().expect("filename");
        let read = call(
            client,
            "read_artifact",
            json!({"task_id": task_id, "filename": filename, "max_bytes": 262144}),
        )
        .await;
        assert!(read["next_offset"].is_null(), "{filename} fits one chunk");
        seen.push_str(&read.to_string());
        let uri = format!("warden://artifacts/{task_id}/{filename}");
        if let Ok(resource) = client.read_resource(ReadResourceRequestParams::new(uri)).await {
            seen.push_str(&serde_json::to_string(&resource).expect("serialise"));
        }
    }
    seen
}

#[tokio::test]
async fn model_credentials_never_reach_a_tool_result_error_file_or_resource() {
    // A key echoed by the endpoint and user:password in the base URL, for an endpoint that
    // refuses and one that is unreachable: no answer, task file or resource shows either.
    const KEY: &str = "sk-tenant-test-5ecret-key-0123456789";
    const PASSWORD: &str = "pw-5ecret-in-url";
    let userinfo = format!("bot:{PASSWORD}");
    let echoing = echoing_endpoint(&userinfo).await;
    let unreachable = format!("http://{userinfo}@127.0.0.1:1/v1");
    let cases = [
        (echoing, vec!["HTTP 401", "Bearer <redacted>"]),
        (
            unreachable,
            vec!["cannot reach the model", "WARDEN_MODEL_API_BASE"],
        ),
    ];
    for (base, expected) in cases {
        let server = Server::start_with_env(
            FINANCE,
            &[
                ("WARDEN_MODEL_API_KEY", KEY),
                ("WARDEN_MODEL_API_BASE", base.as_str()),
                ("WARDEN_MODEL_ID", "m"),
            ],
        )
        .await;
        let result = server
            .call(
                "run_coding_task",
                json!({"prompt": "price a call", "timeout_seconds": 30}),
            )
            .await;
        let answer = serde_json::to_string(&result).expect("serialise");
        let value = structured(&result);
        assert_eq!(value["status"], "failed", "{value}");
        for needle in expected {
            assert!(answer.contains(needle), "'{needle}' not in {answer}");
        }
        let task_id = value["task_id"].as_str().expect("task_id").to_string();
        let everything = answer + everything_about(&server.client, &task_id).await.as_str();
        for secret in [KEY, PASSWORD, base.as_str()] {
            assert!(
                !everything.contains(secret),
                "'{secret}' reached the client: …{}…",
                everything
                    .find(secret)
                    .map(|at| &everything[at.saturating_sub(200)..(at + 100).min(everything.len())])
                    .unwrap_or_default()
            );
        }
    }
}
