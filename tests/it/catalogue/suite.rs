//! tests/mcp/research.json (rf units, the published deflated Sharpe
//! example, the catalogue tools) run by the scenario runner of the testbed.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::*;

#[test]
fn the_research_suite_passes_against_the_testbed() {
    // tests/mcp/research.json (rf units, the published deflated Sharpe example, catalogue tools) passes.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("server.json");
    let server = json!({"server": {
        "command": TESTBED, "cwd": ".",
        "env": {"WARDEN_ARTIFACTS_DIR": dir.path().join("artifacts")},
        "startup_timeout_seconds": 20, "call_timeout_seconds": 30,
    }});
    std::fs::write(&config, server.to_string()).unwrap();
    let report = dir.path().join("report.json");
    let suite = workspace_root().join("tests/mcp/research.json");
    let args = [
        "test",
        "--config",
        path(&config),
        "--suite",
        path(&suite),
        "--output",
        path(&report),
    ];
    let run = run_cli(TESTBED, &args, &[], dir.path());
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(report["ok"], true);
    assert!(report["cases"].as_array().unwrap().len() >= 8);
}

fn path(p: &Path) -> &str {
    p.to_str().expect("temp paths are utf-8")
}
