//! The checks that look at the application and its configuration rather
//! than at a running server: registration, the artifacts directory, worker
//! start, model and telemetry configuration.
//!
//! Called by [`super`] for both entry points. None of them calls a guard or the model:
//! the worker check sends the worker protocol's `ping`, and the model check
//! only reads environment variables.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::report::Check;
use warden_calls::executor::Executor;
use warden_core::registry::Registry;
use warden_testing::schema_check::check_tool_schema;
use warden_testing::schema_targets::{SchemaTarget, check_schema};

/// Environment variables the coding agent needs, in the order reported.
pub const MODEL_ENV: &[&str] = &["WARDEN_MODEL_API_KEY", "WARDEN_MODEL_API_BASE", "WARDEN_MODEL_ID"];

/// Selects the trace exporter: unset or `none` (disabled), `console`, `otlp`.
pub const TRACE_EXPORTER_ENV: &str = "WARDEN_TRACE_EXPORTER";

/// Longest MCP tool name clients accept: 128 characters (MCP 2025-06-18).
const MAX_MCP_TOOL_NAME: usize = 128;

/// Every managed resource loaded: a factory that failed (a data file
/// missing from the image, a bad path) leaves its guards answering
/// `resource_unavailable` while the server otherwise looks healthy.
pub(crate) fn resources(executor: &Executor) -> Check {
    let failed = executor.resources().failures();
    if failed.is_empty() {
        return Check::pass("resources", "every managed resource loaded");
    }
    let named: Vec<String> = failed
        .iter()
        .map(|(name, reason)| format!("{name}: {reason}"))
        .collect();
    Check::fail(
        "resources",
        format!("managed resources failed to load: {}", named.join("; ")),
        "fix what the reason names (a file path or the setting that names it); guards using these resources fail until then",
    )
}

/// The HTTP settings that are set (`WARDEN_PUBLIC_URL`, API tokens or
/// OAuth, `WARDEN_INPUT_STATE_KEY`), each read as `serve --http` reads them:
/// a FAIL names the variable `serve --http` would stop on.
#[cfg(feature = "http")]
pub(crate) fn http_settings() -> Check {
    let (checked, problems) = warden_mcp::serve::http_settings();
    if checked.is_empty() {
        return Check::skip("http_settings", "no HTTP setting is set");
    }
    if problems.is_empty() {
        return Check::pass("http_settings", format!("valid: {}", checked.join(", ")));
    }
    let named: Vec<String> = problems
        .iter()
        .map(|(var, problem)| format!("{var}: {problem}"))
        .collect();
    Check::fail(
        "http_settings",
        named.join("; "),
        "serve --http would refuse to start: fix the variable named",
    )
}

/// The artifacts directory exists (or can be created) and accepts a file.
pub(crate) fn artifacts(dir: &Path, origin: &str) -> Check {
    let name = "artifacts_dir";
    let fix = format!(
        "point WARDEN_ARTIFACTS_DIR at a directory this user can write (now: {})",
        dir.display()
    );
    if let Err(error) = std::fs::create_dir_all(dir) {
        return Check::fail(name, format!("cannot create {}: {error}", dir.display()), fix);
    }
    let probe = dir.join(format!(".preflight-{}", uuid::Uuid::new_v4().simple()));
    match std::fs::write(&probe, b"preflight\n") {
        Ok(()) => {
            let _ = std::fs::remove_file(&probe);
            let shown = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
            Check::pass(name, format!("{} is writable ({origin})", shown.display()))
        }
        Err(error) => Check::fail(name, format!("cannot write into {}: {error}", dir.display()), fix),
    }
}

/// The task store opens, passes its integrity check and has a schema this
/// Warden knows: PostgreSQL when `WARDEN_DATABASE_URL` names it, else the
/// embedded store in the artifacts directory (created when missing, as the
/// server would). With `WARDEN_ARTIFACT_STORE`, the object store takes a
/// write too.
pub(crate) async fn task_store(dir: &Path) -> Vec<Check> {
    use warden_task::store::TaskStore;
    let name = "task_store";
    let fix = "move the file aside (the task directories are kept and imported again) and rerun";
    let opener = crate::backends::store_opener();
    let store = match warden_task::records::database_url() {
        Some(url) => warden_task::records::open_database(&url, opener.as_deref())
            .await
            .map(|store| {
                (
                    store,
                    "the PostgreSQL task store (WARDEN_DATABASE_URL)".to_string(),
                )
            }),
        None => {
            let path = dir.join(warden_task::store::sqlite::FILE_NAME);
            warden_task::store::sqlite::SqliteStore::open(&path)
                .await
                .map(|(store, _)| {
                    (
                        std::sync::Arc::new(store) as std::sync::Arc<dyn TaskStore>,
                        path.display().to_string(),
                    )
                })
        }
    };
    let mut found = vec![match store {
        Ok((store, shown)) => match store.count().await {
            Ok(n) => Check::pass(name, format!("{shown} opens and is intact ({n} task record(s))")),
            Err(error) => Check::fail(name, error.to_string(), fix),
        },
        Err(error) => Check::fail(
            name,
            error.to_string(),
            "fix WARDEN_DATABASE_URL (reachable, a database of its own), or move a damaged tasks.db aside (the task directories are kept and imported again) and rerun",
        ),
    }];
    if let Some(check) = object_store() {
        found.push(check);
    }
    found
}

