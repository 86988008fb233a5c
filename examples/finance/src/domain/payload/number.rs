//! How numbers cross the JSON boundary. JSON has no NaN or infinity, so a
//! missing value travels as `null` and the infinities as the strings
//! `"Infinity"` / `"-Infinity"`, on input and on output alike. This file owns
//! that mapping: the `f64_inf` serde helper, `num` for building evidence
//! values, `parse_number` for reading cells, and the `F64OrInf` schema type.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serializer, de};
use serde_json::Value;

/// Serde helper for an `f64` field: `#[serde(with = "f64_inf")]` writes ±∞ as
/// `"Infinity"` / `"-Infinity"` and NaN as `null`, and reads them back.
/// Pair it with `#[schemars(with = "F64OrInf")]` so the schema says so.
pub mod f64_inf {
    use super::*;

    /// Writes a finite value as a number, ±∞ as a string, NaN as `null`.
    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        if x.is_nan() {
            s.serialize_none()
        } else if x.is_infinite() {
            s.serialize_str(if *x > 0.0 { "Infinity" } else { "-Infinity" })
        } else {
            s.serialize_f64(*x)
        }
    }

    /// Reads a number, `null` (NaN), `"Infinity"` or `"-Infinity"`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        let v = Value::deserialize(d)?;
        parse_number(&v).map_err(de::Error::custom)
    }
}

/// A JSON value for `x` following the conventions: ±∞ become strings and NaN
/// becomes `null` (plain `serde_json::json!(f64::INFINITY)` would be `null`).
pub fn num(x: f64) -> Value {
    if x.is_nan() {
        Value::Null
    } else if x.is_infinite() {
        Value::String(if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned())
    } else {
        serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}

/// Reads one numeric cell: a number, `null` (→ NaN, a missing value),
/// `"Infinity"` or `"-Infinity"`. The error text says what was got.
pub fn parse_number(v: &Value) -> Result<f64, String> {
    match v {
        Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| format!("number {n} does not fit a 64-bit float")),
        Value::Null => Ok(f64::NAN),
        Value::String(s) if s == "Infinity" => Ok(f64::INFINITY),
        Value::String(s) if s == "-Infinity" => Ok(f64::NEG_INFINITY),
        other => Err(format!(
            "must be a number, null (missing), \"Infinity\" or \"-Infinity\", got {}",
            show(other)
        )),
    }
}

/// `x` for an error message, as Rust prints it (`0.05`, `-0.2`, `100`),
/// but in exponent form (`1e300`, `-1e-12`) from 10¹⁶ up and below 10⁻⁵,
/// where the plain form runs to hundreds of digits or zeros.
pub fn show_f64(x: f64) -> String {
    if plain(x) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

/// `x` with `dp` decimals for an error message (`21.000000`), in exponent
/// form (`1.000000e300`) where [`show_f64`] uses it.
pub fn show_f64_to(x: f64, dp: usize) -> String {
    if plain(x) {
        format!("{x:.dp$}")
    } else {
        format!("{x:.dp$e}")
    }
}

/// Whether `x` reads well in plain decimals.
fn plain(x: f64) -> bool {
    !x.is_finite() || x == 0.0 || (1e-5..1e16).contains(&x.abs())
}

/// A short rendering of a JSON value for an error message (≤ 60 characters).
pub fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= 60 {
        s
    } else {
        let head: String = s.chars().take(57).collect();
        format!("{head}...")
    }
}

/// Schema-only type for an `f64` that may be ±∞ or missing on the wire: a
/// number, `"Infinity"`, `"-Infinity"` or `null`.
#[derive(Debug, Clone, Copy)]
pub struct F64OrInf;

impl JsonSchema for F64OrInf {
    fn schema_name() -> Cow<'static, str> {
        "F64OrInf".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [
                { "type": "number" },
                { "type": "string", "enum": ["Infinity", "-Infinity"] },
                { "type": "null" }
            ]
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde::Serialize;
    use serde_json::json;

    #[derive(Serialize, Deserialize)]
    struct Holder {
        #[serde(with = "f64_inf")]
        x: f64,
    }

    #[test]
    fn infinity_survives_serialization() {
        // Pins that +∞ (e.g. a breakeven cost with zero turnover) is "Infinity", not null.
        let v = serde_json::to_value(Holder { x: f64::INFINITY }).unwrap();
        assert_eq!(v, json!({"x": "Infinity"}));
        let v = serde_json::to_value(Holder { x: f64::NEG_INFINITY }).unwrap();
        assert_eq!(v, json!({"x": "-Infinity"}));
        let v = serde_json::to_value(Holder { x: f64::NAN }).unwrap();
        assert_eq!(v, json!({"x": null}));
        let v = serde_json::to_value(Holder { x: 1.5 }).unwrap();
        assert_eq!(v, json!({"x": 1.5}));
    }

    #[test]
    fn infinity_round_trips_on_input() {
        // Pins that the strings and null are read back as ±∞ and NaN.
        let h: Holder = serde_json::from_value(json!({"x": "-Infinity"})).unwrap();
        assert_eq!(h.x, f64::NEG_INFINITY);
        let h: Holder = serde_json::from_value(json!({"x": null})).unwrap();
        assert!(h.x.is_nan());
        assert!(serde_json::from_value::<Holder>(json!({"x": "inf"})).is_err());
    }

    #[test]
    fn num_maps_non_finite_values() {
        // Pins the evidence-building helper's mapping.
        assert_eq!(num(f64::INFINITY), json!("Infinity"));
        assert_eq!(num(f64::NAN), Value::Null);
        assert_eq!(num(0.25), json!(0.25));
    }

    #[test]
    fn parse_number_rejects_other_types_saying_what_was_got() {
        // Pins the cell reader's accepted forms and its message.
        assert_eq!(parse_number(&json!("Infinity")), Ok(f64::INFINITY));
        assert!(parse_number(&Value::Null).unwrap().is_nan());
        let e = parse_number(&json!("0.1")).unwrap_err();
        assert!(e.contains("got \"0.1\""), "{e}");
        assert!(parse_number(&json!(true)).is_err());
    }
}
