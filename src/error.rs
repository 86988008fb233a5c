//! Errors a caller can act on, with stable codes.
//!
//! [`GuardError`] is what a guard (or the framework on its behalf) returns; it
//! reaches the client as a normal tool result with `isError: true` and this
//! code, so a model can read it and fix its call. Codes are part of the
//! public contract: add new ones, never rename old ones.

use serde::Serialize;

/// Stable error codes used by the framework itself.
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
}

/// An error a caller can act on: a stable `code`, a lowercase `message` that
/// names the field and the expectation, and the `field` when one is to blame.
///
/// A guard returns it (or any error type that converts into it), and the
/// client receives it as a tool result with `isError: true`:
///
/// ```
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
}

impl GuardError {
    /// An error with a code of the guard's own choosing.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            field: None,
        }
    }

    /// A value the guard decoded but cannot accept. The message is prefixed
    /// with the field name: `volatility: must be >= 0, got -0.2`.
    pub fn invalid_input(field: impl Into<String>, message: impl AsRef<str>) -> Self {
        let field = field.into();
        Self {
            code: codes::INVALID_INPUT.into(),
            message: format!("{field}: {}", message.as_ref()),
            field: Some(field),
        }
    }

    /// The guard ran and failed for a reason that is not the caller's input.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(codes::GUARD_FAILED, message)
    }
}

/// The text of a panic payload, when it has one.
pub(crate) fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
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
pub(crate) fn catch_guard_panic<T>(
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
