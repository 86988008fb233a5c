//! `events.jsonl`: one JSON object per line saying what ran.
//!
//! The server is the only writer (workers send their events as messages), so
//! no cross-process locking is needed. Records gather on the emitters' side
//! (`batch`) and reach tracing-appender's non-blocking writer a batch at a
//! time, through a bounded queue in *lossless* mode: when the disk falls
//! behind, emitters wait rather than drop records or grow memory.
//! Values (arguments, results, prompts, error text) are never written here.
//!
//! Every string that goes into a record — names, filenames, reasons, error
//! types, however nested — passes through `push_value`, which cuts it at
//! [`MAX_EVENT_STRING_BYTES`] with a visible marker, so no client or script
//! can make one record large. The global log rotates by size
//! (`rotate`); a task's own log stops at [`DEFAULT_TASK_EVENTS_MAX_BYTES`]
//! with one `task_events_truncated` record. Both are opened without
//! following links and created 0600.

mod batch;
pub mod ledger;
pub mod recovered;
mod rotate;

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Map, Value};
use tracing_appender::non_blocking::NonBlockingBuilder;

pub use batch::{EventsGuard, FLUSH_INTERVAL, HANDOFF_BYTES};

use crate::limits::{DEFAULT_TASK_EVENTS_MAX_BYTES, MAX_EVENT_STRING_BYTES};

/// Batches queued between the emitters and the writer thread: 64, each
/// about [`batch::HANDOFF_BYTES`] at most, so about 4 MiB. When full,
/// emitters block until the writer catches up (nothing is dropped).
pub const EVENT_QUEUE_BATCHES: usize = 64;

/// Bytes the writer thread gathers before a write: 256 KiB.
const EVENT_WRITE_BUFFER: usize = 256 * 1024;

/// Bytes a task's own log gathers before a write: 64 KiB, about 160
/// records (a door call writes two). At 8 KiB the writes (each with the
/// size check the cut-off on failure needs) were a twentieth of a door
/// call; a task's log is read when it has ended, when it is flushed.
const TASK_LOG_BUFFER: usize = 64 * 1024;

/// Who a record is about: the request, how it ran and, once one exists, the
/// task. Every record carries these fields.
#[derive(Debug, Clone)]
pub struct Origin {
    pub request_id: String,
    /// direct | coding_agent | script | batch | artifact | unknown
    pub mode: &'static str,
    pub tool: String,
    pub task_id: Option<String>,
    /// Who the request acts for (`local` over stdio).
    pub principal: crate::tenant::Principal,
    /// The OAuth scopes the caller's token granted (none over stdio or
    /// with an API token); the policy's scope rules read them.
    pub scopes: crate::tenant::Scopes,
    /// The span records are attributed to (its ids go into every record).
    pub trace: opentelemetry::Context,
}

impl Origin {
    /// A new request from a client, with a fresh request id.
    pub fn request(mode: &'static str, tool: &str) -> Self {
        Self {
            // A counter under a per-process random prefix: unique without
            // a `getrandom(2)` per request.
            request_id: next_id("req"),
            mode,
            tool: tool.to_string(),
            task_id: None,
            principal: crate::tenant::Principal::local(),
            scopes: crate::tenant::Scopes::default(),
            trace: opentelemetry::Context::new(),
        }
    }
}

/// A cheap, cloneable handle to the event log. A disabled handle (no
/// artifacts directory) accepts and discards records.
#[derive(Clone, Default)]
pub struct Events {
    writer: Option<Arc<batch::Batcher>>,
    /// A task's own events.jsonl, written in addition to the global log.
    /// Buffered; flushed by [`Events::flush_task_log`] when the task ends,
    /// and put on disk at once by [`Events::write_through`].
    task_log: Option<Arc<std::sync::Mutex<TaskLog>>>,
    /// Where a destructive call's start is also put before it runs, when
    /// the task's node may die where no other node can read its log
    /// ([`ledger`]).
    ledger: Option<Arc<dyn ledger::Ledger>>,
}

