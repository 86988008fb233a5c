//! The `test` command: reads the config and suites, starts the server, runs
//! every check and case, and writes the report.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::prompt::PromptSource;
use crate::report::{Report, Schemas, Startup, Tools, Verdict};
use crate::suite::Suite;
use crate::{ServerConfig, client, contracts, runner};

/// `test --config … --suite … [--output …] [--prompt-adapter …]`.
#[derive(Debug, Clone, clap::Args)]
pub struct TestArgs {
    /// Server config: {"server": {"command", "args", "cwd" (relative to this file), "env",
    /// "startup_timeout_seconds", "call_timeout_seconds"}}.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// A suite file; repeat to run several suites against one server.
    #[arg(long = "suite", value_name = "FILE", required = true)]
    pub suites: Vec<PathBuf>,
    /// Where to write the JSON report.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Command answering prompt cases (run with `sh -c`): the case JSON on stdin,
    /// {"response", "tool_calls"} on stdout. Without it, cases use their replay data.
    #[arg(long, value_name = "COMMAND")]
    pub prompt_adapter: Option<String>,
}

/// A problem that stops the run before any case could be judged (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot read {what} {path}: {source}")]
    Unreadable {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} {path} is invalid: {detail}")]
    Invalid {
        what: &'static str,
        path: PathBuf,
        detail: String,
    },
    #[error(
        "cannot start the server `{command}`: {detail}; check server.command and server.cwd in the config"
    )]
    Spawn { command: String, detail: String },
    #[error("the server `{command}` did not start: {detail}")]
    Startup { command: String, detail: String },
}

/// Builds a runtime and runs; call only from outside a runtime.
pub fn main(args: TestArgs) -> ExitCode {
    match runtime() {
        Ok(runtime) => runtime.block_on(run(&args)),
        Err(code) => code,
    }
}

/// Runs the suites and returns the exit code.
pub async fn run(args: &TestArgs) -> ExitCode {
    let loaded = ServerConfig::load(&args.config).and_then(|config| {
        let suites = args
            .suites
            .iter()
            .map(|p| Suite::load(p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((config, suites))
    });
    let (config, suites) = match loaded {
        Ok(parts) => parts,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let mut report = Report {
        ok: false,
        startup: Startup {
            status: Verdict::Failed,
            duration_ms: 0.0,
            command: config.command_line(),
            error: None,
        },
        tools: Tools::default(),
        schemas: Schemas {
            status: Verdict::Skipped,
            error: Some("the server did not start".into()),
            failures: Vec::new(),
        },
        cases: Vec::new(),
        suites: suites.iter().map(|s| s.path.display().to_string()).collect(),
    };
    let started = std::time::Instant::now();
    let setup_failed = match client::Connection::start(&config).await {
        Ok((connection, took)) => {
            report.startup.status = Verdict::Passed;
            report.startup.duration_ms = took.as_secs_f64() * 1000.0;
            exercise(&connection, &config, &suites, args, &mut report).await;
            connection.close().await;
            false
        }
        Err(error) => {
            report.startup.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
            report.startup.error = Some(error.to_string());
            true
        }
    };
    report.settle();
    print!("{}", report.render_text());
    if let Some(output) = &args.output
        && let Err(error) = write_report(output, &report)
    {
        eprintln!("error: cannot write the report to {}: {error}", output.display());
        return ExitCode::from(2);
    }
    match (setup_failed, report.ok) {
        (true, _) => ExitCode::from(2),
        (false, true) => ExitCode::SUCCESS,
        (false, false) => ExitCode::from(1),
    }
}

/// Tool list, schemas and contracts, then every case.
async fn exercise(
    connection: &client::Connection,
    config: &ServerConfig,
    suites: &[Suite],
    args: &TestArgs,
    report: &mut Report,
) {
    let listed = match connection.list_tools(config.call_timeout).await {
        Ok(listed) => listed,
        Err(error) => {
            report.tools.error = Some(format!("{error}{}", connection.stderr_tail()));
            report.schemas.error = Some("tools/list failed".into());
            return;
        }
    };
    report.tools = contracts::tools(suites, &listed);
    report.schemas = contracts::schemas(suites, &listed);
    let context = runner::RunContext {
        peer: connection.peer(),
        config,
        prompts: match &args.prompt_adapter {
            Some(command) => PromptSource::Adapter(command.clone()),
            None => PromptSource::Replay,
        },
        listed: report.tools.actual.clone(),
    };
    for suite in suites {
        for case in &suite.cases {
            report.cases.push(runner::run_case(&context, case).await);
        }
    }
}

fn write_report(path: &Path, report: &Report) -> std::io::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let json = serde_json::to_string_pretty(report).map_err(std::io::Error::other)?;
    std::fs::write(path, format!("{json}\n"))
}

/// The runtime the runner builds for itself (two workers: it is a small
/// client). On failure the error is printed and the caller exits with 2.
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| {
            eprintln!("error: cannot start the async runtime: {error}");
            ExitCode::from(2)
        })
}

/// Kills a child's whole process group (the server or a prompt adapter,
/// both started as group leaders). Harmless if it is already gone; never
/// signals group 0 or 1, or this process's own group.
pub(crate) fn kill_group(pgid: u32) {
    let Some(pid) = i32::try_from(pgid).ok().filter(|&pid| pid > 1) else {
        return;
    };
    if pid != nix::unistd::getpgrp().as_raw() {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
}
