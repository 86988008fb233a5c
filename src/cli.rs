//! The command line every Warden app gets from `run()`.
//!
//! Raw flags become a validated command once, here; the work itself lives in
//! the library modules: `--check` runs [`crate::preflight`] on this app,
//! `preflight -- <command>` and `test --config … --suite …` are the
//! client-side tools of [`crate::preflight`] and [`warden_testing`] (they
//! build their own runtime and never build this app's). Exit codes: 0
//! success, 1 a failed call or check, 2 a usage or configuration error.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use serde_json::Value;

use crate::app::{App, build_runtime};
use warden_calls::events::Origin;
use warden_calls::executor::CallRequest;
use warden_mcp::export::ToolFormat;

#[derive(Debug, Parser)]
#[command(
    about = "A Warden MCP server. With no arguments it serves MCP over stdio (for a client such as Claude, not for typing into)."
)]
struct Cli {
    /// Print the registered tools (name, mode, timeout, summary) and exit.
    #[arg(long)]
    list_tools: bool,
    /// Run the preflight checks on this app (registration, artifacts, worker, sandbox, model and
    /// telemetry configuration, a real MCP session with this binary) and exit: 0 ok, 1 a failure.
    #[arg(long, conflicts_with = "list_tools")]
    check: bool,
    /// With --check: print one JSON report instead of lines.
    #[arg(long, requires = "check")]
    json: bool,
    /// With --check: seconds each stage may take, >0 and ≤300 [default: 30].
    #[arg(long, requires = "check", value_name = "SECONDS", value_parser = crate::preflight::parse_timeout)]
    timeout: Option<std::time::Duration>,
    /// With --check: fail (instead of warn) when the model for run_coding_task is not configured.
    #[arg(long, requires = "check")]
    require_agent: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP: over stdio (the default), or over Streamable HTTP at `/mcp` with --http.
    Serve {
        /// Serve MCP over Streamable HTTP on this address, e.g. 127.0.0.1:8080 (also WARDEN_HTTP_ADDR).
        /// Without authentication (WARDEN_API_TOKENS_FILE or WARDEN_OAUTH_*) only a loopback address is allowed.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
    },
    /// Print every tool definition as JSON for another client's API.
    Tools {
        /// Output shape.
        #[arg(long, value_enum, default_value = "mcp")]
        format: ToolFormat,
    },
    /// Run one guard through the executor and print its result as JSON.
    Call {
        /// The tool name, e.g. price_option_t.
        #[arg(required_unless_present = "batch")]
        tool: Option<String>,
        /// The arguments as a JSON object, e.g. '{"spot": 100}'.
        #[arg(default_value = "{}")]
        arguments: String,
        /// Run a batch instead: a JSON file holding run_batch's arguments ({"calls": [{"name", "arguments"}, …]}
        /// or a bare list of calls), with the same semantics; prints the batch result.
        #[arg(long, value_name = "FILE", conflicts_with = "tool")]
        batch: Option<std::path::PathBuf>,
    },
    /// Run a Rhai script file as a task (as the run_script tool does: same sandbox, task
    /// directory and result) and print the task result as JSON; exit 1 unless it succeeded.
    Script {
        /// The script file; `-` reads standard input.
        file: std::path::PathBuf,
        /// Seconds before the script worker is killed (default 300, at most the server maximum).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<u64>,
    },
    /// Replay a finished script task from this server's task store (as the replay_task tool does: its
    /// scripts run again as a new task under the original's limits, never calling the model) and print
    /// the comparison as JSON; exit 0 when identical, 1 when different, when a script no longer matches
    /// the receipt (script_differs: nothing runs) or when refused.
    Replay {
        /// The task's id, e.g. task_… (see list_tasks).
        task_id: String,
    },
    /// Print model token usage by principal and UTC day from this server's task store (SQLite, or
    /// PostgreSQL with WARDEN_DATABASE_URL) as JSON: tasks, model calls, input, output and total tokens.
    Usage {
        /// Days to cover, today included (1–3,660).
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=3660))]
        days: u32,
        /// Only this principal (e.g. alice, or local for stdio and the CLI).
        #[arg(long)]
        principal: Option<String>,
    },
    /// Check any Warden server command from the outside: `preflight -- <command> [args…]`.
    Preflight(crate::preflight::PreflightArgs),
    /// GET an http:// URL, e.g. http://127.0.0.1:8080/readyz, as a container healthcheck: exit 0 on
    /// a 2xx answer, 1 on any other answer or none within 5 s (the answer is printed either way).
    Probe {
        /// The URL to GET (plain http://, as a node is reached on its own loopback).
        url: String,
    },
    /// Run MCP scenario suites against a server: `test --config server.json --suite suite.json`.
    #[cfg(feature = "testing")]
    Test(warden_testing::TestArgs),
}

