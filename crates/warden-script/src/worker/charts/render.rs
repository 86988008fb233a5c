//! Draws a checked [`Chart`] as PNG bytes or SVG text, in memory.
//!
//! plotters draws into an RGB buffer (then `png` encodes it) or into a
//! string; text comes from the bundled font (`super::font`). Nothing here
//! opens a file, starts a thread or reads the clock, so it runs unchanged
//! inside the script worker's seccomp filter. Input was checked by
//! [`super::spec`]; a failure here is a drawing problem, not the script's.

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::font::{self, FAMILY};
use super::spec::{Chart, Data, Kind, Series, short};
use warden_core::error::GuardError;

/// Series colours, in order (Tableau 10 and two more; 12 = the series limit).
const PALETTE: [(u8, u8, u8); 12] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
    (0, 0, 128),
    (128, 128, 0),
];

/// Viridis, sampled at five stops (low → high).
const VIRIDIS: [(f64, f64, f64); 5] = [
    (68.0, 1.0, 84.0),
    (59.0, 82.0, 139.0),
    (33.0, 145.0, 140.0),
    (94.0, 201.0, 98.0),
    (253.0, 231.0, 37.0),
];

/// Width of the heatmap's colour scale, labels included: 110 pixels.
const SCALE_WIDTH: u32 = 110;

/// The chart as a PNG file.
pub fn png(chart: &Chart) -> Result<Vec<u8>, GuardError> {
    font::ensure()?;
    let (width, height) = (chart.width, chart.height);
    let mut pixels = vec![0u8; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (width, height)).into_drawing_area();
        draw(chart, &root)?;
        root.present().map_err(drawing)?;
    }
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Fast);
    let encoded = encoder
        .write_header()
        .and_then(|mut writer| writer.write_image_data(&pixels).and_then(|_| writer.finish()));
    encoded.map_err(|e| GuardError::failed(format!("chart: png encoding failed: {e}")))?;
    Ok(out)
}

/// The chart as an SVG document.
pub fn svg(chart: &Chart) -> Result<String, GuardError> {
    font::ensure()?;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (chart.width, chart.height)).into_drawing_area();
        draw(chart, &root)?;
        root.present().map_err(drawing)?;
    }
    Ok(out)
}

fn drawing(error: impl std::fmt::Display) -> GuardError {
    GuardError::failed(format!("chart: drawing failed: {error}"))
}

fn colour(index: usize) -> RGBColor {
    let (r, g, b) = PALETTE[index % PALETTE.len()];
    RGBColor(r, g, b)
}

/// Viridis at `t` in [0, 1].
pub fn viridis(t: f64) -> RGBColor {
    let t = if t.is_finite() { t.clamp(0.0, 1.0) } else { 0.0 };
    let scaled = t * (VIRIDIS.len() - 1) as f64;
    let low = (scaled.floor() as usize).min(VIRIDIS.len() - 2);
    let f = scaled - low as f64;
    let (a, b) = (VIRIDIS[low], VIRIDIS[low + 1]);
    let mix = |p: f64, q: f64| (p + (q - p) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// The range of `values`, widened by `pad` of its span (and made non-empty).
fn span(values: impl Iterator<Item = f64>, pad: f64) -> (f64, f64) {
    let (mut low, mut high) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(v), h.max(v))
        });
    if !low.is_finite() {
        return (0.0, 1.0);
    }
    if high - low <= f64::EPSILON * low.abs().max(1.0) {
        let half = (low.abs() * 0.1).max(0.5);
        low -= half;
        high += half;
    }
    let p = (high - low) * pad;
    (low - p, high + p)
}

fn draw<DB: DrawingBackend>(chart: &Chart, root: &DrawingArea<DB, Shift>) -> Result<(), GuardError> {
    root.fill(&WHITE).map_err(drawing)?;
    let area = if chart.title.is_empty() {
        root.clone()
    } else {
        root.titled(&chart.title, (FAMILY, 22)).map_err(drawing)?
    };
    match &chart.data {
        Data::Xy(series) => xy(chart, &area, series),
        Data::Bars { categories, series } => bars(chart, &area, categories, series),
        Data::Grid {
            xs,
            ys,
            cells,
            z_label,
        } => heatmap(chart, &area, xs, ys, cells, z_label),
    }
}

fn xy<DB: DrawingBackend>(
    chart: &Chart,
    area: &DrawingArea<DB, Shift>,
    series: &[Series],
) -> Result<(), GuardError> {
    let points = || series.iter().flat_map(|s| s.points.iter());
    let (x0, x1) = span(points().map(|p| p.0), 0.02);
    let (y0, y1) = span(points().map(|p| p.1), 0.05);
    let mut ctx = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(drawing)?;
    ctx.configure_mesh()
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 15))
        .x_label_formatter(&|v| short(*v))
        .y_label_formatter(&|v| short(*v))
        .draw()
        .map_err(drawing)?;
    for (i, s) in series.iter().enumerate() {
        let c = colour(i);
        let annotation = if chart.kind == Kind::Line {
            ctx.draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                .map_err(drawing)?
        } else {
            ctx.draw_series(s.points.iter().map(|p| Circle::new(*p, 3, c.filled())))
                .map_err(drawing)?
        };
        annotation
            .label(s.name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
    }
    legend(&mut ctx, series.len())
}

