//! From a script's rows and options to a checked [`Chart`].
//!
//! Owns every check a chart's input gets — unknown options, missing
//! columns, non-numeric or non-finite values, sizes and the limits of
//! `crate::limits` (charts block) — so that drawing (`render`) never fails on
//! input. Errors name the option or the row and column, and say the fix.

use std::collections::BTreeMap;

use rhai::{Array, Dynamic, Map};

use crate::limits::{
    CHART_DEFAULT_HEIGHT, CHART_DEFAULT_WIDTH, CHART_MAX_HEATMAP_CELLS, CHART_MAX_LABEL_CHARS,
    CHART_MAX_POINTS, CHART_MAX_SERIES, CHART_MAX_SIDE_PX, CHART_MIN_HEIGHT, CHART_MIN_WIDTH,
};
use warden_core::error::GuardError;

/// Which helper made the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Line,
    Bar,
    Scatter,
    Heatmap,
}

impl Kind {
    pub fn helper(self) -> &'static str {
        match self {
            Kind::Line => "line_chart",
            Kind::Bar => "bar_chart",
            Kind::Scatter => "scatter_chart",
            Kind::Heatmap => "heatmap",
        }
    }

    fn options(self) -> &'static [&'static str] {
        match self {
            Kind::Line | Kind::Scatter => &[
                "x", "y", "series", "title", "x_label", "y_label", "width", "height",
            ],
            Kind::Bar => &["x", "y", "title", "x_label", "y_label", "width", "height"],
            Kind::Heatmap => &[
                "x", "y", "z", "title", "x_label", "y_label", "z_label", "width", "height",
            ],
        }
    }
}

/// A named run of points (line, scatter) or bar heights (bar).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// What is drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// Line and scatter charts.
    Xy(Vec<Series>),
    /// Bar charts: one label per category; each series has one height per
    /// category (`points[i] = (i, height)`), NaN where a row had none.
    Bars {
        categories: Vec<String>,
        series: Vec<Series>,
    },
    /// Heatmaps: the distinct x and y values, ascending, and
    /// `cells[iy * xs.len() + ix]`.
    Grid {
        xs: Vec<f64>,
        ys: Vec<f64>,
        cells: Vec<Option<f64>>,
        z_label: String,
    },
}

/// A checked chart, the value `line_chart` & co. return to a script. It is
/// drawn only when written (`write_artifact`, `report`).
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub kind: Kind,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub width: u32,
    pub height: u32,
    pub data: Data,
}

/// A refused chart input, as a catchable script error.
pub fn invalid(field: impl Into<String>, message: impl AsRef<str>) -> GuardError {
    GuardError::invalid_input(field, message)
}

/// A chart beyond a limit of `crate::limits`.
pub fn too_large(field: &str, message: impl AsRef<str>) -> GuardError {
    GuardError::new("chart_too_large", format!("{field}: {}", message.as_ref())).with_field(field)
}

/// Checks `rows` and `options` for `kind`.
pub fn build(kind: Kind, rows: &Array, options: &Map) -> Result<Chart, GuardError> {
    let helper = kind.helper();
    let known = kind.options();
    for key in options.keys() {
        if !known.contains(&key.as_str()) {
            return Err(invalid(
                format!("options.{key}"),
                format!(
                    "{helper} has no option '{key}'; expected one of {}",
                    known.join(", ")
                ),
            ));
        }
    }
    let x = column(options, "x", helper)?;
    let ys = y_columns(options, helper)?;
    let title = text(options, "title", "")?;
    let x_label = text(options, "x_label", &x)?;
    let y_label = text(options, "y_label", &ys.join(", "))?;
    let width = side(options, "width", CHART_DEFAULT_WIDTH, CHART_MIN_WIDTH)?;
    let height = side(options, "height", CHART_DEFAULT_HEIGHT, CHART_MIN_HEIGHT)?;
    let maps = row_maps(rows)?;
    let data = match kind {
        Kind::Line | Kind::Scatter => {
            let group = match options.get("series") {
                None => None,
                Some(_) => Some(column(options, "series", helper)?),
            };
            if group.is_some() && ys.len() > 1 {
                return Err(invalid(
                    "options.series",
                    "give either several y columns or one y column with series, not both",
                ));
            }
            Data::Xy(xy_series(&maps, &x, &ys, group.as_deref(), kind == Kind::Line)?)
        }
        Kind::Bar => bars(&maps, &x, &ys)?,
        Kind::Heatmap => {
            if ys.len() != 1 {
                return Err(invalid("options.y", "a heatmap takes one y column (a string)"));
            }
            let z = column(options, "z", helper)?;
            let z_label = text(options, "z_label", &z)?;
            grid(&maps, &x, &ys[0], &z, z_label)?
        }
    };
    Ok(Chart {
        kind,
        title,
        x_label,
        y_label,
        width,
        height,
        data,
    })
}

