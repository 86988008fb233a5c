//! Errors a caller can act on, with stable codes.
//!
//! [`GuardError`] is what a guard (or the framework on its behalf) returns; it
//! reaches the client as a normal tool result with `isError: true` and this
//! code, so a model can read it and fix its call. Codes are part of the
//! public contract: add new ones, never rename old ones.

use serde::{Deserialize, Serialize};

use crate::limits::{MAX_ERROR_FIELD_BYTES, MAX_ERROR_MESSAGE_BYTES};

/// Why a task (a script run or a coding task) did not end well: the `kind`
/// of its result's `error`, serialised as the lowercase words clients
/// already read. Guard calls have [`codes`] instead; this is the task's
/// own vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskErrorKind {
    /// The code does not compile.
    Parse,
    /// A thrown or evaluation error.
    Runtime,
    /// A limit: a script's (operations, call depth, data size, variables,
    /// depth) or a coding task's model tokens (`WARDEN_TASK_TOKENS`).
    Limit,
    /// The task deadline passed.
    Timeout,
    /// The script worker ran out of address space.
    Memory,
    /// An uncaught guard error.
    Guard,
    /// The sandbox refused to run the script (`WARDEN_SANDBOX=strict`).
    Sandbox,
    /// The script worker died or could not start.
    Worker,
    /// The task's records could not be written.
    Storage,
    /// The task's request went away.
    Cancelled,
    /// The server that ran the task is gone (found at the next start).
    Interrupted,
    /// The model endpoint failed (coding tasks).
    Model,
    /// The operator's policy refused the task's tool to its owner when the
    /// task was to run (a task queued under another policy).
    Forbidden,
}

impl TaskErrorKind {
    /// The word clients read (`"timeout"`, `"limit"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Parse => "parse",
            Self::Runtime => "runtime",
            Self::Limit => "limit",
            Self::Timeout => "timeout",
            Self::Memory => "memory",
            Self::Guard => "guard",
            Self::Sandbox => "sandbox",
            Self::Worker => "worker",
            Self::Storage => "storage",
            Self::Cancelled => "cancelled",
            Self::Interrupted => "interrupted",
            Self::Model => "model",
            Self::Forbidden => "forbidden",
        }
    }
}

impl std::fmt::Display for TaskErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `error` of a task result: a kind, a message and, for script errors,
/// where in the code it happened.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskError {
    pub kind: TaskErrorKind,
    pub message: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

impl TaskError {
    /// An error with no position in the code; its message shown as it is
    /// ([`crate::screen::visible`]: a script's error may quote any string it made).
    pub fn new(kind: TaskErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: crate::screen::visible(message.into()),
            line: None,
            column: None,
        }
    }

    /// An error at `line` and `column` of the code (a script's), its
    /// message shown as [`TaskError::new`] shows it.
    pub fn at(
        kind: TaskErrorKind,
        message: impl Into<String>,
        line: Option<usize>,
        column: Option<usize>,
    ) -> Self {
        Self {
            line,
            column,
            ..Self::new(kind, message)
        }
    }

    /// The error of a task whose server stopped under it (`why`), saying
    /// what its own files cannot: its guard calls are written to them as
    /// the task ends, so the calls it made since it last paused are only in
    /// the server's log. (A task whose own log the next server read says
    /// more: its side effects, see `warden_task::records`.)
    pub fn interrupted(why: &str) -> Self {
        Self::new(
            TaskErrorKind::Interrupted,
            format!(
                "{why}; guard calls it made since it last paused may be missing from its files: the server's events.jsonl records each one (function_call_finished with this task_id)"
            ),
        )
    }
}

