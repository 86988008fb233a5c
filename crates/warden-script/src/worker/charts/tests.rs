//! Each chart type drawn for real: PNG size and pixels, SVG text, and the
//! limits refused with errors that name the option and the fix.

use rhai::{Array, Dynamic, Map};

use super::spec::{Kind, build};
use super::{render, report};
use crate::limits::{CHART_MAX_HEATMAP_CELLS, CHART_MAX_POINTS, CHART_MAX_SIDE_PX};
use warden_core::error::GuardError;

fn map(pairs: &[(&str, Dynamic)]) -> Map {
    pairs.iter().map(|(k, v)| ((*k).into(), v.clone())).collect()
}

fn s(text: &str) -> Dynamic {
    Dynamic::from(text.to_string())
}

/// Rows `#{x, y, group}` of two sine-ish curves.
fn xy_rows(n: usize) -> Array {
    (0..n)
        .map(|i| {
            let x = i as f64 / 10.0;
            Dynamic::from_map(map(&[
                ("x", Dynamic::from_float(x)),
                ("y", Dynamic::from_float(x.sin() * 10.0 + x)),
                ("w", Dynamic::from_float(x.cos() * 5.0)),
                ("group", s(if i % 2 == 0 { "even" } else { "odd" })),
            ]))
        })
        .collect()
}

/// A spot × vol grid with a price-like z.
fn grid_rows(nx: usize, ny: usize) -> Array {
    let mut rows = Array::new();
    for i in 0..nx {
        for j in 0..ny {
            let spot = 80.0 + i as f64;
            let vol = 0.1 + j as f64 / 100.0;
            rows.push(Dynamic::from_map(map(&[
                ("spot", Dynamic::from_float(spot)),
                ("vol", Dynamic::from_float(vol)),
                ("price", Dynamic::from_float((spot - 100.0).max(0.0) + 40.0 * vol)),
            ])));
        }
    }
    rows
}

/// Decodes a PNG: (width, height, RGB pixels).
fn decode(png: &[u8]) -> (u32, u32, Vec<u8>) {
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let mut reader = decoder.read_info().expect("png header");
    let mut pixels = vec![0; reader.output_buffer_size().expect("buffer size")];
    let info = reader.next_frame(&mut pixels).expect("png frame");
    pixels.truncate(info.buffer_size());
    (info.width, info.height, pixels)
}

/// Distinct colours among the pixels (RGB triples).
fn colours(pixels: &[u8]) -> usize {
    let mut seen: Vec<[u8; 3]> = pixels.chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect();
    seen.sort_unstable();
    seen.dedup();
    seen.len()
}

fn check_drawn(kind: Kind, rows: &Array, options: Map, title: &str) {
    let chart = build(kind, rows, &options).expect("valid chart");
    let png = render::png(&chart).expect("png");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    let (width, height, pixels) = decode(&png);
    assert_eq!((width, height), (chart.width, chart.height));
    assert!(colours(&pixels) > 8, "{kind:?}: the image is (nearly) one colour");
    let svg = render::svg(&chart).expect("svg");
    assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
    assert!(svg.contains(title), "{kind:?}: title '{title}' not in the SVG");
}

#[test]
fn a_line_chart_draws_its_series_and_title() {
    // Line chart: default 800×500 PNG with many colours; the title is SVG text.
    let options = map(&[("x", s("x")), ("y", s("y")), ("title", s("Cost curve"))]);
    check_drawn(Kind::Line, &xy_rows(200), options, "Cost curve");
}

#[test]
fn a_line_chart_groups_rows_by_the_series_column() {
    // `series` splits rows into one named series per value, in first-seen order.
    let options = map(&[("x", s("x")), ("y", s("y")), ("series", s("group"))]);
    let chart = build(Kind::Line, &xy_rows(10), &options).expect("valid");
    let super::spec::Data::Xy(series) = &chart.data else {
        panic!("xy data")
    };
    let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["even", "odd"]);
    assert_eq!(series[0].points.len(), 5);
}

#[test]
fn a_bar_chart_draws_grouped_bars_at_the_asked_size() {
    // Bar chart with two y columns at 640×360.
    let rows: Array = ["alpha", "beta", "gamma"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            Dynamic::from_map(map(&[
                ("name", s(name)),
                ("cost", Dynamic::from_float(3.0 + i as f64)),
                ("fee", Dynamic::from_int(1 + i as i64)),
            ]))
        })
        .collect();
    let options = map(&[
        ("x", s("name")),
        ("y", Dynamic::from_array(vec![s("cost"), s("fee")])),
        ("title", s("Costs by desk")),
        ("width", Dynamic::from_int(640)),
        ("height", Dynamic::from_int(360)),
    ]);
    check_drawn(Kind::Bar, &rows, options, "Costs by desk");
}

