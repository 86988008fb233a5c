//! `report(#{...})`: one self-contained HTML page from a script.
//!
//! Options: `title` (required), `sections` (array), and optionally
//! `answer` (the map given to final_answer: its summary, metrics and
//! assumptions are shown), `summary`, `metrics`, `assumptions` (override
//! the answer's) and `filename` (default `report.html`). A section is a
//! map with an optional `heading` and one of `text` (a string), `table`
//! (rows; optional `columns`) or `chart` (a chart value, embedded as
//! inline SVG). Everything taken from the script is HTML-escaped; the page
//! loads nothing from anywhere (no scripts, fonts or links).

use rhai::{Array, Dynamic, Map};

use super::render;
use super::spec::{Chart, invalid};
use crate::limits::{REPORT_MAX_SECTIONS, REPORT_MAX_TABLE_ROWS};
use warden_core::error::GuardError;

/// Default file name of the page.
pub const DEFAULT_FILENAME: &str = "report.html";

const OPTIONS: [&str; 7] = [
    "title",
    "sections",
    "answer",
    "summary",
    "metrics",
    "assumptions",
    "filename",
];

const STYLE: &str = "body{font-family:sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}\
h1{border-bottom:2px solid #ccc;padding-bottom:.3em}table{border-collapse:collapse;margin:.5em 0}\
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}th{background:#f0f0f0}\
td.k,th.k{text-align:left}.chart svg{max-width:100%;height:auto}.note{color:#666;font-size:.9em}\
.summary{font-size:1.1em;background:#f7f7f7;padding:.6em 1em;border-left:4px solid #1f77b4}";

/// HTML-escapes text for element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The file name the page goes to, checked.
pub fn filename(options: &Map) -> Result<String, GuardError> {
    match options.get("filename") {
        None => Ok(DEFAULT_FILENAME.into()),
        Some(v) if v.is_string() && v.to_string().to_ascii_lowercase().ends_with(".html") => {
            Ok(v.to_string())
        }
        Some(v) => Err(invalid(
            "report.filename",
            format!(
                "expected a name ending in .html, got {}",
                super::spec::clip(&v.to_string(), 60)
            ),
        )),
    }
}

/// The page for `options`.
pub fn html(options: &Map) -> Result<String, GuardError> {
    for key in options.keys() {
        if !OPTIONS.contains(&key.as_str()) {
            return Err(invalid(
                format!("report.{key}"),
                format!(
                    "report has no option '{key}'; expected one of {}",
                    OPTIONS.join(", ")
                ),
            ));
        }
    }
    let title = match options.get("title") {
        Some(t) if t.is_string() => t.to_string(),
        _ => return Err(invalid("report.title", "missing; give the page a title string")),
    };
    let answer = match options.get("answer") {
        None => Map::new(),
        Some(a) => a
            .read_lock::<Map>()
            .map(|m| m.clone())
            .ok_or_else(|| invalid("report.answer", "expected the map given to final_answer"))?,
    };
    let pick = |key: &str| options.get(key).or_else(|| answer.get(key)).cloned();
    let mut page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title><style>{STYLE}</style></head>\n<body>\n<h1>{0}</h1>\n",
        escape(&title)
    );
    if let Some(summary) = pick("summary") {
        page.push_str(&format!(
            "<p class=\"summary\">{}</p>\n",
            escape(&summary.to_string())
        ));
    }
    if let Some(metrics) = pick("metrics") {
        let metrics = metrics
            .read_lock::<Map>()
            .map(|m| m.clone())
            .ok_or_else(|| invalid("report.metrics", "expected a map of name to value"))?;
        if !metrics.is_empty() {
            page.push_str("<h2>Metrics</h2>\n<table>");
            for (name, value) in &metrics {
                page.push_str(&format!(
                    "<tr><th class=\"k\">{}</th><td>{}</td></tr>",
                    escape(name),
                    escape(&cell(value))
                ));
            }
            page.push_str("</table>\n");
        }
    }
    let sections = match options.get("sections") {
        None => Array::new(),
        Some(s) => s
            .read_lock::<Array>()
            .map(|a| a.clone())
            .ok_or_else(|| invalid("report.sections", "expected an array of section maps"))?,
    };
    if sections.len() > REPORT_MAX_SECTIONS {
        return Err(super::spec::too_large(
            "report.sections",
            format!(
                "{} sections; the limit is {REPORT_MAX_SECTIONS}: split the report",
                sections.len()
            ),
        ));
    }
    for (i, section) in sections.iter().enumerate() {
        page.push_str(&self::section(i, section)?);
    }
    if let Some(assumptions) = pick("assumptions") {
        let items = assumptions
            .read_lock::<Array>()
            .map(|a| a.clone())
            .ok_or_else(|| invalid("report.assumptions", "expected an array of strings"))?;
        if !items.is_empty() {
            page.push_str("<h2>Assumptions</h2>\n<ul>");
            for item in &items {
                page.push_str(&format!("<li>{}</li>", escape(&item.to_string())));
            }
            page.push_str("</ul>\n");
        }
    }
    page.push_str("</body></html>\n");
    Ok(page)
}