/// Stable error codes used by the framework itself: every code the server
/// can emit lives here (guards may add their own with [`GuardError::new`]).
pub mod codes {
    /// Arguments did not decode into the guard's input type.
    pub const INVALID_ARGUMENTS: &str = "invalid_arguments";
    /// A guard rejected a value it decoded (e.g. a negative volatility).
    pub const INVALID_INPUT: &str = "invalid_input";
    /// The guard ran and reported a failure of its own.
    pub const GUARD_FAILED: &str = "guard_failed";
    /// All call slots (or, for an in-process guard, guard threads) stayed busy; nothing ran.
    pub const SERVER_BUSY: &str = "server_busy";
    /// The deadline passed; an isolated worker was killed.
    pub const TIMED_OUT: &str = "timed_out";
    /// The client cancelled the request; an isolated worker was killed.
    pub const CANCELLED: &str = "cancelled";
    /// The worker died (signal, panic, abort) before answering.
    pub const WORKER_CRASHED: &str = "worker_crashed";
    /// The worker hit its address-space limit.
    pub const WORKER_OUT_OF_MEMORY: &str = "worker_out_of_memory";
    /// The worker's answer was larger than the response cap.
    pub const RESPONSE_TOO_LARGE: &str = "response_too_large";
    /// A guard succeeded but its answer is over the answer bound
    /// (`WARDEN_MAX_ANSWER_BYTES`) and its output schema leaves no room to
    /// cut it: the answer is an error pointing at the whole output, kept
    /// as an artifact. The call ran once; calling again does not help.
    pub const ANSWER_TOO_LARGE: &str = "answer_too_large";
    /// The arguments were larger than the argument cap.
    pub const ARGUMENTS_TOO_LARGE: &str = "arguments_too_large";
    /// The worker could not be started.
    pub const WORKER_SPAWN_FAILED: &str = "worker_spawn_failed";
    /// The guard panicked.
    pub const GUARD_PANICKED: &str = "guard_panicked";
    /// The guard returned NaN or ±infinity where its output schema allows
    /// only numbers (JSON has neither); the error's field names where.
    pub const NON_FINITE_OUTPUT: &str = "non_finite_output";
    /// A task quota (artifact files, bytes, depth, name length) is used up.
    pub const QUOTA_EXCEEDED: &str = "quota_exceeded";
    /// No guard (or script function) has this name.
    pub const UNKNOWN_GUARD: &str = "unknown_guard";
    /// A task used all its guard calls (catchable in scripts).
    pub const BUDGET_EXHAUSTED: &str = "budget_exhausted";
    /// A guard's result cannot be represented in a script.
    pub const BAD_OUTPUT: &str = "bad_output";
    /// No task or artifact with this id or name.
    pub const NOT_FOUND: &str = "not_found";
    /// A guard asked for a managed resource the app did not register.
    pub const RESOURCE_MISSING: &str = "resource_missing";
    /// A managed resource failed to load, or is not available in this process.
    pub const RESOURCE_UNAVAILABLE: &str = "resource_unavailable";
    /// A destructive call's start could not be recorded in the shared task
    /// store before it ran (the store did not answer): it did not run.
    pub const SIDE_EFFECT_UNRECORDED: &str = "side_effect_unrecorded";
    /// An artifact is larger than the artifact cap.
    pub const ARTIFACT_TOO_LARGE: &str = "artifact_too_large";
    /// A script worker's pipe to the server is gone.
    pub const DOOR_CLOSED: &str = "door_closed";
    /// A script worker and the server disagreed about a message.
    pub const DOOR_PROTOCOL: &str = "door_protocol";
    /// `run_coding_task` was called without a model configured.
    pub const MODEL_NOT_CONFIGURED: &str = "model_not_configured";
    /// The caller's principal already holds its share of call slots or its
    /// tasks (a per-principal limit); nothing ran. Carries `retry_after_seconds`.
    pub const PRINCIPAL_BUSY: &str = "principal_busy";
    /// The caller's principal made its calls of the minute
    /// (`WARDEN_CALLS_PER_MINUTE`); nothing ran. Carries `retry_after_seconds`.
    pub const RATE_LIMITED: &str = "rate_limited";

    /// The operator's policy (`WARDEN_POLICY_FILE`) does not let the caller
    /// call this tool; the message names the rule.
    pub const FORBIDDEN: &str = "forbidden";

    /// A guard asked the client (elicitation, sampling) where nobody can
    /// answer: not a direct call on a session, an isolated guard, or a
    /// client without the capability; the message says which.
    pub const CANNOT_ASK: &str = "cannot_ask";

