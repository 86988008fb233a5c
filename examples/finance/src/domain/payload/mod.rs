//! Payload conventions shared by every research guard: how numbers, dates,
//! series and frames arrive as JSON (`number`, `date`, `series`, `frame`),
//! how unexpected keys are refused (`keys`), the size caps on what comes in
//! (below) and how evidence going out is cut down (`evidence`).
//!
//! A guard's input struct holds a series or frame field as raw
//! `serde_json::Value` with `#[schemars(with = "Series")]` (or `Frame`) so
//! the tool schema shows the accepted shapes, and decodes it with
//! `series(&input.returns, "returns")`, so refusals name the field.

mod date;
mod evidence;
mod frame;
mod keys;
mod number;
mod series;

use serde_json::Value;

use super::error::DomainError;

pub use date::Date;
pub use evidence::{
    Evidence, MAX_LIST_ITEMS, MAX_STRING_CHARS, MAX_TABLE_ROWS, Table, cut_string, fmt_num, fmt_pct,
    name_list,
};
pub use frame::{FRAME_KEYS, Frame, frame};
pub use keys::{check_keys, edit_distance, near_miss};
pub use number::{F64OrInf, f64_inf, num, parse_number, show, show_f64, show_f64_to};
pub use series::{SERIES_KEYS, Series, series};

/// Largest accepted tool argument, in bytes of JSON (8 MB).
pub const MAX_ARGUMENT_BYTES: usize = 8_000_000;

/// Largest accepted series or frame, in cells (values; records x columns).
pub const MAX_CELLS: usize = 1_000_000;

/// Refuses a whole tool argument larger than `MAX_ARGUMENT_BYTES`.
pub fn check_argument_size(bytes: usize) -> Result<(), DomainError> {
    if bytes > MAX_ARGUMENT_BYTES {
        Err(DomainError::new(format!(
            "arguments are {bytes} bytes, over the cap of {MAX_ARGUMENT_BYTES} bytes; send fewer rows or a shorter sample"
        )))
    } else {
        Ok(())
    }
}

/// Decodes an optional list of labels (strings or numbers) under `key`.
fn labels(v: Option<&Value>, field: &str, key: &str) -> Result<Option<Vec<String>>, DomainError> {
    let items = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(DomainError::field(
                field,
                format!("'{key}' must be a list of labels, got {}", show(other)),
            ));
        }
    };
    if items.len() > MAX_CELLS {
        return Err(DomainError::field(
            field,
            format!("'{key}' has {} labels, over the cap of {MAX_CELLS}", items.len()),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, x)| match x {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            other => Err(DomainError::field(
                field,
                format!("{key}[{i}] must be a string or number label, got {}", show(other)),
            )),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn argument_size_cap() {
        // Pins the 8,000,000-byte cap: at the cap passes, one byte over is refused.
        assert!(check_argument_size(MAX_ARGUMENT_BYTES).is_ok());
        let e = check_argument_size(MAX_ARGUMENT_BYTES + 1).unwrap_err();
        assert!(e.message.contains("over the cap of 8000000 bytes"), "{e}");
    }

    #[test]
    fn labels_accept_strings_and_numbers_only() {
        // Pins label decoding: numbers become strings, null entries are refused.
        let v = serde_json::json!(["2024-01-02", 3]);
        assert_eq!(
            labels(Some(&v), "f", "index").unwrap().unwrap(),
            vec!["2024-01-02", "3"]
        );
        let v = serde_json::json!([null]);
        assert!(labels(Some(&v), "f", "index").is_err());
    }
}
