//! What a task whose server died had started, read back from its own
//! `events.jsonl`.
//!
//! A task's files are written as it ends ([`crate::artifacts`]'s one
//! commit), so a task whose server was killed or whose machine lost power
//! has none of the guard calls it made since it last paused — an order the
//! person approved included. Side effects are the exception: the records of
//! a destructive guard's call are written through to the task's log before
//! the function runs and when it settles (`executor::lifecycle`), so
//! [`side_effects`] finds every one the task started and how far each got.
//! The server that settles the dead task puts them in its result and its
//! `function_calls.json` (`warden_task::records`).

use std::io::{BufRead, BufReader, Read};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Bytes of one record [`side_effects`] reads: 64 KiB. A record is far
/// smaller (every string in it is cut at
/// [`crate::limits::MAX_EVENT_STRING_BYTES`]); a longer line is skipped.
const MAX_RECORD_BYTES: u64 = 64 * 1024;

/// One call of a destructive guard, as the task's log has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideEffect {
    pub function: String,
    /// SHA-256 of the canonical arguments it ran with (as the approval and
    /// the receipt have it).
    pub arguments_sha256: Option<String>,
    /// How it settled (`success`, `failed`, `timed_out`, `cancelled`), or
    /// `unknown`: it started and the server died before it settled, so it
    /// may have taken effect.
    pub status: String,
    /// Why it did not succeed, when it settled so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// The person's answer that let it run, when one did (not for a
    /// direct call or the operator's standing permission): who answered
    /// which question, how, and when. The whole answer is in the task's
    /// records (`destructive_call_confirmed`, its receipt once it ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approved>,
    /// SHA-256 of what it returned, when it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_sha256: Option<String>,
    /// Started after the task last paused for the person: the
    /// `function_calls.json` written at that pause does not list it.
    #[serde(skip)]
    pub since_pause: bool,
    /// It ran in a worker process (`execution_mode` isolated).
    #[serde(skip)]
    pub isolated: bool,
    /// Pairs its start with its end in the log.
    #[serde(skip)]
    call_id: Option<String>,
}

impl SideEffect {
    /// A call of `function` with arguments hashing to `arguments_sha256`,
    /// started and not (yet) settled: status [`UNKNOWN`]. What a
    /// [`super::ledger::Ledger`] records before the call runs.
    pub fn started(function: &str, arguments_sha256: &str) -> Self {
        Self {
            function: function.to_string(),
            arguments_sha256: Some(arguments_sha256.to_string()),
            status: UNKNOWN.into(),
            error_type: None,
            approval: None,
            output_sha256: None,
            since_pause: true,
            isolated: false,
            call_id: None,
        }
    }

    /// The same side effect, let run by `approval` (see [`Self::approval`]).
    pub fn approved_by(self, approval: Option<Approved>) -> Self {
        Self { approval, ..self }
    }

    /// The same side effect, settled with `status` (and why, and the
    /// output's SHA-256 when it succeeded).
    pub fn settled(self, status: &str, error_type: Option<&str>, output_sha256: Option<String>) -> Self {
        Self {
            status: status.to_string(),
            error_type: error_type.map(str::to_string),
            output_sha256,
            ..self
        }
    }
}

/// Who approved a side effect, as its `destructive_call_confirmed` record
/// has it (see [`warden_core::approval::ApprovalRecord`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approved {
    /// `call-N` or `plan`.
    pub key: String,
    pub principal: String,
    /// `accept` (the form's box ticked), as the person answered.
    pub action: String,
    /// When, ISO 8601 UTC.
    pub at: String,
}

/// Approvals read and not yet matched to the call they let run, at most
/// this many (an approved call the executor then refused, cancelled or
/// past its deadline, leaves one).
const PENDING_APPROVALS: usize = 64;

/// The status of a side effect that started and never settled.
pub const UNKNOWN: &str = "unknown";

