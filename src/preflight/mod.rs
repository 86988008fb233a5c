//! Preflight: everything that must hold before a client connects, checked
//! without calling a guard or the model.
//!
//! Two entry points share the checks. `<app> --check` (`check_app`) knows
//! the application: it reads the registry itself, starts a real isolated
//! worker through the executor, and probes its own binary (`current_exe()`,
//! no arguments, same cwd and environment) over MCP. `warden preflight --
//! <command> [args…]` ([`main`]) checks any Warden server command from the
//! outside: registration comes from `tools/list`, and the worker check
//! re-executes the command's program as a worker. Exit codes: 0 no failure
//! (warnings allowed), 1 a failure, 2 a usage error.

mod checks;
mod diagnostics;
#[cfg(feature = "http")]
mod http_probe;
mod mcp_probe;
mod report;
mod sandbox_probe;
mod script_probe;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

pub use checks::{MODEL_ENV, TRACE_EXPORTER_ENV};
pub use diagnostics::KEEP_PREFLIGHT_DIRS;
pub use mcp_probe::{MAX_PROBE_LINE, MAX_TOOL_PAGES, PROBE_PROTOCOL_VERSION};
pub use report::{Check, CheckStatus, Report, ServerSummary};

use warden_calls::executor::{Executor, WorkerLauncher};
use warden_core::registry::Registry;

/// Default bound on each preflight stage (worker ping, each MCP request,
/// server shutdown): 30 s.
pub const DEFAULT_STAGE_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest `--timeout` accepted: 300 s. Larger values are a usage error.
pub const MAX_STAGE_TIMEOUT: Duration = Duration::from_secs(300);

/// Programs that start a server rather than being one; `warden preflight`
/// cannot start an isolated worker through them, so the worker check is
/// skipped for them instead of failing.
const LAUNCHERS: &[&str] = &[
    "cargo", "sh", "bash", "zsh", "env", "npx", "node", "uv", "uvx", "python", "python3", "docker", "podman",
];

/// Options shared by `--check` and `preflight`.
#[derive(Debug, Clone)]
pub struct PreflightOptions {
    /// Print one JSON report instead of lines.
    pub json: bool,
    /// Bound on each stage.
    pub timeout: Duration,
    /// Missing model configuration fails instead of warning.
    pub require_agent: bool,
}

/// `preflight [--json] [--timeout S] [--require-agent] -- <command> [args…]`.
#[derive(Debug, Clone, clap::Args)]
pub struct PreflightArgs {
    /// Print one JSON report {ok, server, checks, diagnostics_dir} instead of lines.
    #[arg(long)]
    pub json: bool,
    /// Seconds each stage may take (worker start, each MCP request, shutdown): >0 and ≤300.
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout, default_value = "30")]
    pub timeout: Duration,
    /// Fail (instead of warn) when the model for run_coding_task is not configured.
    #[arg(long)]
    pub require_agent: bool,
    /// Check a running HTTP server instead of starting a command, e.g. http://127.0.0.1:8080/mcp.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    pub url: Option<String>,
    /// With --url: the name of the environment variable holding the bearer token (never the token itself).
    #[arg(long, value_name = "NAME", requires = "url")]
    pub token_env: Option<String>,
    /// The server command, exactly as an MCP client would start it.
    #[arg(last = true, required_unless_present = "url", value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

impl PreflightArgs {
    pub fn options(&self) -> PreflightOptions {
        PreflightOptions {
            json: self.json,
            timeout: self.timeout,
            require_agent: self.require_agent,
        }
    }
}

/// A `--timeout` that is not a number of seconds in (0, 300]; clap shows
/// it after the flag's name.
#[derive(Debug, thiserror::Error)]
#[error("expected seconds greater than 0 and at most {max}, got '{raw}'")]
pub struct BadTimeout {
    raw: String,
    max: f64,
}

/// Parses `--timeout`: seconds, fractional allowed, >0 and ≤300.
pub fn parse_timeout(raw: &str) -> Result<Duration, BadTimeout> {
    let max = MAX_STAGE_TIMEOUT.as_secs_f64();
    match raw.trim().parse::<f64>() {
        Ok(secs) if secs > 0.0 && secs <= max => Ok(Duration::from_secs_f64(secs)),
        _ => Err(BadTimeout {
            raw: raw.to_string(),
            max,
        }),
    }
}

/// `warden preflight -- <command>`: builds its own runtime, so call it
/// only from outside one.
pub fn main(args: PreflightArgs) -> ExitCode {
    let runtime = match crate::runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let code = runtime.block_on(check_command(args));
    warden_sandbox::process::kill_all_workers();
    code
}

