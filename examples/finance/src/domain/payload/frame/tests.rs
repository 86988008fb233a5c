//! Unit tests of the `Frame` decoder and its column accessors.

#![allow(clippy::unwrap_used)]

use super::*;
use serde_json::json;

fn err(v: Value) -> String {
    frame(&v, "trades").unwrap_err().to_string()
}

#[test]
fn bare_records_and_object_form_decode_alike() {
    // Pins both shapes, union-of-keys column order, and null for absent cells.
    let a = frame(
        &json!([{"date": "2024-01-02", "symbol": "A"}, {"symbol": "B", "qty": 3}]),
        "trades",
    )
    .unwrap();
    assert_eq!(a.columns, vec!["date", "symbol", "qty"]);
    assert_eq!(a.rows[1][0], Value::Null);
    let b = frame(
        &json!({"columns": ["date", "symbol", "qty"], "records": [{"date": "2024-01-02", "symbol": "A"}, {"symbol": "B", "qty": 3}], "dtypes": {"qty": "int64"}}),
        "trades",
    )
    .unwrap();
    assert_eq!(a, b);
}

#[test]
fn typed_columns() {
    // Pins numbers (null → NaN, "Infinity" → ∞), strings and dates.
    let f = frame(
        &json!([{"d": "2024-01-02", "x": 1.5, "s": "A"}, {"d": null, "x": "Infinity", "s": null}]),
        "f",
    )
    .unwrap();
    let x = f.numbers("x", "f").unwrap();
    assert_eq!(x[0], 1.5);
    assert_eq!(x[1], f64::INFINITY);
    assert_eq!(f.strings("s", "f").unwrap(), vec![Some("A".to_owned()), None]);
    assert_eq!(f.dates("d", "f").unwrap()[0].unwrap().to_string(), "2024-01-02");
    assert!(f.dates("d", "f").unwrap()[1].is_none());
    let e = f.numbers("s", "f").unwrap_err().to_string();
    assert!(e.starts_with("f: records[0].s must be a number"), "{e}");
    let e = f.strings("x", "f").unwrap_err().to_string();
    assert_eq!(e, "f: records[0].x must be a string, got 1.5");
}

#[test]
fn refusals_name_field_record_and_column() {
    // Pins the near-miss keys, near-miss columns, missing records and bad record refusals.
    assert_eq!(
        err(json!({"recrods": []})),
        "trades: key 'recrods' looks like a mistyped 'records'"
    );
    assert!(err(json!({"data": [[1]]})).contains("pandas orient='split' is not accepted"));
    assert!(err(json!({"columns": ["a"]})).starts_with("trades: missing key 'records'"));
    assert_eq!(
        err(json!({"columns": ["symbol"], "records": [{"symbol": "A"}, {"sybmol": "B"}]})),
        "trades: records[1]: column 'sybmol' looks like a mistyped 'symbol'"
    );
    assert!(err(json!([1, 2])).contains("records[0] must be an object"));
    assert!(err(json!({"columns": ["a", "a"], "records": []})).contains("duplicate column 'a'"));
    assert!(
        err(json!({"index": ["x"], "records": []})).contains("index has 1 labels but there are 0 records")
    );
    let f = frame(&json!([{"sybmol": "A", "date": "2024-01-01"}]), "trades").unwrap();
    assert_eq!(
        f.require("symbol", "trades").unwrap_err().to_string(),
        "trades: missing column 'symbol' (column 'sybmol' looks like a mistyped 'symbol')"
    );
    // (column order of bare records follows serde_json's map order, so test membership only)
    let e = f.require("price", "trades").unwrap_err().to_string();
    assert!(
        e.starts_with("trades: missing column 'price'; columns are "),
        "{e}"
    );
    assert!(e.contains("sybmol") && e.contains("date"), "{e}");
}

#[test]
fn cell_cap_counts_rows_times_columns() {
    // Pins the 1,000,000-cell cap: 200,001 records x 5 columns is refused.
    let rec = json!({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5});
    let v = Value::Array(vec![rec; 200_001]);
    assert!(err(v).contains("= 1000005 cells exceed the cap of 1000000"));
}

#[test]
fn serde_and_schema() {
    // Pins the Deserialize impl and the schema's two shapes.
    let f: Frame = serde_json::from_value(json!([{"a": 1}])).unwrap();
    assert_eq!(f.len(), 1);
    let schema = serde_json::to_value(schemars::schema_for!(Frame)).unwrap();
    assert_eq!(schema["oneOf"][1]["required"], json!(["records"]));
}