fn section(index: usize, section: &Dynamic) -> Result<String, GuardError> {
    let field = format!("report.sections[{index}]");
    let Some(map) = section.read_lock::<Map>().map(|m| m.clone()) else {
        return Err(invalid(
            field,
            "expected a map like #{heading: \"…\", text: \"…\"} (or table: rows, or chart: a chart)",
        ));
    };
    let mut out = String::from("<section>\n");
    if let Some(heading) = map.get("heading") {
        out.push_str(&format!("<h2>{}</h2>\n", escape(&heading.to_string())));
    }
    for key in map.keys() {
        if !["heading", "text", "table", "columns", "chart"].contains(&key.as_str()) {
            return Err(invalid(
                format!("{field}.{key}"),
                "unknown section key; use heading plus one of text, table (with optional columns) or chart",
            ));
        }
    }
    if let Some(text) = map.get("text") {
        for paragraph in text.to_string().split("\n\n") {
            out.push_str(&format!("<p>{}</p>\n", escape(paragraph)));
        }
    }
    if let Some(table) = map.get("table") {
        let rows = table
            .read_lock::<Array>()
            .map(|a| a.clone())
            .ok_or_else(|| invalid(format!("{field}.table"), "expected rows: an array of maps"))?;
        out.push_str(&self::table(&field, &rows, map.get("columns"))?);
    }
    if let Some(chart) = map.get("chart") {
        let Some(chart) = chart.read_lock::<Chart>().map(|c| c.clone()) else {
            return Err(invalid(
                format!("{field}.chart"),
                "expected a chart made by line_chart, bar_chart, scatter_chart or heatmap",
            ));
        };
        let svg = render::svg(&chart)?;
        out.push_str("<div class=\"chart\">");
        out.push_str(svg.trim_start_matches(|c: char| c != '<').trim());
        out.push_str("</div>\n");
    }
    out.push_str("</section>\n");
    Ok(out)
}

fn table(field: &str, rows: &Array, columns: Option<&Dynamic>) -> Result<String, GuardError> {
    let columns: Vec<String> = match columns {
        Some(c) => c
            .read_lock::<Array>()
            .map(|a| a.iter().map(|v| v.to_string()).collect())
            .ok_or_else(|| invalid(format!("{field}.columns"), "expected an array of column names"))?,
        None => rows
            .first()
            .and_then(|r| {
                r.read_lock::<Map>()
                    .map(|m| m.keys().map(|k| k.to_string()).collect())
            })
            .unwrap_or_default(),
    };
    let mut out = String::from("<table><tr>");
    for c in &columns {
        out.push_str(&format!("<th>{}</th>", escape(c)));
    }
    out.push_str("</tr>\n");
    for (i, row) in rows.iter().take(REPORT_MAX_TABLE_ROWS).enumerate() {
        let Some(map) = row.read_lock::<Map>() else {
            return Err(invalid(format!("{field}.table[{i}]"), "expected an object map"));
        };
        out.push_str("<tr>");
        for c in &columns {
            let value = map.get(c.as_str()).map(cell).unwrap_or_default();
            out.push_str(&format!("<td>{}</td>", escape(&value)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    if rows.len() > REPORT_MAX_TABLE_ROWS {
        out.push_str(&format!(
            "<p class=\"note\">{} more rows not shown (a report table shows {REPORT_MAX_TABLE_ROWS}); write the full table with to_csv.</p>\n",
            rows.len() - REPORT_MAX_TABLE_ROWS
        ));
    }
    Ok(out)
}

/// A value as a table cell: floats to 6 significant digits.
fn cell(value: &Dynamic) -> String {
    if value.is_unit() {
        return String::new();
    }
    if let Ok(f) = value.as_float() {
        if f.is_finite() && f != 0.0 && (f.abs() >= 1e9 || f.abs() < 1e-4) {
            return format!("{f:.4e}");
        }
        let text = format!("{f:.6}");
        return if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            text
        };
    }
    value.to_string()
}
