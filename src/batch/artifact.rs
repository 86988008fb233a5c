//! `$artifact` references: CSV columns of a stored task file as values.
//!
//! `{"$artifact": {"task_id", "filename"}, "column": "close"}` becomes the
//! list of that column's values; `"columns": ["a", "b"]` or `"columns":
//! "all"` becomes `{column: [values]}`. Report data therefore goes from one
//! task's artifacts into a guard's arguments without passing through the
//! client. Files are opened only through the [`ArtifactStore`]'s checks
//! (task id format, relative path, no `..`, no symbolic links), each file is
//! parsed once per batch, and cells that parse as numbers become numbers.
//! Loading happens when the batch is planned, before any call runs: an
//! artifact cannot change during a batch (guards do not write artifacts).

use std::collections::HashMap;
use std::io::Read;

use serde_json::{Map, Number, Value};

use super::refs::ARTIFACT_KEY;
use crate::artifacts::{ArtifactStore, safe_path};

/// Which columns a reference loads.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Columns {
    /// `"column": "close"`: a list of values.
    One(String),
    /// `"columns": ["a", "b"]`: an object of lists.
    Some(Vec<String>),
    /// `"columns": "all"`: every column, as an object of lists.
    All,
}

/// A checked `$artifact` reference.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ArtifactRef {
    pub task_id: String,
    pub filename: String,
    pub columns: Columns,
}

const SHAPE: &str = "write {\"$artifact\": {\"task_id\": \"task_…\", \"filename\": \"outputs/data.csv\"}, \"column\": \"close\"} \
(or \"columns\": [\"a\", \"b\"] or \"columns\": \"all\")";

/// Parses the shape of an `$artifact` reference (nothing is read here).
pub(crate) fn parse(map: &Map<String, Value>) -> Result<ArtifactRef, String> {
    if let Some(key) = map
        .keys()
        .find(|k| !matches!(k.as_str(), ARTIFACT_KEY | "column" | "columns"))
    {
        return Err(format!("unknown key '{key}' in an $artifact reference; {SHAPE}"));
    }
    let source = map.get(ARTIFACT_KEY).and_then(Value::as_object);
    let field = |name: &str| source.and_then(|s| s.get(name)).and_then(Value::as_str);
    let (Some(task_id), Some(filename)) = (field("task_id"), field("filename")) else {
        return Err(format!(
            "$artifact must be an object with string task_id and filename; {SHAPE}"
        ));
    };
    if let Some(key) = source
        .into_iter()
        .flat_map(|s| s.keys())
        .find(|k| *k != "task_id" && *k != "filename")
    {
        return Err(format!(
            "unknown key '{key}' in $artifact; it takes task_id and filename only"
        ));
    }
    let columns = match (map.get("column"), map.get("columns")) {
        (Some(Value::String(one)), None) => Columns::One(one.clone()),
        (None, Some(Value::String(all))) if all == "all" => Columns::All,
        (None, Some(Value::Array(names))) if !names.is_empty() => Columns::Some(
            names
                .iter()
                .map(|n| n.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("columns must list column names as strings; {SHAPE}"))?,
        ),
        (Some(_), Some(_)) => return Err(format!("give either column or columns, not both; {SHAPE}")),
        _ => return Err(format!("an $artifact reference needs column or columns; {SHAPE}")),
    };
    Ok(ArtifactRef {
        task_id: task_id.to_string(),
        filename: filename.to_string(),
        columns,
    })
}

/// A parsed CSV file: header names and one list of values per column.
#[derive(Debug)]
struct Table {
    headers: Vec<String>,
    columns: Vec<Vec<Value>>,
}

/// Loads referenced CSV files from the store, each at most once per batch.
pub(crate) struct Loader<'a> {
    store: &'a ArtifactStore,
    /// Largest file read; larger ones could not be sent as arguments anyway.
    max_bytes: usize,
    tables: HashMap<(String, String), Table>,
}

impl<'a> Loader<'a> {
    pub(crate) fn new(store: &'a ArtifactStore, max_bytes: usize) -> Self {
        Self {
            store,
            max_bytes,
            tables: HashMap::new(),
        }
    }

