//! The catalogue tools (list_guards, describe_guard, bundle_coverage,
//! check_backtest), the script-only assert_causal, and the research suite in
//! tests/mcp/research.json, all through the real server over MCP.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::*;

/// The research guards and their categories, as the example registers them.
const RESEARCH: &[(&str, &str)] = &[
    ("check_brinson", "attribution"),
    ("check_cost_curve", "costs"),
    ("check_deflated_sharpe", "overfitting"),
    ("check_performance", "performance"),
    ("check_pit_universe", "data-integrity"),
    ("check_rf_convention", "conventions"),
    ("check_spa", "overfitting"),
    ("check_survivorship", "data-integrity"),
];

/// Calls `tool` and returns its structured content, asserting success.
async fn ok(server: &Server, tool: &str, arguments: Value) -> Value {
    let result = server.call(tool, arguments).await;
    let value = structured(&result);
    assert!(!is_error(&result), "{tool} failed: {value}");
    value
}

/// 500 daily gross returns (mean ≈ 8 bp, sd ≈ 1%) from a fixed LCG, and a
/// turnover of 0.15-0.25 a day: a modest, cost-surviving strategy.
fn backtest() -> (Vec<f64>, Vec<f64>) {
    let mut state: u64 = 42;
    let mut uniform = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut returns = Vec::new();
    let mut turnover = Vec::new();
    for _ in 0..500 {
        let normal: f64 = (0..12).map(|_| uniform()).sum::<f64>() - 6.0;
        returns.push(0.0008 + 0.01 * normal);
        turnover.push(0.15 + 0.1 * uniform());
    }
    (returns, turnover)
}

