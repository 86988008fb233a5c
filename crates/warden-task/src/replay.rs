//! Replay: run a finished script task's recorded scripts again, in a fresh
//! sandbox and a new task, and compare the two call by call and artifact
//! by artifact.
//!
//! The model is never called: a coding task's blocks are its recorded
//! `agent_actions/*.rhai`, replayed in order in one worker session (one
//! persistent scope, as they first ran). The comparison reads the two
//! tasks' receipts and `function_calls.json`: the first call whose
//! function, status, argument hash or output hash differs; then the call
//! count and the digest over every call (which covers calls the log only
//! summarizes); then each artifact's hash (with the first differing line
//! of a text artifact); then the script's final value. Calls keep hashes,
//! not values, so a call difference gives both hashes; artifacts and the
//! final value give both values. A guard that reads the outside world
//! (`open_world`) or is not idempotent is named in `nondeterministic`: a
//! difference in its calls may be the world's, not the computation's.
//!
//! The replay is the original's run, or nothing: each recorded script is
//! read once and its SHA-256 compared with the receipt's before anything
//! runs (a script changed or removed on disk gives the verdict
//! `script_differs`, naming the file and both hashes, and no task), and
//! the scripts run under the original task's limits from its receipt (its
//! deadline and call budgets, the deadline capped by this server's
//! maximum), never under the server's maximum.

use serde::Serialize;
use serde_json::Value;

use crate::result::TaskResult;
use crate::task_receipt::{FileHash, RunLimits, TaskReceipt};
use warden_calls::artifacts::View;
use warden_core::error::{GuardError, codes};
use warden_core::future::BoxFuture;
use warden_core::registry::Registry;

/// Bytes read from a recorded file at most (a script, function_calls.json,
/// result.json, a text artifact compared line by line): 64 MiB.
const MAX_REPLAY_READ: u64 = 64 * 1024 * 1024;

/// What a replay found.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    /// `identical`, `different`, or `script_differs` (a recorded script's
    /// file no longer matches the receipt: nothing ran).
    pub verdict: &'static str,
    pub task_id: String,
    /// The new task the replay ran as (its files and receipt are there);
    /// `None` when nothing ran.
    pub replay_task_id: Option<String>,
    /// How the replay ended (`not_run` when nothing ran).
    pub replay_status: String,
    /// The limits the replay ran (or would have run) under: the
    /// original's, the deadline capped by this server's maximum.
    pub limits: RunLimits,
    /// `receipt`, or `defaults` for a receipt recorded before limits were
    /// kept (`run_script`'s, or a coding task's, with the default timeout).
    pub limits_from: &'static str,
    pub calls: Pair<usize>,
    /// The first difference, in the order: calls, call count and digest,
    /// artifacts, final value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_difference: Option<Difference>,
    /// How many differences were found in all.
    pub differences: usize,
    /// Guards the task called that read the outside world or are not
    /// idempotent.
    pub nondeterministic: Vec<String>,
}

/// The original's and the replay's value of one thing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pair<T> {
    pub original: T,
    pub replay: T,
}

impl<T: PartialEq> Pair<T> {
    fn differs(&self) -> bool {
        self.original != self.replay
    }
}

/// One difference between a task and its replay.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Difference {
    /// A recorded script whose file differs from the receipt (verdict
    /// `script_differs`): nothing was run.
    Script {
        /// The script's file, e.g. `agent_actions/action_001.rhai`.
        path: String,
        /// The receipt's SHA-256 of it.
        receipt_sha256: String,
        /// The SHA-256 of the file as it is now; `None`: it is gone.
        file_sha256: Option<String>,
    },
    /// The first recorded call that differs (index from 0).
    Call {
        index: usize,
        function: Pair<Value>,
        status: Pair<Value>,
        arguments_sha256: Pair<Value>,
        output_sha256: Pair<Value>,
        /// The guard reads the outside world or is not idempotent.
        nondeterministic: bool,
    },
    /// The number of calls, or the digest over all of them.
    Calls {
        count: Pair<usize>,
        calls_sha256: Pair<String>,
    },
    /// An artifact that differs, or exists on one side only.
    Artifact {
        path: String,
        original: Option<FileHash>,
        replay: Option<FileHash>,
        #[serde(skip_serializing_if = "Option::is_none")]
        first_differing_line: Option<LineDifference>,
    },
    /// The script's final value (or final answer).
    Value { original: Value, replay: Value },
}