/// What [`side_effects`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// Every destructive call the task started, in order.
    pub side_effects: Vec<SideEffect>,
    /// The log reached its cap ([`crate::limits::DEFAULT_TASK_EVENTS_MAX_BYTES`]):
    /// calls after that are in the server's events.jsonl only.
    pub cut: bool,
    /// Approvals not yet matched to a call: (guard, arguments' SHA-256,
    /// who approved).
    pending: Vec<(String, Option<String>, Approved)>,
}

/// Reads a task's `events.jsonl` for the calls of destructive guards it
/// started (see the module docs). Streams the log a record at a time; a
/// record it cannot read is skipped.
pub fn side_effects(log: impl Read) -> Recovered {
    let mut found = Recovered::default();
    let mut reader = BufReader::new(log);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader).take(MAX_RECORD_BYTES).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) if line.last() != Some(&b'\n') && line.len() as u64 == MAX_RECORD_BYTES => {
                skip_line(&mut reader);
                continue;
            }
            Ok(_) => {}
        }
        read_record(&line, &mut found);
    }
    found
}

/// The approval that let `function` run with `arguments_sha256`: the
/// latest pending one for exactly that call, taken.
fn approval_of(
    pending: &mut Vec<(String, Option<String>, Approved)>,
    function: Option<&str>,
    arguments_sha256: Option<&str>,
) -> Option<Approved> {
    let at = pending.iter().rposition(|(f, sha, _)| {
        Some(f.as_str()) == function && sha.is_some() && sha.as_deref() == arguments_sha256
    })?;
    Some(pending.remove(at).2)
}

/// Reads past the rest of an overlong line.
fn skip_line(reader: &mut impl BufRead) {
    loop {
        let Ok(buffer) = reader.fill_buf() else { return };
        if buffer.is_empty() {
            return;
        }
        match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => {
                reader.consume(at + 1);
                return;
            }
            None => {
                let all = buffer.len();
                reader.consume(all);
            }
        }
    }
}

