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
use crate::limits::MAX_MODEL_TOKENS_PER_RESPONSE;

/// One chat message.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Message {
    pub role: &'static str,
    pub content: String,
}

impl Message {
    pub(crate) fn system(content: impl Into<String>) -> Self {
        Self {
            role: "system",
            content: content.into(),
        }
    }
    pub(crate) fn user(content: impl Into<String>) -> Self {
        Self {
            role: "user",
            content: content.into(),
        }
    }
    pub(crate) fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: "assistant",
            content: content.into(),
        }
    }
}

/// Why a model call failed, with a stable `kind` for events.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub(crate) struct ModelError {
    /// timeout | connection | http_status | bad_response
    pub kind: &'static str,
    pub message: String,
    /// What the call is counted as when the endpoint answered but the
    /// answer was refused (an absurd `usage` count): the endpoint did the
    /// work, so the call costs its estimate ([`estimate_tokens`]), never 0.
    /// `None` when nothing came back (no tokens are known to be spent).
    pub usage: Option<Usage>,
}

impl ModelError {
    fn new(kind: &'static str, message: String) -> Self {
        Self {
            kind,
            message,
            usage: None,
        }
    }
}

/// A model's reply: its text, and what it cost.
#[derive(Debug, Clone)]
pub(crate) struct Completion {
    pub text: String,
    /// What the call is counted as: the reply's `usage`, or an estimate
    /// where the reply carried none (see [`Usage::estimated`]); never 0
    /// because the endpoint kept quiet.
    pub usage: Usage,
    /// The model that answered (`model` of the reply), when given.
    pub model: Option<String>,
}

/// Tokens one model call used: the reply's `usage`, read in either
/// spelling (`prompt_tokens` / `completion_tokens`, or `input_tokens` /
/// `output_tokens`), each count checked against
/// [`MAX_MODEL_TOKENS_PER_RESPONSE`]; a count the reply lacks is estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// At least one of the two counts is an estimate
    /// ([`estimate_tokens`]) because the reply did not say it.
    pub estimated: bool,
}

/// Bytes per token of the estimate used when a reply carries no count: 4
/// (a common rule of thumb for English text and code; JSON punctuation in
/// the request makes it count high, which is the side a limit should err on).
pub(crate) const ESTIMATED_BYTES_PER_TOKEN: u64 = 4;

/// The estimated tokens of `bytes` bytes: `bytes / 4` rounded up
/// ([`ESTIMATED_BYTES_PER_TOKEN`]). A reply without `usage` is counted
/// with the request body's bytes (the JSON sent: model, messages,
/// temperature) as its input and the reply's message content's bytes as
/// its output, so both token limits still bind an endpoint that does not
/// report usage (docs/scripts.md, "Token usage and its limits").
pub(crate) fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(ESTIMATED_BYTES_PER_TOKEN)
}

/// Sends `messages` and returns the reply, within `timeout`.
pub(crate) async fn complete(
    config: &ModelConfig,
    messages: &[Message],
    timeout: Duration,
) -> Result<Completion, ModelError> {
    let config = config.clone();
    let body = json!({"model": config.model_id, "messages": messages, "temperature": 0});
    let call = tokio::task::spawn_blocking(move || blocking_call(&config, &body, timeout));
    match tokio::time::timeout(timeout + Duration::from_millis(50), call).await {
        Ok(Ok(result)) => result,
        Ok(Err(join)) => Err(ModelError::new(
            "connection",
            format!("model call thread failed: {join}"),
        )),
        Err(_) => Err(timed_out(timeout)),
    }
}

