//! The MCP check: start the server exactly as a client would, speak raw
//! JSON-RPC (initialize, ping, tools/list), close stdin, and inspect every
//! byte the server wrote to stdout.
//!
//! Hand-rolled on purpose: a client library would hide stray stdout bytes,
//! which is the fault this check exists to find. Every line read is kept in
//! a transcript (`mcp-transcript.log` in the diagnostics directory) and the
//! server's stderr goes to `server-stderr.log` beside it. Called by
//! [`super`] for both entry points; it never calls a tool.

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::report::{Check, ServerSummary};

/// Protocol version preflight asks for; servers may answer another they support.
pub const PROBE_PROTOCOL_VERSION: &str = "2025-06-18";

/// Longest stdout line read from the server: 16 MiB. A longer line fails the
/// check (a tools/list that large would choke most clients anyway).
pub const MAX_PROBE_LINE: u64 = 16 * 1024 * 1024;

/// `tools/list` pages followed before giving up: 100.
pub const MAX_TOOL_PAGES: usize = 100;

/// Bytes of a stray stdout line quoted in the failure message: 80.
const STRAY_PREVIEW: usize = 80;

/// What the probe found.
pub(crate) struct ProbeOutcome {
    pub checks: Vec<Check>,
    pub server: ServerSummary,
    /// `tools/list` entries, when the server answered it.
    pub tools: Option<Vec<Value>>,
}

/// Runs the MCP check against `program args…` in this process's cwd and
/// environment, each request bounded by `timeout`.
pub(crate) async fn probe(
    program: &OsString,
    args: &[OsString],
    timeout: Duration,
    diag: &Path,
) -> ProbeOutcome {
    let mut command: Vec<String> = vec![program.to_string_lossy().into_owned()];
    command.extend(args.iter().map(|a| a.to_string_lossy().into_owned()));
    let mut outcome = ProbeOutcome {
        checks: Vec::new(),
        server: ServerSummary {
            command,
            ..ServerSummary::default()
        },
        tools: None,
    };
    let stderr_path = diag.join("server-stderr.log");
    let mut session = match Session::spawn(program, args, &stderr_path, diag, timeout) {
        Ok(session) => session,
        Err(error) => {
            outcome.checks.push(Check::fail(
                "mcp.initialize",
                format!("cannot start {}: {error}", outcome.server.command.join(" ")),
                "check the command path and that it is executable",
            ));
            return outcome;
        }
    };
    session.run(&mut outcome).await;
    let initialized = outcome.server.protocol_version.is_some();
    let shutdown = session.shutdown().await;
    session.save_transcript();
    outcome.checks.push(if initialized {
        shutdown
    } else {
        Check::skip("mcp.shutdown", "the server never initialized")
    });
    outcome.checks.push(session.stdout_check());
    outcome
}

/// A request that got no usable answer: what happened and what to do.
struct Unanswered {
    message: String,
    fix: String,
}

impl Unanswered {
    fn check(self, name: &str) -> Check {
        Check::fail(name, self.message, self.fix)
    }
}

/// Why a response did not arrive.
enum Missing {
    Timeout,
    Closed,
    TooLong,
}

struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<tokio::io::Take<ChildStdout>>,
    timeout: Duration,
    stderr_path: std::path::PathBuf,
    transcript_path: std::path::PathBuf,
    transcript: Vec<u8>,
    /// The first non-protocol line, verbatim.
    first_stray: Option<Vec<u8>>,
    strays: usize,
    lines: usize,
}

