//! How Warden's limits are laid out, and the one way they are overridden.
//!
//! Each crate owns the limits it enforces, in its own `limits` module beside
//! the code that enforces them (`warden_sandbox::limits`,
//! `warden_calls::limits`, `warden_script::limits`, `warden_task::limits`,
//! `warden_agent::limits`, `warden_mcp::limits`, `warden_cluster::limits`),
//! so a crate low on the spine never names a bound of a layer above it. A
//! bound read by several crates lives in the lowest of them, and the layers
//! above read it from there. Each `DEFAULT_*` constant documents its value,
//! its unit, what happens when it is hit and what it does *not* cover; the
//! limits table in `docs/operating.md` mirrors every crate's `limits.rs`
//! (`tests/it/docs.rs` checks it).
//!
//! The values a running server uses are per-crate parts, each with
//! `Default` and a `from_env` that applies the operator's `WARDEN_*`
//! overrides of its own fields through [`env_number`]: the sandbox's
//! `WorkerLimits`, the executor's `CallLimits`, the task runner's
//! `TaskLimits` and the MCP layer's `ServingLimits`. The whole,
//! `warden_mcp::limits::Limits` (re-exported by the facade as
//! `warden::Limits`), gathers the parts; an application overrides it with
//! `App::limits`, and each layer is handed only its own part.
//!
//! Which limits an operator can tune: budgets that trade capacity for
//! safety on a given machine or team (slots, waits, threads, memory, task
//! quotas, store retention, log sizes, message and argument caps) are
//! fields of a part with a `WARDEN_*` override. Bounds that are part of a
//! contract or a format (the 256 KiB inline task result, name and
//! depth limits of artifact paths, argument nesting depth, the string cut
//! in event records) are plain constants: raising them would break the
//! promise they keep, and lowering them buys nothing an operator needs.
//!
//! This module holds what every part shares: [`LimitError`] and
//! [`env_number`], and the bounds core enforces itself: on the length of an
//! error message ([`MAX_ERROR_MESSAGE_BYTES`]), since every layer makes its
//! errors with core's [`crate::error::GuardError`], and on the source a
//! plan's form shows ([`MAX_PLAN_SOURCE_BYTES`]), since core writes that
//! form ([`crate::approval`]).

/// The longest error message Warden sends, in bytes: 2,048, for a
/// [`crate::error::GuardError`] (every guard's and built-in's error) and for
/// a JSON-RPC protocol error (an unknown tool, method, resource or prompt).
/// A message quotes what it refuses (`unknown symbol '…'`, serde's
/// `invalid type: string "…"`), and a hostile argument of megabytes would
/// otherwise come back whole, once per bad call, and fill the answer bound
/// and a task on disk to say "invalid input". A longer message keeps its
/// head (the field and what was wrong) and its tail (the fix), cut at
/// character boundaries around `…[N bytes elided]…`
/// ([`crate::error::bound_message`]). Not tunable: it is part of the error
/// format, and no message Warden writes itself comes near it.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 2_048;

/// The longest `field` an error names, in bytes: 256. A field is the
/// caller's argument name or a path into it (`calls[3].arguments.spot`); a
/// longer one is a hostile key, elided like a long message.
pub const MAX_ERROR_FIELD_BYTES: usize = 256;

/// The largest source a plan's confirmation form shows: 16,384 bytes of a
/// script's text, or of a batch's destructive calls as listed, after
/// invisible characters are escaped. A plan approves calls whose
/// arguments the source computes, so the person is shown the source
/// itself, every line of it; a script whose text is larger gets no plan
/// (each destructive call is then asked on its own, with its exact
/// arguments, and an unplanned destructive `map_call` is refused where a
/// run can pause), and such a batch is refused `forbidden`, naming this
/// limit. A contract with the person, not a budget: no override.
pub const MAX_PLAN_SOURCE_BYTES: usize = 16_384;

/// An environment override that could not be used.
#[derive(Debug, thiserror::Error)]
#[error("{var}: expected an integer from {min} to {max}, got '{value}'")]
pub struct LimitError {
    var: &'static str,
    min: u64,
    max: u64,
    value: String,
}

/// The operator override `var`, read through [`crate::config`] (the
/// environment, then `.env`): `None` when unset, the number when it is an
/// integer from `min` to `max`. A value out of range is an error naming
/// the variable and the range, never silently clamped. Every part's
/// `from_env` reads its variables with this, so `tests/it/docs.rs` finds
/// each override and its range as an `env_number(VAR, MIN, MAX)` call of a
/// crate's `limits.rs`.
pub fn env_number(var: &'static str, min: u64, max: u64) -> Result<Option<u64>, LimitError> {
    let Some(raw) = crate::config::var(var) else {
        return Ok(None);
    };
    match raw.trim().parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
        _ => Err(LimitError {
            var,
            min,
            max,
            value: raw,
        }),
    }
}
