//! run_coding_task end to end with a scripted model on 127.0.0.1: the real
//! HTTP client path, the loop, repairs, budgets, contract checks, failures.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;
use crate::fake_model::{FakeModel, GREEKS_ANSWER, Reply};

fn code(body: &str) -> Reply {
    Reply::Content(format!("Plan: do it.\n```rhai\n{body}\n```"))
}

async fn server_for(model: &FakeModel, extra: &[(&str, &str)]) -> Server {
    let env = model.env();
    let mut pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    pairs.extend_from_slice(extra);
    Server::start_with_env(FINANCE, &pairs).await
}

async fn task(server: &Server, prompt: &str, timeout: u64) -> Value {
    let result = server
        .call(
            "run_coding_task",
            json!({"prompt": prompt, "timeout_seconds": timeout}),
        )
        .await;
    structured(&result)
}

const SCENARIO: &str = r#"let rows = [];
for s in [90.0, 100.0, 110.0] {
  let a = #{option_type: "call", spot: s, strike: 100.0, time_to_expiry: 0.25, volatility: 0.25, rate: 0.04, dividend_yield: 0.0};
  rows.push(#{spot: s, price: price_option_t(a).result, delta: calc_greeks_t(a).delta});
}
write_artifact("scenarios.csv", to_csv(rows, ["spot", "price", "delta"]));
final_answer(#{task_type: "analysis", summary: "priced 3 spots", metrics: #{atm_price: rows[1].price}})"#;

#[tokio::test]
async fn the_issue_scenario_runs_end_to_end_through_mcp() {
    // Prompt → scripted model writes the loop → CSV artifact → final answer; read back with read_artifact.
    let model = FakeModel::start(vec![code(SCENARIO)]).await;
    let server = server_for(&model, &[]).await;
    let result = task(
        &server,
        "compare a European call at spots 90, 100 and 110; save scenarios.csv",
        60,
    )
    .await;
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["task_type"], "analysis");
    assert_eq!(result["steps"], 1);
    let atm = result["metrics"]["atm_price"].as_f64().unwrap();
    assert!((atm - 5.4721).abs() < 1e-3, "{atm}");
    let task_id = result["task_id"].as_str().unwrap();
    let csv = server
        .call(
            "read_artifact",
            json!({"task_id": task_id, "filename": "outputs/scenarios.csv"}),
        )
        .await;
    assert!(
        structured(&csv)["content"]
            .as_str()
            .unwrap()
            .starts_with("spot,price,delta\n")
    );
    // The system prompt came from the registry.
    let first = &model.requests()[0];
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("price_option_t(#{"), "signature in prompt");
    assert!(system.contains("\"call\"|\"put\""), "enum spelled out");
    assert_eq!(first["model"], "scripted");
    // Task directory contents and events.
    let files = server.call("list_artifacts", json!({"task_id": task_id})).await;
    let names: Vec<String> = structured(&files)["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["filename"].as_str().unwrap().to_string())
        .collect();
    for expected in [
        "prompt.txt",
        "agent_instructions.md",
        "agent_actions/action_001.rhai",
        "result.json",
    ] {
        assert!(names.contains(&expected.to_string()), "{expected} in {names:?}");
    }
    let events = read_jsonl(&server.artifacts.path().join(task_id).join("events.jsonl"));
    let kinds: Vec<&str> = events.iter().map(|e| e["event"].as_str().unwrap()).collect();
    for expected in [
        "task_created",
        "agent_started",
        "task_worker_started",
        "model_call_started",
        "model_call_finished",
        "function_call_finished",
        "artifact_written",
        "agent_step_finished",
        "agent_finished",
    ] {
        assert!(kinds.contains(&expected), "{expected} missing from {kinds:?}");
    }
    let raw = std::fs::read_to_string(server.artifacts.path().join("events.jsonl")).unwrap();
    assert!(
        !raw.contains("compare a European call"),
        "prompt text leaked into events"
    );
}

#[tokio::test]
async fn a_failing_step_is_repaired_in_the_next_with_variables_kept() {
    // Step 1 defines a variable then fails; step 2 uses the variable and finishes.
    let model = FakeModel::start(vec![
        // A map built at run time (a computed key): the check cannot judge it, so the step runs and fails.
        code("let strike = 100.0;\nlet a = #{option_type: \"call\"};\nlet key = \"spot\";\na[key] = \"oops\";\nprice_option_t(a)"),
        code(
            "let p = price_option_t(#{option_type: \"call\", spot: 100.0, strike: strike, time_to_expiry: 1.0, volatility: 0.2, rate: 0.05});\nfinal_answer(#{task_type: \"analysis\", summary: \"fixed\", metrics: #{price: p.result}})",
        ),
    ])
    .await;
    let server = server_for(&model, &[]).await;
    let result = task(&server, "price it", 60).await;
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["steps"], 2);
    let second = &model.requests()[1];
    let observation = second["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        observation.contains("error (guard)") && observation.contains("line"),
        "{observation}"
    );
    // The receipt: both blocks and the model that wrote them (issue 28).
    let receipt = &result["receipt"];
    assert_eq!(receipt["model"], "scripted", "{result}");
    let blocks: Vec<&str> = receipt["scripts"]
        .as_array()
        .expect("scripts")
        .iter()
        .filter_map(|s| s["path"].as_str())
        .collect();
    assert_eq!(
        blocks,
        ["agent_actions/action_001.rhai", "agent_actions/action_002.rhai"]
    );
    // A replay runs both blocks in one session (the variable survives the
    // failed first block) and never calls the model.
    let asked = model.requests().len();
    let task_id = result["task_id"].as_str().expect("task id");
    let replay = structured(&server.call("replay_task", json!({"task_id": task_id})).await);
    assert_eq!(replay["verdict"], "identical", "{replay}");
    assert_eq!(replay["replay_status"], "success", "{replay}");
    assert_eq!(model.requests().len(), asked, "the replay called the model");
}

