//! Multi-round-trip input (SEP-2322): how a guard asks on a stateless
//! (2026-07-28) request, where the server cannot send the client a request
//! of its own.
//!
//! The guard calls `warden::ask::elicit` or `sample` as on a session. The
//! [`Round`] in scope answers from what the client already supplied; the
//! first question it has no answer for is kept, and the guard gets
//! `input_required` (which it returns). The call is then answered with an
//! `InputRequiredResult`: the question under the key `q<n>` (the n-th
//! question of the call) and a `requestState`. The client retries the same
//! `tools/call` with `inputResponses: {"q<n>": answer}` and that
//! `requestState`, and the guard runs again **from the start**, its
//! earlier questions answered from the state, this one from the response.
//! So a guard that asks must be safe to re-run up to the point where it
//! asks (no side effects before its questions), and must ask the same
//! questions in the same order: each answered question is checked against
//! a digest of the question it answered.
//!
//! `requestState` is the only memory between rounds and the client could
//! send anything back: it is sealed with HMAC-SHA256 (rmcp's
//! `RequestStateCodec`) under the key every node shares
//! (`WARDEN_INPUT_STATE_KEY`) or else one drawn at random when the process
//! first needs it, bound to the caller's principal, the tool and the
//! SHA-256 of the canonical arguments (so it cannot be replayed for
//! another call or by another caller), and it expires after
//! `input_state_ttl`. It holds the answers so far, signed, not encrypted.
//! Without a shared key a retry must reach the same server process:
//! behind a load balancer, stateless clients that are asked need affinity.
//!
//! Limits ([`crate::limits`]): [`MAX_INPUT_QUESTIONS`] per call,
//! [`MAX_INPUT_STATE_BYTES`] per state, `input_state_ttl` per round.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::ErrorData;
#[allow(deprecated)] // sampling's request: see `crate::asking`
use rmcp::model::CreateMessageRequest;
use rmcp::model::{
    CallToolResponse, ElicitRequest, InputRequest, InputRequiredResult, InputResponses, RequestMetaObject,
    RequestStateCodec, RequestStateError, SealOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::limits::{MAX_INPUT_QUESTIONS, MAX_INPUT_STATE_BYTES};
use warden_calls::tenant::Principal;
use warden_core::ask::{Asker, Elicitation, Question};
use warden_core::error::{GuardError, codes};

/// The request `_meta` key of a 2026-07-28 client's capabilities.
const CLIENT_CAPABILITIES_META_KEY: &str = "io.modelcontextprotocol/clientCapabilities";

/// The questions a stateless request's client declared it can answer, in
/// the request's own `_meta` capabilities.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CanAnswer {
    /// Form-mode elicitation.
    pub elicit: bool,
    /// URL-mode elicitation (`elicitation.url`).
    pub url: bool,
    pub sample: bool,
    pub roots: bool,
}

impl CanAnswer {
    /// Read from the raw `_meta` (no decoding: the HTTP direct path asks
    /// this of every call).
    pub(crate) fn of(meta: &RequestMetaObject) -> Self {
        let capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY);
        let declared = |name: &str| {
            capabilities
                .and_then(|c| c.get(name))
                .is_some_and(|v| !v.is_null())
        };
        let elicitation = capabilities
            .and_then(|c| c.get("elicitation"))
            .filter(|v| !v.is_null());
        let mode = |name: &str| {
            elicitation
                .and_then(|e| e.get(name))
                .is_some_and(|v| !v.is_null())
        };
        let url = mode("url");
        Self {
            // An empty `elicitation` is form mode (2025-06-18's shape); a
            // client that names only `url` takes no forms.
            elicit: elicitation.is_some() && (mode("form") || !url),
            url,
            sample: declared("sampling"),
            roots: declared("roots"),
        }
    }

    #[cfg(feature = "http")]
    pub(crate) fn any(self) -> bool {
        self.elicit || self.url || self.sample || self.roots
    }
}

/// The kind of a question, kept with its digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Elicit,
    Sample,
    Roots,
}

