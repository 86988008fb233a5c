//! `$artifact` references: CSV columns of a stored task file as values.
//!
//! `{"$artifact": {"task_id", "filename"}, "column": "close"}` becomes the
//! list of that column's values; `"columns": ["a", "b"]` or `"columns":
//! "all"` becomes `{column: [values]}`. Report data therefore goes from one
//! task's artifacts into a guard's arguments without passing through the
//! client. Files are opened only through the caller's [`View`] of the
//! store (its own tasks; task id format, relative path, no `..`, no
//! symbolic links), and cells
//! that parse as numbers become numbers.
//!
//! Memory is the cost to bound: one small reference can stand for a whole
//! file, so a 23 KB batch could once stand for gigabytes. So when the batch
//! is planned each referenced file is first only *sized* ([`Loader::size`]),
//! and the plan refuses a call whose references add up past the argument
//! cap before anything is read. Each file is then parsed once per batch
//! into a [`Table`] that keeps every column as compact JSON text, shared by
//! every reference to it; a reference becomes a value ([`Table::value`])
//! only when its call is about to run, and that value is dropped when the
//! call ends. An artifact cannot change during a batch (guards do not
//! write artifacts).

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;

use serde_json::{Map, Number, Value};

use warden_calls::artifacts::{Encoding, View, safe_path};

/// Key that marks a reference to a CSV artifact.
pub(crate) const ARTIFACT_KEY: &str = "$artifact";

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

/// Why an `$artifact` reference cannot be used: its shape, the file it
/// names, or the columns it asks for. The text goes into the batch's
/// `invalid_input` error, so it names the fix.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArtifactError {
    #[error("unknown key '{key}' in an $artifact reference; {SHAPE}", SHAPE = SHAPE)]
    UnknownKey { key: String },
    #[error("$artifact must be an object with string task_id and filename; {SHAPE}", SHAPE = SHAPE)]
    NoSource,
    #[error("unknown key '{key}' in $artifact; it takes task_id and filename only")]
    UnknownSourceKey { key: String },
    #[error("columns must list column names as strings; {SHAPE}", SHAPE = SHAPE)]
    ColumnNames,
    #[error("give either column or columns, not both; {SHAPE}", SHAPE = SHAPE)]
    BothColumnKeys,
    #[error("an $artifact reference needs column or columns; {SHAPE}", SHAPE = SHAPE)]
    NoColumnKey,
    #[error("column '{name}' is not in {filename}; its columns are: {columns}")]
    NoColumn {
        name: String,
        filename: String,
        columns: String,
    },
    #[error("column {column} did not load: {error}")]
    Unloadable {
        column: String,
        error: serde_json::Error,
    },
    /// The store's refusal (ownership, task id, path), as it words it.
    #[error("{0}")]
    Store(String),
    /// The file is not in the task directory.
    #[error(
        "{message}; filenames are relative to the task directory, e.g. \"outputs/{filename}\" (see list_artifacts)"
    )]
    NotInTask { message: String, filename: String },
    #[error("cannot size {filename}: {error}")]
    Unsizable { filename: String, error: std::io::Error },
    #[error("{filename} is not readable as UTF-8 text: {error}")]
    NotText { filename: String, error: std::io::Error },
    #[error("{filename} is larger than {max} bytes, the argument limit; pass a smaller file")]
    TooLarge { filename: String, max: usize },
    #[error("{filename} is not a CSV file with a header row: {error}")]
    NotCsv { filename: String, error: csv::Error },
    /// Planned tables hold every referenced file (at substitution).
    #[error("{filename} was not loaded when the batch was planned")]
    NotLoaded { filename: String },
}

