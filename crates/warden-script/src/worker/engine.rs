//! The locked-down Rhai engine.
//!
//! Built from `Engine::new_raw()` plus the standard package, so nothing
//! reaches files, processes or the network unless registered here, and
//! nothing is. `eval` is disabled and the module system is compiled out
//! (`no_module`). Every limit is set explicitly from [`crate::limits`]; a
//! wall-clock deadline is checked from `on_progress`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rhai::packages::{Package, StandardPackage};
use rhai::{Dynamic, Engine};

use crate::limits::{
    SCRIPT_MAX_ARRAY_ITEMS, SCRIPT_MAX_CALL_LEVELS, SCRIPT_MAX_EXPR_DEPTHS, SCRIPT_MAX_MAP_KEYS,
    SCRIPT_MAX_OPERATIONS, SCRIPT_MAX_OUTPUT_BYTES, SCRIPT_MAX_STRING_BYTES, SCRIPT_MAX_VARIABLES,
};

/// Value thrown through `on_progress` when the deadline passes.
pub const DEADLINE_MARK: &str = "__warden_deadline";

/// Operations between two deadline checks: 256. A check (the deadline's
/// lock and a clock read) costs about 40 ns, a fraction of a nanosecond per
/// operation at this spacing. An operation can be dear native work — a
/// string padded to 10,000 characters takes microseconds — so the spacing
/// sets how late a script notices its deadline: at 4,096 that loop stopped
/// itself 20–35 ms late on this VM, or not within the server's
/// [`crate::limits::SCRIPT_KILL_GRACE`] (50 ms) and was killed without the
/// classified `timeout` error; at 256 the whole task answered 7.5–20 ms
/// after its deadline, its own ending included (docs/benchmarks.md).
const DEADLINE_CHECK_EVERY: u64 = 256;

/// Output printed by a script, capped at [`SCRIPT_MAX_OUTPUT_BYTES`].
#[derive(Debug, Default)]
pub struct Output {
    pub text: String,
    pub truncated: bool,
}

impl Output {
    fn push(&mut self, line: &str) {
        if self.text.len() + line.len() + 1 > SCRIPT_MAX_OUTPUT_BYTES {
            self.truncated = true;
            return;
        }
        self.text.push_str(line);
        self.text.push('\n');
    }
}

/// Shared state the engine's callbacks need.
#[derive(Clone, Default)]
pub struct EngineState {
    pub deadline: Arc<Mutex<Option<Instant>>>,
    pub output: Arc<Mutex<Output>>,
}

/// A sandboxed engine with limits, deadline checks and captured output.
pub fn build(state: &EngineState) -> Engine {
    let mut engine = Engine::new_raw();
    engine.register_global_module(StandardPackage::new().as_shared_module());
    engine.disable_symbol("eval");
    engine.set_max_operations(SCRIPT_MAX_OPERATIONS);
    engine.set_max_call_levels(SCRIPT_MAX_CALL_LEVELS);
    engine.set_max_expr_depths(SCRIPT_MAX_EXPR_DEPTHS.0, SCRIPT_MAX_EXPR_DEPTHS.1);
    engine.set_max_string_size(SCRIPT_MAX_STRING_BYTES);
    engine.set_max_array_size(SCRIPT_MAX_ARRAY_ITEMS);
    engine.set_max_map_size(SCRIPT_MAX_MAP_KEYS);
    engine.set_max_variables(SCRIPT_MAX_VARIABLES);
    let deadline = state.deadline.clone();
    // Operation counts may jump, so check "at least N since the last check"
    // rather than exact multiples.
    let next_check = AtomicU64::new(0);
    engine.on_progress(move |operations| {
        if operations < next_check.load(Ordering::Relaxed) {
            return None;
        }
        next_check.store(operations + DEADLINE_CHECK_EVERY, Ordering::Relaxed);
        let due = deadline.lock().ok().and_then(|d| *d)?;
        (Instant::now() >= due).then(|| Dynamic::from(DEADLINE_MARK.to_string()))
    });
    let output = state.output.clone();
    engine.on_print(move |text| {
        if let Ok(mut output) = output.lock() {
            output.push(text);
        }
    });
    let output = state.output.clone();
    engine.on_debug(move |text, _source, position| {
        if let Ok(mut output) = output.lock() {
            output.push(&format!("[debug {position}] {text}"));
        }
    });
    engine
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicI64;
    use std::time::Duration;

    /// A script notices its deadline within `DEADLINE_CHECK_EVERY`
    /// operations of its passing, counted in operations rather than time so
    /// the test is the same on any machine: a native call (`nap`) outlives
    /// the deadline, then the loop counts how many iterations run before the
    /// engine stops it: about six operations each, so 41 at 256 operations
    /// between checks and 680 at 4,096.
    #[test]
    fn a_script_stops_within_the_check_spacing_once_its_deadline_passed() {
        let state = EngineState::default();
        let mut engine = build(&state);
        engine.register_fn("nap", || std::thread::sleep(Duration::from_millis(20)));
        let after = Arc::new(AtomicI64::new(0));
        let counted = after.clone();
        engine.register_fn("count", move |n: i64| counted.store(n, Ordering::Relaxed));
        *state.deadline.lock().unwrap() = Some(Instant::now() + Duration::from_millis(5));
        let stopped = engine
            .run("nap(); let n = 0; loop { n += 1; count(n); }")
            .expect_err("the loop never ends by itself");
        assert!(
            matches!(*stopped, rhai::EvalAltResult::ErrorTerminated(ref mark, _) if mark.to_string() == DEADLINE_MARK),
            "{stopped}"
        );
        let iterations = after.load(Ordering::Relaxed) as u64;
        assert!(
            iterations > 0 && iterations <= 64,
            "{iterations} iterations ran after the deadline passed"
        );
    }
}
