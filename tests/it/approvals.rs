//! Approvals a team can trust (issue 40): a detached `run_script` task that
//! reaches a destructive call waits `input_required` with the question in
//! `tasks/get`, survives SIGKILL and a restart of its server, is answered
//! through `tasks/update`, and resumes through its journal without running
//! its earlier calls again; the receipt holds the approval. A declined
//! question writes nothing; a loop of orders over a literal list is one
//! plan question; answers to questions nobody asked are refused.

use std::path::Path;
use std::time::Duration;

use rmcp::model::{TaskStatus, UpdateTaskParams};
use rmcp::service::{Peer, RoleClient};
use serde_json::{Value, json};

use crate::common::tasks::*;
use crate::common::*;

/// Prices (a quote), then places one order limited at that price.
const PRICE_THEN_ORDER: &str = r#"let q = get_quote(#{symbol: "AAPL"});
let placed = place_paper_order(#{symbol: "AAPL", side: "buy", quantity: 10, limit_price: q.price, client_order_id: "ord-1"});
final_answer(#{task_type: "analysis", summary: "ordered", metrics: #{price: q.price, duplicate: placed.duplicate}})"#;

/// Five orders over a literal list: one plan.
const FIVE_ORDERS: &str = r#"let n = 0;
for s in ["AAPL", "MSFT", "GOOGL", "AMZN", "NVDA"] {
    place_paper_order(#{symbol: s, side: "buy", quantity: 1, client_order_id: `plan-${s}`});
    n += 1;
}
final_answer(#{task_type: "analysis", summary: "placed", metrics: #{orders: n}})"#;

fn script(code: &str) -> Value {
    json!({"script": code, "timeout_seconds": 30})
}

/// The ledger's lines (none when the file is absent).
fn ledger(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .map(|text| {
            text.lines()
                .map(|l| serde_json::from_str(l).expect("JSON line"))
                .collect()
        })
        .unwrap_or_default()
}

/// Polls `tasks/get` until the task waits for input or ends; its wire form.
async fn until_waiting_or_ended(peer: &Peer<RoleClient>, id: &str) -> Value {
    let start = std::time::Instant::now();
    loop {
        let answer = get_task(peer, id).await.expect("tasks/get");
        let status = answer.task.status();
        if status == TaskStatus::InputRequired || status.is_terminal() {
            return wire(&answer);
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "still working: {}",
            wire(&answer)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `tasks/update` with `responses`.
async fn update(peer: &Peer<RoleClient>, id: &str, responses: Value) -> Result<(), rmcp::ServiceError> {
    let Value::Object(map) = responses else {
        panic!("object")
    };
    peer.update_task(UpdateTaskParams::new(id, map.into_iter().collect()))
        .await
}

fn accept() -> Value {
    json!({"action": "accept", "content": {"confirm": true}})
}

/// How many times the task's own event log says `guard` started.
fn starts_of(artifacts: &Path, id: &str, guard: &str) -> usize {
    let log = std::fs::read_to_string(artifacts.join(id).join("events.jsonl")).unwrap_or_default();
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "function_call_started" && e["function"] == guard)
        .count()
}

#[tokio::test]
async fn a_detached_order_waits_survives_a_restart_and_runs_once_when_approved() {
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().join("artifacts");
    let ledger_path = dir.path().join("ledger.jsonl");
    let env = [("WARDEN_FINANCE_LEDGER", ledger_path.to_str().unwrap())];
    let mut first = StdioServer::start(FINANCE, &artifacts, &env, true).await;
    let id = start_task(first.peer(), "run_script", script(PRICE_THEN_ORDER), None)
        .await
        .task
        .task_id;

    let waiting = until_waiting_or_ended(first.peer(), &id).await;
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    let question = &waiting["inputRequests"]["call-1"];
    assert_eq!(question["method"], "elicitation/create", "{waiting}");
    let message = question["params"]["message"].as_str().expect("message");
    assert!(message.contains("'place_paper_order'"), "{message}");
    assert!(message.contains("\"client_order_id\": \"ord-1\""), "{message}");
    assert!(message.contains("arguments_sha256: sha256:"), "{message}");
    assert!(
        ledger(&ledger_path).is_empty(),
        "nothing placed before the answer"
    );
    assert_eq!(starts_of(&artifacts, &id, "get_quote"), 1);
    // No worker holds the waiting task.
    assert!(eventually(Duration::from_secs(5), || children_of(first.pid).is_empty()).await);

    // SIGKILL and restart: the same question, still nothing placed.
    first.kill().await;
    let second = StdioServer::start(FINANCE, &artifacts, &env, true).await;
    let again = until_waiting_or_ended(second.peer(), &id).await;
    assert_eq!(again["status"], "input_required", "{again}");
    assert_eq!(again["inputRequests"], waiting["inputRequests"]);

    // An answer to a question nobody asked is refused, and changes nothing.
    let wrong = update(second.peer(), &id, json!({"call-9": accept()})).await;
    match wrong {
        Err(rmcp::ServiceError::McpError(error)) => {
            assert_eq!(error.code.0, -32602, "{error:?}");
            assert!(error.message.contains("call-1"), "{}", error.message);
        }
        other => panic!("expected -32602, got {other:?}"),
    }
    assert_eq!(
        until_waiting_or_ended(second.peer(), &id).await["status"],
        "input_required"
    );

    update(second.peer(), &id, json!({"call-1": accept()}))
        .await
        .expect("answered");
    let ended = poll_until_ended(second.peer(), &id, Duration::from_secs(30)).await;
    let done = wire(ended.last().expect("an answer"));
    assert_eq!(done["status"], "completed", "{done}");
    let result = &done["result"]["structuredContent"];
    assert_eq!(result["status"], "success", "{done}");
    let lines = ledger(&ledger_path);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["client_order_id"], "ord-1");
    // The quote came from the journal: it ran once, before the pause.
    assert_eq!(starts_of(&artifacts, &id, "get_quote"), 1);
    assert_eq!(starts_of(&artifacts, &id, "place_paper_order"), 1);

    // The receipt holds the approval, bound to the order's arguments.
    let saved: Value = serde_json::from_str(
        &std::fs::read_to_string(artifacts.join(&id).join("result.json")).expect("result.json"),
    )
    .expect("JSON");
    let approvals = &saved["receipt"]["approvals"];
    assert_eq!(approvals.as_array().map(Vec::len), Some(1), "{saved}");
    let approval = &approvals[0];
    assert_eq!(approval["key"], "call-1");
    assert_eq!(approval["guard"], "place_paper_order");
    assert_eq!(approval["approved"], true);
    assert_eq!(approval["principal"], "local");
    assert!(
        approval["script_sha256"]
            .as_str()
            .is_some_and(|s| s.starts_with("sha256:"))
    );
    assert!(approval["build"].as_str().is_some_and(|s| !s.is_empty()));
    let calls = std::fs::read_to_string(artifacts.join(&id).join("function_calls.json")).expect("calls");
    let calls: Value = serde_json::from_str(&calls).expect("JSON");
    let order = calls
        .as_array()
        .and_then(|c| c.iter().find(|c| c["function"] == "place_paper_order"))
        .cloned()
        .expect("the order's call record");
    assert_eq!(order["arguments_sha256"], approval["arguments_sha256"], "{calls}");
    assert_eq!(
        calls.as_array().map(Vec::len),
        Some(2),
        "the quote (journaled) and the order: {calls}"
    );
}

#[tokio::test]
async fn a_declined_order_ends_without_a_ledger_line() {
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().join("artifacts");
    let ledger_path = dir.path().join("ledger.jsonl");
    let env = [("WARDEN_FINANCE_LEDGER", ledger_path.to_str().unwrap())];
    let server = StdioServer::start(FINANCE, &artifacts, &env, true).await;
    let id = start_task(server.peer(), "run_script", script(PRICE_THEN_ORDER), None)
        .await
        .task
        .task_id;
    assert_eq!(
        until_waiting_or_ended(server.peer(), &id).await["status"],
        "input_required"
    );
    update(server.peer(), &id, json!({"call-1": {"action": "decline"}}))
        .await
        .expect("answered");
    let ended = poll_until_ended(server.peer(), &id, Duration::from_secs(30)).await;
    let done = wire(ended.last().expect("an answer"));
    assert_eq!(done["status"], "completed", "{done}");
    let result = &done["result"]["structuredContent"];
    assert_eq!(result["status"], "failed", "{done}");
    assert!(result.to_string().contains("did not approve"), "{result}");
    assert!(ledger(&ledger_path).is_empty());
    // A second answer to the same question: it no longer waits.
    let late = update(server.peer(), &id, json!({"call-1": accept()})).await;
    assert!(matches!(late, Err(rmcp::ServiceError::McpError(e)) if e.code.0 == -32602));
    assert!(ledger(&ledger_path).is_empty());
}

#[tokio::test]
async fn a_loop_of_five_orders_asks_once_and_places_five() {
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().join("artifacts");
    let ledger_path = dir.path().join("ledger.jsonl");
    let env = [("WARDEN_FINANCE_LEDGER", ledger_path.to_str().unwrap())];
    let server = StdioServer::start(FINANCE, &artifacts, &env, true).await;
    let id = start_task(server.peer(), "run_script", script(FIVE_ORDERS), None)
        .await
        .task
        .task_id;
    let waiting = until_waiting_or_ended(server.peer(), &id).await;
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    let requests = waiting["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.keys().collect::<Vec<_>>(), vec!["plan"], "{waiting}");
    let message = requests["plan"]["params"]["message"].as_str().expect("message");
    assert!(
        message.contains("'place_paper_order' at most 5 times"),
        "{message}"
    );
    assert!(message.contains("client_order_id"), "{message}");
    // The plan shows the script that computes the arguments, every line of it.
    assert!(
        message.contains("Here is the whole script, exactly as it will run:\n```\n")
            && message.contains(FIVE_ORDERS),
        "{message}"
    );
    update(server.peer(), &id, json!({"plan": accept()}))
        .await
        .expect("answered");
    let ended = poll_until_ended(server.peer(), &id, Duration::from_secs(30)).await;
    // Asked once: no second input_required on the way to the end.
    assert!(ended.iter().all(|a| a.task.status() != TaskStatus::InputRequired));
    let done = wire(ended.last().expect("an answer"));
    assert_eq!(
        done["result"]["structuredContent"]["metrics"]["orders"], 5,
        "{done}"
    );
    assert_eq!(ledger(&ledger_path).len(), 5);
}

#[tokio::test]
async fn a_plan_allows_its_count_and_refuses_one_more() {
    // The scan bounds the loop at 2; a call through a function pointer is a third: refused.
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().join("artifacts");
    let ledger_path = dir.path().join("ledger.jsonl");
    let env = [("WARDEN_FINANCE_LEDGER", ledger_path.to_str().unwrap())];
    let server = StdioServer::start(FINANCE, &artifacts, &env, true).await;
    let code = r#"for s in ["AAPL", "MSFT"] { place_paper_order(#{symbol: s, side: "buy", quantity: 1, client_order_id: `p-${s}`}); }
let f = Fn("place_paper_order");
let third = "placed";
try { f.call(#{symbol: "SAP", side: "buy", quantity: 1, client_order_id: "p-SAP"}); } catch (e) { third = e.message; }
final_answer(#{task_type: "analysis", summary: third, metrics: #{}})"#;
    let id = start_task(server.peer(), "run_script", script(code), None)
        .await
        .task
        .task_id;
    let waiting = until_waiting_or_ended(server.peer(), &id).await;
    assert!(waiting["inputRequests"]["plan"].is_object(), "{waiting}");
    update(server.peer(), &id, json!({"plan": accept()}))
        .await
        .expect("answered");
    let ended = poll_until_ended(server.peer(), &id, Duration::from_secs(30)).await;
    let done = wire(ended.last().expect("an answer"));
    let summary = done["result"]["structuredContent"]["summary"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(summary.contains("no more calls"), "{done}");
    assert_eq!(ledger(&ledger_path).len(), 2);
}

// ---- The same flows on a stateless (2026-07-28) request: multi-round-trip input ----

/// The finance server over HTTP with a ledger of its own: the directory
/// (kept while the test runs), the ledger's path and the server.
async fn finance_over_http() -> (
    tempfile::TempDir,
    std::path::PathBuf,
    crate::common::http::HttpServer,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger_path = dir.path().join("ledger.jsonl");
    let ledger = ledger_path.to_str().expect("a UTF-8 path").to_string();
    let server = crate::common::http::HttpServer::start(FINANCE, &[("WARDEN_FINANCE_LEDGER", &ledger)]).await;
    (dir, ledger_path, server)
}

/// A stateless client of `server` answering forms as `person`.
async fn stateless(
    server: &crate::common::http::HttpServer,
    person: crate::common::approver::Approver,
) -> rmcp::service::RunningService<RoleClient, crate::common::approver::Approver> {
    let lifecycle = rmcp::service::ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    server
        .client_with(person, None, lifecycle)
        .await
        .expect("discover over HTTP")
}

#[tokio::test]
async fn a_stateless_run_script_asks_with_input_required_and_the_retry_places_once() {
    let (_dir, ledger_path, server) = finance_over_http().await;
    let person = crate::common::approver::Approver::default();
    let client = stateless(&server, person.clone()).await;

    // One round by hand: the question, nothing placed.
    let first = client
        .call_tool_once(call_params("run_script", script(PRICE_THEN_ORDER), None))
        .await
        .expect("answered");
    let rmcp::model::CallToolResponse::InputRequired(asked) = first else {
        panic!("expected input_required, got {first:?}")
    };
    let wire = serde_json::to_value(&asked).expect("serializes");
    let message = wire["inputRequests"]["call-1"]["params"]["message"]
        .as_str()
        .expect("call-1");
    assert!(message.contains("\"client_order_id\": \"ord-1\""), "{message}");
    assert!(asked.request_state.is_some());
    assert!(ledger(&ledger_path).is_empty());

    // rmcp's client drives the rounds: the person approves, the retry resumes the script.
    let done = client
        .call_tool(call_params("run_script", script(PRICE_THEN_ORDER), None))
        .await
        .expect("answered");
    let result = structured(&done);
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(ledger(&ledger_path).len(), 1);
    assert_eq!(person.forms().len(), 1, "{:?}", person.forms());
    let approvals = &result["receipt"]["approvals"];
    assert_eq!(approvals[0]["guard"], "place_paper_order", "{result}");

    // A loop of five: one plan question, five orders (the id repeats nothing: new ids).
    let five = client
        .call_tool(call_params("run_script", script(FIVE_ORDERS), None))
        .await
        .expect("answered");
    assert_eq!(structured(&five)["metrics"]["orders"], 5, "{five:?}");
    assert_eq!(person.forms().len(), 2, "{:?}", person.forms());
    assert_eq!(ledger(&ledger_path).len(), 6);
}

#[tokio::test]
async fn a_stateless_decline_places_nothing() {
    let (_dir, ledger_path, server) = finance_over_http().await;
    let client = stateless(&server, crate::common::approver::Approver::declining()).await;
    let done = client
        .call_tool(call_params("run_script", script(PRICE_THEN_ORDER), None))
        .await
        .expect("answered");
    let result = structured(&done);
    assert_eq!(result["status"], "failed", "{result}");
    assert!(ledger(&ledger_path).is_empty());
}

// ---- On a 2025-11-25 session, asked live ----

/// The finance server over stdio with `person` as its client.
async fn live(
    person: crate::common::approver::Approver,
    ledger: &Path,
    artifacts: &Path,
) -> rmcp::service::RunningService<RoleClient, crate::common::approver::Approver> {
    use rmcp::ServiceExt;
    let mut command = tokio::process::Command::new(FINANCE);
    command
        .env("WARDEN_ARTIFACTS_DIR", artifacts)
        .env("WARDEN_FINANCE_LEDGER", ledger);
    let transport = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn")
        .0;
    person.serve(transport).await.expect("initialize")
}

#[tokio::test]
async fn on_a_session_a_loop_of_five_is_one_live_question_and_the_receipt_keeps_every_answer() {
    let dir = tempfile::tempdir().unwrap();
    let ledger_path = dir.path().join("ledger.jsonl");
    let person = crate::common::approver::Approver::default();
    let client = live(person.clone(), &ledger_path, &dir.path().join("artifacts")).await;
    let five = client
        .call_tool(call_params("run_script", script(FIVE_ORDERS), None))
        .await
        .expect("answered");
    let five = structured(&five);
    assert_eq!(five["metrics"]["orders"], 5, "{five}");
    assert_eq!(
        person.forms().len(),
        1,
        "one question for the plan: {:?}",
        person.forms()
    );
    assert!(person.forms()[0].contains("'place_paper_order' at most 5 times"));
    assert_eq!(ledger(&ledger_path).len(), 5);
    let approvals = &five["receipt"]["approvals"];
    assert_eq!(approvals[0]["key"], "plan", "{five}");
    assert_eq!(approvals[0]["plan"][0]["max_calls"], 5, "{five}");

    let one = client
        .call_tool(call_params("run_script", script(PRICE_THEN_ORDER), None))
        .await
        .expect("answered");
    let one = structured(&one);
    assert_eq!(one["status"], "success", "{one}");
    assert_eq!(person.forms().len(), 2);
    let approval = &one["receipt"]["approvals"][0];
    assert_eq!(
        (approval["key"].as_str(), approval["guard"].as_str()),
        (Some("call-1"), Some("place_paper_order"))
    );
    assert_eq!(approval["approved"], true);
}

// ---- Batches: their destructive calls are known before anything runs: one plan question ----

/// A batch that quotes, then places two orders.
fn batch_of_orders(prefix: &str) -> Value {
    json!({"calls": [
        {"name": "get_quote", "arguments": {"symbol": "AAPL"}},
        {"name": "place_paper_order", "arguments": {"symbol": "AAPL", "side": "buy", "quantity": 1,
            "limit_price": {"$result": 0, "path": "price"}, "client_order_id": format!("{prefix}-1")}},
        {"name": "place_paper_order", "arguments": {"symbol": "MSFT", "side": "buy", "quantity": 2,
            "client_order_id": format!("{prefix}-2")}}
    ]})
}

#[tokio::test]
async fn a_detached_batch_asks_its_plan_before_anything_runs_and_runs_when_approved() {
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().join("artifacts");
    let ledger_path = dir.path().join("ledger.jsonl");
    let env = [("WARDEN_FINANCE_LEDGER", ledger_path.to_str().unwrap())];
    let server = StdioServer::start(FINANCE, &artifacts, &env, true).await;
    let id = start_task(server.peer(), "run_batch", batch_of_orders("b"), None)
        .await
        .task
        .task_id;
    let waiting = until_waiting_or_ended(server.peer(), &id).await;
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    let message = waiting["inputRequests"]["plan"]["params"]["message"]
        .as_str()
        .expect("plan");
    assert!(
        message.contains("A batch wants") && message.contains("'place_paper_order' at most 2 times"),
        "{message}"
    );
    assert_eq!(
        starts_of(&artifacts, &id, "get_quote"),
        0,
        "nothing ran before the question"
    );
    update(server.peer(), &id, json!({"plan": accept()}))
        .await
        .expect("answered");
    let ended = poll_until_ended(server.peer(), &id, Duration::from_secs(30)).await;
    let done = wire(ended.last().expect("an answer"));
    assert_eq!(done["result"]["structuredContent"]["succeeded"], 3, "{done}");
    assert_eq!(ledger(&ledger_path).len(), 2);
    // The batch's calls are in its task's own log (where a side effect is written through
    // before it runs, so a crash cannot hide it).
    assert_eq!(starts_of(&artifacts, &id, "get_quote"), 1);
    assert_eq!(starts_of(&artifacts, &id, "place_paper_order"), 2);
}

#[tokio::test]
async fn a_stateless_batch_asks_its_plan_once_and_a_decline_runs_no_order() {
    let (_dir, ledger_path, server) = finance_over_http().await;
    let person = crate::common::approver::Approver::default();
    let client = stateless(&server, person.clone()).await;
    let done = client
        .call_tool(call_params("run_batch", batch_of_orders("s"), None))
        .await
        .expect("answered");
    let result = structured(&done);
    assert_eq!(result["succeeded"], 3, "{result}");
    assert_eq!(person.forms().len(), 1, "{:?}", person.forms());
    assert_eq!(ledger(&ledger_path).len(), 2);

    let declines = stateless(&server, crate::common::approver::Approver::declining()).await;
    let declined = declines
        .call_tool(call_params("run_batch", batch_of_orders("d"), None))
        .await
        .expect("answered");
    let result = structured(&declined);
    assert_eq!(result["failed"], 2, "{result}");
    assert_eq!(ledger(&ledger_path).len(), 2, "no new order");
}

// ---- A coding task's needs_input question on a stateless request ----

/// A person who fills a needs_input form with `values` and keeps each form's message.
#[derive(Clone)]
struct Fills(Value, std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl rmcp::ClientHandler for Fills {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let capabilities = serde_json::from_value(json!({"elicitation": {}})).expect("capabilities");
        rmcp::model::ClientConfig::new(capabilities, rmcp::model::Implementation::new("fills", "1.0"))
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::model::ErrorData> {
        if let rmcp::model::ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.1.lock().expect("forms").push(message);
        }
        Ok(
            rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept)
                .with_content(self.0.clone()),
        )
    }
}

#[tokio::test]
async fn a_stateless_coding_task_shows_its_question_and_the_retry_runs_with_the_answer() {
    use crate::fake_model::{FakeModel, GREEKS_ANSWER, Reply};
    let asks = "```rhai\nfinal_answer(#{task_type: \"needs_input\", summary: \"which strike?\", missing: #{strike: #{type: \"number\", description: \"strike price\"}}})\n```";
    let model = FakeModel::start(vec![
        Reply::Content(asks.into()),
        Reply::Content(GREEKS_ANSWER.into()),
    ])
    .await;
    let env: Vec<(&str, String)> = model.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = crate::common::http::HttpServer::start(FINANCE, &env).await;
    let forms = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let lifecycle = rmcp::service::ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    let client = server
        .client_with(Fills(json!({"strike": 105}), forms.clone()), None, lifecycle)
        .await
        .expect("discover");
    let done = client
        .call_tool(call_params(
            "run_coding_task",
            json!({"prompt": "delta", "timeout_seconds": 60}),
            None,
        ))
        .await
        .expect("answered");
    let result = structured(&done);
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["summary"], "delta", "{result}");
    let shown = forms.lock().expect("forms").clone();
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].contains("which strike?"), "{shown:?}");
    // The retry's model run was told the answer.
    let told = model.requests()[1]["messages"].to_string();
    assert!(
        told.contains("105") && told.contains("already answered"),
        "{told}"
    );
}

#[tokio::test]
async fn an_isolated_call_before_the_question_is_answered_from_the_journal_and_a_map_needs_a_plan() {
    // price_option_t runs in an isolated worker: journaled like an in-process call. A map_call of
    // the destructive guard over a computed list cannot pause between items: refused, catchable.
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().join("artifacts");
    let ledger_path = dir.path().join("ledger.jsonl");
    let env = [("WARDEN_FINANCE_LEDGER", ledger_path.to_str().unwrap())];
    let server = StdioServer::start(FINANCE, &artifacts, &env, true).await;
    let code = r#"let p = price_option_t(#{option_type: "call", spot: 100.0, strike: 100.0, time_to_expiry: 0.5, volatility: 0.2, rate: 0.03}).result;
let items = [];
for s in ["AAPL", "MSFT"] { items.push(#{symbol: s, side: "buy", quantity: 1, client_order_id: `m-${s}`}); }
let mapped = "ran";
try { map_call("place_paper_order", items); } catch (e) { mapped = e.code; }
place_paper_order(#{symbol: "AAPL", side: "buy", quantity: 1, limit_price: p, client_order_id: "iso-1"});
final_answer(#{task_type: "analysis", summary: mapped, metrics: #{price: p}})"#;
    let id = start_task(server.peer(), "run_script", script(code), None)
        .await
        .task
        .task_id;
    let waiting = until_waiting_or_ended(server.peer(), &id).await;
    assert!(waiting["inputRequests"]["call-1"].is_object(), "{waiting}");
    update(server.peer(), &id, json!({"call-1": accept()}))
        .await
        .expect("answered");
    let ended = poll_until_ended(server.peer(), &id, Duration::from_secs(30)).await;
    let done = wire(ended.last().expect("an answer"));
    let result = &done["result"]["structuredContent"];
    assert_eq!(result["status"], "success", "{done}");
    assert_eq!(
        result["summary"], "forbidden",
        "the unplanned map_call was refused: {done}"
    );
    assert_eq!(
        starts_of(&artifacts, &id, "price_option_t"),
        1,
        "the isolated call ran once"
    );
    let lines = ledger(&ledger_path);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["client_order_id"], "iso-1");
}

// ---- A replay repeats no side effect the person did not see happen ----

/// Two orders whose client order ids come from a timing loop: other ids on every run.
const TIMED_ORDERS: &str = r#"let t = timestamp(); let n = 0; while t.elapsed < 0.02 { n += 1; }
for i in 0..2 { place_paper_order(#{symbol: "AAPL", side: "buy", quantity: 100, client_order_id: `t-${n}-${i}`}); }
final_answer(#{task_type: "analysis", summary: "placed", metrics: #{n: n}})"#;

#[tokio::test]
async fn a_replay_repeats_only_calls_of_idempotent_guards_that_ran_with_the_same_arguments() {
    // The recorded approval admits the same order again (a duplicate: no new ledger line); a plan's
    // count does not admit orders with other ids; a guard that is not idempotent never runs again.
    let (_dir, ledger_path, server) = finance_over_http().await;
    let person = crate::common::approver::Approver::default();
    let client = stateless(&server, person.clone()).await;
    let replay_of = |result: &Value| {
        let id = result["task_id"].as_str().expect("a task id").to_string();
        let client = &client;
        async move {
            let replayed = client
                .call_tool(call_params("replay_task", json!({"task_id": id}), None))
                .await
                .expect("answered");
            structured(&replayed)
        }
    };

    let same = structured(
        &client
            .call_tool(call_params("run_script", script(PRICE_THEN_ORDER), None))
            .await
            .expect("answered"),
    );
    assert_eq!(same["status"], "success", "{same}");
    let replayed = replay_of(&same).await;
    assert_eq!(replayed["replay_status"], "success", "{replayed}");
    assert_eq!(
        ledger(&ledger_path).len(),
        1,
        "the same order again is a duplicate"
    );

    let timed = structured(
        &client
            .call_tool(call_params("run_script", script(TIMED_ORDERS), None))
            .await
            .expect("answered"),
    );
    assert_eq!(timed["status"], "success", "{timed}");
    assert_eq!(ledger(&ledger_path).len(), 3);
    let replayed = replay_of(&timed).await;
    assert_eq!(replayed["replay_status"], "failed", "{replayed}");
    assert_eq!(
        ledger(&ledger_path).len(),
        3,
        "no order the person never saw placed"
    );
    assert_eq!(
        person.forms().len(),
        2,
        "a replay asks nobody: {:?}",
        person.forms()
    );

    // A guard that is not idempotent (the testbed's wipe_scratch): refused in the replay.
    let testbed = crate::common::http::HttpServer::start(TESTBED, &[]).await;
    let client = stateless(&testbed, person.clone()).await;
    let wiped = structured(
        &client
            .call_tool(call_params(
                "run_script",
                script(r#"wipe_scratch(#{record: "ledger"}).result"#),
                None,
            ))
            .await
            .expect("answered"),
    );
    assert_eq!(wiped["status"], "success", "{wiped}");
    let id = wiped["task_id"].as_str().expect("a task id");
    let replayed = structured(
        &client
            .call_tool(call_params("replay_task", json!({"task_id": id}), None))
            .await
            .expect("answered"),
    );
    assert_eq!(replayed["replay_status"], "failed", "{replayed}");
    let replay_id = replayed["replay_task_id"].as_str().expect("a replay task");
    let events = events_until(&testbed.artifacts.path().join("events.jsonl"), |r| {
        r.iter()
            .any(|e| e["event"] == "destructive_call_confirmed" && e["task_id"] == replay_id)
    })
    .await;
    let refusal = events
        .iter()
        .find(|e| e["event"] == "destructive_call_confirmed" && e["task_id"] == replay_id)
        .expect("recorded");
    assert_eq!(refusal["approved"], false, "{refusal}");
    assert!(
        refusal["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("not idempotent"),
        "{refusal}"
    );
    assert!(
        !events.iter().any(|e| e["event"] == "function_call_started"
            && e["function"] == "wipe_scratch"
            && e["task_id"] == replay_id),
        "wipe_scratch ran again"
    );
}

#[tokio::test]
async fn a_stateless_batch_approval_is_used_once() {
    // The retry that carries the plan's answer runs the batch; the same state and answer sent
    // again are refused (the batch's task no longer waits), and no second order is placed.
    let (_dir, ledger_path, server) = finance_over_http().await;
    let client = stateless(&server, crate::common::approver::Approver::default()).await;
    let batch = batch_of_orders("once");
    let first = client
        .call_tool_once(call_params("run_batch", batch.clone(), None))
        .await
        .expect("answered");
    let rmcp::model::CallToolResponse::InputRequired(asked) = first else {
        panic!("expected input_required, got {first:?}")
    };
    let state = asked.request_state.clone().expect("a requestState");
    // The plan's form shows each destructive call with its arguments, not only a count.
    let wire = serde_json::to_value(&asked).expect("serializes");
    let message = wire["inputRequests"]["plan"]["params"]["message"]
        .as_str()
        .expect("the plan's form");
    assert!(
        message.contains(r#"calls[1] 'place_paper_order' (destructive) with {"client_order_id":"once-1""#),
        "{message}"
    );
    // The call whose output feeds its limit price is shown too.
    assert!(
        message.contains(r#"calls[0] 'get_quote' with {"symbol":"AAPL"}"#),
        "{message}"
    );
    let retry = || {
        let mut params = call_params("run_batch", batch.clone(), None);
        params.request_state = Some(state.clone());
        params.input_responses = Some(
            std::iter::once((
                "plan".to_string(),
                json!({"action": "accept", "content": {"confirm": true}}),
            ))
            .collect(),
        );
        client.call_tool_once(params)
    };
    let done = retry().await.expect("answered");
    let rmcp::model::CallToolResponse::Complete(done) = done else {
        panic!("expected the batch's result, got {done:?}")
    };
    assert_eq!(structured(&done)["succeeded"], 3, "{done:?}");
    assert_eq!(ledger(&ledger_path).len(), 2);
    let again = retry().await;
    let Err(rmcp::ServiceError::McpError(refused)) = again else {
        panic!("expected a refusal, got {again:?}")
    };
    assert!(
        refused.message.contains("not waiting for input"),
        "{}",
        refused.message
    );
    assert_eq!(ledger(&ledger_path).len(), 2, "no order placed twice");
}

#[tokio::test]
async fn a_batch_too_large_to_show_in_its_plan_form_is_refused_before_anything_runs() {
    // The person must see every call a plan approves: past MAX_PLAN_SOURCE_BYTES nothing is asked.
    let testbed = crate::common::http::HttpServer::start(TESTBED, &[]).await;
    let client = stateless(&testbed, crate::common::approver::Approver::default()).await;
    let note = "n".repeat(warden::limits::MAX_PLAN_SOURCE_BYTES);
    let batch = json!({"calls": [{"name": "wipe_scratch", "arguments": {"record": "ledger", "note": note}}]});
    let answered = client
        .call_tool(call_params("run_batch", batch, None))
        .await
        .expect("answered");
    let result = structured(&answered);
    let error = &result["error"];
    assert_eq!(error["code"], "forbidden", "{result}");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("MAX_PLAN_SOURCE_BYTES"),
        "{result}"
    );
    let events = std::fs::read_to_string(testbed.artifacts.path().join("events.jsonl")).unwrap_or_default();
    assert!(!events.contains("\"function_call_started\""), "a call ran");
}

#[tokio::test]
async fn a_stateless_state_answers_only_the_question_it_was_issued_for() {
    // A while loop's orders are asked one by one: the state of call-1 kept and sent with an
    // answer to call-2 is refused; the state issued with call-2 answers it.
    let (_dir, ledger_path, server) = finance_over_http().await;
    let client = stateless(&server, crate::common::approver::Approver::default()).await;
    let code = r#"let i = 0;
while i < 2 { place_paper_order(#{symbol: "AAPL", side: "buy", quantity: 1, client_order_id: `w-${i}`}); i += 1; }
i"#;
    let round = |state: Option<String>, key: Option<&str>| {
        let mut params = call_params("run_script", script(code), None);
        params.request_state = state;
        params.input_responses = key.map(|key| {
            std::iter::once((
                key.to_string(),
                json!({"action": "accept", "content": {"confirm": true}}),
            ))
            .collect()
        });
        client.call_tool_once(params)
    };
    let asked = |answer: Result<rmcp::model::CallToolResponse, rmcp::ServiceError>| match answer {
        Ok(rmcp::model::CallToolResponse::InputRequired(asked)) => {
            let wire = serde_json::to_value(&asked).expect("serializes");
            let key = wire["inputRequests"]
                .as_object()
                .and_then(|r| r.keys().next().cloned())
                .expect("a question");
            (key, asked.request_state.expect("a requestState"))
        }
        other => panic!("expected input_required, got {other:?}"),
    };
    let (first, first_state) = asked(round(None, None).await);
    assert_eq!(first, "call-1");
    let (second, second_state) = asked(round(Some(first_state.clone()), Some("call-1")).await);
    assert_eq!(second, "call-2");
    let stale = round(Some(first_state), Some("call-2")).await;
    let Err(rmcp::ServiceError::McpError(refused)) = stale else {
        panic!("expected a refusal, got {stale:?}")
    };
    assert!(
        refused.message.contains("issued for question 'call-1'"),
        "{}",
        refused.message
    );
    assert_eq!(ledger(&ledger_path).len(), 1, "only the first order so far");
    let done = round(Some(second_state), Some("call-2")).await;
    let Ok(rmcp::model::CallToolResponse::Complete(done)) = done else {
        panic!("expected the result, got {done:?}")
    };
    assert_eq!(structured(&done)["status"], "success", "{done:?}");
    assert_eq!(ledger(&ledger_path).len(), 2);
}

/// Whether task `id`'s own log gets an `event` record of `function`
/// within 20 s.
async fn written_through(artifacts: &Path, id: &str, event: &str, function: &str) -> bool {
    let log = artifacts.join(id).join("events.jsonl");
    let event = format!(r#""event":"{event}""#);
    let found = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains(&event) && l.contains(function))
    };
    eventually(Duration::from_secs(20), found).await
}

/// Task `id`, whose server was killed, as a second `binary` on
/// `artifacts` ends it: its `tasks/get` answer (failed) and its
/// `result.json` (interrupted).
async fn interrupted_after_restart(
    binary: &str,
    artifacts: &Path,
    env: &[(&str, &str)],
    id: &str,
) -> (Value, Value) {
    let second = StdioServer::start(binary, artifacts, env, true).await;
    let ended = poll_until_ended(second.peer(), id, Duration::from_secs(30)).await;
    let done = wire(ended.last().expect("an answer"));
    assert_eq!(done["status"], "failed", "{done}");
    let saved: Value = serde_json::from_str(
        &std::fs::read_to_string(artifacts.join(id).join("result.json")).expect("result.json"),
    )
    .expect("JSON");
    assert_eq!(saved["error"]["kind"], "interrupted", "{saved}");
    (done, saved)
}

#[tokio::test]
async fn an_order_placed_before_the_server_was_killed_is_in_the_interrupted_tasks_records() {
    // The person approves an order; the script runs on; the server is SIGKILLed. The task's
    // files were to be written as it ended, so without the order's records written through
    // they said only that it had asked (function_calls.json from the pause: input_required).
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().join("artifacts");
    let ledger_path = dir.path().join("ledger.jsonl");
    let env = [("WARDEN_FINANCE_LEDGER", ledger_path.to_str().unwrap())];
    let mut first = StdioServer::start(FINANCE, &artifacts, &env, true).await;
    let code = r#"place_paper_order(#{symbol: "NVDA", side: "buy", quantity: 10, client_order_id: "kill-1"});
let t = timestamp(); while t.elapsed < 25.0 {} 1"#;
    let id = start_task(first.peer(), "run_script", script(code), None)
        .await
        .task
        .task_id;
    let waiting = until_waiting_or_ended(first.peer(), &id).await;
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    update(first.peer(), &id, json!({"call-1": accept()}))
        .await
        .expect("answered");
    // The order's end is on disk as soon as it settles (written through, not at the task's end).
    assert!(
        written_through(&artifacts, &id, "function_call_finished", "place_paper_order").await,
        "the order's end was not written through"
    );
    assert_eq!(ledger(&ledger_path).len(), 1);
    first.kill().await;

    let (done, saved) = interrupted_after_restart(FINANCE, &artifacts, &env, &id).await;
    // tasks/get names the side effect beside the error.
    let shown = &done["error"]["data"]["side_effects"];
    assert_eq!(shown[0]["function"], "place_paper_order", "{done}");
    assert_eq!(shown[0]["status"], "success", "{done}");
    let effects = saved["side_effects"].as_array().cloned().unwrap_or_default();
    assert_eq!(effects.len(), 1, "{saved}");
    assert_eq!(effects[0]["function"], "place_paper_order");
    assert_eq!(effects[0]["status"], "success");
    let approved = waiting["inputRequests"]["call-1"]["params"]["message"]
        .as_str()
        .and_then(|m| m.split("arguments_sha256: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .map(|sha| {
            sha.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != ':')
                .to_string()
        })
        .expect("the form names the arguments' SHA-256");
    assert_eq!(
        effects[0]["arguments_sha256"],
        approved.as_str(),
        "the call run is the call approved"
    );
    // And who approved it, and when.
    assert_eq!(effects[0]["approval"]["key"], "call-1", "{saved}");
    assert_eq!(effects[0]["approval"]["principal"], "local", "{saved}");
    assert_eq!(effects[0]["approval"]["action"], "accept", "{saved}");
    assert!(
        saved["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("place_paper_order (success)"),
        "{saved}"
    );
    // function_calls.json keeps what the pause wrote and adds the order, then says what it lacks.
    let calls: Value = serde_json::from_str(
        &std::fs::read_to_string(artifacts.join(&id).join("function_calls.json")).expect("calls"),
    )
    .expect("function_calls.json is JSON");
    let calls = calls.as_array().cloned().unwrap_or_default();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(calls[0]["error_type"], "input_required", "{calls:?}");
    assert_eq!(calls[1]["function"], "place_paper_order");
    assert_eq!(calls[1]["status"], "success");
    assert_eq!(calls[1]["arguments_sha256"], approved.as_str());
    assert_eq!(calls[2]["interrupted"], true, "{calls:?}");
}

#[tokio::test]
async fn a_destructive_guard_run_as_an_mcp_task_leaves_its_side_effect_on_record_when_the_server_dies() {
    // The client's own call of a destructive guard, run as an MCP task: its start is written
    // through to the task's own log before the function runs (it kept no log before, so the
    // interrupted task said nothing of the deletion it had started).
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().join("artifacts");
    let mut first = StdioServer::start(TESTBED, &artifacts, &[], true).await;
    let arguments = json!({"record": "ledger-7"});
    let id = start_task(first.peer(), "wipe_scratch_slowly", arguments.clone(), None)
        .await
        .task
        .task_id;
    assert!(
        written_through(&artifacts, &id, "function_call_started", "wipe_scratch_slowly").await,
        "the call's start was not written through"
    );
    first.kill().await;

    let (done, saved) = interrupted_after_restart(TESTBED, &artifacts, &[], &id).await;
    let shown = &done["error"]["data"]["side_effects"];
    assert_eq!(shown[0]["function"], "wipe_scratch_slowly", "{done}");
    assert_eq!(shown[0]["status"], "unknown", "{done}");
    let effects = saved["side_effects"].as_array().cloned().unwrap_or_default();
    assert_eq!(effects.len(), 1, "{saved}");
    // The arguments' canonical JSON is their compact form here (one member).
    let sha = {
        use sha2::Digest;
        format!(
            "sha256:{:x}",
            sha2::Sha256::digest(arguments.to_string().as_bytes())
        )
    };
    assert_eq!(
        effects[0]["arguments_sha256"],
        sha.as_str(),
        "the call recorded is the call made"
    );
    assert!(
        saved["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("wipe_scratch_slowly (unknown)"),
        "{saved}"
    );
}

#[tokio::test]
async fn a_dead_tasks_side_effects_in_tasks_get_stay_within_the_answer_bound() {
    // A plan let a task place 100 orders before its server died: tasks/get names the last ones
    // that fit the smallest answer bound, and how many there were; the result keeps them all.
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().join("artifacts");
    let id = format!("task_{}", "ab".repeat(16));
    let task = artifacts.join(&id);
    std::fs::create_dir_all(task.join("outputs")).unwrap();
    // Its server is gone: a pid no process has.
    std::fs::write(
        task.join("owner.json"),
        r#"{"pid": 4194303, "principal": "local"}"#,
    )
    .unwrap();
    let mut log = String::new();
    for n in 0..100 {
        for (event, extra) in [
            (
                "function_call_started",
                json!({"arguments_sha256": format!("sha256:{:064x}", n)}),
            ),
            (
                "function_call_finished",
                json!({"status": "success", "output_sha256": format!("sha256:{:064x}", n + 1000)}),
            ),
        ] {
            let mut record = json!({"event": event, "function": "place_paper_order", "call_id": format!("c{n}"),
                                    "destructive": true});
            for (key, value) in extra.as_object().unwrap() {
                record[key] = value.clone();
            }
            log += &format!("{record}\n");
        }
    }
    std::fs::write(task.join("events.jsonl"), log).unwrap();
    let server = StdioServer::start(FINANCE, &artifacts, &[("WARDEN_MAX_ANSWER_BYTES", "8192")], true).await;
    let answer = wire(&get_task(server.peer(), &id).await.expect("tasks/get"));
    assert_eq!(answer["status"], "failed", "{answer}");
    let data = &answer["error"]["data"];
    let shown = data["side_effects"].as_array().cloned().unwrap_or_default();
    assert!(!shown.is_empty() && shown.len() < 100, "{} shown", shown.len());
    assert_eq!(data["side_effects_total"], 100, "{data}");
    assert_eq!(
        shown.last().map(|s| s["arguments_sha256"].clone()),
        Some(json!(format!("sha256:{:064x}", 99))),
        "the last ones are shown"
    );
    assert!(
        answer.to_string().len() <= 8192,
        "{} bytes",
        answer.to_string().len()
    );
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(task.join("result.json")).expect("result.json"))
            .unwrap();
    assert_eq!(saved["side_effects"].as_array().map(Vec::len), Some(100));
}
