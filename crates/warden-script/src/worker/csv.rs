//! `to_csv(rows)` / `to_csv(rows, columns)`: an array of maps as CSV text.
//!
//! Columns default to the first row's keys (sorted, as Rhai maps are);
//! pass `columns` to fix the order. Quoting follows RFC 4180 (csv crate).

use rhai::{Array, Dynamic};

use warden_core::error::GuardError;

pub(super) fn to_csv(rows: &Array, columns: Option<&[String]>) -> Result<String, GuardError> {
    let columns: Vec<String> = match columns {
        Some(columns) => columns.to_vec(),
        None => match rows.first().and_then(|r| {
            r.read_lock::<rhai::Map>()
                .map(|m| m.keys().map(|k| k.to_string()).collect())
        }) {
            Some(keys) => keys,
            None => return Ok(String::new()),
        },
    };
    let mut writer = csv::Writer::from_writer(Vec::new());
    let failed = |e: csv::Error| GuardError::failed(format!("csv: {e}"));
    writer.write_record(&columns).map_err(failed)?;
    for (index, row) in rows.iter().enumerate() {
        let Some(map) = row.read_lock::<rhai::Map>() else {
            return Err(GuardError::invalid_input(
                format!("rows[{index}]"),
                format!("expected an object map, got {}", row.type_name()),
            ));
        };
        let record: Vec<String> = columns
            .iter()
            .map(|c| map.get(c.as_str()).map(cell).unwrap_or_default())
            .collect();
        writer.write_record(&record).map_err(failed)?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| GuardError::failed(format!("csv: {e}")))?;
    String::from_utf8(bytes).map_err(|e| GuardError::failed(format!("csv: {e}")))
}

fn cell(value: &Dynamic) -> String {
    if value.is_unit() {
        String::new()
    } else {
        value.to_string()
    }
}
