//! Receipts (issue 28): the hashes of a known call match hashes computed
//! here with a second RFC 8785 implementation (`serde_jcs`) and `sha2`;
//! one changed argument changes them; a direct call, a batch and a
//! script's inline call of the same guard on the same arguments give the
//! same hashes; a task's receipt covers its script, every call and every
//! artifact.

use rmcp::model::{CallToolRequestParams, CallToolResult, RequestMetaObject};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::*;

/// `sha256:` and the hex SHA-256 of `value` canonicalized by serde_jcs.
fn expected_digest(value: &Value) -> String {
    let canonical = serde_jcs::to_vec(value).expect("canonical JSON");
    sha256(&canonical)
}

fn sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn implied_vol_args(price: f64) -> Value {
    json!({"option_type": "call", "price": price, "spot": 100.0, "strike": 105,
           "time_to_expiry": 0.5, "rate": 0.03})
}

/// A direct call with `_meta: {"warden/receipt": true}`.
async fn call_with_receipt(server: &Server, tool: &str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("object arguments")
    };
    let mut meta = RequestMetaObject::default();
    meta.insert("warden/receipt".into(), json!(true));
    let mut params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
    params.meta = Some(meta);
    server
        .client
        .call_tool(params)
        .await
        .expect("tools/call answered")
}

fn receipt_of(result: &CallToolResult) -> Value {
    let meta = result.meta.as_ref().expect("result _meta");
    meta.0.get("warden/receipt").cloned().expect("a receipt in _meta")
}

#[tokio::test]
async fn a_direct_call_receipt_matches_independent_hashes_and_tracks_its_arguments() {
    let server = Server::start(FINANCE).await;
    let arguments = implied_vol_args(4.0);
    let result = call_with_receipt(&server, "implied_volatility", arguments.clone()).await;
    let output = structured(&result);
    let receipt = receipt_of(&result);
    assert_eq!(receipt["format"], "warden.call-receipt/1", "{receipt}");
    assert_eq!(receipt["guard"], "implied_volatility");
    assert_eq!(receipt["app"]["name"], "warden-finance");
    assert_eq!(receipt["execution"], "pure");
    assert!(receipt["warden_version"].as_str().is_some_and(|v| !v.is_empty()));
    // The build is the SHA-256 of the server executable itself.
    let binary = std::fs::read(FINANCE).expect("server binary");
    assert_eq!(receipt["build"], sha256(&binary));
    assert_eq!(receipt["arguments_sha256"], expected_digest(&arguments));
    assert_eq!(receipt["output_sha256"], expected_digest(&output));

    // Spelling does not matter (key order, 105 vs 105.0); values do.
    let respelled = json!({"rate": 0.03, "time_to_expiry": 0.5, "strike": 105.0, "spot": 100,
                           "price": 4.0, "option_type": "call"});
    let again = receipt_of(&call_with_receipt(&server, "implied_volatility", respelled).await);
    assert_eq!(again["arguments_sha256"], receipt["arguments_sha256"]);
    assert_eq!(again["output_sha256"], receipt["output_sha256"]);
    let changed = receipt_of(&call_with_receipt(&server, "implied_volatility", implied_vol_args(4.5)).await);
    assert_ne!(changed["arguments_sha256"], receipt["arguments_sha256"]);
    assert_ne!(changed["output_sha256"], receipt["output_sha256"]);

    // Without the request, the result is what it always was.
    let plain = server.call("implied_volatility", arguments).await;
    assert!(plain.meta.is_none(), "{plain:?}");
    // A malformed request names the key.
    let Value::Object(arguments) = implied_vol_args(4.0) else {
        unreachable!()
    };
    let mut meta = RequestMetaObject::default();
    meta.insert("warden/receipt".into(), json!("yes"));
    let mut params = CallToolRequestParams::new("implied_volatility").with_arguments(arguments);
    params.meta = Some(meta);
    let refused = server.client.call_tool(params).await.expect_err("refused");
    assert!(refused.to_string().contains("warden/receipt"), "{refused}");
}

