//! Shared helpers: spawn a server binary with a private artifacts directory,
//! talk to it with the rmcp client, and look at /proc and events.jsonl.

#![allow(dead_code)]

pub mod approver;
pub mod http;
pub mod oauth;
pub mod tasks;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

/// The example server (`warden_finance::app()`), built by this package.
pub const FINANCE: &str = env!("CARGO_BIN_EXE_warden-it-finance");
/// The example app plus hostile guards (bin/testbed.rs).
pub const TESTBED: &str = env!("CARGO_BIN_EXE_warden-testbed");

/// A script that runs until its deadline or cancellation, whatever the
/// machine's speed. `loop {}` does not: it spends Rhai's operation limit
/// (`SCRIPT_MAX_OPERATIONS`, 500 million) in under two seconds on a fast
/// core and ends `failed` with a `limit` error. Each turn here is one
/// native call of about 0.1 ms and a few operations, so the limit is hours
/// away.
pub const ENDLESS: &str = r#"loop { "".pad(10000, "x"); }"#;

/// A running server and the client connected to it.
pub struct Server {
    pub client: RunningService<RoleClient, ()>,
    pub pid: u32,
    pub artifacts: tempfile::TempDir,
}

impl Server {
    /// Spawns `binary` with no arguments, as an MCP client would.
    pub async fn start(binary: &str) -> Server {
        Self::start_with_env(binary, &[]).await
    }

    pub async fn start_with_env(binary: &str, env: &[(&str, &str)]) -> Server {
        Self::start_command(tokio::process::Command::new(binary), env).await
    }

    /// Starts `command` (which must become the server) with a private
    /// artifacts directory and `env`, and connects to it.
    pub async fn start_command(mut command: tokio::process::Command, env: &[(&str, &str)]) -> Server {
        let artifacts = tempfile::tempdir().expect("temp dir");
        command.env("WARDEN_ARTIFACTS_DIR", artifacts.path());
        for (key, value) in env {
            command.env(key, value);
        }
        let (transport, _) = TokioChildProcess::builder(command)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server");
        let pid = transport.id().expect("server pid");
        let client = tokio::time::timeout(Duration::from_secs(10), ().serve(transport))
            .await
            .expect("initialize in time")
            .expect("initialize");
        Server {
            client,
            pid,
            artifacts,
        }
    }

    /// Calls a tool and returns its result (panics on protocol errors).
    pub async fn call(&self, tool: &str, arguments: Value) -> CallToolResult {
        self.try_call(tool, arguments).await.expect("tools/call answered")
    }

    pub async fn try_call(&self, tool: &str, arguments: Value) -> Result<CallToolResult, rmcp::ServiceError> {
        let Value::Object(arguments) = arguments else {
            panic!("arguments must be an object")
        };
        self.client
            .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments))
            .await
    }

    /// events.jsonl records, waiting until `ready` holds for them.
    pub async fn events_until(&self, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        events_until(&self.artifacts.path().join("events.jsonl"), ready).await
    }

    /// Pids of live worker processes whose parent is this server.
    pub fn workers(&self) -> Vec<u32> {
        children_of(self.pid)
    }
}

/// Structured content of a result (always an object here). A guard's error
/// result carries its JSON as text only (no structuredContent, which would
/// contradict the guard's output schema): then the text, parsed.
pub fn structured(result: &CallToolResult) -> Value {
    if let Some(content) = &result.structured_content {
        return content.clone();
    }
    result
        .content
        .iter()
        .find_map(|block| block.as_text())
        .and_then(|text| serde_json::from_str(&text.text).ok())
        .unwrap_or(Value::Null)
}

pub fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