/// A task's own event log and how much of its byte cap it has used.
struct TaskLog {
    /// Whole records only, cut back if the disk refuses a write part-way.
    file: rotate::Appender,
    written: u64,
    max_bytes: u64,
    /// Set once the cap was hit and the marker record written: later
    /// records go to the global log only.
    closed: bool,
    /// The task directory, whose entries are synced by the first
    /// [`Events::write_through`] (`None` once they are).
    dir: Option<std::path::PathBuf>,
    /// Records were appended since the last [`Events::write_through`]: a
    /// log past its cap takes none, and costs no sync.
    unsynced: bool,
}

impl TaskLog {
    /// Appends `lines`, or — when they would cross the cap — one
    /// `task_events_truncated` record in their place, then nothing more.
    fn append(&mut self, lines: &[u8]) {
        if self.closed {
            return;
        }
        self.unsynced = true;
        if self.written + lines.len() as u64 <= self.max_bytes {
            self.written += lines.len() as u64;
            let _ = self.file.append(lines);
            return;
        }
        self.closed = true;
        let _ = self.file.append(&truncation_marker(lines, self.max_bytes));
    }

    /// Writes and syncs what is gathered; the first time, also the task
    /// directory and the directory holding it, so the log's name survives
    /// a crash of the machine with its records.
    fn write_through(&mut self) -> std::io::Result<()> {
        if !std::mem::replace(&mut self.unsynced, false) {
            return Ok(());
        }
        self.file.sync()?;
        if let Some(dir) = self.dir.take() {
            for dir in [Some(dir.as_path()), dir.parent()].into_iter().flatten() {
                File::open(dir)?.sync_all()?;
            }
        }
        Ok(())
    }
}

/// The `task_events_truncated` record replacing `lines`: it carries the
/// common fields of the first record it replaces.
fn truncation_marker(lines: &[u8], max_bytes: u64) -> Vec<u8> {
    let first = lines.split(|b| *b == b'\n').next().unwrap_or_default();
    let replaced: Map<String, Value> = serde_json::from_slice(first).unwrap_or_default();
    let mut extra = Map::new();
    for key in COMMON_FIELDS {
        extra.insert(key.into(), replaced.get(key).cloned().unwrap_or(Value::Null));
    }
    extra.insert("limit_bytes".into(), Value::from(max_bytes));
    extra.insert(
        "note".into(),
        Value::from("this task's later records are in the global events.jsonl only"),
    );
    let origin = Origin::request("unknown", "");
    record(&origin, "task_events_truncated", Value::Object(extra))
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("enabled", &self.writer.is_some())
            .finish()
    }
}

impl Events {
    /// Opens `<dir>/events.jsonl` for appending, rotated at the size and
    /// count of `limits` (`events_max_bytes`, `events_keep`). Keep the
    /// returned guard alive until shutdown: dropping it flushes the queue.
    ///
    /// A directory or file that cannot be written now (read-only, full)
    /// is not an error: a warning names it, records are dropped, and the
    /// log opens with the first records once it can be written (at most
    /// one attempt per [`crate::limits::EVENTS_REOPEN_INTERVAL`]).
    pub fn open(dir: &Path, limits: &crate::limits::CallLimits) -> std::io::Result<(Self, EventsGuard)> {
        let path = dir.join("events.jsonl");
        let (max_bytes, keep) = (limits.events_max_bytes, limits.events_keep);
        let opened = crate::artifacts::safe_path::create_private_dir_all(dir)
            .and_then(|()| rotate::RotatingFile::open(path.clone(), max_bytes, keep, EVENT_WRITE_BUFFER));
        let file = match opened {
            Ok(file) => file,
            Err(error) => {
                tracing::warn!(
                    "cannot write events to {}: {error}; events are dropped until it can be written \
                     (make the directory writable, or set WARDEN_ARTIFACTS_DIR to a writable directory)",
                    path.display()
                );
                rotate::RotatingFile::closed(path, max_bytes, keep, EVENT_WRITE_BUFFER)
            }
        };
        let (writer, guard) = NonBlockingBuilder::default()
            .lossy(false)
            .buffered_lines_limit(EVENT_QUEUE_BATCHES)
            .thread_name("warden-events")
            // The writer thread drains every queued batch before it
            // flushes, so a burst of batches becomes one write.
            .finish(file);
        let (batcher, guard) = batch::Batcher::start(writer, guard)?;
        Ok((
            Self {
                writer: Some(batcher),
                task_log: None,
                ledger: None,
            },
            guard,
        ))
    }