/// What the command line asks for, decided before any runtime exists.
enum Plan {
    /// Nothing to run (help, a usage error): exit with this code.
    Exit(ExitCode),
    /// `preflight -- <command>`: a client-side tool; never builds this app.
    Preflight(crate::preflight::PreflightArgs),
    /// `test --config … --suite …`: a client-side tool; never builds this app.
    #[cfg(feature = "testing")]
    Test(warden_testing::TestArgs),
    /// A command on this app: `--check`, or serve / tools / call / script.
    App(Box<AppCommand>),
}

/// A command on this app, parsed.
struct AppCommand {
    app: App,
    command: Command,
    list_only: bool,
    check: Option<crate::preflight::PreflightOptions>,
}

/// The entry points of an app with its command line (`run` builds its own
/// runtime; `serve` runs on the caller's).
impl App {
    /// Runs the application: a stdio MCP server with no arguments, or the
    /// CLI command given. Exit codes: 0 success, 1 a failed check or call,
    /// 2 a usage or configuration error.
    ///
    /// Builds its own tokio runtime, so call it from a plain `fn main`;
    /// inside an existing runtime (`#[tokio::main]`) use [`App::serve`].
    pub fn run(self) -> ExitCode {
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        if crate::app::is_worker(&args) {
            return self.run_worker(&args);
        }
        main(self, args)
    }

    /// [`App::run`] for an application that already runs a tokio runtime:
    /// the same command line, commands and exit codes, on the caller's
    /// runtime (multi-threaded, with I/O and time enabled).
    ///
    /// ```no_run
    /// #[tokio::main]
    /// async fn main() -> std::process::ExitCode {
    ///     warden::App::new("my-server").serve().await
    /// }
    /// ```
    ///
    /// Workers re-execute the same `main`, so a worker process starts the
    /// caller's runtime threads before it reaches this call: its sandbox
    /// layers that need a single-threaded process (the network namespace)
    /// then report as missing. Prefer [`App::run`] from a plain `main` for
    /// the full script sandbox.
    pub async fn serve(self) -> ExitCode {
        self.serve_with_args(std::env::args_os().collect()).await
    }

    /// [`App::serve`] with an explicit command line (`args[0]` is the
    /// program name), e.g. `["my-server", "--list-tools"]`.
    pub async fn serve_with_args(self, args: Vec<std::ffi::OsString>) -> ExitCode {
        if crate::app::is_worker(&args) {
            return self.run_worker(&args);
        }
        serve_async(self, args).await
    }
}

/// Reads `.env` (warning on stderr about the variables it ignored) and
/// parses `args` into a [`Plan`].
fn plan(app: App, args: Vec<std::ffi::OsString>) -> Plan {
    // `.env` in the working directory fills in WARDEN_*/OTEL_* settings the
    // environment does not set, through warden_core::config: the process
    // environment itself is never changed.
    let loaded = warden_core::config::dotenv::load(std::path::Path::new(".env"));
    if !loaded.ignored.is_empty() {
        eprintln!(
            "warning: .env sets {}, which Warden ignores: a .env file may only set WARDEN_* and OTEL_* variables (set others in the real environment)",
            loaded.ignored.join(", ")
        );
    }
    let name = app.name.clone();
    let command = Cli::command()
        .name(name.clone())
        .bin_name(name.clone())
        .version(app.version.clone());
    let cli = match command
        .try_get_matches_from(args)
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(error) => {
            if let Some(hint) = missing_feature_hint(&error) {
                eprintln!("error: {hint}");
                return Plan::Exit(ExitCode::from(2));
            }
            let _ = error.print();
            return Plan::Exit(if error.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            });
        }
    };
    if cli.check && cli.command.is_some() {
        eprintln!("error: --check runs on its own; drop the subcommand or the flag (see --help)");
        return Plan::Exit(ExitCode::from(2));
    }
    let check = cli.check.then(|| crate::preflight::PreflightOptions {
        json: cli.json,
        timeout: cli.timeout.unwrap_or(crate::preflight::DEFAULT_STAGE_TIMEOUT),
        require_agent: cli.require_agent,
    });
    let command = match (cli.list_tools, cli.command) {
        (true, _) => Command::Tools {
            format: ToolFormat::Mcp,
        },
        (false, None) => Command::Serve { http: None },
        (false, Some(Command::Preflight(args))) => return Plan::Preflight(args),
        // Never builds the app: a healthcheck must not load its resources.
        (false, Some(Command::Probe { url })) => return Plan::Exit(probe(&url)),
        #[cfg(feature = "testing")]
        (false, Some(Command::Test(args))) => return Plan::Test(args),
        (false, Some(command)) => command,
    };
    Plan::App(Box::new(AppCommand {
        app,
        command,
        list_only: cli.list_tools,
        check,
    }))
}

