//! `serve --http`: MCP over Streamable HTTP with rmcp's client, both
//! protocol revisions, and the transport's own rules (Origin, loopback
//! without authentication, health, session and connection caps, body cap,
//! draining on SIGTERM).

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::common::http::{HttpServer, post};
use crate::common::*;

fn arguments(value: Value) -> serde_json::Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

/// A client that keeps every progress message it receives.
#[derive(Clone, Default)]
struct ProgressCollector(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl rmcp::ClientHandler for ProgressCollector {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        if let Ok(mut messages) = self.0.lock() {
            messages.push(params.message.unwrap_or_default());
        }
    }
}

#[tokio::test]
async fn a_session_client_lists_and_calls_guards_with_progress() {
    // 2025-11-25: a session whose SSE stream carries the task's progress.
    let mut server = HttpServer::start(FINANCE, &[]).await;
    let progress = ProgressCollector::default();
    let client = server
        .client_with(
            progress.clone(),
            None,
            rmcp::service::ClientLifecycleMode::Initialize,
        )
        .await
        .unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "price_option_t"));
    let result = client
        .call_tool(
            CallToolRequestParams::new("run_script").with_arguments(arguments(json!({
                "script": r#"let q = get_quote(#{symbol: "AAPL"}); write_artifact("q.json", q); q.price"#
            }))),
        )
        .await
        .unwrap();
    assert_eq!(structured(&result)["status"], "success", "{result:?}");
    let messages = progress.0.lock().unwrap().clone();
    assert!(
        messages.iter().any(|m| m.starts_with("guard call get_quote")),
        "{messages:?}"
    );
    assert!(messages.iter().any(|m| m == "artifact q.json"), "{messages:?}");
    client.cancel().await.unwrap();
    let (code, _) = server.stop().await;
    assert_eq!(code, Some(0));
}

#[tokio::test]
async fn a_stateless_client_discovers_and_calls_guards() {
    let server = HttpServer::start(FINANCE, &[]).await;
    let client = server.stateless_client(None).await;
    let info = client.peer_info().expect("discover result");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("warden-finance")
    );
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "run_batch"));
    let result = client
        .call_tool(
            CallToolRequestParams::new("get_quote").with_arguments(arguments(json!({"symbol": "MSFT"}))),
        )
        .await
        .unwrap();
    assert!(!is_error(&result), "{result:?}");
    assert_eq!(structured(&result)["symbol"], "MSFT");
}

#[tokio::test]
async fn a_client_that_only_discovers_leaves_the_server_serving() {
    // Over HTTP: discover, go away, and the server still answers.
    let server = HttpServer::start(FINANCE, &[]).await;
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}});
    for _ in 0..3 {
        let answer = post(
            &server.url,
            &discover,
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "server/discover"),
            ],
        )
        .send()
        .await
        .unwrap();
        assert_eq!(answer.status(), 200);
        assert!(answer.text().await.unwrap().contains("supportedVersions"));
    }
    let client = server.session_client(None).await;
    assert!(!client.list_all_tools().await.unwrap().is_empty());

    // Over stdio: a discover, then the end of input, is a clean exit.
    let mut child = tokio::process::Command::new(FINANCE)
        .arg("serve")
        .env("WARDEN_ARTIFACTS_DIR", server.artifacts.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, format!("{discover}\n").as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stdout).contains("supportedVersions"));
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn a_foreign_origin_is_refused_before_anything_else() {
    let server = HttpServer::start(FINANCE, &[("WARDEN_ALLOWED_ORIGINS", "https://claude.ai")]).await;
    let evil = server.initialize(&[("origin", "http://evil.example")]).await;
    assert_eq!(evil.status(), 403);
    let body: Value = evil.json().await.unwrap();
    assert_eq!(body["error"], "forbidden_origin");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("WARDEN_ALLOWED_ORIGINS")
    );
    for allowed in ["https://claude.ai", server.base.as_str()] {
        let answer = server.initialize(&[("origin", allowed)]).await;
        assert_eq!(answer.status(), 200, "{allowed}");
    }
    // Without an Origin (every non-browser client) the request passes.
    assert_eq!(server.initialize(&[]).await.status(), 200);
}