#[tokio::test]
async fn batch_and_script_calls_carry_the_same_hashes_as_a_direct_call() {
    let server = Server::start(FINANCE).await;
    let direct = receipt_of(&call_with_receipt(&server, "implied_volatility", implied_vol_args(4.0)).await);
    let isolated_args = json!({"option_type": "put", "spot": 100.0, "strike": 95.0, "time_to_expiry": 0.25,
                               "volatility": 0.3, "rate": 0.01});
    let isolated = call_with_receipt(&server, "price_option_t", isolated_args.clone()).await;
    let isolated_output = structured(&isolated);
    let isolated = receipt_of(&isolated);
    assert_eq!(isolated["execution"], "isolated");
    assert_eq!(isolated["output_sha256"], expected_digest(&isolated_output));

    // run_batch with receipt: true, and digits shaping only what is returned.
    let batch = server
        .call(
            "run_batch",
            json!({"receipt": true, "digits": 3, "calls": [
                {"name": "implied_volatility", "arguments": implied_vol_args(4.0)},
                {"name": "price_option_t", "arguments": isolated_args}
            ]}),
        )
        .await;
    let batch = structured(&batch);
    for (i, expected) in [&direct, &isolated].into_iter().enumerate() {
        let receipt = &batch["calls"][i]["receipt"];
        assert_eq!(
            receipt["arguments_sha256"], expected["arguments_sha256"],
            "{batch}"
        );
        assert_eq!(receipt["output_sha256"], expected["output_sha256"], "{batch}");
    }
    let plain = structured(
        &server
            .call(
                "run_batch",
                json!({"calls": [{"name": "implied_volatility", "arguments": implied_vol_args(4.0)}]}),
            )
            .await,
    );
    assert!(plain["calls"][0].get("receipt").is_none(), "{plain}");

    // A script: an inline pure call and an isolated call through the door.
    let script = r#"
let a = #{option_type: "call", price: 4.0, spot: 100.0, strike: 105, time_to_expiry: 0.5, rate: 0.03};
let v = implied_volatility(a);
let p = price_option_t(#{option_type: "put", spot: 100.0, strike: 95.0, time_to_expiry: 0.25, volatility: 0.3, rate: 0.01});
write_artifact("out.txt", `vol ${v.volatility}`);
v.volatility
"#;
    let result = structured(
        &server
            .call("run_script", json!({"script": script, "timeout_seconds": 30}))
            .await,
    );
    assert_eq!(result["status"], "success", "{result}");
    let task_id = result["task_id"].as_str().expect("task id");
    let dir = server.artifacts.path().join(task_id);
    let calls: Vec<Value> =
        serde_json::from_slice(&std::fs::read(dir.join("function_calls.json")).expect("function_calls.json"))
            .expect("json");
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0]["execution"], "pure_inline");
    for (call, expected) in calls.iter().zip([&direct, &isolated]) {
        assert_eq!(call["arguments_sha256"], expected["arguments_sha256"], "{call}");
        assert_eq!(call["output_sha256"], expected["output_sha256"], "{call}");
    }

    // The task receipt: the script's hash, the calls' digest recomputed
    // from function_calls.json, every artifact's hash and size.
    let receipt = &result["receipt"];
    assert_eq!(receipt["format"], "warden.task-receipt/1", "{result}");
    assert_eq!(receipt["scripts"][0]["path"], "agent_actions/action_001.rhai");
    assert_eq!(receipt["scripts"][0]["sha256"], sha256(script.as_bytes()));
    assert_eq!(receipt["calls"], 2);
    let mut lines = Vec::new();
    for call in &calls {
        let line = json!([
            call["function"],
            call["status"],
            call["arguments_sha256"],
            call["output_sha256"]
        ]);
        lines.extend(serde_json::to_vec(&line).expect("line"));
        lines.push(b'\n');
    }
    assert_eq!(receipt["calls_sha256"], sha256(&lines));
    let artifact = std::fs::read(dir.join("outputs/out.txt")).expect("artifact");
    assert_eq!(
        receipt["artifacts"],
        json!([{"path": "outputs/out.txt", "sha256": sha256(&artifact), "size": artifact.len()}])
    );
}