fn column(options: &Map, key: &str, helper: &str) -> Result<String, GuardError> {
    match options.get(key) {
        None => Err(invalid(
            format!("options.{key}"),
            format!("missing; {helper} needs the column name for {key}, e.g. #{{{key}: \"spot\"}}"),
        )),
        Some(value) if value.is_string() && !value.to_string().is_empty() => Ok(value.to_string()),
        Some(value) => Err(invalid(
            format!("options.{key}"),
            format!("expected a column name (a string), got {}", value.type_name()),
        )),
    }
}

fn y_columns(options: &Map, helper: &str) -> Result<Vec<String>, GuardError> {
    let Some(value) = options.get("y") else {
        return column(options, "y", helper).map(|c| vec![c]);
    };
    if value.is_string() {
        return column(options, "y", helper).map(|c| vec![c]);
    }
    let Some(items) = value.read_lock::<Array>() else {
        return Err(invalid(
            "options.y",
            format!(
                "expected a column name or an array of them, got {}",
                value.type_name()
            ),
        ));
    };
    if items.is_empty() || items.iter().any(|i| !i.is_string()) {
        return Err(invalid(
            "options.y",
            "expected a non-empty array of column names (strings)",
        ));
    }
    if items.len() > CHART_MAX_SERIES {
        return Err(too_large(
            "options.y",
            format!(
                "{} y columns; at most {CHART_MAX_SERIES} series fit in one chart",
                items.len()
            ),
        ));
    }
    Ok(items.iter().map(|i| i.to_string()).collect())
}

fn text(options: &Map, key: &str, default: &str) -> Result<String, GuardError> {
    let value = match options.get(key) {
        None => return Ok(clip(default, CHART_MAX_LABEL_CHARS)),
        Some(value) if value.is_string() => value.to_string(),
        Some(value) => {
            return Err(invalid(
                format!("options.{key}"),
                format!("expected a string, got {}", value.type_name()),
            ));
        }
    };
    if value.chars().count() > CHART_MAX_LABEL_CHARS {
        return Err(invalid(
            format!("options.{key}"),
            format!("longer than {CHART_MAX_LABEL_CHARS} characters; shorten it"),
        ));
    }
    Ok(value)
}

/// `text` cut to `max` characters, with "…" when cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A number as a short label: no trailing zeros, exponent when tiny or huge.
pub fn short(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if v.abs() >= 1e6 || v.abs() < 1e-3 {
        return format!("{v:.2e}");
    }
    let text = format!("{v:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn side(options: &Map, key: &str, default: u32, min: u32) -> Result<u32, GuardError> {
    let Some(value) = options.get(key) else {
        return Ok(default);
    };
    let Some(n) = value.as_int().ok().or_else(|| {
        value
            .as_float()
            .ok()
            .filter(|f| f.fract() == 0.0 && f.abs() < 1e9)
            .map(|f| f as i64)
    }) else {
        return Err(invalid(
            format!("options.{key}"),
            format!("expected a whole number of pixels, got {}", value.type_name()),
        ));
    };
    if n > i64::from(CHART_MAX_SIDE_PX) {
        return Err(too_large(
            &format!("options.{key}"),
            format!("{n} pixels; the limit is {CHART_MAX_SIDE_PX}: ask for a smaller chart"),
        ));
    }
    if n < i64::from(min) {
        return Err(invalid(
            format!("options.{key}"),
            format!("{n} pixels is too small to draw axes; use at least {min}"),
        ));
    }
    Ok(n as u32)
}

fn row_maps(rows: &Array) -> Result<Vec<Map>, GuardError> {
    if rows.is_empty() {
        return Err(invalid(
            "rows",
            "no rows to draw; pass an array of maps with at least one row",
        ));
    }
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            row.read_lock::<Map>().map(|m| m.clone()).ok_or_else(|| {
                invalid(
                    format!("rows[{i}]"),
                    format!(
                        "expected an object map like #{{x: 1.0, y: 2.0}}, got {}",
                        row.type_name()
                    ),
                )
            })
        })
        .collect()
}

/// The number in `row[column]`; `Ok(None)` when the row has no such value
/// (unit), an error naming the row when it is missing from every row or
/// not a finite number.
fn number(row: &Map, index: usize, column: &str) -> Result<Option<f64>, GuardError> {
    let field = || format!("rows[{index}].{column}");
    let Some(value) = row.get(column) else {
        return Err(invalid(
            field(),
            format!(
                "row has no column '{column}' (it has: {}); fix the column name in the options or add the value",
                row.keys().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
            ),
        ));
    };
    if value.is_unit() {
        return Ok(None);
    }
    let n = value
        .as_float()
        .ok()
        .or_else(|| value.as_int().ok().map(|i| i as f64))
        .ok_or_else(|| {
            invalid(
                field(),
                format!(
                    "expected a number, got {} {}; convert it (e.g. parse_float) or choose a numeric column",
                    value.type_name(),
                    describe(value)
                ),
            )
        })?;
    if !n.is_finite() {
        return Err(invalid(
            field(),
            format!("{n} cannot be drawn; leave such rows out"),
        ));
    }
    Ok(Some(n))
}