impl Session {
    fn spawn(
        program: &OsString,
        args: &[OsString],
        stderr_path: &Path,
        diag: &Path,
        timeout: Duration,
    ) -> std::io::Result<Self> {
        let stderr = warden_calls::artifacts::safe_path::create_private(stderr_path)?;
        let mut child = Command::new(program)
            .args(args)
            // This probe speaks stdio: an empty value (which wins over a
            // `.env` line) keeps a server configured for HTTP on stdio.
            .env("WARDEN_HTTP_ADDR", "")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("the server's stdout was not captured"))?;
        Ok(Self {
            child,
            stdin,
            stdout: BufReader::new(stdout.take(u64::MAX)),
            timeout,
            stderr_path: stderr_path.to_path_buf(),
            transcript_path: diag.join("mcp-transcript.log"),
            transcript: Vec::new(),
            first_stray: None,
            strays: 0,
            lines: 0,
        })
    }

    async fn run(&mut self, outcome: &mut ProbeOutcome) {
        let started = Instant::now();
        let init = json!({
            "protocolVersion": PROBE_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "warden-preflight", "version": env!("CARGO_PKG_VERSION")},
        });
        let result = match self.request(1, "initialize", Some(init)).await {
            Ok(result) => result,
            Err(unanswered) => {
                outcome.checks.push(unanswered.check("mcp.initialize"));
                return;
            }
        };
        outcome.server.read_initialize(&result);
        if result["capabilities"].get("tools").is_none() {
            outcome.checks.push(Check::fail(
                "mcp.initialize",
                "initialize answered, but the server does not advertise the tools capability",
                "enable tools in the server capabilities (ServerCapabilities::builder().enable_tools())",
            ));
            return;
        }
        outcome.checks.push(Check::pass(
            "mcp.initialize",
            format!(
                "{} {} answered initialize in {} ms (protocol {})",
                outcome.server.name.as_deref().unwrap_or("(unnamed)"),
                outcome.server.version.as_deref().unwrap_or("?"),
                started.elapsed().as_millis(),
                outcome.server.protocol_version.as_deref().unwrap_or("?"),
            ),
        ));
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        match self.request(2, "ping", None).await {
            Ok(_) => outcome.checks.push(Check::pass("mcp.ping", "ping answered")),
            Err(unanswered) => {
                outcome.checks.push(unanswered.check("mcp.ping"));
                return;
            }
        }
        outcome.tools = self.list_tools(&mut outcome.checks).await;
    }

    async fn list_tools(&mut self, checks: &mut Vec<Check>) -> Option<Vec<Value>> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for page in 0..MAX_TOOL_PAGES {
            let params = cursor.as_ref().map(|c| json!({"cursor": c}));
            let result = match self.request(3 + page as u64, "tools/list", params).await {
                Ok(result) => result,
                Err(unanswered) => {
                    checks.push(unanswered.check("mcp.tools_list"));
                    return None;
                }
            };
            let Some(list) = result["tools"].as_array() else {
                checks.push(Check::fail(
                    "mcp.tools_list",
                    "tools/list answered without a tools array",
                    "return ListToolsResult with every tool",
                ));
                return None;
            };
            tools.extend(list.iter().cloned());
            match result["nextCursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => {
                    checks.push(Check::pass(
                        "mcp.tools_list",
                        format!("tools/list returned {} tools", tools.len()),
                    ));
                    return Some(tools);
                }
            }
        }
        checks.push(Check::fail(
            "mcp.tools_list",
            format!("tools/list still had a nextCursor after {MAX_TOOL_PAGES} pages"),
            "end pagination: the last page must omit nextCursor",
        ));
        None
    }

    /// Sends a request and waits for the response with the same id,
    /// returning its `result`, or a check builder describing what went wrong.
    async fn request(&mut self, id: u64, method: &str, params: Option<Value>) -> Result<Value, Unanswered> {
        let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        self.send(&message).await;
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            let read = tokio::time::timeout_at(deadline, self.read_message()).await;
            let missing = match read {
                Ok(Ok(reply)) if reply["id"] == json!(id) && reply.get("method").is_none() => {
                    if let Some(error) = reply.get("error") {
                        return Err(Unanswered {
                            message: format!("{method} failed: {error}"),
                            fix: format!("read the server's stderr in {}", self.stderr_path.display()),
                        });
                    }
                    return Ok(reply.get("result").cloned().unwrap_or(Value::Null));
                }
                Ok(Ok(other)) => {
                    self.answer_server_request(&other).await;
                    continue;
                }
                Ok(Err(missing)) => missing,
                Err(_) => Missing::Timeout,
            };
            return Err(self.missing_check(method, missing).await);
        }
    }

    async fn missing_check(&mut self, method: &str, missing: Missing) -> Unanswered {
        let secs = self.timeout.as_secs_f64();
        let stderr = stderr_tail(&self.stderr_path);
        let text = match missing {
            Missing::Timeout => format!("no answer to {method} within {secs} s{stderr}"),
            Missing::TooLong => {
                format!("a stdout line exceeded {MAX_PROBE_LINE} bytes while waiting for {method}")
            }
            Missing::Closed => {
                let status = tokio::time::timeout(Duration::from_secs(1), self.child.wait()).await;
                let how = match status {
                    Ok(Ok(status)) => format!(" ({status})"),
                    _ => String::new(),
                };
                format!("the server closed stdout before answering {method}{how}{stderr}")
            }
        };
        Unanswered {
            message: text,
            fix: format!(
                "run the command by hand and read its stderr (saved in {})",
                self.stderr_path.display()
            ),
        }
    }

    /// Answers a request the server sent us (ping, roots/list, …) so it is
    /// not left waiting; notifications need no answer.
    async fn answer_server_request(&mut self, message: &Value) {
        let (Some(id), Some(method)) = (message.get("id"), message["method"].as_str()) else {
            return;
        };
        let reply = if method == "ping" {
            json!({"jsonrpc": "2.0", "id": id, "result": {}})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("preflight does not handle {method}")}})
        };
        self.send(&reply).await;
    }

    async fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.transcript.extend_from_slice(b"> ");
        self.transcript.extend_from_slice(line.as_bytes());
        if let Some(stdin) = self.stdin.as_mut() {
            // A server that died closes the pipe; the next read reports it.
            let _ = stdin.write_all(line.as_bytes()).await;
            let _ = stdin.flush().await;
        }
    }

    /// The next JSON-RPC message on stdout; non-protocol lines are recorded
    /// as strays and skipped.
    async fn read_message(&mut self) -> Result<Value, Missing> {
        loop {
            let line = self.read_line().await?;
            if let Some(message) = parse_message(&line) {
                return Ok(message);
            }
            self.record_stray(line);
        }
    }

    async fn read_line(&mut self) -> Result<Vec<u8>, Missing> {
        let mut line = Vec::new();
        self.stdout.get_mut().set_limit(MAX_PROBE_LINE + 1);
        match self.stdout.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => Err(Missing::Closed),
            Ok(_) if line.len() as u64 > MAX_PROBE_LINE => Err(Missing::TooLong),
            Ok(_) => {
                self.lines += 1;
                self.transcript.extend_from_slice(b"< ");
                self.transcript.extend_from_slice(&line);
                if !line.ends_with(b"\n") {
                    self.transcript.push(b'\n');
                }
                Ok(line)
            }
        }
    }

    fn record_stray(&mut self, line: Vec<u8>) {
        self.strays += 1;
        if self.first_stray.is_none() {
            self.first_stray = Some(line);
        }
    }

    /// Closes stdin and expects the server to exit on its own, reading (and
    /// checking) whatever it still writes to stdout meanwhile.
    async fn shutdown(&mut self) -> Check {
        let name = "mcp.shutdown";
        drop(self.stdin.take());
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.read_line()).await {
                Ok(Ok(line)) => {
                    if parse_message(&line).is_none() {
                        self.record_stray(line);
                    }
                }
                Ok(Err(Missing::TooLong)) => continue,
                Ok(Err(_)) => break,
                Err(_) => break,
            }
        }
        let secs = self.timeout.as_secs_f64();
        match tokio::time::timeout_at(deadline, self.child.wait()).await {
            Ok(Ok(status)) if status.success() => {
                Check::pass(name, "server exited cleanly when stdin closed")
            }
            Ok(Ok(status)) => Check::warn(
                name,
                format!("server exited with {status} when stdin closed"),
                "treat stdin EOF as a normal shutdown and exit 0",
            ),
            Ok(Err(error)) => Check::warn(
                name,
                format!("cannot wait for the server: {error}"),
                "rerun preflight",
            ),
            Err(_) => {
                let _ = self.child.start_kill();
                let _ = self.child.wait().await;
                Check::warn(
                    name,
                    format!("server still running {secs} s after stdin closed; killed"),
                    "exit when stdin reaches EOF (the MCP stdio shutdown rule)",
                )
            }
        }
    }

    fn stdout_check(&self) -> Check {
        let name = "mcp.stdout";
        match &self.first_stray {
            None => Check::pass(
                name,
                format!("stdout carried only JSON-RPC messages ({} lines)", self.lines),
            ),
            Some(first) => Check::fail(
                name,
                format!(
                    "stdout carried {} non-protocol line(s); the first: {}",
                    self.strays,
                    preview(first)
                ),
                format!(
                    "send logs to stderr, never stdout (a println! in main or a guard corrupts the protocol); transcript: {}",
                    self.transcript_path.display()
                ),
            ),
        }
    }

    fn save_transcript(&self) {
        let _ = std::fs::write(&self.transcript_path, &self.transcript);
    }
}