/// A question as the state remembers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Asked {
    kind: Kind,
    /// SHA-256 of the question's canonical JSON.
    digest: String,
    /// Its key in `inputRequests` / `inputResponses`: the guard's own
    /// ([`warden_core::ask::Question::Keyed`]), else `q<n>` for the n-th question.
    #[serde(default)]
    key: String,
}

/// What a sealed `requestState` holds: one entry of `asked` per question
/// so far, and the answers to all but the open ones at its end (those the
/// client answers next: one, or several asked at once).
#[derive(Debug, Serialize, Deserialize)]
struct Sealed {
    asked: Vec<Asked>,
    answers: Vec<Value>,
}

/// The call a state is bound to: it opens only for the same caller, tool
/// and arguments.
pub(crate) struct Binding(Vec<u8>);

impl Binding {
    pub(crate) fn new(principal: &Principal, tool: &str, arguments: &Value) -> Self {
        let digest = warden_core::receipt::digest(arguments);
        Self(format!("warden/mrtr/1\n{principal}\n{tool}\n{digest}").into_bytes())
    }

    /// The binding of a round that never seals a state: one whose client
    /// declared no question it can answer (every question is refused
    /// before one could be), or a guard task's (its record keeps the
    /// answers), so the call's arguments are not hashed.
    pub(crate) fn unused() -> Self {
        Self(Vec::new())
    }
}

/// One round of a stateless guard call: the answers the client has given
/// (from the state and this request's `inputResponses`), and the first
/// question the guard asked that has none.
pub(crate) struct Round {
    binding: Binding,
    can: CanAnswer,
    /// `asked[i]` was answered by `answers[i]`.
    asked: Vec<Asked>,
    answers: Vec<Value>,
    /// Answers that came without a `requestState`, by question key.
    given: InputResponses,
    /// Written by the guard's thread (through the asker), read when the
    /// call ends.
    progress: Mutex<Progress>,
}

#[derive(Default)]
struct Progress {
    /// Questions the guard asked in this run.
    next: usize,
    /// The request runs a guard up to where its task starts
    /// (`warden::ask::detach`); elsewhere detaching is a no-op.
    detaching: bool,
    /// The guard reached `warden::ask::detach` with every question so far
    /// answered: its task starts.
    detached: bool,
    /// The capability of a question the client did not declare (the
    /// first such): if the guard then fails, the call needed it.
    missing: Option<&'static str>,
    /// The questions without an answer, as the client will get them.
    pending: Vec<(Asked, InputRequest)>,
}

/// A bad `requestState` or `inputResponses`: an invalid-params error
/// naming the field and the fix.
fn bad_field(field: &str, why: &str) -> ErrorData {
    ErrorData::invalid_params(format!("{field}: {why}"), None)
}

const START_OVER: &str = "call the tool again without requestState and inputResponses to start over";

impl Round {
    /// The round a request starts: the first (no state, no responses), or
    /// a retry whose `request_state` opens for `binding` and whose
    /// `input_responses` answer exactly the question it left open.
    pub(crate) fn begin(
        binding: Binding,
        can: CanAnswer,
        request_state: Option<&str>,
        input_responses: Option<&InputResponses>,
    ) -> Result<Arc<Self>, ErrorData> {
        let (asked, answers, given) = match (request_state, input_responses) {
            (None, None) => return Ok(Self::first(binding, can)),
            // Answers without a state (a client that did not echo it):
            // the guard runs from the start and each of its questions takes
            // the answer under its own key, checked against its kind.
            (None, Some(responses)) => {
                // Every answer (a form's, a completion's, the roots) is an object.
                if let Some((key, _)) = responses.iter().find(|(_, answer)| !answer.is_object()) {
                    return Err(bad_field(
                        &format!("inputResponses.{key}"),
                        "not an answer: expected the result object of the request it answers",
                    ));
                }
                (Vec::new(), Vec::new(), responses.clone())
            }
            (Some(state), responses) => {
                let (asked, answers) = Self::resume(&binding, state, responses)?;
                (asked, answers, InputResponses::new())
            }
        };
        Ok(Arc::new(Self {
            binding,
            can,
            asked,
            answers,
            given,
            progress: Mutex::default(),
        }))
    }