    /// A guard asked a question on a stateless (2026-07-28) request whose
    /// client has not answered it yet: the guard should return this error
    /// as it is (`?`). The call is answered with an `InputRequiredResult`
    /// carrying the question, and the client's retry runs the guard again
    /// with the answer (multi-round-trip input, SEP-2322).
    pub const INPUT_REQUIRED: &str = "input_required";

    /// A guard registered to ask before its task (`Guard::asks_before_task`)
    /// reached `warden::ask::detach` in the request: the guard should
    /// return this error as it is (`?`); the call is answered with the
    /// task's handle and the task runs the guard again.
    pub const DETACHING: &str = "detaching";

    /// The codes of a request refused before anything ran (status
    /// `rejected`, a `request_rejected` event whose `reason` is the code).
    pub const REFUSALS: &[&str] = &[SERVER_BUSY, PRINCIPAL_BUSY, RATE_LIMITED];

    /// HTTP: a request's `Origin` is not allowed (403; `WARDEN_ALLOWED_ORIGINS`).
    pub const FORBIDDEN_ORIGIN: &str = "forbidden_origin";
    /// HTTP: a request to `/mcp` names a `Host` the server does not answer
    /// (403; DNS-rebinding protection).
    pub const FORBIDDEN_HOST: &str = "forbidden_host";
    /// HTTP: the server holds its maximum of MCP sessions (503, `Retry-After`).
    pub const TOO_MANY_SESSIONS: &str = "too_many_sessions";
    /// HTTP: the principal has its maximum of requests in progress, open
    /// SSE streams included (429, `Retry-After`).
    pub const TOO_MANY_REQUESTS: &str = "too_many_requests";
    /// HTTP: a request body arrived slower than the minimum rate (408; the
    /// connection is closed).
    pub const BODY_TOO_SLOW: &str = "body_too_slow";
    /// HTTP: the server is draining (SIGTERM) and takes no new work (503,
    /// `Retry-After`): another node, or this one after its restart, will.
    pub const DRAINING: &str = "draining";

    /// Every code above: the stable vocabulary a client may see in
    /// `error.code`. A test checks each is documented.
    pub const ALL: &[&str] = &[
        INVALID_ARGUMENTS,
        INVALID_INPUT,
        GUARD_FAILED,
        SERVER_BUSY,
        TIMED_OUT,
        CANCELLED,
        WORKER_CRASHED,
        WORKER_OUT_OF_MEMORY,
        RESPONSE_TOO_LARGE,
        ANSWER_TOO_LARGE,
        ARGUMENTS_TOO_LARGE,
        WORKER_SPAWN_FAILED,
        GUARD_PANICKED,
        NON_FINITE_OUTPUT,
        QUOTA_EXCEEDED,
        UNKNOWN_GUARD,
        BUDGET_EXHAUSTED,
        BAD_OUTPUT,
        NOT_FOUND,
        RESOURCE_MISSING,
        RESOURCE_UNAVAILABLE,
        ARTIFACT_TOO_LARGE,
        SIDE_EFFECT_UNRECORDED,
        DOOR_CLOSED,
        DOOR_PROTOCOL,
        MODEL_NOT_CONFIGURED,
        PRINCIPAL_BUSY,
        RATE_LIMITED,
        FORBIDDEN_ORIGIN,
        FORBIDDEN_HOST,
        TOO_MANY_SESSIONS,
        TOO_MANY_REQUESTS,
        BODY_TOO_SLOW,
        DRAINING,
        FORBIDDEN,
        CANNOT_ASK,
    ];
}

/// An error a caller can act on: a stable `code`, a lowercase `message` that
/// names the field and the expectation, and the `field` when one is to blame.
///
/// A guard returns it (or any error type that converts into it), and the
/// client receives it as a tool result with `isError: true`:
///
/// ```
/// # use warden_core as warden; // the `warden` facade re-exports these
/// use warden::GuardError;
///
/// fn check(volatility: f64) -> Result<f64, GuardError> {
///     if volatility < 0.0 {
///         return Err(GuardError::invalid_input(
///             "volatility",
///             format!("must be >= 0, got {volatility}"),
///         ));
///     }
///     Ok(volatility)
/// }
///
/// let error = check(-0.2).unwrap_err();
/// assert_eq!(error.code, "invalid_input");
/// assert_eq!(error.field.as_deref(), Some("volatility"));
/// assert_eq!(error.message, "volatility: must be >= 0, got -0.2");
/// assert_eq!(GuardError::failed("feed unavailable").code, "guard_failed");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct GuardError {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// When a refused request may be sent again, in whole seconds
    /// (`principal_busy`, `rate_limited`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u64>,
}

