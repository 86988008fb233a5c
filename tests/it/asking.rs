//! Guards that ask (issue 29, part 2): an in-process guard's elicitation
//! answered, declined and unanswered, and its sampling answered, over real
//! stdio and an HTTP session; where nobody can answer — a client without
//! the capability, a batch, a script, an isolated worker — asking is a
//! clear `cannot_ask` at once, never a hang.

// Sampling's types are deprecated by SEP-2577 for later protocols; the
// sessions tested here (2025-11-25) still have it.
#![allow(deprecated)]

use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};

use crate::common::http::HttpServer;
use crate::common::*;

/// A person behind the client: answers forms one way, and the model says
/// a fixed text.
#[derive(Clone)]
enum Person {
    Accepts(Value),
    Declines,
    /// Never answers (the guard's deadline ends the call).
    Away,
}

impl ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        let capabilities =
            serde_json::from_value(json!({"elicitation": {}, "sampling": {}})).expect("capabilities");
        ClientConfig::new(capabilities, rmcp::model::Implementation::new("person", "1.0"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams { message, .. } = request else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        assert!(
            message == "What is your name?"
                || message.contains("'wipe_scratch', which is annotated destructive")
                || message.starts_with("The coding task needs more input"),
            "{message}"
        );
        match self {
            Person::Accepts(content) => {
                Ok(ElicitResult::new(ElicitationAction::Accept).with_content(content.clone()))
            }
            Person::Declines => Ok(ElicitResult::new(ElicitationAction::Decline)),
            Person::Away => std::future::pending().await,
        }
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let asked = serde_json::to_value(&params.messages)
            .expect("messages")
            .to_string();
        let text = format!(
            "the model read: {}",
            if asked.contains("capital of France") {
                "Paris?"
            } else {
                "?"
            }
        );
        serde_json::from_value(
            json!({"role": "assistant", "content": {"type": "text", "text": text},
                                      "model": "test-model", "stopReason": "endTurn"}),
        )
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }
}

/// The testbed over stdio with `person` as its client.
async fn stdio(person: Person) -> (RunningService<RoleClient, Person>, tempfile::TempDir) {
    stdio_with(person, &[]).await
}

async fn stdio_with(
    person: Person,
    env: &[(&str, String)],
) -> (RunningService<RoleClient, Person>, tempfile::TempDir) {
    let artifacts = tempfile::tempdir().expect("temp dir");
    let mut command = tokio::process::Command::new(TESTBED);
    command.env("WARDEN_ARTIFACTS_DIR", artifacts.path());
    for (key, value) in env {
        command.env(key, value);
    }
    let transport = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn")
        .0;
    let client = person.serve(transport).await.expect("initialize");
    (client, artifacts)
}

async fn call<H: ClientHandler>(
    client: &RunningService<RoleClient, H>,
    tool: &str,
    arguments: Value,
) -> Value {
    let Value::Object(arguments) = arguments else {
        panic!("object arguments")
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments))
        .await
        .expect("answered");
    structured(&result)
}

fn question() -> Value {
    json!({"question": "What is your name?"})
}