/// The chart's coordinates: plain f64 on both axes.
type Plane = Cartesian2d<RangedCoordf64, RangedCoordf64>;

fn legend<'a, DB: DrawingBackend + 'a>(
    ctx: &mut ChartContext<'a, DB, Plane>,
    series: usize,
) -> Result<(), GuardError> {
    if series < 2 {
        return Ok(());
    }
    ctx.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FAMILY, 13))
        .draw()
        .map_err(drawing)
}

fn bars<DB: DrawingBackend>(
    chart: &Chart,
    area: &DrawingArea<DB, Shift>,
    categories: &[String],
    series: &[Series],
) -> Result<(), GuardError> {
    let n = categories.len();
    let heights = || series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (low, high) = span(heights().chain([0.0]), 0.05);
    let (low, high) = (if low > 0.0 { 0.0 } else { low }, high.max(0.0));
    let mut ctx = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5..(n as f64 - 0.5), low..high)
        .map_err(drawing)?;
    let category = |v: &f64| {
        let i = v.round();
        if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
            categories[i as usize].clone()
        } else {
            String::new()
        }
    };
    ctx.configure_mesh()
        .disable_x_mesh()
        .x_labels(n.min(20))
        .x_label_formatter(&category)
        .y_label_formatter(&|v| short(*v))
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 15))
        .draw()
        .map_err(drawing)?;
    let width = 0.8 / series.len().max(1) as f64;
    for (j, s) in series.iter().enumerate() {
        let c = colour(j);
        let rects = s.points.iter().filter(|p| p.1.is_finite()).map(|&(i, h)| {
            let left = i - 0.4 + j as f64 * width;
            Rectangle::new([(left, 0.0), (left + width * 0.92, h)], c.filled())
        });
        ctx.draw_series(rects)
            .map_err(drawing)?
            .label(s.name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
    }
    legend(&mut ctx, series.len())
}

fn heatmap<DB: DrawingBackend>(
    chart: &Chart,
    area: &DrawingArea<DB, Shift>,
    xs: &[f64],
    ys: &[f64],
    cells: &[Option<f64>],
    z_label: &str,
) -> Result<(), GuardError> {
    let (width, _) = area.dim_in_pixel();
    let (plot, scale) = area.split_horizontally(width.saturating_sub(SCALE_WIDTH));
    let (z0, z1) = span(cells.iter().flatten().copied(), 0.0);
    let (nx, ny) = (xs.len(), ys.len());
    let mut ctx = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5..(nx as f64 - 0.5), -0.5..(ny as f64 - 0.5))
        .map_err(drawing)?;
    let label = |values: &[f64], v: f64| {
        let i = v.round();
        if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < values.len() {
            short(values[i as usize])
        } else {
            String::new()
        }
    };
    ctx.configure_mesh()
        .disable_mesh()
        .x_labels(nx.min(10))
        .y_labels(ny.min(10))
        .x_label_formatter(&|v| label(xs, *v))
        .y_label_formatter(&|v| label(ys, *v))
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 15))
        .draw()
        .map_err(drawing)?;
    let rects = cells.iter().enumerate().filter_map(|(k, z)| {
        let z = (*z)?;
        let (ix, iy) = ((k % nx) as f64, (k / nx) as f64);
        let c = viridis((z - z0) / (z1 - z0));
        Some(Rectangle::new(
            [(ix - 0.5, iy - 0.5), (ix + 0.5, iy + 0.5)],
            c.filled(),
        ))
    });
    ctx.draw_series(rects).map_err(drawing)?;
    let mut bar = ChartBuilder::on(&scale)
        .margin_top(12)
        .margin_bottom(56)
        .margin_right(8)
        .y_label_area_size(62)
        .build_cartesian_2d(0.0..1.0, z0..z1)
        .map_err(drawing)?;
    bar.configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_labels(6)
        .y_label_formatter(&|v| short(*v))
        .y_desc(z_label)
        .label_style((FAMILY, 12))
        .axis_desc_style((FAMILY, 13))
        .draw()
        .map_err(drawing)?;
    let steps = 64;
    let strips = (0..steps).map(|k| {
        let (a, b) = (k as f64 / steps as f64, (k + 1) as f64 / steps as f64);
        let (za, zb) = (z0 + (z1 - z0) * a, z0 + (z1 - z0) * b);
        Rectangle::new([(0.0, za), (1.0, zb)], viridis((a + b) / 2.0).filled())
    });
    bar.draw_series(strips).map_err(drawing)?;
    Ok(())
}
