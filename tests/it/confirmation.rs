//! Nothing runs a destructive guard without the person (issue 38, points
//! 1–4 and 10): `verify_receipt` and `check_backtest` never run one, the
//! confirmation form shows every argument and their hash or is not sent,
//! an approval covers the call it was given for, and receipts hash
//! integers beyond 2^53 exactly.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientRequest};
use rmcp::service::{PeerRequestOptions, RoleClient, RunningService};
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::common::approver::Approver;
use crate::common::*;

/// The testbed over stdio with `person` as its client.
async fn with_person(person: Approver) -> (RunningService<RoleClient, Approver>, tempfile::TempDir) {
    let artifacts = tempfile::tempdir().expect("temp dir");
    let mut command = tokio::process::Command::new(TESTBED);
    command.env("WARDEN_ARTIFACTS_DIR", artifacts.path());
    let transport = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn")
        .0;
    let client = person.serve(transport).await.expect("initialize");
    (client, artifacts)
}

async fn call(client: &RunningService<RoleClient, Approver>, tool: &str, arguments: Value) -> Value {
    let Value::Object(arguments) = arguments else {
        panic!("object arguments")
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments))
        .await
        .expect("answered");
    structured(&result)
}

/// `sha256:` and the hex SHA-256 of `bytes`.
/// A `run_script` that wipes the ledger: a destructive call the person is
/// asked about, for the tests that cancel it while the form is open.
fn wipe_ledger() -> ClientRequest {
    let Value::Object(arguments) = json!({"script": r#"wipe_scratch(#{record: "ledger"}).result"#}) else {
        panic!("object arguments")
    };
    ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new("run_script").with_arguments(arguments),
    ))
}

