//! The `Series` payload: `{"index": [...], "values": [...], "name", "dtype",
//! "freq"}` (only `values` required) or a bare JSON list of numbers. Owns the
//! decoder (which names the guard's field in every refusal) and the
//! hand-written JSON schema that describes exactly what the decoder accepts.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, de};
use serde_json::Value;

use super::super::error::DomainError;
use super::keys::check_keys;
use super::number::{parse_number, show};
use super::{MAX_CELLS, labels};

/// Keys of the object form.
pub const SERIES_KEYS: [&str; 5] = ["index", "values", "name", "dtype", "freq"];

/// A decoded numeric series. Missing values (`null`) are NaN.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Labels (dates or positions) as strings, if given; same length as values.
    pub index: Option<Vec<String>>,
    /// The values; NaN where the payload had `null`.
    pub values: Vec<f64>,
    /// Optional name.
    pub name: Option<String>,
    /// Optional dtype as sent (informational).
    pub dtype: Option<String>,
    /// Optional frequency as sent (informational, e.g. "B", "D", "M").
    pub freq: Option<String>,
}

fn opt_string(
    obj: &serde_json::Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<String>, DomainError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(DomainError::field(
            field,
            format!("'{key}' must be a string, got {}", show(other)),
        )),
    }
}

fn numbers(items: &[Value], field: &str, at: &str) -> Result<Vec<f64>, DomainError> {
    if items.len() > MAX_CELLS {
        return Err(DomainError::field(
            field,
            format!(
                "{} values exceed the cap of {MAX_CELLS} cells per series",
                items.len()
            ),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, v)| parse_number(v).map_err(|e| DomainError::field(field, format!("{at}[{i}] {e}"))))
        .collect()
}

impl Series {
    /// Decodes a series payload; every refusal names `field`.
    pub fn from_value(v: &Value, field: &str) -> Result<Self, DomainError> {
        match v {
            Value::Array(items) => Ok(Self {
                index: None,
                values: numbers(items, field, "")?,
                name: None,
                dtype: None,
                freq: None,
            }),
            Value::Object(obj) => {
                check_keys(obj, &SERIES_KEYS, field)?;
                let values = match obj.get("values") {
                    Some(Value::Array(items)) => numbers(items, field, "values")?,
                    Some(other) => {
                        return Err(DomainError::field(
                            field,
                            format!("'values' must be a list of numbers, got {}", show(other)),
                        ));
                    }
                    None => {
                        return Err(DomainError::field(
                            field,
                            "missing key 'values' (the object form is {\"index\": [...], \"values\": [numbers]})",
                        ));
                    }
                };
                let index = labels(obj.get("index"), field, "index")?;
                if let Some(ix) = &index
                    && ix.len() != values.len()
                {
                    return Err(DomainError::field(
                        field,
                        format!(
                            "index has {} labels but values has {} entries",
                            ix.len(),
                            values.len()
                        ),
                    ));
                }
                Ok(Self {
                    index,
                    values,
                    name: opt_string(obj, "name", field)?,
                    dtype: opt_string(obj, "dtype", field)?,
                    freq: opt_string(obj, "freq", field)?,
                })
            }
            other => Err(DomainError::field(
                field,
                format!(
                    "must be a list of numbers or an object {{\"index\", \"values\", ...}}, got {}",
                    show(other)
                ),
            )),
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The label of position `i` (0-based): the index entry, or, without
    /// an index, `#k of n` counted from 1 (`#1 of 250` is the first value),
    /// so a reader never has to guess how positions count.
    pub fn label(&self, i: usize) -> String {
        self.index
            .as_ref()
            .and_then(|ix| ix.get(i).cloned())
            .unwrap_or_else(|| format!("#{} of {}", i + 1, self.values.len()))
    }

    /// The values, refusing the first missing (`null`) or infinite one.
    pub fn finite(&self, field: &str) -> Result<&[f64], DomainError> {
        match self.values.iter().position(|x| !x.is_finite()) {
            None => Ok(&self.values),
            Some(i) => {
                let x = self.values[i];
                let what = if x.is_nan() {
                    "null (missing)"
                } else if x > 0.0 {
                    "Infinity"
                } else {
                    "-Infinity"
                };
                Err(DomainError::field(
                    field,
                    format!(
                        "value at {} is {what}; this guard needs every value finite (drop or fill missing values first)",
                        self.label(i)
                    ),
                ))
            }
        }
    }

    /// Refuses unless `other` has the same length and, when both carry an
    /// index, the same labels (the series must be aligned).
    pub fn check_aligned(&self, field: &str, other: &Series, other_field: &str) -> Result<(), DomainError> {
        if self.len() != other.len() {
            return Err(DomainError::field(
                other_field,
                format!(
                    "has {} values but {field} has {}; the series must be aligned period by period",
                    other.len(),
                    self.len()
                ),
            ));
        }
        if let (Some(a), Some(b)) = (&self.index, &other.index)
            && let Some(i) = (0..a.len()).find(|&i| a[i] != b[i])
        {
            return Err(DomainError::field(
                other_field,
                format!(
                    "index[{i}] is '{}' but {field} has '{}' there; align the series first",
                    b[i], a[i]
                ),
            ));
        }
        Ok(())
    }
}

/// Decodes the series payload held in field `field`.
pub fn series(v: &Value, field: &str) -> Result<Series, DomainError> {
    Series::from_value(v, field)
}

impl<'de> Deserialize<'de> for Series {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Series::from_value(&v, "series").map_err(|e| de::Error::custom(e.to_string()))
    }
}

impl JsonSchema for Series {
    fn schema_name() -> Cow<'static, str> {
        "Series".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let cell = json_schema!({
            "anyOf": [
                { "type": "number" },
                { "type": "null", "description": "a missing value" },
                { "type": "string", "enum": ["Infinity", "-Infinity"] }
            ]
        });
        json_schema!({
            "oneOf": [
                {
                    "type": "array",
                    "description": "bare list of values",
                    "items": cell
                },
                {
                    "type": "object",
                    "description": "pandas-style series; only values is required",
                    "properties": {
                        "index": {
                            "type": "array",
                            "description": "labels, e.g. ISO-8601 dates 'YYYY-MM-DD'; same length as values",
                            "items": { "type": ["string", "number"] }
                        },
                        "values": { "type": "array", "items": cell },
                        "name": { "type": ["string", "null"] },
                        "dtype": { "type": ["string", "null"] },
                        "freq": { "type": ["string", "null"] }
                    },
                    "required": ["values"],
                    "additionalProperties": false
                }
            ]
        })
    }
}

#[cfg(test)]
mod tests;