#[tokio::test]
async fn a_model_that_never_finishes_exhausts_the_step_budget() {
    // Code without final_answer forever → failed after 12 steps, saying why.
    let model = FakeModel::start(vec![code("1 + 1")]).await;
    let server = server_for(&model, &[]).await;
    let result = task(&server, "loop forever", 60).await;
    assert_eq!(result["status"], "failed");
    let summary = result["summary"].as_str().unwrap();
    assert!(
        summary.contains("step budget (12)") && summary.contains("final_answer"),
        "{summary}"
    );
    assert_eq!(model.requests().len(), 12);
}

#[tokio::test]
async fn replies_without_code_use_model_calls_until_that_budget_ends() {
    // Prose only: each reply costs a model call; 16 calls then failed.
    let model = FakeModel::start(vec![Reply::Content("I think the answer is 42.".into())]).await;
    let server = server_for(&model, &[]).await;
    let result = task(&server, "chat", 60).await;
    assert_eq!(result["status"], "failed");
    assert!(
        result["summary"]
            .as_str()
            .unwrap()
            .contains("model call budget (16)"),
        "{result}"
    );
}

#[tokio::test]
async fn a_contract_violation_is_refused_and_fails_the_task_if_never_fixed() {
    // no_action after a guard call is refused each time; the task fails with the contract reason.
    let model = FakeModel::start(vec![code(
        "get_quote(#{symbol: \"AAPL\"});\nfinal_answer(#{task_type: \"no_action\", summary: \"nothing\"})",
    )])
    .await;
    let server = server_for(&model, &[]).await;
    let result = task(&server, "do nothing", 60).await;
    assert_eq!(result["status"], "failed");
    assert!(
        result["summary"].as_str().unwrap().contains("no_action"),
        "{result}"
    );
    let refusal = model.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .clone();
    assert!(
        refusal.as_str().unwrap().contains("final_answer was refused"),
        "{refusal}"
    );
}

