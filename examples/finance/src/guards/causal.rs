//! `assert_causal`: a script-only check that a signal does not look ahead.
//!
//! It takes a script function pointer, which JSON cannot carry, so it is a
//! [`ScriptFunction`] rather than a guard: `guards::app()` registers it, the
//! script worker registers it into its engine, and `list_guards` lists it as
//! script-only. It runs inside the script worker and does no I/O.

use serde_json::Value;
use warden::ScriptFunction;
use warden::rhai::{Array, Dynamic, Engine, EvalAltResult, FnPtr, INT, Map, NativeCallContext, Position};

/// The script-only function as the app registers it.
pub const ASSERT_CAUSAL: ScriptFunction = ScriptFunction {
    name: "assert_causal",
    category: "data-integrity",
    signature: "assert_causal(signal_fn, bars, k) -> #{guard, passed, checked, perturbations}",
    description: "Check that a signal function does not look ahead: its first k outputs must not change when bars[k..] change.\n\n\
`signal_fn` is a function pointer (Fn(\"name\") or a closure |bars| ...) that takes the whole array of bars and \
returns an array with exactly one output per bar, output[i] being the signal known at the close of bar i. \
`bars` is an array of numbers or of maps (every integer or float field of a map is perturbed; other fields are \
left alone). `k` is an integer from 1 to len(bars) - 1. The function computes the outputs on the original bars, \
then re-runs signal_fn on 4 deterministic copies in which every bar at index >= k is changed (shifted up, \
shifted down, alternately up and down, scrambled) and compares outputs[0..k] exactly (integers stay integers). \
A causal signal (output[i] uses only bars[0..=i]) passes and gets #{guard: \"assert_causal\", passed: true, \
checked: k, perturbations: 4}. A signal whose output at some index < k changed throws a catchable error map \
#{code: \"lookahead_detected\", message, where: \"output[i]\", index: i, perturbation}. Invalid arguments throw \
#{code: \"invalid_input\", message, field}; errors inside signal_fn propagate unchanged.",
    reason: "takes a script function pointer (signal_fn), which has no JSON form; call it from run_script or a coding task",
    register,
};

/// The perturbations applied to the future bars, in order.
const PERTURBATIONS: [&str; 4] = ["shift_up", "shift_down", "alternate", "scramble"];

/// Registers `assert_causal` on a script engine, under the name the
/// framework gives (it wraps it to record each call).
fn register(engine: &mut Engine, name: &str) {
    engine.register_fn(
        name,
        |ctx: NativeCallContext,
         signal_fn: FnPtr,
         bars: Array,
         k: INT|
         -> Result<Dynamic, Box<EvalAltResult>> { assert_causal(&ctx, &signal_fn, &bars, k) },
    );
}

fn assert_causal(
    ctx: &NativeCallContext,
    signal_fn: &FnPtr,
    bars: &Array,
    k: INT,
) -> Result<Dynamic, Box<EvalAltResult>> {
    let pos = ctx.call_position();
    let n = bars.len();
    if n < 2 {
        return Err(invalid(
            "bars",
            format!("bars: needs at least 2 bars, got {n}"),
            pos,
        ));
    }
    let k = usize::try_from(k)
        .ok()
        .filter(|k| (1..n).contains(k))
        .ok_or_else(|| {
            invalid(
                "k",
                format!("k: must be from 1 to {} (len(bars) - 1), got {k}", n - 1),
                pos,
            )
        })?;
    let original = outputs(ctx, signal_fn, bars, pos)?;
    for (p, name) in PERTURBATIONS.iter().enumerate() {
        let mut changed = bars.clone();
        for (i, bar) in changed.iter_mut().enumerate().skip(k) {
            *bar = perturb_bar(bar, p, i).map_err(|message| invalid("bars", message, pos))?;
        }
        let perturbed = outputs(ctx, signal_fn, &changed, pos)?;
        for i in 0..k {
            if original[i] != perturbed[i] {
                return Err(lookahead(i, k, name, &original[i], &perturbed[i], pos));
            }
        }
    }
    let mut result = Map::new();
    result.insert("guard".into(), ASSERT_CAUSAL.name.into());
    result.insert("passed".into(), true.into());
    result.insert("checked".into(), (k as INT).into());
    result.insert("perturbations".into(), (PERTURBATIONS.len() as INT).into());
    Ok(result.into())
}

/// Runs `signal_fn(bars)` and returns its outputs as JSON, one per bar.
fn outputs(
    ctx: &NativeCallContext,
    signal_fn: &FnPtr,
    bars: &Array,
    pos: Position,
) -> Result<Vec<Value>, Box<EvalAltResult>> {
    let returned: Dynamic = signal_fn.call_within_context(ctx, (bars.clone(),))?;
    let type_name = returned.type_name();
    let Some(values) = returned.try_cast::<Array>() else {
        return Err(invalid(
            "signal_fn",
            format!("signal_fn: must return an array with one output per bar, returned {type_name}"),
            pos,
        ));
    };
    if values.len() != bars.len() {
        return Err(invalid(
            "signal_fn",
            format!(
                "signal_fn: returned {} outputs for {} bars; return exactly one output per bar",
                values.len(),
                bars.len()
            ),
            pos,
        ));
    }
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            warden::rhai::serde::from_dynamic::<Value>(v).map_err(|e| {
                invalid(
                    "signal_fn",
                    format!(
                        "signal_fn: output[{i}] is not a plain value (number, string, array or map): {e}"
                    ),
                    pos,
                )
            })
        })
        .collect()
}

