//! Unit tests of the `Series` decoder: both shapes, null and infinities,
//! refusals, caps and alignment.

#![allow(clippy::unwrap_used)]

use super::*;
use serde_json::json;

fn err(v: Value) -> String {
    series(&v, "returns").unwrap_err().to_string()
}

#[test]
fn bare_list_and_object_forms_decode_alike() {
    // Pins the two accepted shapes giving the same values.
    let a = series(&json!([0.01, -0.02, 0.0]), "returns").unwrap();
    let b = series(&json!({"values": [0.01, -0.02, 0.0]}), "returns").unwrap();
    assert_eq!(a.values, b.values);
    // Without an index, positions count from 1 and say of how many.
    assert_eq!(a.label(1), "#2 of 3");
    let c = series(
        &json!({"index": ["2024-01-02", "2024-01-03"], "values": [1, 2], "name": "r", "freq": null}),
        "returns",
    )
    .unwrap();
    assert_eq!(c.label(1), "2024-01-03");
    assert_eq!(c.name.as_deref(), Some("r"));
}

#[test]
fn null_is_missing_and_infinity_is_a_string() {
    // Pins null → NaN (refused by `finite`) and "Infinity"/"-Infinity" → ±∞.
    let s = series(&json!([1.0, null, "Infinity", "-Infinity"]), "returns").unwrap();
    assert!(s.values[1].is_nan());
    assert_eq!(s.values[2], f64::INFINITY);
    assert_eq!(s.values[3], f64::NEG_INFINITY);
    let e = s.finite("returns").unwrap_err().to_string();
    assert!(
        e.starts_with("returns: value at #2 of 4 is null (missing)"),
        "{e}"
    );
}

#[test]
fn refusals_name_the_field_and_what_was_got() {
    // Pins the near-miss, unknown-key, missing-values, bad-cell and length refusals.
    assert_eq!(
        err(json!({"vals": [1]})),
        "returns: key 'vals' looks like a mistyped 'values'"
    );
    assert_eq!(
        err(json!({"values": [1], "foo": 2})),
        "returns: unknown key 'foo'; expected one of index, values, name, dtype, freq"
    );
    assert!(err(json!({"index": [1]})).starts_with("returns: missing key 'values'"));
    assert!(err(json!({"values": [1, "x"]})).contains("values[1] must be a number"));
    assert!(err(json!(["1"])).contains("[0] must be a number"));
    assert_eq!(
        err(json!({"index": ["a"], "values": [1, 2]})),
        "returns: index has 1 labels but values has 2 entries"
    );
    assert!(err(json!(3)).starts_with("returns: must be a list of numbers or an object"));
}

#[test]
fn cell_cap_is_enforced() {
    // Pins the 1,000,000-cell cap per series.
    let big = Value::Array(vec![json!(0.0); MAX_CELLS + 1]);
    assert!(err(big).contains("exceed the cap of 1000000 cells"));
}

#[test]
fn alignment_is_checked() {
    // Pins length and label alignment between two series.
    let a = series(&json!({"index": ["d1", "d2"], "values": [1, 2]}), "returns").unwrap();
    let b = series(&json!({"index": ["d1", "d3"], "values": [1, 2]}), "turnover").unwrap();
    let e = a
        .check_aligned("returns", &b, "turnover")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "turnover: index[1] is 'd3' but returns has 'd2' there; align the series first"
    );
    let c = series(&json!([1]), "turnover").unwrap();
    assert!(a.check_aligned("returns", &c, "turnover").is_err());
}

#[test]
fn serde_and_schema() {
    // Pins the Deserialize impl and that the schema offers both shapes.
    let s: Series = serde_json::from_value(json!({"values": [1]})).unwrap();
    assert_eq!(s.values, vec![1.0]);
    assert!(serde_json::from_value::<Series>(json!({"vals": [1]})).is_err());
    let schema = serde_json::to_value(schemars::schema_for!(Series)).unwrap();
    assert_eq!(schema["oneOf"].as_array().unwrap().len(), 2);
    assert_eq!(schema["oneOf"][1]["required"], json!(["values"]));
}