#[test]
fn a_scatter_chart_draws_points_and_title() {
    // Scatter chart of two columns.
    let options = map(&[("x", s("y")), ("y", s("w")), ("title", s("Risk vs return"))]);
    check_drawn(Kind::Scatter, &xy_rows(300), options, "Risk vs return");
}

/// The PNG of a scatter chart titled `title`.
fn titled_png(title: &str) -> Vec<u8> {
    let options = map(&[("x", s("y")), ("y", s("w")), ("title", s(title))]);
    let chart = build(Kind::Scatter, &xy_rows(50), &options).expect("chart");
    render::png(&chart).expect("png")
}

#[test]
fn the_cut_font_draws_greek_currency_and_math_but_boxes_for_the_rest() {
    // The bundled font is cut to the ranges in assets/fonts/README.md. Every
    // character outside it draws the same empty box, so two titles of
    // missing characters draw alike; each kept range draws its own glyphs.
    let boxes = titled_png("\u{4e2d}\u{6587}\u{5b57}");
    assert_eq!(
        boxes,
        titled_png("\u{3042}\u{3044}\u{3046}"),
        "CJK: not in the cut font, one box each"
    );
    for kept in ["σμΔ", "€£¥", "≤≥±", "Жзы", "‰–…", "→↑↓"] {
        assert_ne!(
            titled_png(kept),
            boxes,
            "'{kept}' drew as boxes: its range was cut from the font"
        );
    }
}

#[test]
fn a_heatmap_draws_the_grid_and_escapes_its_title_in_svg() {
    // Heatmap of a 20×15 grid; an ampersand in the title arrives escaped in the SVG.
    let options = map(&[
        ("x", s("spot")),
        ("y", s("vol")),
        ("z", s("price")),
        ("title", s("Call price")),
    ]);
    check_drawn(Kind::Heatmap, &grid_rows(20, 15), options, "Call price");
    let options = map(&[
        ("x", s("spot")),
        ("y", s("vol")),
        ("z", s("price")),
        ("title", s("P&L <grid>")),
    ]);
    let chart = build(Kind::Heatmap, &grid_rows(3, 3), &options).expect("valid");
    let svg = render::svg(&chart).expect("svg");
    assert!(svg.contains("P&amp;L &lt;grid&gt;"), "title not escaped");
}

fn refused(kind: Kind, rows: &Array, options: Map) -> GuardError {
    build(kind, rows, &options).expect_err("refused")
}

#[test]
fn too_many_points_cells_or_pixels_are_refused_naming_the_limit() {
    // Each chart limit: a chart_too_large error naming the option and the fix.
    let rows = xy_rows(CHART_MAX_POINTS + 1);
    let error = refused(Kind::Line, &rows, map(&[("x", s("x")), ("y", s("y"))]));
    assert_eq!(error.code, "chart_too_large");
    assert_eq!(error.field.as_deref(), Some("rows"));
    assert!(error.message.contains("aggregate or sample"), "{}", error.message);
    let side = (CHART_MAX_HEATMAP_CELLS as f64).sqrt() as usize + 1;
    let grid = grid_rows(side, side);
    let options = map(&[("x", s("spot")), ("y", s("vol")), ("z", s("price"))]);
    let error = refused(Kind::Heatmap, &grid, options);
    assert_eq!(error.code, "chart_too_large");
    assert!(error.message.contains("fewer distinct"), "{}", error.message);
    let big = Dynamic::from_int(i64::from(CHART_MAX_SIDE_PX) + 1);
    let error = refused(
        Kind::Scatter,
        &xy_rows(3),
        map(&[("x", s("x")), ("y", s("y")), ("width", big)]),
    );
    assert_eq!(error.field.as_deref(), Some("options.width"));
    assert!(error.message.contains("smaller chart"), "{}", error.message);
}

#[test]
fn bad_input_names_the_option_or_row_and_the_fix() {
    // Missing option, unknown option, missing column, text where a number belongs.
    let rows = xy_rows(3);
    let error = refused(Kind::Line, &rows, map(&[("x", s("x"))]));
    assert_eq!(error.field.as_deref(), Some("options.y"));
    assert!(
        error.message.contains("needs the column name"),
        "{}",
        error.message
    );
    let error = refused(
        Kind::Line,
        &rows,
        map(&[("x", s("x")), ("y", s("y")), ("colour", s("red"))]),
    );
    assert!(error.message.contains("no option 'colour'"), "{}", error.message);
    let error = refused(Kind::Line, &rows, map(&[("x", s("x")), ("y", s("price"))]));
    assert_eq!(error.field.as_deref(), Some("rows[0].price"));
    assert!(error.message.contains("fix the column name"), "{}", error.message);
    let error = refused(Kind::Scatter, &rows, map(&[("x", s("x")), ("y", s("group"))]));
    assert_eq!(error.code, "invalid_input");
    assert!(error.message.contains("expected a number"), "{}", error.message);
}

