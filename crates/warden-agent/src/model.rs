//! The model client: one OpenAI-compatible `POST {base}/chat/completions`.
//!
//! Blocking HTTP (ureq) on a blocking thread, bounded twice: ureq's own
//! global timeout, and the async side's deadline. A call abandoned at the
//! task deadline finishes (and is discarded) on its thread within the
//! per-call timeout.
//!
//! The credentials stay server-side: an error never names the endpoint's
//! address (which may carry `user:password@`) and has the API key cut out
//! of anything the endpoint said (`redact`), because model errors reach
//! the client in the task result.

use std::time::Duration;

use serde_json::{Value, json};

use super::config::ModelConfig;

/// One chat message.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Message {
    pub role: &'static str,
    pub content: String,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: "system",
            content: content.into(),
        }
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: "user",
            content: content.into(),
        }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: "assistant",
            content: content.into(),
        }
    }
}

/// Why a model call failed, with a stable `kind` for events.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    /// timeout | connection | http_status | bad_response
    pub kind: &'static str,
    pub message: String,
}

/// A model's reply: its text, and what the endpoint said it cost.
#[derive(Debug, Clone)]
pub struct Completion {
    pub text: String,
    /// `usage` of the reply; `None` when the endpoint sent none (some
    /// local servers do not): unknown, never counted as 0.
    pub usage: Option<Usage>,
    /// The model that answered (`model` of the reply), when given.
    pub model: Option<String>,
}

/// Tokens one model call used, from the OpenAI-compatible `usage` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Sends `messages` and returns the reply, within `timeout`.
pub async fn complete(
    config: &ModelConfig,
    messages: &[Message],
    timeout: Duration,
) -> Result<Completion, ModelError> {
    let config = config.clone();
    let body = json!({"model": config.model_id, "messages": messages, "temperature": 0});
    let call = tokio::task::spawn_blocking(move || blocking_call(&config, &body, timeout));
    match tokio::time::timeout(timeout + Duration::from_millis(50), call).await {
        Ok(Ok(result)) => result,
        Ok(Err(join)) => Err(ModelError {
            kind: "connection",
            message: format!("model call thread failed: {join}"),
        }),
        Err(_) => Err(timed_out(timeout)),
    }
}

fn timed_out(timeout: Duration) -> ModelError {
    ModelError {
        kind: "timeout",
        message: format!(
            "the model did not answer within {} s (WARDEN_MODEL_TIMEOUT_SECONDS or the task deadline)",
            timeout.as_secs_f64()
        ),
    }
}

/// Shortest API key cut out of messages: 8 characters. Real keys are far
/// longer; cutting every occurrence of a one-letter test key would garble
/// the message without protecting anything.
const MIN_REDACTED_KEY_CHARS: usize = 8;

/// `text` with the credentials cut out: the API key, the whole base URL,
/// and the `user:password` part of the base URL.
fn redact(config: &ModelConfig, text: &str) -> String {
    let mut text = text.replace(config.api_base.as_str(), "<WARDEN_MODEL_API_BASE>");
    if config.api_key.chars().count() >= MIN_REDACTED_KEY_CHARS {
        text = text.replace(config.api_key.as_str(), "<redacted>");
    }
    let authority = config
        .api_base
        .split_once("://")
        .map_or(config.api_base.as_str(), |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default();
    if let Some((userinfo, _)) = authority.rsplit_once('@')
        && !userinfo.is_empty()
    {
        text = text.replace(userinfo, "<redacted>");
    }
    text
}

fn blocking_call(config: &ModelConfig, body: &Value, timeout: Duration) -> Result<Completion, ModelError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!("{}/chat/completions", config.api_base);
    // Said only here: errors below never show it (see `redact`).
    let response = agent
        .post(&url)
        .header("Authorization", &format!("Bearer {}", config.api_key))
        .send_json(body)
        .map_err(|e| match e {
            ureq::Error::Timeout(_) => timed_out(timeout),
            other => ModelError {
                kind: "connection",
                message: format!(
                    "cannot reach the model endpoint: {} (check WARDEN_MODEL_API_BASE)",
                    redact(config, &other.to_string())
                ),
            },
        })?;
    let status = response.status().as_u16();
    let text = response.into_body().read_to_string().map_err(|e| ModelError {
        kind: "bad_response",
        message: format!("cannot read the model's reply: {e}"),
    })?;
    if status != 200 {
        let hint = match status {
            401 | 403 => " (check WARDEN_MODEL_API_KEY)",
            404 => " (check WARDEN_MODEL_API_BASE and WARDEN_MODEL_ID)",
            429 => " (rate limited; retry later)",
            _ => "",
        };
        let excerpt: String = redact(config, &text).chars().take(300).collect();
        return Err(ModelError {
            kind: "http_status",
            message: format!("the model endpoint answered HTTP {status}{hint}: {excerpt}"),
        });
    }
    let value: Value = serde_json::from_str(&text).map_err(|e| ModelError {
        kind: "bad_response",
        message: format!("the model's reply is not JSON: {e}"),
    })?;
    let text = value["choices"][0]["message"]["content"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| ModelError {
            kind: "bad_response",
            message: "the model's reply has no choices[0].message.content".into(),
        })?;
    Ok(Completion {
        text,
        usage: usage_of(&value),
        model: value["model"].as_str().map(str::to_string),
    })
}

/// The reply's `usage`: both `prompt_tokens` and `completion_tokens` as
/// whole numbers, or nothing (a partial count would be a wrong one).
fn usage_of(reply: &Value) -> Option<Usage> {
    let usage = reply.get("usage")?;
    Some(Usage {
        input_tokens: usage.get("prompt_tokens")?.as_u64()?,
        output_tokens: usage.get("completion_tokens")?.as_u64()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_never_carry_the_key_or_the_base_urls_credentials() {
        // The key, the base URL and its user:password are cut out of what the endpoint said.
        let config = ModelConfig {
            api_key: "sk-live-0123456789".into(),
            api_base: "https://bot:hunter2@models.internal:8443/v1".into(),
            model_id: "m".into(),
            call_timeout: Duration::from_secs(1),
            inline_calls: 1,
        };
        let said = "bad key sk-live-0123456789 for https://bot:hunter2@models.internal:8443/v1/chat/completions; bot:hunter2";
        let cleaned = redact(&config, said);
        for secret in ["sk-live-0123456789", "hunter2", "bot:"] {
            assert!(!cleaned.contains(secret), "{cleaned}");
        }
        assert!(
            cleaned.contains("<WARDEN_MODEL_API_BASE>/chat/completions"),
            "{cleaned}"
        );
    }
}
