//! The suite's Tasks extension fixtures (SEP-2663, `tasks-*`): guards
//! registered with task support, each an ordinary guard, their names and
//! behaviour the ones the scenarios describe.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use warden::ask::{self, Question};
use warden::{App, Content, GuardError, TaskSupport, guard};

/// Whom to greet.
#[derive(Deserialize, JsonSchema)]
struct Greet {
    name: String,
}

/// A plain call, never a task.
fn greet(input: Greet) -> Result<Vec<Content>, GuardError> {
    Ok(vec![Content::text(format!("Hello, {}!", input.name))])
}

/// How long to work, and a label to echo.
#[derive(Deserialize, JsonSchema)]
struct SlowCompute {
    /// Seconds to work (0 answers at once); at most 90.
    #[serde(default)]
    seconds: f64,
    #[serde(default)]
    label: Option<String>,
}

/// Works `seconds`, then answers; cancelled, its worker is killed.
fn slow_compute(input: SlowCompute) -> Result<Vec<Content>, GuardError> {
    if !(0.0..=90.0).contains(&input.seconds) {
        return Err(GuardError::invalid_input("seconds", "must be from 0 to 90"));
    }
    std::thread::sleep(Duration::from_secs_f64(input.seconds));
    let label = input.label.unwrap_or_else(|| "job".into());
    Ok(vec![Content::text(format!(
        "{label}: computed after {} s",
        input.seconds
    ))])
}

/// No arguments.
#[derive(Deserialize, JsonSchema)]
struct NoInput {}

/// Works a second, then reports a tool error (the task ends `completed`
/// with `isError`).
fn failing_job(_: NoInput) -> Result<Vec<Content>, GuardError> {
    std::thread::sleep(Duration::from_secs(1));
    Err(GuardError::failed(
        "failing_job always fails: this is its tool error",
    ))
}

/// Panics: a protocol error (the task ends `failed`).
fn protocol_error_job(_: NoInput) -> Result<Vec<Content>, GuardError> {
    panic!("protocol_error_job panics on purpose")
}

/// The file to delete.
#[derive(Deserialize, JsonSchema)]
struct ConfirmDelete {
    filename: String,
}

fn confirm_form() -> Value {
    json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]})
}

/// Asks the person to confirm (key `confirm`), then answers.
fn confirm_delete(input: ConfirmDelete) -> Result<Vec<Content>, GuardError> {
    let answer = ask::elicit_as("confirm", &format!("Delete {}?", input.filename), confirm_form())?;
    let confirmed = answer.accepted() && answer.content.get("confirm") == Some(&Value::Bool(true));
    Ok(vec![Content::text(if confirmed {
        format!("Deleted {}", input.filename)
    } else {
        format!("Kept {}", input.filename)
    })])
}

/// Asks two questions at once (keys `name` and `confirm`).
fn multi_input(_: NoInput) -> Result<Vec<Content>, GuardError> {
    let name_form =
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    let answers = ask::all(vec![
        Question::keyed("name", Question::form("Your name?", name_form)),
        Question::keyed("confirm", Question::form("Go ahead?", confirm_form())),
    ])?;
    let name = answers[0]["content"]["name"].as_str().unwrap_or_default();
    let confirmed = answers[1]["content"]["confirm"] == Value::Bool(true);
    Ok(vec![Content::text(format!(
        "name: {name}, confirmed: {confirmed}"
    ))])
}

/// Asks the person's name (key `user_name`) in the request, then goes on
/// as a task (`ask::detach`) that greets them.
fn test_tool_with_task(_: NoInput) -> Result<Vec<Content>, GuardError> {
    let name_form =
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    let answer = ask::elicit_as("user_name", "What is your name?", name_form)?;
    ask::detach()?;
    let name = answer
        .content
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Ok(vec![Content::text(format!("Hello, {name}, from a task!"))])
}

pub fn register(app: App) -> App {
    app.guard(guard(greet).pure())
        .guard(
            guard(slow_compute)
                .isolated()
                .timeout(Duration::from_secs(120))
                .task_support(TaskSupport::Optional),
        )
        .guard(guard(failing_job).isolated().task_support(TaskSupport::Required))
        .guard(
            guard(protocol_error_job)
                .in_process()
                .task_support(TaskSupport::Optional),
        )
        .guard(
            guard(confirm_delete)
                .in_process()
                .task_support(TaskSupport::Optional),
        )
        .guard(
            guard(test_tool_with_task)
                .in_process()
                .task_support(TaskSupport::Required)
                .asks_before_task(),
        )
        .guard(
            guard(multi_input)
                .in_process()
                .task_support(TaskSupport::Optional),
        )
}