    /// The round of a guard task's run (see `crate::guard_tasks`): every
    /// question is answered from `responses`, the answers so far by key,
    /// or kept for [`Round::take_requests`]; any kind may be asked (the
    /// client answers through `tasks/update`).
    pub(crate) fn for_task(responses: &serde_json::Map<String, Value>) -> Arc<Self> {
        Arc::new(Self {
            binding: Binding::unused(),
            can: CanAnswer {
                elicit: true,
                url: true,
                sample: true,
                roots: true,
            },
            asked: Vec::new(),
            answers: Vec::new(),
            given: responses.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            progress: Mutex::default(),
        })
    }

    /// This request's round runs the guard up to where its task starts
    /// (see [`Round::detached`]).
    pub(crate) fn detaching(&self) {
        self.progress.lock().unwrap_or_else(|p| p.into_inner()).detaching = true;
    }

    /// Whether the guard reached `warden::ask::detach` with nothing left
    /// to ask: its call becomes a task.
    pub(crate) fn detached(&self) -> bool {
        let progress = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        progress.detached && progress.pending.is_empty()
    }

    /// Every answer this round holds, by question key: a task started
    /// from it answers the same questions with them.
    pub(crate) fn answers_by_key(&self) -> serde_json::Map<String, Value> {
        let mut answers: serde_json::Map<String, Value> =
            self.given.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for (index, (asked, answer)) in self.asked.iter().zip(&self.answers).enumerate() {
            let key = if asked.key.is_empty() {
                question_key(index + 1)
            } else {
                asked.key.clone()
            };
            answers.insert(key, answer.clone());
        }
        answers
    }

    /// The questions asked without an answer, by key, taken (a guard
    /// task's: they go into its record rather than a sealed state).
    pub(crate) fn take_requests(&self) -> rmcp::model::InputRequests {
        std::mem::take(&mut self.progress.lock().unwrap_or_else(|p| p.into_inner()).pending)
            .into_iter()
            .map(|(asked, request)| (asked.key, request))
            .collect()
    }

    /// The first round of a call: nothing asked or answered yet.
    pub(crate) fn first(binding: Binding, can: CanAnswer) -> Arc<Self> {
        Arc::new(Self {
            binding,
            can,
            asked: Vec::new(),
            answers: Vec::new(),
            given: InputResponses::new(),
            progress: Mutex::default(),
        })
    }

    /// Opens the state and adds the response to its open question.
    fn resume(
        binding: &Binding,
        state: &str,
        responses: Option<&InputResponses>,
    ) -> Result<(Vec<Asked>, Vec<Value>), ErrorData> {
        if state.len() > MAX_INPUT_STATE_BYTES {
            return Err(bad_field(
                "requestState",
                &format!(
                    "{} bytes, longer than any this server issues ({MAX_INPUT_STATE_BYTES}, MAX_INPUT_STATE_BYTES); {START_OVER}",
                    state.len()
                ),
            ));
        }
        let codec = codec()
            .ok_or_else(|| bad_field("requestState", &format!("no key to verify it; {START_OVER}")))?;
        let sealed: Sealed = codec
            .open_json_with(state, &binding.0)
            .map_err(|e| bad_field("requestState", &opening_error(&e)))?;
        let Sealed { asked, mut answers } = sealed;
        let open = asked.get(answers.len()..).unwrap_or_default();
        if open.is_empty() {
            return Err(bad_field(
                "requestState",
                &format!("it holds no open question; {START_OVER}"),
            ));
        }
        // Every open question must be answered; keys of no open question
        // are ignored (a client may send more than was asked).
        let responses = responses.cloned().unwrap_or_default();
        let mut given = Vec::with_capacity(open.len());
        for (offset, question) in open.iter().enumerate() {
            let key = if question.key.is_empty() {
                question_key(answers.len() + offset + 1)
            } else {
                question.key.clone()
            };
            // An open question left unanswered is asked again (the guard
            // re-runs and asks it; SEP-2322 recommends re-requesting).
            let Some(answer) = responses.get(&key) else {
                break;
            };
            check_answer(question.kind, answer)
                .map_err(|why| bad_field(&format!("inputResponses.{key}"), &why.to_string()))?;
            given.push(answer.clone());
        }
        answers.extend(given);
        Ok((asked, answers))
    }

