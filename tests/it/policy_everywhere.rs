//! The policy file says what it means everywhere (issue 38, points 5-7),
//! over the real transport:
//! - a guard the policy denies a caller is as unknown to it as a guard that
//!   does not exist, on every path that names guards (tools/call, the
//!   catalogue tools, check_backtest, run_batch, verify_receipt, a
//!   script's calls, map_call and "did you mean", the task's
//!   registry.json): same code, same message shape, never listed or
//!   suggested; a refused built-in names the rule, never the file's path;
//! - a rule about a tool covers every route to its data: resources/read
//!   (artifacts, the task view) follows read_artifact's, tasks/get
//!   get_task_result's;
//! - a task queued while allowed, claimed after a restart under a policy
//!   that denies it, ends failed naming the rule and never runs.

use std::time::Duration;

use rmcp::model::{CallToolResponse, ReadResourceRequestParams};
use serde_json::{Value, json};

use crate::common::tasks::{StdioServer, call_params, get_task, poll_until_ended, start_task, wire};
use crate::common::*;

/// Denies `local` (the stdio caller) a guard run in a worker
/// (`price_option_t`), a pure one (`implied_volatility`), a research guard
/// check_backtest would run (`check_cost_curve`) and a built-in.
const POLICY: &str = r#"
default = "allow"

[[rules]]
name = "locals price nothing"
principals = ["local"]
deny = ["price_option_t", "implied_volatility", "check_cost_curve", "run_coding_task"]
"#;

/// The guards [`POLICY`] hides from `local`.
const HIDDEN: &[&str] = &["price_option_t", "implied_volatility", "check_cost_curve"];

/// A policy file in a temporary directory, and its absolute path.
fn policy_file(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, text).expect("policy file");
    let path = path.to_string_lossy().to_string();
    (dir, path)
}

fn option_args() -> Value {
    json!({"option_type": "call", "spot": 100.0, "strike": 100.0, "time_to_expiry": 0.5,
           "volatility": 0.2, "rate": 0.03})
}

/// `text` with `name` written as `nope_guard`: a hidden guard's answer and
/// a nonexistent one's must then be the same.
fn as_absent(text: &str, name: &str) -> String {
    text.replace(name, "nope_guard")
}

/// Asserts `text` names none of [`HIDDEN`] (but `except`) and not the policy file.
fn names_nothing_hidden(text: &str, except: Option<&str>, path: &str, what: &str) {
    for hidden in HIDDEN.iter().filter(|h| Some(**h) != except) {
        assert!(!text.contains(hidden), "{what} names the hidden {hidden}: {text}");
    }
    assert!(!text.contains(path), "{what} names the policy file: {text}");
}