fn timed_out(timeout: Duration) -> ModelError {
    ModelError::new(
        "timeout",
        format!(
            "the model did not answer within {} s (WARDEN_MODEL_TIMEOUT_SECONDS or the task deadline)",
            timeout.as_secs_f64()
        ),
    )
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
    // What is sent, measured once for the estimate of a reply without usage.
    let request_bytes = body.to_string().len();
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
            other => ModelError::new(
                "connection",
                format!(
                    "cannot reach the model endpoint: {} (check WARDEN_MODEL_API_BASE)",
                    redact(config, &other.to_string())
                ),
            ),
        })?;
    let status = response.status().as_u16();
    let text = response
        .into_body()
        .read_to_string()
        .map_err(|e| ModelError::new("bad_response", format!("cannot read the model's reply: {e}")))?;
    if status != 200 {
        let hint = match status {
            401 | 403 => " (check WARDEN_MODEL_API_KEY)",
            404 => " (check WARDEN_MODEL_API_BASE and WARDEN_MODEL_ID)",
            429 => " (rate limited; retry later)",
            _ => "",
        };
        let excerpt: String = redact(config, &text).chars().take(300).collect();
        return Err(ModelError::new(
            "http_status",
            format!("the model endpoint answered HTTP {status}{hint}: {excerpt}"),
        ));
    }
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| ModelError::new("bad_response", format!("the model's reply is not JSON: {e}")))?;
    let text = value["choices"][0]["message"]["content"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| {
            ModelError::new(
                "bad_response",
                "the model's reply has no choices[0].message.content".into(),
            )
        })?;
    let usage = usage_of(&value, request_bytes, &text)?;
    Ok(Completion {
        text,
        usage,
        model: value["model"].as_str().map(str::to_string),
    })
}

/// The two spellings of each count in a reply's `usage`: OpenAI's, and
/// the one of Anthropic-style and some local servers.
const INPUT_FIELDS: [&str; 2] = ["prompt_tokens", "input_tokens"];
const OUTPUT_FIELDS: [&str; 2] = ["completion_tokens", "output_tokens"];

/// What a reply is counted as. Each side is the largest count the reply
/// gives under either spelling; a side it does not give (no `usage`, a
/// `null` one, or an object without that count) is estimated from the
/// request's bytes (input) or the reply's text (output) by
/// [`estimate_tokens`], and the usage is marked `estimated`. A count that
/// is not a whole number from 0 to [`MAX_MODEL_TOKENS_PER_RESPONSE`] (a
/// negative, a fraction, a string, a value that would wrap a sum) is the
/// endpoint's error: the call fails naming the field, and is counted by
/// its estimate rather than by what it said.
fn usage_of(reply: &Value, request_bytes: usize, reply_text: &str) -> Result<Usage, ModelError> {
    let estimate = Usage {
        input_tokens: estimate_tokens(request_bytes),
        output_tokens: estimate_tokens(reply_text.len()),
        estimated: true,
    };
    let usage = match reply.get("usage") {
        None | Some(Value::Null) => return Ok(estimate),
        Some(Value::Object(usage)) => usage,
        Some(other) => {
            return Err(bad_usage("usage", other, "not an object", estimate));
        }
    };
    let side = |fields: [&str; 2]| -> Result<Option<u64>, ModelError> {
        let mut found: Option<u64> = None;
        for field in fields {
            match usage.get(field) {
                None | Some(Value::Null) => {}
                Some(value) => {
                    let count = token_count(value).ok_or_else(|| {
                        bad_usage(
                            &format!("usage.{field}"),
                            value,
                            &format!(
                                "not a token count (a whole number from 0 to {MAX_MODEL_TOKENS_PER_RESPONSE}, MAX_MODEL_TOKENS_PER_RESPONSE)"
                            ),
                            estimate,
                        )
                    })?;
                    found = Some(found.map_or(count, |seen| seen.max(count)));
                }
            }
        }
        Ok(found)
    };
    let (input, output) = (side(INPUT_FIELDS)?, side(OUTPUT_FIELDS)?);
    Ok(Usage {
        input_tokens: input.unwrap_or(estimate.input_tokens),
        output_tokens: output.unwrap_or(estimate.output_tokens),
        estimated: input.is_none() || output.is_none(),
    })
}

/// A plausible per-reply token count: a JSON integer (or an integral
/// float such as `12.0`) from 0 to [`MAX_MODEL_TOKENS_PER_RESPONSE`].
fn token_count(value: &Value) -> Option<u64> {
    let count = match value.as_u64() {
        Some(n) => n,
        None => {
            let f = value.as_f64()?;
            if f.fract() != 0.0 || !(0.0..=MAX_MODEL_TOKENS_PER_RESPONSE as f64).contains(&f) {
                return None;
            }
            f as u64
        }
    };
    (count <= MAX_MODEL_TOKENS_PER_RESPONSE).then_some(count)
}

/// Characters of a bad `usage` value quoted in the error: 40.
const QUOTED_USAGE_CHARS: usize = 40;

