//! The hello example as a user meets it: the binary lists and runs its one
//! guard, and the guard guide quotes its source byte for byte.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (this package lives at examples/hello).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The hello binary, run from an empty directory with its artifacts there.
fn hello(args: &[&str]) -> (std::process::Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = Command::new(env!("CARGO_BIN_EXE_warden-hello"))
        .args(args)
        .current_dir(dir.path())
        .env("WARDEN_ARTIFACTS_DIR", dir.path().join("artifacts"))
        .output()
        .expect("hello starts");
    (output, dir)
}

#[test]
fn list_tools_shows_the_one_pure_guard() {
    // `--list-tools` prints name, mode, timeout and the doc-comment summary.
    let (output, _dir) = hello(&["--list-tools"]);
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("add "))
        .expect("an `add` line");
    assert!(line.contains("pure"), "{line}");
    assert!(line.contains("Add two numbers."), "{line}");
}

#[test]
fn call_runs_the_guard_and_refuses_infinity() {
    // A direct call answers the typed output; an overflow to ∞ fails with
    // `non_finite_output` (exit 1) instead of a silent null.
    let (output, _dir) = hello(&["call", "add", r#"{"a": 1, "b": 2}"#]);
    assert!(output.status.success(), "{output:?}");
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON result");
    assert_eq!(value, serde_json::json!({"sum": 3.0}));

    let (output, _dir) = hello(&["call", "add", r#"{"a": 1e308, "b": 1e308}"#]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("non_finite_output"));
}

#[test]
fn the_guard_guide_quotes_this_example_verbatim() {
    // docs/guards.md shows src/main.rs in the ```rust block right after the
    // marker line; an edit to either side without the other fails here.
    let source = std::fs::read_to_string(repo_root().join("examples/hello/src/main.rs")).expect("main.rs");
    let guide = std::fs::read_to_string(repo_root().join("docs/guards.md")).expect("docs/guards.md");
    let marker = "<!-- quoted from examples/hello/src/main.rs; a test keeps them identical -->";
    let after = guide
        .split_once(marker)
        .expect("the marker line in docs/guards.md")
        .1;
    let block = after
        .trim_start()
        .strip_prefix("```rust\n")
        .and_then(|rest| rest.split_once("\n```").map(|(code, _)| code))
        .expect("a ```rust block right after the marker");
    assert_eq!(
        block.trim_end(),
        source.trim_end(),
        "docs/guards.md and examples/hello/src/main.rs differ"
    );
}