    /// The value a reference stands for.
    pub(crate) fn load(&mut self, reference: &ArtifactRef) -> Result<Value, String> {
        let key = (reference.task_id.clone(), reference.filename.clone());
        if !self.tables.contains_key(&key) {
            let table = self.read(&reference.task_id, &reference.filename)?;
            self.tables.insert(key.clone(), table);
        }
        let Some(table) = self.tables.get(&key) else {
            return Err("the artifact table was not cached".into());
        };
        let column = |name: &str| -> Result<Value, String> {
            match table.headers.iter().position(|h| h == name) {
                Some(i) => Ok(Value::Array(table.columns[i].clone())),
                None => Err(format!(
                    "column '{name}' is not in {}; its columns are: {}",
                    reference.filename,
                    table.headers.join(", ")
                )),
            }
        };
        match &reference.columns {
            Columns::One(name) => column(name),
            Columns::Some(names) => names
                .iter()
                .map(|name| Ok((name.clone(), column(name)?)))
                .collect::<Result<Map<_, _>, String>>()
                .map(Value::Object),
            Columns::All => table
                .headers
                .iter()
                .map(|name| Ok((name.clone(), column(name)?)))
                .collect::<Result<Map<_, _>, String>>()
                .map(Value::Object),
        }
    }

    fn read(&self, task_id: &str, filename: &str) -> Result<Table, String> {
        let dir = self.store.task_dir(task_id).map_err(|e| e.message)?;
        let parts = safe_path::components("filename", filename).map_err(|e| e.message)?;
        let file = safe_path::open_read(&dir, "filename", &parts).map_err(|e| {
            format!("{}; filenames are relative to the task directory, e.g. \"outputs/{filename}\" (see list_artifacts)", e.message)
        })?;
        let mut text = String::new();
        file.take(self.max_bytes as u64 + 1)
            .read_to_string(&mut text)
            .map_err(|e| format!("{filename} is not readable as UTF-8 text: {e}"))?;
        if text.len() > self.max_bytes {
            return Err(format!(
                "{filename} is larger than {} bytes, the argument limit; pass a smaller file",
                self.max_bytes
            ));
        }
        parse_csv(&text).map_err(|e| format!("{filename} is not a CSV file with a header row: {e}"))
    }
}

/// Parses CSV text with a header row into columns.
fn parse_csv(text: &str) -> Result<Table, csv::Error> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(text.as_bytes());
    let headers: Vec<String> = reader.headers()?.iter().map(|h| h.trim().to_string()).collect();
    let mut columns = vec![Vec::new(); headers.len()];
    for record in reader.records() {
        let record = record?;
        for (i, column) in columns.iter_mut().enumerate() {
            column.push(cell(record.get(i).unwrap_or("")));
        }
    }
    Ok(Table { headers, columns })
}

/// A CSV cell as JSON: empty → null, integer or finite decimal → number,
/// anything else → string.
fn cell(raw: &str) -> Value {
    let text = raw.trim();
    if text.is_empty() {
        return Value::Null;
    }
    if let Ok(n) = text.parse::<i64>() {
        return Value::Number(n.into());
    }
    match text.parse::<f64>().ok().and_then(Number::from_f64) {
        Some(n) if text.bytes().any(|b| b.is_ascii_digit()) => Value::Number(n),
        _ => Value::String(raw.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cells_become_numbers_nulls_or_strings() {
        // Numbers parse as numbers; blanks are null; NaN and words stay text.
        assert_eq!(cell("1.5"), json!(1.5));
        assert_eq!(cell(" 2 "), json!(2));
        assert_eq!(cell(""), Value::Null);
        assert_eq!(cell("NaN"), json!("NaN"));
        assert_eq!(cell("inf"), json!("inf"));
        assert_eq!(cell("AAPL"), json!("AAPL"));
    }

    #[test]
    fn csv_text_becomes_columns() {
        // Header names key the columns; short rows pad with null.
        let table = parse_csv("close,vol\n1.5,2\n2.5\n").unwrap();
        assert_eq!(table.headers, ["close", "vol"]);
        assert_eq!(table.columns[0], [json!(1.5), json!(2.5)]);
        assert_eq!(table.columns[1], [json!(2), Value::Null]);
    }

    #[test]
    fn reference_shapes_are_checked() {
        // One of column/columns is required; unknown keys are named.
        let ok = json!({"$artifact": {"task_id": "t", "filename": "f"}, "columns": "all"});
        assert_eq!(parse(ok.as_object().unwrap()).unwrap().columns, Columns::All);
        for (bad, needle) in [
            (
                json!({"$artifact": {"task_id": "t", "filename": "f"}}),
                "needs column",
            ),
            (
                json!({"$artifact": {"task_id": "t"}, "column": "c"}),
                "task_id and filename",
            ),
            (
                json!({"$artifact": {"task_id": "t", "filename": "f"}, "column": "c", "x": 1}),
                "'x'",
            ),
            (
                json!({"$artifact": {"task_id": "t", "filename": "f"}, "column": "c", "columns": "all"}),
                "not both",
            ),
        ] {
            let err = parse(bad.as_object().unwrap()).unwrap_err();
            assert!(err.contains(needle), "{err}");
        }
    }
}
