//! The MCP App view of a task (SEP-1865, `crate::view` in warden-mcp).
//!
//! Two ways: over stdio with the rmcp client, the protocol surface a host
//! relies on (the extension in capabilities, the view in resources/list and
//! resources/read, `_meta.ui.resourceUri` on the task tools); and as a
//! person sees it, through tests/apps/run: the official MCP client and
//! AppBridge (@modelcontextprotocol/ext-apps) mount the view for a real
//! task in headless Chromium and check what it draws. That test needs Node
//! (scripts/node installs it) and Chromium (.ci/run installs it): without
//! them it fails, it never skips.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::ReadResourceRequestParams;
use serde_json::Value;

use crate::common::*;

const URI: &str = "ui://warden/task.html";
const MIME_TYPE: &str = "text/html;profile=mcp-app";
const EXTENSION_ID: &str = "io.modelcontextprotocol/ui";
/// The tools whose results the view shows.
const LINKED: [&str; 3] = ["run_script", "run_coding_task", "run_batch"];

#[tokio::test]
async fn the_view_is_declared_listed_readable_and_linked_from_the_task_tools() {
    let server = Server::start(FINANCE).await;
    let info = serde_json::to_value(server.client.peer_info().expect("initialized")).expect("info json");
    let extension = &info["capabilities"]["extensions"][EXTENSION_ID];
    assert!(extension.is_object(), "capabilities: {}", info["capabilities"]);
    assert_eq!(extension["mimeTypes"][0], MIME_TYPE);

    let resources = server.client.list_all_resources().await.expect("resources/list");
    let listed = resources
        .iter()
        .find(|r| r.uri == URI)
        .expect("the view in resources/list");
    assert_eq!(listed.mime_type.as_deref(), Some(MIME_TYPE));

    let read = server
        .client
        .read_resource(ReadResourceRequestParams::new(URI))
        .await
        .expect("resources/read of the view");
    let read = serde_json::to_value(&read).expect("read json");
    let contents = &read["contents"][0];
    assert_eq!(contents["uri"], URI);
    assert_eq!(contents["mimeType"], MIME_TYPE);
    let page = contents["text"].as_str().expect("the page as text");
    assert!(page.starts_with("<!doctype html>") && page.contains("ui/initialize"));
    // Self-contained: nothing fetched from anywhere.
    assert!(
        !page.contains("src=\"http") && !page.contains("href=\"http"),
        "external reference in the page"
    );

    let tools = server.client.list_all_tools().await.expect("tools/list");
    for name in LINKED {
        let tool = tools
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name} listed"));
        let tool = serde_json::to_value(tool).expect("tool json");
        assert_eq!(tool["_meta"]["ui"]["resourceUri"], URI, "{name}: {tool}");
    }
    let unlinked: Vec<&str> = tools
        .iter()
        .filter(|t| t.meta.as_ref().is_some_and(|m| m.0.contains_key("ui")))
        .map(|t| t.name.as_ref())
        .filter(|n| !LINKED.contains(n))
        .collect();
    assert!(
        unlinked.is_empty(),
        "only the task tools link the view: {unlinked:?}"
    );
}

/// Where the screenshot is kept: `<target>/app-view/view.png`.
fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("app-view")
}

#[tokio::test]
async fn a_host_shows_a_real_task_in_the_view_in_chromium() {
    // tests/apps/host.mjs: official client + AppBridge, a run_script task with a heatmap
    // PNG and a 300-row CSV, the view in a sandboxed iframe in headless Chromium.
    let runner = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("apps/run");
    let work = tempfile::tempdir().expect("temp dir");
    let output = tokio::time::timeout(
        // A first run installs Node and the npm packages.
        Duration::from_secs(600),
        tokio::process::Command::new(&runner)
            .arg(FINANCE)
            .arg(work.path())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the test host finished within 600 s")
    .expect("tests/apps/run started (it needs python3 for Node and /usr/bin/chromium)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let verdict: Value = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| {
            panic!(
                "no verdict from the test host ({}):\n{stdout}\n{stderr}",
                output.status
            )
        });
    // Keep the screenshot, whatever the verdict, where a person can open it.
    let kept = screenshot_dir().join("view.png");
    if let Some(shot) = verdict["checks"]["screenshot"].as_str() {
        std::fs::create_dir_all(screenshot_dir()).expect("screenshot dir");
        std::fs::copy(shot, &kept).expect("keep the screenshot");
        println!("app view screenshot: {}", kept.display());
    }
    assert_eq!(verdict["ok"], true, "verdict: {verdict:#}\nstderr:\n{stderr}");
    assert!(output.status.success(), "{}", output.status);
    let checks = &verdict["checks"];
    assert_eq!(checks["view_uri"], URI);
    assert_eq!(checks["status"], "success");
    assert_eq!(checks["tables"][0]["rows"], 200);
    assert!(
        checks["images"][0]["variance"]
            .as_f64()
            .is_some_and(|v| v > 100.0),
        "{checks}"
    );
    assert!(kept.exists(), "screenshot kept at {}", kept.display());
}