#[tokio::test]
async fn a_guard_asks_over_stdio_and_gets_the_answer_the_refusal_or_its_deadline() {
    let (client, _dir) = stdio(Person::Accepts(json!({"name": "Grace"}))).await;
    let answered = call(&client, "ask_name", question()).await;
    assert_eq!(answered, json!({"action": "accept", "name": "Grace"}));
    let sampled = call(
        &client,
        "ask_model",
        json!({"question": "What is the capital of France?"}),
    )
    .await;
    assert_eq!(sampled["result"], "the model read: Paris?", "{sampled}");

    let (client, _dir) = stdio(Person::Declines).await;
    let declined = call(&client, "ask_name", question()).await;
    assert_eq!(declined, json!({"action": "decline", "name": null}));

    // Unanswered: the call ends at the guard's 2 s deadline and the server serves on.
    let (client, _dir) = stdio(Person::Away).await;
    let started = Instant::now();
    let away = call(&client, "ask_name", question()).await;
    assert_eq!(away["error"]["code"], "timed_out", "{away}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let after = call(&client, "add_pure", json!({"a": 1, "b": 2})).await;
    assert_eq!(after["result"], 3.0, "the server still serves: {after}");
}

#[tokio::test]
async fn where_nobody_can_answer_asking_fails_at_once_saying_why() {
    // A client that declares neither capability.
    let server = Server::start(TESTBED).await;
    let plain = structured(&server.call("ask_name", question()).await);
    assert_eq!(plain["error"]["code"], "cannot_ask", "{plain}");
    assert!(
        plain["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("elicitation capability"),
        "{plain}"
    );
    // A client that could answer, but the guard runs where it cannot ask.
    let (client, _dir) = stdio(Person::Accepts(json!({"name": "Grace"}))).await;
    let started = Instant::now();
    let isolated = call(&client, "ask_name_isolated", question()).await;
    assert_eq!(isolated["error"]["code"], "cannot_ask", "{isolated}");
    let batch = call(
        &client,
        "run_batch",
        json!({"calls": [{"name": "ask_name", "arguments": question()}]}),
    )
    .await;
    assert_eq!(batch["calls"][0]["error"]["code"], "cannot_ask", "{batch}");
    let script = r#"let code = ""; try { ask_name(#{question: "What is your name?"}); } catch (e) { code = e.code; } code"#;
    let script = call(
        &client,
        "run_script",
        json!({"script": script, "timeout_seconds": 20}),
    )
    .await;
    assert_eq!(script["value"], "cannot_ask", "{script}");
    assert!(started.elapsed() < Duration::from_secs(10), "never a hang");
}

#[tokio::test]
async fn a_guard_asks_over_an_http_session() {
    let server = HttpServer::start(TESTBED, &[]).await;
    let client = server
        .client_with(
            Person::Accepts(json!({"name": "Ada"})),
            None,
            rmcp::service::ClientLifecycleMode::Initialize,
        )
        .await
        .expect("session");
    let answered = call(&client, "ask_name", question()).await;
    assert_eq!(answered, json!({"action": "accept", "name": "Ada"}));
}

const WIPE: &str = r#"let out = ""; try { out = wipe_scratch(#{record: "ledger"}).result; } catch (e) { out = e.code + ": " + e.message; } out"#;

#[tokio::test]
async fn a_destructive_guard_in_a_script_runs_only_once_the_person_confirms_it() {
    let (client, dir) = stdio(Person::Accepts(json!({"confirm": true}))).await;
    let ran = call(
        &client,
        "run_script",
        json!({"script": WIPE, "timeout_seconds": 20}),
    )
    .await;
    assert_eq!(ran["value"], "wiped ledger", "{ran}");
    let events = events_until(&dir.path().join("events.jsonl"), |r| {
        r.iter().any(|e| e["event"] == "destructive_call_confirmed")
    })
    .await;
    let confirmed: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "destructive_call_confirmed")
        .collect();
    assert_eq!(confirmed.len(), 1, "{confirmed:?}");
    assert_eq!(confirmed[0]["function"], "wipe_scratch");
    assert_eq!(confirmed[0]["approved"], true);

    // Declined: the guard never runs, and the script can say why.
    let (client, dir) = stdio(Person::Declines).await;
    let refused = call(
        &client,
        "run_script",
        json!({"script": WIPE, "timeout_seconds": 20}),
    )
    .await;
    let said = refused["value"].as_str().unwrap_or_default();
    assert!(
        said.starts_with("forbidden: the person did not confirm"),
        "{refused}"
    );
    let events = events_until(&dir.path().join("events.jsonl"), |r| {
        r.iter()
            .any(|e| e["event"] == "destructive_call_confirmed" && e["approved"] == false)
    })
    .await;
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "destructive_call_confirmed" && e["approved"] == false),
        "the refusal is recorded"
    );
    assert!(
        !events
            .iter()
            .any(|e| e["event"] == "function_call_started" && e["function"] == "wipe_scratch"),
        "the guard never started"
    );

    // Nobody to ask: refused with the reason.
    let server = Server::start(TESTBED).await;
    let alone = structured(
        &server
            .call("run_script", json!({"script": WIPE, "timeout_seconds": 20}))
            .await,
    );
    let said = alone["value"].as_str().unwrap_or_default();
    assert!(
        said.starts_with("forbidden: 'wipe_scratch' is annotated destructive")
            && said.contains("nobody can be asked"),
        "{alone}"
    );
    // A batch: refused before anything runs when nobody can confirm it ...
    let batch = structured(
        &server
            .call(
                "run_batch",
                json!({"calls": [{"name": "wipe_scratch", "arguments": {"record": "ledger"}}]}),
            )
            .await,
    );
    assert_eq!(batch["error"]["field"], "calls[0].name", "{batch}");
    // ... and run once the person confirms the call.
    let (client, _dir) = stdio(Person::Accepts(json!({"confirm": true}))).await;
    let batch = call(
        &client,
        "run_batch",
        json!({"calls": [{"name": "wipe_scratch", "arguments": {"record": "ledger"}}]}),
    )
    .await;
    assert_eq!(batch["calls"][0]["output"]["result"], "wiped ledger", "{batch}");
    // A direct call is the person's own act: not asked again.
    let direct = structured(&server.call("wipe_scratch", json!({"record": "ledger"})).await);
    assert_eq!(direct["result"], "wiped ledger", "{direct}");
}

