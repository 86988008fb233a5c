//! The server's policy about the script sandbox: `WARDEN_SANDBOX` says
//! whether a script may run when the worker reports a missing layer
//! (`warn`, the default) or not (`strict`). Read by the app at start (a bad
//! value stops it) and by every task start; the layers themselves are the
//! worker side's ([`crate::layers`]).

use crate::layers::Layers;

/// `WARDEN_SANDBOX`: `warn` (default) runs scripts with whatever layers
/// the kernel grants and warns at every task start about the missing
/// ones; `strict` refuses to run a script unless every layer is in force.
pub const MODE_ENV: &str = "WARDEN_SANDBOX";

/// Whether a missing layer stops a script from running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Warn,
    Strict,
}

/// A [`MODE_ENV`] value that is neither `warn` nor `strict`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{MODE_ENV}: expected warn or strict, got '{0}'")]
pub struct BadMode(pub String);

/// The configured [`MODE_ENV`]; the error names the variable and values.
pub fn mode() -> Result<Mode, BadMode> {
    match warden_core::config::var(MODE_ENV).as_deref().map(str::trim) {
        None | Some("") | Some("warn") => Ok(Mode::Warn),
        Some("strict") => Ok(Mode::Strict),
        Some(other) => Err(BadMode(other.to_string())),
    }
}

/// Why a script must not run with `layers` under `mode`, if it must not.
pub fn refusal(mode: Mode, layers: &Layers) -> Option<String> {
    let missing = layers.missing();
    (mode == Mode::Strict && !missing.is_empty()).then(|| {
        format!(
            "the script sandbox is incomplete (missing: {}) and {MODE_ENV}=strict refuses to run scripts without every layer; \
run `--check` to see what the kernel refused, or unset {MODE_ENV} to run with a warning",
            missing.join(", ")
        )
    })
}