impl GuardError {
    /// An error with a code of the guard's own choosing. The message is
    /// held to [`MAX_ERROR_MESSAGE_BYTES`] ([`bound_message`]) and shown
    /// as it is ([`crate::screen::visible`]).
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: bound_message(crate::screen::visible(message.into()), MAX_ERROR_MESSAGE_BYTES),
            field: None,
            retry_after_seconds: None,
        }
    }

    /// Names the input field at fault (kept when the code is not
    /// `invalid_input`, e.g. `arguments_too_large` on one argument), held
    /// to [`MAX_ERROR_FIELD_BYTES`].
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(bound_message(
            crate::screen::visible(field.into()),
            MAX_ERROR_FIELD_BYTES,
        ));
        self
    }

    /// This error, saying when to retry.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after_seconds = Some(seconds);
        self
    }

    /// A value the guard decoded but cannot accept. The message is prefixed
    /// with the field name: `volatility: must be >= 0, got -0.2`.
    pub fn invalid_input(field: impl Into<String>, message: impl AsRef<str>) -> Self {
        let field = bound_message(field.into(), MAX_ERROR_FIELD_BYTES);
        Self::new(codes::INVALID_INPUT, format!("{field}: {}", message.as_ref())).with_field(field)
    }

    /// The guard ran and failed for a reason that is not the caller's input.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(codes::GUARD_FAILED, message)
    }
}

/// `text` when it is at most `max` bytes long; else its head and its tail
/// around `…[N bytes elided]…`, cut at character boundaries, `max` bytes at
/// most in all: three quarters of what is kept is the head (a message says
/// what is wrong first), the rest the tail (and how to fix it last).
pub fn bound_message(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    // The marker's own length, with the widest count it can hold.
    let marker_bytes = "…[ bytes elided]…".len() + text.len().to_string().len();
    let kept = max.saturating_sub(marker_bytes);
    let mut head = kept * 3 / 4;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - (kept - head);
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}…[{} bytes elided]…{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

/// The text of a panic payload, when it has one.
pub fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Runs a guard body, turning a panic into a `guard_panicked` error naming
/// the guard: the one place a guard's panic is caught (in-process calls,
/// guard workers and a script's inline pure calls all come here).
pub fn catch_guard_panic<T>(
    guard: &str,
    body: impl FnOnce() -> Result<T, GuardError>,
) -> Result<T, GuardError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        Err(GuardError::new(
            codes::GUARD_PANICKED,
            format!("guard '{guard}' panicked: {}", panic_message(&payload)),
        ))
    })
}

#[cfg(test)]
mod documented {
    use super::codes;

    /// Codes not yet in the user documentation. The docs are being
    /// rewritten; an entry here may be documented already (that passes),
    /// but a code missing from both the docs and this list fails.
    const NOT_YET_DOCUMENTED: &[&str] = &[];

    /// Every error code the server can emit is named in README.md or in a
    /// page of docs/ (as `code`), unless listed in NOT_YET_DOCUMENTED.
    #[test]
    fn every_code_is_documented() {
        // The workspace root: this crate lives in crates/warden-core.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut text = std::fs::read_to_string(root.join("README.md")).expect("the workspace README.md");
        if let Ok(pages) = std::fs::read_dir(root.join("docs")) {
            for page in pages.flatten() {
                if page.path().extension().is_some_and(|e| e == "md") {
                    text.push_str(&std::fs::read_to_string(page.path()).unwrap_or_default());
                }
            }
        }
        let missing: Vec<&str> = codes::ALL
            .iter()
            .copied()
            .filter(|code| !text.contains(&format!("`{code}`")) && !NOT_YET_DOCUMENTED.contains(code))
            .collect();
        assert!(
            missing.is_empty(),
            "error codes missing from README.md and docs/: {missing:?}"
        );
    }

