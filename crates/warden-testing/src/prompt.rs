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
) -> Result<Option<PromptAnswer>, String> {
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
) -> Result<PromptAnswer, String> {
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
        .map_err(|e| format!("cannot start prompt adapter `{command}`: {e}"))?;
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
            return Err(format!(
                "prompt adapter gave no answer within {} s; its process group was killed",
                timeout.as_secs_f64()
            ));
        }
    };
    let tail = stderr_tail(&err);
    match status {
        Ok(status) if status.success() => {}
        Ok(status) => return Err(format!("prompt adapter exited with {status}{tail}")),
        Err(e) => return Err(format!("cannot wait for the prompt adapter: {e}")),
    }
    if out.len() as u64 > MAX_ADAPTER_OUTPUT {
        return Err(format!(
            "prompt adapter printed more than {MAX_ADAPTER_OUTPUT} bytes"
        ));
    }
    parse_answer(&out).map_err(|e| format!("{e}{tail}"))
}

/// Parses `{"response": string, "tool_calls": [...]}` (tool_calls optional).
fn parse_answer(out: &[u8]) -> Result<PromptAnswer, String> {
    let expected = "expected one JSON object {\"response\": string, \"tool_calls\": [...]}";
    let value: Value = serde_json::from_slice(out)
        .map_err(|e| format!("prompt adapter printed invalid JSON ({e}); {expected}"))?;
    let Some(response) = value["response"].as_str() else {
        return Err(format!(
            "prompt adapter output has no string 'response'; {expected}"
        ));
    };
    let tool_calls = match &value["tool_calls"] {
        Value::Null => Vec::new(),
        Value::Array(calls) => calls.clone(),
        _ => return Err(format!("prompt adapter's 'tool_calls' is not a list; {expected}")),
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
