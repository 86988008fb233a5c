//! The HTTP transport's direct path for plain stateless guard calls
//! (`mcp::transport::http::direct`): it answers as rmcp's service would,
//! never skips one of rmcp's refusals, and records the end of a call whose
//! client went away.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::http::{HttpServer, post};
use crate::common::*;

/// A stateless 2026-07-28 `tools/call` body.
fn call(tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": tool, "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
}

/// The headers a 2026-07-28 client sends with a call of `tool`.
fn headers(tool: &str) -> Vec<(&'static str, String)> {
    vec![
        ("mcp-protocol-version", "2026-07-28".into()),
        ("mcp-method", "tools/call".into()),
        ("mcp-name", tool.into()),
    ]
}

async fn send(url: &str, body: &Value, headers: &[(&'static str, String)]) -> (u16, String, String) {
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let answer = post(url, body, &headers).send().await.expect("answered");
    let status = answer.status().as_u16();
    let kind = answer
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (status, kind, answer.text().await.expect("body"))
}

fn started(records: &[Value], tool: &str) -> usize {
    records
        .iter()
        .filter(|r| r["event"] == "request_started" && r["tool"] == tool)
        .count()
}

#[tokio::test]
async fn a_plain_stateless_guard_call_answers_as_rmcps_service_does() {
    // The same call answered by the direct path and (an Accept with weights
    // sends it to rmcp) by rmcp's service: the same JSON answer, and both recorded.
    let server = HttpServer::start(FINANCE, &[]).await;
    let body = call("get_quote", json!({"symbol": "MSFT"}));
    let direct = send(&server.url, &body, &headers("get_quote")).await;
    let mut through_rmcp = headers("get_quote");
    through_rmcp.push(("accept", "application/json;q=1, text/event-stream;q=0.5".into()));
    let rmcp = send(&server.url, &body, &through_rmcp).await;
    assert_eq!(
        (direct.0, direct.1.as_str()),
        (200, "application/json"),
        "{direct:?}"
    );
    assert_eq!((rmcp.0, rmcp.1.as_str()), (200, "application/json"), "{rmcp:?}");
    let direct: Value = serde_json::from_str(&direct.2).expect("JSON");
    let rmcp: Value = serde_json::from_str(&rmcp.2).expect("JSON");
    assert_eq!(direct, rmcp);
    assert_eq!(
        direct["result"]["structuredContent"]["symbol"], "MSFT",
        "{direct}"
    );
    let records = events_until(&server.artifacts.path().join("events.jsonl"), |r| {
        r.iter()
            .filter(|r| r["event"] == "request_finished" && r["tool"] == "get_quote")
            .count()
            == 2
    })
    .await;
    let finished: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "request_finished" && r["tool"] == "get_quote")
        .collect();
    assert_eq!(finished.len(), 2, "{records:?}");
    assert!(
        finished
            .iter()
            .all(|r| r["status"] == "success" && r["principal"] == "local"),
        "{finished:?}"
    );
}

#[tokio::test]
async fn the_direct_path_keeps_every_refusal_of_rmcps_service() {
    // Requests shaped like a plain call but wrong in one respect get rmcp's
    // answer, and the guard never runs for them.
    let server = HttpServer::start(FINANCE, &[]).await;
    let body = call("get_quote", json!({"symbol": "MSFT"}));

    // DNS rebinding: a Host the server does not serve (refused before
    // either path, by `http::host`).
    let mut foreign_host = headers("get_quote");
    foreign_host.push(("host", "attacker.example".into()));
    let (status, _, text) = send(&server.url, &body, &foreign_host).await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("forbidden_host"), "{text}");

    // SEP-2243: an Mcp-Name header that contradicts the body.
    let (status, _, text) = send(&server.url, &body, &headers("price_option_t")).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("does not match body value"), "{text}");

    // A header revision the body's _meta contradicts.
    let mut older = body.clone();
    older["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    let (status, _, text) = send(&server.url, &older, &headers("get_quote")).await;
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains("does not match request _meta protocolVersion"),
        "{text}"
    );

    // A 2026-07-28 request without the client capabilities in _meta.
    let mut bare_meta = body.clone();
    bare_meta["params"]["_meta"]
        .as_object_mut()
        .expect("meta")
        .remove("io.modelcontextprotocol/clientCapabilities");
    let (_, _, text) = send(&server.url, &bare_meta, &headers("get_quote")).await;
    assert!(text.contains("clientCapabilities"), "{text}");

    // An unknown tool stays a JSON-RPC error naming the tools.
    let unknown = call("no_such_guard", json!({}));
    let (_, _, text) = send(&server.url, &unknown, &headers("no_such_guard")).await;
    assert!(text.contains("-32602") && text.contains("unknown tool"), "{text}");

    // None of them ran the guard; a good call still does.
    let (status, _, text) = send(&server.url, &body, &headers("get_quote")).await;
    assert_eq!(status, 200, "{text}");
    let records = events_until(&server.artifacts.path().join("events.jsonl"), |r| {
        started(r, "get_quote") >= 1
    })
    .await;
    assert_eq!(started(&records, "get_quote"), 1, "{records:?}");
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_a_direct_call_and_its_end_is_recorded() {
    // The HTTP request is dropped while the guard runs: the call is
    // cancelled and still recorded, never left without an end.
    let server = HttpServer::start(TESTBED, &[]).await;
    let body = call("sleep_in_process", json!({"millis": 800}));
    let headers = headers("sleep_in_process");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let request = post(&server.url, &body, &headers).timeout(Duration::from_millis(200));
    assert!(request.send().await.is_err(), "the client gave up first");
    let records = events_until(&server.artifacts.path().join("events.jsonl"), |r| {
        r.iter()
            .any(|r| r["event"] == "request_finished" && r["tool"] == "sleep_in_process")
    })
    .await;
    let finished = records
        .iter()
        .find(|r| r["event"] == "request_finished" && r["tool"] == "sleep_in_process")
        .unwrap_or_else(|| panic!("no end recorded: {records:?}"));
    assert_eq!(finished["status"], "cancelled", "{finished}");
}