#[tokio::test]
async fn without_authentication_only_loopback_is_served() {
    let refused = HttpServer::start_on(FINANCE, "0.0.0.0:0", &[]).await;
    let Err(stderr) = refused else {
        panic!("served a non-loopback address without authentication");
    };
    assert!(stderr.contains("WARDEN_API_TOKENS_FILE"), "{stderr}");
    assert!(stderr.contains("WARDEN_OAUTH_ISSUER"), "{stderr}");
    // A bad WARDEN_HTTP_ADDR names itself.
    let artifacts = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(FINANCE)
        .arg("serve")
        .env("WARDEN_HTTP_ADDR", "localhost")
        .env("WARDEN_ARTIFACTS_DIR", artifacts.path())
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("WARDEN_HTTP_ADDR"));
}

#[tokio::test]
async fn health_answers_and_readiness_checks_the_store() {
    let server = HttpServer::start(FINANCE, &[]).await;
    let healthz = reqwest::get(format!("{}/healthz", server.base)).await.unwrap();
    assert_eq!(healthz.status(), 200);
    let readyz = reqwest::get(format!("{}/readyz", server.base)).await.unwrap();
    assert_eq!(readyz.status(), 200);
    let body: Value = readyz.json().await.unwrap();
    assert_eq!(
        body["checks"],
        json!({"artifacts": "ok", "resources": "ok", "task_store": "ok", "worker": "ok"})
    );

    // An artifacts directory that cannot take a write: the task store cannot open there.
    // The server still starts (guards need no store), and readiness says why, naming the
    // variable to fix.
    let blocked = tempfile::tempdir().unwrap();
    let file = blocked.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let file = file.to_string_lossy().to_string();
    let server = HttpServer::start_on(FINANCE, "127.0.0.1:0", &[("WARDEN_ARTIFACTS_DIR", &file)])
        .await
        .expect("a store that cannot open is no dead server");
    let readyz = reqwest::get(format!("{}/readyz", server.base)).await.unwrap();
    assert_eq!(readyz.status(), 503);
    let body: Value = readyz.json().await.unwrap();
    let store = body["checks"]["task_store"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(store.contains("task store"), "{body}");
    assert!(store.contains("WARDEN_ARTIFACTS_DIR"), "{body}");
}

/// `FINANCE probe URL` (the compose healthcheck): its exit code and stdout.
async fn probe(url: &str) -> (Option<i32>, String) {
    let output = tokio::process::Command::new(FINANCE)
        .args(["probe", url])
        .output()
        .await
        .expect("run probe");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[tokio::test]
async fn a_managed_resource_that_failed_to_load_makes_the_node_not_ready() {
    // The image served get_quote broken (its quotes file missing) while /readyz said
    // ready: a managed resource that failed to load is a failed check naming it and
    // why, and the healthcheck (`probe`) exits 1 on it, 0 on a ready node.
    let missing = "/nonexistent/warden-finance/sample_market_data.csv";
    let broken = HttpServer::start(FINANCE, &[("WARDEN_FINANCE_DATA", missing)]).await;
    let readyz = reqwest::get(format!("{}/readyz", broken.base)).await.unwrap();
    assert_eq!(readyz.status(), 503);
    let body: Value = readyz.json().await.unwrap();
    assert_eq!(body["status"], "not_ready", "{body}");
    let resources = body["checks"]["resources"].as_str().unwrap_or_default();
    assert!(resources.contains("QuoteBook"), "{body}");
    assert!(resources.contains(missing), "{body}");
    assert_eq!(body["checks"]["worker"], "ok", "only the resource fails: {body}");
    let client = broken.stateless_client(None).await;
    let result = client
        .call_tool(
            CallToolRequestParams::new("get_quote").with_arguments(arguments(json!({"symbol": "AAPL"}))),
        )
        .await
        .unwrap();
    assert!(is_error(&result), "what readiness warns about: {result:?}");

    let (code, out) = probe(&format!("{}/readyz", broken.base)).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("QuoteBook"), "the answer is shown: {out}");
    let ready = HttpServer::start(FINANCE, &[]).await;
    let (code, out) = probe(&format!("{}/readyz", ready.base)).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("\"ready\""), "{out}");
    // Nothing listening, and a URL it cannot probe.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    assert_eq!(probe(&format!("http://127.0.0.1:{port}/readyz")).await.0, Some(1));
    assert_eq!(probe("http://no-such-host.invalid:8080/readyz").await.0, Some(1));
    assert_eq!(
        probe(&format!("https://127.0.0.1:{port}/readyz")).await.0,
        Some(2)
    );
}