/// A JSON-RPC 2.0 message object, or None for anything else.
fn parse_message(line: &[u8]) -> Option<Value> {
    let value: Value = serde_json::from_slice(line).ok()?;
    let is_message =
        value["jsonrpc"] == "2.0" && (value.get("method").is_some() || value.get("id").is_some());
    is_message.then_some(value)
}

/// The first bytes of a stray line, quoted with escapes.
fn preview(line: &[u8]) -> String {
    let shown = &line[..line.len().min(STRAY_PREVIEW)];
    let text = String::from_utf8_lossy(shown);
    let more = if line.len() > STRAY_PREVIEW {
        format!(" … ({} bytes)", line.len())
    } else {
        String::new()
    };
    format!("{text:?}{more}")
}

/// "; stderr: …" with the last lines the server wrote, or nothing.
fn stderr_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(3).collect();
    if tail.is_empty() {
        return String::new();
    }
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    format!("; stderr: {}", tail.join(" | "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_json_rpc_objects_count_as_protocol() {
        // Plain text, bare JSON and objects without jsonrpc 2.0 are all strays.
        assert!(parse_message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).is_some());
        assert!(parse_message(br#"{"jsonrpc":"2.0","method":"notifications/x"}"#).is_some());
        for stray in [&b"hello\n"[..], b"42\n", br#"{"id":1}"#, b"\n"] {
            assert!(parse_message(stray).is_none(), "{stray:?}");
        }
        assert_eq!(preview(b"hello from main\n"), "\"hello from main\\n\"");
    }
}