/// A protocol error's code and message.
fn rpc_error(error: rmcp::ServiceError) -> (i32, String) {
    match error {
        rmcp::ServiceError::McpError(data) => (data.code.0, data.message.to_string()),
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_denied_guard_is_as_unknown_as_one_that_does_not_exist_on_every_path() {
    let (_dir, path) = policy_file(POLICY);
    let server = Server::start_with_env(FINANCE, &[("WARDEN_POLICY_FILE", &path)]).await;

    // tools/call: the unknown-tool protocol error, listing only what local may call.
    for hidden in ["price_option_t", "implied_volatility"] {
        let denied = rpc_error(server.try_call(hidden, option_args()).await.expect_err(hidden));
        let absent = rpc_error(
            server
                .try_call("nope_guard", option_args())
                .await
                .expect_err("absent"),
        );
        assert_eq!(denied.0, absent.0, "{denied:?} vs {absent:?}");
        assert_eq!(as_absent(&denied.1, hidden), absent.1);
        names_nothing_hidden(&absent.1, None, &path, "the unknown-tool error");
    }

    // list_guards: no row, and bundle_coverage counts nothing hidden.
    let listed = structured(&server.call("list_guards", json!({})).await);
    assert!(
        listed["guards"].as_array().is_some_and(|rows| !rows.is_empty()),
        "{listed}"
    );
    names_nothing_hidden(&listed.to_string(), None, &path, "list_guards");
    // search_guards: a denied guard is never found, even by its own name.
    for query in ["implied volatility", "price option"] {
        let found = structured(&server.call("search_guards", json!({"query": query})).await);
        assert!(found["hits"].is_array(), "{found}");
        names_nothing_hidden(&found.to_string(), None, &path, "search_guards");
    }
    for arguments in [
        json!({}),
        json!({"slots": ["returns", "turnover", "spot", "strike"]}),
    ] {
        let coverage = structured(&server.call("bundle_coverage", arguments).await);
        assert!(coverage.is_object(), "{coverage}");
        names_nothing_hidden(&coverage.to_string(), None, &path, "bundle_coverage");
    }

    // describe_guard: the unknown-name error, naming only visible guards.
    for hidden in HIDDEN {
        let denied = structured(&server.call("describe_guard", json!({"name": hidden})).await);
        let absent = structured(&server.call("describe_guard", json!({"name": "nope_guard"})).await);
        assert_eq!(denied["error"]["code"], "unknown_guard", "{denied}");
        assert_eq!(
            as_absent(&denied["error"].to_string(), hidden),
            absent["error"].to_string()
        );
        names_nothing_hidden(&absent.to_string(), None, &path, "describe_guard");
    }

    // check_backtest: a bundle the hidden check_cost_curve would take; it neither runs nor is named.
    let returns: Vec<f64> = (0..300).map(|i| 0.001 * ((i % 7) as f64 - 3.0)).collect();
    let turnover: Vec<f64> = (0..300).map(|_| 0.2).collect();
    let checked = structured(
        &server
            .call(
                "check_backtest",
                json!({"slots": {"returns": returns, "turnover": turnover, "cost_bps": 5.0,
                                 "periods_per_year": 252, "spot": 100.0}}),
            )
            .await,
    );
    assert!(checked["ran"].is_array(), "{checked}");
    names_nothing_hidden(&checked.to_string(), None, &path, "check_backtest");

    // run_batch: the plan refuses a hidden guard as it refuses a name never registered.
    let batch = |name: &str| {
        json!({"calls": [{"name": "calc_greeks_t", "arguments": option_args()},
                         {"name": name, "arguments": option_args()}]})
    };
    let denied = structured(&server.call("run_batch", batch("price_option_t")).await);
    let absent = structured(&server.call("run_batch", batch("nope_guard")).await);
    assert_eq!(denied["status"], absent["status"], "{denied}");
    assert_eq!(
        as_absent(&denied["error"].to_string(), "price_option_t"),
        absent["error"].to_string()
    );
    names_nothing_hidden(&absent.to_string(), None, &path, "run_batch");

    // verify_receipt: a receipt naming a hidden guard is one naming no guard.
    let receipt = |guard: &str| {
        json!({"receipt": {"guard": guard, "arguments_sha256": format!("sha256:{}", "0".repeat(64)),
                           "output_sha256": format!("sha256:{}", "0".repeat(64))},
               "arguments": option_args()})
    };
    let denied = structured(&server.call("verify_receipt", receipt("price_option_t")).await);
    let absent = structured(&server.call("verify_receipt", receipt("nope_guard")).await);
    assert_eq!(denied["error"]["code"], "unknown_guard", "{denied}");
    assert_eq!(
        as_absent(&denied["error"].to_string(), "price_option_t"),
        absent["error"].to_string()
    );

    // The CLI, as `local`: the same error as for a name never registered.
    let cli = |tool: &str| {
        let artifacts = tempfile::tempdir().expect("temp dir");
        let output = std::process::Command::new(FINANCE)
            .args(["call", tool, &option_args().to_string()])
            .env("WARDEN_POLICY_FILE", &path)
            .env("WARDEN_ARTIFACTS_DIR", artifacts.path())
            .output()
            .expect("run the CLI");
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        let error = stderr
            .lines()
            .find(|l| l.starts_with("error"))
            .unwrap_or_default()
            .to_string();
        (output.status.code(), error)
    };
    let (denied, absent) = (cli("price_option_t"), cli("nope_guard"));
    assert_eq!(denied.0, absent.0);
    assert!(
        absent.1.starts_with("error: unknown tool 'nope_guard'"),
        "{absent:?}"
    );
    assert_eq!(as_absent(&denied.1, "price_option_t"), absent.1);
    names_nothing_hidden(&absent.1, None, &path, "the CLI");

    // A refused built-in names the rule, never the file.
    let refused = structured(&server.call("run_coding_task", json!({"prompt": "price"})).await);
    assert_eq!(refused["error"]["code"], "forbidden", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("rule 1 (\"locals price nothing\") of the policy denies it"),
        "{message}"
    );
    assert!(
        !message.contains(&path) && !message.contains("policy.toml"),
        "{message}"
    );
}

/// A script that calls each name (a door call, an inline pure call) and
/// map_call inside try, and returns what it caught, as text.
fn probe(door: &str, inline: &str, mapped: &str) -> String {
    format!(
        r#"
let a = #{{option_type: "call", spot: 100.0, strike: 100.0, time_to_expiry: 0.5, volatility: 0.2, rate: 0.03}};
let door = ""; let inline = ""; let mapped = "";
try {{ {door}(a); }} catch (e) {{ door = `${{e}}`; }}
try {{ {inline}(#{{option_type: "call", price: 4.0, spot: 100.0, strike: 105, time_to_expiry: 0.5, rate: 0.03}}); }} catch (e) {{ inline = `${{e}}`; }}
try {{ map_call("{mapped}", [a]); }} catch (e) {{ mapped = `${{e}}`; }}
[door, inline, mapped]
"#
    )
}

#[tokio::test]
async fn a_script_cannot_tell_a_denied_guard_from_a_missing_one() {
    let (_dir, path) = policy_file(POLICY);
    let server = Server::start_with_env(FINANCE, &[("WARDEN_POLICY_FILE", &path)]).await;
    let run = |script: String| {
        let server = &server;
        async move {
            structured(
                &server
                    .call("run_script", json!({"script": script, "timeout_seconds": 30}))
                    .await,
            )
        }
    };

    // Caught: a hidden guard throws what a function that does not exist throws.
    let denied = run(probe("price_option_t", "implied_volatility", "price_option_t")).await;
    let absent = run(probe("nope_guard", "nope_guard", "nope_guard")).await;
    assert_eq!(denied["status"], "success", "{denied}");
    let (denied, absent) = (&denied["value"], &absent["value"]);
    for (i, name) in ["price_option_t", "implied_volatility", "price_option_t"]
        .iter()
        .enumerate()
    {
        let caught = denied[i].as_str().unwrap_or_default();
        assert_eq!(
            as_absent(caught, name),
            absent[i].as_str().unwrap_or_default(),
            "{denied}"
        );
        names_nothing_hidden(caught, Some(name), &path, "a caught error");
    }

    // Checked before running: a call outside try is an unknown function, and
    // "did you mean" never suggests a hidden guard.
    let unchecked = run("price_option_t(#{spot: 1.0})".to_string()).await;
    let message = unchecked["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.contains("no function named 'price_option_t'"),
        "{unchecked}"
    );
    let typo = run("implied_volatilty(#{spot: 1.0})".to_string()).await;
    let message = typo["error"]["message"].as_str().unwrap_or_default().to_string();
    assert!(
        message.contains("no function named 'implied_volatilty'"),
        "{typo}"
    );
    names_nothing_hidden(&message, None, &path, "the pre-run check");
    let mapped = run("map_call(\"price_optoin_t\", [#{spot: 1.0}])".to_string()).await;
    names_nothing_hidden(&mapped.to_string(), None, &path, "map_call's check");

    // The task's registry.json lists only what its caller may call.
    let ok = run("1 + 1".to_string()).await;
    let task_id = ok["task_id"].as_str().expect("a task id").to_string();
    let snapshot = structured(
        &server
            .call(
                "read_artifact",
                json!({"task_id": task_id, "filename": "registry.json"}),
            )
            .await,
    );
    let content = snapshot["content"].as_str().unwrap_or_default();
    assert!(content.contains("calc_greeks_t"), "{snapshot}");
    names_nothing_hidden(content, None, &path, "registry.json");
}

/// Denies `local` both tools that read a task's data.
const NO_READING: &str = r#"
[[rules]]
name = "write only"
principals = ["local"]
deny = ["read_artifact", "get_task_result"]
"#;

#[tokio::test]
async fn resources_and_tasks_get_follow_the_rules_of_the_tools_that_read_the_same_data() {
    let (_policy, path) = policy_file(NO_READING);
    let dir = tempfile::tempdir().expect("temp dir");
    let server = StdioServer::start(FINANCE, dir.path(), &[("WARDEN_POLICY_FILE", &path)], true).await;
    let peer = server.peer();

    // run_script may run and write; asked for as a task it answers plainly,
    // since this caller could never read a task's result.
    let script = json!({"script": "write_artifact(\"a.txt\", \"secret\"); 1", "timeout_seconds": 30});
    let mut meta = serde_json::Map::new();
    meta.insert("warden/task".into(), Value::Bool(true));
    let answer = peer
        .call_tool_once(call_params("run_script", script, Some(Value::Object(meta))))
        .await
        .expect("tools/call answered");
    let CallToolResponse::Complete(result) = answer else {
        panic!("a task this caller could never read: {answer:?}")
    };
    let result = structured(&result);
    assert_eq!(result["status"], "success", "{result}");
    let task_id = result["task_id"].as_str().expect("task id").to_string();

    for uri in [
        format!("warden://artifacts/{task_id}/outputs/a.txt"),
        "ui://warden/task.html".to_string(),
    ] {
        let error = peer
            .read_resource(ReadResourceRequestParams::new(uri.clone()))
            .await
            .expect_err("resources/read follows read_artifact");
        let (_, message) = rpc_error(error);
        assert!(
            message.contains("read_artifact") && message.contains("rule 1 (\"write only\")"),
            "{uri}: {message}"
        );
        assert!(
            !message.contains(&path) && !message.contains("secret"),
            "{message}"
        );
    }
    let error = get_task(peer, &task_id)
        .await
        .expect_err("tasks/get follows get_task_result");
    let (_, message) = rpc_error(error);
    assert!(
        message.contains("get_task_result") && message.contains("rule 1 (\"write only\")"),
        "{message}"
    );
    assert!(!message.contains(&path), "{message}");
}

/// Denies `local` run_script, after the fact.
const NO_SCRIPTS: &str = r#"
[[rules]]
name = "scripts are off"
principals = ["local"]
deny = ["run_script"]
"#;

#[tokio::test]
async fn a_task_queued_while_allowed_is_judged_by_the_policy_in_force_when_it_is_claimed() {
    // One task slot, held by an endless task; a second task waits queued. The
    // server dies; the next one starts under a policy denying run_script: the
    // queued task ends failed naming the rule, and its script never ran.
    let dir = tempfile::tempdir().expect("temp dir");
    let slots = ("WARDEN_MAX_CONCURRENT_TASKS", "1");
    let mut first = StdioServer::start(FINANCE, dir.path(), &[slots], true).await;
    let holder = start_task(
        first.peer(),
        "run_script",
        json!({"script": ENDLESS, "timeout_seconds": 60}),
        None,
    )
    .await
    .task
    .task_id;
    assert!(
        eventually(Duration::from_secs(10), || !children_of(first.pid).is_empty()).await,
        "the holder never started"
    );
    let queued = start_task(
        first.peer(),
        "run_script",
        json!({"script": "write_artifact(\"ran.txt\", \"it ran\"); 1", "timeout_seconds": 30}),
        None,
    )
    .await
    .task
    .task_id;
    let pid = first.pid;
    let workers: Vec<Seen> = children_of(pid).into_iter().filter_map(Seen::now).collect();
    first.kill().await;
    for worker in workers {
        worker.kill();
    }

    let (_policy, path) = policy_file(NO_SCRIPTS);
    let second = StdioServer::start(FINANCE, dir.path(), &[slots, ("WARDEN_POLICY_FILE", &path)], true).await;
    let answers = poll_until_ended(second.peer(), &queued, Duration::from_secs(30)).await;
    let last = wire(answers.last().expect("an answer"));
    let result = &last["result"];
    assert_eq!(result["isError"], true, "{last}");
    let content = &result["structuredContent"];
    assert_eq!(content["status"], "failed", "{last}");
    assert_eq!(content["error"]["kind"], "forbidden", "{last}");
    let message = content["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("rule 1 (\"scripts are off\")"), "{last}");
    assert!(!message.contains(&path), "{last}");
    assert!(
        !dir.path().join(&queued).join("outputs/ran.txt").exists(),
        "the refused task ran"
    );
    let events = events_until(&dir.path().join("events.jsonl"), |records| {
        records
            .iter()
            .any(|r| r["event"] == "request_finished" && r["task_id"] == queued.as_str())
    })
    .await;
    let mine: Vec<&Value> = events
        .iter()
        .filter(|r| r["task_id"] == queued.as_str())
        .collect();
    assert!(
        mine.iter()
            .any(|r| r["event"] == "request_rejected" && r["reason"] == "forbidden"),
        "{mine:?}"
    );
    assert!(
        mine.iter().any(|r| r["event"] == "request_finished"
            && r["status"] == "failed"
            && r["error_type"] == "forbidden"),
        "{mine:?}"
    );
    let _ = holder;
}