#[tokio::test]
async fn the_old_examples_placeholder_token_stops_the_server() {
    // deploy/tokens.txt once shipped a working line for the token "change-me" on a port
    // published on every interface: a tokens file that still lists it is refused at start.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.txt");
    std::fs::write(
        &file,
        "analyst-1 e2186dbdb1bb4193608605e84f33208765b5693b55edd4f730a719a100eeea6f\n",
    )
    .unwrap();
    let file = file.to_string_lossy().to_string();
    let refused = HttpServer::start_on(FINANCE, "127.0.0.1:0", &[("WARDEN_API_TOKENS_FILE", &file)]).await;
    let Err(stderr) = refused else {
        panic!("served with the example's placeholder token");
    };
    assert!(stderr.contains("WARDEN_API_TOKENS_FILE"), "{stderr}");
    assert!(stderr.contains("placeholder"), "{stderr}");
    assert!(stderr.contains("openssl rand -hex 32"), "{stderr}");
}

#[tokio::test]
async fn sessions_beyond_the_cap_are_refused_with_retry_after() {
    let server = HttpServer::start(FINANCE, &[("WARDEN_HTTP_MAX_SESSIONS", "2")]).await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let answer = server.initialize(&[]).await;
        assert_eq!(answer.status(), 200);
        ids.push(answer.headers()["mcp-session-id"].to_str().unwrap().to_string());
    }
    let refused = server.initialize(&[]).await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "5");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"], "too_many_sessions");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("WARDEN_HTTP_MAX_SESSIONS")
    );
    // Stateless requests open no session and still work.
    let client = server.stateless_client(None).await;
    assert!(!client.list_all_tools().await.unwrap().is_empty());
    // Closing a session makes room.
    let closed = reqwest::Client::new()
        .delete(&server.url)
        .header("mcp-session-id", &ids[0])
        .send()
        .await
        .unwrap();
    assert!(closed.status().is_success(), "{}", closed.status());
    let answer = server.initialize(&[]).await;
    assert_eq!(answer.status(), 200);
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_until_one_closes() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = HttpServer::start(FINANCE, &[("WARDEN_HTTP_MAX_CONNECTIONS", "2")]).await;
    let addr = server.base.trim_start_matches("http://").to_string();
    let first = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let _second = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut third = tokio::net::TcpStream::connect(&addr).await.unwrap();
    third
        .write_all(format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    let early = tokio::time::timeout(Duration::from_millis(700), third.read_to_end(&mut answer)).await;
    assert!(early.is_err(), "a third connection was served at a cap of 2");
    drop(first);
    tokio::time::timeout(Duration::from_secs(5), third.read_to_end(&mut answer))
        .await
        .expect("served once a connection closed")
        .unwrap();
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn a_body_over_the_message_cap_is_refused() {
    let server = HttpServer::start(
        FINANCE,
        &[
            ("WARDEN_MAX_ARGUMENT_BYTES", "1024"),
            ("WARDEN_MAX_MESSAGE_BYTES", "65536"),
        ],
    )
    .await;
    // The cap is the argument cap plus the 1 MiB envelope: send 2 MiB.
    let huge = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"pad": "x".repeat(2 * 1024 * 1024)}});
    let answer = post(&server.url, &huge, &[]).send().await.unwrap();
    assert_eq!(answer.status(), 413);
    assert_eq!(server.initialize(&[]).await.status(), 200);
}

#[tokio::test]
async fn sigterm_lets_a_running_task_finish_within_the_grace() {
    let mut server = HttpServer::start(TESTBED, &[("WARDEN_DRAIN_SECONDS", "20")]).await;
    let client = server.session_client(None).await;
    let script = r#"let r = slow_echo(#{tag: "drain", millis: 1500}); r.tag"#;
    let call = client.call_tool(
        CallToolRequestParams::new("run_script").with_arguments(arguments(json!({"script": script}))),
    );
    let stop = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let pid = nix::unistd::Pid::from_raw(server.pid() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        // Draining: still listening, so /readyz tells the load balancer
        // (503 `draining`), and new work is refused with the same word.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let readyz = reqwest::get(format!("{}/readyz", server.base))
            .await
            .expect("readyz");
        let readyz = (
            readyz.status().as_u16(),
            readyz.json::<Value>().await.unwrap_or_default(),
        );
        let new_work = server.initialize(&[]).await;
        let new_work = (
            new_work.status().as_u16(),
            new_work.json::<Value>().await.unwrap_or_default(),
        );
        (readyz, new_work)
    };
    let (result, (readyz, new_work)) = tokio::join!(call, stop);
    let result = result.expect("the running call was answered");
    assert_eq!(structured(&result)["status"], "success", "{result:?}");
    assert_eq!(structured(&result)["value"], "drain");
    assert_eq!(
        (readyz.0, &readyz.1["status"]),
        (503, &json!("draining")),
        "{readyz:?}"
    );
    assert_eq!(
        (new_work.0, &new_work.1["error"]),
        (503, &json!("draining")),
        "{new_work:?}"
    );
    let (code, stderr) = server.stop().await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("drained (0 call(s) cut"), "{stderr}");
}

