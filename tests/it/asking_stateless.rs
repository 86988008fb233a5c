//! Guards that ask on stateless 2026-07-28 requests (issue 29, part 2:
//! multi-round-trip input, SEP-2322), over real HTTP with rmcp's client:
//! the call is answered `input_required` with the question and a
//! `requestState`; the client's retry with the answer re-runs the guard,
//! which gets it (accepted, declined, and a sampling result); a state
//! replayed for another tool or by another principal, altered, or expired
//! is refused naming `requestState`.

// Sampling's types are deprecated by SEP-2577 for later protocols; MRTR
// carries them as input requests.
#![allow(deprecated)]

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData, InputResponses, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, RequestContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceError};
use serde_json::{Value, json};

use crate::common::http::{HttpServer, PRINCIPALS, tokens_file};
use crate::common::{TESTBED, structured};

/// The person behind a stateless client: accepts forms with a name, or
/// declines; its model always answers the same.
#[derive(Clone)]
enum Person {
    Accepts(&'static str),
    Declines,
}

impl ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        let capabilities =
            serde_json::from_value(json!({"elicitation": {}, "sampling": {}})).expect("capabilities");
        ClientConfig::new(capabilities, rmcp::model::Implementation::new("person", "1.0"))
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(match self {
            Person::Accepts(name) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": name}))
            }
            Person::Declines => ElicitResult::new(ElicitationAction::Decline),
        })
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        serde_json::from_value(json!({"role": "assistant", "model": "person-model",
            "content": {"type": "text", "text": "Paris"}}))
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }
}

/// A stateless (2026-07-28) client of `server` as `person`, with `token`.
async fn stateless(
    server: &HttpServer,
    person: Person,
    token: Option<&str>,
) -> RunningService<RoleClient, Person> {
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    server
        .client_with(person, token, lifecycle)
        .await
        .expect("discover over HTTP")
}

fn params(tool: &str) -> CallToolRequestParams {
    let Value::Object(arguments) = json!({"question": "What is your name?"}) else {
        unreachable!()
    };
    CallToolRequestParams::new(tool.to_string()).with_arguments(arguments)
}

/// The question key, the question and the state of an input_required answer.
async fn ask_once<H: ClientHandler>(
    client: &RunningService<RoleClient, H>,
    tool: &str,
) -> (String, Value, String) {
    match client.call_tool_once(params(tool)).await.expect("answered") {
        CallToolResponse::InputRequired(result) => {
            let wire = serde_json::to_value(&result).expect("serializes");
            assert_eq!(wire["resultType"], "input_required", "{wire}");
            let (key, question) = wire["inputRequests"]
                .as_object()
                .and_then(|requests| requests.iter().next())
                .map(|(k, q)| (k.clone(), q.clone()))
                .expect("one question");
            (key, question, result.request_state.expect("a requestState"))
        }
        other => panic!("expected input_required, got {other:?}"),
    }
}

fn accepted(key: &str, name: &str) -> InputResponses {
    std::iter::once((
        key.to_string(),
        json!({"action": "accept", "content": {"name": name}}),
    ))
    .collect()
}