fn sha256(bytes: &[u8]) -> String {
    let digest = sha2::Sha256::digest(bytes);
    format!(
        "sha256:{}",
        digest.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// The server still answers, and its events show that `wipe_scratch` never started.
async fn serves_on_without_having_wiped(server: &Server) {
    let after = structured(&server.call("add_pure", json!({"a": 1, "b": 2})).await);
    assert_eq!(after["result"], 3.0, "{after}");
    let events = server
        .events_until(|r| {
            r.iter()
                .any(|e| e["tool"] == "add_pure" && e["event"] == "request_finished")
        })
        .await;
    assert!(!started(&events, "wipe_scratch"), "wipe_scratch ran");
}

/// Whether the events show `guard` starting.
fn started(events: &[Value], guard: &str) -> bool {
    events
        .iter()
        .any(|e| e["event"] == "function_call_started" && e["function"] == guard)
}

#[tokio::test]
async fn verify_receipt_never_recomputes_a_destructive_guard() {
    // A receipt written by hand for wipe_scratch, with matching arguments: not run, and the verdict says why.
    let server = Server::start(TESTBED).await;
    let arguments = json!({"record": "ledger"});
    let receipt = json!({"guard": "wipe_scratch",
                         "arguments_sha256": sha256(br#"{"record":"ledger"}"#),
                         "output_sha256": format!("sha256:{}", "0".repeat(64))});
    let answer = structured(
        &server
            .call(
                "verify_receipt",
                json!({"receipt": receipt, "arguments": arguments}),
            )
            .await,
    );
    assert_eq!(answer["verdict"], "not_recomputable", "{answer}");
    assert!(
        answer["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("annotated destructive"),
        "{answer}"
    );
    assert_eq!(
        answer["arguments_sha256"]["recomputed"],
        receipt["arguments_sha256"]
    );
    // The server goes on serving, and the guard never started.
    serves_on_without_having_wiped(&server).await;
}

#[tokio::test]
async fn check_backtest_runs_only_read_only_guards() {
    // A bundle whose slot feeds the destructive guards: named in not_read_only, never run.
    let server = Server::start(TESTBED).await;
    let answer = structured(
        &server
            .call("check_backtest", json!({"slots": {"record": "ledger"}}))
            .await,
    );
    assert_eq!(
        answer["not_read_only"],
        json!(["wipe_scratch", "wipe_scratch_slowly"]),
        "{answer}"
    );
    assert!(answer["results"].get("wipe_scratch").is_none(), "{answer}");
    assert!(answer["results"].get("wipe_scratch_slowly").is_none(), "{answer}");
    assert!(
        !answer["ran"].as_array().is_some_and(|ran| ran
            .iter()
            .any(|g| g.as_str().is_some_and(|g| g.starts_with("wipe_scratch")))),
        "{answer}"
    );
    serves_on_without_having_wiped(&server).await;
}

#[tokio::test]
async fn the_form_shows_every_argument_and_their_hash_or_is_not_sent() {
    let person = Approver::default();
    let (client, dir) = with_person(person.clone()).await;
    // An early key padded to 1,000 characters: the record still shows, with the hash of all of them.
    let padded = r#"let pad = ""; for i in 0..100 { pad += "aaaaaaaaaa"; }
                    wipe_scratch(#{note: pad, record: "ledger-7"}).result"#;
    let ran = call(
        &client,
        "run_script",
        json!({"script": padded, "timeout_seconds": 20}),
    )
    .await;
    assert_eq!(ran["value"], "wiped ledger-7", "{ran}");
    let forms = person.forms();
    assert_eq!(forms.len(), 1, "{forms:?}");
    let canonical = format!(r#"{{"note":"{}","record":"ledger-7"}}"#, "a".repeat(1000));
    let hash = sha256(canonical.as_bytes());
    assert!(forms[0].contains("\"record\": \"ledger-7\""), "{}", forms[0]);
    assert!(forms[0].contains(&"a".repeat(1000)), "the whole note is shown");
    assert!(forms[0].contains(&hash), "{}", forms[0]);
    let events = events_until(&dir.path().join("events.jsonl"), |r| {
        r.iter().any(|e| e["event"] == "destructive_call_confirmed")
    })
    .await;
    let confirmed: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "destructive_call_confirmed")
        .collect();
    assert_eq!(confirmed[0]["arguments_sha256"], hash, "{confirmed:?}");

    // Padded past the form's limit: no form is sent, the call is refused naming the limit, nothing runs.
    let hidden = r#"let pad = ""; for i in 0..500 { pad += "aaaaaaaaaa"; }
                    let out = ""; try { out = wipe_scratch(#{note: pad, record: "ledger-9"}).result; }
                    catch (e) { out = e.code + ": " + e.message; } out"#;
    let refused = call(
        &client,
        "run_script",
        json!({"script": hidden, "timeout_seconds": 20}),
    )
    .await;
    let said = refused["value"].as_str().unwrap_or_default();
    assert!(
        said.starts_with("forbidden:") && said.contains("4096-byte limit"),
        "{refused}"
    );
    assert_eq!(person.forms().len(), 1, "no second form was sent");
    let events = events_until(&dir.path().join("events.jsonl"), |r| {
        r.iter()
            .filter(|e| e["event"] == "destructive_call_confirmed")
            .count()
            >= 2
    })
    .await;
    let runs = events
        .iter()
        .filter(|e| e["event"] == "function_call_started" && e["function"] == "wipe_scratch")
        .count();
    assert_eq!(runs, 1, "only the approved call ran");
}

#[tokio::test]
async fn approvals_and_receipts_tell_integers_beyond_two_to_the_53_apart() {
    // 2^53 + 1 and 2^53 are one double: the receipts (and so approvals) still differ.
    let server = Server::start(TESTBED).await;
    let receipt_of = |count: u64| {
        let server = &server;
        async move {
            let Value::Object(arguments) = json!({"record": "r", "count": count}) else {
                panic!("object arguments")
            };
            let mut meta = rmcp::model::RequestMetaObject::default();
            meta.insert("warden/receipt".into(), json!(true));
            let mut params = CallToolRequestParams::new("wipe_scratch").with_arguments(arguments);
            params.meta = Some(meta);
            let result = server.client.call_tool(params).await.expect("answered");
            let meta = result.meta.as_ref().expect("result _meta");
            meta.0["warden/receipt"]["arguments_sha256"].clone()
        }
    };
    let odd = receipt_of(9_007_199_254_740_993).await;
    let even = receipt_of(9_007_199_254_740_992).await;
    assert!(odd.is_string(), "{odd}");
    assert_ne!(odd, even);
    assert_eq!(odd, json!(sha256(br#"{"count":9007199254740993,"record":"r"}"#)));
}

#[tokio::test]
async fn a_refusal_names_why_nobody_can_be_asked() {
    // The CLI, a client without elicitation and a batch each get the reason that holds for them.
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("wipe.rhai");
    std::fs::write(
        &script,
        r#"let out = ""; try { wipe_scratch(#{record: "ledger"}); } catch (e) { out = e.message; } out"#,
    )
    .expect("script file");
    let artifacts = dir.path().join("artifacts");
    let artifacts = artifacts.to_str().expect("utf-8");
    let run = run_cli(
        TESTBED,
        &["script", script.to_str().expect("utf-8")],
        &[("WARDEN_ARTIFACTS_DIR", artifacts)],
        dir.path(),
    );
    assert!(run.stdout.contains("started from the command line"), "{run:?}");
    assert!(!run.stdout.contains("detached"), "{run:?}");

    let server = Server::start(TESTBED).await;
    let answer = structured(
        &server
            .call(
                "run_script",
                json!({"script": r#"let out = ""; try { wipe_scratch(#{record: "ledger"}); } catch (e) { out = e.message; } out"#}),
            )
            .await,
    );
    let said = answer["value"].as_str().unwrap_or_default();
    assert!(
        said.contains("did not declare the elicitation capability"),
        "{answer}"
    );
    let batch = structured(
        &server
            .call(
                "run_batch",
                json!({"calls": [{"name": "wipe_scratch", "arguments": {"record": "ledger"}}]}),
            )
            .await,
    );
    assert!(
        batch["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("did not declare the elicitation capability"),
        "{batch}"
    );
    // Refused as the script's call is: forbidden, not a problem with the input.
    assert_eq!(batch["error"]["code"], "forbidden", "{batch}");
}

#[tokio::test]
async fn cancelling_a_script_while_the_person_is_asked_withdraws_the_form_and_runs_nothing() {
    // The person answers yes only after the request was cancelled: the form is withdrawn, the
    // late yes runs nothing, the task is recorded cancelled, and the server serves on.
    let person = Approver::slow(Duration::from_secs(20));
    let (client, dir) = with_person(person.clone()).await;
    let pending = client
        .send_cancellable_request(wipe_ledger(), PeerRequestOptions::no_options())
        .await
        .expect("sent");
    assert!(
        eventually(Duration::from_secs(10), || person.forms().len() == 1).await,
        "the form never came"
    );
    pending
        .cancel(Some("the person changed their mind".into()))
        .await
        .expect("cancelled");
    assert!(
        eventually(Duration::from_secs(5), || person.withdrawn() == 1).await,
        "the server did not withdraw the form"
    );
    let events = events_until(&dir.path().join("events.jsonl"), |r| {
        r.iter().any(|e| e["event"] == "destructive_call_confirmed")
            && r.iter()
                .any(|e| e["event"] == "request_finished" && e["tool"] == "run_script")
    })
    .await;
    let confirmed = events
        .iter()
        .find(|e| e["event"] == "destructive_call_confirmed")
        .expect("recorded");
    assert_eq!(confirmed["approved"], false, "{confirmed}");
    assert_eq!(confirmed["action"], "cancelled", "{confirmed}");
    let tasks = call(&client, "list_tasks", json!({})).await;
    assert_eq!(tasks["tasks"][0]["status"], "cancelled", "{tasks}");
    // The server still answers, and wipe_scratch never started.
    let after = call(&client, "add_pure", json!({"a": 1, "b": 2})).await;
    assert_eq!(after["result"], 3.0, "{after}");
    let events = events_until(&dir.path().join("events.jsonl"), |r| {
        r.iter()
            .any(|e| e["tool"] == "add_pure" && e["event"] == "request_finished")
    })
    .await;
    assert!(!started(&events, "wipe_scratch"), "wipe_scratch ran");
}

#[tokio::test]
async fn a_client_that_takes_no_forms_is_sent_none() {
    // Declaring only URL-mode elicitation: no confirmation form is sent, the refusal says what
    // to declare, and nothing runs.
    let person = Approver::url_only();
    let (client, _dir) = with_person(person.clone()).await;
    let ran = call(
        &client,
        "run_script",
        json!({"script": r#"let out = ""; try { wipe_scratch(#{record: "ledger"}); } catch (e) { out = e.message; } out"#}),
    )
    .await;
    let said = ran["value"].as_str().unwrap_or_default();
    assert!(
        said.contains("did not declare the elicitation capability for forms"),
        "{ran}"
    );
    assert!(person.forms().is_empty(), "a form was sent");
}

/// The finance server (its own ledger in `dir`) over raw stdio, initialized
/// by a client that takes forms: for what rmcp's client hides (request ids).
struct RawClient {
    _child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl RawClient {
    async fn finance_with_forms(dir: &std::path::Path) -> Self {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(FINANCE)
            .env("WARDEN_ARTIFACTS_DIR", dir.join("artifacts"))
            .env("WARDEN_FINANCE_LEDGER", dir.join("ledger.jsonl"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the server");
        let stdin = child.stdin.take().expect("piped stdin");
        let lines = tokio::io::BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let mut client = Self {
            _child: child,
            stdin,
            lines,
        };
        client
            .send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {}}, "clientInfo": {"name": "raw", "version": "0"}}}))
            .await;
        assert_eq!(client.next().await["id"], 0, "the initialize answer");
        client
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        client
    }

    async fn send(&mut self, message: Value) {
        use tokio::io::AsyncWriteExt;
        self.stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .expect("write");
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
            .await
            .expect("a line in time")
            .expect("read")
            .expect("a line");
        serde_json::from_str(&line).expect("JSON")
    }
}

#[tokio::test]
async fn the_servers_own_requests_are_numbered_from_1_and_their_answers_and_withdrawals_match() {
    // The TypeScript SDK 1.x ignores a cancellation of request 0 (its #2283), so a session's first
    // form stayed on screen once withdrawn: on the wire the server's requests start at 1, the
    // client's answer with that id is the one taken, and a withdrawal names the same id.
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger_path = dir.path().join("ledger.jsonl");
    let mut client = RawClient::finance_with_forms(dir.path()).await;
    let order = |id: &str| json!({"script": format!(r#"place_paper_order(#{{symbol: "AAPL", side: "buy", quantity: 1, client_order_id: "{id}"}})"#)});

    // The first form: id 1, and the answer sent back with id 1 places the order.
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "run_script", "arguments": order("first")}}))
        .await;
    let form = client.next().await;
    assert_eq!(form["method"], "elicitation/create", "{form}");
    assert_eq!(form["id"], 1, "the server's first request is 1, never 0: {form}");
    client.send(json!({"jsonrpc": "2.0", "id": form["id"], "result": {"action": "accept", "content": {"confirm": true}}})).await;
    let answer = client.next().await;
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(
        answer["result"]["structuredContent"]["status"], "success",
        "{answer}"
    );

    // The second form is withdrawn when its call is cancelled: the withdrawal names its id.
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "run_script", "arguments": order("second")}}))
        .await;
    let form = client.next().await;
    assert_eq!(form["method"], "elicitation/create", "{form}");
    assert_eq!(form["id"], 2, "{form}");
    client
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}))
        .await;
    let withdrawn = client.next().await;
    assert_eq!(withdrawn["method"], "notifications/cancelled", "{withdrawn}");
    assert_eq!(withdrawn["params"]["requestId"], form["id"], "{withdrawn}");
    let placed = std::fs::read_to_string(&ledger_path).unwrap_or_default();
    assert_eq!(placed.lines().count(), 1, "only the first order: {placed}");
}

#[tokio::test]
async fn over_an_http_session_a_withdrawn_form_reaches_the_client_that_shows_it() {
    // The server's cancellation of its own form goes where the form went (the stream of the
    // call that asked), numbered as the form was: the client's form is withdrawn, not left open.
    let server = crate::common::http::HttpServer::start(TESTBED, &[]).await;
    let person = Approver::slow(Duration::from_secs(20));
    let client = server
        .client_with(
            person.clone(),
            None,
            rmcp::service::ClientLifecycleMode::Initialize,
        )
        .await
        .expect("session");
    for round in 1..=2 {
        // The client's requests outnumber the server's: ids in the two spaces differ.
        client.list_tools(None).await.expect("tools/list");
        let pending = client
            .send_cancellable_request(wipe_ledger(), PeerRequestOptions::no_options())
            .await
            .expect("sent");
        assert!(
            eventually(Duration::from_secs(10), || person.forms().len() == round).await,
            "form {round} never came"
        );
        pending
            .cancel(Some("changed my mind".into()))
            .await
            .expect("cancelled");
        assert!(
            eventually(Duration::from_secs(5), || person.withdrawn() == round).await,
            "form {round} was not withdrawn"
        );
    }
}

#[tokio::test]
async fn an_answer_racing_the_cancellation_leaves_records_that_match_the_ledger() {
    // The person's yes and the client's cancellation arrive together, 64 times, 0–1.5 ms apart:
    // an order may or may not be placed, but whatever happened, the task's
    // function_calls.json says so (an order placed is a success record). The records of a
    // destructive call are synced to disk as it begins and as it settles, which widened two
    // windows in which the run could end and close its records around a call still running.
    let dir = tempfile::tempdir().expect("temp dir");
    let artifacts = dir.path().join("artifacts");
    let ledger_path = dir.path().join("ledger.jsonl");
    let mut client = RawClient::finance_with_forms(dir.path()).await;
    let trials = 64;
    for trial in 0..trials {
        let id = trial + 1;
        let script = format!(
            r#"place_paper_order(#{{symbol: "AAPL", side: "buy", quantity: 1, client_order_id: "race-{trial}"}})"#
        );
        client
            .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                     "params": {"name": "run_script", "arguments": {"script": script}}}))
            .await;
        // Until its form (an earlier call's late answer or withdrawal may come first).
        let form = loop {
            let message = client.next().await;
            if message["method"] == "elicitation/create" {
                break message;
            }
        };
        client.send(json!({"jsonrpc": "2.0", "id": form["id"], "result": {"action": "accept", "content": {"confirm": true}}}))
            .await;
        tokio::time::sleep(Duration::from_micros(100 * (trial as u64 % 16))).await;
        client
            .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}))
            .await;
    }
    // Every task, once its files are whole (its result is its commit)...
    let mut tasks = Vec::new();
    for entry in std::fs::read_dir(&artifacts).expect("artifacts").flatten() {
        let task = entry.path();
        let Ok(source) = std::fs::read_to_string(task.join("agent_actions/action_001.rhai")) else {
            continue;
        };
        let Some(order) = (0..trials)
            .map(|t| format!("race-{t}"))
            .find(|o| source.contains(&format!("\"{o}\"")))
        else {
            continue;
        };
        assert!(
            eventually(Duration::from_secs(10), || task.join("result.json").exists()).await,
            "{order}: no result"
        );
        tasks.push((order, task));
    }
    assert_eq!(tasks.len(), trials, "a task per trial");
    // ...against the ledger, order by order.
    let placed = std::fs::read_to_string(&ledger_path).unwrap_or_default();
    let mut disagree = Vec::new();
    for (order, task) in tasks {
        let calls: Value = serde_json::from_str(
            &std::fs::read_to_string(task.join("function_calls.json")).unwrap_or_default(),
        )
        .unwrap_or(Value::Null);
        let recorded = calls.as_array().is_some_and(|c| {
            c.iter()
                .any(|r| r["function"] == "place_paper_order" && r["status"] == "success")
        });
        let in_ledger = placed.contains(&format!("\"{order}\""));
        if recorded != in_ledger {
            disagree.push((order, in_ledger, calls));
        }
    }
    assert!(disagree.is_empty(), "records and ledger disagree: {disagree:?}");
}
