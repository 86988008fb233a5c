//! The suite's multi-round-trip fixtures (SEP-2322, `input-required-result-*`):
//! guards that ask on a stateless request and get their answers on the
//! client's retry. Each is an ordinary guard using `warden::ask`; the keys
//! of their questions are the ones the scenarios name.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use warden::ask::{self, Question};
use warden::{App, Content, GuardError, guard};

/// A multi-round-trip fixture of the conformance suite (no arguments).
#[derive(Deserialize, JsonSchema)]
struct NoInput {}

fn name_form() -> Value {
    json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
}

fn text_of(answer: &Value, field: &str) -> String {
    answer["content"][field].as_str().unwrap_or_default().to_string()
}

/// Asks the person's name (key `user_name`), then greets them.
fn test_input_required_result_elicitation(_: NoInput) -> Result<Vec<Content>, GuardError> {
    let answer = ask::elicit_as("user_name", "What is your name?", name_form())?;
    let name = answer
        .content
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Ok(vec![Content::text(format!("Hello, {name}!"))])
}

fn capital_question() -> Value {
    json!({"messages": [{"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}],
           "maxTokens": 100})
}

/// Asks the client's model a question (key `capital_question`).
fn test_input_required_result_sampling(_: NoInput) -> Result<Vec<Content>, GuardError> {
    let answer = ask::sample_as("capital_question", capital_question())?;
    Ok(vec![Content::text(text_of(
        &json!({"content": answer["content"]}),
        "text",
    ))])
}

/// Asks the client's roots (key `client_roots`) and names them.
fn test_input_required_result_list_roots(_: NoInput) -> Result<Vec<Content>, GuardError> {
    let answer = ask::all(vec![Question::keyed("client_roots", Question::ListRoots)])?;
    let roots: Vec<String> = answer[0]["roots"]
        .as_array()
        .map(|roots| {
            roots
                .iter()
                .filter_map(|r| r["uri"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    Ok(vec![Content::text(format!("Roots: {}", roots.join(", ")))])
}

/// Asks for a confirmation (key `confirm`); the answer arrives with the
/// verified `requestState`, which the text confirms ("state-ok").
fn test_input_required_result_request_state(_: NoInput) -> Result<Vec<Content>, GuardError> {
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
    let answer = ask::elicit_as("confirm", "Please confirm", schema)?;
    Ok(vec![Content::text(format!(
        "state-ok: confirmed={}",
        json!(answer.content.get("ok"))
    ))])
}

/// Asks a form, a completion and the roots at once.
fn test_input_required_result_multiple_inputs(_: NoInput) -> Result<Vec<Content>, GuardError> {
    let greeting = json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Generate a greeting"}}],
                          "maxTokens": 50});
    let answers = ask::all(vec![
        Question::keyed("user_name", Question::form("What is your name?", name_form())),
        Question::keyed("greeting", Question::Sample { params: greeting }),
        Question::keyed("client_roots", Question::ListRoots),
    ])?;
    Ok(vec![Content::text(format!(
        "name={}, greeting={}, roots={}",
        text_of(&answers[0], "name"),
        answers[1]["content"]["text"].as_str().unwrap_or_default(),
        answers[2]["roots"].as_array().map_or(0, Vec::len)
    ))])
}

/// Two questions in two rounds (`step1`, then `step2`).
fn test_input_required_result_multi_round(_: NoInput) -> Result<Vec<Content>, GuardError> {
    let name = ask::elicit_as("step1", "Step 1: What is your name?", name_form())?;
    let color_form =
        json!({"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]});
    let color = ask::elicit_as("step2", "Step 2: What is your favorite color?", color_form)?;
    Ok(vec![Content::text(format!(
        "{} likes {}",
        name.content
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        color
            .content
            .get("color")
            .and_then(Value::as_str)
            .unwrap_or_default()
    ))])
}

/// Asks for a confirmation; its `requestState` is sealed (HMAC-SHA256), so
/// a tampered one is refused before the guard runs again.
fn test_input_required_result_tampered_state(_: NoInput) -> Result<Vec<Content>, GuardError> {
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
    ask::elicit_as("confirm", "Please confirm", schema)?;
    Ok(vec![Content::text("confirmed")])
}

/// Asks only what the client declared it can answer: a form when it
/// takes forms, and a completion when it takes those.
fn test_input_required_result_capabilities(_: NoInput) -> Result<Vec<Content>, GuardError> {
    let mut answered = Vec::new();
    // A question of an undeclared kind is refused at once (`cannot_ask`):
    // it is left out, and the next one asked.
    match ask::elicit_as("user_name", "What is your name?", name_form()) {
        Ok(answer) => answered.push(format!("name={}", json!(answer.content.get("name")))),
        Err(error) if error.code == "cannot_ask" => {}
        Err(error) => return Err(error),
    }
    match ask::sample_as("capital_question", capital_question()) {
        Ok(answer) => answered.push(format!("model={}", answer["content"]["text"])),
        Err(error) if error.code == "cannot_ask" => {}
        Err(error) => return Err(error),
    }
    Ok(vec![Content::text(format!("answered: {}", answered.join(", ")))])
}

/// Registers the fixtures on `app`: `in_process`, where a guard can ask.
pub fn register(app: App) -> App {
    app.guard(guard(test_input_required_result_elicitation).in_process())
        .guard(guard(test_input_required_result_sampling).in_process())
        .guard(guard(test_input_required_result_list_roots).in_process())
        .guard(guard(test_input_required_result_request_state).in_process())
        .guard(guard(test_input_required_result_multiple_inputs).in_process())
        .guard(guard(test_input_required_result_multi_round).in_process())
        .guard(guard(test_input_required_result_tampered_state).in_process())
        .guard(guard(test_input_required_result_capabilities).in_process())
}