/// Takes one record into `found`, when it is one of the three kinds that
/// matter (found by their text first: most records are not).
fn read_record(line: &[u8], found: &mut Recovered) {
    let text = String::from_utf8_lossy(line);
    let pause = text.contains(r#""event":"task_waiting""#);
    let cut = text.contains(r#""event":"task_events_truncated""#);
    let side_effect = text.contains(r#""destructive":true"#);
    let confirmed = text.contains(r#""event":"destructive_call_confirmed""#);
    if !(pause || cut || side_effect || confirmed) {
        return;
    }
    let Ok(record) = serde_json::from_str::<Value>(&text) else {
        return;
    };
    let field = |key: &str| record.get(key).and_then(Value::as_str).map(str::to_string);
    let side_effect = record.get("destructive") == Some(&Value::Bool(true));
    match record.get("event").and_then(Value::as_str) {
        Some("task_waiting") => found.side_effects.iter_mut().for_each(|s| s.since_pause = false),
        Some("task_events_truncated") => found.cut = true,
        Some("destructive_call_confirmed") if record.get("approved") == Some(&Value::Bool(true)) => {
            let approval = &record["approval"];
            let text = |key: &str| {
                approval
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let approved = Approved {
                key: text("key"),
                principal: text("principal"),
                action: text("action"),
                at: text("at"),
            };
            if found.pending.len() == PENDING_APPROVALS {
                found.pending.remove(0);
            }
            // Every call a plan admits has a record of its own, naming it.
            found.pending.push((
                field("function").unwrap_or_default(),
                field("arguments_sha256"),
                approved,
            ));
        }
        Some("function_call_started") if side_effect => found.side_effects.push(SideEffect {
            function: field("function").unwrap_or_default(),
            arguments_sha256: field("arguments_sha256"),
            approval: approval_of(
                &mut found.pending,
                field("function").as_deref(),
                field("arguments_sha256").as_deref(),
            ),
            status: UNKNOWN.into(),
            error_type: None,
            output_sha256: None,
            since_pause: true,
            isolated: field("execution_mode").as_deref() == Some("isolated"),
            call_id: field("call_id"),
        }),
        Some("function_call_finished") if side_effect => {
            let call_id = field("call_id");
            if let Some(started) = found
                .side_effects
                .iter_mut()
                .rev()
                .find(|s| s.status == UNKNOWN && s.call_id == call_id)
            {
                started.status = field("status").unwrap_or_else(|| UNKNOWN.into());
                started.error_type = field("error_type");
                started.output_sha256 = field("output_sha256");
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(record: Value) -> String {
        format!("{record}\n")
    }

    #[test]
    fn every_side_effect_is_found_with_how_far_it_got_and_whether_the_last_pause_listed_it() {
        let mut log = String::new();
        log += &line(
            serde_json::json!({"event": "function_call_started", "function": "get_quote", "call_id": "c0"}),
        );
        log += &line(
            serde_json::json!({"event": "function_call_started", "function": "wipe", "call_id": "c1",
            "destructive": true, "arguments_sha256": "sha256:aa", "execution_mode": "isolated"}),
        );
        log += &line(
            serde_json::json!({"event": "function_call_finished", "function": "wipe", "call_id": "c1",
            "destructive": true, "status": "success", "output_sha256": "sha256:bb"}),
        );
        log += &line(serde_json::json!({"event": "task_waiting", "key": "call-2"}));
        // An overlong line (a record this build never writes) is skipped whole.
        log += &format!(
            "{{\"event\":\"function_call_started\",\"destructive\":true,\"pad\":\"{}\"}}\n",
            "x".repeat(70_000)
        );
        // The person's answer, then the call it let run; a refused answer lets nothing run.
        log += &line(
            serde_json::json!({"event": "destructive_call_confirmed", "function": "order",
            "approved": false, "action": "refused", "arguments_sha256": "sha256:cc"}),
        );
        log += &line(
            serde_json::json!({"event": "destructive_call_confirmed", "function": "order",
            "approved": true, "action": "accept", "arguments_sha256": "sha256:cc",
            "approval": {"key": "call-2", "principal": "alice", "action": "accept", "at": "2026-12-07T08:00:00Z"}}),
        );
        log += &line(
            serde_json::json!({"event": "function_call_started", "function": "order", "call_id": "c2",
            "destructive": true, "arguments_sha256": "sha256:cc", "execution_mode": "in_process"}),
        );
        log += &line(
            serde_json::json!({"event": "function_call_finished", "function": "order", "call_id": "c2",
            "destructive": true, "status": "failed", "error_type": "invalid_input", "output_sha256": null}),
        );
        log += &line(
            serde_json::json!({"event": "function_call_started", "function": "order", "call_id": "c3",
            "destructive": true, "arguments_sha256": "sha256:dd"}),
        );
        // A torn last record (the machine died mid-write) is not one.
        log +=
            r#"{"event":"function_call_finished","function":"order","call_id":"c3","destructive":true,"stat"#;

        let found = side_effects(log.as_bytes());
        let seen: Vec<_> = found
            .side_effects
            .iter()
            .map(|s| (s.function.as_str(), s.status.as_str(), s.since_pause, s.isolated))
            .collect();
        assert_eq!(
            seen,
            [
                ("wipe", "success", false, true),
                ("order", "failed", true, false),
                ("order", UNKNOWN, true, false)
            ]
        );
        assert_eq!(found.side_effects[0].output_sha256.as_deref(), Some("sha256:bb"));
        assert_eq!(found.side_effects[1].error_type.as_deref(), Some("invalid_input"));
        assert_eq!(
            found.side_effects[2].arguments_sha256.as_deref(),
            Some("sha256:dd")
        );
        let approval = found.side_effects[1].approval.as_ref().expect("who approved it");
        assert_eq!(
            (approval.key.as_str(), approval.principal.as_str()),
            ("call-2", "alice")
        );
        assert_eq!(approval.at, "2026-12-07T08:00:00Z");
        assert!(found.side_effects[0].approval.is_none() && found.side_effects[2].approval.is_none());
        assert!(!found.cut);
    }

    #[test]
    fn a_log_cut_at_its_cap_says_so() {
        let log = line(serde_json::json!({"event": "task_events_truncated", "limit_bytes": 1}));
        let found = side_effects(log.as_bytes());
        assert!(found.cut && found.side_effects.is_empty());
    }
}