    /// A handle that also appends to `<task_dir>/events.jsonl`, up to
    /// [`DEFAULT_TASK_EVENTS_MAX_BYTES`] (the task lives at most its
    /// deadline, but a script can emit two records per door call).
    pub fn with_task_log(&self, task_dir: &Path) -> Self {
        let file = rotate::open_log(&task_dir.join("events.jsonl"));
        Self {
            writer: self.writer.clone(),
            task_log: file.ok().map(|file| {
                Arc::new(std::sync::Mutex::new(TaskLog {
                    file: rotate::Appender::new(file, TASK_LOG_BUFFER),
                    written: 0,
                    max_bytes: DEFAULT_TASK_EVENTS_MAX_BYTES,
                    closed: false,
                    dir: Some(task_dir.to_path_buf()),
                    unsynced: false,
                }))
            }),
            ledger: self.ledger.clone(),
        }
    }

    /// A handle that also puts the task's side effects on `ledger` (see
    /// [`ledger`]): for a task on a shared store, whose node may die.
    pub fn with_ledger(mut self, ledger: Arc<dyn ledger::Ledger>) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// The ledger the task's side effects go on, if it has one.
    pub(crate) fn ledger(&self) -> Option<&dyn ledger::Ledger> {
        self.ledger.as_deref()
    }

    /// Flushes the task log (call when the task ends).
    pub fn flush_task_log(&self) {
        if let Some(log) = &self.task_log
            && let Ok(mut log) = log.lock()
        {
            let _ = log.file.flush();
        }
    }

    /// Puts the task log's records on disk now: written, synced, and (the
    /// first time) the directory entries that name the log synced too. For
    /// the records of a side effect, which must outlive a crash of the
    /// server or the machine: a destructive guard's call is written through
    /// before it runs and when it settles (`executor::lifecycle`), so a task
    /// whose server died still says what it started (`recovered`). Nothing
    /// without a task log; an error fails no call (a write the disk
    /// refuses loses its records, as any write of the log does).
    pub fn write_through(&self) {
        if let Some(log) = &self.task_log
            && let Ok(mut log) = log.lock()
        {
            let _ = log.write_through();
        }
    }

    /// A handle that writes nothing.
    pub fn disabled() -> Self {
        Self::default()
    }

    /// Writes one record: the common fields from `origin` plus `extra`.
    pub fn emit(&self, origin: &Origin, event: &str, extra: Value) {
        if self.writer.is_none() && self.task_log.is_none() {
            return;
        }
        let line = record(origin, event, extra);
        self.write_raw(&line);
    }

    /// Writes complete JSON lines (e.g. [`pure_call_records`]) to every
    /// sink in one write each.
    pub fn write_raw(&self, lines: &[u8]) {
        if lines.is_empty() {
            return;
        }
        // A failed write must never fail the call it describes.
        if let Some(log) = &self.task_log
            && let Ok(mut log) = log.lock()
        {
            log.append(lines);
        }
        if let Some(writer) = &self.writer {
            writer.write(lines);
        }
    }
}

/// A process-unique id: `<kind>_<random per process>_<counter>`. Event and
/// call ids are minted per guard call (200,000 for a script making 100,000
/// inline calls), so they cost a counter increment, not a random draw.
pub fn next_id(kind: &str) -> String {
    let mut id = String::with_capacity(32);
    push_id(&mut id, kind, next_counter(1));
    id
}

