//! Answers for prompt cases: the replay adapter (the case's canned
//! `replay {response, tool_calls}`) or a pluggable one given with
//! `--prompt-adapter <command>`.
//!
//! A pluggable adapter is run with `sh -c <command>` in its own process
//! group; it gets the case JSON on stdin and must print
//! `{"response": "...", "tool_calls": [...]}` on stdout. It also gets
//! `WARDEN_TEST_CONFIG` (the server config's absolute path) and
//! `WARDEN_TEST_CASE_ID`, so a real client can start the same server. No
//! model is ever called by the runner itself.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::assertions::PromptAnswer;
use super::suite::PromptCase;

/// Time a prompt adapter gets when the case names no `timeout_seconds`: 300 s
/// (a real model may plan for a while). At the limit its process group is killed.
pub const DEFAULT_ADAPTER_TIMEOUT: Duration = Duration::from_secs(300);

/// Largest adapter stdout accepted: 4 MiB. More fails the case.
pub const MAX_ADAPTER_OUTPUT: u64 = 4 * 1024 * 1024;

/// Bytes of adapter stderr quoted when it fails: 1 KiB (the tail).
const ADAPTER_STDERR_TAIL: usize = 1024;

/// Why a pluggable adapter gave no answer; the case fails with this text.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// The case's `timeout_seconds`.
    #[error(transparent)]
    Timeout(#[from] super::config::BadSeconds),
    #[error("cannot start prompt adapter `{command}`: {error}")]
    Spawn { command: String, error: std::io::Error },
    #[error("prompt adapter gave no answer within {secs} s; its process group was killed")]
    NoAnswer { secs: f64 },
    /// `tail` is "; adapter stderr: …" or empty.
    #[error("prompt adapter exited with {status}{tail}")]
    Exit {
        status: std::process::ExitStatus,
        tail: String,
    },
    #[error("cannot wait for the prompt adapter: {0}")]
    Wait(std::io::Error),
    #[error("prompt adapter printed more than {max} bytes", max = MAX_ADAPTER_OUTPUT)]
    TooMuch,
    #[error("prompt adapter printed invalid JSON ({error}); {expected}{tail}", expected = EXPECTED)]
    Json { error: serde_json::Error, tail: String },
    #[error("prompt adapter output has no string 'response'; {expected}{tail}", expected = EXPECTED)]
    NoResponse { tail: String },
    #[error("prompt adapter's 'tool_calls' is not a list; {expected}{tail}", expected = EXPECTED)]
    ToolCalls { tail: String },
}

/// What an adapter must print.
const EXPECTED: &str = "expected one JSON object {\"response\": string, \"tool_calls\": [...]}";

/// Where a prompt answer comes from.
#[derive(Debug, Clone)]
pub enum PromptSource {
    /// Each case's own `replay` data.
    Replay,
    /// A command run once per case.
    Adapter(String),
}

/// The answer to one prompt case, `Ok(None)` when there is nothing to
/// answer with (no replay and no adapter), or why the adapter failed.
pub async fn answer(
    source: &PromptSource,
    case: &PromptCase,
    raw: &Value,
    id: &str,
    config_path: &Path,
) -> Result<Option<PromptAnswer>, AdapterError> {
    match source {
        PromptSource::Replay => Ok(case.replay.as_ref().map(|replay| PromptAnswer {
            response: replay.response.clone(),
            tool_calls: replay.tool_calls.clone(),
        })),
        PromptSource::Adapter(command) => {
            let timeout = super::config::seconds(case.timeout_seconds, DEFAULT_ADAPTER_TIMEOUT)?;
            run_adapter(command, raw, id, config_path, timeout)
                .await
                .map(Some)
        }
    }
}

