//! What the model sees, round 2 (issue 25), end to end with a scripted
//! model: inline calls apart from the door budget, `map_call`, the check
//! before a block runs (no step spent), hidden guards, the math prelude and
//! the artifact helpers' return values.

use serde_json::{Value, json};

use crate::common::*;
use crate::fake_model::{FakeModel, Reply};

fn code(body: &str) -> Reply {
    Reply::Content(format!("```rhai\n{body}\n```"))
}

async fn server_for(model: &FakeModel, extra: &[(&str, &str)]) -> Server {
    let env = model.env();
    let mut pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    pairs.extend_from_slice(extra);
    Server::start_with_env(FINANCE, &pairs).await
}

async fn task(server: &Server, prompt: &str) -> Value {
    let result = server
        .call(
            "run_coding_task",
            json!({"prompt": prompt, "timeout_seconds": 60}),
        )
        .await;
    structured(&result)
}

/// The last message the model was sent in request `i` (an observation).
fn observation(model: &FakeModel, i: usize) -> String {
    model.requests()[i]["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn three_hundred_pure_calls_in_one_task_succeed_and_spend_no_door_calls() {
    // 300 implied-vol solves (pure, inline) in one step: all succeed, the door budget is untouched.
    let model = FakeModel::start(vec![
        code(
            "let n = 0;\nfor i in 0..300 {\n  let p = 2.0 + i.to_float() / 1000.0;\n  let iv = implied_volatility(#{option_type: \"call\", price: p, spot: 21.0, strike: 20.0, time_to_expiry: 0.25, rate: 0.1});\n  if iv.volatility > 0.0 { n += 1; }\n}\nn",
        ),
        code("final_answer(#{task_type: \"analysis\", summary: \"solved\"})"),
    ])
    .await;
    let server = server_for(&model, &[]).await;
    let result = task(&server, "300 implied vols").await;
    assert_eq!(result["status"], "success", "{result}");
    let seen = observation(&model, 1);
    assert!(seen.contains("value: 300"), "{seen}");
    assert!(
        seen.ends_with("Left: 11 steps, 15 replies, 100 server calls, 99700 inline calls."),
        "{seen}"
    );
}

#[tokio::test]
async fn the_door_budget_of_100_calls_is_enforced_for_server_calls() {
    // 150 in-process get_quote calls in one step: the 101st fails with budget_exhausted.
    let model = FakeModel::start(vec![code(
        "let n = 0; let e = \"\"; let m = \"\";\nfor i in 0..150 { try { get_quote(#{symbol: \"AAPL\"}); n += 1; } catch (err) { e = err.code; m = err.message; } }\nlet mapped = \"\";\ntry { map_call(\"get_quote\", [#{symbol: \"AAPL\"}]); } catch (err) { mapped = err.code; }\nprint(m);\nfinal_answer(#{task_type: \"analysis\", summary: `${n} ok, then ${e}; map_call: ${mapped}`})",
    )])
    .await;
    let server = server_for(&model, &[]).await;
    let result = task(&server, "many calls").await;
    // map_call is refused too, so the message never recommends it: it says to finish.
    assert_eq!(
        result["summary"], "100 ok, then budget_exhausted; map_call: budget_exhausted",
        "{result}"
    );
    let printed = result["output"].as_str().unwrap_or_default();
    assert!(printed.contains("finish with final_answer"), "{printed}");
    assert!(!printed.contains("pass many argument maps"), "{printed}");
}

#[tokio::test]
async fn the_inline_budget_is_its_own_and_the_operator_can_set_it() {
    // WARDEN_AGENT_MAX_INLINE_CALLS=50: the 51st pure call fails; the prompt states the 50.
    let model = FakeModel::start(vec![code(
        "let n = 0; let e = \"\";\nfor i in 0..60 { try { check_rf_convention(#{rf: 0.0001, periods_per_year: 252}); n += 1; } catch (err) { e = err.code; } }\nfinal_answer(#{task_type: \"analysis\", summary: `${n} ok, then ${e}`})",
    )])
    .await;
    let server = server_for(&model, &[("WARDEN_AGENT_MAX_INLINE_CALLS", "50")]).await;
    let result = task(&server, "many pure calls").await;
    assert_eq!(result["summary"], "50 ok, then budget_exhausted", "{result}");
    let system = model.requests()[0]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(system.contains("50 inline calls"), "{system}");
}

#[tokio::test]
async fn map_call_answers_every_item_in_order_with_per_item_errors_for_one_call_each() {
    // An isolated guard (3 items, one bad), an in-process guard (2 items, one unknown symbol) and a
    // pure one (a good price, one above its bound, one not a map): results in order, errors in place;
    // each server map_call spends one server call, each pure item one inline call.
    let model = FakeModel::start(vec![
        code(
            r#"let base = #{option_type: "call", spot: 100.0, strike: 100.0, time_to_expiry: 1.0, volatility: 0.2, rate: 0.05};
let bad = base + #{spot: -1.0};
let priced = map_call("price_option_t", [base, bad, base + #{option_type: "put"}]);
let quotes = map_call("get_quote", [#{symbol: "AAPL"}, #{symbol: "XYZ"}]);
let vols = map_call("implied_volatility", [#{option_type: "call", price: 1.875, spot: 21.0, strike: 20.0, time_to_expiry: 0.25, rate: 0.1}, #{option_type: "call", price: 25.0, spot: 21.0, strike: 20.0, time_to_expiry: 0.25, rate: 0.1}, 7]);
print(`${priced[0].ok.result} ${priced[1].error.code} ${priced[1].error.field} ${priced[2].ok.result}`);
print(`${quotes[0].ok.symbol} ${quotes[1].error.code}`);
print(`${(vols[0].ok.volatility * 1000.0).round() / 1000.0} ${vols[1].error.field} ${vols[2].error.code}`);
priced.len() + quotes.len() + vols.len()"#,
        ),
        code("final_answer(#{task_type: \"analysis\", summary: \"mapped\"})"),
    ])
    .await;
    let server = server_for(&model, &[]).await;
    let result = task(&server, "price a vector").await;
    assert_eq!(result["status"], "success", "{result}");
    let seen = observation(&model, 1);
    let lines: Vec<&str> = seen.lines().collect();
    let first: Vec<&str> = lines[2].split(' ').collect();
    let call: f64 = first[0].parse().unwrap_or(f64::NAN);
    let put: f64 = first[3].parse().unwrap_or(f64::NAN);
    assert!((call - 10.4506).abs() < 5e-4, "{seen}");
    assert_eq!(&first[1..3], ["invalid_input", "spot"], "{seen}");
    assert!((put - 5.5735).abs() < 5e-4, "{seen}");
    assert_eq!(lines[3], "AAPL invalid_input", "{seen}");
    // A pure guard's items run inline: each an inline call, none a server call.
    assert_eq!(lines[4], "0.235 price invalid_input", "{seen}");
    assert!(seen.contains("value: 8"), "{seen}");
    assert!(seen.ends_with("98 server calls, 99998 inline calls."), "{seen}");
    // Every item is still a call of its own in function_calls.json.
    let task_id = result["task_id"].as_str().unwrap_or_default();
    let calls = std::fs::read_to_string(server.artifacts.path().join(task_id).join("function_calls.json"))
        .unwrap_or_default();
    assert_eq!(
        calls.matches("\"function\":\"price_option_t\"").count(),
        3,
        "{calls}"
    );
    assert_eq!(calls.matches("\"function\":\"get_quote\"").count(), 2, "{calls}");
}

#[tokio::test]
async fn a_block_that_fails_the_check_does_not_run_and_costs_no_step() {
    // Three problems in one block, one answer with their lines; nothing ran (no call, no print);
    // the fixed block then runs as step 1.
    let model = FakeModel::start(vec![
        code(
            "print(\"ran\");\nlet q = get_quote(#{sym: \"AAPL\"});\nlet m = #{call: 1.0};\nlet z = norm_cfd(1.0);",
        ),
        code(
            "let q = get_quote(#{symbol: \"AAPL\"});\nlet m = #{\"call\": norm_cdf(0.0)};\nfinal_answer(#{task_type: \"analysis\", summary: `${q.symbol} ${m[\"call\"]}`})",
        ),
    ])
    .await;
    let server = server_for(&model, &[]).await;
    let result = task(&server, "quote").await;
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["summary"], "AAPL 0.5");
    assert_eq!(result["steps"], 1, "{result}");
    assert_eq!(result["model_calls"], 2, "{result}");
    let seen = observation(&model, 1);
    assert!(!seen.contains("printed"), "the block ran: {seen}");
    for expected in [
        "the script did not run: 4 problem(s)",
        "line 2, column",
        "get_quote has no argument 'sym'",
        "missing required argument(s) symbol",
        "line 3, column 11: 'call' is a reserved word",
        "#{\"call\": ...}",
        "line 4, column 9: no function named 'norm_cfd': did you mean 'norm_cdf'?",
        "used no step",
        "Left: 12 steps, 15 replies, 100 server calls",
    ] {
        assert!(seen.contains(expected), "missing {expected:?} in:\n{seen}");
    }
}

#[tokio::test]
async fn run_script_gets_the_same_check_and_says_the_script_did_not_run() {
    // run_script: a misspelled guard argument is refused before anything runs, with the fix.
    let server = Server::start(FINANCE).await;
    let result = server
        .call(
            "run_script",
            json!({"script": "write_artifact(\"a.txt\", \"x\");\nprice_option_t(#{option_type: \"call\", spot: 1.0, strike: 1.0, time_to_expiry: 1.0, volatilty: 0.2, rate: 0.0})", "timeout_seconds": 30}),
        )
        .await;
    let result = structured(&result);
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["error"]["kind"], "parse", "{result}");
    let message = result["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("the script did not run")
            && message.contains("price_option_t has no argument 'volatilty': did you mean 'volatility'?")
            && message.contains("missing required argument(s) volatility"),
        "{message}"
    );
    let task_id = result["task_id"].as_str().unwrap_or_default();
    assert!(
        !server
            .artifacts
            .path()
            .join(task_id)
            .join("outputs/a.txt")
            .exists(),
        "the script ran: {result}"
    );
}

#[tokio::test]
async fn the_prompt_hides_guards_the_app_hid_and_lists_what_exists_within_12_kb() {
    // get_quote_isolated is hidden from the prompt (and from search_guards) but still callable;
    // built-ins, reserved words, the prelude, map_call and every budget with its number are
    // stated; the guards the request names are shown with their signatures and docs.
    let model = FakeModel::start(vec![code(
        "let q = get_quote_isolated(#{symbol: \"MSFT\"});\nfinal_answer(#{task_type: \"analysis\", summary: q.symbol})",
    )])
    .await;
    let server = server_for(&model, &[]).await;
    let result = task(&server, "quote MSFT and check a deflated sharpe").await;
    assert_eq!(result["status"], "success", "{result}");
    let system = model.requests()[0]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    eprintln!("system prompt for warden-finance: {} bytes", system.len());
    assert!(!system.contains("get_quote_isolated"), "hidden guard listed");
    for expected in [
        "- get_quote(#{",
        "implied_volatility",
        "[inline]",
        "Reserved words",
        " call ",
        "norm_cdf(x)",
        "math: abs sign sqrt",
        "map_call(\"name\", [#{...}, ...])",
        "Budgets: 12 steps (a step is a code block that ran), 16 replies, 100 server calls",
        "100000 inline calls, 60 s for the whole task; each observation is cut at 8 KiB",
        "at most 1000 maps, in ONE server",
        "metrics (a map) only with analysis",
        "EXCESS returns unless `rf` is given",
        "rf?: number = 0.0",
    ] {
        assert!(system.contains(expected), "missing {expected:?} in:\n{system}");
    }
    assert!(system.len() <= 12_000, "prompt grew to {} bytes", system.len());
}

#[tokio::test]
async fn output_before_final_answer_is_kept_and_artifact_helpers_return_their_paths() {
    // write_artifact returns #{path, bytes}; report returns its path; printed lines reach the result.
    let model = FakeModel::start(vec![code(
        r#"let w = write_artifact("a.csv", "x,y\n1,2\n");
let r = report(#{title: "T", sections: [#{heading: "t", table: [#{x: 1, y: 2}], columns: ["y"]}]});
print(`${w.path} ${w.bytes} ${r}`);
check_rf_convention(#{rf: 0.0001, periods_per_year: 252});
final_answer(#{task_type: "analysis", summary: "written", metrics: #{p: norm_inv(0.975)}})"#,
    )])
    .await;
    let server = server_for(&model, &[]).await;
    let result = task(&server, "write").await;
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(
        result["output"], "outputs/a.csv 8 outputs/report.html\n",
        "{result}"
    );
    let p = result["metrics"]["p"].as_f64().unwrap_or_default();
    assert!((p - 1.959_963_984_540_054).abs() < 1e-12, "{p}");
}
