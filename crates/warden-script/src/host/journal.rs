//! The journal of a run that may pause: every guard call the script made
//! through the door, with the answer it got, so that a resumed run gets
//! the same answers without running anything again.
//!
//! A detached task that waits for the person ends its worker; when the
//! answer comes, the script runs again from the top (on whichever node
//! claims it). Each `guard_call` and `map_call` it sends is then compared
//! with the journal's entry at the same position: the same function and
//! the same SHA-256 of canonical arguments are answered with the recorded
//! reply (and its function_calls.json records are written again, so the
//! log and the receipt's `calls_sha256` are those of a run that never
//! paused); anything else is a *divergence*, which ends the run naming the
//! first differing call. Past the journal's end the run is live again, and
//! its calls are journaled in turn.
//!
//! Pure guards and script-only functions run inline in the worker and are
//! recomputed (they are deterministic by contract); artifact writes are
//! made again with the same content. Rhai's only non-deterministic
//! built-ins are `timestamp()` and `elapsed`: a script whose guard
//! arguments depend on them diverges on resume and fails, rather than
//! running with values the person never saw. There is no randomness and
//! no environment access in the engine.
//!
//! A journal is bounded by [`MAX_JOURNAL_BYTES`] as stored: a run whose
//! journal outgrows it cannot pause, and fails naming the limit.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::calls::Logged;
use crate::limits::MAX_JOURNAL_BYTES;
use warden_core::error::GuardError;

/// One request answered through the door.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The guard called.
    pub guard: String,
    /// Whether it was a `map_call` (its arguments are the items).
    #[serde(default)]
    pub map: bool,
    /// SHA-256 of the canonical arguments (of the item list for a map).
    pub arguments_sha256: String,
    /// The reply the worker got.
    pub result: Result<Value, GuardError>,
    /// How many of the approvals' decisions it took (a destructive call:
    /// one; a planned destructive map: one per item): replayed, it takes
    /// them again, so the calls after it keep their keys and plan counts.
    #[serde(default)]
    pub decisions: u64,
    /// The function_calls.json records it made.
    #[serde(default)]
    pub records: Vec<Logged>,
}

impl Entry {
    fn describe(guard: &str, map: bool, arguments_sha256: &str) -> String {
        if map {
            format!("map_call('{guard}', items {arguments_sha256})")
        } else {
            format!("{guard}(arguments {arguments_sha256})")
        }
    }
}

/// A run's journal: the entries to replay (from an earlier run of the same
/// task) and those recorded so far (replayed ones included).
#[derive(Debug, Default)]
pub struct Journal {
    replay: Vec<Entry>,
    /// Next entry of `replay` to answer.
    cursor: usize,
    recorded: Vec<Entry>,
    /// The live request being answered, recorded when its reply is sent.
    open: Option<Entry>,
}

/// What the journal says of a request.
pub enum Step {
    /// Answer it with this recorded entry.
    Replay(Entry),
    /// Run it; its reply is recorded.
    Live,
    /// The script now makes another call than the run it resumes: the
    /// message names both.
    Diverged(String),
}

/// Why a journal cannot be read back or kept; the message says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    #[error("the task's journal cannot be read: {0}")]
    Unreadable(String),
    #[error("the journal cannot be written: {0}")]
    Unwritable(String),
    #[error(
        "the run cannot pause for the person: its journal of {calls} guard calls is {bytes} bytes, above the \
         {max}-byte limit (MAX_JOURNAL_BYTES); return less from the calls before the question (write large data \
         to artifacts), or ask before the heavy work",
        max = MAX_JOURNAL_BYTES
    )]
    TooLarge { calls: usize, bytes: usize },
}