/// Parses the shape of an `$artifact` reference (nothing is read here).
pub(crate) fn parse(map: &Map<String, Value>) -> Result<ArtifactRef, ArtifactError> {
    if let Some(key) = map
        .keys()
        .find(|k| !matches!(k.as_str(), ARTIFACT_KEY | "column" | "columns"))
    {
        return Err(ArtifactError::UnknownKey { key: key.clone() });
    }
    let source = map.get(ARTIFACT_KEY).and_then(Value::as_object);
    let field = |name: &str| source.and_then(|s| s.get(name)).and_then(Value::as_str);
    let (Some(task_id), Some(filename)) = (field("task_id"), field("filename")) else {
        return Err(ArtifactError::NoSource);
    };
    if let Some(key) = source
        .into_iter()
        .flat_map(|s| s.keys())
        .find(|k| *k != "task_id" && *k != "filename")
    {
        return Err(ArtifactError::UnknownSourceKey { key: key.clone() });
    }
    let columns = match (map.get("column"), map.get("columns")) {
        (Some(Value::String(one)), None) => Columns::One(one.clone()),
        (None, Some(Value::String(all))) if all == "all" => Columns::All,
        (None, Some(Value::Array(names))) if !names.is_empty() => Columns::Some(
            names
                .iter()
                .map(|n| n.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or(ArtifactError::ColumnNames)?,
        ),
        (Some(_), Some(_)) => return Err(ArtifactError::BothColumnKeys),
        _ => return Err(ArtifactError::NoColumnKey),
    };
    Ok(ArtifactRef {
        task_id: task_id.to_string(),
        filename: filename.to_string(),
        columns,
    })
}

impl ArtifactRef {
    /// The file it names, as a key of [`Tables`].
    pub(crate) fn key(&self) -> (String, String) {
        (self.task_id.clone(), self.filename.clone())
    }
}

/// A parsed CSV file: header names and each column as a JSON array, in
/// compact JSON text (about the size of the column in the file, unlike a
/// tree of values).
#[derive(Debug)]
pub(crate) struct Table {
    headers: Vec<String>,
    columns: Vec<Vec<u8>>,
}

/// The tables of one batch, by (task_id, filename).
pub(crate) type Tables = HashMap<(String, String), Table>;

impl Table {
    /// Checks that every column `reference` names exists.
    pub(crate) fn check(&self, reference: &ArtifactRef) -> Result<(), ArtifactError> {
        self.pick(reference).map(drop)
    }

    /// The value `reference` stands for, made now (a copy per call).
    pub(crate) fn value(&self, reference: &ArtifactRef) -> Result<Value, ArtifactError> {
        let parse = |i: usize| {
            serde_json::from_slice(&self.columns[i]).map_err(|error| ArtifactError::Unloadable {
                column: self.headers[i].clone(),
                error,
            })
        };
        let picked = self.pick(reference)?;
        match &reference.columns {
            Columns::One(_) => parse(picked[0]),
            Columns::Some(_) | Columns::All => picked
                .into_iter()
                .map(|i| Ok((self.headers[i].clone(), parse(i)?)))
                .collect::<Result<Map<_, _>, ArtifactError>>()
                .map(Value::Object),
        }
    }

    /// Bytes of JSON [`Table::value`] makes for `reference` (close for an
    /// object of columns: keys and punctuation are counted roughly).
    pub(crate) fn size(&self, reference: &ArtifactRef) -> Result<usize, ArtifactError> {
        let picked = self.pick(reference)?;
        Ok(picked
            .into_iter()
            .map(|i| self.columns[i].len() + self.headers[i].len() + 4)
            .sum())
    }

    /// Indices of the columns `reference` names.
    fn pick(&self, reference: &ArtifactRef) -> Result<Vec<usize>, ArtifactError> {
        let find = |name: &str| {
            self.headers
                .iter()
                .position(|h| h == name)
                .ok_or_else(|| ArtifactError::NoColumn {
                    name: name.to_string(),
                    filename: reference.filename.clone(),
                    columns: self.headers.join(", "),
                })
        };
        match &reference.columns {
            Columns::One(name) => Ok(vec![find(name)?]),
            Columns::Some(names) => names.iter().map(|n| find(n)).collect(),
            Columns::All => Ok((0..self.headers.len()).collect()),
        }
    }
}

/// A referenced file: open in the local task directory, or in the task's
/// object-store copy.
enum Opened {
    Local(File),
    Elsewhere,
}

/// Opens referenced CSV files in the store, to size or parse them.
pub(crate) struct Loader<'a> {
    store: View<'a>,
    /// Largest file read; larger ones could not be sent as arguments anyway.
    max_bytes: usize,
}

impl<'a> Loader<'a> {
    pub(crate) fn new(store: View<'a>, max_bytes: usize) -> Self {
        Self { store, max_bytes }
    }

    /// The file's size in bytes, without reading it (a task that ran on
    /// another node: from its copy in the object store).
    pub(crate) fn size(&self, reference: &ArtifactRef) -> Result<u64, ArtifactError> {
        let file = match self.open(reference)? {
            Opened::Local(file) => file,
            Opened::Elsewhere => {
                let chunk = self
                    .store
                    .read(&reference.task_id, &reference.filename, 0, 1, Encoding::Base64)
                    .map_err(|e| ArtifactError::Store(e.message))?;
                return Ok(chunk.size_bytes);
            }
        };
        file.metadata()
            .map(|m| m.len())
            .map_err(|error| ArtifactError::Unsizable {
                filename: reference.filename.clone(),
                error,
            })
    }

