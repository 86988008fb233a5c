//! `events.jsonl`: one JSON object per line saying what ran.
//!
//! The server is the only writer (workers send their events as messages), so
//! no cross-process locking is needed. Lines go through tracing-appender's
//! non-blocking writer with a bounded queue in *lossless* mode: when the disk
//! falls behind, emitters wait rather than drop records or grow memory.
//! Values (arguments, results, prompts, error text) are never written here.

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Map, Value, json};
use tracing_appender::non_blocking::{NonBlocking, NonBlockingBuilder, WorkerGuard};

/// Lines buffered between emitters and the writer thread: 8,192. When full,
/// emitters block until the writer catches up (nothing is dropped).
pub const EVENT_QUEUE_LINES: usize = 8192;

/// Who a record is about: the request, how it ran and, once one exists, the
/// task. Every record carries these fields.
#[derive(Debug, Clone)]
pub struct Origin {
    pub request_id: String,
    /// direct | coding_agent | script | batch | artifact | unknown
    pub mode: &'static str,
    pub tool: String,
    pub task_id: Option<String>,
    /// The span records are attributed to (its ids go into every record).
    pub trace: opentelemetry::Context,
}

impl Origin {
    /// A new request from a client, with a fresh request id.
    pub fn request(mode: &'static str, tool: &str) -> Self {
        Self {
            request_id: format!("req_{}", uuid::Uuid::new_v4().simple()),
            mode,
            tool: tool.to_string(),
            task_id: None,
            trace: opentelemetry::Context::new(),
        }
    }
}

/// A cheap, cloneable handle to the event log. A disabled handle (no
/// artifacts directory) accepts and discards records.
#[derive(Clone, Default)]
pub struct Events {
    writer: Option<Arc<NonBlocking>>,
    /// A task's own events.jsonl, written in addition to the global log.
    /// Buffered; flushed by [`Events::flush_task_log`] when the task ends.
    task_log: Option<Arc<std::sync::Mutex<std::io::BufWriter<std::fs::File>>>>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("enabled", &self.writer.is_some())
            .finish()
    }
}

impl Events {
    /// Opens `<dir>/events.jsonl` for appending. Keep the returned guard
    /// alive until shutdown: dropping it flushes the queue.
    pub fn open(dir: &Path) -> std::io::Result<(Self, WorkerGuard)> {
        std::fs::create_dir_all(dir)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("events.jsonl"))?;
        let (writer, guard) = NonBlockingBuilder::default()
            .lossy(false)
            .buffered_lines_limit(EVENT_QUEUE_LINES)
            .thread_name("warden-events")
            .finish(file);
        Ok((
            Self {
                writer: Some(Arc::new(writer)),
                task_log: None,
            },
            guard,
        ))
    }

    /// A handle that also appends to `<task_dir>/events.jsonl`.
    pub fn with_task_log(&self, task_dir: &Path) -> Self {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(task_dir.join("events.jsonl"));
        Self {
            writer: self.writer.clone(),
            task_log: file
                .ok()
                .map(|f| Arc::new(std::sync::Mutex::new(std::io::BufWriter::new(f)))),
        }
    }

    /// Flushes the task log (call when the task ends).
    pub fn flush_task_log(&self) {
        if let Some(log) = &self.task_log
            && let Ok(mut log) = log.lock()
        {
            let _ = std::io::Write::flush(&mut *log);
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
        self.write(&line);
    }

    /// Writes many records of one origin, each at its own time, in one
    /// write per sink. Each record's extra fields come pre-serialized as
    /// `"k":v,...` (no braces), so a batch of 100,000 calls builds no maps. Used for the inline pure calls a script worker
    /// reports in batches: the common fields are serialized once and the
    /// writer thread is woken once per batch instead of twice per call.
    pub fn emit_many(&self, origin: &Origin, records: &[(SystemTime, &str, String)]) {
        if self.writer.is_none() && self.task_log.is_none() {
            return;
        }
        let common = common_fields(origin);
        let mut text = String::with_capacity(records.len() * 320);
        // Calls in a batch are microseconds apart: format each millisecond once.
        let mut stamp: (u128, String) = (u128::MAX, String::new());
        for (at, event, extra) in records {
            let extra = extra.as_str();
            let millis = at
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0);
            if millis != stamp.0 {
                stamp = (millis, humantime::format_rfc3339_millis(*at).to_string());
            }
            text.push_str("{\"timestamp\":\"");
            text.push_str(&stamp.1);
            text.push_str("\",\"event_id\":\"");
            text.push_str(&next_id("evt"));
            text.push_str("\",\"event\":");
            text.push_str(&Value::from(*event).to_string());
            text.push(',');
            text.push_str(&common);
            if !extra.is_empty() {
                text.push(',');
                text.push_str(extra);
            }
            text.push_str("}\n");
        }
        self.write(&text);
    }

    fn write(&self, line: &str) {
        // A failed write must never fail the call it describes.
        if let Some(log) = &self.task_log
            && let Ok(mut log) = log.lock()
        {
            let _ = std::io::Write::write_all(&mut *log, line.as_bytes());
        }
        if let Some(writer) = &self.writer {
            let mut writer = (**writer).clone();
            let _ = std::io::Write::write_all(&mut writer, line.as_bytes());
        }
    }
}