    /// The asker a guard of this round asks through (see the module doc).
    pub(crate) fn asker(self: &Arc<Self>) -> Asker {
        let round = Arc::clone(self);
        Arc::new(move |question, _deadline| round.ask(question))
    }

    fn ask(&self, question: Question) -> Result<Value, GuardError> {
        let mut progress = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        if !progress.pending.is_empty() {
            // The guard went on past an unanswered question: it waits too.
            return Err(input_required());
        }
        if question == Question::Detach {
            if !progress.detaching {
                return Ok(Value::Null);
            }
            progress.detached = true;
            return Err(GuardError::new(
                codes::DETACHING,
                "the call continues as an MCP task: return this error as it is",
            ));
        }
        let Question::All(questions) = question else {
            return self.ask_one(&mut progress, question);
        };
        // Asked at once: every unanswered one goes to the client together.
        let mut answers = Vec::with_capacity(questions.len());
        let mut waiting = false;
        for question in questions {
            match self.ask_one(&mut progress, question) {
                Ok(answer) => answers.push(answer),
                Err(error) if error.code == codes::INPUT_REQUIRED => waiting = true,
                Err(error) => return Err(error),
            }
        }
        if waiting {
            return Err(input_required());
        }
        Ok(Value::Array(answers))
    }

    /// One question: its answer from the client when it has one, else it
    /// is kept to be asked (`input_required`).
    fn ask_one(&self, progress: &mut Progress, question: Question) -> Result<Value, GuardError> {
        let (key, question) = match question {
            Question::Keyed { key, question } => (Some(key), *question),
            other => (None, other),
        };
        let index = progress.next;
        progress.next += 1;
        let (capability, declared) = match &question {
            Question::Elicit { .. } => ("elicitation", self.can.elicit),
            Question::Url { .. } => ("elicitation", self.can.url),
            Question::Sample { .. } => ("sampling", self.can.sample),
            Question::ListRoots => ("roots", self.can.roots),
            Question::Keyed { .. } | Question::All(_) | Question::Detach => ("", true),
        };
        if !declared {
            progress.missing.get_or_insert(capability);
        }
        let (mut asked, request) = input_request(question, self.can)?;
        asked.key = key.unwrap_or_else(|| question_key(index + 1));
        if let Some(answer) = self.answers.get(index) {
            if self.asked.get(index) != Some(&asked) {
                return Err(GuardError::new(
                    codes::CANNOT_ASK,
                    format!(
                        "question {} differs from the one the client answered (a guard that asks must ask the same questions, in the same order, each time it runs); {START_OVER}",
                        index + 1
                    ),
                ));
            }
            return Ok(answer.clone());
        }
        if self.asked.is_empty()
            && let Some(answer) = self.given.get(&asked.key)
        {
            check_answer(asked.kind, answer).map_err(|why| {
                GuardError::new(codes::CANNOT_ASK, format!("inputResponses.{}: {why}", asked.key))
            })?;
            return Ok(answer.clone());
        }
        if index >= MAX_INPUT_QUESTIONS {
            return Err(GuardError::new(
                codes::CANNOT_ASK,
                format!(
                    "a guard may ask at most {MAX_INPUT_QUESTIONS} questions in one stateless call (MAX_INPUT_QUESTIONS); ask fewer, or use a session"
                ),
            ));
        }
        if progress.pending.iter().any(|(open, _)| open.key == asked.key) {
            return Err(GuardError::new(
                codes::CANNOT_ASK,
                format!(
                    "two questions asked at once share the key '{}': give each its own",
                    asked.key
                ),
            ));
        }
        progress.pending.push((asked, request));
        Err(input_required())
    }

