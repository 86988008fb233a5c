//! `function_calls.json`: every guard call of a task, written as it happens.
//!
//! A script may make 100,000 inline calls; keeping their records in memory
//! and serializing them when the task ends put ~40 ms after the last call.
//! The log is streamed instead — a JSON array with one record per line, so
//! it stays readable and valid once [`CallLog::close`] has written the
//! closing bracket — and only the counts a task result needs stay in
//! memory. A write error never fails a call: the counts stay right.
//!
//! The log is streamed to a temporary file (0600) beside it and becomes
//! `function_calls.json` only when whole: [`CallLog::close`] flushes and
//! renames it into place (the task's commit makes it durable), so a reader never sees a truncated
//! or empty log (a full disk used to leave 0 bytes). When the records
//! could not all be written, the file holds one record with the counts of
//! every call and the reason instead (written the same way); when not
//! even that fits, there is no file, never a torn one.
//!
//! The file is bounded like the event log: after
//! [`DEFAULT_CALLS_RECORDED`] records, later calls are only counted, and
//! [`CallLog::close`] ends the array with one summary record — `{"summarized":
//! true, "calls", "failed", "by_function", "by_error_type", "duration_ms"}` —
//! so the records plus the summary always add up to every call made.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::limits::DEFAULT_CALLS_RECORDED;
use warden_calls::events::recovered::{self, SideEffect};

/// Every guard call of a task, in its directory.
pub const FUNCTION_CALLS_FILE: &str = "function_calls.json";

/// Distinct functions or error types a summary counts by name: 100; the
/// rest are counted under `"(other)"`.
const SUMMARY_KEYS: usize = 100;

/// Bytes gathered before a write: 64 KiB.
const CALL_LOG_BUFFER: usize = 64 * 1024;

/// One guard call, as function_calls.json has it: `{"function", "status",
/// "error_type", "duration_ms", "execution", "arguments_sha256",
/// "output_sha256"}` (the hashes as a call receipt has them, see
/// `warden_core::receipt`; null when unknown: a refused call, a failed
/// call's output, a script-only function).
#[derive(Debug, Clone)]
pub struct CallRecord<'a> {
    pub function: &'a str,
    /// success | failed | timed_out | cancelled | rejected
    pub status: &'static str,
    pub error_type: Option<&'a str>,
    /// Written as milliseconds with six decimals (exact, no float printing).
    pub duration_ns: u64,
    /// isolated | in_process | pure_inline | script_inline (a script-only
    /// function)
    pub execution: &'static str,
    pub arguments_sha256: Option<&'a str>,
    pub output_sha256: Option<&'a str>,
}