/// The first line two text files differ at (from 1).
#[derive(Debug, Clone, Serialize)]
pub struct LineDifference {
    pub line: usize,
    pub original: Option<String>,
    pub replay: Option<String>,
}

/// What a task recorded for its replay.
#[derive(Debug)]
pub struct Recorded {
    /// Its scripts, in the order they ran, each exactly as the receipt
    /// hashed it (when `altered` is empty).
    pub scripts: Vec<String>,
    /// Its saved result (with the receipt).
    pub result: TaskResult,
    /// The scripts whose file does not match the receipt's hash (each a
    /// [`Difference::Script`]): nothing may run then.
    pub altered: Vec<Difference>,
}

/// The recorded scripts of `task_id`, in the order they ran, checked
/// against its receipt, and its saved result; refuses a task that ran no
/// script or predates receipts. Each script is read once: the text
/// hashed is the text that runs.
pub fn recorded(view: View<'_>, task_id: &str) -> Result<Recorded, GuardError> {
    let result = saved_result(view, task_id)?;
    let Some(receipt) = &result.receipt else {
        return Err(GuardError::invalid_input(
            "task_id",
            format!(
                "task '{task_id}' has no receipt: only run_script and run_coding_task tasks recorded since receipts exist can be replayed"
            ),
        ));
    };
    if receipt.scripts.is_empty() {
        return Err(GuardError::invalid_input(
            "task_id",
            format!("task '{task_id}' ran no script, so there is nothing to replay"),
        ));
    }
    let mut scripts = Vec::new();
    let mut altered = Vec::new();
    for script in &receipt.scripts {
        let bytes = match read_bytes(view, task_id, &script.path) {
            Ok(bytes) => Some(bytes),
            Err(error) if error.code == codes::NOT_FOUND => None,
            Err(error) => return Err(error),
        };
        let file_sha256 = bytes.as_deref().map(|bytes| {
            let mut hasher = warden_core::receipt::Hasher::default();
            hasher.update(bytes);
            hasher.finish()
        });
        match bytes {
            Some(bytes) if file_sha256.as_deref() == Some(script.sha256.as_str()) => {
                let text = String::from_utf8(bytes).map_err(|_| {
                    GuardError::failed(format!(
                        "{} of task '{task_id}' matches its receipt but is not UTF-8 text",
                        script.path
                    ))
                })?;
                scripts.push(text);
            }
            _ => altered.push(Difference::Script {
                path: script.path.clone(),
                receipt_sha256: script.sha256.clone(),
                file_sha256,
            }),
        }
    }
    Ok(Recorded {
        scripts,
        result,
        altered,
    })
}

/// The limits a replay of a task with `receipt` runs under, and where
/// they come from: the receipt's, or (a receipt from before they were
/// kept) `run_script`'s or a coding task's defaults with the default task
/// timeout; either way the deadline is capped by `max_timeout`, this
/// server's maximum, which binds every task here.
pub fn replay_limits(receipt: &TaskReceipt, max_timeout: std::time::Duration) -> (RunLimits, &'static str) {
    let (mut limits, from) = match receipt.limits {
        Some(limits) => (limits, "receipt"),
        None => {
            let timeout = crate::limits::DEFAULT_TASK_TIMEOUT;
            let defaults = match receipt.model {
                Some(_) => RunLimits::coding(timeout, crate::limits::AGENT_MAX_INLINE_CALLS),
                None => RunLimits::script(timeout),
            };
            (defaults, "defaults")
        }
    };
    if limits.timeout() > max_timeout {
        limits.timeout_ms = RunLimits::script(max_timeout).timeout_ms;
    }
    (limits, from)
}