#[tokio::test]
async fn list_guards_shows_category_summary_slots_and_the_script_only_function() {
    // Every guard has a category, a one-line summary and its slots; assert_causal is script-only with a reason.
    let server = Server::start(FINANCE).await;
    let listed = ok(&server, "list_guards", json!({})).await;
    let rows = listed["guards"].as_array().unwrap();
    let row = |name: &str| {
        rows.iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    for (name, category) in RESEARCH {
        let r = row(name);
        assert_eq!(r["category"], *category, "{r}");
        assert_eq!(r["mode"], "pure");
        assert_eq!(r["callable"], "json_and_script");
        assert!(!r["summary"].as_str().unwrap().contains('\n'));
    }
    let cost = row("check_cost_curve");
    assert_eq!(cost["slots"], json!(["returns", "turnover", "cost_bps"]));
    let optional: Vec<&str> = cost["optional_slots"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        optional.contains(&"rf") && optional.contains(&"periods_per_year"),
        "{cost}"
    );
    assert_eq!(row("price_option_t")["category"], "pricing");
    assert_eq!(row("price_option_t")["mode"], "isolated");
    assert_eq!(row("get_quote")["category"], "market-data");
    let causal = row("assert_causal");
    assert_eq!(causal["callable"], "script_only");
    assert_eq!(causal["mode"], "script");
    assert!(
        causal["reason"].as_str().unwrap().contains("function pointer"),
        "{causal}"
    );
    assert!(
        rows.iter()
            .all(|r| r["name"] != "check_backtest" && r["name"] != "run_script")
    );
    assert_eq!(listed["count"], rows.len());
    let costs = ok(&server, "list_guards", json!({"category": "costs"})).await;
    assert_eq!(costs["count"], 1);
    let unknown = server.call("list_guards", json!({"category": "nope"})).await;
    assert!(is_error(&unknown));
    assert!(
        structured(&unknown)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("overfitting")
    );
}

#[tokio::test]
async fn describe_guard_gives_schemas_conventions_mode_and_timeout() {
    // One guard's full picture; an unknown name is an error listing the known ones.
    let server = Server::start(FINANCE).await;
    let d = ok(
        &server,
        "describe_guard",
        json!({"name": "check_deflated_sharpe"}),
    )
    .await;
    assert_eq!(d["category"], "overfitting");
    assert_eq!(d["slots"], json!(["n_trials"]));
    assert_eq!(d["mode"], "pure");
    assert_eq!(d["timeout_seconds"], 60);
    assert_eq!(d["annotations"]["read_only"], true);
    assert!(d["description"].as_str().unwrap().contains("Pearson kurtosis"));
    assert!(
        d["summary"]
            .as_str()
            .unwrap()
            .starts_with("Check whether a Sharpe ratio")
    );
    assert_eq!(d["input_schema"]["required"], json!(["n_trials"]));
    assert_eq!(d["output_schema"]["type"], "object");
    let causal = ok(&server, "describe_guard", json!({"name": "assert_causal"})).await;
    assert_eq!(causal["callable"], "script_only");
    assert!(
        causal["signature"]
            .as_str()
            .unwrap()
            .starts_with("assert_causal(signal_fn, bars, k)")
    );
    let missing = server
        .call("describe_guard", json!({"name": "check_nothing"}))
        .await;
    assert!(is_error(&missing));
    assert_eq!(error_code(&missing), "unknown_guard");
    let message = structured(&missing)["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("check_cost_curve") && message.contains("assert_causal"),
        "{message}"
    );
}

#[tokio::test]
async fn bundle_coverage_without_slots_is_the_vocabulary() {
    // The vocabulary is every input field name of every guard, mapped to the guards using it.
    let server = Server::start(FINANCE).await;
    let v = ok(&server, "bundle_coverage", json!({})).await;
    let returns: Vec<&str> = v["vocabulary"]["returns"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        returns,
        ["check_cost_curve", "check_deflated_sharpe", "check_performance"]
    );
    assert_eq!(
        v["required_by"]["returns"],
        json!(["check_cost_curve", "check_performance"])
    );
    assert_eq!(v["vocabulary"]["kurtosis"], json!(["check_deflated_sharpe"]));
    assert_eq!(
        v["vocabulary"]["symbol"],
        json!(["get_quote", "get_quote_isolated"])
    );
    assert!(v["vocabulary"].get("signal_fn").is_none());
    assert_eq!(v["count"], v["vocabulary"].as_object().unwrap().len());
}

#[tokio::test]
async fn bundle_coverage_names_missing_slots_and_what_one_more_would_unlock() {
    // With returns, turnover and rf: cost_curve misses cost_bps, and cost_bps alone unlocks it.
    let server = Server::start(FINANCE).await;
    let c = ok(
        &server,
        "bundle_coverage",
        json!({"slots": ["returns", "turnover", "rf", "retruns"]}),
    )
    .await;
    assert_eq!(c["have"], json!(["retruns", "returns", "rf", "turnover"]));
    assert_eq!(c["unknown"], json!(["retruns"]));
    assert_eq!(c["ready"], json!(["check_performance", "check_rf_convention"]));
    assert_eq!(c["not_ready"]["check_cost_curve"], json!(["cost_bps"]));
    assert_eq!(c["not_ready"]["check_spa"], json!(["models", "benchmark"]));
    assert_eq!(c["one_slot_away"]["cost_bps"], json!(["check_cost_curve"]));
    assert_eq!(c["one_slot_away"]["n_trials"], json!(["check_deflated_sharpe"]));
    assert!(c["one_slot_away"].get("models").is_none());
}

#[tokio::test]
async fn check_backtest_runs_every_ready_guard_through_the_executor() {
    // A realistic daily bundle: cost curve, performance and rf convention run and pass; the rest are skipped with their missing slots.
    let server = Server::start(FINANCE).await;
    let (returns, turnover) = backtest();
    let bundle = json!({"slots": {
        "returns": returns, "turnover": turnover, "cost_bps": 5.0,
        "periods_per_year": 252, "rf": 0.0001, "notes": "momentum v3",
    }});
    let r = ok(&server, "check_backtest", bundle).await;
    assert_eq!(
        r["ran"],
        json!(["check_cost_curve", "check_performance", "check_rf_convention"]),
        "{r}"
    );
    assert_eq!(r["passed"], true, "{}", r["results"]);
    assert_eq!(r["failed"], json!([]));
    assert_eq!(r["rejected"], json!({}));
    assert_eq!(r["skipped"]["check_deflated_sharpe"], json!(["n_trials"]));
    assert_eq!(r["skipped"]["check_spa"], json!(["models", "benchmark"]));
    assert!(r["skipped"].get("price_option_t").is_some());
    assert_eq!(r["unused_slots"], json!(["notes"]));
    assert!(r["script_only"]["assert_causal"].is_string());
    assert_eq!(r["results"]["check_cost_curve"]["passed"], true);
    let breakeven = r["results"]["check_cost_curve"]["evidence"]["breakeven_bps"].clone();
    assert!(breakeven.as_f64().is_none_or(|b| b > 5.0), "{breakeven}");
    // Each guard was a real executor call, recorded under the batch request.
    let events = server
        .events_until(|e| {
            e.iter()
                .filter(|r| r["event"] == "function_call_finished")
                .count()
                >= 3
        })
        .await;
    let calls: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "function_call_finished")
        .collect();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(
        calls
            .iter()
            .all(|e| e["mode"] == "batch" && e["tool"] == "check_backtest")
    );
}

