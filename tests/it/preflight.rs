//! Preflight: `<app> --check` and `<app> preflight -- <command>` on the
//! shipped example, on broken setups, and with bad flags.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value;

use crate::common::*;

/// A private artifacts directory and a cwd for one preflight run.
fn sandbox() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

fn check(binary: &str, args: &[&str], env: &[(&str, &str)]) -> (CliRun, tempfile::TempDir) {
    let dir = sandbox();
    let artifacts = dir.path().join("artifacts");
    let artifacts = artifacts.to_str().expect("utf-8 temp path").to_string();
    let mut all = vec![("WARDEN_ARTIFACTS_DIR", artifacts.as_str())];
    all.extend_from_slice(env);
    (run_cli(binary, args, &all, dir.path()), dir)
}

/// The status word printed for check `name`, e.g. "PASS".
fn status_of(stdout: &str, name: &str) -> String {
    stdout
        .lines()
        .find(|line| line.split_whitespace().nth(1) == Some(name))
        .and_then(|line| line.split_whitespace().next())
        .unwrap_or("missing")
        .to_string()
}

fn json_report(run: &CliRun) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("--json prints one JSON object ({e}): {run:?}"))
}

fn check_named<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .expect("checks is a list")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {report}"))
}

#[test]
fn check_passes_on_the_shipped_example() {
    // `warden-finance --check` exits 0 with every stage passing and prints its diagnostics dir.
    let (run, _dir) = check(FINANCE, &["--check", "--timeout", "20"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    for name in [
        "registration",
        "artifacts_dir",
        "worker",
        "script_worker",
        "telemetry",
        "mcp.initialize",
        "mcp.ping",
        "mcp.tools_list",
        "mcp.shutdown",
        "mcp.stdout",
    ] {
        assert_eq!(status_of(&run.stdout, name), "PASS", "{name}:\n{}", run.stdout);
    }
    assert_eq!(status_of(&run.stdout, "agent"), "WARN", "{}", run.stdout);
    let diagnostics = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("diagnostics: "))
        .expect("diagnostics path printed");
    let mode = std::fs::metadata(diagnostics).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "private diagnostics dir");
    assert!(run.stdout.contains("result: ok"), "{}", run.stdout);
}