#[tokio::test]
async fn verify_receipt_recomputes_a_call_and_names_what_differs() {
    let server = Server::start(FINANCE).await;
    let arguments = json!({"option_type": "put", "spot": 100.0, "strike": 95.0, "time_to_expiry": 0.25,
                           "volatility": 0.3, "rate": 0.01});
    let receipt = receipt_of(&call_with_receipt(&server, "price_option_t", arguments.clone()).await);
    let verify = |receipt: Value, arguments: Value| {
        let server = &server;
        async move {
            structured(
                &server
                    .call(
                        "verify_receipt",
                        json!({"receipt": receipt, "arguments": arguments}),
                    )
                    .await,
            )
        }
    };
    let same = verify(receipt.clone(), arguments.clone()).await;
    assert_eq!(same["verdict"], "identical", "{same}");
    assert_eq!(same["differences"], json!([]), "{same}");
    assert!(same.get("output").is_none());

    // A receipt whose output another implementation made: both hashes and
    // the value recomputed here; a different build is named.
    let mut other = receipt.clone();
    other["output_sha256"] = json!(format!("sha256:{}", "0".repeat(64)));
    other["build"] = json!("sha256:elsewhere");
    let differs = verify(other, arguments.clone()).await;
    assert_eq!(differs["verdict"], "output_differs", "{differs}");
    assert_eq!(differs["output_sha256"]["recomputed"], receipt["output_sha256"]);
    assert!(differs["output"]["result"].is_number(), "{differs}");
    assert_eq!(differs["differences"][0]["field"], "build", "{differs}");

    // Other arguments than the receipt's: nothing runs.
    let mut changed = arguments.clone();
    changed["spot"] = json!(101.0);
    let refused = verify(receipt.clone(), changed).await;
    assert_eq!(refused["verdict"], "arguments_differ", "{refused}");
    assert!(refused.get("output_sha256").is_none());

    // An unknown guard names the field.
    let mut unknown = receipt;
    unknown["guard"] = json!("no_such_guard");
    let error = structured(
        &server
            .call(
                "verify_receipt",
                json!({"receipt": unknown, "arguments": arguments}),
            )
            .await,
    );
    assert_eq!(error["error"]["field"], "receipt.guard", "{error}");
}