/// The JSON-RPC message of an answer, JSON or a one-event SSE stream.
fn message_of(kind: &str, text: &str) -> Value {
    let json = if kind.starts_with("text/event-stream") {
        text.lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .next_back()
            .unwrap_or_default()
    } else {
        text
    };
    serde_json::from_str(json).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[tokio::test]
async fn a_client_that_can_answer_is_asked_as_rmcps_service_asks_and_its_retry_completes() {
    // Most clients declare elicitation: their first call of a guard that
    // asks is answered by the direct path with the question, as rmcp's
    // service answers it (each requestState is sealed afresh), and the retry
    // with the answer opens the direct path's state.
    let server = HttpServer::start(TESTBED, &[]).await;
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "ask_name", "arguments": {"question": "What is your name?"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}}});
    let direct = send(&server.url, &body, &headers("ask_name")).await;
    let mut through_rmcp = headers("ask_name");
    through_rmcp.push(("accept", "application/json;q=1, text/event-stream;q=0.5".into()));
    let rmcp = send(&server.url, &body, &through_rmcp).await;
    assert_eq!(direct.0, 200, "{direct:?}");
    assert_eq!(rmcp.0, 200, "{rmcp:?}");
    let mut direct = message_of(&direct.1, &direct.2);
    let mut rmcp = message_of(&rmcp.1, &rmcp.2);
    let state = direct["result"]["requestState"].take();
    assert!(state.is_string(), "no requestState: {direct}");
    assert!(rmcp["result"]["requestState"].take().is_string(), "{rmcp}");
    assert_eq!(direct, rmcp);
    assert_eq!(direct["result"]["resultType"], "input_required", "{direct}");
    assert_eq!(
        direct["result"]["inputRequests"]["q1"]["params"]["message"], "What is your name?",
        "{direct}"
    );

    let mut retry = body.clone();
    retry["params"]["requestState"] = state;
    retry["params"]["inputResponses"] = json!({"q1": {"action": "accept", "content": {"name": "Ada"}}});
    let (status, kind, text) = send(&server.url, &retry, &headers("ask_name")).await;
    assert_eq!(status, 200, "{text}");
    let answer = message_of(&kind, &text);
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"action": "accept", "name": "Ada"}),
        "{answer}"
    );

    // A guard that does not ask answers such a client as before.
    let mut quote = call("get_quote", json!({"symbol": "MSFT"}));
    quote["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    let (status, kind, text) = send(&server.url, &quote, &headers("get_quote")).await;
    assert_eq!((status, kind.as_str()), (200, "application/json"), "{text}");
    assert_eq!(
        message_of(&kind, &text)["result"]["structuredContent"]["symbol"],
        "MSFT"
    );
}

