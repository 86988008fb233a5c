//! Model configuration from the environment (or `.env`, via [`warden_core::config`]).

use std::time::Duration;

use crate::limits::{DEFAULT_MODEL_CALL_TIMEOUT, MAX_MODEL_CALL_TIMEOUT, agent_inline_calls};

/// Where and how to reach the model. The key is never logged or echoed.
#[derive(Clone)]
pub struct ModelConfig {
    pub api_key: String,
    /// Base URL of an OpenAI-compatible API, e.g. `https://api.openai.com/v1`.
    pub api_base: String,
    pub model_id: String,
    /// Per-call timeout (`WARDEN_MODEL_TIMEOUT_SECONDS`, 1–600, default 120).
    pub call_timeout: Duration,
    /// Inline calls a task may make (`WARDEN_AGENT_MAX_INLINE_CALLS`,
    /// default [`warden_task::limits::AGENT_MAX_INLINE_CALLS`]); read here so the
    /// prompt states the number the task enforces.
    pub inline_calls: u64,
}

impl std::fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelConfig")
            .field("api_base", &self.api_base)
            .field("model_id", &self.model_id)
            .finish_non_exhaustive()
    }
}

/// Why the model settings cannot be used; each message names the variable
/// and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelConfigError {
    #[error(
        "no model is configured ({}): set them in the environment or a .env file (see .env.example), or send the script yourself with run_script",
        unset_list(.0)
    )]
    NotConfigured(Vec<&'static str>),
    #[error("WARDEN_MODEL_TIMEOUT_SECONDS: expected an integer from 1 to {max}, got '{raw}'")]
    BadTimeout { raw: String, max: u64 },
    #[error(
        "WARDEN_MODEL_API_BASE: expected the API root as an http(s) URL, e.g. https://api.example.com/v1, got '{0}'"
    )]
    BadBase(String),
    /// A coding-task budget override out of range (the message names it).
    #[error("{0}")]
    BadBudget(String),
}

fn unset_list(names: &[&str]) -> String {
    format!("{} unset", names.join(", "))
}

/// A setting's value, unless unset or blank.
fn get(name: &str) -> Option<String> {
    warden_core::config::var(name).filter(|v| !v.trim().is_empty())
}

/// The settings a model needs and those with defaults, each checked.
struct Settings {
    call_timeout: Duration,
    inline_calls: u64,
    api_base: Option<String>,
}

impl Settings {
    /// Every model setting that is set, checked; the first bad one is the
    /// error, naming its variable.
    fn read() -> Result<Self, ModelConfigError> {
        let call_timeout = match get("WARDEN_MODEL_TIMEOUT_SECONDS") {
            None => DEFAULT_MODEL_CALL_TIMEOUT,
            Some(raw) => match raw.trim().parse::<u64>() {
                Ok(n) if n >= 1 && n <= MAX_MODEL_CALL_TIMEOUT.as_secs() => Duration::from_secs(n),
                _ => {
                    return Err(ModelConfigError::BadTimeout {
                        raw,
                        max: MAX_MODEL_CALL_TIMEOUT.as_secs(),
                    });
                }
            },
        };
        let inline_calls = agent_inline_calls().map_err(|e| ModelConfigError::BadBudget(e.to_string()))?;
        let api_base = match get("WARDEN_MODEL_API_BASE") {
            Some(base) if !(base.starts_with("https://") || base.starts_with("http://")) => {
                return Err(ModelConfigError::BadBase(base));
            }
            base => base.map(|b| b.trim_end_matches('/').to_string()),
        };
        Ok(Self {
            call_timeout,
            inline_calls,
            api_base,
        })
    }
}

impl ModelConfig {
    /// Reads `WARDEN_MODEL_API_KEY`, `WARDEN_MODEL_API_BASE`,
    /// `WARDEN_MODEL_ID` and `WARDEN_MODEL_TIMEOUT_SECONDS`. The error names
    /// what is missing and how to fix it.
    pub fn from_env() -> Result<Self, ModelConfigError> {
        let missing: Vec<&'static str> = ["WARDEN_MODEL_API_KEY", "WARDEN_MODEL_API_BASE", "WARDEN_MODEL_ID"]
            .into_iter()
            .filter(|n| get(n).is_none())
            .collect();
        if !missing.is_empty() {
            return Err(ModelConfigError::NotConfigured(missing));
        }
        let settings = Settings::read()?;
        Ok(Self {
            api_key: get("WARDEN_MODEL_API_KEY").unwrap_or_default(),
            api_base: settings.api_base.unwrap_or_default(),
            model_id: get("WARDEN_MODEL_ID").unwrap_or_default(),
            call_timeout: settings.call_timeout,
            inline_calls: settings.inline_calls,
        })
    }

    /// Checks every model setting that is set, whether or not a model is
    /// configured: a server refuses to start on a bad one and `--check`
    /// fails on it, each naming the variable, rather than the first
    /// `run_coding_task` finding it. A model left unconfigured is not an
    /// error here (the other tools work without one).
    pub fn check_env() -> Result<(), ModelConfigError> {
        Settings::read().map(drop)
    }
}