/// Compares the original task with its replay (see the module doc).
pub fn compare(
    view: View<'_>,
    registry: &Registry,
    original: (&str, &TaskResult),
    replay: (&str, &TaskResult),
    limits: (RunLimits, &'static str),
) -> Result<ReplayReport, GuardError> {
    let (original_id, original_result) = original;
    let (replay_id, replay_result) = replay;
    let empty = empty_receipt();
    let original_receipt = original_result.receipt.as_ref().unwrap_or(&empty);
    let replay_receipt = replay_result.receipt.as_ref().unwrap_or(&empty);
    let original_calls = recorded_calls(view, original_id)?;
    let replay_calls = recorded_calls(view, replay_id)?;
    let is_nondeterministic = |name: &str| {
        registry
            .get(name)
            .is_some_and(|g| g.hints.open_world || !g.hints.idempotent)
    };
    let mut differences = Vec::new();
    differences.extend(first_differing_call(
        &original_calls,
        &replay_calls,
        &is_nondeterministic,
    ));
    let count = Pair {
        original: original_receipt.calls,
        replay: replay_receipt.calls,
    };
    let calls_sha256 = Pair {
        original: original_receipt.calls_sha256.clone(),
        replay: replay_receipt.calls_sha256.clone(),
    };
    if count.differs() || calls_sha256.differs() {
        differences.push(Difference::Calls { count, calls_sha256 });
    }
    differences.extend(differing_artifacts(
        view,
        (original_id, original_receipt),
        (replay_id, replay_receipt),
    ));
    // The final value, or the final answer's summary and metrics.
    let last = |result: &TaskResult| serde_json::json!({"value": result.value, "summary": result.summary, "metrics": result.metrics});
    let (a, b) = (last(original_result), last(replay_result));
    if a != b {
        differences.push(Difference::Value {
            original: a,
            replay: b,
        });
    }
    let mut nondeterministic: Vec<String> = original_calls
        .iter()
        .chain(&replay_calls)
        .filter_map(|call| call.get("function").and_then(Value::as_str))
        .filter(|name| is_nondeterministic(name))
        .map(str::to_string)
        .collect();
    nondeterministic.sort_unstable();
    nondeterministic.dedup();
    Ok(ReplayReport {
        verdict: if differences.is_empty() {
            "identical"
        } else {
            "different"
        },
        task_id: original_id.to_string(),
        replay_task_id: Some(replay_id.to_string()),
        replay_status: replay_result.status.as_str().to_string(),
        limits: limits.0,
        limits_from: limits.1,
        calls: Pair {
            original: original_receipt.calls,
            replay: replay_receipt.calls,
        },
        differences: differences.len(),
        first_difference: differences.into_iter().next(),
        nondeterministic,
    })
}

/// The first call, in order, whose function, status, arguments or output
/// differ between the runs (the replay stops comparing there: every later
/// call depends on it).
fn first_differing_call(
    original: &[serde_json::Map<String, Value>],
    replay: &[serde_json::Map<String, Value>],
    is_nondeterministic: &dyn Fn(&str) -> bool,
) -> Option<Difference> {
    original
        .iter()
        .zip(replay)
        .enumerate()
        .find_map(|(index, (a, b))| {
            let field = |name: &str| Pair {
                original: a.get(name).cloned().unwrap_or(Value::Null),
                replay: b.get(name).cloned().unwrap_or(Value::Null),
            };
            let function = field("function");
            let status = field("status");
            let arguments_sha256 = field("arguments_sha256");
            let output_sha256 = field("output_sha256");
            let differs = function.differs()
                || status.differs()
                || arguments_sha256.differs()
                || output_sha256.differs();
            differs.then(|| {
                let nondeterministic = [&function.original, &function.replay]
                    .iter()
                    .any(|f| f.as_str().is_some_and(is_nondeterministic));
                Difference::Call {
                    index,
                    function,
                    status,
                    arguments_sha256,
                    output_sha256,
                    nondeterministic,
                }
            })
        })
}

/// Every artifact, by path, whose content differs (or that only one run
/// wrote), with the first differing line of a text both wrote.
fn differing_artifacts(
    view: View<'_>,
    (original_id, original): (&str, &TaskReceipt),
    (replay_id, replay): (&str, &TaskReceipt),
) -> Vec<Difference> {
    let mut paths: Vec<&str> = original
        .artifacts
        .iter()
        .chain(&replay.artifacts)
        .map(|a| a.path.as_str())
        .collect();
    paths.sort_unstable();
    paths.dedup();
    let mut differences = Vec::new();
    for path in paths {
        let find = |receipt: &TaskReceipt| receipt.artifacts.iter().find(|a| a.path == path).cloned();
        let (a, b) = (find(original), find(replay));
        if a.as_ref().map(|a| &a.sha256) == b.as_ref().map(|b| &b.sha256) {
            continue;
        }
        let first_differing_line = match (&a, &b) {
            (Some(_), Some(_)) => first_differing_line(view, (original_id, replay_id), path),
            _ => None,
        };
        differences.push(Difference::Artifact {
            path: path.to_string(),
            original: a,
            replay: b,
            first_differing_line,
        });
    }
    differences
}

fn empty_receipt() -> TaskReceipt {
    TaskReceipt {
        format: String::new(),
        app: Default::default(),
        warden_version: String::new(),
        build: String::new(),
        scripts: Vec::new(),
        model: None,
        calls: 0,
        calls_sha256: String::new(),
        artifacts: Vec::new(),
        limits: None,
        approvals: Vec::new(),
    }
}

/// The task's saved result.json.
fn saved_result(view: View<'_>, task_id: &str) -> Result<TaskResult, GuardError> {
    let text = read_text(view, task_id, warden_calls::artifacts::RESULT_FILE)?;
    serde_json::from_str(&text).map_err(|e| {
        GuardError::failed(format!(
            "task '{task_id}': its result.json cannot be read back: {e}"
        ))
    })
}

/// The destructive calls `task_id` ran (succeeded), as guard and
/// arguments' SHA-256, in order: what a replay's recorded approvals may
/// admit again ([`warden_core::approval::Book::replaying`]). A record the
/// file summarised away, or a file that cannot be read, admits nothing.
fn destructive_calls_ran(view: View<'_>, registry: &Registry, task_id: &str) -> Vec<(String, String)> {
    recorded_calls(view, task_id)
        .unwrap_or_default()
        .iter()
        .filter(|call| call.get("status").and_then(Value::as_str) == Some("success"))
        .filter_map(|call| {
            let guard = call.get("function")?.as_str()?;
            let sha = call.get("arguments_sha256")?.as_str()?;
            registry
                .get(guard)
                .is_some_and(|g| g.hints.destructive)
                .then(|| (guard.to_string(), sha.to_string()))
        })
        .collect()
}

/// The per-call records of function_calls.json (its closing summary or
/// the note of a task whose server died, if any, left out).
fn recorded_calls(view: View<'_>, task_id: &str) -> Result<Vec<serde_json::Map<String, Value>>, GuardError> {
    let text = read_text(view, task_id, warden_script::host::calls::FUNCTION_CALLS_FILE)?;
    let records: Vec<Value> = serde_json::from_str(&text).map_err(|e| {
        GuardError::failed(format!(
            "task '{task_id}': its function_calls.json cannot be read: {e}"
        ))
    })?;
    Ok(records
        .into_iter()
        .filter_map(|record| match record {
            Value::Object(map) if !map.contains_key("summarized") && !map.contains_key("interrupted") => {
                Some(map)
            }
            _ => None,
        })
        .collect())
}

/// The first line at which a text artifact differs between the two tasks
/// (`None` for a binary or oversized one).
fn first_differing_line(view: View<'_>, tasks: (&str, &str), path: &str) -> Option<LineDifference> {
    let a = read_text(view, tasks.0, path).ok()?;
    let b = read_text(view, tasks.1, path).ok()?;
    let (mut a_lines, mut b_lines) = (a.lines(), b.lines());
    let mut line = 0;
    loop {
        line += 1;
        let (x, y) = (a_lines.next(), b_lines.next());
        if x.is_none() && y.is_none() {
            return None;
        }
        if x != y {
            return Some(LineDifference {
                line,
                original: x.map(str::to_string),
                replay: y.map(str::to_string),
            });
        }
    }
}

/// A whole file of a task as bytes (any bytes: a script changed on disk
/// need not be text), read through the owner's view in chunks.
fn read_bytes(view: View<'_>, task_id: &str, path: &str) -> Result<Vec<u8>, GuardError> {
    use base64::Engine as _;
    let mut bytes = Vec::new();
    let mut offset = 0;
    loop {
        let chunk = view.read(
            task_id,
            path,
            offset,
            crate::limits::MAX_READ_CHUNK_BYTES,
            warden_calls::artifacts::Encoding::Base64,
        )?;
        if chunk.size_bytes > MAX_REPLAY_READ {
            return Err(too_big(task_id, path, chunk.size_bytes));
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(chunk.content.as_bytes())
            .map_err(|e| GuardError::failed(format!("{path} of task '{task_id}': unreadable chunk: {e}")))?;
        bytes.extend_from_slice(&decoded);
        match chunk.next_offset {
            Some(next) => offset = next,
            None => return Ok(bytes),
        }
    }
}

fn too_big(task_id: &str, path: &str, size: u64) -> GuardError {
    GuardError::new(
        codes::INVALID_INPUT,
        format!(
            "{path} of task '{task_id}' is {size} bytes, over the {MAX_REPLAY_READ}-byte replay read limit"
        ),
    )
}

/// A whole text file of a task, read through the owner's view in chunks.
fn read_text(view: View<'_>, task_id: &str, path: &str) -> Result<String, GuardError> {
    let mut text = String::new();
    let mut offset = 0;
    loop {
        let chunk = view.read(
            task_id,
            path,
            offset,
            crate::limits::MAX_READ_CHUNK_BYTES,
            Default::default(),
        )?;
        if chunk.size_bytes > MAX_REPLAY_READ {
            return Err(too_big(task_id, path, chunk.size_bytes));
        }
        text.push_str(&chunk.content);
        match chunk.next_offset {
            Some(next) => offset = next,
            None => return Ok(text),
        }
    }
}

/// Replays the caller's finished task `task_id` as a new task and compares
/// the two. Another principal's task answers as an unknown one.
/// Boxed: compiled here once, not in each crate that awaits it
/// ([`warden_core::future`]).
pub fn replay<'a>(
    runner: &'a crate::TaskRunner,
    task_id: &'a str,
    origin: &'a mut warden_calls::events::Origin,
    cancel: tokio_util::sync::CancellationToken,
    (claim, progress): (
        Option<&'a crate::Claim>,
        Option<&'a warden_script::host::progress::Progress>,
    ),
) -> BoxFuture<'a, Result<ReplayReport, GuardError>> {
    Box::pin(async move {
        let principal = origin.principal.clone();
        let Some(record) = runner.records.get(&principal, task_id).await? else {
            return Err(warden_calls::artifacts::no_task(task_id));
        };
        if !matches!(record.state, crate::store::State::Ended(_)) {
            return Err(GuardError::invalid_input(
                "task_id",
                format!("task '{task_id}' has not ended; replay it once it has (tasks/get says when)"),
            ));
        }
        let recorded = recorded(runner.store.view(&principal), task_id)?;
        let original = recorded.result;
        let empty = empty_receipt();
        let receipt = original.receipt.as_ref().unwrap_or(&empty);
        let limits = replay_limits(receipt, runner.executor.limits().max_timeout);
        if !recorded.altered.is_empty() {
            return Ok(ReplayReport {
                verdict: "script_differs",
                task_id: task_id.to_string(),
                replay_task_id: None,
                replay_status: "not_run".into(),
                limits: limits.0,
                limits_from: limits.1,
                calls: Pair {
                    original: receipt.calls,
                    replay: 0,
                },
                differences: recorded.altered.len(),
                first_difference: recorded.altered.into_iter().next(),
                nondeterministic: Vec::new(),
            });
        }
        let scripts: Vec<&str> = recorded.scripts.iter().map(String::as_str).collect();
        let run = runner.run_scripts(&scripts, limits.0, origin, cancel, (claim, progress));
        // A task that waited for the person replays with the answers it got.
        let replayed = if receipt.approvals.is_empty() {
            run.await?
        } else {
            let ran =
                destructive_calls_ran(runner.store.view(&principal), runner.executor.registry(), task_id);
            let book = warden_core::approval::Book::replaying(receipt.approvals.clone(), ran);
            warden_core::reach::durable(book, run).await?
        };
        let Some(replay_id) = replayed.task_id.clone() else {
            return Err(GuardError::failed("the replay ran without a task id"));
        };
        compare(
            runner.store.view(&principal),
            runner.executor.registry(),
            (task_id, &original),
            (&replay_id, &replayed),
            limits,
        )
    })
}