#[tokio::test]
async fn a_stateless_request_gets_log_messages_only_when_its_meta_sets_a_level() {
    // SEP-2575: no notifications/message for a request that set no log level; with
    // `io.modelcontextprotocol/logLevel` the message comes before the answer (SSE).
    let server = HttpServer::start(TESTBED, &[]).await;
    let quiet = send(&server.url, &call("log_once", json!({})), &headers("log_once")).await;
    assert_eq!(
        (quiet.0, quiet.1.as_str()),
        (200, "application/json"),
        "{quiet:?}"
    );
    assert!(!quiet.2.contains("notifications/message"), "{quiet:?}");
    assert_eq!(
        message_of(&quiet.1, &quiet.2)["result"]["structuredContent"]["result"],
        "logged"
    );
    let mut body = call("log_once", json!({}));
    body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("info");
    let told = send(&server.url, &body, &headers("log_once")).await;
    assert!(told.1.starts_with("text/event-stream"), "{told:?}");
    assert!(
        told.2.contains("notifications/message") && told.2.contains("one info message"),
        "{told:?}"
    );
    // Above the message's level: nothing.
    body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("error");
    let above = send(&server.url, &body, &headers("log_once")).await;
    assert!(!above.2.contains("notifications/message"), "{above:?}");
}

#[tokio::test]
async fn a_call_that_needs_an_undeclared_capability_is_answered_32021_with_http_400() {
    // SEP-2575: ask_model samples; a request whose _meta declares no sampling gets
    // MissingRequiredClientCapabilityError naming it, with HTTP 400, on either path.
    let server = HttpServer::start(TESTBED, &[]).await;
    for capabilities in [json!({}), json!({"elicitation": {}})] {
        let mut body = call("ask_model", json!({"question": "Capital of France?"}));
        body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = capabilities.clone();
        let mut through_rmcp = headers("ask_model");
        through_rmcp.push(("accept", "application/json;q=1, text/event-stream;q=0.5".into()));
        for (path, headers) in [("direct", headers("ask_model")), ("rmcp", through_rmcp)] {
            let answer = send(&server.url, &body, &headers).await;
            assert_eq!(answer.0, 400, "{path} {capabilities}: {answer:?}");
            let message = message_of(&answer.1, &answer.2);
            assert_eq!(message["error"]["code"], -32021, "{path}: {message}");
            assert!(
                message["error"]["data"]["requiredCapabilities"]["sampling"].is_object(),
                "{path}: {message}"
            );
        }
    }
    // Declared: asked as usual (input_required), not refused.
    let mut body = call("ask_model", json!({"question": "Capital of France?"}));
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({"sampling": {}});
    let asked = send(&server.url, &body, &headers("ask_model")).await;
    assert_eq!(asked.0, 200, "{asked:?}");
    assert_eq!(
        message_of(&asked.1, &asked.2)["result"]["resultType"],
        "input_required"
    );
}