fn describe(value: &Dynamic) -> String {
    clip(&format!("{value:?}"), 40)
}

fn count_points(total: usize) -> Result<(), GuardError> {
    if total > CHART_MAX_POINTS {
        return Err(too_large(
            "rows",
            format!(
                "{total} points; the limit is {CHART_MAX_POINTS} per chart: aggregate or sample the rows first"
            ),
        ));
    }
    Ok(())
}

fn xy_series(
    rows: &[Map],
    x: &str,
    ys: &[String],
    group: Option<&str>,
    sort: bool,
) -> Result<Vec<Series>, GuardError> {
    let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut total = 0usize;
    for (i, row) in rows.iter().enumerate() {
        let Some(xv) = number(row, i, x)? else { continue };
        for y in ys {
            let Some(yv) = number(row, i, y)? else { continue };
            let name = match group {
                Some(g) => match row.get(g) {
                    Some(v) => v.to_string(),
                    None => {
                        return Err(invalid(
                            format!("rows[{i}].{g}"),
                            format!("row has no column '{g}' named by options.series"),
                        ));
                    }
                },
                None => y.clone(),
            };
            if !series.contains_key(&name) {
                order.push(name.clone());
                if order.len() > CHART_MAX_SERIES {
                    return Err(too_large(
                        "options.series",
                        format!("more than {CHART_MAX_SERIES} distinct values; group fewer series per chart"),
                    ));
                }
            }
            series.entry(name).or_default().push((xv, yv));
            total += 1;
        }
    }
    count_points(total)?;
    if total == 0 {
        return Err(invalid(
            "rows",
            format!("no row has both '{x}' and a y value to draw"),
        ));
    }
    Ok(order
        .into_iter()
        .map(|name| {
            let mut points = series.remove(&name).unwrap_or_default();
            if sort {
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
            Series { name, points }
        })
        .collect())
}

fn bars(rows: &[Map], x: &str, ys: &[String]) -> Result<Data, GuardError> {
    count_points(rows.len() * ys.len())?;
    let mut categories = Vec::with_capacity(rows.len());
    let mut series: Vec<Series> = ys
        .iter()
        .map(|y| Series {
            name: y.clone(),
            points: Vec::with_capacity(rows.len()),
        })
        .collect();
    for (i, row) in rows.iter().enumerate() {
        let Some(label) = row.get(x) else {
            return Err(invalid(
                format!("rows[{i}].{x}"),
                format!("row has no column '{x}' for the bar label; fix options.x or add the value"),
            ));
        };
        let label = match label.as_float() {
            Ok(f) => short(f),
            Err(_) => label.to_string(),
        };
        categories.push(clip(&label, 40));
        for (s, y) in series.iter_mut().zip(ys) {
            let height = number(row, i, y)?.unwrap_or(f64::NAN);
            s.points.push((i as f64, height));
        }
    }
    Ok(Data::Bars { categories, series })
}

fn grid(rows: &[Map], x: &str, y: &str, z: &str, z_label: String) -> Result<Data, GuardError> {
    let mut triples = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let (Some(xv), Some(yv)) = (number(row, i, x)?, number(row, i, y)?) else {
            continue;
        };
        if let Some(zv) = number(row, i, z)? {
            triples.push((i, xv, yv, zv));
        }
    }
    if triples.is_empty() {
        return Err(invalid(
            "rows",
            format!("no row has '{x}', '{y}' and '{z}' values to draw"),
        ));
    }
    let distinct = |pick: fn(&(usize, f64, f64, f64)) -> f64| {
        let mut values: Vec<f64> = triples.iter().map(pick).collect();
        values.sort_unstable_by(f64::total_cmp);
        values.dedup();
        values
    };
    let xs = distinct(|t| t.1);
    let ys = distinct(|t| t.2);
    let cells = xs.len() * ys.len();
    if cells > CHART_MAX_HEATMAP_CELLS {
        return Err(too_large(
            "rows",
            format!(
                "a {} × {} grid is {cells} cells; the limit is {CHART_MAX_HEATMAP_CELLS}: use fewer distinct '{x}' or '{y}' values",
                xs.len(),
                ys.len()
            ),
        ));
    }
    let mut grid = vec![None; cells];
    for (i, xv, yv, zv) in triples {
        let ix = xs.partition_point(|v| *v < xv);
        let iy = ys.partition_point(|v| *v < yv);
        let cell = &mut grid[iy * xs.len() + ix];
        if cell.is_some() {
            return Err(invalid(
                format!("rows[{i}]"),
                format!(
                    "a second row for {x} = {xv}, {y} = {yv}; a heatmap needs one row per ({x}, {y}) pair"
                ),
            ));
        }
        *cell = Some(zv);
    }
    Ok(Data::Grid {
        xs,
        ys,
        cells: grid,
        z_label,
    })
}
