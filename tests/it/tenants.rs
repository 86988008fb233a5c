//! Tenants: every task (its artifacts and resources) belongs to the
//! principal that created it, and every lookup shows only the caller's own;
//! another principal's task answers exactly as an unknown id. Over stdio the
//! caller is `local`, which per-principal limits never bind. A task another
//! principal owns is made over stdio by rewriting a task's owner record to
//! name it, which is what a task that principal created holds on disk; over
//! HTTP (`serve --http` with API tokens for alice and bob) the principals
//! are real, and the per-principal limits are exercised there.

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::ReadResourceRequestParams;
use rmcp::service::{Peer, RunningService};
use serde_json::{Value, json};

use crate::common::http::{HttpServer, PRINCIPALS};
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
async fn task_with_csv(client: &Peer<RoleClient>) -> String {
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
async fn call(client: &Peer<RoleClient>, tool: &str, arguments: Value) -> Value {
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
async fn lookups(client: &Peer<RoleClient>, task_id: &str) -> Vec<Value> {
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

/// Removes the task store, so the next server rebuilds it from the task
/// directories (their owner records and results).
fn forget_store(artifacts: &std::path::Path) {
    for name in ["tasks.db", "tasks.db-wal", "tasks.db-shm"] {
        let _ = std::fs::remove_file(artifacts.join(name));
    }
}

/// The task ids `list_tasks` shows the caller.
async fn listed(client: &Peer<RoleClient>) -> Vec<String> {
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
    // The task store is the source of truth: alice's task is made by handing a directory to
    // her and letting a new server rebuild the store from the directories.
    let store = tempfile::tempdir().expect("temp dir");
    let dir = store.path().to_string_lossy().to_string();
    let env = [("WARDEN_ARTIFACTS_DIR", dir.as_str())];
    let first = Server::start_with_env(FINANCE, &env).await;
    let mine = task_with_csv(&first.client).await;
    let hers = task_with_csv(&first.client).await;
    drop(first);
    hand_to(store.path(), &hers, Some("alice"));
    forget_store(store.path());
    let server = Server::start_with_env(FINANCE, &env).await;

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

    // replay_task too: hers answers as an unknown id, and nothing runs.
    let replay = |task_id: String| {
        let client = &server.client;
        async move {
            let answer = call(client, "replay_task", json!({"task_id": task_id})).await;
            let mut answer: Value =
                serde_json::from_str(&answer.to_string().replace(&task_id, "<task>")).expect("JSON");
            if let Some(map) = answer.as_object_mut() {
                map.remove("request_id");
            }
            answer
        }
    };
    let foreign = replay(hers.clone()).await;
    assert_eq!(foreign, replay(UNKNOWN.to_string()).await, "no existence leak");
    assert_eq!(foreign["error"]["code"], "not_found", "{foreign}");
    assert_eq!(listed(&server.client).await, vec![mine.clone()], "no replay ran");
    let own = replay(mine.clone()).await;
    assert_eq!(own["verdict"], "identical", "{own}");
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
    forget_store(store.path());

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
        .filter(|name| name.starts_with('.') && name != ".diagnostics" && name != ".shared")
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
async fn everything_about(client: &Peer<RoleClient>, task_id: &str) -> String {
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

// ---- over HTTP: several principals ----

/// `serve --http` on a free loopback port (the shared
/// [`HttpServer`]) with an API tokens file naming alice and bob.
struct Team {
    server: HttpServer,
    _tokens: tempfile::TempDir,
}

impl Team {
    async fn start(binary: &str, env: &[(&str, &str)]) -> Team {
        let tokens = tempfile::tempdir().expect("temp dir");
        let file = crate::common::http::tokens_file(tokens.path());
        let mut all = vec![("WARDEN_API_TOKENS_FILE", file.as_str())];
        all.extend_from_slice(env);
        Team {
            server: HttpServer::start(binary, &all).await,
            _tokens: tokens,
        }
    }

    fn token(who: &str) -> &'static str {
        PRINCIPALS
            .iter()
            .find(|(name, _, _)| *name == who)
            .map(|(_, token, _)| *token)
            .expect("a test principal")
    }

    /// A 2025-11-25 session of `who` (alice or bob).
    async fn session(&self, who: &str) -> RunningService<RoleClient, ()> {
        self.server.session_client(Some(Self::token(who))).await
    }

    /// A stateless 2026-07-28 client of `who`.
    async fn stateless(&self, who: &str) -> RunningService<RoleClient, ()> {
        self.server.stateless_client(Some(Self::token(who))).await
    }

    /// A 2025-11-25 session of `who` declaring the tasks extension.
    async fn tasks_session(&self, who: &str) -> RunningService<RoleClient, rmcp::model::ClientConfig> {
        self.server
            .client_with(
                crate::common::tasks::client_config(true),
                Some(Self::token(who)),
                rmcp::service::ClientLifecycleMode::Initialize,
            )
            .await
            .expect("initialize over HTTP")
    }

    fn artifacts(&self) -> &Path {
        self.server.artifacts.path()
    }
}

#[tokio::test]
async fn over_http_each_principal_sees_only_its_own_tasks() {
    // Bob asking for alice's task — artifact tools, a batch reference, resources/read —
    // gets what an unknown id gets; list_tasks shows each its own; events name the principal.
    // Alice on a 2025-11-25 session, bob on stateless 2026-07-28 requests.
    let team = Team::start(FINANCE, &[]).await;
    let (alice, bob) = (team.session("alice").await, team.stateless("bob").await);
    let hers = task_with_csv(&alice).await;
    let his = task_with_csv(&bob).await;

    assert!(lookups(&alice, &hers).await.iter().all(|a| !refused(a)));
    let foreign = lookups(&bob, &hers).await;
    assert!(foreign.iter().all(refused), "{foreign:#?}");
    assert_eq!(foreign, lookups(&bob, UNKNOWN).await, "no existence leak");
    assert_eq!(lookups(&alice, &his).await, lookups(&alice, UNKNOWN).await);
    assert_eq!(listed(&alice).await, vec![hers.clone()]);
    assert_eq!(listed(&bob).await, vec![his.clone()]);
    let owner: Value =
        serde_json::from_str(&std::fs::read_to_string(owner_path(team.artifacts(), &hers)).unwrap()).unwrap();
    assert_eq!(owner["principal"], "alice");
    let events = events_until(&team.artifacts().join("events.jsonl"), |r| {
        [&hers, &his].iter().all(|task| {
            r.iter()
                .any(|e| e["event"] == "task_created" && e["task_id"] == task.as_str())
        })
    })
    .await;
    let created = |task: &str| {
        events
            .iter()
            .find(|e| e["event"] == "task_created" && e["task_id"] == task)
            .map(|e| e["principal"].clone())
    };
    assert_eq!(created(&hers), Some(json!("alice")));
    assert_eq!(created(&his), Some(json!("bob")));
}

/// The error of a refused tool answer: its code and `retry_after_seconds`.
fn refusal(answer: &Value) -> (String, Option<u64>) {
    (
        answer["error"]["code"].as_str().unwrap_or_default().to_string(),
        answer["error"]["retry_after_seconds"].as_u64(),
    )
}

#[tokio::test]
async fn one_principal_flooding_the_call_slots_does_not_starve_another() {
    // Two call slots, a 50 % share: alice's six 2 s calls hold one slot, the rest are refused
    // principal_busy after the admission wait, and bob is served at once meanwhile.
    let team = Team::start(TESTBED, &[("WARDEN_MAX_CONCURRENT_CALLS", "2")]).await;
    let (alice, bob) = (team.session("alice").await, team.session("bob").await);
    let mut flood = tokio::task::JoinSet::new();
    for i in 0..6 {
        let alice = alice.peer().clone();
        flood.spawn(async move {
            call(
                &alice,
                "slow_echo",
                json!({"millis": 2000, "tag": format!("a{i}")}),
            )
            .await
        });
    }
    let bobs = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = Instant::now();
        let answer = call(&bob, "slow_echo", json!({"millis": 10, "tag": "b"})).await;
        (answer, started.elapsed())
    };
    let (flooded, (bobs, waited)) = tokio::join!(flood.join_all(), bobs);
    assert_eq!(bobs["tag"], "b", "{bobs}");
    assert!(waited < Duration::from_millis(900), "bob waited {waited:?}");
    let served = flooded.iter().filter(|a| a["tag"].is_string()).count();
    let busy: Vec<(String, Option<u64>)> = flooded
        .iter()
        .filter(|a| !a["tag"].is_string())
        .map(refusal)
        .collect();
    assert_eq!(served, 1, "alice holds one slot at a time: {flooded:#?}");
    assert_eq!(busy.len(), 5);
    for (code, retry) in &busy {
        assert_eq!(code, "principal_busy");
        assert!(retry.is_some_and(|s| s >= 1), "{busy:?}");
    }
    let message = flooded
        .iter()
        .find_map(|a| a["error"]["message"].as_str())
        .unwrap_or_default();
    assert!(
        message.contains("WARDEN_PRINCIPAL_CALL_SHARE_PERCENT"),
        "{message}"
    );
    let events = events_until(&team.artifacts().join("events.jsonl"), |r| {
        r.iter().filter(|e| e["event"] == "request_rejected").count() >= 5
    })
    .await;
    let rejected: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "request_rejected")
        .collect();
    assert_eq!(rejected.len(), 5);
    assert!(
        rejected
            .iter()
            .all(|e| e["reason"] == "principal_busy" && e["principal"] == "alice")
    );
}

#[tokio::test]
async fn a_principal_runs_at_most_its_task_limit_at_once() {
    // One task per principal (default): alice's second task is refused principal_busy naming
    // WARDEN_TASKS_PER_PRINCIPAL, while bob's task runs beside her first.
    let team = Team::start(TESTBED, &[]).await;
    let (alice, bob) = (team.session("alice").await, team.session("bob").await);
    let long = json!({"script": "slow_echo(#{millis: 2500, tag: \"t\"}); 1"});
    let later = |client, delay| {
        let long = long.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            call(client, "run_script", long).await
        }
    };
    let (first, second, bobs) = tokio::join!(later(&alice, 0), later(&alice, 500), later(&bob, 500));
    assert_eq!(bobs["status"], "success", "{bobs}");
    // Whichever of alice's two arrived first ran; the other was refused.
    let (ran, refused): (Vec<&Value>, Vec<&Value>) = [&first, &second]
        .into_iter()
        .partition(|a| a["status"] == "success");
    assert_eq!((ran.len(), refused.len()), (1, 1), "{first} {second}");
    let (code, retry) = refusal(refused[0]);
    assert_eq!(code, "principal_busy", "{}", refused[0]);
    assert!(retry.is_some_and(|s| s >= 1), "{}", refused[0]);
    let message = refused[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("WARDEN_TASKS_PER_PRINCIPAL"), "{message}");
}

#[tokio::test]
async fn calls_per_minute_are_counted_per_principal() {
    // Three a minute: alice's fourth request is rate_limited with retry_after_seconds (≈ 20 s),
    // bob still gets his; lookups are not counted.
    let team = Team::start(FINANCE, &[("WARDEN_CALLS_PER_MINUTE", "3")]).await;
    let (alice, bob) = (team.session("alice").await, team.session("bob").await);
    for _ in 0..3 {
        let answer = call(&alice, "price_option_t", call_args()).await;
        assert!(answer["result"].is_number(), "{answer}");
        call(&alice, "list_tasks", json!({})).await;
    }
    let refused = call(&alice, "price_option_t", call_args()).await;
    let (code, retry) = refusal(&refused);
    assert_eq!(code, "rate_limited", "{refused}");
    assert!(retry.is_some_and(|s| (1..=20).contains(&s)), "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("WARDEN_CALLS_PER_MINUTE"), "{message}");
    // A task is a request too.
    let task = call(&alice, "run_script", json!({"script": "1"})).await;
    assert_eq!(refusal(&task).0, "rate_limited", "{task}");
    let answer = call(&bob, "price_option_t", call_args()).await;
    assert!(answer["result"].is_number(), "{answer}");
}

#[tokio::test]
async fn a_principals_artifact_bytes_are_bounded_across_its_tasks() {
    // 1 MiB per principal: alice's running task cannot write past it (catchable quota_exceeded);
    // past it on disk, her oldest finished task is deleted, never bob's.
    let team = Team::start(FINANCE, &[("WARDEN_PRINCIPAL_ARTIFACT_MB", "1")]).await;
    let (alice, bob) = (team.session("alice").await, team.session("bob").await);
    let write = "let s = \"x\"; while s.len() < 700000 { s += s; } s = s.sub_string(0, 700000); write_artifact(\"a.txt\", s);";
    let over = call(
        &alice,
        "run_script",
        json!({"script": format!(
            "{write} let said = \"written\"; try {{ write_artifact(\"b.txt\", s); }} catch (e) {{ said = `${{e.code}}: ${{e.message}}`; }} said"
        )}),
    )
    .await;
    let said = over["value"].as_str().unwrap_or_default();
    assert!(
        said.starts_with("quota_exceeded: ") && said.contains("WARDEN_PRINCIPAL_ARTIFACT_MB"),
        "{over}"
    );
    let one = json!({"script": format!("{write} 1")});
    let bobs = call(&bob, "run_script", one.clone()).await["task_id"].clone();
    let oldest = call(&alice, "run_script", one.clone()).await["task_id"].clone();
    let newer = call(&alice, "run_script", one.clone()).await["task_id"].clone();
    // The next task start asks retention for a pass.
    call(&alice, "run_script", json!({"script": "1"})).await;
    let path = |task: &Value| team.artifacts().join(task.as_str().expect("task id"));
    assert!(
        eventually(Duration::from_secs(5), || !path(&oldest).exists()).await,
        "alice's oldest task is deleted"
    );
    assert!(path(&newer).exists() && path(&bobs).exists());
}

#[tokio::test]
async fn a_session_id_works_only_for_the_principal_that_opened_it() {
    // Session ids are not credentials: bob presenting alice's session id is
    // answered as for an unknown session, and alice's session still works.
    use crate::common::http::{initialize, post};
    let team = Team::start(FINANCE, &[]).await;
    let url = team.server.url.clone();
    let bearer = |who: &str| format!("Bearer {}", Team::token(who));
    let opened = post(&url, &initialize(), &[("authorization", &bearer("alice"))])
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 200);
    let session = opened.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let _ = opened.text().await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
    let in_session = |who: &str| {
        let auth = bearer(who);
        let session = session.clone();
        let url = url.clone();
        let list = list.clone();
        async move {
            post(
                &url,
                &list,
                &[
                    ("authorization", &auth),
                    ("mcp-session-id", &session),
                    ("mcp-protocol-version", "2025-11-25"),
                ],
            )
            .send()
            .await
            .unwrap()
        }
    };
    let stolen = in_session("bob").await;
    assert_eq!(stolen.status(), 404);
    let unknown = post(
        &url,
        &list,
        &[
            ("authorization", &bearer("bob")),
            ("mcp-session-id", "no-such-session"),
            ("mcp-protocol-version", "2025-11-25"),
        ],
    )
    .send()
    .await
    .unwrap();
    assert_eq!(unknown.status(), 404, "an unknown session is 404 too");
    let own = in_session("alice").await;
    assert_eq!(own.status(), 200);
    assert!(own.text().await.unwrap().contains("price_option_t"));
}

// ---- issue 24: task slots and the queue, whatever path a task takes ----

/// Waits up to 10 s until the MCP task `id` has a task directory (it began).
async fn began(team: &Team, id: &str) -> bool {
    let dir = team.artifacts().join(id);
    eventually(Duration::from_secs(10), || dir.join("registry.json").exists()).await
}

#[tokio::test]
async fn an_mcp_task_holds_its_principals_task_slot_like_a_direct_one() {
    // Two task slots, one per principal: alice's running MCP task holds her share, so her
    // plain run_script is refused principal_busy (naming WARDEN_TASKS_PER_PRINCIPAL) and bob's
    // plain run_script gets the other slot at once instead of server_busy.
    use crate::common::tasks::{poll_until_ended, start_task};
    let team = Team::start(TESTBED, &[]).await;
    let alice_tasks = team.tasks_session("alice").await;
    let (alice, bob) = (team.session("alice").await, team.session("bob").await);
    let long = json!({"script": "slow_echo(#{millis: 3500, tag: \"t\"}); 1"});
    let created = start_task(alice_tasks.peer(), "run_script", long.clone(), None).await;
    let id = created.task.task_id;
    assert!(began(&team, &id).await, "alice's MCP task never began");

    let (alices, (bobs, waited)) = tokio::join!(call(&alice, "run_script", long.clone()), async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = Instant::now();
        let answer = call(
            &bob,
            "run_script",
            json!({"script": "slow_echo(#{millis: 500, tag: \"b\"}); 2"}),
        )
        .await;
        (answer, started.elapsed())
    });
    let (code, retry) = refusal(&alices);
    assert_eq!(code, "principal_busy", "alice took a second slot: {alices}");
    assert!(retry.is_some_and(|s| s >= 1), "{alices}");
    let message = alices["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("WARDEN_TASKS_PER_PRINCIPAL"), "{message}");
    assert_eq!(bobs["status"], "success", "bob was starved: {bobs}");
    assert!(waited < Duration::from_millis(2500), "bob waited {waited:?}");
    let last = poll_until_ended(alice_tasks.peer(), &id, Duration::from_secs(30)).await;
    let last = crate::common::tasks::wire(last.last().expect("an answer"));
    assert_eq!(last["status"], "completed", "{last}");
}

#[tokio::test]
async fn a_principals_queued_tasks_wait_for_its_running_one_and_are_bounded() {
    // One running task and one waiting per principal: alice's second MCP task waits (its slot
    // goes to bob's task, which finishes first), then runs; her third is refused at once
    // principal_busy naming WARDEN_TASKS_QUEUED_PER_PRINCIPAL.
    use crate::common::tasks::{poll_until_ended, start_task, wire};
    let team = Team::start(TESTBED, &[("WARDEN_TASKS_QUEUED_PER_PRINCIPAL", "1")]).await;
    let (alice, bob) = (team.tasks_session("alice").await, team.tasks_session("bob").await);
    let long = json!({"script": "slow_echo(#{millis: 3000, tag: \"a\"}); 1"});
    let quick = json!({"script": "write_artifact(\"ran.txt\", \"x\"); 2"});
    let first = start_task(alice.peer(), "run_script", long, None)
        .await
        .task
        .task_id;
    assert!(began(&team, &first).await, "alice's first task never began");
    let second = start_task(alice.peer(), "run_script", quick.clone(), None)
        .await
        .task
        .task_id;

    let third = alice
        .peer()
        .call_tool(crate::common::tasks::call_params(
            "run_script",
            quick.clone(),
            Some(json!({crate::common::tasks::TASK_META_KEY: true})),
        ))
        .await
        .expect("a refusal is a plain result");
    let third = structured(&third);
    let (code, retry) = refusal(&third);
    assert_eq!(code, "principal_busy", "{third}");
    assert!(retry.is_some_and(|s| s >= 1), "{third}");
    let message = third["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("WARDEN_TASKS_QUEUED_PER_PRINCIPAL"), "{message}");

    let bobs = start_task(bob.peer(), "run_script", quick, None)
        .await
        .task
        .task_id;
    let ended = poll_until_ended(bob.peer(), &bobs, Duration::from_secs(10)).await;
    let ended = wire(ended.last().expect("an answer"));
    assert_eq!(ended["status"], "completed", "{ended}");
    // Bob's task ran while alice's first still runs, and her second has not begun.
    let firsts = wire(
        &crate::common::tasks::get_task(alice.peer(), &first)
            .await
            .expect("tasks/get"),
    );
    assert_eq!(
        firsts["status"], "working",
        "alice's first ended too soon: {firsts}"
    );
    assert!(
        !team.artifacts().join(&second).exists(),
        "alice's second task began beside her first"
    );
    let seconds = wire(
        &crate::common::tasks::get_task(alice.peer(), &second)
            .await
            .expect("tasks/get"),
    );
    assert_eq!(seconds["status"], "working", "{seconds}");

    for id in [&first, &second] {
        let last = poll_until_ended(alice.peer(), id, Duration::from_secs(30)).await;
        let last = wire(last.last().expect("an answer"));
        assert_eq!(last["status"], "completed", "{last}");
        assert_eq!(last["result"]["structuredContent"]["status"], "success", "{last}");
    }
    assert!(team.artifacts().join(&second).join("outputs/ran.txt").exists());
}

#[tokio::test]
async fn a_claimed_task_waiting_for_its_principals_share_is_cancelled_before_it_runs() {
    // Alice's second MCP task waits (status "waiting: …") for her running one; tasks/cancel
    // ends it cancelled, and when her first task ends it still never runs.
    use crate::common::tasks::{cancel_task, get_task, poll_until_ended, start_task, wire};
    let team = Team::start(TESTBED, &[("WARDEN_TASKS_QUEUED_PER_PRINCIPAL", "1")]).await;
    let alice = team.tasks_session("alice").await;
    let long = json!({"script": "slow_echo(#{millis: 2500, tag: \"a\"}); 1"});
    let first = start_task(alice.peer(), "run_script", long, None)
        .await
        .task
        .task_id;
    assert!(began(&team, &first).await, "alice's first task never began");
    let second = start_task(
        alice.peer(),
        "run_script",
        json!({"script": "write_artifact(\"ran.txt\", \"x\"); 2"}),
        None,
    )
    .await
    .task
    .task_id;
    let mut waiting = false;
    for _ in 0..100 {
        let answer = wire(&get_task(alice.peer(), &second).await.expect("tasks/get"));
        if answer["statusMessage"]
            .as_str()
            .is_some_and(|m| m.starts_with("waiting"))
        {
            waiting = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        waiting,
        "alice's second task was not claimed to wait for her share"
    );
    cancel_task(alice.peer(), &second)
        .await
        .expect("tasks/cancel of a waiting task");
    let ended = poll_until_ended(alice.peer(), &second, Duration::from_secs(10)).await;
    let ended = wire(ended.last().expect("an answer"));
    assert_eq!(ended["status"], "cancelled", "{ended}");
    let last = poll_until_ended(alice.peer(), &first, Duration::from_secs(30)).await;
    assert_eq!(wire(last.last().expect("an answer"))["status"], "completed");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !team.artifacts().join(&second).exists(),
        "the cancelled waiting task ran after all"
    );
    let again = wire(&get_task(alice.peer(), &second).await.expect("tasks/get"));
    assert_eq!(again["status"], "cancelled", "{again}");
}