/// A process-unique id: `<kind>_<random per process>_<counter>`. Event and
/// call ids are minted per guard call (200,000 for a script making 100,000
/// inline calls), so they cost a counter increment, not a random draw.
pub fn next_id(kind: &str) -> String {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static PREFIX: OnceLock<String> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| uuid::Uuid::new_v4().simple().to_string()[..12].to_string());
    format!("{kind}_{prefix}_{:x}", COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// The fields every record of `origin` shares, as `"k":v,...` (no braces).
fn common_fields(origin: &Origin) -> String {
    let (trace_id, span_id) = crate::telemetry::ids(&origin.trace);
    let map = json!({
        "request_id": origin.request_id, "mode": origin.mode, "tool": origin.tool,
        "task_id": origin.task_id, "trace_id": trace_id, "span_id": span_id, "pid": std::process::id(),
    });
    strip_braces(&map.to_string()).to_string()
}

/// `{...}` → `...` (exactly one brace each side).
fn strip_braces(object: &str) -> &str {
    object
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or("")
}

/// The JSON line for one event, newline included.
pub(crate) fn record(origin: &Origin, event: &str, extra: Value) -> String {
    let (trace_id, span_id) = crate::telemetry::ids(&origin.trace);
    let mut map = Map::new();
    map.insert(
        "timestamp".into(),
        json!(humantime::format_rfc3339_millis(SystemTime::now()).to_string()),
    );
    map.insert("event_id".into(), json!(next_id("evt")));
    map.insert("event".into(), json!(event));
    map.insert("request_id".into(), json!(origin.request_id));
    map.insert("mode".into(), json!(origin.mode));
    map.insert("tool".into(), json!(origin.tool));
    map.insert("task_id".into(), json!(origin.task_id));
    map.insert("trace_id".into(), json!(trace_id));
    map.insert("span_id".into(), json!(span_id));
    map.insert("pid".into(), json!(std::process::id()));
    if let Value::Object(extra) = extra {
        map.extend(extra);
    }
    let mut line = Value::Object(map).to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_carry_every_common_field() {
        // The contract's common fields are present on every record.
        let origin = Origin::request("direct", "price_option_t");
        let line = record(&origin, "request_started", json!({"status": "x"}));
        let value: Value = serde_json::from_str(&line).unwrap();
        for key in [
            "timestamp",
            "event_id",
            "event",
            "request_id",
            "mode",
            "tool",
            "task_id",
            "trace_id",
            "span_id",
            "pid",
        ] {
            assert!(value.get(key).is_some(), "missing {key}");
        }
        assert!(value["timestamp"].as_str().unwrap().ends_with('Z'));
        assert_eq!(value["status"], "x");
    }
}
