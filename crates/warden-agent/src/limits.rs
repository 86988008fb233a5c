//! The limits the coding agent enforces: steps, model calls and their
//! timeout, observations, the system prompt, the tokens one reply may
//! report, and the inline-call budget it reads from the environment.
//!
//! The token budgets it checks before each model call are the task
//! runner's (`warden_task::limits::TaskLimits`), read through the runner.
//! The rule of every crate's `limits` module is in [`warden_core::limits`].

use std::time::Duration;

use warden_core::limits::{LimitError, env_number};
use warden_task::limits::AGENT_MAX_INLINE_CALLS;

/// Per model call timeout (`WARDEN_MODEL_TIMEOUT_SECONDS`): 120 s, never
/// beyond the task deadline. A slow model fails the task with a `timeout`
/// model error.
pub const DEFAULT_MODEL_CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// Largest accepted `WARDEN_MODEL_TIMEOUT_SECONDS`: 600 s.
pub const MAX_MODEL_CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// Code actions a coding task may run: 12. Then the task fails saying the
/// model never finished.
pub const AGENT_MAX_STEPS: usize = 12;

/// Model calls per coding task: 16 (replies without code use a call but
/// not a step).
pub const AGENT_MAX_MODEL_CALLS: usize = 16;

/// Every this many steps the model is asked to restate its plan: 3.
pub const AGENT_PLANNING_INTERVAL: usize = 3;

/// Observation text sent back to the model per step: 8 KiB (the rest is
/// cut with a note).
pub const AGENT_MAX_OBSERVATION_BYTES: usize = 8 * 1024;

/// The coding task's system prompt: at most 12,000 bytes. It is sent with
/// every model call, so its size is paid on every step. The rules, the
/// guard index by category and the script-only functions always fit; the
/// full signatures of the guards the task's request most likely needs
/// (`warden_core::search` over the request) fill the rest, and the model
/// finds any other with `search_guards`. A registry whose fixed part alone
/// is larger sends that part, over the bound, and no signatures.
pub const AGENT_MAX_PROMPT_BYTES: usize = 12_000;

/// Model tokens one reply may report on either side (`usage`'s input or
/// output count): 10,000,000, ten times the largest context windows
/// offered today. A reply reporting more, a negative or a fractional
/// count is the endpoint's error: the model call fails naming the field
/// and is counted by its size estimate instead, so a wild count can
/// neither wrap a sum to zero (disabling [`DEFAULT_TASK_TOKENS`](warden_task::limits::DEFAULT_TASK_TOKENS) and
/// [`DEFAULT_PRINCIPAL_DAILY_TOKENS`](warden_task::limits::DEFAULT_PRINCIPAL_DAILY_TOKENS)) nor overflow the task store's sums.
pub const MAX_MODEL_TOKENS_PER_RESPONSE: u64 = 10_000_000;

/// `WARDEN_AGENT_MAX_INLINE_CALLS`, or [`AGENT_MAX_INLINE_CALLS`] when
/// unset; a value outside 1–10,000,000 is an error naming the variable
/// and the range.
pub fn agent_inline_calls() -> Result<u64, LimitError> {
    Ok(env_number("WARDEN_AGENT_MAX_INLINE_CALLS", 1, 10_000_000)?.unwrap_or(AGENT_MAX_INLINE_CALLS))
}
