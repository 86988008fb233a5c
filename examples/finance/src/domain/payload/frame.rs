//! The `Frame` payload: `{"index", "columns", "records": [{...}], "dtypes"}`
//! (only `records` required) or a bare list of records. Owns the decoder,
//! typed column access whose refusals name the field, row and column, and
//! the hand-written JSON schema describing exactly what the decoder accepts.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, de};
use serde_json::{Map, Value};

use super::super::error::DomainError;
use super::date::Date;
use super::keys::{check_keys, near_miss, unexpected};
use super::number::{parse_number, show};
use super::{MAX_CELLS, labels};

/// Keys of the object form.
pub const FRAME_KEYS: [&str; 4] = ["index", "columns", "records", "dtypes"];

/// A decoded table: rows aligned to `columns`; absent cells are `null`.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// Row labels as strings, if given; same length as rows.
    pub index: Option<Vec<String>>,
    /// Column names: as given, or the union of record keys in first-seen order.
    pub columns: Vec<String>,
    /// Cells, one vector per record, aligned to `columns`.
    pub rows: Vec<Vec<Value>>,
}

fn records(items: &[Value], declared: Option<Vec<String>>, field: &str) -> Result<Frame, DomainError> {
    if items.len() > MAX_CELLS {
        return Err(DomainError::field(
            field,
            format!(
                "{} records exceed the cap of {MAX_CELLS} cells per frame",
                items.len()
            ),
        ));
    }
    let mut objs: Vec<&Map<String, Value>> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match item {
            Value::Object(o) => objs.push(o),
            other => {
                return Err(DomainError::field(
                    field,
                    format!(
                        "records[{i}] must be an object {{column: value}}, got {}",
                        show(other)
                    ),
                ));
            }
        }
    }
    let columns = match declared {
        Some(cols) => {
            let names: Vec<&str> = cols.iter().map(String::as_str).collect();
            for (i, o) in objs.iter().enumerate() {
                if let Some(k) = o.keys().find(|k| !names.contains(&k.as_str())) {
                    return Err(DomainError::field(
                        field,
                        format!("records[{i}]: {}", unexpected(k, &names, "column")),
                    ));
                }
            }
            cols
        }
        None => {
            let mut cols: Vec<String> = Vec::new();
            for o in &objs {
                for k in o.keys() {
                    if !cols.contains(k) {
                        cols.push(k.clone());
                    }
                }
            }
            cols
        }
    };
    let cells = objs.len().saturating_mul(columns.len());
    if cells > MAX_CELLS {
        return Err(DomainError::field(
            field,
            format!(
                "{} records x {} columns = {cells} cells exceed the cap of {MAX_CELLS} cells per frame",
                objs.len(),
                columns.len()
            ),
        ));
    }
    let rows = objs
        .iter()
        .map(|o| {
            columns
                .iter()
                .map(|c| o.get(c).cloned().unwrap_or(Value::Null))
                .collect()
        })
        .collect();
    Ok(Frame {
        index: None,
        columns,
        rows,
    })
}

