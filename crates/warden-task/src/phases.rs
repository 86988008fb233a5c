//! Where a task's time went: the `task_finished` event's `phases_ms`, for
//! an operator asking why tasks are slow and for `scripts/bench`, which
//! prints them (issue 44: "find where the milliseconds go").
//!
//! Each phase is the time from the end of the one before (or the task's
//! first step) to its own mark; a phase a task never reached (a batch
//! starts no worker) is absent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde_json::{Map, Value};

/// A task's phases, in the order they happen.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Phase {
    /// Its slot, id, directory, store record and registry snapshot.
    Seat = 0,
    /// Its sandboxed worker forked, confined and saying hello.
    WorkerStart,
    /// Its script (or batch, or model loop) running, up to its result.
    Run,
    /// Its call log, outputs, receipt and committed result.json (and its
    /// copy in the object store, when there is one), while its worker
    /// exits and is reaped.
    Files,
    /// Its store record ended.
    Record,
}

const NAMES: [&str; 5] = ["seat", "worker_start", "run", "files", "record"];

/// Marks taken through `&self` (a task is shared across awaits):
/// nanoseconds since `begun`, 0 for a phase not reached.
#[derive(Debug)]
pub(crate) struct Phases {
    begun: Instant,
    marks: [AtomicU64; NAMES.len()],
}

impl Phases {
    pub(crate) fn new(begun: Instant) -> Self {
        Self {
            begun,
            marks: Default::default(),
        }
    }

    /// Ends `phase` now.
    pub(crate) fn mark(&self, phase: Phase) {
        let nanos = self.begun.elapsed().as_nanos().max(1);
        self.marks[phase as usize].store(u64::try_from(nanos).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// `{"seat": ms, …}`: each phase reached, in milliseconds (µs precision).
    pub(crate) fn to_json(&self) -> Value {
        let mut out = Map::new();
        let mut previous = 0;
        for (name, mark) in NAMES.iter().zip(&self.marks) {
            let at = mark.load(Ordering::Relaxed);
            if at == 0 {
                continue;
            }
            let micros = at.saturating_sub(previous) / 1_000;
            out.insert((*name).into(), Value::from(micros as f64 / 1_000.0));
            previous = at;
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_phase_is_the_time_since_the_one_before_and_unreached_ones_are_absent() {
        let phases = Phases::new(Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(2));
        phases.mark(Phase::Seat);
        std::thread::sleep(std::time::Duration::from_millis(3));
        phases.mark(Phase::Run);
        let json = phases.to_json();
        let seat = json["seat"].as_f64().expect("seat");
        let run = json["run"].as_f64().expect("run");
        assert!((2.0..50.0).contains(&seat), "{json}");
        assert!((3.0..50.0).contains(&run), "{json}");
        assert!(json.get("worker_start").is_none(), "{json}");
    }
}