/// The work of [`main`], on the caller's runtime.
pub(crate) async fn check_command(args: PreflightArgs) -> ExitCode {
    let options = args.options();
    if let Some(url) = &args.url {
        return check_url(url, args.token_env.as_deref(), &options).await;
    }
    let Some((program, rest)) = args.command.split_first() else {
        eprintln!("error: preflight needs a server command after `--`, e.g. `preflight -- ./my-server`");
        return ExitCode::from(2);
    };
    let (artifacts_dir, origin) = outside_artifacts_dir();
    let mut found = vec![checks::artifacts(&artifacts_dir, origin)];
    let diag = match diagnostics::create(&artifacts_dir) {
        Ok(dir) => dir,
        Err(error) => return no_diagnostics(error),
    };
    found.push(outside_worker(program, &diag, options.timeout).await);
    let probe = probe_machine_and_server(&mut found, program, rest, &options, &diag).await;
    let registration = match &probe.tools {
        Some(tools) => checks::registration_from_tools(tools),
        None => Check::skip("registration", "tools/list did not answer; see the mcp checks"),
    };
    found.insert(0, registration);
    let title = format!("preflight: {}", probe.server.command.join(" "));
    finish(Report::new(probe.server, found, diag), &options, &title)
}

/// `preflight --url`: the MCP checks against a running HTTP server.
async fn check_url(url: &str, token_env: Option<&str>, options: &PreflightOptions) -> ExitCode {
    #[cfg(feature = "http")]
    {
        let token = match token_env {
            None => None,
            Some(name) => match std::env::var(name) {
                Ok(token) if !token.trim().is_empty() => Some(token.trim().to_string()),
                _ => {
                    eprintln!(
                        "error: --token-env {name}: that environment variable is unset or empty; export the token in it"
                    );
                    return ExitCode::from(2);
                }
            },
        };
        // The server is elsewhere: its diagnostics go under
        // WARDEN_ARTIFACTS_DIR when the operator named one, else into a
        // private temporary directory, never a new ./artifacts wherever
        // this happens to run.
        let diag = match warden_core::config::var_os("WARDEN_ARTIFACTS_DIR") {
            Some(dir) => diagnostics::create(Path::new(&dir)),
            None => diagnostics::create_temporary(),
        };
        let diag = match diag {
            Ok(dir) => dir,
            Err(error) => return no_diagnostics(error),
        };
        let (url_owned, timeout) = (url.to_string(), options.timeout);
        let probe = tokio::task::spawn_blocking(move || http_probe::probe(&url_owned, token, timeout)).await;
        let Ok(mut probe) = probe else {
            eprintln!("error: the HTTP probe stopped unexpectedly");
            return ExitCode::from(1);
        };
        let registration = match &probe.tools {
            Some(tools) => checks::registration_from_tools(tools),
            None => Check::skip("registration", "tools/list did not answer; see the mcp checks"),
        };
        probe.checks.insert(0, registration);
        let title = format!("preflight: {url}");
        finish(Report::new(probe.server, probe.checks, diag), options, &title)
    }
    #[cfg(not(feature = "http"))]
    {
        let _ = (url, token_env, options);
        eprintln!("error: this binary was built without the `http` feature; `preflight --url` needs it");
        ExitCode::from(2)
    }
}

/// `<app> --check`: the app's own registry, executor and binary.
pub(crate) async fn check_app(
    built: Result<&Arc<Executor>, &dyn std::error::Error>,
    app_name: &str,
    artifacts_dir: &Path,
    options: &PreflightOptions,
) -> ExitCode {
    let origin = match warden_core::config::var_os("WARDEN_ARTIFACTS_DIR") {
        Some(_) => "from WARDEN_ARTIFACTS_DIR",
        None => "the app's artifacts directory; WARDEN_ARTIFACTS_DIR moves it",
    };
    let mut found = vec![checks::artifacts(artifacts_dir, origin)];
    found.extend(checks::task_store(artifacts_dir).await);
    #[cfg(feature = "http")]
    found.push(
        tokio::task::spawn_blocking(checks::http_settings)
            .await
            .unwrap_or_else(|error| {
                Check::fail(
                    "http_settings",
                    format!("the check ended abnormally: {error}"),
                    "rerun --check",
                )
            }),
    );
    let diag = match diagnostics::create(artifacts_dir) {
        Ok(dir) => dir,
        Err(error) => return no_diagnostics(error),
    };
    let expected: Option<Vec<String>> = match &built {
        Ok(executor) => {
            let registry = executor.registry();
            found.insert(0, checks::registration(registry));
            found.push(checks::resources(executor));
            found.push(checks::worker(executor, Some(registry.len()), options.timeout).await);
            found.push(script_probe::script_worker(executor, &diag, options.timeout).await);
            Some(registry.names().iter().map(|n| n.to_string()).collect())
        }
        Err(error) => {
            found.insert(
                0,
                Check::fail(
                    "registration",
                    format!("the application did not build: {error}"),
                    "fix the error named (a guard registration or a WARDEN_* setting); the in-app checks need a built app",
                ),
            );
            found.push(Check::skip("worker", "the application did not build"));
            found.push(Check::skip("script_worker", "the application did not build"));
            None
        }
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe.into_os_string(),
        Err(error) => {
            eprintln!("error: cannot locate this program's binary: {error}");
            return ExitCode::from(2);
        }
    };
    let probe = probe_machine_and_server(&mut found, &exe, &[], options, &diag).await;
    if let (Some(expected), Some(tools)) = (expected, &probe.tools) {
        let listed: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        let missing: Vec<&str> = expected
            .iter()
            .map(String::as_str)
            .filter(|n| !listed.contains(n))
            .collect();
        if !missing.is_empty() {
            found.push(Check::fail(
                "mcp.registry",
                format!("tools/list lacks registered guards: {}", missing.join(", ")),
                "every registered guard must be listed; check that the served binary is this one",
            ));
        }
    }
    let title = format!("{app_name} --check");
    finish(Report::new(probe.server, found, diag), options, &title)
}