    /// Reads and parses the file (at most the argument cap).
    pub(crate) fn table(&self, reference: &ArtifactRef) -> Result<Table, ArtifactError> {
        let filename = &reference.filename;
        let mut text = String::new();
        match self.open(reference)? {
            Opened::Local(file) => {
                file.take(self.max_bytes as u64 + 1)
                    .read_to_string(&mut text)
                    .map_err(|error| ArtifactError::NotText {
                        filename: filename.clone(),
                        error,
                    })?;
            }
            Opened::Elsewhere => text = self.read_elsewhere(reference)?,
        }
        if text.len() > self.max_bytes {
            return Err(ArtifactError::TooLarge {
                filename: filename.clone(),
                max: self.max_bytes,
            });
        }
        parse_csv(&text).map_err(|error| ArtifactError::NotCsv {
            filename: filename.clone(),
            error,
        })
    }

    /// The file in the local task directory, or [`Opened::Elsewhere`] when
    /// the task has no directory here but the caller's view finds its copy
    /// in the object store (it ran on another node).
    fn open(&self, reference: &ArtifactRef) -> Result<Opened, ArtifactError> {
        let filename = &reference.filename;
        let dir = match self.store.open_task(&reference.task_id) {
            Ok(dir) => dir,
            Err(error) if error.code == warden_core::error::codes::NOT_FOUND => {
                // The copy answers (same ownership rule) or the error stands.
                return match self.store.files(&reference.task_id) {
                    Ok(_) => Ok(Opened::Elsewhere),
                    Err(_) => Err(ArtifactError::Store(error.message)),
                };
            }
            Err(error) => return Err(ArtifactError::Store(error.message)),
        };
        let parts =
            safe_path::components("filename", filename).map_err(|e| ArtifactError::Store(e.message))?;
        safe_path::open_read_at(&dir, "filename", &parts)
            .map(Opened::Local)
            .map_err(|e| ArtifactError::NotInTask {
                message: e.message,
                filename: filename.clone(),
            })
    }

    /// The text of a file in the object-store copy, read in chunks up to
    /// one byte past the argument cap.
    fn read_elsewhere(&self, reference: &ArtifactRef) -> Result<String, ArtifactError> {
        let mut text = String::new();
        let mut offset = 0;
        loop {
            let chunk = self
                .store
                .read(
                    &reference.task_id,
                    &reference.filename,
                    offset,
                    crate::limits::MAX_READ_CHUNK_BYTES,
                    Encoding::Utf8,
                )
                .map_err(|e| ArtifactError::Store(e.message))?;
            text.push_str(&chunk.content);
            match chunk.next_offset {
                Some(next) if text.len() <= self.max_bytes => offset = next,
                _ => return Ok(text),
            }
        }
    }
}

/// Parses CSV text with a header row into columns of JSON text.
fn parse_csv(text: &str) -> Result<Table, csv::Error> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(text.as_bytes());
    let headers: Vec<String> = reader.headers()?.iter().map(|h| h.trim().to_string()).collect();
    let mut columns = vec![b"[".to_vec(); headers.len()];
    for (row, record) in reader.records().enumerate() {
        let record = record?;
        for (i, column) in columns.iter_mut().enumerate() {
            if row > 0 {
                column.push(b',');
            }
            // Writing a scalar into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *column, &cell(record.get(i).unwrap_or("")));
        }
    }
    for column in &mut columns {
        column.push(b']');
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
        // Header names key the columns; short rows pad with null; values are made per reference.
        let table = parse_csv("close,vol\n1.5,2\n2.5\n").unwrap();
        assert_eq!(table.headers, ["close", "vol"]);
        assert_eq!(table.columns[0], b"[1.5,2.5]");
        assert_eq!(table.columns[1], b"[2,null]");
        let reference = |columns| ArtifactRef {
            task_id: "t".into(),
            filename: "f.csv".into(),
            columns,
        };
        let one = reference(Columns::One("vol".into()));
        assert_eq!(table.value(&one).unwrap(), json!([2, null]));
        assert_eq!(table.size(&one).unwrap(), "[2,null]".len() + "vol".len() + 4);
        assert_eq!(
            table.value(&reference(Columns::All)).unwrap(),
            json!({"close": [1.5, 2.5], "vol": [2, null]})
        );
        let missing = table
            .check(&reference(Columns::One("open".into())))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("close, vol"), "{missing}");
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
            let err = parse(bad.as_object().unwrap()).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
    }
}
