//! Charts and the report page for scripts: `line_chart`, `bar_chart`,
//! `scatter_chart`, `heatmap` and `report`.
//!
//! A chart helper checks its rows and options ([`spec`]) and returns a
//! [`Chart`] value; nothing is drawn until the script writes it.
//! `write_artifact("x.png", chart)` or `("x.svg", chart)` draws it
//! ([`render`]) inside the script worker and sends the file through the
//! door like any other artifact, so it counts against the task's artifact
//! limits and the server stays the only writer. `report(...)` builds one
//! self-contained HTML page ([`report`]) and writes it as `report.html`.
//! Bindings live in `super::bindings`; limits in `crate::limits` (charts).

mod font;
pub mod render;
pub mod report;
pub mod spec;
#[cfg(test)]
mod tests;

use base64::Engine as _;
use rhai::{Array, Engine, EvalAltResult, Map, NativeCallContext};

pub use spec::{Chart, Kind};
use warden_core::error::GuardError;

/// Script names of the chart helpers (reserved: no guard may take them;
/// tests tie this list to the prompt and to the reserved names).
pub const HELPERS: [&str; 5] = ["line_chart", "bar_chart", "scatter_chart", "heatmap", "report"];

/// How a chart is stored, from the filename's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Png,
    Svg,
}

impl Format {
    /// The format `filename` asks for, or an error saying which to use.
    pub fn of(filename: &str) -> Result<Self, GuardError> {
        let extension = filename.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
        match extension.as_deref() {
            Some("png") => Ok(Format::Png),
            Some("svg") => Ok(Format::Svg),
            _ => Err(GuardError::invalid_input(
                "filename",
                format!("'{filename}': a chart is written as .png or .svg; name the file e.g. 'chart.png'"),
            )),
        }
    }
}

/// A chart as write_artifact content and its encoding ("base64" for PNG).
pub fn artifact_content(chart: &Chart, filename: &str) -> Result<(String, &'static str), GuardError> {
    match Format::of(filename)? {
        Format::Png => {
            let bytes = render::png(chart)?;
            Ok((base64::engine::general_purpose::STANDARD.encode(bytes), "base64"))
        }
        Format::Svg => Ok((render::svg(chart)?, "utf-8")),
    }
}

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

/// Registers the `Chart` type and the four chart helpers (`report` needs
/// the door and is registered by `super::bindings`).
pub fn register(engine: &mut Engine, thrown: fn(GuardError, rhai::Position) -> Box<EvalAltResult>) {
    engine.register_type_with_name::<Chart>("Chart");
    engine.register_fn("to_string", describe);
    engine.register_fn("to_debug", describe);
    for kind in [Kind::Line, Kind::Bar, Kind::Scatter, Kind::Heatmap] {
        engine.register_fn(
            kind.helper(),
            move |ctx: NativeCallContext, rows: Array, options: Map| -> RhaiResult<Chart> {
                spec::build(kind, &rows, &options).map_err(|e| thrown(e, ctx.call_position()))
            },
        );
    }
}

fn describe(chart: &mut Chart) -> String {
    format!(
        "{}(\"{}\", {}×{} px)",
        chart.kind.helper(),
        chart.title,
        chart.width,
        chart.height
    )
}
