//! Questions from inside a guard, for the person or model behind the client
//! that made the call: elicitation (a form the person fills in) and
//! sampling (a completion from the client's model).
//!
//! Like [`crate::notify`], a guard stays a plain typed function: it calls
//! [`elicit`] or [`sample`] from its own thread and blocks until the
//! client answers. The server puts an asker in scope around a direct MCP
//! call on a session (stdio, or Streamable HTTP with a session) and the
//! executor hands it to the guard's thread, for `in_process` guards and
//! `pure` guards called directly. Everywhere else — a batch, a script, a
//! coding task, the CLI, an `isolated` worker, a client that did not
//! declare the capability — nobody can answer, and asking fails at once
//! with [`codes::CANNOT_ASK`] saying why: never a hang. A question waits at
//! most the guard's own deadline (the call is answered `timed_out` then,
//! like any call).
//!
//! On a stateless (2026-07-28) request the asker answers at once instead:
//! from the answers the client sent with its retry, or with
//! [`codes::INPUT_REQUIRED`] for a question not answered yet, which the
//! guard returns; the server then answers the call with the question and
//! runs the guard again, from the start, when the client retries with the
//! answer (multi-round-trip input). A guard that asks must therefore be
//! safe to re-run up to its questions and ask them in the same order.
//!
//! ```
//! # use warden_core as warden; // the `warden` facade re-exports these
//! use serde_json::json;
//! use warden::ask;
//!
//! fn confirm(amount: f64) -> Result<bool, warden::GuardError> {
//!     let schema = json!({"type": "object",
//!                         "properties": {"ok": {"type": "boolean", "default": false}},
//!                         "required": ["ok"]});
//!     let answer = ask::elicit(&format!("Transfer {amount}?"), schema)?;
//!     Ok(answer.accepted() && answer.content["ok"] == true)
//! }
//! // Outside a direct call nobody can answer: a clear error, at once.
//! assert_eq!(confirm(10.0).unwrap_err().code, "cannot_ask");
//! ```

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{GuardError, codes};

/// What a guard asks.
#[derive(Debug, Clone, PartialEq)]
pub enum Question {
    /// `elicitation/create` in form mode: `message` and the
    /// `requested_schema` (a flat object of primitive properties, with
    /// defaults and enums as the current spec allows).
    Elicit {
        message: String,
        requested_schema: Value,
    },
    /// `sampling/createMessage`: its params (`messages`, `maxTokens`, …).
    Sample { params: Value },
    /// `roots/list`: the client's roots (`{"roots": [{uri, name}, …]}`).
    ListRoots,
    /// `elicitation/create` in URL mode: the client sends the person to
    /// `url` (a login or payment page whose data must not pass through
    /// the client), and answers only whether they went (`accept`,
    /// `decline`, `cancel`). `elicitation_id` names the request.
    Url {
        message: String,
        url: String,
        elicitation_id: String,
    },
    /// A question under a key of the guard's choosing: on a stateless
    /// request, the key of its `inputRequests` entry (and of the client's
    /// answer); elsewhere the key is not used.
    Keyed { key: String, question: Box<Question> },
    /// Several questions at once: on a stateless request they go to the
    /// client in one `input_required` answer; elsewhere they are asked one
    /// after another. The answer is an array of their answers, in order.
    All(Vec<Question>),
    /// Not a question: the point where the call becomes an MCP task
    /// ([`detach`]). Answered `null` wherever the call already is one, or
    /// never will be.
    Detach,
}

impl Question {
    /// `question` under `key` (see [`Question::Keyed`]).
    pub fn keyed(key: &str, question: Question) -> Self {
        Self::Keyed {
            key: key.to_string(),
            question: Box::new(question),
        }
    }

    /// A form question (see [`Question::Elicit`]).
    pub fn form(message: &str, requested_schema: Value) -> Self {
        Self::Elicit {
            message: message.to_string(),
            requested_schema,
        }
    }
}

/// How the person answered a form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Accept,
    Decline,
    Cancel,
}

/// The answer to [`elicit`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Elicitation {
    pub action: Action,
    /// The form's values (empty unless accepted).
    #[serde(default)]
    pub content: Map<String, Value>,
}

impl Elicitation {
    pub fn accepted(&self) -> bool {
        self.action == Action::Accept
    }
}

/// Answers a question on the guard's thread, blocking until the client
/// answered or the call's deadline (the second argument) passed.
pub type Asker = Arc<dyn Fn(Question, Option<Instant>) -> Result<Value, GuardError> + Send + Sync>;

thread_local! {
    /// The asker of the guard call running on this thread, and the call's
    /// deadline, if any.
    static ASKER: RefCell<Option<(Asker, Option<Instant>)>> = const { RefCell::new(None) };
}

tokio::task_local! {
    /// The asker of the MCP request this task serves, set by the server
    /// around a direct guard call and read by the executor.
    static CALL_ASKER: Asker;
}

/// Asks the person behind the client to fill in a form; blocks until they
/// answered. `requested_schema` is the form's JSON Schema (an object of
/// string, number, integer, boolean and enum properties).
pub fn elicit(message: &str, requested_schema: Value) -> Result<Elicitation, GuardError> {
    let answer = ask(Question::Elicit {
        message: message.to_string(),
        requested_schema,
    })?;
    serde_json::from_value(answer)
        .map_err(|e| GuardError::failed(format!("the client's answer to the form cannot be read: {e}")))
}

