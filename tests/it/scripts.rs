//! run_script through MCP: the scenario report, the threat suite, the hard
//! deadline, and reading artifacts back in chunks.

use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::common::*;

async fn run(server: &Server, script: &str, timeout: u64) -> Value {
    let result = server
        .call(
            "run_script",
            json!({"script": script, "timeout_seconds": timeout}),
        )
        .await;
    structured(&result)
}

const SCENARIOS: &str = r#"
let rows = [];
for s in [90.0, 100.0, 110.0] {
  let a = #{option_type: "call", spot: s, strike: 100.0, time_to_expiry: 0.25, volatility: 0.25, rate: 0.04};
  rows.push(#{spot: s, price: price_option_t(a).result, delta: calc_greeks_t(a).delta});
}
write_artifact("scenarios.csv", to_csv(rows, ["spot", "price", "delta"]));
final_answer(#{task_type: "analysis", summary: "3 scenarios", metrics: #{rows: 3}})
"#;

#[tokio::test]
async fn a_scenario_script_writes_a_csv_that_read_artifact_returns() {
    // The issue's scenario without a model: loop, guards, CSV artifact, final answer, read back.
    let server = Server::start(FINANCE).await;
    let result = run(&server, SCENARIOS, 30).await;
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["task_type"], "analysis");
    assert_eq!(result["artifacts"][0]["path"], "outputs/scenarios.csv");
    assert!(result["task_id"].as_str().unwrap().starts_with("task_"));
    let task_id = result["task_id"].as_str().unwrap();
    let read = server
        .call(
            "read_artifact",
            json!({"task_id": task_id, "filename": "outputs/scenarios.csv"}),
        )
        .await;
    let content = structured(&read)["content"].as_str().unwrap().to_string();
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines[0], "spot,price,delta");
    assert_eq!(lines.len(), 4, "{content}");
    let price_at_100: f64 = lines[2].split(',').nth(1).unwrap().parse().unwrap();
    // BSM by hand: d1 = 0.1425, d2 = 0.0175 → 100·N(d1) − 100·e^(−0.01)·N(d2) = 5.4721.
    assert!(
        (price_at_100 - 5.4721).abs() < 1e-3,
        "ATM 3-month call: {price_at_100}"
    );
    let listed = server.call("list_artifacts", json!({"task_id": task_id})).await;
    let names: Vec<String> = structured(&listed)["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["filename"].as_str().unwrap().to_string())
        .collect();
    for expected in [
        "agent_actions/action_001.rhai",
        "events.jsonl",
        "function_calls.json",
        "outputs/scenarios.csv",
        "registry.json",
        "result.json",
    ] {
        assert!(
            names.contains(&expected.to_string()),
            "{expected} missing from {names:?}"
        );
    }
    let task_events = read_jsonl(&server.artifacts.path().join(task_id).join("events.jsonl"));
    let finished = task_events
        .iter()
        .find(|e| e["event"] == "task_worker_finished")
        .expect("task_worker_finished recorded");
    assert_eq!(
        finished["exit_status"], "exited with exit status: 0",
        "{finished}"
    );
    // Where its time went: every phase, each a positive number of milliseconds.
    let ended = task_events
        .iter()
        .find(|e| e["event"] == "task_finished")
        .expect("task_finished recorded");
    assert_eq!(ended["status"], "success", "{ended}");
    for phase in ["seat", "worker_start", "run", "files", "record"] {
        let ms = ended["phases_ms"][phase].as_f64();
        assert!(ms.is_some_and(|ms| ms > 0.0 && ms < 60_000.0), "{phase}: {ended}");
    }
    let saved = server.call("get_task_result", json!({"task_id": task_id})).await;
    assert_eq!(structured(&saved)["result"]["summary"], "3 scenarios");
    let tasks = server.call("list_tasks", json!({})).await;
    assert_eq!(structured(&tasks)["tasks"][0]["task_id"], task_id);
}

#[tokio::test]
async fn fmt_and_search_guards_are_script_functions() {
    // Numbers for people, and guards found by meaning, inside a script.
    let server = Server::start(FINANCE).await;
    let result = run(
        &server,
        r#"[fmt(55.00000000000001, 2), fmt_pct(0.55, 1), search_guards("implied volatility", 1)[0].name]"#,
        10,
    )
    .await;
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(
        result["value"],
        json!(["55.00", "55.0%", "implied_volatility"]),
        "{result}"
    );
    let bad = run(
        &server,
        r#"let r = ""; try { fmt(1.0, 40) } catch (e) { r = e.code; } r"#,
        10,
    )
    .await;
    assert_eq!(bad["value"], "invalid_input", "{bad}");
}

#[tokio::test]
async fn report_labels_say_what_they_count_against_and_from_where() {
    // Drawdown positions count from 1 and say of how many; the minimum track record names SR₀.
    let server = Server::start(FINANCE).await;
    let script = r#"let r = [0.01, 0.02, -0.05, -0.01, 0.03, 0.01];
let p = check_performance(#{returns: r, periods_per_year: 252.0});
let d = check_deflated_sharpe(#{returns: [0.01, -0.004, 0.006, 0.002, -0.001, 0.007, 0.003, -0.002], n_trials: 10, trials_sharpe_variance: 0.01});
[p.evidence.drawdown_peak, p.evidence.drawdown_trough, d.evidence.table]"#;
    let result = run(&server, script, 10).await;
    assert_eq!(result["status"], "success", "{result}");
    // The equity peaks after the 2nd return and bottoms after the 4th.
    assert_eq!(result["value"][0], "#2 of 6", "{result}");
    assert_eq!(result["value"][1], "#4 of 6", "{result}");
    let table = result["value"][2].as_str().unwrap_or_default();
    assert!(table.contains("min track record vs SR₀ (obs)"), "{table}");
    assert!(table.contains("min track record vs 0 (obs)"), "{table}");
}

#[tokio::test]
async fn guard_errors_are_catchable_with_their_code() {
    // catch (e) sees e.code and e.message of a guard error.
    let server = Server::start(FINANCE).await;
    let result = run(&server, r#"let r = ""; try { price_option_t(#{option_type: "call"}); } catch (e) { r = e.code + "|" + e.message; } r"#, 10).await;
    let value = result["value"].as_str().unwrap();
    assert!(value.starts_with("invalid_arguments|"), "{value}");
    assert!(
        value.contains("spot") || value.contains("missing field"),
        "{value}"
    );
}

#[tokio::test]
async fn a_worker_stderr_log_is_kept_only_when_written_and_registry_snapshots_share_one_file() {
    // The worker's stderr is a memory file: a quiet task has no worker_stderr.log; a worker that
    // aborts on an allocation has one with the allocator's message, which also names the error.
    // Two tasks under one registry link one registry.json.
    use std::os::unix::fs::MetadataExt;
    let server = Server::start(FINANCE).await;
    let dir_of = |result: &Value| {
        server
            .artifacts
            .path()
            .join(result["task_id"].as_str().expect("task id"))
    };
    let quiet = run(&server, "1", 10).await;
    let again = run(&server, "2", 10).await;
    assert_eq!(quiet["status"], "success", "{quiet}");
    assert!(!dir_of(&quiet).join("worker_stderr.log").exists());
    let registry =
        |result: &Value| std::fs::metadata(dir_of(result).join("registry.json")).expect("registry.json");
    assert_eq!(registry(&quiet).ino(), registry(&again).ino(), "one shared copy");
    let snapshot: Value =
        serde_json::from_slice(&std::fs::read(dir_of(&again).join("registry.json")).expect("read"))
            .expect("JSON");
    assert!(
        snapshot
            .as_array()
            .is_some_and(|guards| guards.iter().any(|g| g["name"] == "price_option_t")),
        "{snapshot}"
    );
    let hog = "let m = #{}; let s = \"x\"; s.pad(3000000, \"y\"); let i = 0; loop { m[`k${i}`] = s + \"z\"; i += 1; }";
    let crashed = run(&server, hog, 20).await;
    assert_eq!(crashed["error"]["kind"], "memory", "{crashed}");
    let log = std::fs::read_to_string(dir_of(&crashed).join("worker_stderr.log")).expect("worker_stderr.log");
    assert!(log.contains("memory allocation of"), "{log}");
}

#[tokio::test]
async fn the_threat_suite_is_stopped_with_classified_errors() {
    // Each hostile script ends with its error kind; the server keeps serving.
    let server = Server::start(FINANCE).await;
    let cases = [
        (ENDLESS, 2, "timeout"),
        ("fn f(n) { f(n + 1) } f(0)", 10, "limit"),
        (r#"let s = "xx"; loop { s += s; }"#, 10, "limit"),
        ("let a = [1]; loop { a += a; }", 10, "limit"),
        (
            "let m = #{}; let i = 0; loop { let x = #{}; x[`k${i}`] = i; m.mixin(x); i += 1; }",
            20,
            "limit",
        ),
        // Rhai does not count keys added by `m[key] = v` against the map
        // limit (it checks the value, not the container); the deadline and
        // the worker's address-space limit bound it instead.
        (
            "let m = #{}; let i = 0; loop { m[`k${i}`] = i; i += 1; }",
            2,
            "timeout",
        ),
        // ...and the address-space limit is what stops big values stored that way.
        (
            "let m = #{}; let s = \"x\"; s.pad(3000000, \"y\"); let i = 0; loop { m[`k${i}`] = s + \"z\"; i += 1; }",
            20,
            "memory",
        ),
        (r#"eval("1 + 1")"#, 10, "parse"),
        (r#"import "std" as s;"#, 10, "parse"),
        // No such function: refused by the check before anything runs...
        (r#"open_file("/etc/passwd")"#, 10, "parse"),
        // ...and, where the check does not judge (inside try), at run time.
        (
            r#"try { open_file("/etc/passwd") } catch (e) { throw e }"#,
            10,
            "runtime",
        ),
        ("let x = ;", 10, "parse"),
        (r#"throw "boom""#, 10, "runtime"),
    ];
    for (script, timeout, kind) in cases {
        let result = run(&server, script, timeout).await;
        assert_eq!(result["error"]["kind"], kind, "{script}: {result}");
        assert_ne!(result["status"], "success", "{script}");
        if kind == "parse" {
            assert!(
                result["error"]["line"].as_u64().is_some(),
                "position for {script}: {result}"
            );
        }
    }
    assert!(
        !is_error(&server.call("price_option_t", call_args()).await),
        "server alive"
    );
}

#[tokio::test]
async fn a_two_second_script_that_never_ends_returns_timed_out_at_its_deadline() {
    // The deadline is hard: the run ends at it, not at some later point. On a
    // 2-core CI box running the whole suite the overshoot has reached 604 ms
    // (server figure, once in 31 runs, with the suite's other tests on both
    // cores), so both figures get a second here; without the deadline the
    // script never ends. The 100 ms target is scripts/bench's, measured alone
    // (1.9-3.3 ms there).
    let server = Server::start(FINANCE).await;
    let started = Instant::now();
    let result = run(&server, "let i = 0; loop { i += 1; }", 2).await;
    let elapsed = started.elapsed();
    assert_eq!(result["status"], "timed_out", "{result}");
    assert!(result["duration_ms"].as_f64().unwrap() < 3_000.0, "{result}");
    assert!(elapsed < Duration::from_millis(3_000), "{elapsed:?} {result}");
}

#[tokio::test]
async fn a_guard_sleeping_past_the_task_deadline_is_killed_at_the_deadline() {
    // An isolated guard call inside a 2 s task cannot outlive the task.
    let server = Server::start(TESTBED).await;
    let started = Instant::now();
    let result = run(&server, r#"slow_echo(#{millis: 30000})"#, 2).await;
    assert!(
        started.elapsed() < Duration::from_millis(2_600),
        "{:?} {result}",
        started.elapsed()
    );
    assert_ne!(result["status"], "success", "{result}");
    assert!(
        eventually(Duration::from_secs(2), || server.workers().is_empty()).await,
        "workers left behind"
    );
}

#[tokio::test]
async fn scripts_have_no_network_and_report_their_sandbox() {
    // The worker reports every layer it really got (this machine has them all).
    let server = Server::start(FINANCE).await;
    let result = run(&server, "42", 10).await;
    assert_eq!(result["value"], 42);
    assert_eq!(result["sandbox"]["network_namespace"], true, "{result}");
    assert_eq!(result["sandbox"]["landlock"], "full", "{result}");
    assert_eq!(result["sandbox"]["rlimits"], true);
}

#[tokio::test]
async fn read_artifact_handles_utf8_boundaries_base64_and_refuses_escapes() {
    // Multi-byte boundaries, base64 of binary data, offsets past the end, traversal and unknown tasks.
    let server = Server::start(FINANCE).await;
    let binary = base64::engine::general_purpose::STANDARD.encode((0..=255u8).collect::<Vec<u8>>());
    let script =
        format!(r#"write_artifact("t.txt", "aé€"); write_artifact("b.bin", "{binary}", "base64"); 1"#);
    let result = run(&server, &script, 10).await;
    let task = result["task_id"].as_str().unwrap().to_string();
    let read = |filename: &str, offset: u64, max: u64, encoding: &str| {
        server.call("read_artifact", json!({"task_id": task, "filename": filename, "offset": offset, "max_bytes": max, "encoding": encoding}))
    };
    let first = structured(&read("outputs/t.txt", 0, 2, "utf-8").await);
    assert_eq!(
        (first["content"].as_str(), first["next_offset"].as_u64()),
        (Some("a"), Some(1))
    );
    let mid = read("outputs/t.txt", 2, 4, "utf-8").await;
    assert!(is_error(&mid), "starting mid-character is an error");
    let b = structured(&read("outputs/b.bin", 0, 262_144, "base64").await);
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(b["content"].as_str().unwrap())
        .unwrap();
    assert_eq!(decoded, (0..=255u8).collect::<Vec<u8>>());
    assert!(b["next_offset"].is_null());
    assert!(
        is_error(&read("outputs/t.txt", 99, 10, "utf-8").await),
        "offset past the end"
    );
    for bad in ["../events.jsonl", "/etc/passwd", "outputs/../../x"] {
        let r = read(bad, 0, 10, "utf-8").await;
        assert!(is_error(&r), "{bad} must be refused");
    }
    let dir = server.artifacts.path().join(&task);
    std::os::unix::fs::symlink("/etc/passwd", dir.join("outputs/link.txt")).unwrap();
    assert!(
        is_error(&read("outputs/link.txt", 0, 10, "utf-8").await),
        "symlinked file refused"
    );
    std::os::unix::fs::symlink("/etc", dir.join("linkdir")).unwrap();
    assert!(
        is_error(&read("linkdir/passwd", 0, 10, "utf-8").await),
        "symlinked directory refused"
    );
    let unknown = server
        .call(
            "read_artifact",
            json!({"task_id": "task_00000000000000000000000000000000", "filename": "result.json"}),
        )
        .await;
    assert_eq!(error_code(&unknown), "not_found");
    let bogus = server
        .call(
            "read_artifact",
            json!({"task_id": "../etc", "filename": "result.json"}),
        )
        .await;
    assert_eq!(structured(&bogus)["error"]["field"], "task_id");
}

#[tokio::test]
async fn a_broken_final_answer_fails_the_task_with_the_reason() {
    // no_action after a call breaks the contract.
    let server = Server::start(FINANCE).await;
    let script =
        r#"get_quote(#{symbol: "AAPL"}); final_answer(#{task_type: "no_action", summary: "nothing"})"#;
    let result = run(&server, script, 10).await;
    assert_eq!(result["status"], "failed");
    assert!(
        result["summary"].as_str().unwrap().contains("no_action"),
        "{result}"
    );
    // Like every failed task, it says why in `error` too.
    assert_eq!(result["error"]["kind"], "runtime", "{result}");
    assert_eq!(result["error"]["message"], result["summary"], "{result}");
}

#[tokio::test]
async fn a_killed_script_worker_fails_the_task_and_the_server_survives() {
    // Killing the worker from outside mid-run gives a clean failed result.
    let server = Server::start(FINANCE).await;
    let pid = server.pid;
    let killer = tokio::spawn(async move {
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            for child in children_of(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(child as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    });
    let result = run(&server, "let i = 0; loop { i += 1; }", 20).await;
    killer.abort();
    assert_eq!(result["status"], "failed", "{result}");
    assert!(
        result["summary"].as_str().unwrap().contains("SIGKILL"),
        "{result}"
    );
    assert!(!is_error(&server.call("price_option_t", call_args()).await));
}

#[tokio::test]
async fn inline_pure_calls_validate_like_direct_calls() {
    // Integers where floats are expected still decode; a wrong type names the field, as over MCP.
    let server = Server::start(FINANCE).await;
    let ok = run(
        &server,
        "check_rf_convention(#{rf: 0, periods_per_year: 252}).passed",
        10,
    )
    .await;
    assert_eq!(ok["value"], true, "{ok}");
    let script = r#"let r = ""; try { check_rf_convention(#{rf: "high"}); } catch (e) { r = e.code + "|" + e.field; } r"#;
    let bad = run(&server, script, 10).await;
    assert_eq!(bad["value"], "invalid_arguments|rf", "{bad}");
    let direct = server.call("check_rf_convention", json!({"rf": "high"})).await;
    assert_eq!(structured(&direct)["error"]["field"], "rf");
}

#[tokio::test]
async fn an_in_process_call_past_its_own_timeout_is_answered_and_the_script_goes_on() {
    // The door thread runs in_process guards itself; its watchdog answers a
    // hung call `timed_out` at the guard's 1 s deadline and a fresh door
    // thread serves the rest of the script.
    let server = Server::start(TESTBED).await;
    let started = Instant::now();
    let script = r#"
        let caught = "";
        try { sleep_in_process(#{millis: 4000}); } catch (e) { caught = e.code; }
        let after = sleep_in_process(#{millis: 10}).result;
        #{caught: caught, after: after}
    "#;
    let result = run(&server, script, 20).await;
    let elapsed = started.elapsed();
    assert_eq!(result["value"]["caught"], "timed_out", "{result}");
    assert_eq!(result["value"]["after"], 10, "{result}");
    assert_eq!(result["function_calls"], 2, "{result}");
    assert!(
        elapsed < Duration::from_millis(2_500),
        "answered after {elapsed:?}, not at the guard's 1 s deadline"
    );
    let task_dir = server.artifacts.path().join(result["task_dir"].as_str().unwrap());
    let finished: Vec<Value> = read_jsonl(&task_dir.join("events.jsonl"))
        .into_iter()
        .filter(|e| e["event"] == "function_call_finished")
        .collect();
    let statuses: Vec<&str> = finished.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["timed_out", "success"], "{finished:?}");
}

#[tokio::test]
async fn inline_pure_calls_beyond_the_first_thousand_are_summarized_in_events() {
    // DEFAULT_PURE_CALLS_DETAILED: the first 1,000 inline calls of a task get
    // their own two records, later ones one summary per batch; every call is
    // still counted in the summaries and listed in function_calls.json.
    let server = Server::start(TESTBED).await;
    let script = r#"
        let n = 0.0;
        for i in 0..3000 { n += add_pure(#{a: 1.0, b: 2.0}).result; }
        for i in 0..5 { try { add_pure(#{a: "x", b: 1.0}); } catch (e) {} }
        n
    "#;
    let result = run(&server, script, 30).await;
    assert_eq!(result["value"], 9000.0, "{result}");
    assert_eq!(result["function_calls"], 3005, "{result}");
    let task_id = result["task_id"].as_str().unwrap().to_string();
    let task_dir = server.artifacts.path().join(result["task_dir"].as_str().unwrap());
    let task_log = read_jsonl(&task_dir.join("events.jsonl"));
    let global: Vec<Value> = server
        .events_until(|records| records.iter().any(|r| r["event"] == "request_finished"))
        .await
        .into_iter()
        .filter(|r| r["task_id"] == task_id.as_str())
        .collect();
    for log in [&task_log, &global] {
        let count = |event: &str| log.iter().filter(|r| r["event"] == event).count();
        assert_eq!(count("function_call_started"), 1000);
        assert_eq!(count("function_call_finished"), 1000);
        let summaries: Vec<&Value> = log
            .iter()
            .filter(|r| r["event"] == "pure_calls_summarized")
            .collect();
        let summarized: u64 = summaries.iter().map(|r| r["calls"].as_u64().unwrap()).sum();
        let failed: u64 = summaries.iter().map(|r| r["failed"].as_u64().unwrap()).sum();
        let by_function: u64 = summaries
            .iter()
            .map(|r| r["functions"]["add_pure"].as_u64().unwrap())
            .sum();
        assert_eq!((summarized, failed, by_function), (2005, 5, 2005));
        assert!(
            summaries
                .iter()
                .any(|r| r["error_types"]["invalid_arguments"] == 5)
        );
        assert!(summaries.iter().all(|r| r["request_id"].is_string()));
    }
    let calls: Value =
        serde_json::from_str(&std::fs::read_to_string(task_dir.join("function_calls.json")).unwrap())
            .expect("function_calls.json is valid JSON");
    let calls = calls.as_array().unwrap();
    assert_eq!(calls.len(), 3005);
    assert_eq!(calls[0]["execution"], "pure_inline");
    assert_eq!(calls[3004]["status"], "failed");
    assert_eq!(calls[3004]["error_type"], "invalid_arguments");
}

#[tokio::test]
async fn an_in_process_guard_cannot_hold_a_task_past_its_deadline() {
    // The door thread is stuck in a 5 s guard inside a 1 s task: the task
    // still ends at its deadline, with the call recorded as timed out.
    let server = Server::start(TESTBED).await;
    let started = Instant::now();
    let result = run(&server, "sleep_in_process(#{millis: 5000}); 1", 1).await;
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_millis(1_600), "{elapsed:?} {result}");
    assert_ne!(result["status"], "success", "{result}");
    let task_dir = server.artifacts.path().join(result["task_dir"].as_str().unwrap());
    let finished: Vec<Value> = read_jsonl(&task_dir.join("events.jsonl"))
        .into_iter()
        .filter(|e| e["event"] == "function_call_finished")
        .collect();
    assert_eq!(finished.len(), 1, "{finished:?}");
    assert_eq!(finished[0]["status"], "timed_out");
}

#[test]
fn the_script_command_runs_a_file_as_a_task() {
    // `script FILE` runs the issue's scenario with no client (exit 0), a broken
    // script exits 1 with its classified error, a bad --timeout exits 2.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scenario.rhai");
    std::fs::write(&file, SCENARIOS).unwrap();
    let artifacts = dir.path().join("artifacts");
    let env = [("WARDEN_ARTIFACTS_DIR", artifacts.to_str().unwrap())];
    let path = file.to_str().unwrap();
    let run = run_cli(FINANCE, &["script", path, "--timeout", "30"], &env, dir.path());
    assert_eq!(run.code, 0, "{run:?}");
    let result: Value = serde_json::from_str(&run.stdout).expect("the task result as JSON");
    assert_eq!(result["status"], "success", "{result}");
    // task_dir is relative to the artifacts root.
    let task_dir = artifacts.join(result["task_dir"].as_str().unwrap());
    assert!(task_dir.join("outputs/scenarios.csv").is_file());
    assert!(task_dir.starts_with(&artifacts));

    std::fs::write(&file, "let x = ;").unwrap();
    let run = run_cli(FINANCE, &["script", path], &env, dir.path());
    assert_eq!(run.code, 1, "{run:?}");
    let result: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(result["error"]["kind"], "parse", "{result}");

    let run = run_cli(FINANCE, &["script", path, "--timeout", "0"], &env, dir.path());
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("--timeout must be from 1"), "{run:?}");
}

#[tokio::test]
async fn a_script_only_function_called_wrongly_is_named_by_its_public_name() {
    // The recording wrapper never leaks the private name the app's function is registered under.
    let server = Server::start(FINANCE).await;
    let result = run(&server, r#"assert_causal("not a function", [1.0, 2.0], 1)"#, 10).await;
    let text = result.to_string();
    assert!(text.contains("assert_causal"), "{text}");
    assert!(!text.contains("__warden_script_fn_"), "{text}");
    let ok = run(&server, "assert_causal(|b| b, [1.0, 2.0, 3.0], 1).passed", 10).await;
    assert_eq!(ok["value"], true, "{ok}");
}

#[tokio::test]
async fn map_call_refuses_more_items_than_its_cap_and_runs_a_full_list() {
    // 1,001 items: a catchable invalid_input on `items` before anything runs; 1,000 items all answer.
    let server = Server::start(FINANCE).await;
    let script = r#"
let items = [];
for i in 0..1001 { items.push(#{symbol: "AAPL"}); }
let refused = "";
try { map_call("get_quote", items); } catch (e) { refused = `${e.code} ${e.field}`; }
items.pop();
let answered = map_call("get_quote", items);
`${refused} ${answered.len()} ${answered[999].ok.symbol}`
"#;
    let result = run(&server, script, 60).await;
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["value"], "invalid_input items 1000 AAPL", "{result}");
    assert_eq!(result["function_calls"], 1000, "{result}");
}
