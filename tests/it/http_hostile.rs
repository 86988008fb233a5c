//! The HTTP transport against a hostile tenant or anonymous client (issue
//! 24): what one principal, one token or one socket can hold is bounded,
//! and the refusal names the limit. Each test starts the finance app with
//! a small bound and plays the attack over real HTTP on loopback.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::FINANCE;
use crate::common::http::{HttpServer, PRINCIPALS, initialize, post};

/// An initialize naming the stateless revision in its body and headers:
/// rmcp still opens a session for it (answering 2025-11-25).
fn initialize_2026() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2026-07-28", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
}

const NEWER: (&str, &str) = ("mcp-protocol-version", "2026-07-28");

/// The finance app with alice's and bob's API tokens and `env`.
async fn team(env: &[(&str, &str)]) -> (HttpServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("tokens");
    let lines: String = PRINCIPALS
        .iter()
        .map(|(name, _, hash)| format!("{name} {hash}\n"))
        .collect();
    std::fs::write(&file, lines).expect("tokens file");
    let file = file.display().to_string();
    let mut all = vec![("WARDEN_API_TOKENS_FILE", file.as_str())];
    all.extend_from_slice(env);
    (HttpServer::start(FINANCE, &all).await, dir)
}

fn bearer(who: &str) -> String {
    let token = PRINCIPALS
        .iter()
        .find(|(name, _, _)| *name == who)
        .map(|(_, token, _)| *token)
        .expect("a test principal");
    format!("Bearer {token}")
}

/// An initialize POST as `who`, with extra headers.
async fn initialize_as(server: &HttpServer, who: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let auth = bearer(who);
    let mut all = vec![("authorization", auth.as_str())];
    all.extend_from_slice(headers);
    let body = if headers.contains(&NEWER) {
        initialize_2026()
    } else {
        initialize()
    };
    post(&server.url, &body, &all)
        .send()
        .await
        .expect("initialize POST")
}

/// Checks a transport refusal: its status, `Retry-After`, stable code, and
/// a message naming the variable that sets the limit.
async fn assert_refused(
    answer: reqwest::Response,
    status: u16,
    retry_after: &str,
    code: &str,
    variable: &str,
) {
    assert_eq!(answer.status().as_u16(), status);
    assert_eq!(answer.headers()["retry-after"], retry_after);
    let body: Value = answer.json().await.expect("json");
    assert_eq!(body["error"], code, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains(variable), "{message}");
}

fn session_id(answer: &reqwest::Response) -> String {
    answer.headers()["mcp-session-id"]
        .to_str()
        .expect("id")
        .to_string()
}

#[tokio::test]
async fn an_initialize_naming_2026_still_counts_against_the_session_cap() {
    // rmcp opens a session for every initialize, whatever revision its
    // headers name: the cap counts sessions where they are opened.
    let server = HttpServer::start(FINANCE, &[("WARDEN_HTTP_MAX_SESSIONS", "2")]).await;
    let newer = |server: &HttpServer| post(&server.url, &initialize_2026(), &[NEWER]).send();
    for _ in 0..2 {
        let answer = newer(&server).await.expect("initialize");
        assert_eq!(answer.status(), 200);
        assert!(answer.headers().contains_key("mcp-session-id"));
    }
    for refused in [
        newer(&server).await.expect("initialize"),
        server.initialize(&[]).await,
    ] {
        assert_refused(refused, 503, "5", "too_many_sessions", "WARDEN_HTTP_MAX_SESSIONS").await;
    }
    // Stateless requests open no session and still work.
    let client = server.stateless_client(None).await;
    assert!(!client.list_all_tools().await.expect("tools").is_empty());
}