/// Machine-level checks, then the MCP probe; returns what the probe saw.
async fn probe_machine_and_server(
    found: &mut Vec<Check>,
    program: &OsString,
    args: &[OsString],
    options: &PreflightOptions,
    diag: &Path,
) -> mcp_probe::ProbeOutcome {
    let timeout = options.timeout;
    let sandbox = tokio::task::spawn_blocking(|| {
        let mut checks = vec![
            sandbox_probe::network_namespace(),
            sandbox_probe::landlock(),
            sandbox_probe::seccomp(),
        ];
        checks.extend(sandbox_probe::rlimits());
        checks
    });
    match tokio::time::timeout(timeout, sandbox).await {
        Ok(Ok(checks)) => found.extend(checks),
        _ => found.push(Check::warn(
            "sandbox",
            format!("sandbox probes did not finish within {} s", timeout.as_secs_f64()),
            "rerun with a larger --timeout",
        )),
    }
    found.push(checks::agent(options.require_agent));
    found.push(checks::telemetry());
    let probe = mcp_probe::probe(program, args, timeout, diag).await;
    found.extend(probe.checks.iter().cloned());
    probe
}

/// Starts an isolated worker from the command's program, as its server
/// would; skipped for launchers (cargo, shells, interpreters).
async fn outside_worker(program: &OsString, diag: &Path, timeout: Duration) -> Check {
    let base = Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let interpreter = base.starts_with("python");
    if LAUNCHERS.contains(&base.as_str()) || interpreter {
        return Check::skip(
            "worker",
            format!(
                "the command starts through '{base}', so its workers cannot be started from here; run the app binary's own --check"
            ),
        );
    }
    let Some(exe) = resolve_program(program) else {
        return Check::fail(
            "worker",
            format!("'{}' was not found on PATH", program.to_string_lossy()),
            "give the server command as a path or put it on PATH",
        );
    };
    // Every override is checked (a bad one fails the start too); the
    // executor takes its own part.
    let limits = match crate::limits::Limits::default().from_env() {
        Ok(limits) => limits.calls,
        Err(error) => return Check::fail("worker", error.to_string(), "fix the WARDEN_* variable named"),
    };
    let launcher = WorkerLauncher::new(
        exe,
        diag.to_path_buf(),
        limits.max_worker_response,
        limits.max_argument_bytes + crate::limits::WORKER_REQUEST_ENVELOPE_BYTES,
    );
    let executor = Executor::new(
        Arc::new(Registry::default()),
        Arc::new(warden_core::guard::Resources::default()),
        limits,
        warden_calls::events::Events::disabled(),
        launcher,
    );
    checks::worker(&executor, None, timeout).await
}

/// The program's path: as given when it contains a slash, else from PATH.
fn resolve_program(program: &OsString) -> Option<PathBuf> {
    let path = Path::new(program);
    if path.components().count() > 1 {
        return Some(path.to_path_buf());
    }
    std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(path))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .find(|candidate| candidate.is_file())
}

/// The artifacts root a server started from here would use, and where that
/// came from (an app's own builder setting is invisible from outside).
fn outside_artifacts_dir() -> (PathBuf, &'static str) {
    match warden_core::config::var_os("WARDEN_ARTIFACTS_DIR") {
        Some(dir) => (PathBuf::from(dir), "from WARDEN_ARTIFACTS_DIR"),
        None => (
            PathBuf::from("artifacts"),
            "the default ./artifacts; an app-configured directory is not visible from outside",
        ),
    }
}

fn no_diagnostics(error: std::io::Error) -> ExitCode {
    eprintln!(
        "error: cannot create a private diagnostics directory: {error}; set TMPDIR to a writable directory"
    );
    ExitCode::from(1)
}

/// Saves the report beside the diagnostics, prints it, and picks the exit code.
fn finish(report: Report, options: &PreflightOptions, title: &str) -> ExitCode {
    let json = serde_json::to_string_pretty(&report).unwrap_or_default();
    let _ = std::fs::write(report.diagnostics_dir.join("report.json"), format!("{json}\n"));
    if options.json {
        println!("{json}");
    } else {
        print!("{}", report.render_text(title));
    }
    report.exit_code()
}
