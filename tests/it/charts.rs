//! Charts and the report page through MCP: a scenario grid priced by a
//! script, drawn as a heatmap PNG inside the sandboxed worker, returned as
//! image content, and a report page that a real browser shows with its
//! chart.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use rmcp::model::ContentBlock;
use serde_json::json;

use crate::common::*;

/// A spot × volatility grid of call prices, its heatmap and a report.
const SURFACE: &str = r#"
let rows = [];
for s in [80.0, 85.0, 90.0, 95.0, 100.0, 105.0, 110.0, 115.0, 120.0] {
  for v in [0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4] {
    let a = #{option_type: "call", spot: s, strike: 100.0, time_to_expiry: 0.5, volatility: v, rate: 0.03};
    rows.push(#{spot: s, vol: v, price: price_option_t(a).result});
  }
}
let bad = "";
try { heatmap(rows, #{x: "spot", z: "price"}); } catch (e) { bad = e.field; }
let chart = heatmap(rows, #{x: "spot", y: "vol", z: "price", title: "Call price", x_label: "Spot", y_label: "Volatility"});
write_artifact("surface.png", chart);
let answer = #{task_type: "analysis", summary: "63 scenarios <priced>", metrics: #{scenarios: rows.len()},
               assumptions: ["strike 100", "rate 3%"]};
report(#{title: "Call price surface", answer: answer, sections: [
  #{heading: "Surface", chart: chart},
  #{heading: "Scenarios", table: rows, columns: ["spot", "vol", "price"]}
]});
print(bad);
final_answer(answer)
"#;

fn decode_png(bytes: &[u8]) -> (u32, u32, Vec<u8>, png::ColorType) {
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
        .read_info()
        .expect("png header");
    let mut pixels = vec![0; reader.output_buffer_size().expect("buffer size")];
    let info = reader.next_frame(&mut pixels).expect("png frame");
    pixels.truncate(info.buffer_size());
    (info.width, info.height, pixels, info.color_type)
}

#[tokio::test]
async fn a_scenario_heatmap_comes_back_as_image_content_and_a_report() {
    // Grid via price_option_t → heatmap PNG + report.html; the result carries the PNG inline.
    // WARDEN_SANDBOX=strict: drawn with every layer in force (seccomp: no open, no threads).
    let server = Server::start_with_env(FINANCE, &[("WARDEN_SANDBOX", "strict")]).await;
    let result = server
        .call("run_script", json!({"script": SURFACE, "timeout_seconds": 60}))
        .await;
    let value = structured(&result);
    assert_eq!(value["status"], "success", "{value}");
    assert_eq!(value["sandbox"]["seccomp"], true, "{value}");
    assert_eq!(
        value["output"], "options.y\n",
        "a bad chart option is a catchable error naming it"
    );
    let paths: Vec<&str> = value["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .filter_map(|a| a["path"].as_str())
        .collect();
    assert_eq!(paths, ["outputs/report.html", "outputs/surface.png"]);
    let images: Vec<_> = result
        .content
        .iter()
        .filter_map(|c| match c {
            ContentBlock::Image(image) => Some(image),
            _ => None,
        })
        .collect();
    assert_eq!(images.len(), 1, "one PNG, one image block");
    assert_eq!(images[0].mime_type, "image/png");
    let inline = base64::engine::general_purpose::STANDARD
        .decode(&images[0].data)
        .expect("base64 image");
    let (width, height, _, _) = decode_png(&inline);
    assert_eq!((width, height), (800, 500));
    let links = result
        .content
        .iter()
        .filter(|c| matches!(c, ContentBlock::ResourceLink(_)))
        .count();
    assert_eq!(links, 2, "every artifact keeps its resource link");
    // read_artifact serves the same bytes as base64, with the MIME type.
    let task_id = value["task_id"].as_str().expect("task id");
    let read = server
        .call(
            "read_artifact",
            json!({"task_id": task_id, "filename": "outputs/surface.png", "encoding": "base64", "max_bytes": 262144}),
        )
        .await;
    let read = structured(&read);
    assert_eq!(read["mime_type"], "image/png", "{read}");
    let served = base64::engine::general_purpose::STANDARD
        .decode(read["content"].as_str().expect("content"))
        .expect("base64");
    assert_eq!(served, inline);
    let page = server.artifacts.path().join(task_id).join("outputs/report.html");
    let html = std::fs::read_to_string(&page).expect("report.html");
    assert!(html.contains("63 scenarios &lt;priced&gt;"), "summary escaped");
    assert!(html.contains("<svg"), "chart inline");
    assert!(html.contains("<td>120</td>"), "table rows");
    assert!(html.contains("rate 3%"), "assumptions");
}

#[tokio::test]
async fn chart_limits_fail_the_script_with_the_option_and_the_fix() {
    // An uncaught oversize chart ends the script with a runtime error naming the option.
    let server = Server::start(FINANCE).await;
    let script = r#"line_chart([#{a: 1.0, b: 2.0}], #{x: "a", y: "b", width: 100000})"#;
    let result = server
        .call("run_script", json!({"script": script, "timeout_seconds": 20}))
        .await;
    let value = structured(&result);
    assert_eq!(value["status"], "failed", "{value}");
    let message = value["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("options.width") && message.contains("smaller chart"),
        "{message}"
    );
}

/// Runs Chromium headless on `page`, returning the screenshot's path.
fn screenshot(page: &Path, dir: &Path) -> std::path::PathBuf {
    let shot = dir.join("shot.png");
    let profile = dir.join("profile");
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1200,900")
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium must be installed (.ci/run installs Debian's chromium package)");
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            assert!(status.success(), "chromium exited with {status}");
            break;
        }
        if started.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish its screenshot within 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    shot
}

#[tokio::test]
async fn the_report_page_shows_its_chart_in_chromium() {
    // report.html opened in headless Chromium: the chart area of the screenshot is not blank.
    let server = Server::start(FINANCE).await;
    let result = server
        .call("run_script", json!({"script": SURFACE, "timeout_seconds": 60}))
        .await;
    let value = structured(&result);
    assert_eq!(value["status"], "success", "{value}");
    let task_id = value["task_id"].as_str().expect("task id");
    let page = server.artifacts.path().join(task_id).join("outputs/report.html");
    let dir = tempfile::tempdir().expect("temp dir");
    let shot = tokio::task::spawn_blocking({
        let (page, dir) = (page.clone(), dir.path().to_path_buf());
        move || screenshot(&page, &dir)
    })
    .await
    .expect("screenshot thread");
    let (width, height, pixels, colour) = decode_png(&std::fs::read(&shot).expect("screenshot file"));
    assert_eq!((width, height), (1200, 900));
    let channels = match colour {
        png::ColorType::Rgba => 4,
        png::ColorType::Rgb => 3,
        other => panic!("unexpected screenshot colour type {other:?}"),
    };
    // The heatmap's cells sit at about x 120–720, y 350–750 below the title,
    // summary and metrics; count strongly coloured pixels there.
    let (mut coloured, mut total) = (0usize, 0usize);
    let mut seen = std::collections::BTreeSet::new();
    for y in 350..750 {
        for x in 120..720 {
            let at = (y * width as usize + x) * channels;
            let (r, g, b) = (pixels[at], pixels[at + 1], pixels[at + 2]);
            let spread = r.max(g).max(b) - r.min(g).min(b);
            coloured += usize::from(spread > 50);
            total += 1;
            seen.insert((r, g, b));
        }
    }
    let share = coloured as f64 / total as f64;
    assert!(
        share > 0.3 && seen.len() > 20,
        "chart area looks blank: {:.0}% coloured pixels, {} colours (screenshot {})",
        share * 100.0,
        seen.len(),
        shot.display()
    );
}
