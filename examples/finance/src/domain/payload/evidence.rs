//! Evidence is reduced, never returned whole: at most `MAX_TABLE_ROWS` rows
//! per table, `MAX_LIST_ITEMS` items per list and `MAX_STRING_CHARS`
//! characters per string, and whatever was cut is said under the evidence's
//! `truncated` key. This file owns those caps, the `Evidence` builder that
//! applies them, the paste-ready text `Table`, and number formatting.

use serde_json::{Map, Value};

use super::number::num;

/// Most rows kept in any evidence table or row list.
pub const MAX_TABLE_ROWS: usize = 50;
/// Most items kept in any evidence list.
pub const MAX_LIST_ITEMS: usize = 500;
/// Most characters kept in any evidence string.
pub const MAX_STRING_CHARS: usize = 4_000;

/// `s` cut to `max` characters, and a note saying what was cut if it was.
pub fn cut_string(s: &str, max: usize) -> (String, Option<String>) {
    let n = s.chars().count();
    if n <= max {
        (s.to_owned(), None)
    } else {
        let kept: String = s.chars().take(max).collect();
        (kept, Some(format!("cut to {max} of {n} characters")))
    }
}

/// Up to `max` names joined by ", ", then "and N more".
pub fn name_list(names: &[String], max: usize) -> String {
    if names.len() <= max {
        names.join(", ")
    } else {
        format!("{} and {} more", names[..max].join(", "), names.len() - max)
    }
}

/// `x` with `dp` decimals; "Infinity"/"-Infinity" for ±∞, "n/a" for NaN.
pub fn fmt_num(x: f64, dp: usize) -> String {
    if x.is_nan() {
        "n/a".to_owned()
    } else if x.is_infinite() {
        if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
    } else {
        format!("{x:.dp$}")
    }
}

/// `x` (a decimal fraction) as a percentage with `dp` decimals: 0.1234 → "12.34%".
pub fn fmt_pct(x: f64, dp: usize) -> String {
    if x.is_finite() {
        format!("{:.dp$}%", x * 100.0)
    } else {
        fmt_num(x, dp)
    }
}

/// A plain-text table rendered as GitHub markdown with padded columns, so
/// it reads well in a terminal and pastes into a report unchanged.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Self {
        Self {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (missing cells render empty, extra cells are dropped).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Number of rows added.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when no rows were added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The markdown text of the first `MAX_TABLE_ROWS` rows, and a note if
    /// rows were left out (also stated in the text's last line).
    pub fn render(&self) -> (String, Option<String>) {
        let shown = &self.rows[..self.rows.len().min(MAX_TABLE_ROWS)];
        let ncol = self.headers.len();
        let cell = |r: &Vec<String>, c: usize| r.get(c).cloned().unwrap_or_default();
        let widths: Vec<usize> = (0..ncol)
            .map(|c| {
                shown
                    .iter()
                    .map(|r| cell(r, c).chars().count())
                    .chain([self.headers[c].chars().count(), 3])
                    .max()
                    .unwrap_or(3)
            })
            .collect();
        let line = |cells: Vec<String>| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(s, w)| format!("{s:<w$}"))
                .collect();
            format!("| {} |\n", padded.join(" | "))
        };
        let mut out = line(self.headers.clone());
        out.push_str(&line(widths.iter().map(|w| "-".repeat(*w)).collect()));
        for r in shown {
            out.push_str(&line((0..ncol).map(|c| cell(r, c)).collect()));
        }
        let note = (self.rows.len() > shown.len())
            .then(|| format!("showing {} of {} rows", shown.len(), self.rows.len()));
        if let Some(n) = &note {
            out.push_str(&format!("({n})\n"));
        }
        (out, note)
    }
}

/// Builds a guard's `evidence` object, applying the caps and recording
/// every cut under `truncated`.
#[derive(Debug, Default)]
pub struct Evidence {
    map: Map<String, Value>,
    truncated: Map<String, Value>,
}

impl Evidence {
    /// An empty evidence object.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets a small value as is (use `number` for floats, `text` for strings
    /// of unbounded length, `list`/`rows` for collections).
    pub fn put(&mut self, key: &str, v: Value) {
        self.map.insert(key.to_owned(), v);
    }

    /// Sets a float, keeping ±∞ as "Infinity"/"-Infinity" and NaN as null.
    pub fn number(&mut self, key: &str, x: f64) {
        self.put(key, num(x));
    }