#[tokio::test]
async fn check_backtest_reports_failed_and_rejected_guards() {
    // An annual rf passed per day fails the rf check; turnover of the wrong length is rejected by the cost curve.
    let server = Server::start(FINANCE).await;
    let (returns, _) = backtest();
    let bundle = json!({"slots": {
        "returns": returns, "turnover": [0.2, 0.2, 0.2], "cost_bps": 5.0, "rf": 0.05,
    }});
    let r = ok(&server, "check_backtest", bundle).await;
    assert_eq!(r["passed"], false);
    assert!(
        r["failed"]
            .as_array()
            .unwrap()
            .contains(&json!("check_rf_convention")),
        "{r}"
    );
    let why = &r["rejected"]["check_cost_curve"];
    assert!(why["code"].is_string() && why["message"].is_string(), "{r}");
    let empty = server.call("check_backtest", json!({"slots": {}})).await;
    assert!(is_error(&empty));
    assert!(
        structured(&empty)["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("slots:")
    );
}

const CAUSAL: &str = r#"
fn peek(bars) {
  let out = [];
  let n = bars.len();
  for i in 0..n { out.push(if i + 1 < n { bars[i + 1] } else { bars[i] }); }
  out
}
fn moving_average(bars) {
  let out = [];
  let sum = 0.0;
  for i in 0..bars.len() { sum += bars[i]; out.push(sum / (i + 1).to_float()); }
  out
}
fn close_change(bars) {
  let out = [];
  let first = bars[0].close;
  for b in bars { out.push(b.close - first); }
  out
}
let bars = [];
for i in 0..60 { bars.push(100.0 + (i % 7).to_float() - 0.5 * (i % 3).to_float()); }
let caught = #{caught: false};
try { assert_causal(Fn("peek"), bars, 30); } catch (e) {
  caught = #{caught: true, code: e.code, at: e["where"], message: e.message};
}
let bad_k = "";
try { assert_causal(Fn("moving_average"), bars, 60); } catch (e) { bad_k = e.field; }
let maps = bars.map(|x| #{date: "2024-01-02", close: x});
#{
  lookahead: caught,
  bad_k: bad_k,
  causal: assert_causal(Fn("moving_average"), bars, 30),
  maps: assert_causal(Fn("close_change"), maps, 59),
  closure: assert_causal(|b| b.map(|x| x * 2.0), bars, 1),
}
"#;

#[tokio::test]
async fn assert_causal_catches_look_ahead_and_passes_a_causal_signal() {
    // output[i] = bars[i+1] is caught at output[29] for k = 30; a moving average of bars[..=i] passes.
    let server = Server::start(FINANCE).await;
    let result = ok(
        &server,
        "run_script",
        json!({"script": CAUSAL, "timeout_seconds": 30}),
    )
    .await;
    assert!(result["error"].is_null(), "{result}");
    let v = &result["value"];
    assert_eq!(v["lookahead"]["caught"], true, "{v}");
    assert_eq!(v["lookahead"]["code"], "lookahead_detected");
    assert_eq!(v["lookahead"]["at"], "output[29]");
    assert!(v["lookahead"]["message"].as_str().unwrap().contains("bars[30..]"));
    assert_eq!(v["bad_k"], "k");
    let passed = json!({"guard": "assert_causal", "passed": true, "checked": 30, "perturbations": 4});
    assert_eq!(v["causal"], passed);
    assert_eq!(v["maps"]["checked"], 59);
    assert_eq!(v["closure"]["passed"], true);
}

#[tokio::test]
async fn an_uncaught_look_ahead_fails_the_script_with_its_code() {
    // Not catching the error ends the script with a guard error naming lookahead_detected.
    let server = Server::start(FINANCE).await;
    let script = "fn next(b) { let out = []; for i in 0..b.len() { out.push(b[(i + 1).min(b.len() - 1)]); } out }\n\
                  assert_causal(Fn(\"next\"), [1.0, 2.0, 3.0, 4.0], 2)";
    let result = structured(
        &server
            .call("run_script", json!({"script": script, "timeout_seconds": 30}))
            .await,
    );
    assert_eq!(result["error"]["kind"], "guard", "{result}");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("lookahead_detected")
    );
}

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
    p.to_str().unwrap()
}