#[tokio::test]
async fn one_principal_cannot_fill_the_session_cap() {
    let (server, _tokens) = team(&[
        ("WARDEN_HTTP_MAX_SESSIONS", "10"),
        ("WARDEN_HTTP_SESSIONS_PER_PRINCIPAL", "3"),
    ])
    .await;
    let mut alice = Vec::new();
    for _ in 0..3 {
        let answer = initialize_as(&server, "alice", &[NEWER]).await;
        assert_eq!(answer.status(), 200);
        alice.push(session_id(&answer));
    }
    let refused = initialize_as(&server, "alice", &[]).await;
    assert_refused(
        refused,
        503,
        "5",
        "too_many_sessions",
        "WARDEN_HTTP_SESSIONS_PER_PRINCIPAL",
    )
    .await;
    // Bob is not affected, and alice's sessions still work.
    assert_eq!(initialize_as(&server, "bob", &[]).await.status(), 200);
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let auth = bearer("alice");
    let answered = post(
        &server.url,
        &ping,
        &[
            ("authorization", auth.as_str()),
            ("mcp-session-id", alice[0].as_str()),
            ("mcp-protocol-version", "2025-11-25"),
        ],
    )
    .send()
    .await
    .expect("ping");
    assert_eq!(answered.status(), 200);
    // Closing one (answered 204, as the spec's clients expect) makes room.
    let closed = reqwest::Client::new()
        .delete(&server.url)
        .header("authorization", &auth)
        .header("mcp-session-id", &alice[0])
        .send()
        .await
        .expect("delete");
    assert_eq!(closed.status(), 204);
    assert_eq!(initialize_as(&server, "alice", &[]).await.status(), 200);
}

#[tokio::test]
async fn one_principal_cannot_hold_every_stream() {
    // Open SSE streams are requests in progress: alice may hold two; the
    // third request is refused at once (429, naming the variable), bob is
    // served, and a closed stream gives alice her place back.
    let (server, _tokens) = team(&[("WARDEN_HTTP_REQUESTS_PER_PRINCIPAL", "2")]).await;
    let opened = initialize_as(&server, "alice", &[]).await;
    let id = session_id(&opened);
    let auth = bearer("alice");
    let stream = || {
        reqwest::Client::new()
            .get(&server.url)
            .header("authorization", &auth)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &id)
            .header("mcp-protocol-version", "2025-11-25")
            .send()
    };
    let first = stream().await.expect("first stream");
    let second = stream().await.expect("second stream");
    assert_eq!((first.status().as_u16(), second.status().as_u16()), (200, 200));
    let refused = initialize_as(&server, "alice", &[]).await;
    assert_refused(
        refused,
        429,
        "1",
        "too_many_requests",
        "WARDEN_HTTP_REQUESTS_PER_PRINCIPAL",
    )
    .await;
    assert_eq!(initialize_as(&server, "bob", &[]).await.status(), 200);
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = initialize_as(&server, "alice", &[]).await;
        if answer.status() == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "a closed stream was never given back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(second);
}

#[tokio::test]
async fn silent_and_unauthenticated_connections_are_short_lived_and_capped() {
    let (server, _tokens) = team(&[
        ("WARDEN_HTTP_HEADER_TIMEOUT_SECONDS", "1"),
        ("WARDEN_HTTP_UNPROVEN_CONNECTIONS", "2"),
    ])
    .await;
    let addr = server.base.trim_start_matches("http://").to_string();
    // A connection that sends nothing is closed at the header deadline.
    let started = Instant::now();
    let mut silent = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let mut sink = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), silent.read_to_end(&mut sink))
        .await
        .expect("closed by the server")
        .expect("read");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );

    // Two silent sockets take both unproven places: a third connection is
    // not served until one of them is closed (at most the deadline later).
    let _a = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let _b = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let mut third = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    third
        .write_all(format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), third.read_to_end(&mut answer))
        .await
        .expect("served once an unproven place freed")
        .expect("read");
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "served at once while two unproven connections were open: {:?}",
        started.elapsed()
    );

    // An authenticated client's connection is proven and keeps the full
    // idle period (60 s) between requests, beyond the 1 s header deadline.
    let client = reqwest::Client::new();
    let auth = bearer("alice");
    let tools = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let send = || {
        client
            .post(&server.url)
            .header("authorization", &auth)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/list")
            .body(tools.to_string())
            .send()
    };
    assert_eq!(send().await.expect("first").status(), 200);
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert_eq!(send().await.expect("same connection, later").status(), 200);
}