/// This process's id, asked of the kernel once (`getpid(2)` per record
/// was four system calls per HTTP call). Only the server writes records;
/// its workers send theirs as messages, so no forked child reads it.
fn pid() -> u32 {
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// Reserves `n` consecutive id numbers.
fn next_counter(n: u64) -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    COUNTER.fetch_add(n, Ordering::Relaxed)
}

fn push_id(out: &mut String, kind: &str, number: u64) {
    use std::fmt::Write as _;
    use std::sync::OnceLock;
    static PREFIX: OnceLock<String> = OnceLock::new();
    let prefix = PREFIX.get_or_init(|| uuid::Uuid::new_v4().simple().to_string()[..12].to_string());
    let _ = write!(out, "{kind}_{prefix}_{number:x}");
}

/// The common fields of every record, in contract order, skipping any that
/// `extra` overrides. Appended as `,"k":v` pairs, straight from `origin`:
/// a call writes four records, and building a `Value` per field cost each
/// record nine allocations.
fn push_common(out: &mut Vec<u8>, origin: &Origin, extra: Option<&Map<String, Value>>) {
    use std::io::Write as _;
    // Which common fields `extra` overrides, found in one pass over its
    // keys (a lookup per common field was a twentieth of a door call).
    let mut overridden = [false; COMMON_FIELDS.len()];
    for key in extra.into_iter().flat_map(|extra| extra.keys()) {
        if let Some(field) = COMMON_FIELDS.iter().position(|field| field == key) {
            overridden[field] = true;
        }
    }
    let (trace_id, span_id) = crate::telemetry::ids(&origin.trace);
    let values: [Option<&str>; COMMON_FIELDS.len()] = [
        Some(&origin.request_id),
        Some(origin.mode),
        Some(&origin.tool),
        origin.task_id.as_deref(),
        Some(origin.principal.as_str()),
        trace_id.as_deref(),
        span_id.as_deref(),
        None, // the pid, a number: written below
        Some(crate::node::name_ref()),
    ];
    for ((field, value), overridden) in COMMON_FIELDS.iter().zip(values).zip(overridden) {
        if overridden {
            continue;
        }
        out.push(b',');
        push_str(out, field);
        out.push(b':');
        match value {
            None if *field == "pid" => {
                let _ = write!(out, "{}", pid());
            }
            Some(value) => push_str(out, value),
            None => out.extend_from_slice(b"null"),
        }
    }
}

/// The fields every record carries after its head, in contract order.
const COMMON_FIELDS: [&str; 9] = [
    "request_id",
    "mode",
    "tool",
    "task_id",
    "principal",
    "trace_id",
    "span_id",
    "pid",
    "node",
];

/// Appends `,"key":value`. Every value of every record goes through here.
fn push_pair(out: &mut Vec<u8>, key: &str, value: &Value) {
    out.push(b',');
    push_str(out, key);
    out.push(b':');
    push_value(out, value);
}

/// Appends `value` as JSON with every string in it — object keys included —
/// cut by [`bounded`].
fn push_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::String(text) => push_str(out, text),
        Value::Array(items) => {
            out.push(b'[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                push_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (n, (key, item)) in map.iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                push_str(out, key);
                out.push(b':');
                push_value(out, item);
            }
            out.push(b'}');
        }
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

/// Appends `text` as a JSON string, cut by [`bounded`].
fn push_str(out: &mut Vec<u8>, text: &str) {
    warden_core::json::push_str(out, bounded(text).as_ref());
}

/// `text` when it is at most [`MAX_EVENT_STRING_BYTES`] long; else its
/// start, cut at a character boundary, and `…[truncated N bytes]`.
pub(crate) fn bounded(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= MAX_EVENT_STRING_BYTES {
        return text.into();
    }
    let mut cut = MAX_EVENT_STRING_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…[truncated {} bytes]", &text[..cut], text.len() - cut).into()
}

