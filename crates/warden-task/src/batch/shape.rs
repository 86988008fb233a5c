//! Shaping what a batch returns: `select` and `digits`.
//!
//! Both apply only to the outputs put in the batch result; references
//! between calls always see the full, unrounded results. `select` keeps the
//! listed dotted paths of each output as a flat object keyed by the path
//! (`{"evidence.sharpe": 1.2}`) and reports paths absent from that output.
//! `digits` rounds numbers with a fractional part to that many significant
//! figures; integers (counts, ids, 252.0) and strings are never touched.

use serde_json::{Map, Number, Value};

use super::refs::resolve;

/// Keeps only `paths` of `output`; also returns the paths it did not have.
pub(crate) fn select(output: &Value, paths: &[String]) -> (Value, Vec<String>) {
    let mut kept = Map::new();
    let mut missing = Vec::new();
    for path in paths {
        match resolve(output, path) {
            Ok(value) => {
                kept.insert(path.clone(), value.clone());
            }
            Err(_) => missing.push(path.clone()),
        }
    }
    (Value::Object(kept), missing)
}

/// Rounds every fractional number in `value` to `digits` significant figures.
pub(crate) fn round(value: &mut Value, digits: u32) {
    match value {
        Value::Number(n) => {
            if let Some(x) = n.as_f64().filter(|_| n.is_f64())
                && x.fract() != 0.0
                && let Some(rounded) = Number::from_f64(round_significant(x, digits))
            {
                *n = rounded;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| round(item, digits)),
        Value::Object(map) => map.values_mut().for_each(|item| round(item, digits)),
        _ => {}
    }
}

/// `x` to `digits` significant figures, via scientific formatting so the
/// result is the nearest decimal (0.1 + 0.2 → 0.3 at 3 digits).
fn round_significant(x: f64, digits: u32) -> f64 {
    if !x.is_finite() || digits == 0 {
        return x;
    }
    let text = format!("{:.*e}", digits as usize - 1, x);
    text.parse().unwrap_or(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digits_round_fractions_and_leave_integers() {
        // Counts, ids and integral floats are untouched; fractions are rounded.
        let mut value = json!({"sharpe": 2.0522424721132255, "n": 4, "ppy": 252.0, "id": "r1",
                               "small": [0.000123456, -1234.5678]});
        round(&mut value, 3);
        assert_eq!(
            value,
            json!({"sharpe": 2.05, "n": 4, "ppy": 252.0, "id": "r1", "small": [0.000123, -1230.0]})
        );
    }

    #[test]
    fn select_keeps_paths_flat_and_reports_missing_ones() {
        // Selected paths become keys; absent ones are listed, not errors.
        let output = json!({"evidence": {"sharpe": 1.5, "rows": [{"p": 3}]}, "passed": true});
        let paths = [
            "evidence.sharpe".to_string(),
            "evidence.rows.0.p".into(),
            "nope".into(),
        ];
        let (kept, missing) = select(&output, &paths);
        assert_eq!(kept, json!({"evidence.sharpe": 1.5, "evidence.rows.0.p": 3}));
        assert_eq!(missing, ["nope"]);
    }
}