    /// Sets a string, cut to `MAX_STRING_CHARS`.
    pub fn text(&mut self, key: &str, s: &str) {
        let (kept, note) = cut_string(s, MAX_STRING_CHARS);
        if let Some(n) = note {
            self.truncated.insert(key.to_owned(), Value::String(n));
        }
        self.put(key, Value::String(kept));
    }

    fn capped(&mut self, key: &str, mut items: Vec<Value>, max: usize, unit: &str) {
        if items.len() > max {
            let n = items.len();
            items.truncate(max);
            self.truncated.insert(
                key.to_owned(),
                Value::String(format!("showing {max} of {n} {unit}")),
            );
        }
        self.put(key, Value::Array(items));
    }

    /// Sets a list, cut to `MAX_LIST_ITEMS` items.
    pub fn list(&mut self, key: &str, items: Vec<Value>) {
        self.capped(key, items, MAX_LIST_ITEMS, "items");
    }

    /// Sets a list of row objects, cut to `MAX_TABLE_ROWS` rows.
    pub fn rows(&mut self, key: &str, rows: Vec<Value>) {
        self.capped(key, rows, MAX_TABLE_ROWS, "rows");
    }

    /// Sets `table` to the rendered table, cut to the row and string caps.
    pub fn table(&mut self, t: &Table) {
        let (text, note) = t.render();
        self.text("table", &text);
        if let (Some(n), false) = (note, self.truncated.contains_key("table")) {
            self.truncated.insert("table".to_owned(), Value::String(n));
        }
    }

    /// The finished object, with `truncated` present only if something was cut.
    pub fn into_value(mut self) -> Value {
        if !self.truncated.is_empty() {
            self.map
                .insert("truncated".to_owned(), Value::Object(self.truncated));
        }
        Value::Object(self.map)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_lists_and_strings_are_cut_and_said_so() {
        // Pins the 50-row, 500-item and 4,000-character caps and the `truncated` notes.
        let mut e = Evidence::new();
        e.rows("violations", (0..120).map(|i| json!({"row": i})).collect());
        e.list("symbols", (0..501).map(|i| json!(i)).collect());
        e.text("note", &"x".repeat(4_001));
        e.text("short", "ok");
        let v = e.into_value();
        assert_eq!(v["violations"].as_array().unwrap().len(), 50);
        assert_eq!(v["symbols"].as_array().unwrap().len(), 500);
        assert_eq!(v["note"].as_str().unwrap().len(), 4_000);
        assert_eq!(v["truncated"]["violations"], "showing 50 of 120 rows");
        assert_eq!(v["truncated"]["symbols"], "showing 500 of 501 items");
        assert_eq!(v["truncated"]["note"], "cut to 4000 of 4001 characters");
        assert!(v["truncated"].get("short").is_none());
    }

    #[test]
    fn nothing_cut_means_no_truncated_key() {
        // Pins that `truncated` is absent when everything fit, and ∞ stays a string.
        let mut e = Evidence::new();
        e.number("breakeven_bps", f64::INFINITY);
        let v = e.into_value();
        assert_eq!(v, json!({"breakeven_bps": "Infinity"}));
    }

    #[test]
    fn table_renders_markdown_and_caps_rows() {
        // Pins the markdown layout (padded to the widest cell) and the row cap.
        let mut t = Table::new(&["a", "bb"]);
        t.row(vec!["1".into(), "long cell".into()]);
        let (text, note) = t.render();
        assert_eq!(
            text,
            "| a   | bb        |\n| --- | --------- |\n| 1   | long cell |\n"
        );
        assert!(note.is_none());
        for i in 0..60 {
            t.row(vec![i.to_string(), String::new()]);
        }
        let mut e = Evidence::new();
        e.table(&t);
        let v = e.into_value();
        assert!(
            v["table"]
                .as_str()
                .unwrap()
                .ends_with("(showing 50 of 61 rows)\n")
        );
        assert_eq!(v["truncated"]["table"], "showing 50 of 61 rows");
    }

    #[test]
    fn formatting_helpers() {
        // Pins number, percent and name-list formatting.
        assert_eq!(fmt_num(1.23456, 2), "1.23");
        assert_eq!(fmt_num(f64::NEG_INFINITY, 2), "-Infinity");
        assert_eq!(fmt_pct(0.1234, 1), "12.3%");
        let names: Vec<String> = ["A", "B", "C"].iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(name_list(&names, 2), "A, B and 1 more");
        assert_eq!(name_list(&names, 3), "A, B, C");
    }
}