impl Frame {
    /// Decodes a frame payload; every refusal names `field`.
    pub fn from_value(v: &Value, field: &str) -> Result<Self, DomainError> {
        match v {
            Value::Array(items) => records(items, None, field),
            Value::Object(obj) => {
                check_keys(obj, &FRAME_KEYS, field)?;
                let declared = labels(obj.get("columns"), field, "columns")?;
                if let Some(cols) = &declared
                    && let Some(c) = cols.iter().enumerate().find(|(i, c)| cols[..*i].contains(c))
                {
                    return Err(DomainError::field(field, format!("duplicate column '{}'", c.1)));
                }
                let mut frame = match obj.get("records") {
                    Some(Value::Array(items)) => records(items, declared, field)?,
                    Some(other) => {
                        return Err(DomainError::field(
                            field,
                            format!("'records' must be a list of objects, got {}", show(other)),
                        ));
                    }
                    None => {
                        return Err(DomainError::field(
                            field,
                            "missing key 'records' (the object form is {\"columns\": [...], \"records\": [{column: value}, ...]})",
                        ));
                    }
                };
                match obj.get("dtypes") {
                    None | Some(Value::Null | Value::Object(_)) => {}
                    Some(other) => {
                        return Err(DomainError::field(
                            field,
                            format!(
                                "'dtypes' must be an object {{column: dtype}}, got {}",
                                show(other)
                            ),
                        ));
                    }
                }
                frame.index = labels(obj.get("index"), field, "index")?;
                if let Some(ix) = &frame.index
                    && ix.len() != frame.rows.len()
                {
                    return Err(DomainError::field(
                        field,
                        format!(
                            "index has {} labels but there are {} records",
                            ix.len(),
                            frame.rows.len()
                        ),
                    ));
                }
                Ok(frame)
            }
            other => Err(DomainError::field(
                field,
                format!(
                    "must be a list of records or an object {{\"columns\", \"records\", ...}}, got {}",
                    show(other)
                ),
            )),
        }
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when there are no records.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Position of a column.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    /// Position of a required column; a missing one is refused, naming a
    /// present column that looks like a typo of it.
    pub fn require(&self, name: &str, field: &str) -> Result<usize, DomainError> {
        if let Some(i) = self.column(name) {
            return Ok(i);
        }
        let typo = self.columns.iter().find(|c| near_miss(c, &[name]).is_some());
        let msg = match typo {
            Some(c) => format!("missing column '{name}' (column '{c}' looks like a mistyped '{name}')"),
            None if self.is_empty() => format!("missing column '{name}' (there are no records)"),
            None => format!("missing column '{name}'; columns are {}", self.columns.join(", ")),
        };
        Err(DomainError::field(field, msg))
    }

    /// A numeric column (NaN for null, ±∞ for "Infinity"/"-Infinity").
    pub fn numbers(&self, name: &str, field: &str) -> Result<Vec<f64>, DomainError> {
        let c = self.require(name, field)?;
        self.rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                parse_number(&row[c])
                    .map_err(|e| DomainError::field(field, format!("records[{i}].{name} {e}")))
            })
            .collect()
    }

    /// A text column; `null` gives `None`.
    pub fn strings(&self, name: &str, field: &str) -> Result<Vec<Option<String>>, DomainError> {
        let c = self.require(name, field)?;
        self.rows
            .iter()
            .enumerate()
            .map(|(i, row)| match &row[c] {
                Value::Null => Ok(None),
                Value::String(s) => Ok(Some(s.clone())),
                other => Err(DomainError::field(
                    field,
                    format!("records[{i}].{name} must be a string, got {}", show(other)),
                )),
            })
            .collect()
    }

    /// A date column; `null` gives `None`.
    pub fn dates(&self, name: &str, field: &str) -> Result<Vec<Option<Date>>, DomainError> {
        let texts = self.strings(name, field)?;
        texts
            .iter()
            .enumerate()
            .map(|(i, s)| match s {
                None => Ok(None),
                Some(s) => Date::parse(s)
                    .map(Some)
                    .map_err(|e| DomainError::field(field, format!("records[{i}].{name}: {e}"))),
            })
            .collect()
    }
}

/// Decodes the frame payload held in field `field`.
pub fn frame(v: &Value, field: &str) -> Result<Frame, DomainError> {
    Frame::from_value(v, field)
}

impl<'de> Deserialize<'de> for Frame {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Frame::from_value(&v, "frame").map_err(|e| de::Error::custom(e.to_string()))
    }
}

impl JsonSchema for Frame {
    fn schema_name() -> Cow<'static, str> {
        "Frame".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let record = json_schema!({
            "type": "object",
            "description": "one row: {column: value}; numbers, strings, null (missing), \"Infinity\"/\"-Infinity\"",
            "additionalProperties": { "type": ["number", "string", "boolean", "null"] }
        });
        json_schema!({
            "oneOf": [
                {
                    "type": "array",
                    "description": "bare list of records",
                    "items": record
                },
                {
                    "type": "object",
                    "description": "pandas-style frame (orient='records' plus metadata); only records is required",
                    "properties": {
                        "index": {
                            "type": "array",
                            "description": "row labels, e.g. ISO-8601 dates 'YYYY-MM-DD'; one per record",
                            "items": { "type": ["string", "number"] }
                        },
                        "columns": {
                            "type": "array",
                            "description": "column names; records may use only these",
                            "items": { "type": "string" }
                        },
                        "records": { "type": "array", "items": record },
                        "dtypes": {
                            "type": "object",
                            "description": "informational {column: dtype}",
                            "additionalProperties": { "type": "string" }
                        }
                    },
                    "required": ["records"],
                    "additionalProperties": false
                }
            ]
        })
    }
}

#[cfg(test)]
mod tests;