    /// The error a call that needed an undeclared client capability is
    /// answered with (SEP-2575: a server must not rely on a capability the
    /// client did not declare): `MissingRequiredClientCapabilityError`
    /// (-32021, HTTP 400) naming it in `requiredCapabilities`, when the
    /// guard asked a question of that kind, asked nothing answerable
    /// instead, and failed. A guard that catches the refusal and goes on
    /// (asking something else, or answering without it) is not refused.
    pub(crate) fn missing_capability(&self, result: &rmcp::model::CallToolResult) -> Option<ErrorData> {
        let progress = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        let capability = progress.missing?;
        if !progress.pending.is_empty() || result.is_error != Some(true) {
            return None;
        }
        Some(ErrorData::new(
            rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            format!(
                "this call needs the client's {capability} capability, which the request's _meta \
                 (io.modelcontextprotocol/clientCapabilities) does not declare; declare it to be asked"
            ),
            Some(serde_json::json!({"requiredCapabilities": {capability: {}}})),
        ))
    }

    /// The call's answer: its result, or — when the guard asked a question
    /// the client has not answered — the question and the sealed state,
    /// whatever the guard returned after. `Err` when the state would be
    /// larger than [`MAX_INPUT_STATE_BYTES`] (the caller answers it as the
    /// call's error).
    pub(crate) fn finish(
        &self,
        result: rmcp::model::CallToolResult,
        ttl: Duration,
    ) -> Result<CallToolResponse, GuardError> {
        Ok(match self.questions(ttl)? {
            Some(asked) => asked.into(),
            None => result.into(),
        })
    }

    /// The questions left without an answer, with the sealed state, if
    /// there are any (any request's answer: a tool call's, a prompt's).
    pub(crate) fn questions(&self, ttl: Duration) -> Result<Option<InputRequiredResult>, GuardError> {
        let pending = std::mem::take(&mut self.progress.lock().unwrap_or_else(|p| p.into_inner()).pending);
        if pending.is_empty() {
            return Ok(None);
        }
        let mut all = self.asked.clone();
        let mut requests = rmcp::model::InputRequests::new();
        for (asked, request) in pending {
            requests.insert(asked.key.clone(), request);
            all.push(asked);
        }
        let sealed = Sealed {
            asked: all,
            answers: self.answers.clone(),
        };
        let codec = codec().ok_or_else(|| {
            GuardError::new(
                codes::CANNOT_ASK,
                "no random key for requestState could be drawn, so the client cannot be asked",
            )
        })?;
        let state = codec
            .seal_json_with(
                &sealed,
                &SealOptions::new().associated_data(&self.binding.0).ttl(ttl),
            )
            .map_err(|e| GuardError::failed(format!("the requestState could not be sealed: {e}")))?;
        if state.len() > MAX_INPUT_STATE_BYTES {
            return Err(GuardError::new(
                codes::CANNOT_ASK,
                format!(
                    "the answers so far need a {} byte requestState, over the {MAX_INPUT_STATE_BYTES} byte limit (MAX_INPUT_STATE_BYTES); ask for shorter answers, or use a session",
                    state.len()
                ),
            ));
        }
        Ok(Some(InputRequiredResult::new(Some(requests), Some(state))))
    }
}

/// What the `requestState` of a stateless `run_script` that stopped on a
/// question holds: its task, which waits in the store with the journal
/// and the answers so far (see `crate::waiting`), and the question's key.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WaitingTask {
    pub task_id: String,
    /// The question this state was issued for: the retry answers it, and
    /// nothing asked later (`crate::waiting::answer`).
    pub key: String,
    /// A coding task's question, answered by the retry (its task has
    /// ended; the retry runs a new one with the answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<warden_core::approval::Pending>,
}

impl WaitingTask {
    /// Sealed for `binding`, valid for `ttl`.
    pub(crate) fn seal(&self, binding: &Binding, ttl: Duration) -> Result<String, GuardError> {
        let codec = codec().ok_or_else(|| {
            GuardError::new(
                codes::CANNOT_ASK,
                "no random key for requestState could be drawn, so the client cannot be asked",
            )
        })?;
        codec
            .seal_json_with(self, &SealOptions::new().associated_data(&binding.0).ttl(ttl))
            .map_err(|e| GuardError::failed(format!("the requestState could not be sealed: {e}")))
    }