#[tokio::test]
async fn a_trickled_body_is_cut() {
    // A body promised at 10 KB and sent a byte every 200 ms is 5 bytes/s
    // against a minimum of 100: after the 1 s grace it is answered 408.
    let (server, _tokens) = team(&[
        ("WARDEN_HTTP_HEADER_TIMEOUT_SECONDS", "1"),
        ("WARDEN_HTTP_BODY_MIN_RATE", "100"),
    ])
    .await;
    let addr = server.base.trim_start_matches("http://").to_string();
    let mut socket = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 10000\r\n\r\n",
        bearer("alice")
    );
    socket.write_all(head.as_bytes()).await.expect("head");
    let started = Instant::now();
    let trickle = async {
        loop {
            if socket.write_all(b" ").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            if started.elapsed() > Duration::from_secs(10) {
                return;
            }
        }
    };
    let (mut reader, _) = {
        let _ = tokio::time::timeout(Duration::from_secs(4), trickle).await;
        socket.into_split()
    };
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), reader.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(
        text.contains("body_too_slow") && text.contains("WARDEN_HTTP_BODY_MIN_RATE"),
        "{text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_token_cannot_name_the_operator() {
    // `local` is the stdio operator, exempt from per-principal limits: a
    // tokens file that names it is refused at start, naming the line.
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("tokens");
    std::fs::write(&file, format!("local {}\n", PRINCIPALS[0].2)).expect("tokens file");
    let file = file.display().to_string();
    let refused = HttpServer::start_on(FINANCE, "127.0.0.1:0", &[("WARDEN_API_TOKENS_FILE", &file)])
        .await
        .err()
        .expect("the server refuses to start");
    assert!(
        refused.contains("line 1") && refused.contains("reserved"),
        "{refused}"
    );
}

#[tokio::test]
async fn strays_are_told_where_the_endpoint_is() {
    let server = HttpServer::start(FINANCE, &[("WARDEN_ALLOWED_ORIGINS", "http://localhost:*")]).await;
    let client = reqwest::Client::new();
    let answer = client.get(format!("{}/", server.base)).send().await.expect("get");
    assert_eq!(answer.status(), 404);
    let body: Value = answer.json().await.expect("json");
    assert!(
        body["message"].as_str().unwrap_or_default().contains("/mcp"),
        "{body}"
    );
    // A preflight of a path the server does not serve is not answered 200.
    let preflight = client
        .request(reqwest::Method::OPTIONS, format!("{}/anything", server.base))
        .header("origin", server.base.as_str())
        .header("access-control-request-method", "POST")
        .send()
        .await
        .expect("options");
    assert_eq!(preflight.status(), 404);
    // A wrong Host is refused (403, named) without a WARN line per request.
    let wrong = post(&server.url, &initialize(), &[("host", "evil.example")])
        .send()
        .await
        .expect("post");
    assert_eq!(wrong.status(), 403);
    let body: Value = wrong.json().await.expect("json");
    assert_eq!(body["error"], "forbidden_host");
    // A literal wildcard is not an origin (while a real port is).
    let port = server.initialize(&[("origin", "http://localhost:6274")]).await;
    assert_eq!(port.status(), 200);
    let wildcard = server.initialize(&[("origin", "http://localhost:*")]).await;
    assert_eq!(wildcard.status(), 403);
    let mut server = server;
    let (_, stderr) = server.stop().await;
    assert!(!stderr.contains("Host"), "{stderr}");
}