/// The hint for a command this build left out, as `serve --http` gives
/// one for `http`: `test` exists only with the `testing` feature.
fn missing_feature_hint(error: &clap::Error) -> Option<&'static str> {
    if cfg!(feature = "testing") || error.kind() != clap::error::ErrorKind::InvalidSubcommand {
        return None;
    }
    let named = error
        .get(clap::error::ContextKind::InvalidSubcommand)
        .is_some_and(|value| value.to_string() == "test");
    named.then_some(
        "this binary was built without the `testing` feature, which provides `test` (the MCP scenario runner); rebuild with the warden dependency's features including \"testing\"",
    )
}

/// Parses `args` and runs the command on a runtime of its own.
fn main(app: App, args: Vec<std::ffi::OsString>) -> ExitCode {
    let parsed = match plan(app, args) {
        Plan::Exit(code) => return code,
        // Client-side tools build their own runtime and never build this app's.
        Plan::Preflight(args) => return crate::preflight::main(args),
        #[cfg(feature = "testing")]
        Plan::Test(args) => return warden_testing::main(args),
        Plan::App(parsed) => *parsed,
    };
    let runtime = match crate::runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    // The binary's own log: warnings (e.g. a degraded script sandbox) on
    // stderr. An app embedding Warden through `App::serve` brings its own.
    warden_calls::telemetry::init_stderr_log();
    // Spans are recorded for the server and `call`, not for preflight.
    let telemetry = parsed.check.is_none().then(warden_calls::telemetry::init);
    let code = runtime.block_on(run_app(parsed));
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    // Flushes exporters after the last span ended.
    drop(telemetry);
    code
}

/// [`main`] on the caller's runtime (`App::serve`).
async fn serve_async(app: App, args: Vec<std::ffi::OsString>) -> ExitCode {
    let parsed = match plan(app, args) {
        Plan::Exit(code) => return code,
        Plan::Preflight(args) => {
            let code = crate::preflight::check_command(args).await;
            warden_sandbox::process::kill_all_workers();
            return code;
        }
        #[cfg(feature = "testing")]
        Plan::Test(args) => return warden_testing::run(&args).await,
        Plan::App(parsed) => *parsed,
    };
    let telemetry = parsed.check.is_none().then(warden_calls::telemetry::init);
    let code = run_app(parsed).await;
    // Exporters may block while flushing: not on a runtime thread.
    let _ = tokio::task::spawn_blocking(move || drop(telemetry)).await;
    code
}

/// Runs a command on this app, then kills any worker still running.
async fn run_app(parsed: AppCommand) -> ExitCode {
    let AppCommand {
        app,
        command,
        list_only,
        check,
    } = parsed;
    let code = match check {
        Some(options) => preflight(app, options).await,
        None => dispatch(app, command, list_only).await,
    };
    // Calls may still be in flight (the client hung up mid-call): kill their
    // workers now instead of waiting for their futures to be dropped.
    warden_sandbox::process::kill_all_workers();
    code
}

/// `--check`: preflight with the app's own registry, executor and binary.
async fn preflight(app: App, options: crate::preflight::PreflightOptions) -> ExitCode {
    let artifacts_dir = app.resolved_artifacts_dir();
    let name = app.name.clone();
    let built = build_runtime(app);
    let executor = built
        .as_ref()
        .map(|(runtime, _, _)| &runtime.executor)
        .map_err(|error| error as &dyn std::error::Error);
    crate::preflight::check_app(executor, &name, &artifacts_dir, &options).await
}

/// A `WARDEN_HTTP_ADDR` that is not an address to listen on.
#[derive(Debug, thiserror::Error)]
#[error("WARDEN_HTTP_ADDR: expected IP:PORT such as 127.0.0.1:8080, got '{0}'")]
struct BadHttpAddr(String);