    /// Opened from a retry's `state`, for `binding` only.
    pub(crate) fn open(binding: &Binding, state: &str) -> Result<Self, ErrorData> {
        if state.len() > MAX_INPUT_STATE_BYTES {
            return Err(bad_field(
                "requestState",
                &format!(
                    "longer than any this server issues ({MAX_INPUT_STATE_BYTES}, MAX_INPUT_STATE_BYTES); {START_OVER}"
                ),
            ));
        }
        let codec = codec()
            .ok_or_else(|| bad_field("requestState", &format!("no key to verify it; {START_OVER}")))?;
        codec
            .open_json_with(state, &binding.0)
            .map_err(|e| bad_field("requestState", &opening_error(&e)))
    }
}

/// `q1`, `q2`, …: the key of the n-th question of a call.
fn question_key(n: usize) -> String {
    format!("q{n}")
}

fn input_required() -> GuardError {
    GuardError::new(
        codes::INPUT_REQUIRED,
        "the client has not answered this question yet: return this error; the call is answered input_required and the client's retry runs the guard again with the answer",
    )
}

/// The question as the client gets it, and as the state remembers it.
fn input_request(question: Question, can: CanAnswer) -> Result<(Asked, InputRequest), GuardError> {
    crate::asking::answerable(
        &question,
        (can.elicit, can.url),
        can.sample,
        " in this request's _meta",
    )?;
    let (kind, request) = match question {
        Question::ListRoots if !can.roots => {
            return Err(GuardError::new(
                codes::CANNOT_ASK,
                "the client did not declare the roots capability in this request's _meta, so it cannot be asked",
            ));
        }
        Question::ListRoots => (Kind::Roots, InputRequest::ListRoots(Default::default())),
        Question::Url {
            message,
            url,
            elicitation_id,
        } => (
            Kind::Elicit,
            InputRequest::Elicitation(ElicitRequest::new(crate::asking::url_params(
                message,
                url,
                elicitation_id,
            ))),
        ),
        Question::Keyed { .. } | Question::All(_) | Question::Detach => {
            return Err(GuardError::new(
                codes::CANNOT_ASK,
                "a keyed question holds one question, questions asked at once are not nested, and detach is asked alone: ask them flat",
            ));
        }
        Question::Elicit {
            message,
            requested_schema,
        } => {
            let params = crate::asking::elicit_params(message, requested_schema)?;
            (
                Kind::Elicit,
                InputRequest::Elicitation(ElicitRequest::new(params)),
            )
        }
        Question::Sample { params } => {
            let params = crate::asking::sample_params(params)?;
            #[allow(deprecated)]
            let request = CreateMessageRequest::new(params);
            (Kind::Sample, InputRequest::CreateMessage(request))
        }
    };
    let json = serde_json::to_value(&request).map_err(|e| GuardError::failed(e.to_string()))?;
    let digest = warden_core::receipt::digest(&json);
    let key = String::new();
    Ok((Asked { kind, digest, key }, request))
}

/// Why a client's answer does not answer the question it was given; each
/// message says what was expected.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AnswerError {
    #[error("its question can no longer be read; cancel the task and call the tool again")]
    UnreadableQuestion,
    #[error(
        "not an elicitation result ({{\"action\": \"accept\"|\"decline\"|\"cancel\", \"content\": {{…}}}}): {0}"
    )]
    NotElicitation(serde_json::Error),
    #[error("not a sampling result: expected an object with role, content and model")]
    NotSampling,
    #[error("not a roots/list result: expected {{\"roots\": [{{\"uri\": …}}, …]}}")]
    NotRoots,
}

/// Whether `response` answers `request`, an `inputRequests` entry as a
/// guard task's record keeps it.
pub(crate) fn check_response(request: &Value, response: &Value) -> Result<(), AnswerError> {
    let kind = match serde_json::from_value::<InputRequest>(request.clone()) {
        Ok(InputRequest::Elicitation(_)) => Kind::Elicit,
        #[allow(deprecated)]
        Ok(InputRequest::CreateMessage(_)) => Kind::Sample,
        Ok(InputRequest::ListRoots(_)) => Kind::Roots,
        _ => return Err(AnswerError::UnreadableQuestion),
    };
    check_answer(kind, response)
}