#[tokio::test]
async fn after_the_grace_a_running_task_is_cancelled_and_recorded() {
    let mut server = HttpServer::start(FINANCE, &[("WARDEN_DRAIN_SECONDS", "1")]).await;
    let client = server.session_client(None).await;
    let call = tokio::spawn(async move {
        client
            .call_tool(
                CallToolRequestParams::new("run_script")
                    .with_arguments(arguments(json!({"script": ENDLESS, "timeout_seconds": 120}))),
            )
            .await
    });
    let started = std::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (code, stderr) = server.stop().await;
    // The answer, if the client got one before its session closed, is not a success.
    if let Ok(Ok(Ok(answer))) = tokio::time::timeout(Duration::from_millis(200), call).await {
        assert_eq!(structured(&answer)["status"], "cancelled", "{answer:?}");
    }
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "drain took {:?}",
        started.elapsed()
    );
    assert!(stderr.contains("1 call(s) cut"), "{stderr}");
    let results: Vec<Value> = std::fs::read_dir(server.artifacts.path())
        .unwrap()
        .flatten()
        .filter_map(|entry| std::fs::read(entry.path().join("result.json")).ok())
        .filter_map(|bytes| serde_json::from_slice(&bytes).ok())
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["status"], "cancelled", "{:?}", results[0]);
}

#[tokio::test]
async fn preflight_checks_a_running_http_server() {
    let server = HttpServer::start(FINANCE, &[]).await;
    let output = tokio::process::Command::new(FINANCE)
        .args(["preflight", "--json", "--url", &server.url])
        .env("WARDEN_ARTIFACTS_DIR", server.artifacts.path())
        .output()
        .await
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(0), "{report}");
    let names: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for name in [
        "registration",
        "http.healthz",
        "http.readyz",
        "http.auth",
        "mcp.initialize",
        "mcp.tools_list",
        "mcp.discover",
    ] {
        assert!(names.contains(&name), "{name} missing: {report}");
    }
    assert_eq!(report["server"]["name"], "warden-finance");

    // Nothing listening there: failures, exit 1. A named token variable that is unset: usage error.
    let dead = "http://127.0.0.1:9/mcp";
    let output = tokio::process::Command::new(FINANCE)
        .args(["preflight", "--url", dead, "--timeout", "2"])
        .env("WARDEN_ARTIFACTS_DIR", server.artifacts.path())
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    // Probing a server elsewhere leaves no ./artifacts where it ran.
    let cwd = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(FINANCE)
        .args(["preflight", "--url", dead, "--timeout", "2"])
        .current_dir(cwd.path())
        .env_remove("WARDEN_ARTIFACTS_DIR")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let left: Vec<_> = std::fs::read_dir(cwd.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "preflight --url created {left:?}");
    let output = tokio::process::Command::new(FINANCE)
        .args([
            "preflight",
            "--url",
            &server.url,
            "--token-env",
            "WARDEN_TEST_NO_SUCH_TOKEN",
        ])
        .env("WARDEN_ARTIFACTS_DIR", server.artifacts.path())
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("WARDEN_TEST_NO_SUCH_TOKEN"));
}

#[tokio::test]
async fn an_idle_connection_is_closed_and_a_long_call_is_not() {
    use tokio::io::AsyncReadExt;
    let server = HttpServer::start(TESTBED, &[("WARDEN_HTTP_IDLE_SECONDS", "1")]).await;
    // A socket that sends nothing gives its connection back.
    let addr = server.base.trim_start_matches("http://").to_string();
    let mut quiet = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), quiet.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "an idle connection stayed open");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    // A call running past the idle time is kept alive by SSE keep-alives, in
    // a session and statelessly alike.
    let slow = || {
        CallToolRequestParams::new("slow_echo")
            .with_arguments(arguments(json!({"tag": "slow", "millis": 2500})))
    };
    let session = server.session_client(None).await;
    let answer = session
        .call_tool(slow())
        .await
        .expect("a 2.5 s call in a session");
    assert_eq!(structured(&answer)["tag"], "slow", "{answer:?}");
    let stateless = server.stateless_client(None).await;
    let answer = stateless.call_tool(slow()).await.expect("a 2.5 s stateless call");
    assert_eq!(structured(&answer)["tag"], "slow", "{answer:?}");
}