    #[test]
    fn codes_are_unique() {
        let mut all = codes::ALL.to_vec();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), codes::ALL.len());
    }
}

#[cfg(test)]
mod bounded {
    use super::{GuardError, bound_message, codes};
    use crate::limits::{MAX_ERROR_FIELD_BYTES, MAX_ERROR_MESSAGE_BYTES};

    #[test]
    fn a_short_message_is_kept_whole() {
        let error = GuardError::invalid_input("symbol", "unknown symbol 'ZZZ'; known symbols: AAPL");
        assert_eq!(error.message, "symbol: unknown symbol 'ZZZ'; known symbols: AAPL");
        assert_eq!(error.field.as_deref(), Some("symbol"));
    }

    #[test]
    fn a_hostile_value_quoted_in_a_message_is_elided_keeping_its_head_and_fix() {
        let message = format!(
            "unknown symbol '{}'; known symbols: AAPL, MSFT",
            "é".repeat(100_000)
        );
        let whole = format!("symbol: {message}");
        let error = GuardError::invalid_input("symbol", message);
        assert!(
            error.message.len() <= MAX_ERROR_MESSAGE_BYTES,
            "{}",
            error.message.len()
        );
        assert!(
            error.message.starts_with("symbol: unknown symbol 'éé"),
            "{}",
            error.message
        );
        assert!(
            error.message.ends_with("éé'; known symbols: AAPL, MSFT"),
            "{}",
            error.message
        );
        // The marker counts what was left out, to the byte.
        let (head, rest) = error.message.split_once("…[").expect("marker");
        let (count, tail) = rest.split_once(" bytes elided]…").expect("marker");
        let count: usize = count.parse().expect("count");
        assert_eq!(head.len() + count + tail.len(), whole.len());
        assert!(whole.starts_with(head) && whole.ends_with(tail));
    }

    #[test]
    fn a_hostile_field_name_is_elided_in_the_field_and_the_message() {
        let key = "k".repeat(200_000);
        let error = GuardError::invalid_input(key.clone(), "unknown key");
        assert!(
            error
                .field
                .as_ref()
                .is_some_and(|f| f.len() <= MAX_ERROR_FIELD_BYTES)
        );
        assert!(error.message.len() <= MAX_ERROR_MESSAGE_BYTES);
        let error = GuardError::new(codes::ARGUMENTS_TOO_LARGE, "too large").with_field(key);
        assert!(
            error
                .field
                .as_ref()
                .is_some_and(|f| f.len() <= MAX_ERROR_FIELD_BYTES)
        );
    }

    #[test]
    fn the_bound_is_exact_at_every_length_and_on_characters() {
        for len in [0, 1, 255, 256, 257, 300, 5_000] {
            for unit in ["a", "é", "😀"] {
                let text = unit.repeat(len);
                let bounded = bound_message(text.clone(), 256);
                assert!(
                    bounded.len() <= 256 || text.len() <= 256,
                    "{len} {unit}: {}",
                    bounded.len()
                );
                if text.len() <= 256 {
                    assert_eq!(bounded, text);
                }
            }
        }
    }
}

#[cfg(test)]
mod shown {
    use super::{GuardError, TaskError, TaskErrorKind};

    #[test]
    fn an_input_echoed_into_a_message_cannot_hide_or_reorder_its_words() {
        // A symbol with a NUL and a right-to-left override, echoed by a guard's own message.
        let error = GuardError::invalid_input("symbol", "got \"AAPL\u{0}\u{202e}yub\"; give A-Z");
        assert_eq!(error.message, "symbol: got \"AAPL\\u{0}\\u{202e}yub\"; give A-Z");
        // A field name is shown the same way; line feeds, tabs and visible non-ASCII stay.
        let error = GuardError::new("invalid_arguments", "a\n\tb: ≤ 2 … γ₃").with_field("x\u{200b}y");
        assert_eq!(error.message, "a\n\tb: ≤ 2 … γ₃");
        assert_eq!(error.field.as_deref(), Some("x\\u{200b}y"));
        let task = TaskError::new(TaskErrorKind::Runtime, "thrown: \u{2066}hidden");
        assert_eq!(task.message, "thrown: \\u{2066}hidden");
    }
}