/// `WARDEN_ARTIFACT_STORE`, when set: the bucket takes a put, a get and a
/// delete.
fn object_store() -> Option<Check> {
    let name = "object_store";
    warden_core::config::var("WARDEN_ARTIFACT_STORE").filter(|v| !v.trim().is_empty())?;
    let fix = "check WARDEN_ARTIFACT_STORE, AWS_ENDPOINT_URL and the AWS_* credentials";
    let remote = match crate::backends::artifact_remote() {
        Ok(remote) => remote?,
        Err(error) => return Some(Check::fail(name, error.message, fix)),
    };
    Some(match remote.probe() {
        Ok(()) => Check::pass(
            name,
            format!("{} takes a write, a read and a delete", remote.url()),
        ),
        Err(error) => Check::fail(name, error.message, fix),
    })
}

/// Registration as the app itself sees it: guard count, names, schemas
/// (as `tools/list` sends them: made portable, see `schema::portable`).
pub(crate) fn registration(registry: &Registry) -> Check {
    let tools: Vec<ToolView> = registry
        .iter()
        .map(|g| {
            let tool = warden_mcp::export::for_mcp(warden_mcp::export::mcp_tool(g, 0));
            ToolView {
                name: g.tool_name().to_string(),
                description: g.description().to_string(),
                input: Value::Object(tool.input_schema.as_ref().clone()),
                output: tool.output_schema.map(|o| Value::Object(o.as_ref().clone())),
            }
        })
        .collect();
    registration_of(&tools, "registered")
}

/// Registration as a client sees it, from `tools/list` entries.
pub(crate) fn registration_from_tools(tools: &[Value]) -> Check {
    let views: Vec<ToolView> = tools
        .iter()
        .map(|t| ToolView {
            name: t["name"].as_str().unwrap_or_default().to_string(),
            description: t["description"].as_str().unwrap_or_default().to_string(),
            input: t.get("inputSchema").cloned().unwrap_or(Value::Null),
            output: t.get("outputSchema").cloned(),
        })
        .collect();
    registration_of(&views, "listed")
}

struct ToolView {
    name: String,
    description: String,
    input: Value,
    output: Option<Value>,
}

fn registration_of(tools: &[ToolView], verb: &str) -> Check {
    let name = "registration";
    let mut problems = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for tool in tools {
        let valid_name = !tool.name.is_empty()
            && tool.name.len() <= MAX_MCP_TOOL_NAME
            && tool
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid_name {
            problems.push(format!("tool name '{}' is not a valid MCP tool name", tool.name));
        }
        if !seen.insert(tool.name.as_str()) {
            problems.push(format!("tool '{}' is listed twice", tool.name));
        }
        for problem in check_tool_schema(&tool.input) {
            problems.push(format!("{} input schema {problem}", tool.name));
        }
        // Portable: self-contained, string enums, standard keywords/formats.
        for violation in check_schema(SchemaTarget::Mcp, &tool.input) {
            problems.push(format!("{} input schema {violation}", tool.name));
        }
        if let Some(output) = &tool.output {
            for problem in check_tool_schema(output) {
                problems.push(format!("{} output schema {problem}", tool.name));
            }
            for violation in check_schema(SchemaTarget::Mcp, output) {
                problems.push(format!("{} output schema {violation}", tool.name));
            }
        }
    }
    if let Some(first) = problems.first() {
        let more = match problems.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        return Check::fail(
            name,
            format!("{first}{more}"),
            "derive schemas from the input/output types (serde + schemars) instead of writing them by hand; \
the full list is in the JSON report",
        );
    }
    if tools.is_empty() {
        return Check::warn(
            name,
            format!("no tools {verb}"),
            "register at least one guard with App::guard(guard(my_fn))",
        );
    }
    let undocumented: Vec<&str> = tools
        .iter()
        .filter(|t| t.description.trim().is_empty())
        .map(|t| t.name.as_str())
        .collect();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let summary = format!(
        "{} tools {verb}, schemas are 2020-12 object schemas: {}",
        tools.len(),
        names.join(", ")
    );
    if undocumented.is_empty() {
        Check::pass(name, summary)
    } else {
        Check::warn(
            name,
            format!("{summary}; without a description: {}", undocumented.join(", ")),
            "add a doc comment to each input type: it becomes the description models read",
        )
    }
}