/// [`elicit`] under `key`: on a stateless request the question's key in
/// `inputRequests` (see [`Question::Keyed`]).
pub fn elicit_as(key: &str, message: &str, requested_schema: Value) -> Result<Elicitation, GuardError> {
    let answer = ask(Question::keyed(key, Question::form(message, requested_schema)))?;
    serde_json::from_value(answer)
        .map_err(|e| GuardError::failed(format!("the client's answer to the form cannot be read: {e}")))
}

/// Sends the person to `url` (URL-mode elicitation): for what must not pass
/// through the client, such as a broker login. The answer says only
/// whether they accepted; the page itself reports what they did, to the
/// app, out of band. Needs a client that declared URL elicitation.
pub fn elicit_url(message: &str, url: &str) -> Result<Elicitation, GuardError> {
    // The same request on every run of the guard (a stateless retry
    // checks it): the id is derived from the URL.
    let elicitation_id = crate::receipt::sha256_hex(url.as_bytes())
        .trim_start_matches("sha256:")
        .chars()
        .take(32)
        .collect();
    let answer = ask(Question::Url {
        message: message.to_string(),
        url: url.to_string(),
        elicitation_id,
    })?;
    serde_json::from_value(answer).map_err(|e| {
        GuardError::failed(format!(
            "the client's answer to the URL request cannot be read: {e}"
        ))
    })
}

/// [`sample`] under `key` (see [`Question::Keyed`]).
pub fn sample_as(key: &str, params: Value) -> Result<Value, GuardError> {
    ask(Question::keyed(key, Question::Sample { params }))
}

/// The client's roots (`roots/list`): `{"roots": [{uri, name}, …]}`.
pub fn list_roots() -> Result<Value, GuardError> {
    ask(Question::ListRoots)
}

/// Asks `questions` at once (see [`Question::All`]); their answers, in
/// order.
pub fn all(questions: Vec<Question>) -> Result<Vec<Value>, GuardError> {
    match ask(Question::All(questions))? {
        Value::Array(answers) => Ok(answers),
        other => Err(GuardError::failed(format!(
            "the answers came as {other}, not a list"
        ))),
    }
}

/// Asks the client's model for a completion: `params` are
/// `sampling/createMessage`'s (`messages`, `maxTokens`, …); the answer is
/// its result (`role`, `content`, `model`, `stopReason`).
pub fn sample(params: Value) -> Result<Value, GuardError> {
    ask(Question::Sample { params })
}

/// Marks where a call of a guard registered with `Guard::task_support`
/// and `Guard::asks_before_task` becomes an MCP task: its questions before
/// this point are asked in the request itself (multi-round-trip input on a
/// stateless request), and here the request is answered with the task's
/// handle; the task then runs the guard again from the start, every
/// question answered from the request's rounds, and this returns `Ok`.
/// The guard must return the error this gives in the request (`?`), as
/// it returns `input_required`. Anywhere else (a plain call, the task
/// itself, a guard without task support) it returns `Ok` at once.
pub fn detach() -> Result<(), GuardError> {
    match ASKER.with(|a| a.borrow().clone()) {
        Some((asker, deadline)) => asker(Question::Detach, deadline).map(drop),
        None => Ok(()),
    }
}

fn ask(question: Question) -> Result<Value, GuardError> {
    let asker = ASKER.with(|a| a.borrow().clone());
    match asker {
        Some((asker, deadline)) => asker(question, deadline),
        None => Err(GuardError::new(
            codes::CANNOT_ASK,
            "no client can answer here: a guard can ask only in a direct MCP call (on a session, or a stateless 2026-07-28 request) to an in_process or pure guard, from a client that declares elicitation (or sampling); not in a batch, a script, a coding task, the CLI or an isolated worker",
        )),
    }
}

/// Runs `f` with `asker` as this thread's asker for a call due at
/// `deadline` (a question waits no longer), restoring the previous one
/// afterwards (also when `f` panics).
pub fn with_asker<R>(asker: Option<Asker>, deadline: Option<Instant>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<(Asker, Option<Instant>)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            ASKER.with(|a| *a.borrow_mut() = previous);
        }
    }
    let previous = ASKER.with(|a| a.replace(asker.map(|asker| (asker, deadline))));
    let _restore = Restore(previous);
    f()
}

/// Runs `future` with `asker` answering the guard calls it makes through
/// the executor.
pub async fn scope<F: std::future::Future>(asker: Asker, future: F) -> F::Output {
    CALL_ASKER.scope(asker, future).await
}

/// The asker the current task's caller set with [`scope`], if any.
pub fn for_this_task() -> Option<Asker> {
    CALL_ASKER.try_with(Clone::clone).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_reaches_the_asker_only_inside_with_asker() {
        let asker: Asker = Arc::new(|question, _| match question {
            Question::Elicit { message, .. } => {
                Ok(serde_json::json!({"action": "accept", "content": {"said": message}}))
            }
            _ => Ok(serde_json::json!({"role": "assistant"})),
        });
        let answer =
            with_asker(Some(asker), None, || elicit("hello", serde_json::json!({}))).expect("answered");
        assert!(answer.accepted());
        assert_eq!(answer.content["said"], "hello");
        let outside = elicit("hello", serde_json::json!({})).expect_err("nobody to ask");
        assert_eq!(outside.code, codes::CANNOT_ASK);
    }
}
