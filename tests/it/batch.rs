//! run_batch through MCP and the CLI: concurrency inside one request,
//! references between calls and to CSV artifacts, failure isolation, every
//! up-front refusal, output shaping, the destructive-guard rule, admission.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

async fn batch(server: &Server, arguments: Value) -> (bool, Value) {
    let result = server.call("run_batch", arguments).await;
    (is_error(&result), structured(&result))
}

fn returns() -> Value {
    json!([0.01, -0.02, 0.015, 0.003])
}

/// The error message of a refused batch.
fn message(value: &Value) -> String {
    value["error"]["message"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn independent_calls_run_concurrently_in_one_request() {
    // Two independent 800 ms calls finish in about the time of one; events say mode batch.
    let server = Server::start(TESTBED).await;
    let started = Instant::now();
    let (error, value) = batch(
        &server,
        json!({"calls": [
            {"name": "slow_echo", "arguments": {"millis": 800, "tag": "a"}},
            {"name": "slow_echo", "arguments": {"millis": 800, "tag": "b"}},
        ]}),
    )
    .await;
    let elapsed = started.elapsed();
    assert!(!error, "{value}");
    assert!(elapsed < Duration::from_millis(1500), "took {elapsed:?}: {value}");
    assert_eq!(value["status"], "success");
    assert_eq!(value["succeeded"], 2);
    assert_eq!(value["calls"][0]["output"]["tag"], "a");
    assert_eq!(value["calls"][1]["output"]["tag"], "b");
    assert_eq!(value["calls"][1]["ref"], "r2");
    assert!(value["calls"][0]["duration_ms"].as_f64().unwrap() >= 800.0);
    let request_id = value["request_id"].as_str().unwrap().to_string();
    let events = server
        .events_until(|records| records.iter().any(|r| r["event"] == "request_finished"))
        .await;
    let ours: Vec<&Value> = events
        .iter()
        .filter(|r| r["request_id"] == request_id.as_str())
        .collect();
    assert!(
        ours.iter()
            .all(|r| r["mode"] == "batch" && r["tool"] == "run_batch"),
        "{ours:?}"
    );
    let count = |name: &str| ours.iter().filter(|r| r["event"] == name).count();
    assert_eq!(count("request_started"), 1);
    assert_eq!(count("function_call_started"), 2);
    assert_eq!(count("function_call_finished"), 2);
    assert_eq!(count("request_finished"), 1);
}

#[tokio::test]
async fn results_substitute_by_index_and_ref_id_through_nested_paths_and_list_indices() {
    // $result by index or "rN", with object paths, list indices, and refs nested inside lists.
    let server = Server::start(TESTBED).await;
    let (error, value) = batch(
        &server,
        json!({"calls": [
            {"name": "check_performance", "arguments": {"returns": returns()}},
            {"name": "slow_echo", "arguments": {"millis": 1, "tag": {"$result": "r1", "path": "findings.0.where"}}},
            {"name": "get_quote", "arguments": {"symbol": "aapl"}},
            {"name": "check_performance", "arguments": {"returns": [
                {"$result": 0, "path": "evidence.mean_return"},
                {"$result": "r1", "path": "evidence.max_drawdown"},
                0.01
            ]}},
            {"name": "slow_echo", "arguments": {"millis": 1, "tag": {"$result": "r3", "path": "symbol"}}},
        ]}),
    )
    .await;
    assert!(!error, "{value}");
    let calls = value["calls"].as_array().unwrap();
    assert_eq!(calls[1]["output"]["tag"], "returns", "list index into findings");
    assert_eq!(calls[1]["depends_on"], json!([0]));
    assert_eq!(calls[3]["depends_on"], json!([0]));
    assert_eq!(calls[3]["output"]["evidence"]["n_periods"], 3);
    // mean of [0.002, -0.02, 0.01]
    let mean = calls[3]["output"]["evidence"]["mean_return"].as_f64().unwrap();
    assert!((mean - (-0.008 / 3.0)).abs() < 1e-12, "{mean}");
    assert_eq!(calls[4]["output"]["tag"], "AAPL");
    assert_eq!(calls[4]["depends_on"], json!([2]));
}

#[tokio::test]
async fn a_failed_call_skips_its_dependents_and_the_rest_still_run() {
    // The failure keeps its own error; direct and indirect dependents are skipped with the reason.
    let server = Server::start(TESTBED).await;
    let (error, value) = batch(
        &server,
        json!({"calls": [
            {"name": "get_quote", "arguments": {"symbol": "NOPE"}},
            {"name": "slow_echo", "arguments": {"millis": 1, "tag": {"$result": 0, "path": "symbol"}}},
            {"name": "slow_echo", "arguments": {"millis": 1, "tag": {"$result": "r2", "path": "tag"}}},
            {"name": "get_quote", "arguments": {"symbol": "MSFT"}},
        ]}),
    )
    .await;
    assert!(error, "a batch with a failed call is an error result: {value}");
    assert_eq!(value["status"], "failed");
    let calls = value["calls"].as_array().unwrap();
    assert_eq!(calls[0]["status"], "failed");
    assert_eq!(calls[0]["error"]["code"], "invalid_input");
    assert!(calls[0]["error"]["message"].as_str().unwrap().contains("NOPE"));
    assert_eq!(calls[1]["status"], "skipped");
    let reason = calls[1]["reason"].as_str().unwrap();
    assert!(
        reason.contains("calls[0] (r1)") && reason.contains("failed"),
        "{reason}"
    );
    assert_eq!(calls[2]["status"], "skipped");
    assert!(
        calls[2]["reason"]
            .as_str()
            .unwrap()
            .contains("calls[1] (r2), which was skipped")
    );
    assert_eq!(calls[3]["status"], "success");
    assert_eq!(calls[3]["output"]["symbol"], "MSFT");
    assert_eq!(
        (&value["succeeded"], &value["failed"], &value["skipped"]),
        (&json!(1), &json!(1), &json!(2))
    );
}

#[tokio::test]
async fn malformed_batches_are_refused_before_anything_runs() {
    // Forward and self refs, unknown names, 0 or 26 calls: refused, naming the call and the fix.
    let server = Server::start(TESTBED).await;
    let echo = json!({"name": "slow_echo", "arguments": {"millis": 1, "tag": "x"}});
    let cases = [
        (
            json!([echo, {"name": "slow_echo", "arguments": {"millis": 1, "tag": {"$result": 2}}}, echo]),
            "calls[1].arguments.tag",
            "forward reference to calls[2] (r3)",
        ),
        (
            json!([echo, {"name": "slow_echo", "arguments": {"millis": 1, "tag": {"$result": "r2"}}}]),
            "calls[1].arguments.tag",
            "itself",
        ),
        (
            json!([echo, {"name": "no_such_guard", "arguments": {}}]),
            "calls[1].name",
            "no guard named 'no_such_guard'",
        ),
        (
            json!([{"name": "run_script", "arguments": {"script": "1"}}]),
            "calls[0].name",
            "built-in tool",
        ),
        (
            json!([echo, {"name": "slow_echo", "arguments": {"millis": 1, "tag": {"$result": 0, "path": "a..b"}}}]),
            "calls[1].arguments.tag",
            "empty segment",
        ),
        (json!([]), "calls", "1 to 25 calls, got 0"),
        (json!(vec![echo.clone(); 26]), "calls", "1 to 25 calls, got 26"),
    ];
    for (calls, field, needle) in cases {
        let (error, value) = batch(&server, json!({ "calls": calls })).await;
        assert!(error, "{value}");
        assert_eq!(value["error"]["code"], "invalid_input", "{value}");
        assert_eq!(value["error"]["field"], field, "{value}");
        let text = message(&value);
        assert!(text.contains(needle), "{needle:?} not in {text}");
        assert!(text.contains(field), "{field} not named in {text}");
    }
    let events = server.events_until(|_| false).await;
    assert!(
        !events.iter().any(|r| r["event"] == "function_call_started"),
        "a refused batch runs nothing"
    );
}

#[tokio::test]
async fn a_bad_path_fails_its_call_at_run_time_listing_existing_fields() {
    // A path is checked against the real result: the call fails and the message lists the fields there.
    let server = Server::start(TESTBED).await;
    let (error, value) = batch(
        &server,
        json!({"calls": [
            {"name": "check_performance", "arguments": {"returns": returns()}},
            {"name": "check_rf_convention", "arguments": {"rf": {"$result": 0, "path": "evidence.mean_retrun"}}},
            {"name": "check_rf_convention", "arguments": {"rf": {"$result": 0, "path": "evidence.mean_return"}}},
        ]}),
    )
    .await;
    assert!(error);
    let bad = &value["calls"][1];
    assert_eq!(bad["status"], "failed");
    assert_eq!(bad["error"]["field"], "calls[1].arguments.rf");
    let text = bad["error"]["message"].as_str().unwrap();
    assert!(text.contains("no field 'mean_retrun' at 'evidence'"), "{text}");
    assert!(
        text.contains("mean_return") && text.contains("sharpe"),
        "lists fields: {text}"
    );
    assert!(text.contains("r1, check_performance"), "{text}");
    assert_eq!(value["calls"][2]["status"], "success");
}

#[tokio::test]
async fn select_digits_and_return_shape_only_what_comes_back() {
    // select keeps dotted paths, digits rounds fractions only, return "last" keeps the last output.
    let server = Server::start(TESTBED).await;
    let (error, value) = batch(
        &server,
        json!({
            "calls": [{"name": "check_performance", "arguments": {"returns": returns()}}],
            "select": ["evidence.sharpe", "evidence.periods_per_year", "n_errors", "evidence.missing"],
            "digits": 3,
        }),
    )
    .await;
    assert!(!error, "{value}");
    let call = &value["calls"][0];
    assert_eq!(
        call["output"],
        json!({"evidence.sharpe": 2.05, "evidence.periods_per_year": 252.0, "n_errors": 0})
    );
    assert_eq!(call["select_missing"], json!(["evidence.missing"]));

    let (error, value) = batch(
        &server,
        json!({
            "calls": [
                {"name": "check_performance", "arguments": {"returns": returns()}},
                {"name": "check_rf_convention", "arguments": {"rf": {"$result": 0, "path": "evidence.mean_return"}}},
            ],
            "return": "last",
            "select": ["passed"],
        }),
    )
    .await;
    assert!(
        !error,
        "references see full outputs, not the selected ones: {value}"
    );
    assert!(value["calls"][0].get("output").is_none(), "{value}");
    assert_eq!(value["calls"][0]["status"], "success");
    assert!(value["calls"][1]["output"].get("passed").is_some(), "{value}");

    let (error, value) = batch(
        &server,
        json!({"calls": [{"name": "get_quote", "arguments": {"symbol": "AAPL"}}], "digits": 0}),
    )
    .await;
    assert!(error);
    assert_eq!(value["error"]["field"], "digits");
}

#[tokio::test]
async fn an_artifact_column_feeds_a_guard_without_passing_through_the_client() {
    // A CSV written by run_script is loaded by column; numbers arrive as numbers; bad columns are refused up front.
    let server = Server::start(TESTBED).await;
    let script = server
        .call(
            "run_script",
            json!({"script": "write_artifact(\"p.csv\", \"close,vol\\n1.5,2\\n2.5,3\\n\"); 1"}),
        )
        .await;
    let task_id = structured(&script)["task_id"].as_str().unwrap().to_string();
    let source = json!({"task_id": task_id, "filename": "outputs/p.csv"});
    let (error, value) = batch(
        &server,
        json!({"calls": [
            {"name": "check_performance", "arguments": {"returns": {"$artifact": source, "column": "close"}}},
            {"name": "check_performance", "arguments": {"returns": {"$artifact": source, "column": "vol"}}},
        ]}),
    )
    .await;
    assert!(!error, "{value}");
    let evidence = |i: usize| value["calls"][i]["output"]["evidence"].clone();
    assert_eq!(evidence(0)["n_periods"], 2);
    assert_eq!(evidence(0)["mean_return"], 2.0);
    assert_eq!(evidence(1)["mean_return"], 2.5);

    let (error, value) = batch(
        &server,
        json!({"calls": [
            {"name": "check_performance", "arguments": {"returns": {"$artifact": source, "column": "clsoe"}}},
            {"name": "check_performance", "arguments": {"returns": {"$artifact": {"task_id": task_id, "filename": "p.csv"}, "column": "close"}}},
        ]}),
    )
    .await;
    assert!(error);
    let text = message(&value);
    assert!(
        text.contains("column 'clsoe'") && text.contains("its columns are: close, vol"),
        "{text}"
    );
    assert!(
        text.contains("calls[1].arguments.returns") && text.contains("outputs/p.csv"),
        "{text}"
    );
}

#[tokio::test]
async fn destructive_guards_are_refused_in_a_batch_but_not_directly() {
    // A guard annotated destructive needs the app's explicit permission to run in a batch.
    let server = Server::start(TESTBED).await;
    let (error, value) = batch(
        &server,
        json!({"calls": [{"name": "wipe_scratch", "arguments": {"record": "x"}}]}),
    )
    .await;
    assert!(error);
    assert_eq!(value["error"]["field"], "calls[0].name");
    let text = message(&value);
    assert!(
        text.contains("destructive") && text.contains("allow_destructive_in_batch"),
        "{text}"
    );
    let direct = server.call("wipe_scratch", json!({"record": "x"})).await;
    assert!(!is_error(&direct));
    assert_eq!(structured(&direct)["result"], "wiped x");
}

#[tokio::test]
async fn a_batch_takes_one_call_slot_and_is_rejected_busy_like_a_direct_call() {
    // With both call slots held by direct calls (and no admission wait), a batch is rejected server_busy at once.
    let server = Server::start_with_env(
        TESTBED,
        &[
            ("WARDEN_MAX_CONCURRENT_CALLS", "2"),
            ("WARDEN_ADMISSION_WAIT_MS", "0"),
        ],
    )
    .await;
    let slow = json!({"millis": 1500, "tag": "hold"});
    let started = Instant::now();
    let (a, b, rejected) = tokio::join!(
        server.call("slow_echo", slow.clone()),
        server.call("slow_echo", slow.clone()),
        async {
            tokio::time::sleep(Duration::from_millis(400)).await;
            server
                .call(
                    "run_batch",
                    json!({"calls": [{"name": "get_quote", "arguments": {"symbol": "AAPL"}}]}),
                )
                .await
        }
    );
    assert!(!is_error(&a) && !is_error(&b));
    assert!(is_error(&rejected));
    assert_eq!(error_code(&rejected), "server_busy");
    assert!(started.elapsed() < Duration::from_secs(3));
    let events = server
        .events_until(|records| records.iter().any(|r| r["event"] == "request_rejected"))
        .await;
    assert!(
        events
            .iter()
            .any(|r| r["event"] == "request_rejected" && r["mode"] == "batch"),
        "{events:?}"
    );
}

#[tokio::test]
async fn the_cli_runs_a_batch_file_with_the_same_semantics() {
    // `call --batch file.json`: a bare list or the full object; exit 0 / 1 / 2.
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, value: Value| -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path
    };
    let env = [("WARDEN_ARTIFACTS_DIR", dir.path().to_str().unwrap())];
    let run = |path: &PathBuf| {
        run_cli(
            TESTBED,
            &["call", "--batch", path.to_str().unwrap()],
            &env,
            dir.path(),
        )
    };

    let ok = write(
        "ok.json",
        json!([
            {"name": "get_quote", "arguments": {"symbol": "AAPL"}},
            {"name": "slow_echo", "arguments": {"millis": 1, "tag": {"$result": "r1", "path": "currency"}}},
        ]),
    );
    let out = run(&ok);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let value: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(value["calls"][1]["output"]["tag"], "USD");

    let failed = write(
        "failed.json",
        json!({"calls": [{"name": "get_quote", "arguments": {"symbol": "NOPE"}}], "return": "last"}),
    );
    let out = run(&failed);
    assert_eq!(out.code, 1);
    let value: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(value["status"], "failed");

    let refused = write(
        "refused.json",
        json!([{"name": "wipe_scratch", "arguments": {"record": "x"}}]),
    );
    let out = run(&refused);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("destructive"), "{}", out.stderr);

    let out = run(&dir.path().join("missing.json"));
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("cannot read batch file"), "{}", out.stderr);
}

#[test]
fn the_batch_scenario_suite_passes() {
    // tests/mcp/batch.json runs through the scenario runner against this run's testbed.
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"server": {
        "command": TESTBED,
        "cwd": ".",
        "env": {"WARDEN_ARTIFACTS_DIR": dir.path().join("artifacts")},
        "startup_timeout_seconds": 20,
        "call_timeout_seconds": 30,
    }});
    let config_path = dir.path().join("server.json");
    std::fs::write(&config_path, config.to_string()).unwrap();
    let suite = workspace_root().join("tests/mcp/batch.json");
    let report = dir.path().join("report.json");
    let args = [
        "test",
        "--config",
        config_path.to_str().unwrap(),
        "--suite",
        suite.to_str().unwrap(),
        "--output",
        report.to_str().unwrap(),
    ];
    let run = run_cli(TESTBED, &args, &[], dir.path());
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(report["ok"], true, "{report}");
}