/// Starts one isolated worker and waits for its pong. No guard runs.
pub(crate) async fn worker(executor: &Executor, expected_guards: Option<usize>, timeout: Duration) -> Check {
    let name = "worker";
    let started = Instant::now();
    let answer = tokio::time::timeout(timeout, executor.ping_worker()).await;
    let elapsed = started.elapsed().as_millis();
    match answer {
        Err(_) => Check::fail(
            name,
            format!(
                "no pong from an isolated worker within {} s",
                timeout.as_secs_f64()
            ),
            "raise --timeout if this machine is slow; otherwise run the worker by hand to see where it hangs",
        ),
        Ok(Err(failure)) => Check::fail(
            name,
            format!("an isolated worker did not answer: {}", failure.error.message),
            "read the worker log named above; workers need fork/exec, setsid, prctl and setrlimit",
        ),
        Ok(Ok((pid, guards))) => match expected_guards {
            Some(expected) if expected != guards => Check::fail(
                name,
                format!("worker pid {pid} registered {guards} guards, the server {expected}"),
                "registration must not depend on arguments, environment or time: build the same App in every process",
            ),
            _ => Check::pass(
                name,
                format!(
                    "isolated worker pid {pid} started (setsid, PDEATHSIG, rlimits) and answered ping in {elapsed} ms; it sees {guards} guards"
                ),
            ),
        },
    }
}

/// Model settings for `run_coding_task`; never contacts the model. A
/// setting that is set wrong fails, naming it, whether or not the model
/// is required (the server would not start with it).
pub(crate) fn agent(require_agent: bool) -> Check {
    let name = "agent";
    #[cfg(feature = "agent")]
    if let Err(error) = warden_agent::ModelConfig::check_env() {
        return Check::fail(
            name,
            error.to_string(),
            "fix the variable it names (docs/operating.md lists the model settings), or unset it for its default",
        );
    }
    let missing: Vec<&str> = MODEL_ENV
        .iter()
        .copied()
        .filter(|var| warden_core::config::var(var).is_none_or(|v| v.trim().is_empty()))
        .collect();
    if !missing.is_empty() {
        return Check::warn_or_fail(
            require_agent,
            name,
            format!("model not configured: {} unset", missing.join(", ")),
            format!(
                "set {} to enable run_coding_task (other tools work without them)",
                MODEL_ENV.join(", ")
            ),
        );
    }
    let base = warden_core::config::var("WARDEN_MODEL_API_BASE").unwrap_or_default();
    let model = warden_core::config::var("WARDEN_MODEL_ID").unwrap_or_default();
    Check::pass(
        name,
        format!("model '{model}' at {base} (key set; no request sent)"),
    )
}

/// Trace exporter selection.
/// Whether this binary can record spans / export OTLP.
const BUILT_WITH_OTEL: bool = cfg!(feature = "telemetry");
const BUILT_WITH_OTLP: bool = cfg!(feature = "otel-otlp");

pub(crate) fn telemetry() -> Check {
    let name = "telemetry";
    let value = warden_core::config::var(TRACE_EXPORTER_ENV).unwrap_or_default();
    let exporter = value.trim().to_ascii_lowercase();

    match exporter.as_str() {
        "" | "none" => Check::pass(name, format!("disabled ({TRACE_EXPORTER_ENV} unset)")),
        "console" | "file" | "otlp" => {
            let (feature, built) = if exporter == "otlp" {
                ("otel-otlp", BUILT_WITH_OTLP)
            } else {
                ("telemetry", BUILT_WITH_OTEL)
            };
            if !built {
                return Check::warn(
                    name,
                    format!(
                        "{TRACE_EXPORTER_ENV}={exporter}, but this build lacks warden's `{feature}` feature"
                    ),
                    format!(
                        "rebuild the app with warden's `{feature}` feature, or unset {TRACE_EXPORTER_ENV}"
                    ),
                );
            }
            if exporter == "file"
                && warden_core::config::var("WARDEN_TRACE_FILE").is_none_or(|v| v.trim().is_empty())
            {
                return Check::fail(
                    name,
                    format!("{TRACE_EXPORTER_ENV}=file but WARDEN_TRACE_FILE is unset"),
                    "set WARDEN_TRACE_FILE to a path the server can append spans to",
                );
            }
            Check::pass(
                name,
                format!("spans exported with {TRACE_EXPORTER_ENV}={exporter}"),
            )
        }
        other => Check::fail(
            name,
            format!("{TRACE_EXPORTER_ENV}='{other}' is not an exporter"),
            format!("set {TRACE_EXPORTER_ENV} to none, console, file or otlp"),
        ),
    }
}