async fn run_adapter(
    command: &str,
    case: &Value,
    id: &str,
    config_path: &Path,
    timeout: Duration,
) -> Result<PromptAnswer, AdapterError> {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .env("WARDEN_TEST_CONFIG", config_path)
        .env("WARDEN_TEST_CASE_ID", id)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| AdapterError::Spawn {
            command: command.to_string(),
            error,
        })?;
    let pgid = child.id();
    let mut stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let exchange = async {
        if let Some(mut stdin) = stdin.take() {
            // An adapter that ignores stdin may close it early; that is fine.
            let _ = stdin.write_all(format!("{case}\n").as_bytes()).await;
        }
        let read_out = async {
            let mut out = Vec::new();
            if let Some(stdout) = stdout {
                let _ = stdout.take(MAX_ADAPTER_OUTPUT + 1).read_to_end(&mut out).await;
            }
            out
        };
        let read_err = async {
            let mut err = Vec::new();
            if let Some(stderr) = stderr {
                let _ = stderr.take(MAX_ADAPTER_OUTPUT).read_to_end(&mut err).await;
            }
            err
        };
        let (out, err) = tokio::join!(read_out, read_err);
        let status = child.wait().await;
        (out, err, status)
    };
    let (out, err, status) = match tokio::time::timeout(timeout, exchange).await {
        Ok(parts) => parts,
        Err(_) => {
            kill_group(pgid);
            return Err(AdapterError::NoAnswer {
                secs: timeout.as_secs_f64(),
            });
        }
    };
    let tail = stderr_tail(&err);
    match status {
        Ok(status) if status.success() => {}
        Ok(status) => return Err(AdapterError::Exit { status, tail }),
        Err(e) => return Err(AdapterError::Wait(e)),
    }
    if out.len() as u64 > MAX_ADAPTER_OUTPUT {
        return Err(AdapterError::TooMuch);
    }
    parse_answer(&out, tail)
}

/// Parses `{"response": string, "tool_calls": [...]}` (tool_calls optional);
/// a refusal ends with `tail`, the adapter's stderr.
fn parse_answer(out: &[u8], tail: String) -> Result<PromptAnswer, AdapterError> {
    let value: Value = match serde_json::from_slice(out) {
        Ok(value) => value,
        Err(error) => return Err(AdapterError::Json { error, tail }),
    };
    let Some(response) = value["response"].as_str() else {
        return Err(AdapterError::NoResponse { tail });
    };
    let tool_calls = match &value["tool_calls"] {
        Value::Null => Vec::new(),
        Value::Array(calls) => calls.clone(),
        _ => return Err(AdapterError::ToolCalls { tail }),
    };
    Ok(PromptAnswer {
        response: response.to_string(),
        tool_calls,
    })
}

/// Through the one guarded kill (never group 0, 1 or this process's own).
fn kill_group(pgid: Option<u32>) {
    if let Some(pgid) = pgid {
        crate::kill_group(pgid);
    }
}

fn stderr_tail(err: &[u8]) -> String {
    if err.is_empty() {
        return String::new();
    }
    let start = err.len().saturating_sub(ADAPTER_STDERR_TAIL);
    format!(
        "; adapter stderr: {}",
        String::from_utf8_lossy(&err[start..]).trim()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adapter_output_is_checked_and_refusals_end_with_its_stderr() {
        // A valid answer parses; each malformed one says what is expected, then the stderr tail.
        let ok = parse_answer(br#"{"response": "r", "tool_calls": [1]}"#, String::new()).unwrap();
        assert_eq!((ok.response.as_str(), ok.tool_calls.len()), ("r", 1));
        let tail = || "; adapter stderr: boom".to_string();
        assert_eq!(
            parse_answer(br#"{"tool_calls": []}"#, tail())
                .unwrap_err()
                .to_string(),
            "prompt adapter output has no string 'response'; expected one JSON object \
{\"response\": string, \"tool_calls\": [...]}; adapter stderr: boom"
        );
        assert_eq!(
            parse_answer(br#"{"response": "r", "tool_calls": 1}"#, String::new())
                .unwrap_err()
                .to_string(),
            "prompt adapter's 'tool_calls' is not a list; expected one JSON object \
{\"response\": string, \"tool_calls\": [...]}"
        );
        let invalid = parse_answer(b"nope", tail()).unwrap_err().to_string();
        assert!(
            invalid.starts_with("prompt adapter printed invalid JSON (")
                && invalid.ends_with("; adapter stderr: boom"),
            "{invalid}"
        );
    }
}
