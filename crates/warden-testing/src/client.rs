//! The runner's side of the wire: start the configured server as a child
//! process and speak MCP to it with the rmcp client (`TokioChildProcess`).
//!
//! The server's stderr goes to a temp file so a failed start can quote its
//! last lines. Every request is bounded by a timeout; a call that runs out
//! is dropped, which makes rmcp send `notifications/cancelled`, so the
//! server kills the worker instead of finishing work nobody waits for.

use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use serde_json::{Map, Value};

use super::SetupError;
use super::assertions::Outcome;
use super::config::ServerConfig;

/// Why tools/list gave no tools; the report's `tools.error`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListError {
    #[error("tools/list failed: {0}")]
    Failed(ServiceError),
    #[error("tools/list got no answer within {secs} s")]
    NoAnswer { secs: f64 },
}

/// Time the server gets to exit after the session closes: 5 s; then rmcp
/// sends SIGTERM and finally kills it.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Lines of server stderr quoted when startup fails: 5.
const STDERR_TAIL_LINES: usize = 5;

/// A live MCP session with the server under test.
pub(crate) struct Connection {
    client: RunningService<RoleClient, ()>,
    /// The server's stderr; deleted when the connection is dropped.
    stderr: tempfile::NamedTempFile,
}

impl Connection {
    /// Starts the server and completes `initialize` within the startup timeout.
    pub(crate) async fn start(config: &ServerConfig) -> Result<(Self, Duration), SetupError> {
        let started = Instant::now();
        let stderr = tempfile::NamedTempFile::new().map_err(|e| SetupError::Spawn {
            command: config.command_line(),
            detail: format!("cannot create a temp file for its stderr: {e}"),
        })?;
        let sink = stderr.reopen().map_err(|e| SetupError::Spawn {
            command: config.command_line(),
            detail: format!("cannot open a temp file for its stderr: {e}"),
        })?;
        let mut command = tokio::process::Command::new(&config.program);
        // Its own process group, so a failed start can be killed with
        // everything it started (a wrapper script's children included).
        command
            .args(&config.args)
            .current_dir(&config.cwd)
            .envs(&config.env)
            .process_group(0);
        let (transport, _) = TokioChildProcess::builder(command)
            .stderr(Stdio::from(sink))
            .spawn()
            .map_err(|e| SetupError::Spawn {
                command: config.command_line(),
                detail: e.to_string(),
            })?;
        let pgid = transport.id();
        let serving = tokio::time::timeout(config.startup_timeout, ().serve(transport)).await;
        let tail = || stderr_tail(&stderr);
        if !matches!(serving, Ok(Ok(_))) {
            // rmcp's own cleanup is a spawned task that may never run once
            // the runtime shuts down; kill the group now.
            kill_group(pgid);
        }
        match serving {
            Ok(Ok(client)) => Ok((Self { client, stderr }, started.elapsed())),
            Ok(Err(error)) => Err(SetupError::Startup {
                command: config.command_line(),
                detail: format!("initialize failed: {error}{}", tail()),
            }),
            Err(_) => Err(SetupError::Startup {
                command: config.command_line(),
                detail: format!(
                    "no initialize answer within {} s{}",
                    config.startup_timeout.as_secs_f64(),
                    tail()
                ),
            }),
        }
    }

    pub(crate) fn peer(&self) -> Peer<RoleClient> {
        self.client.peer().clone()
    }

    /// Every tool from tools/list, in MCP JSON form.
    pub(crate) async fn list_tools(&self, timeout: Duration) -> Result<Vec<Value>, ListError> {
        match tokio::time::timeout(timeout, self.client.list_all_tools()).await {
            Ok(Ok(tools)) => Ok(tools
                .iter()
                .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
                .collect()),
            Ok(Err(error)) => Err(ListError::Failed(error)),
            Err(_) => Err(ListError::NoAnswer {
                secs: timeout.as_secs_f64(),
            }),
        }
    }

    /// The last lines the server wrote to stderr, prefixed for a message.
    pub(crate) fn stderr_tail(&self) -> String {
        stderr_tail(&self.stderr)
    }

    /// Ends the session: closes stdin and lets rmcp reap (or kill) the server.
    pub(crate) async fn close(self) {
        let _ = tokio::time::timeout(SHUTDOWN_GRACE * 2, self.client.cancel()).await;
    }
}

/// One tools/call bounded by `timeout`.
pub(crate) async fn call(
    peer: &Peer<RoleClient>,
    tool: &str,
    arguments: &Map<String, Value>,
    timeout: Duration,
) -> Outcome {
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments.clone());
    match tokio::time::timeout(timeout, peer.call_tool(params)).await {
        Ok(Ok(result)) => Outcome::Result(serde_json::to_value(&result).unwrap_or(Value::Null)),
        Ok(Err(ServiceError::McpError(error))) => Outcome::ProtocolError {
            code: error.code.0,
            message: error.message.to_string(),
        },
        Ok(Err(error)) => Outcome::Transport(error.to_string()),
        Err(_) => Outcome::TimedOut {
            seconds: timeout.as_secs_f64(),
        },
    }
}

/// Through the one guarded kill (never group 0, 1 or this process's own).
fn kill_group(pgid: Option<u32>) {
    if let Some(pgid) = pgid {
        crate::kill_group(pgid);
    }
}

fn stderr_tail(file: &tempfile::NamedTempFile) -> String {
    let text = std::fs::read_to_string(file.path()).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return "; the server wrote nothing to stderr".to_string();
    }
    let tail = &lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..];
    format!("; server stderr: {}", tail.join(" | "))
}