/// Where to serve HTTP: `--http`, else a non-empty `WARDEN_HTTP_ADDR`;
/// `None` serves stdio.
fn http_address(flag: Option<std::net::SocketAddr>) -> Result<Option<std::net::SocketAddr>, BadHttpAddr> {
    if flag.is_some() {
        return Ok(flag);
    }
    match warden_core::config::var("WARDEN_HTTP_ADDR").filter(|value| !value.trim().is_empty()) {
        None => Ok(None),
        Some(value) => value.trim().parse().map(Some).map_err(|_| BadHttpAddr(value)),
    }
}

async fn dispatch(app: App, command: Command, list_only: bool) -> ExitCode {
    // Commands that read or describe touch nothing on disk.
    if let Command::Tools { format } = command {
        return tools(app, format, list_only);
    }
    if let Command::Usage { .. } = command
        && let Err(message) = usage_store_exists(&app)
    {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    let (runtime, name, version) = match build_runtime(app) {
        Ok(parts) => parts,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    match command {
        Command::Serve { http } => match http_address(http) {
            Ok(None) => {
                warden_mcp::serve::stdio_exit_code(
                    runtime.tasks.clone(),
                    runtime.serving.clone(),
                    &name,
                    &version,
                )
                .await
            }
            #[cfg(feature = "http")]
            Ok(Some(addr)) => {
                warden_mcp::serve::http_exit_code(
                    runtime.tasks.clone(),
                    runtime.serving.clone(),
                    &name,
                    &version,
                    addr,
                )
                .await
            }
            #[cfg(not(feature = "http"))]
            Ok(Some(_)) => {
                eprintln!(
                    "error: this binary was built without the `http` feature; serve stdio or rebuild with it"
                );
                ExitCode::from(2)
            }
            Err(message) => {
                eprintln!("error: {message}");
                ExitCode::from(2)
            }
        },
        // Answered above, before the runtime.
        Command::Tools { .. } => ExitCode::SUCCESS,
        Command::Call {
            batch: Some(file), ..
        } => call_batch_file(&runtime.tasks, &file).await,
        Command::Call { tool, arguments, .. } => {
            call(runtime, tool.as_deref().unwrap_or_default(), &arguments).await
        }
        Command::Script { file, timeout } => script(runtime, &file, timeout).await,
        Command::Replay { task_id } => replay(runtime, &task_id).await,
        Command::Usage { days, principal } => usage(runtime, days, principal.as_deref()).await,
        // Handled in `main` before any runtime exists (they build their own).
        Command::Preflight(_) | Command::Probe { .. } => ExitCode::from(2),
        #[cfg(feature = "testing")]
        Command::Test(_) => ExitCode::from(2),
    }
}

async fn call(runtime: crate::app::Started, tool: &str, arguments: &str) -> ExitCode {
    let arguments: Value = match serde_json::from_str(arguments) {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => {
            eprintln!("error: arguments must be a JSON object, e.g. '{{\"spot\": 100}}'");
            return ExitCode::from(2);
        }
        Err(error) => {
            eprintln!("error: arguments are not valid JSON: {error}");
            return ExitCode::from(2);
        }
    };
    let origin = Origin::request("direct", tool);
    // The local operator is subject to the policy too: a guard it denies
    // `local` is unknown here, like a name never registered.
    let visible = runtime.executor.visible_to(&origin);
    if visible.get(tool).is_none() {
        eprintln!(
            "error: unknown tool '{tool}'; available: {}",
            visible.names().join(", ")
        );
        return ExitCode::from(2);
    }
    let outcome = runtime
        .executor
        // The operator at the shell: their own deliberate act.
        .call(
            CallRequest::new(
                tool,
                arguments,
                &origin,
                tokio_util::sync::CancellationToken::new(),
            )
            .consent(warden_calls::executor::confirm::Consent::Direct),
        )
        .await;
    match outcome {
        Ok(value) => {
            println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!("error ({}): {}", failure.error.code, failure.error.message);
            ExitCode::from(1)
        }
    }
}

/// `script FILE`: runs the file as a task; Ctrl-C cancels it (the worker
/// is killed and the task recorded `cancelled`).
async fn script(runtime: crate::app::Started, file: &std::path::Path, timeout: Option<u64>) -> ExitCode {
    let source = if file == std::path::Path::new("-") {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(file)
    };
    let source = match source {
        Ok(source) => source,
        Err(error) => {
            eprintln!("error: cannot read script {}: {error}", file.display());
            return ExitCode::from(2);
        }
    };
    let max = runtime.executor.limits().max_timeout.as_secs();
    let timeout = match warden_mcp::builtins::task_timeout(runtime.executor.limits(), timeout) {
        Ok(timeout) => timeout,
        Err(_) => {
            eprintln!(
                "error: --timeout must be from 1 to {max} seconds (the server maximum, WARDEN_MAX_TIMEOUT_SECONDS), got {}",
                timeout.unwrap_or_default()
            );
            return ExitCode::from(2);
        }
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        warden_mcp::serve::shutdown_signal().await;
        on_signal.cancel();
    });
    let mut origin = Origin::request("script", warden_core::registry::BuiltinTool::RunScript.name());
    let outcome = runtime
        .tasks
        .run_script(&source, timeout, &mut origin, cancel, (None, None))
        .await;
    print_result(outcome.map(|result| {
        (
            result.to_json(),
            result.status == warden_task::TaskStatus::Success,
        )
    }))
}

/// `<app> replay <task_id>`: see [`Command::Replay`].
async fn replay(runtime: crate::app::Started, task_id: &str) -> ExitCode {
    let mut origin = Origin::request("script", warden_core::registry::BuiltinTool::ReplayTask.name());
    let cancel = tokio_util::sync::CancellationToken::new();
    let report =
        warden_task::replay::replay(&runtime.tasks, task_id, &mut origin, cancel, (None, None)).await;
    print_result(report.map(|report| {
        let identical = report.verdict == "identical";
        (serde_json::to_value(&report).unwrap_or_default(), identical)
    }))
}

/// `tools` and `--list-tools`: the registry's tools, without a runtime.
fn tools(app: App, format: ToolFormat, list_only: bool) -> ExitCode {
    let (registry, limits) = match crate::app::describe(app) {
        Ok(parts) => parts,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    if list_only {
        for guard in registry.iter() {
            let summary = warden_core::catalogue::summary(guard.description());
            let timeout = limits.calls.guard_deadline(guard.timeout).as_secs();
            println!(
                "{:<28} {:<10} {:>4}s  {summary}",
                guard.tool_name(),
                guard.mode().as_str(),
                timeout
            );
        }
        return ExitCode::SUCCESS;
    }
    let tools = warden_mcp::export::all_tools(&registry, &limits.calls);
    let value = warden_mcp::export::export(&tools, format);
    println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
    ExitCode::SUCCESS
}

/// `usage` reads the records a server wrote: without a shared store
/// (`WARDEN_DATABASE_URL`) the embedded one must exist already, or the
/// report would be an empty store made on the spot in the wrong place.
fn usage_store_exists(app: &App) -> Result<(), NoStore> {
    if warden_core::config::var("WARDEN_DATABASE_URL").is_some() {
        return Ok(());
    }
    let dir = app.resolved_artifacts_dir();
    let store = dir.join(warden_task::store::sqlite::FILE_NAME);
    if store.is_file() {
        return Ok(());
    }
    Err(NoStore(store))
}

/// `usage` found no task store to read (the path it looked at).
#[derive(Debug, thiserror::Error)]
#[error(
    "no task store at {}: `usage` reads the records a server wrote; set WARDEN_ARTIFACTS_DIR to that server's artifacts directory (or WARDEN_DATABASE_URL for a shared store)",
    .0.display()
)]
struct NoStore(std::path::PathBuf);