#[tokio::test]
async fn a_refused_answer_keeps_the_steps_output_and_every_observation_states_the_budget_left() {
    // The refusal quotes what the step printed, and observations end with the budgets still left.
    let model = FakeModel::start(vec![
        code("let q = get_quote(#{symbol: \"AAPL\"});\nprint(`price ${q.price}`);\nfinal_answer(#{task_type: \"no_action\", summary: \"x\"})"),
        code("print(\"second\"); 2"),
        code("final_answer(#{task_type: \"analysis\", summary: \"done\"})"),
    ])
    .await;
    let server = server_for(&model, &[]).await;
    let result = task(&server, "quote AAPL", 60).await;
    assert_eq!(result["status"], "success", "{result}");
    let last_user = |i: usize| -> String {
        model.requests()[i]["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let refusal = last_user(1);
    assert!(refusal.contains("printed:\nprice "), "{refusal}");
    assert!(refusal.contains("final_answer was refused"), "{refusal}");
    assert!(
        refusal.ends_with("Left: 11 steps, 15 replies, 99 server calls, 100000 inline calls."),
        "{refusal}"
    );
    let second = last_user(2);
    assert!(second.contains("second"), "{second}");
    assert!(
        second.ends_with("Left: 10 steps, 14 replies, 99 server calls, 100000 inline calls."),
        "{second}"
    );
}

#[tokio::test]
async fn pure_calls_do_not_spend_the_budget_of_100_server_calls() {
    // 150 calls of a pure guard in one step all succeed: inline calls have their own budget.
    let model = FakeModel::start(vec![code(
        "let n = 0; let e = \"\";\nfor i in 0..150 { try { check_rf_convention(#{rf: 0.0001, periods_per_year: 252}); n += 1; } catch (err) { e = err.code; } }\nfinal_answer(#{task_type: \"analysis\", summary: `${n} ok, then ${e}`})",
    )])
    .await;
    let server = server_for(&model, &[]).await;
    let result = task(&server, "many calls", 60).await;
    assert_eq!(result["summary"], "150 ok, then", "{result}");
}

#[tokio::test]
async fn an_unreachable_model_fails_the_task_with_the_reason() {
    // Nothing listens on port 1 → a clear connection error naming the setting.
    let server = Server::start_with_env(
        FINANCE,
        &[
            ("WARDEN_MODEL_API_KEY", "k"),
            ("WARDEN_MODEL_API_BASE", "http://127.0.0.1:1/v1"),
            ("WARDEN_MODEL_ID", "m"),
        ],
    )
    .await;
    let result = task(&server, "anything", 30).await;
    assert_eq!(result["status"], "failed");
    let summary = result["summary"].as_str().unwrap();
    assert!(
        summary.contains("cannot reach the model") && summary.contains("WARDEN_MODEL_API_BASE"),
        "{summary}"
    );
}

#[tokio::test]
async fn a_slow_model_times_out_per_call() {
    // WARDEN_MODEL_TIMEOUT_SECONDS=1 against a 5 s reply → failed after about 1 s.
    let model = FakeModel::start(vec![Reply::Slow(
        Duration::from_secs(5),
        "```rhai\n1\n```".into(),
    )])
    .await;
    let server = server_for(&model, &[("WARDEN_MODEL_TIMEOUT_SECONDS", "1")]).await;
    let started = Instant::now();
    let result = task(&server, "slow", 30).await;
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["error"]["model_error"], "timeout", "{result}");
    assert!(
        started.elapsed() < Duration::from_millis(2_500),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_task_deadline_bounds_a_slow_model_too() {
    // A 2 s task whose model takes 10 s ends timed_out at the task deadline.
    let model = FakeModel::start(vec![Reply::Slow(
        Duration::from_secs(10),
        "```rhai\n1\n```".into(),
    )])
    .await;
    let server = server_for(&model, &[]).await;
    let started = Instant::now();
    let result = task(&server, "slow", 2).await;
    assert_eq!(result["status"], "timed_out", "{result}");
    assert!(
        started.elapsed() < Duration::from_millis(2_600),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn without_model_settings_the_tool_says_what_to_set() {
    // No WARDEN_MODEL_* → isError with model_not_configured naming the variables and run_script.
    let server = Server::start(FINANCE).await;
    let result = server.call("run_coding_task", json!({"prompt": "x"})).await;
    assert!(is_error(&result));
    assert_eq!(error_code(&result), "model_not_configured");
    let message = structured(&result)["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("WARDEN_MODEL_API_KEY") && message.contains("run_script"),
        "{message}"
    );
}

/// The system prompt the scripted model received in its first request.
fn system_prompt_seen(model: &FakeModel) -> String {
    model.requests()[0]["messages"][0]["content"]
        .as_str()
        .expect("the first request carries the system prompt")
        .to_string()
}

#[tokio::test]
async fn the_prompt_states_budgets_defaults_conditions_outputs_and_the_task_type_rule() {
    // Pins what the model is told before its first line of code: budgets, defaults, conditional
    // requirements with a hint, typed evidence, and that `unsupported` ends the task failed.
    let model = FakeModel::start(vec![code(
        "final_answer(#{task_type: \"unsupported\", summary: \"no such function\"})",
    )])
    .await;
    let server = server_for(&model, &[]).await;
    // The request names the guards whose signatures are checked below: the prompt shows
    // those the request's words match first (the others may be in the index only).
    let request = "forecast the weather, not a deflated sharpe check, an SPA bootstrap, a cost curve \
                   grid, a downside performance review or a rate convention";
    let result = task(&server, request, 60).await;
    // The rule the prompt states is the rule applied.
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["task_type"], "unsupported");
    let system = system_prompt_seen(&model);
    eprintln!("system prompt for warden-finance: {} bytes", system.len());
    for expected in [
        // The budget line, numbers from crates/warden-core/src/limits.rs.
        "Budgets: 12 steps (a step is a code block that ran), 16 replies, 100 server calls",
        // task_type → status.
        "analysis, no_action, needs_input end success; unsupported, failed end failed",
        // Defaults from the input schemas.
        "periods_per_year?: number = 252.0",
        "threshold?: number = 0.95",
        "n_bootstrap?: integer = 1000",
        "grid?: array of number = [0.0,5.0,10.0,20.0,50.0]",
        // A conditional requirement with its hint, declared on the input type.
        "trials_sharpe_variance is required when n_trials > 1: sample variance",
        "sharpe is required when returns is not given",
        // Typed evidence, not `evidence: any`.
        "dsr: number",
        "downside_deviation: number*",
        "units: \"decimal\"|\"percent\"",
        "number* is a number or one of",
    ] {
        assert!(system.contains(expected), "missing {expected:?} in:\n{system}");
    }
    assert!(!system.contains("evidence: any"), "untyped evidence left");
    // AGENT_MAX_PROMPT_BYTES; every guard the model may call is in the index.
    assert!(system.len() <= 12_000, "prompt grew to {} bytes", system.len());
    for name in [
        "price_option_t",
        "implied_volatility",
        "get_quote",
        "check_brinson",
    ] {
        assert!(system.contains(name), "{name} is not in the index");
    }
    assert!(system.contains("search_guards(\"a few words\")"), "{system}");
}

#[tokio::test]
async fn a_lookahead_analysis_that_only_calls_assert_causal_succeeds_and_records_the_call() {
    // A script-only function call counts for the analysis gate and is listed in function_calls.json.
    let model = FakeModel::start(vec![code(
        "let bars = [];\nfor i in 0..20 { bars.push(100.0 + i); }\nlet check = assert_causal(|b| b.map(|x| x * 2.0), bars, 10);\nfinal_answer(#{task_type: \"analysis\", summary: `causal: ${check.passed}`, metrics: #{checked: check.checked}})",
    )])
    .await;
    let server = server_for(&model, &[]).await;
    let result = task(&server, "check my signal for look-ahead", 60).await;
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["task_type"], "analysis");
    assert_eq!(result["metrics"]["checked"], 10);
    let task_id = result["task_id"].as_str().unwrap();
    let calls =
        std::fs::read_to_string(server.artifacts.path().join(task_id).join("function_calls.json")).unwrap();
    let calls: Value = serde_json::from_str(&calls).unwrap();
    let listed = calls.to_string();
    assert!(
        listed.contains("\"function\":\"assert_causal\"")
            && listed.contains("\"success\"")
            && listed.contains("\"script_inline\""),
        "{listed}"
    );
    // The task's event log says the same.
    let events = std::fs::read_to_string(server.artifacts.path().join(task_id).join("events.jsonl")).unwrap();
    assert!(
        events
            .lines()
            .any(|line| line.contains("\"function\":\"assert_causal\"")
                && line.contains("\"execution_mode\":\"script_inline\"")),
        "{events}"
    );
}

#[tokio::test]
async fn an_analysis_without_a_successful_call_is_refused_saying_what_counts() {
    // A failed assert_causal call does not open the analysis gate; the refusal names what does.
    let model = FakeModel::start(vec![code(
        "try { assert_causal(|b| b, [1.0, 2.0], 5); } catch (e) { print(e.code); }\nfinal_answer(#{task_type: \"analysis\", summary: \"x\"})",
    )])
    .await;
    let server = server_for(&model, &[]).await;
    let result = task(&server, "check", 60).await;
    assert_eq!(result["status"], "failed", "{result}");
    let refusal = model.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        refusal.contains("a guard or of a script-only function that returned without error; 1 call(s) made"),
        "{refusal}"
    );
}

#[tokio::test]
async fn token_usage_is_summed_over_model_calls_and_a_task_limit_stops_the_next_call() {
    // Three model calls: two with usage, one without (unknown, never 0).
    let model = FakeModel::start(vec![
        Reply::Counted("Let me think.".into(), 100, 20),
        Reply::Content("Still thinking, no code yet.".into()),
        Reply::Counted(GREEKS_ANSWER.into(), 150, 30),
    ])
    .await;
    let server = server_for(&model, &[]).await;
    let result = task(&server, "delta at the money", 60).await;
    assert_eq!(result["status"], "success", "{result}");
    // The reply without usage is estimated: the request body's bytes / 4
    // and the reply's content bytes / 4, rounded up (docs/scripts.md).
    let sent = model.requests()[1].to_string().len() as u64;
    let (estimated_in, estimated_out) = (
        sent.div_ceil(4),
        "Still thinking, no code yet.".len().div_ceil(4) as u64,
    );
    assert_eq!(
        result["usage"],
        json!({"model": "scripted", "model_calls": 3, "input_tokens": 250 + estimated_in,
               "output_tokens": 50 + estimated_out, "total_tokens": 300 + estimated_in + estimated_out,
               "calls_without_usage": 1}),
        "{result}"
    );
    let events = server
        .events_until(|r| r.iter().filter(|e| e["event"] == "model_call_finished").count() == 3)
        .await;
    let counted: Vec<(Value, Value, Value)> = events
        .iter()
        .filter(|e| e["event"] == "model_call_finished")
        .map(|e| {
            (
                e["input_tokens"].clone(),
                e["output_tokens"].clone(),
                e["usage_estimated"].clone(),
            )
        })
        .collect();
    assert_eq!(
        counted,
        [
            (json!(100), json!(20), json!(false)),
            (json!(estimated_in), json!(estimated_out), json!(true)),
            (json!(150), json!(30), json!(false))
        ]
    );

    // With WARDEN_TASK_TOKENS=100, the first reply's 120 tokens reach it:
    // the second call is never made, and the task says why.
    let limited = FakeModel::start(vec![Reply::Counted("Let me think.".into(), 100, 20)]).await;
    let server = server_for(&limited, &[("WARDEN_TASK_TOKENS", "100")]).await;
    let result = task(&server, "delta at the money", 60).await;
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["error"]["kind"], "limit", "{result}");
    let message = result["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("120") && message.contains("WARDEN_TASK_TOKENS"),
        "{message}"
    );
    assert_eq!(limited.requests().len(), 1, "no call past the limit");
    assert_eq!(result["usage"]["total_tokens"], 120, "{result}");
}

#[tokio::test]
async fn a_daily_token_limit_refuses_the_next_task_and_usage_reports_by_principal_and_day() {
    let model = FakeModel::start(vec![
        Reply::Counted("Let me think.".into(), 100, 20),
        Reply::Counted(GREEKS_ANSWER.into(), 10, 5),
    ])
    .await;
    let server = server_for(&model, &[("WARDEN_PRINCIPAL_DAILY_TOKENS", "150")]).await;
    // 135 tokens, then 15 more: the day's total reaches the limit of 150.
    for expected in [135, 15] {
        let result = task(&server, "delta", 60).await;
        assert_eq!(result["status"], "success", "{result}");
        assert_eq!(result["usage"]["total_tokens"], expected, "{result}");
    }
    let asked = model.requests().len();
    let refused = task(&server, "delta", 60).await;
    assert_eq!(refused["status"], "failed", "{refused}");
    assert_eq!(refused["error"]["kind"], "limit", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("150") && message.contains("WARDEN_PRINCIPAL_DAILY_TOKENS"),
        "{message}"
    );
    assert_eq!(
        model.requests().len(),
        asked,
        "no model call past the daily limit"
    );

    // The report reads the task store: one row for local today.
    let report = usage_report(
        FINANCE,
        &["--days", "1"],
        &[("WARDEN_ARTIFACTS_DIR", server.artifacts.path().as_os_str())],
    );
    let rows = report["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{report}");
    let row = &rows[0];
    assert_eq!(row["principal"], "local");
    assert_eq!(row["day"], report["from"]);
    assert_eq!(
        (
            &row["tasks"],
            &row["model_calls"],
            &row["input_tokens"],
            &row["output_tokens"],
            &row["total_tokens"]
        ),
        (&json!(2), &json!(3), &json!(120), &json!(30), &json!(150)),
        "{report}"
    );
}

/// Issue 38, point 11: both token limits bind an endpoint that sends no
/// `usage`, or spells it `input_tokens` / `output_tokens`. With a limit of
/// 1 token, the first call reaches it and no second call is made (before,
/// such replies counted 0 and all 16 model calls were made).
#[tokio::test]
async fn both_token_limits_bind_replies_without_usage_and_in_the_other_spelling() {
    let thinking = "Let me think.";
    let replies = [
        (Reply::Content(thinking.into()), true),
        (
            Reply::Usage(thinking.into(), json!({"input_tokens": 5, "output_tokens": 2})),
            false,
        ),
    ];
    for (reply, estimated) in replies {
        for variable in ["WARDEN_TASK_TOKENS", "WARDEN_PRINCIPAL_DAILY_TOKENS"] {
            let model = FakeModel::start(vec![reply.clone()]).await;
            let server = server_for(&model, &[(variable, "1")]).await;
            let result = task(&server, "delta at the money", 60).await;
            let case = format!("{variable}, estimated: {estimated}");
            assert_eq!(result["status"], "failed", "{case}: {result}");
            assert_eq!(result["error"]["kind"], "limit", "{case}: {result}");
            let message = result["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(variable), "{case}: {message}");
            assert_eq!(model.requests().len(), 1, "{case}: no call past the limit");
            let usage = &result["usage"];
            assert_eq!(usage["model_calls"], 1, "{case}: {usage}");
            assert_eq!(
                usage["calls_without_usage"],
                u64::from(estimated),
                "{case}: {usage}"
            );
            let total = usage["total_tokens"].as_u64().unwrap_or_default();
            if estimated {
                let sent = model.requests()[0].to_string().len() as u64;
                assert_eq!(total, sent.div_ceil(4) + 4, "{case}: {usage}");
            } else {
                assert_eq!(total, 7, "{case}: {usage}");
            }
        }
    }
}

/// Issue 38, point 12: an absurd count (above 10,000,000, negative,
/// fractional) is the endpoint's error, named, and counted by its
/// estimate; two `i64::MAX` replies no longer overflow the task store, so
/// the `usage` report still answers (before, `u64::MAX` wrapped the sum
/// and the report failed with an integer overflow).
#[tokio::test]
async fn absurd_token_counts_fail_the_call_naming_the_field_and_the_usage_report_still_answers() {
    let thinking = "Let me think.";
    let cases = [
        (
            json!({"prompt_tokens": u64::MAX, "completion_tokens": 1}),
            "usage.prompt_tokens",
        ),
        (
            json!({"prompt_tokens": i64::MAX, "completion_tokens": 0}),
            "usage.prompt_tokens",
        ),
        (
            json!({"input_tokens": 0, "output_tokens": i64::MAX}),
            "usage.output_tokens",
        ),
        (
            json!({"input_tokens": -5, "output_tokens": 1}),
            "usage.input_tokens",
        ),
        (
            json!({"prompt_tokens": 3, "completion_tokens": 1.5}),
            "usage.completion_tokens",
        ),
    ];
    let replies = cases
        .iter()
        .map(|(usage, _)| Reply::Usage(thinking.into(), usage.clone()))
        .collect();
    let model = FakeModel::start(replies).await;
    let server = server_for(&model, &[("WARDEN_PRINCIPAL_DAILY_TOKENS", "1000000000000")]).await;
    let mut estimated_total = 0;
    for (i, (usage, field)) in cases.iter().enumerate() {
        let result = task(&server, "delta", 60).await;
        assert_eq!(result["status"], "failed", "{usage}: {result}");
        assert_eq!(result["error"]["kind"], "model", "{usage}: {result}");
        assert_eq!(
            result["error"]["model_error"], "bad_response",
            "{usage}: {result}"
        );
        let message = result["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{usage}: {message}");
        assert_eq!(model.requests().len(), i + 1, "one call per task");
        // Counted by its estimate, never by what it said.
        let sent = model.requests()[i].to_string().len() as u64;
        let estimate = sent.div_ceil(4) + thinking.len().div_ceil(4) as u64;
        assert_eq!(result["usage"]["total_tokens"], estimate, "{usage}: {result}");
        assert_eq!(result["usage"]["calls_without_usage"], 1, "{usage}: {result}");
        estimated_total += estimate;
    }
    let report = usage_report(
        FINANCE,
        &["--days", "1"],
        &[("WARDEN_ARTIFACTS_DIR", server.artifacts.path().as_os_str())],
    );
    let rows = report["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{report}");
    assert_eq!(rows[0]["tasks"], cases.len(), "{report}");
    assert_eq!(rows[0]["total_tokens"], estimated_total, "{report}");
    assert_eq!(rows[0]["calls_without_usage"], cases.len(), "{report}");
}

/// Issue 38, point 8: a coding task's replay spends the task's own budgets
/// (recorded in its receipt): with `WARDEN_AGENT_MAX_INLINE_CALLS=4`, the
/// original's block made 4 of its 10 inline calls, and so does the replay
/// (before, the replay ran under run_script's rules, made all 10, and
/// reported `different`).
#[tokio::test]
async fn a_coding_tasks_replay_runs_under_its_recorded_budgets() {
    let block = r#"let made = 0;
for i in 0..10 {
  try {
    implied_volatility(#{option_type: "call", price: 4.0, spot: 100.0, strike: 105, time_to_expiry: 0.5, rate: 0.03});
    made += 1;
  } catch (e) {}
}
final_answer(#{task_type: "analysis", summary: `made ${made} inline calls`, metrics: #{made: made}})"#;
    let model = FakeModel::start(vec![code(block)]).await;
    let server = server_for(&model, &[("WARDEN_AGENT_MAX_INLINE_CALLS", "4")]).await;
    let result = task(&server, "count", 60).await;
    assert_eq!(result["status"], "success", "{result}");
    let made = result["metrics"]["made"].as_u64().expect("made");
    assert!(made < 10, "the inline budget bound the block: {result}");
    assert_eq!(
        result["receipt"]["limits"],
        json!({"timeout_ms": 60_000, "door_calls": 100, "inline_calls": 4}),
        "{result}"
    );
    let task_id = result["task_id"].as_str().expect("task id");
    let replay = structured(&server.call("replay_task", json!({"task_id": task_id})).await);
    assert_eq!(replay["verdict"], "identical", "{replay}");
    assert_eq!(
        replay["limits"],
        json!({"timeout_ms": 60_000, "door_calls": 100, "inline_calls": 4}),
        "{replay}"
    );
}

#[tokio::test]
async fn a_guard_left_out_of_the_prompt_is_found_by_searching() {
    // The request fills the prompt with other guards; the model finds implied_volatility with
    // search_guards (ranked first, with its signature), then calls it.
    let model = FakeModel::start(vec![
        code("let hits = search_guards(\"implied volatility\");\nprint(hits[0].signature);\nhits.map(|h| h.name)"),
        code(
            "let iv = implied_volatility(#{option_type: \"call\", price: 10.45, spot: 100.0, strike: 100.0, time_to_expiry: 1.0, rate: 0.05});\nfinal_answer(#{task_type: \"analysis\", summary: `iv ${fmt_pct(iv.volatility, 1)}`, metrics: #{iv: iv.volatility}})",
        ),
    ])
    .await;
    let server = server_for(&model, &[]).await;
    let request = "review the deflated sharpe, the SPA test, the cost curve, brinson attribution, \
                   survivorship, the point-in-time universe and the performance of my backtest";
    let result = task(&server, request, 60).await;
    let system = system_prompt_seen(&model);
    assert!(system.contains("implied_volatility"), "not in the index");
    assert!(
        !system.contains("- implied_volatility(#{"),
        "the test needs a prompt without its signature"
    );
    let first = model.requests()[1]["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(first.contains("printed:\nimplied_volatility(#{"), "{first}");
    assert!(first.contains("value: [\"implied_volatility\""), "{first}");
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["summary"], "iv 20.0%", "{result}");
}

#[tokio::test]
async fn a_second_code_block_in_one_reply_is_reported_not_dropped() {
    // Two blocks in one reply: the first runs, and the next observation says the second did not.
    let model = FakeModel::start(vec![
        Reply::Content(
            "Step one:\n```rhai\nlet x = 41;\nx\n```\nand then:\n```rhai\nfinal_answer(#{task_type: \"no_action\", summary: \"never run\"})\n```".into(),
        ),
        code("final_answer(#{task_type: \"no_action\", summary: `x is ${x}`})"),
    ])
    .await;
    let server = server_for(&model, &[]).await;
    let result = task(&server, "count", 60).await;
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["summary"], "x is 41", "{result}");
    let observed = model.requests()[1]["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        observed.starts_with("Note: your reply had 2 code blocks; only the first ran"),
        "{observed}"
    );
    assert!(observed.contains("value: 41"), "{observed}");
}