#[tokio::test]
async fn subscriptions_listen_is_acknowledged_with_its_subscription_id() {
    // 2026-07-28: the listen stream opens with an acknowledgement carrying the subscription
    // id (Warden's lists and resources never change, so nothing follows until it closes).
    let server = HttpServer::start(TESTBED, &[]).await;
    let body = json!({"jsonrpc": "2.0", "id": 41, "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": true},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "subscriptions/listen"),
    ];
    let mut answer = post(&server.url, &body, &headers).send().await.expect("answered");
    assert_eq!(answer.status().as_u16(), 200);
    let first = tokio::time::timeout(std::time::Duration::from_secs(5), answer.chunk())
        .await
        .expect("a first frame in time")
        .expect("readable")
        .expect("a frame");
    let text = String::from_utf8_lossy(&first).to_string();
    assert!(text.contains("subscriptionId"), "{text}");
}

#[tokio::test]
async fn a_prompt_that_asks_is_answered_input_required_and_its_retry_renders_it() {
    let server = HttpServer::start(TESTBED, &[]).await;
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    let headers = vec![
        ("mcp-protocol-version", "2026-07-28".to_string()),
        ("mcp-method", "prompts/get".to_string()),
        ("mcp-name", "ask_context".to_string()),
    ];
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "prompts/get",
                      "params": {"name": "ask_context", "_meta": meta}});
    let first = send(&server.url, &body, &headers).await;
    let first = message_of(&first.1, &first.2);
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let question = &first["result"]["inputRequests"]["user_context"];
    assert_eq!(question["method"], "elicitation/create", "{first}");
    let state = first["result"]["requestState"].as_str().expect("a requestState");
    let retry = json!({"jsonrpc": "2.0", "id": 4, "method": "prompts/get", "params": {
        "name": "ask_context", "_meta": meta, "requestState": state,
        "inputResponses": {"user_context": {"action": "accept", "content": {"context": "quarterly review"}}}}});
    let done = send(&server.url, &retry, &headers).await;
    let done = message_of(&done.1, &done.2);
    assert_eq!(
        done["result"]["messages"][0]["content"]["text"], "Context: quarterly review",
        "{done}"
    );
}

#[tokio::test]
async fn a_guard_sends_the_person_to_a_url_only_when_the_client_declared_url_elicitation() {
    // URL-mode elicitation: the question carries the URL, never a form; the retry's answer
    // says whether the person went. A client that declared only form elicitation gets -32021.
    let server = HttpServer::start(TESTBED, &[]).await;
    let mut body = call("broker_login", json!({}));
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {"url": {}}});
    let first = send(&server.url, &body, &headers("broker_login")).await;
    let first = message_of(&first.1, &first.2);
    let (key, question) = first["result"]["inputRequests"]
        .as_object()
        .and_then(|r| r.iter().next())
        .map(|(k, q)| (k.clone(), q.clone()))
        .expect("a question");
    assert_eq!(question["params"]["mode"], "url", "{first}");
    assert_eq!(
        question["params"]["url"], "https://broker.example/login",
        "{first}"
    );
    body["params"]["requestState"] = first["result"]["requestState"].clone();
    body["params"]["inputResponses"] = json!({key: {"action": "accept"}});
    let done = send(&server.url, &body, &headers("broker_login")).await;
    let done = message_of(&done.1, &done.2);
    assert_eq!(done["result"]["structuredContent"]["result"], "accept", "{done}");

    let mut forms_only = call("broker_login", json!({}));
    forms_only["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    let refused = send(&server.url, &forms_only, &headers("broker_login")).await;
    assert_eq!(refused.0, 400, "{refused:?}");
    assert_eq!(message_of(&refused.1, &refused.2)["error"]["code"], -32021);
}