/// The error code of an error result.
pub fn error_code(result: &CallToolResult) -> String {
    structured(result)["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The records of the event log at `path`, waiting up to 5 s until `ready`
/// holds for them: the server hands records to the log's writer in batches
/// (`events::FLUSH_INTERVAL`), so one may land a few milliseconds after
/// the answer it describes.
pub async fn events_until(path: &Path, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let records = read_jsonl(path);
        if ready(&records) || start.elapsed() > Duration::from_secs(5) {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// Live (non-zombie) worker processes of server `pid`: the guard and
/// script workers its zygotes forked, and any worker it started itself,
/// never the zygotes themselves (they are the server's machinery, not a
/// call's) nor a child still between fork and exec (it shows the server's
/// own command line).
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for child in live_children(pid) {
        if is_zygote(child) {
            found.extend(workers_of(child));
        } else if has_arg(child, b"__warden-worker") {
            found.push(child);
        }
    }
    found
}

/// The live script workers of server `pid` (forked by its script zygote)
/// serving a task, not the spare waiting for the next one.
pub fn script_workers(pid: u32) -> Vec<u32> {
    live_children(pid)
        .into_iter()
        .filter(|child| is_script_zygote(*child))
        .flat_map(workers_of)
        .collect()
}

/// The live workers zygote `pid` forked that serve a call or a task: its
/// children but the spare (`warden_sandbox::zygote::Spare`).
pub fn workers_of(zygote: u32) -> Vec<u32> {
    live_children(zygote)
        .into_iter()
        .filter(|child| !is_spare(*child))
        .collect()
}

/// Whether `pid` is a spare worker waiting for its task (named so until
/// the task arrives).
pub fn is_spare(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|comm| comm.trim_end() == warden_sandbox::zygote::child::SPARE_NAME)
}

/// The spare worker of server `pid`'s script zygote, once it is forked.
pub fn script_spare(pid: u32) -> Option<u32> {
    live_children(pid)
        .into_iter()
        .filter(|child| is_script_zygote(*child))
        .flat_map(live_children)
        .find(|child| is_spare(*child))
}

/// Whether `pid`'s command line has `arg`.
fn has_arg(pid: u32, arg: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| cmdline.split(|b| *b == 0).any(|a| a == arg))
}

/// A process as a test saw it: its pid and its start time (clock ticks
/// since boot, field 22 of `/proc/<pid>/stat`). A pid is given to a new
/// process once its own is gone (`pid_max` is 32,768 on this machine and
/// a run starts thousands of workers), so a test that kills a process it
/// saw a while ago must first check it is still that one: a bare
/// `kill(pid)` once killed another test's server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub pid: u32,
    started: u64,
}

impl Seen {
    /// `pid` as it is now; `None` when no process has it.
    pub fn now(pid: u32) -> Option<Seen> {
        started_at(pid).map(|started| Seen { pid, started })
    }

    /// SIGKILLs the process if it is still the one seen (never a process
    /// that took its pid since).
    pub fn kill(&self) {
        if started_at(self.pid) == Some(self.started) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// The start time of process `pid` (field 22 of its stat line, counted
/// after the command name, which may hold spaces and parentheses).
fn started_at(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether `pid` is a worker zygote, for guards or scripts (by its
/// command line; the workers it forks share it).
pub fn is_zygote(pid: u32) -> bool {
    has_arg(pid, b"__warden-zygote")
}

/// Whether `pid` is the script workers' zygote (or a worker it forked).
pub fn is_script_zygote(pid: u32) -> bool {
    is_zygote(pid) && has_arg(pid, b"script")
}

/// Live (non-zombie) processes whose parent is `pid`.
pub fn live_children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the command name: state, ppid, ...
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r.trim().to_string()) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("");
        let ppid = fields.next().and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) && state != "Z" {
            found.push(child);
        }
    }
    found
}

/// Whether any live process runs `sleep <marker>`.
pub fn marker_alive(marker: u64) -> bool {
    let wanted = format!("sleep\0{marker}\0");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        cmdline == wanted.as_bytes() && !state.contains(") Z ")
    })
}

/// Polls `check` for up to `limit`.
pub async fn eventually(limit: Duration, check: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}

/// A number unlikely to collide with another test's marker.
pub fn unique_marker() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(7);
    100_000 + (nanos % 800_000) + std::process::id() as u64 % 1000
}

pub fn call_args() -> Value {
    json!({"option_type": "call", "spot": 100, "strike": 100, "time_to_expiry": 1, "volatility": 0.2, "rate": 0.05})
}

pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// What a CLI run of an app binary printed and how it exited.
#[derive(Debug)]
pub struct CliRun {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `binary args…` in `cwd` to completion, with the model and trace
/// settings removed from the environment and `env` added.
pub fn run_cli(binary: &str, args: &[&str], env: &[(&str, &str)], cwd: &Path) -> CliRun {
    let mut command = std::process::Command::new(binary);
    command.args(args).current_dir(cwd).stdin(Stdio::null());
    for var in [
        "WARDEN_MODEL_API_KEY",
        "WARDEN_MODEL_API_BASE",
        "WARDEN_MODEL_ID",
        "WARDEN_TRACE_EXPORTER",
        "WARDEN_TESTBED_STRAY_STDOUT",
    ] {
        command.env_remove(var);
    }
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("run the binary");
    CliRun {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `<binary> usage ARGS` with `env`: its JSON report (a failed run fails
/// the test with its stderr).
pub fn usage_report(binary: &str, args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Value {
    let mut command = std::process::Command::new(binary);
    command.arg("usage").args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("usage report");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON report")
}