/// Appends `{"timestamp":…,"event_id":…,"event":…` (no closing brace).
fn push_head(out: &mut Vec<u8>, timestamp: &str, event_id: u64, event: &str) {
    out.extend_from_slice(b"{\"timestamp\":\"");
    out.extend_from_slice(timestamp.as_bytes());
    out.extend_from_slice(b"\",\"event_id\":\"");
    let mut id = String::with_capacity(32);
    push_id(&mut id, "evt", event_id);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b"\",\"event\":");
    push_str(out, event);
}

/// The JSON line for one event, newline included.
pub(crate) fn record(origin: &Origin, event: &str, extra: Value) -> Vec<u8> {
    let extra = match extra {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let mut line = Vec::with_capacity(384);
    let now = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
    push_head(&mut line, &now, next_counter(1), event);
    push_common(&mut line, origin, Some(&extra));
    for (key, value) in &extra {
        push_pair(&mut line, key, value);
    }
    line.extend_from_slice(b"}\n");
    line
}

/// One inline pure call a script worker made (it runs pure guards in its
/// own process and reports them in batches: `script::protocol::PureBatch`).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct PureCall<'a> {
    /// A registered guard name (an identifier: never needs escaping).
    pub function: &'a str,
    pub ok: bool,
    /// The error code when the call failed.
    pub error_type: Option<String>,
    pub duration_ns: u64,
    /// Wall-clock start (Unix nanoseconds), for events and spans.
    pub started_unix_ns: u64,
    /// The receipt hashes of its arguments and output (see
    /// `warden_core::receipt`), for function_calls.json; null for a
    /// script-only function and a failed call's output.
    #[serde(borrow)]
    pub arguments_sha256: Option<&'a str>,
    #[serde(borrow)]
    pub output_sha256: Option<&'a str>,
}