/// `<app> usage`: see [`Command::Usage`].
async fn usage(runtime: crate::app::Started, days: u32, principal: Option<&str>) -> ExitCode {
    use warden_task::store::{now_ms, utc_day};
    let named = |name: &str| match name {
        warden_calls::tenant::LOCAL => Ok(warden_calls::tenant::Principal::local()),
        other => warden_calls::tenant::Principal::new(other),
    };
    let principal = match principal.map(named).transpose() {
        Ok(principal) => principal,
        Err(error) => {
            eprintln!("error: --principal: {error}");
            return ExitCode::from(2);
        }
    };
    let from = utc_day(now_ms() - (i64::from(days) - 1) * 86_400_000);
    match runtime.tasks.records.usage(principal.as_ref(), &from).await {
        Ok(rows) => {
            let report = serde_json::json!({"from": from, "days": days, "rows": rows});
            println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(1)
        }
    }
}

/// `<app> call --batch file.json`: a `run_batch` argument object (or a bare
/// list of calls) from a file, run by [`warden_task::batch::run`] and printed as JSON. Exit
/// codes: 0 every call succeeded, 1 a call failed or the batch was refused,
/// 2 the file is unreadable or not a batch.
async fn call_batch_file(tasks: &warden_task::TaskRunner, file: &std::path::Path) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("error: cannot read batch file {}: {error}", file.display());
            return ExitCode::from(2);
        }
    };
    let value = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(calls)) => serde_json::json!({ "calls": calls }),
        Ok(value) => value,
        Err(error) => {
            eprintln!("error: batch file {} is not valid JSON: {error}", file.display());
            return ExitCode::from(2);
        }
    };
    let input: warden_task::batch::RunBatchInput = match warden_core::schema::decode_arguments(value) {
        Ok(input) => input,
        Err(error) => {
            eprintln!(
                "error ({}): batch file {}: {}",
                error.code,
                file.display(),
                error.message
            );
            return ExitCode::from(2);
        }
    };
    let origin = Origin::request("batch", warden_core::registry::BuiltinTool::RunBatch.name());
    let outcome = warden_task::batch::run(
        &tasks.executor,
        &tasks.store,
        tasks.limits(),
        input,
        (&origin, tasks.executor.events()),
        tokio_util::sync::CancellationToken::new(),
    )
    .await;
    print_result(outcome.map(|result| {
        (
            result.to_json(),
            result.status == warden_task::TaskStatus::Success,
        )
    }))
}

