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

/// Operations between two deadline checks (a clock read costs ~20 ns).
const DEADLINE_CHECK_EVERY: u64 = 4096;

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
