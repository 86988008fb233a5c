//! The catalogue tools (list_guards, describe_guard, bundle_coverage,
//! check_backtest), the script-only assert_causal, and the research suite in
//! tests/mcp/research.json, all through the real server over MCP.

mod causal;
mod suite;

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
async fn search_guards_ranks_by_meaning_and_bounds_its_answer() {
    // "implied volatility" finds implied_volatility first, with its signature and one sentence;
    // the limit is 1 to 25 and a query of stop words alone is refused naming the field.
    let server = Server::start(FINANCE).await;
    let found = ok(&server, "search_guards", json!({"query": "implied volatility"})).await;
    let hits = found["hits"].as_array().expect("hits");
    assert_eq!(hits[0]["name"], "implied_volatility", "{found}");
    let signature = hits[0]["signature"].as_str().unwrap_or_default();
    assert!(signature.starts_with("implied_volatility(#{"), "{signature}");
    assert!(signature.contains("price: number"), "{signature}");
    assert!(
        !hits[0]["doc"].as_str().unwrap_or_default().contains('\n'),
        "{found}"
    );
    let costs = ok(
        &server,
        "search_guards",
        json!({"query": "transaction costs", "limit": 1}),
    )
    .await;
    assert_eq!(costs["hits"][0]["name"], "check_cost_curve", "{costs}");
    assert_eq!(costs["hits"].as_array().map(Vec::len), Some(1));
    for bad in [
        json!({"query": "the of"}),
        json!({"query": "vol", "limit": 26}),
        json!({"query": "vol", "limit": 0}),
    ] {
        let answer = server.call("search_guards", bad.clone()).await;
        assert!(is_error(&answer), "{bad}");
        let text = structured(&answer).to_string();
        assert!(text.contains("query") || text.contains("limit"), "{text}");
    }
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
    // The same portable schemas tools/list sends: references inlined.
    for schema in [&d["input_schema"], &d["output_schema"]] {
        let text = schema.to_string();
        assert!(!text.contains("$ref") && !text.contains("$defs"), "{text}");
    }
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
        json!([
            "get_quote",
            "get_quote_isolated",
            "list_paper_orders",
            "place_paper_order"
        ])
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
    // list_paper_orders requires no slot, so every bundle covers it.
    assert_eq!(
        c["ready"],
        json!(["check_performance", "check_rf_convention", "list_paper_orders"])
    );
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
