//! The suite's tools that ask the client mid-call (`warden::ask`):
//! sampling, elicitation, SEP-1034 defaults and SEP-1330 enum schemas.
//! `in_process`, where a guard can ask (see `warden::ask`).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use warden::{App, Content, GuardError, ask, guard};

/// Asks the client's model to answer a prompt (sampling/createMessage).
#[derive(Deserialize, JsonSchema)]
struct SamplingInput {
    /// The prompt sent to the client's model.
    prompt: String,
}

fn test_sampling(input: SamplingInput) -> Result<Vec<Content>, GuardError> {
    let answer = ask::sample(json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": input.prompt}}],
        "maxTokens": 100
    }))?;
    let text = answer["content"]["text"].as_str().unwrap_or_default();
    Ok(vec![Content::text(format!("LLM response: {text}"))])
}

/// Asks the person for a user name and an e-mail address (elicitation/create).
#[derive(Deserialize, JsonSchema)]
struct ElicitationInput {
    /// The message shown to the person.
    message: String,
}

fn test_elicitation(input: ElicitationInput) -> Result<Vec<Content>, GuardError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"}
        },
        "required": ["username", "email"]
    });
    let answer = ask::elicit(&input.message, schema)?;
    Ok(vec![Content::text(format!(
        "User response: action={}, content={}",
        json!(answer.action),
        json!(answer.content)
    ))])
}

/// A form whose every primitive field has a default (SEP-1034).
#[derive(Deserialize, JsonSchema)]
struct NoInput {}

fn test_elicitation_sep1034_defaults(_: NoInput) -> Result<Vec<Content>, GuardError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status",
                       "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": true}
        },
        "required": []
    });
    completed(ask::elicit(
        "Please review your profile (defaults filled in)",
        schema,
    )?)
}

/// A form with the five enum shapes of SEP-1330.
#[derive(Deserialize, JsonSchema)]
struct EnumsInput {}

fn test_elicitation_sep1330_enums(_: EnumsInput) -> Result<Vec<Content>, GuardError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}
            ]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}
            ]}}
        },
        "required": []
    });
    completed(ask::elicit("Please choose your options", schema)?)
}

fn completed(answer: ask::Elicitation) -> Result<Vec<Content>, GuardError> {
    Ok(vec![Content::text(format!(
        "Elicitation completed: action={}, content={}",
        json!(answer.action),
        json!(answer.content)
    ))])
}

/// Asks the person's name while the call runs: on a stateless request the
/// question goes back in an `input_required` answer, never as a request of
/// the server's own on the response stream.
#[derive(Deserialize, JsonSchema)]
struct StreamingElicitation {}

fn test_streaming_elicitation(_: StreamingElicitation) -> Result<Vec<Content>, GuardError> {
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    let answer = ask::elicit("What is your name?", schema)?;
    Ok(vec![Content::text(format!(
        "Hello, {}!",
        answer
            .content
            .get("name")
            .and_then(|n| n.as_str())
            .unwrap_or("stranger")
    ))])
}

/// Needs the client's model (sampling): a request that did not declare
/// the capability is answered -32021 (`MissingRequiredClientCapabilityError`)
/// naming it, rather than the server relying on it.
#[derive(Deserialize, JsonSchema)]
struct MissingCapability {}

fn test_missing_capability(_: MissingCapability) -> Result<Vec<Content>, GuardError> {
    let answer = ask::sample(json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": "Say hello"}}],
        "maxTokens": 20
    }))?;
    Ok(vec![Content::text(
        answer["content"]["text"].as_str().unwrap_or_default().to_string(),
    )])
}

/// Registers the asking tools on `app`.
pub fn register(app: App) -> App {
    app.guard(guard(test_sampling).in_process())
        .guard(guard(test_elicitation).in_process())
        .guard(guard(test_elicitation_sep1034_defaults).in_process())
        .guard(guard(test_elicitation_sep1330_enums).in_process())
        .guard(guard(test_streaming_elicitation).in_process())
        .guard(guard(test_missing_capability).in_process())
}