/// The two records (`function_call_started`, `function_call_finished`) of
/// each inline pure call in `calls`, each at its own time, as JSON lines.
/// A batch of 1,024 calls builds no maps: the common fields are serialized
/// once and each millisecond's timestamp is formatted once.
/// `mode_of` names each call's `execution_mode` (`pure_inline`, or
/// `script_inline` for a script-only function, which rides the same batch).
pub fn pure_call_records(
    origin: &Origin,
    calls: &[PureCall<'_>],
    mode_of: &dyn Fn(&str) -> &'static str,
) -> Vec<u8> {
    if calls.is_empty() {
        return Vec::new();
    }
    use std::io::Write as _;
    let mut common = Vec::with_capacity(256);
    push_common(&mut common, origin, None);
    let mut out = Vec::with_capacity(calls.len() * 2 * (common.len() + 200));
    let mut numbers = next_counter(3 * calls.len() as u64);
    let mut stamp: (u128, String) = (u128::MAX, String::new());
    let mut stamp_of = |at: SystemTime| -> String {
        let millis = at
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        if millis != stamp.0 {
            stamp = (millis, humantime::format_rfc3339_millis(at).to_string());
        }
        stamp.1.clone()
    };
    let mut call_id = String::with_capacity(32);
    for call in calls {
        let start = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(call.started_unix_ns);
        let end = start + std::time::Duration::from_nanos(call.duration_ns);
        call_id.clear();
        push_id(&mut call_id, "call", numbers);
        let function = Value::from(call.function);

        push_head(&mut out, &stamp_of(start), numbers + 1, "function_call_started");
        out.extend_from_slice(&common);
        push_pair(&mut out, "function", &function);
        let mode = mode_of(call.function);
        let _ = write!(out, r#","call_id":"{call_id}","execution_mode":"{mode}"}}"#);
        out.push(b'\n');

        push_head(&mut out, &stamp_of(end), numbers + 2, "function_call_finished");
        out.extend_from_slice(&common);
        push_pair(&mut out, "function", &function);
        let _ = write!(
            out,
            r#","call_id":"{call_id}","status":"{}","error_type":"#,
            if call.ok { "success" } else { "failed" }
        );
        match call.error_type.as_deref() {
            Some(code) => push_str(&mut out, code),
            None => out.extend_from_slice(b"null"),
        }
        let _ = write!(out, r#","duration_ms":{}}}"#, call.duration_ns as f64 / 1e6);
        out.push(b'\n');
        numbers += 3;
    }
    out
}

/// One `pure_calls_summarized` record for `calls` (see
/// `warden_script::limits::DEFAULT_PURE_CALLS_DETAILED`): how many, how many
/// failed, counts per function and per error type, and their total
/// duration.
pub fn pure_calls_summary(origin: &Origin, calls: &[PureCall<'_>]) -> Vec<u8> {
    let mut functions: std::collections::BTreeMap<&str, u64> = Default::default();
    let mut error_types: std::collections::BTreeMap<&str, u64> = Default::default();
    let mut duration_ns = 0u64;
    for call in calls {
        *functions.entry(call.function).or_default() += 1;
        if let Some(code) = call.error_type.as_deref() {
            *error_types.entry(code).or_default() += 1;
        }
        duration_ns = duration_ns.saturating_add(call.duration_ns);
    }
    let failed = calls.iter().filter(|c| !c.ok).count();
    record(
        origin,
        "pure_calls_summarized",
        serde_json::json!({
            "calls": calls.len(),
            "failed": failed,
            "functions": functions,
            "error_types": error_types,
            "duration_ms": duration_ns as f64 / 1e6,
            "execution_mode": "pure_inline",
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn records_carry_every_common_field() {
        // The contract's common fields are present on every record.
        let origin = Origin::request("direct", "price_option_t");
        let line = record(&origin, "request_started", json!({"status": "x"}));
        let value: Value = serde_json::from_slice(&line).unwrap();
        for key in [
            "timestamp",
            "event_id",
            "event",
            "request_id",
            "mode",
            "tool",
            "task_id",
            "principal",
            "trace_id",
            "span_id",
            "pid",
            "node",
        ] {
            assert!(value.get(key).is_some(), "missing {key}");
        }
        assert!(value["timestamp"].as_str().unwrap().ends_with('Z'));
        assert_eq!(value["status"], "x");
    }
}

#[cfg(test)]
mod bound_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_strings_are_cut_with_a_marker_everywhere_in_a_record() {
        // A 1 MB tool name, nested value and key never enter a record whole; cuts are UTF-8 safe.
        let huge = "é".repeat(500_000);
        let origin = Origin::request("direct", &huge);
        let line = record(
            &origin,
            "request_finished",
            json!({"error_type": huge, "nested": {"filename": [huge.clone()]}, huge.clone(): 1}),
        );
        assert!(line.len() < 8 * MAX_EVENT_STRING_BYTES, "{} bytes", line.len());
        let value: Value = serde_json::from_slice(&line).unwrap();
        let tool = value["tool"].as_str().unwrap();
        assert!(
            tool.ends_with("…[truncated 998976 bytes]"),
            "{} bytes",
            tool.len()
        );
        assert!(
            value["nested"]["filename"][0]
                .as_str()
                .unwrap()
                .contains("…[truncated ")
        );
        assert_eq!(bounded("short"), "short");
    }

    #[test]
    fn a_task_log_stops_at_its_cap_with_one_marker() {
        // Records past the per-task cap are replaced by one task_events_truncated record.
        let dir = tempfile::tempdir().unwrap();
        let events = Events::disabled().with_task_log(dir.path());
        if let Some(log) = &events.task_log {
            log.lock().unwrap().max_bytes = 2_000;
        }
        let mut origin = Origin::request("script", "run_script");
        origin.task_id = Some("task_1".into());
        for _ in 0..100 {
            events.emit(&origin, "function_call_started", json!({"function": "f"}));
        }
        events.flush_task_log();
        let text = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
        assert!(text.len() < 3_000, "{}", text.len());
        let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(last["event"], "task_events_truncated");
        assert_eq!(last["task_id"], "task_1");
        assert_eq!(text.matches("task_events_truncated").count(), 1);
    }
}