/// A script with inline, in-process and isolated calls, a CSV artifact and
/// a final value; `rounds` in-process calls in a loop.
fn replay_script(rounds: usize) -> String {
    format!(
        r#"
let rows = [];
for i in 0..{rounds} {{
  let s = add_in_process(#{{a: i, b: 0.5}});
  rows.push(#{{i: i, sum: s.result}});
}}
let v = implied_volatility(#{{option_type: "call", price: 4.0, spot: 100.0, strike: 105, time_to_expiry: 0.5, rate: 0.03}});
let p = price_option_t(#{{option_type: "put", spot: 100.0, strike: 95.0, time_to_expiry: 0.25, volatility: 0.3, rate: 0.01}});
write_artifact("sums.csv", to_csv(rows));
rows.len() + v.iterations
"#
    )
}

#[tokio::test]
async fn a_replay_is_identical_and_finds_the_first_difference_after_a_guard_changes() {
    let first = Server::start(TESTBED).await;
    let script = replay_script(20);
    let result = structured(
        &first
            .call("run_script", json!({"script": script, "timeout_seconds": 60}))
            .await,
    );
    assert_eq!(result["status"], "success", "{result}");
    let task_id = result["task_id"].as_str().expect("task id").to_string();

    let same = structured(&first.call("replay_task", json!({"task_id": task_id})).await);
    assert_eq!(same["verdict"], "identical", "{same}");
    assert_eq!(same["calls"], json!({"original": 22, "replay": 22}), "{same}");
    assert!(same.get("first_difference").is_none(), "{same}");
    let replay_id = same["replay_task_id"].as_str().expect("replay task id");
    assert_ne!(replay_id, task_id);

    // Another principal's view is covered by the tenants tests' rule: here,
    // an unknown id answers as one.
    let unknown = structured(&first.call("replay_task", json!({"task_id": "task_nope"})).await);
    assert_eq!(unknown["error"]["code"], "not_found", "{unknown}");
    let artifacts = first.artifacts.path().to_path_buf();

    // The same task store under a server whose add_in_process changed
    // (the first server stays up: its temporary directory holds the store).
    let skewed = Server::start_with_env(
        TESTBED,
        &[
            ("WARDEN_ARTIFACTS_DIR", artifacts.to_str().expect("utf-8 path")),
            ("WARDEN_TESTBED_SKEW", "1"),
        ],
    )
    .await;
    let report = structured(&skewed.call("replay_task", json!({"task_id": task_id})).await);
    assert_eq!(report["verdict"], "different", "{report}");
    let difference = &report["first_difference"];
    assert_eq!(difference["kind"], "call", "{report}");
    assert_eq!(difference["index"], 0, "{report}");
    assert_eq!(difference["function"]["original"], "add_in_process");
    assert_eq!(
        difference["arguments_sha256"]["original"],
        difference["arguments_sha256"]["replay"]
    );
    assert_ne!(
        difference["output_sha256"]["original"],
        difference["output_sha256"]["replay"]
    );
    assert_eq!(
        difference["output_sha256"]["original"],
        expected_digest(&json!({"result": 0.5})),
        "the original output, hashed independently"
    );
    // The artifact and the calls' digest differ too: counted, and the
    // artifact's first differing line is given with both values.
    assert!(report["differences"].as_u64().is_some_and(|n| n >= 3), "{report}");
}

#[tokio::test]
async fn a_replay_refuses_what_it_cannot_replay_and_hides_other_principals_tasks() {
    let server = Server::start(FINANCE).await;
    let batch = structured(
        &server
            .call(
                "run_batch",
                json!({"calls": [{"name": "implied_volatility", "arguments": implied_vol_args(4.0)}]}),
            )
            .await,
    );
    assert_eq!(batch["status"], "success");
    let error = structured(&server.call("replay_task", json!({"task_id": "../etc"})).await);
    assert_eq!(error["status"], "failed", "{error}");
    // A task of another principal answers exactly as an unknown id: the
    // artifact store checks the owner (tests/it/tenants.rs covers the
    // HTTP principals); over stdio the principal is the local operator.
    let unknown = structured(
        &server
            .call("replay_task", json!({"task_id": "task_0123456789abcdef"}))
            .await,
    );
    assert_eq!(unknown["error"]["code"], "not_found", "{unknown}");
}

/// Issue 38, point 8: a replay runs under the original task's limits from
/// its receipt: a task that timed out at 1 s times out at 1 s again
/// (before, the replay ran under the server's maximum, 300 s).
#[tokio::test]
async fn a_replay_runs_under_the_original_tasks_deadline() {
    let server = Server::start(FINANCE).await;
    let result = structured(
        &server
            .call("run_script", json!({"script": ENDLESS, "timeout_seconds": 1}))
            .await,
    );
    assert_eq!(result["status"], "timed_out", "{result}");
    assert_eq!(
        result["receipt"]["limits"],
        json!({"timeout_ms": 1000, "door_calls": 10_000}),
        "{result}"
    );
    let task_id = result["task_id"].as_str().expect("task id");
    let started = std::time::Instant::now();
    let replay = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        server.call("replay_task", json!({"task_id": task_id})),
    )
    .await
    .expect("the replay ends at the original's 1 s deadline, not the server's maximum");
    let report = structured(&replay);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(report["replay_status"], "timed_out", "{report}");
    assert_eq!(report["limits_from"], "receipt", "{report}");
    assert_eq!(report["limits"]["timeout_ms"], 1000, "{report}");
    // No verdict asserted: both runs time out, but whether the worker
    // noticed its deadline or was killed first (the summary's wording)
    // depends on the machine's load.
    // The replay task's own receipt records the same limits.
    let replay_id = report["replay_task_id"].as_str().expect("replay task id");
    let saved: Value = serde_json::from_slice(
        &std::fs::read(server.artifacts.path().join(replay_id).join("result.json")).expect("result.json"),
    )
    .expect("json");
    assert_eq!(saved["receipt"]["limits"], result["receipt"]["limits"], "{saved}");
}

/// Issue 38, point 9: a script changed on disk after the task ran is not
/// run: the verdict is `script_differs`, naming the file and both hashes
/// (before, a change to a comment replayed as `identical`, and any change
/// ran). A removed script is named too, its file hash `null`.
#[tokio::test]
async fn a_replay_refuses_a_script_that_differs_from_the_receipt() {
    let server = Server::start(FINANCE).await;
    let script = "let x = 41;\nwrite_artifact(\"x.txt\", `${x}`);\nx + 1";
    let result = structured(
        &server
            .call("run_script", json!({"script": script, "timeout_seconds": 30}))
            .await,
    );
    assert_eq!(result["status"], "success", "{result}");
    let task_id = result["task_id"].as_str().expect("task id");
    let file = server
        .artifacts
        .path()
        .join(task_id)
        .join("agent_actions/action_001.rhai");
    let tasks_before = std::fs::read_dir(server.artifacts.path())
        .expect("artifacts")
        .count();

    // Only a comment added: the computation would be the same, the script is not.
    let altered = format!("// edited after the run\n{script}");
    std::fs::write(&file, &altered).expect("alter the script");
    let report = structured(&server.call("replay_task", json!({"task_id": task_id})).await);
    assert_eq!(report["verdict"], "script_differs", "{report}");
    assert_eq!(
        report["first_difference"],
        json!({"kind": "script", "path": "agent_actions/action_001.rhai",
               "receipt_sha256": sha256(script.as_bytes()), "file_sha256": sha256(altered.as_bytes())}),
        "{report}"
    );
    assert_eq!(report["differences"], 1, "{report}");
    assert!(report["replay_task_id"].is_null(), "{report}");
    assert_eq!(report["replay_status"], "not_run", "{report}");
    assert_eq!(
        std::fs::read_dir(server.artifacts.path())
            .expect("artifacts")
            .count(),
        tasks_before,
        "no replay task was created"
    );

    // Bytes that are not even text are named, not an error.
    std::fs::write(&file, b"\xff\xfe not utf-8").expect("alter the script");
    let report = structured(&server.call("replay_task", json!({"task_id": task_id})).await);
    assert_eq!(report["verdict"], "script_differs", "{report}");
    assert_eq!(
        report["first_difference"]["file_sha256"],
        sha256(b"\xff\xfe not utf-8"),
        "{report}"
    );

    // A removed script: its file hash is null.
    std::fs::remove_file(&file).expect("remove the script");
    let report = structured(&server.call("replay_task", json!({"task_id": task_id})).await);
    assert_eq!(report["verdict"], "script_differs", "{report}");
    assert!(report["first_difference"]["file_sha256"].is_null(), "{report}");

    // Restored byte for byte, it replays as before.
    std::fs::write(&file, script).expect("restore the script");
    let report = structured(&server.call("replay_task", json!({"task_id": task_id})).await);
    assert_eq!(report["verdict"], "identical", "{report}");
}