impl Journal {
    /// A journal replaying `carried` (entries as a paused run kept them).
    pub fn resuming(carried: &[Value]) -> Result<Self, JournalError> {
        let replay = carried
            .iter()
            .map(Entry::deserialize)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| JournalError::Unreadable(e.to_string()))?;
        Ok(Self {
            replay,
            ..Self::default()
        })
    }

    /// The `n`-th request of the run: answered from the journal while it
    /// lasts, else live.
    pub fn step(&mut self, guard: &str, map: bool, arguments_sha256: &str, decisions: u64) -> Step {
        let Some(entry) = self.replay.get(self.cursor) else {
            self.open = Some(Entry {
                guard: guard.to_string(),
                map,
                arguments_sha256: arguments_sha256.to_string(),
                result: Ok(Value::Null),
                decisions,
                records: Vec::new(),
            });
            return Step::Live;
        };
        if entry.guard != guard || entry.map != map || entry.arguments_sha256 != arguments_sha256 {
            return Step::Diverged(format!(
                "the resumed script diverged at guard call {} of the run it resumes: that run called {}, this one calls {}; \
                 a script that pauses for the person must make the same calls up to the question (its guard arguments must not \
                 depend on timestamp() or elapsed)",
                self.cursor + 1,
                Entry::describe(&entry.guard, entry.map, &entry.arguments_sha256),
                Entry::describe(guard, map, arguments_sha256),
            ));
        }
        let entry = entry.clone();
        self.cursor += 1;
        self.recorded.push(entry.clone());
        Step::Replay(entry)
    }

    /// Records the reply to the live request opened by [`Journal::step`],
    /// with the records it made.
    pub fn answered(&mut self, result: &Result<Value, GuardError>, records: Vec<Logged>) {
        if let Some(mut entry) = self.open.take() {
            entry.result = result.clone();
            entry.records = records;
            self.recorded.push(entry);
        }
    }

    /// Drops the live request without a reply (the run paused on it: it
    /// runs on resume).
    pub fn abandon_open(&mut self) {
        self.open = None;
    }

    /// Whether a request is open.
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Entries replayed so far, and entries there were to replay.
    pub fn progress(&self) -> (usize, usize) {
        (self.cursor, self.replay.len())
    }

    /// The entries to keep for the next resumption, within
    /// [`MAX_JOURNAL_BYTES`] as JSON.
    pub fn carry(&self) -> Result<Vec<Value>, JournalError> {
        let entries: Vec<Value> = self
            .recorded
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()
            .map_err(|e| JournalError::Unwritable(e.to_string()))?;
        let size = warden_core::answer::size(&Value::Array(entries.clone()));
        if size > MAX_JOURNAL_BYTES {
            return Err(JournalError::TooLarge {
                calls: entries.len(),
                bytes: size,
            });
        }
        Ok(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resumed_run_is_answered_from_the_journal_then_runs_live() {
        let mut first = Journal::default();
        assert!(matches!(first.step("price", false, "sha256:a", 0), Step::Live));
        first.answered(&Ok(Value::from(4.2)), Vec::new());
        let carried = first.carry().expect("small");
        let mut resumed = Journal::resuming(&carried).expect("readable");
        match resumed.step("price", false, "sha256:a", 0) {
            Step::Replay(entry) => assert_eq!(entry.result, Ok(Value::from(4.2))),
            _ => panic!("replayed"),
        }
        assert!(matches!(resumed.step("order", false, "sha256:b", 1), Step::Live));
        assert_eq!(resumed.progress(), (1, 1));
    }

    #[test]
    fn a_different_call_at_a_recorded_position_is_a_divergence_naming_both() {
        let mut first = Journal::default();
        first.step("price", false, "sha256:a", 0);
        first.answered(&Ok(Value::Null), Vec::new());
        let mut resumed = Journal::resuming(&first.carry().expect("small")).expect("readable");
        match resumed.step("price", false, "sha256:z", 0) {
            Step::Diverged(message) => {
                assert!(message.contains("guard call 1"), "{message}");
                assert!(
                    message.contains("sha256:a") && message.contains("sha256:z"),
                    "{message}"
                );
            }
            _ => panic!("diverged"),
        }
    }
}