/// The message of a JSON-RPC error answer.
fn refusal(answer: Result<CallToolResponse, ServiceError>) -> String {
    match answer {
        Err(ServiceError::McpError(error)) => error.message.to_string(),
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_stateless_call_asks_with_input_required_and_the_retry_gets_the_answer() {
    let server = HttpServer::start(TESTBED, &[]).await;
    let ada = stateless(&server, Person::Accepts("Ada"), None).await;

    // One round by hand: the question goes back in the answer.
    let (key, question, _state) = ask_once(&ada, "ask_name").await;
    assert_eq!(key, "q1");
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(question["params"]["message"], "What is your name?", "{question}");
    assert_eq!(
        question["params"]["requestedSchema"]["properties"]["name"]["default"],
        "Ada"
    );

    // The round that ended with the question is recorded as such, not as a failure.
    let records = crate::common::events_until(&server.artifacts.path().join("events.jsonl"), |r| {
        r.iter().any(|e| e["event"] == "request_finished")
    })
    .await;
    let finished = records
        .iter()
        .find(|e| e["event"] == "request_finished" && e["tool"] == "ask_name")
        .expect("the first round's request_finished");
    assert_eq!(finished["status"], "input_required", "{finished}");

    // rmcp's client drives the rounds: the guard runs again and reads the answer.
    let answered = ada.call_tool(params("ask_name")).await.expect("answered");
    assert_eq!(structured(&answered), json!({"action": "accept", "name": "Ada"}));
    let sampled = ada.call_tool(params("ask_model")).await.expect("answered");
    assert_eq!(structured(&sampled)["result"], "Paris", "{sampled:?}");

    let declines = stateless(&server, Person::Declines, None).await;
    let declined = declines.call_tool(params("ask_name")).await.expect("answered");
    assert_eq!(structured(&declined), json!({"action": "decline", "name": null}));
}

#[tokio::test]
async fn a_request_state_for_another_tool_principal_or_altered_is_refused_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = tokens_file(dir.path());
    let server = HttpServer::start(TESTBED, &[("WARDEN_API_TOKENS_FILE", &file)]).await;
    let [(_, alice_token, _), (_, bob_token, _)] = PRINCIPALS;
    let alice = stateless(&server, Person::Accepts("Ada"), Some(alice_token)).await;
    let bob = stateless(&server, Person::Accepts("Bob"), Some(bob_token)).await;
    let (key, _, state) = ask_once(&alice, "ask_name").await;

    let retry = |tool: &str, state: &str| {
        params(tool)
            .with_input_responses(accepted(&key, "Ada"))
            .with_request_state(state.to_string())
    };
    let mut altered = state.clone();
    let last = altered.pop().map_or('A', |c| if c == 'A' { 'B' } else { 'A' });
    altered.push(last);
    for (who, answer) in [
        (
            "another tool",
            alice.call_tool_once(retry("ask_model", &state)).await,
        ),
        (
            "another principal",
            bob.call_tool_once(retry("ask_name", &state)).await,
        ),
        ("altered", alice.call_tool_once(retry("ask_name", &altered)).await),
    ] {
        let message = refusal(answer);
        assert!(
            message.starts_with("requestState: does not verify"),
            "{who}: {message}"
        );
        assert!(
            message.contains("without requestState and inputResponses"),
            "{who}: {message}"
        );
    }
    // A retry that leaves the question unanswered is asked it again (SEP-2322).
    match alice
        .call_tool_once(params("ask_name").with_request_state(state.clone()))
        .await
    {
        Ok(CallToolResponse::InputRequired(again)) => {
            assert!(again.input_requests.is_some_and(|r| r.contains_key(&key)));
        }
        other => panic!("expected the question again, got {other:?}"),
    }

    // The genuine retry still works.
    match alice
        .call_tool_once(retry("ask_name", &state))
        .await
        .expect("answered")
    {
        CallToolResponse::Complete(result) => {
            assert_eq!(structured(&result), json!({"action": "accept", "name": "Ada"}))
        }
        other => panic!("expected the result, got {other:?}"),
    }
}

#[tokio::test]
async fn a_request_state_expires_after_the_input_state_lifetime() {
    let server = HttpServer::start(TESTBED, &[("WARDEN_INPUT_STATE_TTL_SECONDS", "1")]).await;
    let ada = stateless(&server, Person::Accepts("Ada"), None).await;
    let (key, _, state) = ask_once(&ada, "ask_name").await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let late = ada
        .call_tool_once(
            params("ask_name")
                .with_input_responses(accepted(&key, "Ada"))
                .with_request_state(state),
        )
        .await;
    let message = refusal(late);
    assert!(message.starts_with("requestState: expired"), "{message}");
}

/// The retry of a question `first` asked, sent to `second`: its answer.
async fn retried_elsewhere(
    first: &HttpServer,
    second: &HttpServer,
) -> Result<CallToolResponse, ServiceError> {
    let asker = stateless(first, Person::Accepts("Ada"), None).await;
    let (key, _, state) = ask_once(&asker, "ask_name").await;
    let other = stateless(second, Person::Accepts("Ada"), None).await;
    other
        .call_tool_once(
            params("ask_name")
                .with_input_responses(accepted(&key, "Ada"))
                .with_request_state(state),
        )
        .await
}

#[tokio::test]
async fn nodes_sharing_an_input_state_key_accept_each_others_retries_and_a_bad_key_stops_the_server() {
    // WARDEN_INPUT_STATE_KEY: a retry may reach another node behind a load balancer.
    const KEY: &str = "4f1c0e7a9b3d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7";
    let shared = [("WARDEN_INPUT_STATE_KEY", KEY)];
    let (a, b) = (
        HttpServer::start(TESTBED, &shared).await,
        HttpServer::start(TESTBED, &shared).await,
    );
    match retried_elsewhere(&a, &b).await.expect("answered") {
        CallToolResponse::Complete(result) => {
            assert_eq!(structured(&result), json!({"action": "accept", "name": "Ada"}))
        }
        other => panic!("expected the result from the other node, got {other:?}"),
    }
    // Without a shared key each process seals with its own.
    let (c, d) = (
        HttpServer::start(TESTBED, &[]).await,
        HttpServer::start(TESTBED, &[]).await,
    );
    assert!(refusal(retried_elsewhere(&c, &d).await).starts_with("requestState: does not verify"));
    for bad in ["short", &"zz".repeat(32)] {
        let refused = HttpServer::start_on(TESTBED, "127.0.0.1:0", &[("WARDEN_INPUT_STATE_KEY", bad)])
            .await
            .err()
            .expect("a malformed key stops the server");
        assert!(
            refused.contains("WARDEN_INPUT_STATE_KEY: expected 64 hex digits"),
            "{refused}"
        );
    }
}

#[tokio::test]
async fn an_input_state_key_in_dotenv_survives_a_restart_and_a_malformed_one_stops_the_start() {
    // WARDEN_INPUT_STATE_KEY only in the working directory's .env (issue 38,
    // point 13): a retry sealed before a restart verifies after it, and a
    // malformed key there stops the server naming the variable.
    const KEY: &str = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9";
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join(".env"), format!("WARDEN_INPUT_STATE_KEY={KEY}\n")).expect("write .env");
    let first = HttpServer::start_in(TESTBED, dir.path(), &[])
        .await
        .unwrap_or_else(|stderr| panic!("server did not start: {stderr}"));
    let asker = stateless(&first, Person::Accepts("Ada"), None).await;
    let (key, _, state) = ask_once(&asker, "ask_name").await;
    drop(asker);
    drop(first);
    let restarted = HttpServer::start_in(TESTBED, dir.path(), &[])
        .await
        .unwrap_or_else(|stderr| panic!("server did not restart: {stderr}"));
    let retrying = stateless(&restarted, Person::Accepts("Ada"), None).await;
    let answer = retrying
        .call_tool_once(
            params("ask_name")
                .with_input_responses(accepted(&key, "Ada"))
                .with_request_state(state),
        )
        .await
        .expect("answered");
    match answer {
        CallToolResponse::Complete(result) => {
            assert_eq!(structured(&result), json!({"action": "accept", "name": "Ada"}))
        }
        other => panic!("expected the result after the restart, got {other:?}"),
    }

    let bad = tempfile::tempdir().expect("temp dir");
    std::fs::write(bad.path().join(".env"), "WARDEN_INPUT_STATE_KEY=not-a-key\n").expect("write .env");
    let refused = HttpServer::start_in(TESTBED, bad.path(), &[])
        .await
        .err()
        .expect("a malformed key in .env stops the server");
    assert!(
        refused.contains("WARDEN_INPUT_STATE_KEY: expected 64 hex digits"),
        "{refused}"
    );
}