/// The error for a `usage` field the endpoint got wrong, counted by `estimate`.
fn bad_usage(field: &str, value: &Value, what: &str, estimate: Usage) -> ModelError {
    let mut quoted: String = value.to_string().chars().take(QUOTED_USAGE_CHARS + 1).collect();
    if quoted.chars().count() > QUOTED_USAGE_CHARS {
        quoted = quoted.chars().take(QUOTED_USAGE_CHARS).collect::<String>() + "…";
    }
    ModelError {
        kind: "bad_response",
        message: format!(
            "the model endpoint's reply has {field} = {quoted}, {what}: the reply was refused and the call counted by its estimate ({} input + {} output tokens); fix the endpoint's usage reporting",
            estimate.input_tokens, estimate.output_tokens
        ),
        usage: Some(estimate),
    }
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

    fn reply(usage: Option<Value>) -> Value {
        let mut reply = json!({"choices": [{"message": {"content": "12345"}}]});
        if let Some(usage) = usage {
            reply["usage"] = usage;
        }
        reply
    }

    #[test]
    fn usage_is_read_in_both_spellings_and_estimated_when_missing() {
        let read = |usage| usage_of(&reply(usage), 41, "12345");
        let counted = |input, output, estimated| Usage {
            input_tokens: input,
            output_tokens: output,
            estimated,
        };
        assert_eq!(
            read(Some(json!({"prompt_tokens": 7, "completion_tokens": 3}))).ok(),
            Some(counted(7, 3, false))
        );
        assert_eq!(
            read(Some(json!({"input_tokens": 7, "output_tokens": 3}))).ok(),
            Some(counted(7, 3, false))
        );
        assert_eq!(
            read(Some(json!({"prompt_tokens": 7.0, "output_tokens": 3}))).ok(),
            Some(counted(7, 3, false))
        );
        // Both spellings: the larger count.
        assert_eq!(
            read(Some(
                json!({"prompt_tokens": 7, "input_tokens": 9, "completion_tokens": 3})
            ))
            .ok(),
            Some(counted(9, 3, false))
        );
        // None, null, or one side missing: bytes / 4 rounded up (41 -> 11, 5 -> 2).
        for usage in [None, Some(Value::Null), Some(json!({}))] {
            assert_eq!(read(usage).ok(), Some(counted(11, 2, true)));
        }
        assert_eq!(
            read(Some(json!({"prompt_tokens": 7}))).ok(),
            Some(counted(7, 2, true))
        );
        assert_eq!(estimate_tokens(0), 0);
        assert_eq!(estimate_tokens(4), 1);
        assert_eq!(estimate_tokens(5), 2);
    }

    #[test]
    fn an_absurd_count_is_the_endpoints_error_counted_by_its_estimate() {
        for (usage, field) in [
            (
                json!({"prompt_tokens": u64::MAX, "completion_tokens": 1}),
                "usage.prompt_tokens",
            ),
            (
                json!({"prompt_tokens": 1, "completion_tokens": i64::MAX}),
                "usage.completion_tokens",
            ),
            (
                json!({"input_tokens": -1, "output_tokens": 1}),
                "usage.input_tokens",
            ),
            (
                json!({"input_tokens": 1, "output_tokens": 1.5}),
                "usage.output_tokens",
            ),
            (
                json!({"input_tokens": "12", "output_tokens": 1}),
                "usage.input_tokens",
            ),
            (
                json!({"input_tokens": 1, "output_tokens": 10_000_001}),
                "usage.output_tokens",
            ),
            (json!("lots"), "usage ="),
        ] {
            let error = usage_of(&reply(Some(usage.clone())), 41, "12345").expect_err("refused");
            assert_eq!(error.kind, "bad_response");
            assert!(error.message.contains(field), "{usage}: {}", error.message);
            assert_eq!(
                error.usage,
                Some(Usage {
                    input_tokens: 11,
                    output_tokens: 2,
                    estimated: true
                })
            );
        }
        let edge = json!({"prompt_tokens": MAX_MODEL_TOKENS_PER_RESPONSE, "completion_tokens": 0});
        assert!(usage_of(&reply(Some(edge)), 41, "").is_ok());
        // A long bad value is quoted short.
        let long = json!({"prompt_tokens": "x".repeat(10_000)});
        let error = usage_of(&reply(Some(long)), 1, "").expect_err("refused");
        assert!(error.message.len() < 600, "{}", error.message);
    }
}