/// Bar `i` under perturbation `p`: a number, or a map with its numeric fields changed.
fn perturb_bar(bar: &Dynamic, p: usize, i: usize) -> Result<Dynamic, String> {
    if let Some(changed) = perturb_number(bar, p, i) {
        return Ok(changed);
    }
    let type_name = bar.type_name();
    let Some(mut map) = bar.clone().try_cast::<Map>() else {
        return Err(format!("bars[{i}]: expected a number or a map, got {type_name}"));
    };
    let mut any = false;
    for value in map.values_mut() {
        if let Some(changed) = perturb_number(value, p, i) {
            *value = changed;
            any = true;
        }
    }
    if !any {
        return Err(format!(
            "bars[{i}]: the map has no integer or float field to perturb"
        ));
    }
    Ok(map.into())
}

/// The signed step for perturbation `p` at index `i`, in units of (1 + |x|): never zero.
fn step(p: usize, i: usize) -> f64 {
    // A fixed multiplicative hash of the index: deterministic, spread over [0.5, 1.5).
    let spread = 0.5 + ((i as u64).wrapping_mul(2_654_435_761) % 1000) as f64 / 1000.0;
    let alternate = if i.is_multiple_of(2) { 1.0 } else { -1.0 };
    match p {
        0 => 1.0,
        1 => -1.0,
        2 => alternate,
        _ => alternate * spread,
    }
}

fn perturb_number(value: &Dynamic, p: usize, i: usize) -> Option<Dynamic> {
    if let Ok(x) = value.as_float() {
        return Some((x + step(p, i) * (1.0 + x.abs())).into());
    }
    let x = value.as_int().ok()?;
    let delta = (step(p, i) * (1.0 + x.unsigned_abs() as f64)).round() as INT;
    Some(x.saturating_add(delta).into())
}

fn error_map(code: &str, message: String) -> Map {
    let mut map = Map::new();
    map.insert("code".into(), code.into());
    map.insert("message".into(), message.into());
    map
}

fn invalid(field: &str, message: String, pos: Position) -> Box<EvalAltResult> {
    let mut map = error_map("invalid_input", message);
    map.insert("field".into(), field.into());
    Box::new(EvalAltResult::ErrorRuntime(map.into(), pos))
}

fn lookahead(
    i: usize,
    k: usize,
    name: &str,
    before: &Value,
    after: &Value,
    pos: Position,
) -> Box<EvalAltResult> {
    let message = format!(
        "look-ahead: signal_fn output[{i}] changed from {} to {} when bars[{k}..] were perturbed ({name}); \
output[i] may use only bars[0..=i]",
        short(before),
        short(after)
    );
    let mut map = error_map("lookahead_detected", message);
    map.insert("where".into(), format!("output[{i}]").into());
    map.insert("index".into(), (i as INT).into());
    map.insert("perturbation".into(), name.into());
    Box::new(EvalAltResult::ErrorRuntime(map.into(), pos))
}

/// A value for a message, cut to 80 characters.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_perturbation_changes_every_number() {
        // Pins that no perturbation leaves a future bar unchanged (so a look-ahead cannot hide).
        for p in 0..PERTURBATIONS.len() {
            for i in 0..50 {
                for x in [-2.0, -1.0, -0.5, 0.0, 0.01, 1.0, 100.0] {
                    let changed =
                        perturb_number(&Dynamic::from_float(x), p, i).and_then(|d| d.as_float().ok());
                    assert!(changed.is_some_and(|y| y != x), "p={p} i={i} x={x}");
                }
                for x in [-3_i64, -1, 0, 1, 250] {
                    let changed = perturb_number(&Dynamic::from_int(x), p, i).and_then(|d| d.as_int().ok());
                    assert!(changed.is_some_and(|y| y != x), "p={p} i={i} x={x}");
                }
            }
        }
    }

    #[test]
    fn maps_keep_their_text_fields() {
        // Pins that only numeric fields of a map bar change.
        let mut bar = Map::new();
        bar.insert("date".into(), "2024-01-02".into());
        bar.insert("close".into(), Dynamic::from_float(100.0));
        let changed = perturb_bar(&bar.into(), 0, 3).map(|d| d.cast::<Map>());
        let changed = changed.expect("a map bar perturbs");
        assert_eq!(changed["date"].to_string(), "2024-01-02");
        assert_eq!(changed["close"].as_float().ok(), Some(201.0));
        assert!(perturb_bar(&Dynamic::from("x"), 0, 0).is_err());
    }
}