/// Whether `answer` is an answer of `kind`: a form's `{action, content}`,
/// a completion's result object, or a roots list.
fn check_answer(kind: Kind, answer: &Value) -> Result<(), AnswerError> {
    match kind {
        Kind::Elicit => serde_json::from_value::<Elicitation>(answer.clone())
            .map(drop)
            .map_err(AnswerError::NotElicitation),
        Kind::Sample if answer.is_object() => Ok(()),
        Kind::Sample => Err(AnswerError::NotSampling),
        Kind::Roots if answer.get("roots").is_some_and(Value::is_array) => Ok(()),
        Kind::Roots => Err(AnswerError::NotRoots),
    }
}

fn opening_error(error: &RequestStateError) -> String {
    match error {
        RequestStateError::Expired => format!(
            "expired: answer within the input state lifetime (WARDEN_INPUT_STATE_TTL_SECONDS); {START_OVER}"
        ),
        _ => format!(
            "does not verify for this call ({error}): it was issued for another tool, other arguments or another caller, altered, or issued by another server process; {START_OVER}"
        ),
    }
}

/// The variable naming a sealing key every node of a cluster shares.
#[cfg(feature = "http")]
pub(crate) const KEY_VARIABLE: &str = "WARDEN_INPUT_STATE_KEY";

static CODEC: OnceLock<Option<RequestStateCodec>> = OnceLock::new();

/// Reads [`KEY_VARIABLE`] at start (64 hex digits: 32 bytes, e.g. from
/// `openssl rand -hex 32`), from the environment or `.env` like every
/// other setting ([`warden_core::config`]). With it every server sharing the key
/// accepts the `requestState` any of them issued, so a stateless client's
/// retry may reach another node behind a load balancer, or the same node
/// after a restart; without it each process draws its own key and a retry
/// must reach the same process. A malformed value is refused with the fix.
#[cfg(feature = "http")]
pub(crate) fn configure_key() -> Result<(), KeyError> {
    let Some(value) = warden_core::config::var_os(KEY_VARIABLE) else {
        return Ok(());
    };
    let key = value.to_str().and_then(decode_key).ok_or(KeyError::Malformed)?;
    let codec = RequestStateCodec::try_new(key.to_vec()).map_err(|e| KeyError::Refused(e.to_string()))?;
    // A second call (tests, a second server in one process) keeps the first key.
    let _ = CODEC.set(Some(codec));
    Ok(())
}

/// Whether [`KEY_VARIABLE`], when set, is a key [`configure_key`] takes
/// (for `--check`; installs nothing).
#[cfg(feature = "http")]
pub(crate) fn check_key() -> Result<(), KeyError> {
    match warden_core::config::var(KEY_VARIABLE) {
        Some(value) if decode_key(&value).is_none() => Err(KeyError::Malformed),
        _ => Ok(()),
    }
}

/// Why [`KEY_VARIABLE`] cannot seal states; each message names it and
/// the fix.
#[cfg(feature = "http")]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum KeyError {
    #[error(
        "WARDEN_INPUT_STATE_KEY: expected 64 hex digits (32 random bytes), e.g. the output of `openssl rand -hex 32`"
    )]
    Malformed,
    #[error("WARDEN_INPUT_STATE_KEY: {0}")]
    Refused(String),
}

#[cfg(feature = "http")]
fn decode_key(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut key = [0u8; 32];
    for (byte, pair) in key.iter_mut().zip(text.as_bytes().chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(key)
}

/// The sealing key: the shared one ([`configure_key`]) or one drawn once
/// from the OS; `None` if the OS gave no randomness (then nobody can be
/// asked statelessly).
fn codec() -> Option<&'static RequestStateCodec> {
    CODEC
        .get_or_init(|| {
            let mut key = [0u8; 32];
            getrandom::fill(&mut key).ok()?;
            RequestStateCodec::try_new(key.to_vec()).ok()
        })
        .as_ref()
}

#[cfg(test)]
mod tests;