#[test]
fn chart_files_take_their_format_from_the_extension() {
    // .png → base64 PNG, .svg → SVG text, anything else refused naming filename.
    let options = map(&[("x", s("x")), ("y", s("y"))]);
    let chart = build(Kind::Line, &xy_rows(5), &options).expect("valid");
    let (png, encoding) = super::artifact_content(&chart, "a.PNG").expect("png");
    assert_eq!(encoding, "base64");
    assert!(png.starts_with("iVBORw0KGgo"), "base64 of the PNG signature");
    let (svg, encoding) = super::artifact_content(&chart, "a.svg").expect("svg");
    assert_eq!(encoding, "utf-8");
    assert!(svg.starts_with("<svg"));
    let error = super::artifact_content(&chart, "a.csv").expect_err("refused");
    assert_eq!(error.field.as_deref(), Some("filename"));
    assert!(error.message.contains(".png or .svg"), "{}", error.message);
}

#[test]
fn a_report_escapes_script_text_and_embeds_charts_inline() {
    // The page: escaped title/summary/cells, metrics, assumptions, the chart as inline SVG.
    let options = map(&[("x", s("x")), ("y", s("y")), ("title", s("Curve"))]);
    let chart = build(Kind::Line, &xy_rows(20), &options).expect("valid");
    let sections: Array = vec![
        Dynamic::from_map(map(&[
            ("heading", s("Notes")),
            ("text", s("<script>alert(1)</script>")),
        ])),
        Dynamic::from_map(map(&[
            ("heading", s("Table")),
            ("table", Dynamic::from_array(xy_rows(3))),
            ("columns", Dynamic::from_array(vec![s("x"), s("group")])),
        ])),
        Dynamic::from_map(map(&[("chart", Dynamic::from(chart))])),
    ];
    let answer = map(&[
        ("summary", s("R&D \"up\"")),
        (
            "metrics",
            Dynamic::from_map(map(&[("rows", Dynamic::from_int(3))])),
        ),
        ("assumptions", Dynamic::from_array(vec![s("vol < 1")])),
    ]);
    let page = report::html(&map(&[
        ("title", s("Q3 <report>")),
        ("answer", Dynamic::from_map(answer)),
        ("sections", Dynamic::from_array(sections)),
    ]))
    .expect("page");
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("<h1>Q3 &lt;report&gt;</h1>"));
    assert!(page.contains("R&amp;D &quot;up&quot;"));
    assert!(!page.contains("<script>"), "script text must be escaped");
    assert!(page.contains("<th>group</th>") && page.contains("<td>even</td>"));
    assert!(page.contains("<div class=\"chart\"><svg"));
    assert!(page.contains("vol &lt; 1"));
    assert!(page.contains("<th class=\"k\">rows</th><td>3</td>"));
    let error = report::html(&map(&[("title", s("t")), ("colour", s("red"))])).expect_err("refused");
    assert_eq!(error.field.as_deref(), Some("report.colour"));
}

#[test]
fn every_chart_helper_is_a_reserved_script_name() {
    // No guard may be registered as line_chart & co.: scripts could not call it.
    for name in super::HELPERS {
        assert!(
            warden_core::registry::RESERVED_SCRIPT_NAMES.contains(&name),
            "{name}"
        );
    }
}

/// Render times in release mode (`cargo test --release -p warden --lib
/// chart_bench -- --ignored --nocapture`): the targets are ≤ 50 ms
/// each for a 10,000-point line chart and a 50×50 heatmap.
#[test]
#[ignore]
fn chart_bench() {
    let time = |label: &str, kind: Kind, rows: &Array, options: Map| {
        let started = std::time::Instant::now();
        let chart = build(kind, rows, &options).expect("valid");
        let checked = started.elapsed().as_secs_f64() * 1000.0;
        println!("{label} checks (rows → chart): {checked:.1} ms");
        for format in ["png", "svg"] {
            let mut best = f64::INFINITY;
            for _ in 0..5 {
                let started = std::time::Instant::now();
                let size = if format == "png" {
                    render::png(&chart).expect("png").len()
                } else {
                    render::svg(&chart).expect("svg").len()
                };
                best = best.min(started.elapsed().as_secs_f64() * 1000.0);
                std::hint::black_box(size);
            }
            let size = if format == "png" {
                render::png(&chart).expect("png").len()
            } else {
                render::svg(&chart).expect("svg").len()
            };
            println!("{label} {format}: {best:.1} ms (best of 5), {size} bytes");
        }
    };
    let line = map(&[("x", s("x")), ("y", s("y")), ("title", s("10,000 points"))]);
    time("line 10,000 points", Kind::Line, &xy_rows(10_000), line);
    let heat = map(&[
        ("x", s("spot")),
        ("y", s("vol")),
        ("z", s("price")),
        ("title", s("50×50")),
    ]);
    time("heatmap 50×50", Kind::Heatmap, &grid_rows(50, 50), heat);
}