#[tokio::test]
async fn a_wrong_token_is_told_in_a_form_clients_show() {
    // MCP clients surface a JSON-RPC error found in a non-2xx body (the
    // Python SDK shows it instead of "Server returned an error response"):
    // the 401 carries the fix in both the plain and the JSON-RPC shape.
    let (server, _tokens) = team(&[]).await;
    let answer = post(
        &server.url,
        &initialize(),
        &[("authorization", "Bearer not-a-token")],
    )
    .send()
    .await
    .expect("post");
    assert_eq!(answer.status(), 401);
    let body: Value = answer.json().await.expect("json");
    assert_eq!(body["code"], "invalid_token");
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["error"]["code"], -32001);
    assert_eq!(body["error"]["data"]["code"], "invalid_token");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("not a known API token") && message.contains("Authorization: Bearer"),
        "{message}"
    );
}

#[tokio::test]
async fn a_hostile_value_quoted_in_a_refusal_comes_back_bounded() {
    // Errors quote what they refuse: rmcp's own refusal of a header that
    // does not match the body (it never reaches the service), and the
    // service's unknown tool and method in a session, each for a 200 KB
    // name, come back within a few KiB, the message elided to
    // MAX_ERROR_MESSAGE_BYTES.
    use warden::limits::MAX_ERROR_MESSAGE_BYTES;
    let server = HttpServer::start(FINANCE, &[]).await;
    let hostile = "k".repeat(200_000);
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let mismatched = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": hostile, "arguments": {}, "_meta": meta}});
    let refusal = post(
        &server.url,
        &mismatched,
        &[NEWER, ("mcp-method", "tools/call"), ("mcp-name", "x")],
    )
    .send()
    .await
    .expect("answered");
    assert_eq!(refusal.status(), 400);
    let mut answers = vec![refusal.text().await.expect("body")];
    let opened = server.initialize(&[]).await;
    let session = session_id(&opened);
    let headers = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(&server.url, &initialized, &headers)
        .send()
        .await
        .expect("initialized");
    for (method, params) in [
        ("tools/call", json!({"name": hostile, "arguments": {}})),
        (hostile.as_str(), json!({})),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 4, "method": method, "params": params});
        let answer = post(&server.url, &body, &headers).send().await.expect("answered");
        answers.push(answer.text().await.expect("body"));
    }
    for answer in answers {
        assert!(
            answer.len() <= 2 * MAX_ERROR_MESSAGE_BYTES,
            "{} bytes: {answer:.300}",
            answer.len()
        );
        let json = answer
            .lines()
            .find_map(|l| l.strip_prefix("data: ").filter(|l| !l.is_empty()))
            .unwrap_or(&answer);
        let error: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json:.300}"));
        let message = error["error"]["message"].as_str().expect("a protocol error");
        assert!(
            message.len() <= MAX_ERROR_MESSAGE_BYTES && message.contains(" bytes elided]…"),
            "{message:.300}"
        );
    }
}

#[tokio::test]
async fn a_stateless_request_of_a_removed_method_is_not_found_and_says_why() {
    // 2026-07-28 has no ping or initialize: 404 and -32601, as the revision requires, with a
    // message that says so (rmcp's own refusal named only the method).
    let server = HttpServer::start(FINANCE, &[]).await;
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                      "io.modelcontextprotocol/clientCapabilities": {}});
    for method in ["ping", "logging/setLevel"] {
        let body = json!({"jsonrpc": "2.0", "id": 5, "method": method,
                          "params": {"level": "info", "_meta": meta}});
        let answer = post(&server.url, &body, &[NEWER, ("mcp-method", method)])
            .send()
            .await
            .expect("answered");
        assert_eq!(answer.status(), 404, "{method}");
        let answer: Value = serde_json::from_str(&answer.text().await.expect("body")).expect("JSON");
        assert_eq!(answer["error"]["code"], -32601, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!(
                "'{method}' is not a method of the stateless revision (2026-07-28)"
            )),
            "{answer}"
        );
    }
}