/// Prints a result (a task's, a batch's, a replay's) as JSON: exit 0 when
/// it is `ok` (success; a replay: identical), 1 otherwise (or when it
/// could not run at all).
fn print_result(outcome: Result<(Value, bool), warden_core::error::GuardError>) -> ExitCode {
    match outcome {
        Ok((result, ok)) => {
            println!("{}", serde_json::to_string_pretty(&result).unwrap_or_default());
            if ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
        }
        Err(error) => {
            eprintln!("error ({}): {}", error.code, error.message);
            ExitCode::from(1)
        }
    }
}

/// How long `probe` waits to connect, and for each read of the answer.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// `probe URL`: one HTTP/1.0 GET over std's TCP, so a container image
/// needs no shell tool (curl, bash's `/dev/tcp`) for its healthcheck.
/// Exit 0 on a 2xx answer, 1 on any other answer or none in time, 2 for
/// a URL that is not plain `http://` (a usage error). The answer's body (the checks of `/readyz`) goes
/// to stdout, so `docker inspect` shows why a node is unhealthy.
fn probe(url: &str) -> ExitCode {
    use std::io::{Read, Write};
    let Some(rest) = url.strip_prefix("http://") else {
        eprintln!("error: probe takes a plain http:// URL, e.g. http://127.0.0.1:8080/readyz; got '{url}'");
        return ExitCode::from(2);
    };
    let (authority, path) = rest.find('/').map_or((rest, "/"), |at| rest.split_at(at));
    let with_port = if authority.ends_with(']') || !authority.contains(':') {
        format!("{authority}:80")
    } else {
        authority.to_string()
    };
    let address = std::net::ToSocketAddrs::to_socket_addrs(&with_port)
        .ok()
        .and_then(|mut addresses| addresses.next());
    // Unresolvable is "no answer" (1), not a usage error: Docker reads a
    // healthcheck's 1 as unhealthy and reserves 2.
    let Some(address) = address else {
        eprintln!("probe: {url}: '{authority}' does not resolve to an address");
        return ExitCode::from(1);
    };
    let answer = (|| -> std::io::Result<String> {
        let mut stream = std::net::TcpStream::connect_timeout(&address, PROBE_TIMEOUT)?;
        stream.set_read_timeout(Some(PROBE_TIMEOUT))?;
        stream.set_write_timeout(Some(PROBE_TIMEOUT))?;
        write!(
            stream,
            "GET {path} HTTP/1.0\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
        )?;
        let mut bytes = Vec::new();
        // An answer is a few hundred bytes; a runaway one is cut, not held.
        stream.take(1 << 16).read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    })();
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            eprintln!("probe: {url}: {error}");
            return ExitCode::from(1);
        }
    };
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok());
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    println!("{}", body.trim_end());
    match status {
        Some(200..=299) => ExitCode::SUCCESS,
        Some(code) => {
            eprintln!("probe: {url} answered {code}");
            ExitCode::from(1)
        }
        None => {
            eprintln!("probe: {url} gave no HTTP answer");
            ExitCode::from(1)
        }
    }
}