#[tokio::test]
async fn a_coding_task_asks_the_person_for_missing_input_and_finishes_with_it() {
    use crate::fake_model::{FakeModel, GREEKS_ANSWER, Reply};
    let asks = "```rhai\nfinal_answer(#{task_type: \"needs_input\", summary: \"which strike?\", missing: #{strike: #{type: \"number\", description: \"strike price\"}}})\n```";
    let model = FakeModel::start(vec![
        Reply::Content(asks.into()),
        Reply::Content(GREEKS_ANSWER.into()),
    ])
    .await;
    let (client, dir) = stdio_with(Person::Accepts(json!({"strike": 105})), &model.env()).await;
    let result = call(
        &client,
        "run_coding_task",
        json!({"prompt": "delta", "timeout_seconds": 60}),
    )
    .await;
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(
        result["summary"], "delta",
        "the task went on to its answer: {result}"
    );
    let told = model.requests()[1]["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    assert!(
        told.contains("the person answered") && told.contains("105"),
        "{told}"
    );
    let events = events_until(&dir.path().join("events.jsonl"), |r| {
        r.iter()
            .any(|e| e["event"] == "question_answered" && e["answered"] == true)
    })
    .await;
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "question_answered" && e["answered"] == true),
        "the question is recorded"
    );

    // Declined: the task ends needs_input, as before, with the typed question.
    let model = FakeModel::start(vec![Reply::Content(asks.into())]).await;
    let (client, _dir) = stdio_with(Person::Declines, &model.env()).await;
    let result = call(
        &client,
        "run_coding_task",
        json!({"prompt": "delta", "timeout_seconds": 60}),
    )
    .await;
    assert_eq!(result["task_type"], "needs_input", "{result}");
    assert_eq!(result["missing"]["strike"]["type"], "number", "{result}");
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test]
async fn a_coding_task_question_may_offer_alternatives_and_the_answer_is_in_the_receipt() {
    // "The volatility, or an option price to imply it from": the person gives the price only.
    use crate::fake_model::{FakeModel, GREEKS_ANSWER, Reply};
    let asks = "```rhai\nfinal_answer(#{task_type: \"needs_input\", summary: \"which volatility?\", missing: #{volatility: #{type: \"number\", or: [\"option_price\"]}, option_price: #{type: \"number\", description: \"a quoted price to imply it from\"}, note: #{type: \"string\", optional: true}}})\n```";
    let model = FakeModel::start(vec![
        Reply::Content(asks.into()),
        Reply::Content(GREEKS_ANSWER.into()),
    ])
    .await;
    let (client, _dir) = stdio_with(Person::Accepts(json!({"option_price": 4.5})), &model.env()).await;
    let result = call(
        &client,
        "run_coding_task",
        json!({"prompt": "delta", "timeout_seconds": 60}),
    )
    .await;
    assert_eq!(result["status"], "success", "{result}");
    let told = model.requests()[1]["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    assert!(told.contains("4.5"), "{told}");
    let answer = &result["receipt"]["approvals"][0];
    assert_eq!(answer["key"], "input-1", "{result}");
    assert_eq!(answer["content"]["option_price"], 4.5, "{result}");
    assert_eq!(answer["approved"], true, "{result}");
    assert!(
        answer["principal"].as_str().is_some_and(|p| !p.is_empty()),
        "{result}"
    );
}