#[test]
fn json_report_has_the_contract_shape() {
    // --json prints exactly {ok, server, checks:[{name,status,message,fix}], diagnostics_dir}.
    let (run, _dir) = check(FINANCE, &["--check", "--json"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = json_report(&run);
    let mut keys: Vec<&str> = report.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["checks", "diagnostics_dir", "ok", "server"]);
    assert_eq!(report["ok"], true);
    assert_eq!(report["server"]["name"], "warden-finance");
    for entry in report["checks"].as_array().unwrap() {
        let mut fields: Vec<&str> = entry.as_object().unwrap().keys().map(String::as_str).collect();
        fields.sort_unstable();
        assert_eq!(fields, ["fix", "message", "name", "status"], "{entry}");
        let status = entry["status"].as_str().unwrap();
        assert!(["PASS", "WARN", "FAIL", "SKIP"].contains(&status), "{entry}");
        assert_eq!(
            entry["fix"].is_null(),
            status == "PASS" || status == "SKIP",
            "{entry}"
        );
    }
    let dir = Path::new(report["diagnostics_dir"].as_str().unwrap());
    for file in ["server-stderr.log", "mcp-transcript.log", "report.json"] {
        assert!(dir.join(file).exists(), "{file} in {}", dir.display());
    }
}

#[test]
fn an_unwritable_artifacts_dir_fails_with_a_fix() {
    // WARDEN_ARTIFACTS_DIR pointing at a regular file is a FAIL (exit 1) naming the variable.
    let dir = sandbox();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let run = run_cli(
        FINANCE,
        &["--check"],
        &[("WARDEN_ARTIFACTS_DIR", file.to_str().unwrap())],
        dir.path(),
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(status_of(&run.stdout, "artifacts_dir"), "FAIL", "{}", run.stdout);
    assert!(
        run.stdout.contains("fix: point WARDEN_ARTIFACTS_DIR"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("result: FAILED"), "{}", run.stdout);
}

#[test]
fn stray_stdout_from_the_server_fails_naming_the_bytes() {
    // A server printing to stdout before serving fails mcp.stdout, quoting what it printed.
    let stray = [("WARDEN_TESTBED_STRAY_STDOUT", "1")];
    let (run, _dir) = check(TESTBED, &["--check"], &stray);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(status_of(&run.stdout, "mcp.stdout"), "FAIL", "{}", run.stdout);
    assert!(
        run.stdout
            .contains("\"testbed: hello from main (stray stdout)\\n\""),
        "{}",
        run.stdout
    );
    // The protocol itself still worked: only the stray bytes fail.
    assert_eq!(status_of(&run.stdout, "mcp.tools_list"), "PASS", "{}", run.stdout);
    // The outside form finds the same fault.
    let (run, _dir) = check(FINANCE, &["preflight", "--json", "--", TESTBED], &stray);
    assert_eq!(run.code, 1, "{run:?}");
    let report = json_report(&run);
    let stdout_check = check_named(&report, "mcp.stdout");
    assert_eq!(stdout_check["status"], "FAIL");
    assert!(
        stdout_check["message"]
            .as_str()
            .unwrap()
            .contains("testbed: hello from main"),
        "{stdout_check}"
    );
}

#[test]
fn outside_preflight_checks_another_server_command() {
    // `<app> preflight -- <server>` reads registration from tools/list and starts a real worker.
    let (run, _dir) = check(
        FINANCE,
        &["preflight", "--json", "--timeout", "20", "--", TESTBED],
        &[],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let report = json_report(&run);
    let registration = check_named(&report, "registration");
    assert_eq!(registration["status"], "PASS");
    assert!(
        registration["message"].as_str().unwrap().contains("slow_echo"),
        "{registration}"
    );
    assert_eq!(check_named(&report, "worker")["status"], "PASS");
    assert_eq!(report["server"]["command"][0], TESTBED);
}

#[test]
fn model_and_telemetry_configuration_are_checked_without_contacting_anything() {
    // --require-agent turns a missing model into a failure; a configured one passes; exporters warn.
    let (run, _dir) = check(FINANCE, &["--check", "--require-agent"], &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(status_of(&run.stdout, "agent"), "FAIL", "{}", run.stdout);
    let configured = [
        ("WARDEN_MODEL_API_KEY", "test-key-never-sent"),
        // Nothing listens here: the check must not send a request.
        ("WARDEN_MODEL_API_BASE", "http://127.0.0.1:9/v1"),
        ("WARDEN_MODEL_ID", "scripted"),
        ("WARDEN_TRACE_EXPORTER", "otlp"),
    ];
    let (run, _dir) = check(FINANCE, &["--check", "--require-agent"], &configured);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(status_of(&run.stdout, "agent"), "PASS", "{}", run.stdout);
    assert!(
        !run.stdout.contains("test-key-never-sent"),
        "the key is never printed"
    );
    assert_eq!(status_of(&run.stdout, "telemetry"), "WARN", "{}", run.stdout);
    let (run, _dir) = check(FINANCE, &["--check"], &[("WARDEN_TRACE_EXPORTER", "jaeger")]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(status_of(&run.stdout, "telemetry"), "FAIL", "{}", run.stdout);
    // The example is built with `telemetry`: console exports; file needs its path.
    let (run, _dir) = check(FINANCE, &["--check"], &[("WARDEN_TRACE_EXPORTER", "console")]);
    assert_eq!(status_of(&run.stdout, "telemetry"), "PASS", "{}", run.stdout);
    let (run, _dir) = check(FINANCE, &["--check"], &[("WARDEN_TRACE_EXPORTER", "file")]);
    assert_eq!(status_of(&run.stdout, "telemetry"), "FAIL", "{}", run.stdout);
}

#[test]
fn a_bad_model_setting_stops_the_start_and_fails_the_check_naming_it() {
    // Checked when the server starts and by --check, model configured or not: never first
    // found by a run_coding_task.
    for (variable, value) in [
        ("WARDEN_MODEL_TIMEOUT_SECONDS", "900"),
        ("WARDEN_AGENT_MAX_INLINE_CALLS", "0"),
        ("WARDEN_MODEL_API_BASE", "api.example.com/v1"),
    ] {
        let (run, _dir) = check(FINANCE, &["--check"], &[(variable, value)]);
        assert_eq!(run.code, 1, "{variable}: {run:?}");
        assert_eq!(
            status_of(&run.stdout, "agent"),
            "FAIL",
            "{variable}: {}",
            run.stdout
        );
        assert!(run.stdout.contains(variable), "{variable}: {}", run.stdout);
        let (started, _dir) = check(FINANCE, &[], &[(variable, value)]);
        assert_ne!(started.code, 0, "{variable}: the server started: {started:?}");
        assert!(started.stderr.contains(variable), "{variable}: {started:?}");
    }
    // In range, it passes.
    let (run, _dir) = check(FINANCE, &["--check"], &[("WARDEN_MODEL_TIMEOUT_SECONDS", "600")]);
    assert_eq!(status_of(&run.stdout, "agent"), "WARN", "{}", run.stdout);
}

#[test]
fn bad_flags_are_usage_errors() {
    // Out-of-range timeouts, flags without --check, and a preflight without a command exit 2.
    for args in [
        &["--check", "--timeout", "0"][..],
        &["--check", "--timeout", "301"],
        &["--check", "--timeout", "soon"],
        &["--json"],
        &["--require-agent"],
        &["--check", "--bogus"],
        &["--check", "serve"],
        &["preflight"],
        &["preflight", "--timeout", "-1", "--", "x"],
    ] {
        let (run, _dir) = check(FINANCE, args, &[]);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stdout.is_empty(), "{args:?} printed a report: {}", run.stdout);
    }
}

#[test]
fn env_example_copied_as_dotenv_works_as_shipped() {
    // .env.example as .env: empty values are unset, so the default ./artifacts is used and every check passes.
    let dir = sandbox();
    std::fs::copy(workspace_root().join(".env.example"), dir.path().join(".env")).expect("copy .env.example");
    let run = run_cli(FINANCE, &["--check", "--timeout", "20"], &[], dir.path());
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(status_of(&run.stdout, "artifacts_dir"), "PASS", "{}", run.stdout);
    assert!(
        !run.stderr.contains("ignored"),
        "the template sets only variables .env is read for: {}",
        run.stderr
    );
    assert!(
        dir.path().join("artifacts").is_dir(),
        "the default artifacts directory"
    );
}

#[test]
fn check_fails_a_resource_that_did_not_load_and_http_settings_serve_would_refuse() {
    // A missing quotes file and a malformed tokens file and key: each a FAIL naming what to fix, exit 1.
    let dir = sandbox();
    let tokens = dir.path().join("tokens.txt");
    std::fs::write(&tokens, "alice not-a-hash\n").expect("tokens file");
    let tokens = tokens.to_str().expect("utf-8").to_string();
    let (run, _dir) = check(
        FINANCE,
        &["--check", "--timeout", "20"],
        &[
            ("WARDEN_FINANCE_DATA", "/nonexistent/quotes.csv"),
            ("WARDEN_API_TOKENS_FILE", tokens.as_str()),
            ("WARDEN_INPUT_STATE_KEY", "change-me"),
        ],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(status_of(&run.stdout, "resources"), "FAIL", "{}", run.stdout);
    assert!(run.stdout.contains("/nonexistent/quotes.csv"), "{}", run.stdout);
    assert_eq!(status_of(&run.stdout, "http_settings"), "FAIL", "{}", run.stdout);
    assert!(run.stdout.contains("WARDEN_API_TOKENS_FILE"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("WARDEN_INPUT_STATE_KEY: expected 64 hex digits"),
        "{}",
        run.stdout
    );

    // Valid settings pass.
    let good = dir.path().join("good-tokens.txt");
    std::fs::write(&good, format!("alice {}\n", "ab".repeat(32))).expect("tokens file");
    let good = good.to_str().expect("utf-8").to_string();
    let key = "0f".repeat(32);
    let (run, _dir) = check(
        FINANCE,
        &["--check", "--timeout", "20"],
        &[
            ("WARDEN_API_TOKENS_FILE", good.as_str()),
            ("WARDEN_INPUT_STATE_KEY", key.as_str()),
        ],
    );
    assert_eq!(status_of(&run.stdout, "http_settings"), "PASS", "{}", run.stdout);
    assert_eq!(status_of(&run.stdout, "resources"), "PASS", "{}", run.stdout);
    assert_eq!(run.code, 0, "{run:?}");
}

#[test]
fn usage_without_a_task_store_names_the_variable_and_creates_nothing() {
    // `usage` in a directory with no server's records: exit 2 naming WARDEN_ARTIFACTS_DIR, no ./artifacts made.
    let dir = sandbox();
    let run = run_cli(FINANCE, &["usage"], &[], dir.path());
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("WARDEN_ARTIFACTS_DIR"), "{}", run.stderr);
    assert!(!dir.path().join("artifacts").exists(), "nothing was created");
}