impl CallRecord<'_> {
    /// Appends the record's JSON object. Written by hand: a 100,000-call
    /// script spent a tenth of its server time in serde's generic writer.
    fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(br#"{"function":"#);
        warden_core::json::push_str(out, self.function);
        out.extend_from_slice(br#","status":""#);
        out.extend_from_slice(self.status.as_bytes());
        out.extend_from_slice(br#"","error_type":"#);
        match self.error_type {
            Some(code) => warden_core::json::push_str(out, code),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(br#","duration_ms":"#);
        let mut number = itoa::Buffer::new();
        out.extend_from_slice(number.format(self.duration_ns / 1_000_000).as_bytes());
        let fraction = number.format(1_000_000 + self.duration_ns % 1_000_000);
        out.push(b'.');
        out.extend_from_slice(&fraction.as_bytes()[1..]);
        out.extend_from_slice(br#","execution":""#);
        out.extend_from_slice(self.execution.as_bytes());
        out.extend_from_slice(br#"","arguments_sha256":"#);
        push_optional(out, self.arguments_sha256);
        out.extend_from_slice(br#","output_sha256":"#);
        push_optional(out, self.output_sha256);
        out.push(b'}');
    }

    /// The record's line in the task's calls digest: the canonical JSON
    /// array `[function, status, arguments_sha256, output_sha256]`, then a
    /// newline (see `docs/receipts.md`).
    fn write_digest_line(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        warden_core::json::push_str(out, self.function);
        out.extend_from_slice(b",\"");
        out.extend_from_slice(self.status.as_bytes());
        out.extend_from_slice(b"\",");
        push_optional(out, self.arguments_sha256);
        out.push(b',');
        push_optional(out, self.output_sha256);
        out.extend_from_slice(b"]\n");
    }
}

fn push_optional(out: &mut Vec<u8>, text: Option<&str>) {
    match text {
        Some(text) => warden_core::json::push_str(out, text),
        None => out.extend_from_slice(b"null"),
    }
}

/// How many calls a task made, and how many succeeded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCounts {
    pub made: usize,
    pub ok: usize,
}

/// Calls beyond the recorded ones, counted for the closing summary.
#[derive(Debug, Default)]
struct Summary {
    calls: u64,
    failed: u64,
    duration_ns: u64,
    by_function: BTreeMap<String, u64>,
    by_error_type: BTreeMap<String, u64>,
}

impl Summary {
    fn add(&mut self, record: &CallRecord<'_>) {
        self.calls += 1;
        if record.status != "success" {
            self.failed += 1;
        }
        self.duration_ns = self.duration_ns.saturating_add(record.duration_ns);
        bump(&mut self.by_function, record.function);
        if let Some(code) = record.error_type {
            bump(&mut self.by_error_type, code);
        }
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "summarized": true,
            "calls": self.calls,
            "failed": self.failed,
            "by_function": self.by_function,
            "by_error_type": self.by_error_type,
            "duration_ms": self.duration_ns as f64 / 1e6,
            "note": format!("calls after the first {DEFAULT_CALLS_RECORDED} are counted here, not listed one by one"),
        })
    }
}

fn bump(map: &mut BTreeMap<String, u64>, key: &str) {
    if let Some(n) = map.get_mut(key) {
        *n += 1;
    } else if map.len() < SUMMARY_KEYS {
        map.insert(key.to_string(), 1);
    } else {
        *map.entry("(other)".to_string()).or_default() += 1;
    }
}

/// The open log of one task.
pub struct CallLog {
    /// The temporary file being streamed; `None` when it could not be
    /// created or written, or after `close`.
    file: Option<BufWriter<File>>,
    /// Where the log goes once whole.
    path: PathBuf,
    /// The temporary file's path, beside `path`.
    temp: PathBuf,
    /// Why the records could not all be written, if they could not.
    failure: Option<String>,
    counts: CallCounts,
    /// Records written one by one before calls are only summarized.
    recorded_max: usize,
    summary: Summary,
    /// One record's bytes, reused.
    scratch: Vec<u8>,
    /// SHA-256 over every call's digest line, recorded one by one or only
    /// summarized: the task receipt's `calls_sha256`.
    digest: warden_core::receipt::Hasher,
    /// While set, a copy of every record pushed: the records one request
    /// of a journaled run made (see `super::journal`).
    tap: Option<Vec<Logged>>,
}

/// A [`CallRecord`] owned, as a journal keeps it to write it again when
/// the call is answered from the journal.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Logged {
    pub function: String,
    pub status: String,
    #[serde(default)]
    pub error_type: Option<String>,
    pub duration_ns: u64,
    pub execution: String,
    #[serde(default)]
    pub arguments_sha256: Option<String>,
    #[serde(default)]
    pub output_sha256: Option<String>,
}

impl Logged {
    fn of(record: &CallRecord<'_>) -> Self {
        Self {
            function: record.function.to_string(),
            status: record.status.to_string(),
            error_type: record.error_type.map(str::to_string),
            duration_ns: record.duration_ns,
            execution: record.execution.to_string(),
            arguments_sha256: record.arguments_sha256.map(str::to_string),
            output_sha256: record.output_sha256.map(str::to_string),
        }
    }

    /// The record to push again (a status or execution this build does
    /// not know reads as `failed` / `in_process`).
    pub fn record(&self) -> CallRecord<'_> {
        const STATUSES: [&str; 5] = ["success", "failed", "timed_out", "cancelled", "rejected"];
        const EXECUTIONS: [&str; 4] = ["isolated", "in_process", "pure_inline", "script_inline"];
        let known = |list: &[&'static str], word: &str, default: &'static str| -> &'static str {
            list.iter().copied().find(|w| *w == word).unwrap_or(default)
        };
        CallRecord {
            function: &self.function,
            status: known(&STATUSES, &self.status, "failed"),
            error_type: self.error_type.as_deref(),
            duration_ns: self.duration_ns,
            execution: known(&EXECUTIONS, &self.execution, "in_process"),
            arguments_sha256: self.arguments_sha256.as_deref(),
            output_sha256: self.output_sha256.as_deref(),
        }
    }
}

impl CallLog {
    /// Starts `path` (the task's function_calls.json), 0600, never
    /// through a link.
    pub fn create(path: &Path) -> Self {
        Self::with_limit(path, DEFAULT_CALLS_RECORDED)
    }

    /// [`CallLog::create`] recording at most `recorded_max` calls one by one.
    pub fn with_limit(path: &Path, recorded_max: usize) -> Self {
        let temp = path
            .parent()
            .unwrap_or(Path::new("."))
            .join(warden_calls::artifacts::safe_path::temporary_name());
        let opened = warden_calls::artifacts::safe_path::create_private(&temp).and_then(|file| {
            let mut file = BufWriter::with_capacity(CALL_LOG_BUFFER, file);
            file.write_all(b"[").map(|()| file)
        });
        let (file, failure) = match opened {
            Ok(file) => (Some(file), None),
            Err(error) => {
                let _ = std::fs::remove_file(&temp);
                (None, Some(error.to_string()))
            }
        };
        Self {
            file,
            path: path.to_path_buf(),
            temp,
            failure,
            counts: CallCounts::default(),
            recorded_max,
            summary: Summary::default(),
            scratch: Vec::with_capacity(320),
            digest: Default::default(),
            tap: None,
        }
    }

    /// Starts keeping a copy of every record pushed, until [`CallLog::untap`].
    pub fn tap(&mut self) {
        self.tap = Some(Vec::new());
    }

    /// The records pushed since [`CallLog::tap`]; stops keeping copies.
    pub fn untap(&mut self) -> Vec<Logged> {
        self.tap.take().unwrap_or_default()
    }

    /// Appends one record.
    pub fn push(&mut self, record: &CallRecord<'_>) {
        if let Some(tap) = self.tap.as_mut() {
            tap.push(Logged::of(record));
        }
        let first = self.counts.made == 0;
        self.counts.made += 1;
        if record.status == "success" {
            self.counts.ok += 1;
        }
        self.scratch.clear();
        record.write_digest_line(&mut self.scratch);
        self.digest.update(&self.scratch);
        if self.counts.made > self.recorded_max {
            self.summary.add(record);
            return;
        }
        let Some(file) = self.file.as_mut() else { return };
        self.scratch.clear();
        self.scratch.extend_from_slice(if first { b"\n" } else { b",\n" });
        record.write_json(&mut self.scratch);
        if let Err(error) = file.write_all(&self.scratch) {
            self.abandon(error);
        }
    }

    /// Gives up the streamed records after a write error: the temporary
    /// file goes, and `close` writes the counts instead.
    fn abandon(&mut self, error: std::io::Error) {
        self.file = None;
        let _ = std::fs::remove_file(&self.temp);
        self.failure.get_or_insert_with(|| error.to_string());
    }

    pub fn counts(&self) -> CallCounts {
        self.counts
    }

    /// `sha256:` and the hex SHA-256 over every call's digest line so far,
    /// in the order they settled.
    pub fn digest(&self) -> String {
        self.digest.clone().finish()
    }

    /// Writes the closing bracket and flushes. Records pushed later (by a
    /// guard that outlived its task) are counted but not written.
    /// The log is put in place whole (flushed, renamed), or, if its
    /// records could not all be written, replaced by the counts. It is
    /// made durable by the task's commit (its `result.json`, written after
    /// the session ends: see `warden_calls::artifacts::safe_path::Durability`).
    pub fn close(&mut self) {
        if let Some(mut file) = self.file.take() {
            let mut tail = Vec::new();
            if self.summary.calls > 0 {
                tail.extend_from_slice(format!(",\n{}", self.summary.to_json()).as_bytes());
            }
            tail.extend_from_slice(b"\n]\n");
            let whole = file
                .write_all(&tail)
                .and_then(|()| file.into_inner().map_err(|e| e.into_error()))
                .and_then(|_file| std::fs::rename(&self.temp, &self.path));
            match whole {
                Ok(()) => return,
                Err(error) => self.abandon(error),
            }
        }
        if let Some(reason) = self.failure.take() {
            self.write_counts(&reason);
        }
    }

    /// Writes, in place of the records, one record with the counts of
    /// every call and why the records are missing: through a temporary
    /// file renamed into place, or not at all.
    fn write_counts(&self, reason: &str) {
        let record = serde_json::json!([{
            "summarized": true,
            "calls": self.counts.made,
            "failed": self.counts.made - self.counts.ok,
            "note": format!("the per-call records could not be written ({reason}); these counts cover every call"),
        }]);
        let mut text = serde_json::to_vec_pretty(&record).unwrap_or_default();
        text.push(b'\n');
        let whole = warden_calls::artifacts::safe_path::create_private(&self.temp)
            .and_then(|mut file| file.write_all(&text))
            .and_then(|()| std::fs::rename(&self.temp, &self.path));
        if whole.is_err() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

impl Drop for CallLog {
    /// A log never closed (its session ended abruptly) is put in place
    /// like a closed one, so no temporary file is left behind.
    fn drop(&mut self) {
        self.close();
    }
}

/// A dead task's `function_calls.json` (`existing`, the one its last
/// pause wrote, if any) with the side effects it started since that pause
/// appended — each as a record like any call's, `unknown` for one that
/// never settled — and one closing record `{"interrupted": true, "note"}`
/// saying what the list lacks. The records of `existing` are kept as they
/// are; a file that cannot be read is replaced, and the note says so.
/// See `warden_calls::events::recovered`.
pub fn recovered(existing: Option<&[u8]>, side_effects: &[SideEffect], cut: bool) -> Vec<u8> {
    // The list as written, byte for byte, up to its closing bracket; a
    // file that is not a JSON list is not kept.
    let kept = existing.filter(|bytes| serde_json::from_slice::<Vec<serde::de::IgnoredAny>>(bytes).is_ok());
    let unreadable = existing.is_some() && kept.is_none();
    let mut out = match kept {
        Some(bytes) => bytes
            .trim_ascii()
            .strip_suffix(b"]")
            .unwrap_or(b"[")
            .trim_ascii_end()
            .to_vec(),
        None => b"[".to_vec(),
    };
    let mut separator: &[u8] = if out == b"[" { b"\n" } else { b",\n" };
    for side_effect in side_effects.iter().filter(|s| s.since_pause) {
        out.extend_from_slice(separator);
        CallRecord {
            function: &side_effect.function,
            status: match side_effect.status.as_str() {
                "success" => "success",
                "timed_out" => "timed_out",
                "cancelled" => "cancelled",
                "failed" => "failed",
                _ => recovered::UNKNOWN,
            },
            error_type: match side_effect.status.as_str() {
                "success" => None,
                recovered::UNKNOWN => Some(INTERRUPTED),
                _ => side_effect.error_type.as_deref(),
            },
            duration_ns: 0,
            execution: if side_effect.isolated {
                "isolated"
            } else {
                "in_process"
            },
            arguments_sha256: side_effect.arguments_sha256.as_deref(),
            output_sha256: side_effect.output_sha256.as_deref(),
        }
        .write_json(&mut out);
        separator = b",\n";
    }
    let mut note = String::from(
        "the server stopped while this task ran: the records above are those written when it last paused (if it did), \
         then every call of a destructive guard it started since (each written to its events.jsonl before it ran; \
         status unknown: it started and may have taken effect). Other calls since its last pause are in the server's \
         events.jsonl only",
    );
    if unreadable {
        note.push_str("; the list written at its last pause could not be read and is not kept");
    }
    if cut {
        note.push_str("; its events.jsonl reached its cap, so side effects after that are in the server's events.jsonl only");
    }
    out.extend_from_slice(separator);
    out.extend_from_slice(
        &serde_json::to_vec(&serde_json::json!({"interrupted": true, "note": note})).unwrap_or_default(),
    );
    out.extend_from_slice(b"\n]\n");
    out
}

/// The `error_type` of a recovered side effect that did not succeed.
const INTERRUPTED: &str = "interrupted";

#[cfg(test)]
mod tests {
    use super::*;

    fn side_effect(function: &str, status: &str, since_pause: bool) -> SideEffect {
        serde_json::from_value::<SideEffect>(serde_json::json!({
            "function": function, "status": status, "arguments_sha256": "sha256:aa",
            "error_type": (status == "failed").then_some("invalid_input"),
        }))
        .map(|mut s| {
            s.since_pause = since_pause;
            s
        })
        .expect("a side effect")
    }

    #[test]
    fn a_dead_tasks_list_keeps_what_its_pause_wrote_and_adds_the_side_effects_since() {
        let paused = br#"[
{"function":"place_paper_order","status":"failed","error_type":"input_required","duration_ms":0.000000,"execution":"in_process","arguments_sha256":null,"output_sha256":null}
]
"#;
        let effects = [
            side_effect("wipe", "success", false),
            side_effect("place_paper_order", "success", true),
            side_effect("place_paper_order", "failed", true),
            side_effect("place_paper_order", recovered::UNKNOWN, true),
        ];
        let text = super::recovered(Some(paused), &effects, false);
        let list: Vec<serde_json::Value> = serde_json::from_slice(&text).expect("valid JSON");
        let seen: Vec<_> = list
            .iter()
            .map(|r| (r["status"].as_str(), r["error_type"].as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                (Some("failed"), Some("input_required")),
                (Some("success"), None),
                (Some("failed"), Some("invalid_input")),
                (Some("unknown"), Some("interrupted")),
                (None, None),
            ]
        );
        assert_eq!(list[1]["arguments_sha256"], "sha256:aa");
        assert!(
            text.starts_with(&paused[..paused.len() - 3]),
            "the paused records are kept byte for byte"
        );
        for empty in [&b"[]\n"[..], b" [ \n ] "] {
            let list: Vec<serde_json::Value> =
                serde_json::from_slice(&super::recovered(Some(empty), &effects[1..2], false)).expect("JSON");
            assert_eq!(list.len(), 2);
        }
        assert_eq!(list[4]["interrupted"], true);
        // One record per line, as a streamed log has them.
        assert_eq!(String::from_utf8_lossy(&text).lines().count(), 7);

        // No list (it never paused) or one that cannot be read: the side effects alone, and the note says which.
        let fresh: Vec<serde_json::Value> =
            serde_json::from_slice(&super::recovered(None, &effects[1..2], true)).expect("JSON");
        assert_eq!(fresh.len(), 2);
        assert!(
            fresh[1]["note"]
                .as_str()
                .is_some_and(|n| n.contains("reached its cap"))
        );
        let torn: Vec<serde_json::Value> =
            serde_json::from_slice(&super::recovered(Some(b"[\n{\"fun"), &effects[1..2], false))
                .expect("JSON");
        assert_eq!(torn.len(), 2);
        assert!(
            torn[1]["note"]
                .as_str()
                .is_some_and(|n| n.contains("could not be read"))
        );
    }

    fn record(status: &'static str) -> CallRecord<'static> {
        CallRecord {
            function: "add",
            status,
            error_type: (status != "success").then_some("invalid \"input\""),
            duration_ns: 1_500_042,
            execution: "pure_inline",
            arguments_sha256: Some("sha256:00"),
            output_sha256: None,
        }
    }

    #[test]
    fn the_log_is_a_json_array_with_one_record_per_line() {
        // Streamed records parse back as the array they describe, with the counts.
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("function_calls.json");
        let mut log = CallLog::create(&path);
        log.push(&record("success"));
        log.push(&record("failed"));
        log.close();
        log.push(&record("success"));
        assert_eq!(log.counts(), CallCounts { made: 3, ok: 2 });
        let text = std::fs::read_to_string(&path).expect("log");
        let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(value.as_array().map(Vec::len), Some(2));
        assert_eq!(value[1]["error_type"], "invalid \"input\"");
        assert_eq!(value[1]["duration_ms"], 1.500042);
        assert_eq!(text.lines().count(), 4, "{text}");
    }

    #[test]
    fn calls_beyond_the_recorded_ones_are_summarized() {
        // Past the bound the file keeps N records plus one summary; records + summary = every call.
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("function_calls.json");
        let mut log = CallLog::with_limit(&path, 3);
        for i in 0..10 {
            log.push(&record(if i % 2 == 0 { "success" } else { "failed" }));
        }
        log.close();
        assert_eq!(log.counts(), CallCounts { made: 10, ok: 5 });
        let value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("log")).expect("valid JSON");
        let items = value.as_array().expect("array");
        assert_eq!(items.len(), 4);
        assert_eq!(items[3]["summarized"], true);
        assert_eq!(items[3]["calls"], 7);
        assert_eq!(items[3]["failed"], 4);
        assert_eq!(items[3]["by_function"]["add"], 7);
    }

    #[test]
    fn an_empty_log_is_an_empty_array() {
        // A task that made no call still leaves valid JSON.
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("function_calls.json");
        let mut log = CallLog::create(&path);
        log.close();
        let value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("log")).expect("valid JSON");
        assert_eq!(value, serde_json::json!([]));
    }

    #[test]
    fn a_log_that_cannot_be_written_is_never_left_truncated() {
        // Until close, function_calls.json does not exist (the records go to a temporary file,
        // renamed whole); a log whose writes failed leaves the counts of every call
        // and the reason, never a torn or empty file, and no temporary file.
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("function_calls.json");
        let mut log = CallLog::create(&path);
        log.push(&record("success"));
        assert!(!path.exists(), "the log appears only when whole");
        drop(log);
        let value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("log")).expect("valid JSON");
        assert_eq!(value.as_array().map(Vec::len), Some(1));
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("list")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            vec!["function_calls.json".to_string()],
            "no temporary file left"
        );
        // A write that fails part-way: the records give way to the counts.
        let mut log = CallLog::create(&path);
        log.push(&record("success"));
        log.push(&record("failed"));
        log.abandon(std::io::Error::other("no space left on device"));
        log.push(&record("success"));
        log.close();
        let value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("log")).expect("valid JSON");
        assert_eq!(value[0]["calls"], 3, "{value}");
        assert_eq!(value[0]["failed"], 1, "{value}");
        assert!(
            value[0]["note"].as_str().unwrap_or_default().contains("no space"),
            "{value}"
        );
    }
}