#[tokio::test]
async fn a_body_that_is_not_a_message_gets_a_json_rpc_error_not_unsupported_media_type() {
    // rmcp answered these 415 with a plain-text body although the Content-Type was right:
    // now 400 and the JSON-RPC error the stdio transport gives, with the id when one can be
    // read, and the server goes on serving.
    let server = HttpServer::start(FINANCE, &[]).await;
    let raw = |body: Vec<u8>, content_type: &'static str| {
        reqwest::Client::new()
            .post(&server.url)
            .header("content-type", content_type)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .body(body)
    };
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"get_quote","arguments":{{"symbol":{}{}}}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let cases: [(&[u8], i64, Value, &str); 4] = [
        (b"{not json", -32700, Value::Null, "is not valid JSON"),
        (deep.as_bytes(), -32700, json!(9), "nests 203 levels"),
        (
            br#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#,
            -32600,
            Value::Null,
            "JSON-RPC batch",
        ),
        (
            br#"{"jsonrpc":"2.0","id":"q-3"}"#,
            -32600,
            json!("q-3"),
            "expected a JSON-RPC 2.0 request",
        ),
    ];
    for (body, code, id, says) in cases {
        let answer = raw(body.to_vec(), "application/json")
            .send()
            .await
            .expect("answered");
        assert_eq!(
            answer.status(),
            400,
            "{}",
            String::from_utf8_lossy(&body[..body.len().min(80)])
        );
        assert_eq!(answer.headers()["content-type"], "application/json");
        let reply: Value = answer.json().await.expect("a JSON-RPC error");
        assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
        assert_eq!(reply["error"]["code"], code, "{reply}");
        assert!(reply.get("id").is_some_and(|got| *got == id), "{reply}");
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{message}");
    }
    // A body that is not declared JSON keeps rmcp's 415: the Content-Type is what is wrong.
    let answer = raw(b"{not json".to_vec(), "text/plain")
        .send()
        .await
        .expect("answered");
    assert_eq!(answer.status(), 415);
    // Serving goes on.
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "get_quote", "arguments": {"symbol": "AAPL"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let answer = post(
        &server.url,
        &body,
        &[NEWER, ("mcp-method", "tools/call"), ("mcp-name", "get_quote")],
    )
    .send()
    .await
    .expect("answered");
    assert_eq!(answer.status(), 200);
}

#[tokio::test]
async fn an_initialize_whose_params_cannot_be_read_is_invalid_params_not_a_missing_session() {
    // rmcp reads such an initialize as no initialize and asked for a session id (400, plain
    // text): the client was sent after a session it was trying to open.
    let server = HttpServer::start(FINANCE, &[]).await;
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {
        "protocolVersion": 5, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    let answer = post(&server.url, &body, &[]).send().await.expect("answered");
    assert_eq!(answer.status(), 400);
    assert!(answer.headers().get("mcp-session-id").is_none());
    let reply: Value = answer.json().await.expect("a JSON-RPC error");
    assert_eq!(reply["id"], 3, "{reply}");
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("initialize: protocolVersion: invalid type"),
        "{message}"
    );
    // A stateless request without its `_meta` is told what a client of either revision does.
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"});
    let answer = post(&server.url, &body, &[NEWER, ("mcp-method", "tools/list")])
        .send()
        .await
        .expect("answered");
    assert_eq!(answer.status(), 400);
    let reply: Value = answer.json().await.expect("a JSON-RPC error");
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("sends initialize first"), "{message}");
    // Any other request without a session is still told to bring one.
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"});
    let answer = post(&server.url, &body, &[("mcp-protocol-version", "2025-11-25")])
        .send()
        .await
        .expect("answered");
    assert_eq!(answer.status(), 400);
    assert!(
        answer
            .text()
            .await
            .expect("body")
            .contains("Session ID is required")
    );
    // A readable initialize opens a session as before.
    let answer = post(&server.url, &initialize(), &[])
        .send()
        .await
        .expect("answered");
    assert_eq!(answer.status(), 200);
    assert!(answer.headers().get("mcp-session-id").is_some());
}
