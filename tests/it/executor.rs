//! The executor's promises: hard deadlines, cancellation, crash containment,
//! admission, and the event trail of each.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

#[tokio::test]
async fn isolated_timeout_kills_the_worker_and_its_child_at_the_deadline() {
    // slow_echo has a 5 s timeout: a 60 s sleep is answered at ~5 s and /proc shows nothing left.
    let server = Server::start(TESTBED).await;
    let marker = unique_marker();
    let started = Instant::now();
    let result = server
        .call("slow_echo", json!({"millis": 60_000, "child_marker": marker}))
        .await;
    let elapsed = started.elapsed();
    assert!(is_error(&result));
    assert_eq!(error_code(&result), "timed_out");
    assert_eq!(structured(&result)["status"], "timed_out");
    assert!(elapsed >= Duration::from_secs(5), "{elapsed:?}");
    // Client-side bound includes scheduling on a loaded CI box; the event's
    // own duration is the server's figure.
    assert!(
        elapsed < Duration::from_millis(5_500),
        "answered within 100 ms of the deadline: {elapsed:?}"
    );
    assert!(
        eventually(Duration::from_secs(2), || !marker_alive(marker)).await,
        "the worker's child survived"
    );
    assert!(
        eventually(Duration::from_secs(2), || server.workers().is_empty()).await,
        "worker survived"
    );
    let events = server
        .events_until(|r| r.iter().any(|e| e["event"] == "request_finished"))
        .await;
    let finished = events
        .iter()
        .find(|e| e["event"] == "function_call_finished")
        .unwrap();
    assert_eq!(finished["status"], "timed_out");
    assert_eq!(finished["error_type"], "timed_out");
}

#[tokio::test]
async fn cancelling_a_call_kills_its_worker() {
    // Dropping the client's call sends notifications/cancelled; the worker group dies.
    let server = Server::start(TESTBED).await;
    let marker = unique_marker();
    let call = server.call("slow_echo", json!({"millis": 30_000, "child_marker": marker}));
    let outcome = tokio::time::timeout(Duration::from_millis(800), call).await;
    assert!(
        outcome.is_err(),
        "the call should still be running when cancelled"
    );
    assert!(
        eventually(Duration::from_secs(3), || !marker_alive(marker)).await,
        "child survived cancel"
    );
    assert!(
        eventually(Duration::from_secs(3), || server.workers().is_empty()).await,
        "worker survived cancel"
    );
    let events = server
        .events_until(|r| r.iter().any(|e| e["event"] == "function_call_finished"))
        .await;
    let finished = events
        .iter()
        .find(|e| e["event"] == "function_call_finished")
        .unwrap();
    assert_eq!(finished["status"], "cancelled", "{finished}");
    // Still serving.
    assert!(!is_error(&server.call("price_option_t", call_args()).await));
}

#[tokio::test]
async fn crashing_guards_fail_cleanly_and_the_server_survives() {
    // panic, abort, running out of memory, a huge answer: each a clean failure with its own code.
    let server = Server::start(TESTBED).await;
    let cases = [
        ("panic", "guard_panicked"),
        ("abort", "worker_crashed"),
        ("oom", "worker_out_of_memory"),
        ("huge", "response_too_large"),
    ];
    for (how, code) in cases {
        let result = server.call("misbehave", json!({"how": how})).await;
        assert!(is_error(&result), "{how}");
        assert_eq!(error_code(&result), code, "{how}: {:?}", structured(&result));
        assert_eq!(structured(&result)["status"], "failed");
    }
    assert!(
        !is_error(&server.call("price_option_t", call_args()).await),
        "server alive"
    );
}

#[tokio::test]
async fn a_guard_printing_to_stdout_cannot_corrupt_the_protocol() {
    // Stray prints land in the diagnostics log, not in the MCP stream.
    let server = Server::start(TESTBED).await;
    let result = server.call("misbehave", json!({"how": "print"})).await;
    assert!(!is_error(&result), "{result:?}");
    assert_eq!(structured(&result)["result"], "printed");
    let logs = std::fs::read_dir(server.artifacts.path().join(".diagnostics/workers")).unwrap();
    let text: String = logs
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    assert!(
        text.contains("stray stdout from a guard"),
        "diagnostics log: {text}"
    );
}

#[tokio::test]
async fn a_burst_beyond_the_call_slots_is_rejected_as_busy() {
    // 2 slots, no admission wait: of 4 simultaneous slow calls, 2 run and 2 are told to retry.
    let server = Server::start_with_env(
        TESTBED,
        &[
            ("WARDEN_MAX_CONCURRENT_CALLS", "2"),
            ("WARDEN_ADMISSION_WAIT_MS", "0"),
        ],
    )
    .await;
    let calls = (0..4).map(|i| server.call("slow_echo", json!({"millis": 1500, "tag": format!("t{i}")})));
    let results = futures_join_all(calls).await;
    let busy: Vec<_> = results
        .iter()
        .filter(|r| error_code(r) == "server_busy")
        .collect();
    let ok = results.iter().filter(|r| !is_error(r)).count();
    assert_eq!((ok, busy.len()), (2, 2), "{results:?}");
    let message = structured(busy[0])["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.starts_with("Server busy; retry later"), "{message}");
    let events = server
        .events_until(|r| r.iter().filter(|e| e["event"] == "request_rejected").count() == 2)
        .await;
    let rejected: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "request_rejected")
        .collect();
    assert_eq!(rejected.len(), 2);
    assert_eq!(rejected[0]["reason"], "server_busy");
}

#[tokio::test]
async fn an_in_process_timeout_answers_and_frees_the_slot() {
    // A hung in-process call is answered timed_out at 1 s; its slot becomes an overdue permit.
    let server = Server::start(TESTBED).await;
    let started = Instant::now();
    let result = server.call("sleep_in_process", json!({"millis": 4000})).await;
    assert_eq!(error_code(&result), "timed_out");
    assert!(
        started.elapsed() < Duration::from_millis(1_300),
        "{:?}",
        started.elapsed()
    );
    // Both call slots are usable again while the thread still sleeps.
    let a = server.call("slow_echo", json!({"millis": 300}));
    let b = server.call("slow_echo", json!({"millis": 300}));
    let (a, b) = tokio::join!(a, b);
    assert!(!is_error(&a) && !is_error(&b), "{a:?} {b:?}");
}

#[tokio::test]
async fn every_direct_call_leaves_a_complete_event_trail() {
    // request_started → function_call_started → function_call_finished → request_finished, no values.
    let server = Server::start(FINANCE).await;
    server.call("price_option_t", call_args()).await;
    let events = server
        .events_until(|r| r.iter().any(|e| e["event"] == "request_finished"))
        .await;
    let names: Vec<&str> = events.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "request_started",
            "function_call_started",
            "function_call_finished",
            "request_finished"
        ]
    );
    let request_id = &events[0]["request_id"];
    for event in &events {
        assert_eq!(&event["request_id"], request_id);
        assert_eq!(event["mode"], "direct");
        assert_eq!(event["tool"], "price_option_t");
    }
    assert_eq!(events[3]["status"], "success");
    // Clock fields left out: a timestamp like "…:10.456Z" or a duration
    // may hold those digits by chance.
    let raw = std::fs::read_to_string(server.artifacts.path().join("events.jsonl")).unwrap();
    let without_clock: String = raw
        .lines()
        .map(|line| {
            let mut event: Value = serde_json::from_str(line).expect("an event line");
            if let Some(fields) = event.as_object_mut() {
                fields.remove("timestamp");
                fields.remove("duration_ms");
            }
            event.to_string()
        })
        .collect();
    assert!(
        !without_clock.contains("0.05") && !without_clock.contains("10.45"),
        "argument or result values leaked: {raw}"
    );
}

/// Runs futures concurrently on this task (no extra dependency).
async fn futures_join_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let futures: Vec<_> = futures.map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    let mut futures: Vec<_> = futures.into_iter().map(Some).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (slot, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if let Some(future) = slot {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(value) => {
                        *output = Some(value);
                        *slot = None;
                    }
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().map(|o| o.expect("completed")).collect()
}

#[tokio::test]
async fn a_burst_then_a_clean_shutdown_leaves_every_record_complete_and_in_order() {
    // 300 tools/call lines written at once, then stdin closed: the server
    // exits 0, and events.jsonl (written by a batching thread) holds every
    // call's records, each request's in order: started before finished,
    // the guard's records between them, none missing.
    const CALLS: usize = 300;
    let artifacts = tempfile::tempdir().expect("temp dir");
    let mut child = tokio::process::Command::new(FINANCE)
        .env("WARDEN_ARTIFACTS_DIR", artifacts.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn server");
    let mut input = String::new();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "burst", "version": "0"}}});
    input.push_str(&format!("{init}\n"));
    input.push_str("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    for id in 1..=CALLS {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "get_quote", "arguments": {"symbol": "AAPL"}}});
        input.push_str(&format!("{call}\n"));
    }
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let reader = tokio::spawn(async move {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out).await;
        out
    });
    stdin.write_all(input.as_bytes()).await.expect("write the burst");
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the server exits after stdin closes")
        .expect("wait");
    assert!(status.success(), "{status}");
    let out = reader.await.expect("join");
    let answered = out
        .lines()
        .filter(|l| l.contains("\"result\"") || l.contains("\"error\""))
        .count();

    let records = read_jsonl(&artifacts.path().join("events.jsonl"));
    let mut by_request: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    for record in records.iter().filter(|r| r["tool"] == "get_quote") {
        by_request
            .entry(record["request_id"].as_str().unwrap_or_default().to_string())
            .or_default()
            .push(record["event"].as_str().unwrap_or_default());
    }
    assert_eq!(
        by_request.len(),
        CALLS,
        "one request per call ({answered} answered)"
    );
    for (request, names) in &by_request {
        assert_eq!(names.first(), Some(&"request_started"), "{request}: {names:?}");
        assert_eq!(names.last(), Some(&"request_finished"), "{request}: {names:?}");
        let started = names.iter().position(|n| *n == "function_call_started");
        let finished = names.iter().position(|n| *n == "function_call_finished");
        match (started, finished) {
            (Some(s), Some(f)) => assert!(s < f, "{request}: {names:?}"),
            (None, None) => {}
            _ => panic!("{request}: a guard call without both records: {names:?}"),
        }
    }
    let ran = by_request
        .values()
        .filter(|n| n.contains(&"function_call_finished"))
        .count();
    assert!(ran > 0, "no call ran");
}

#[tokio::test]
async fn a_script_cancelled_while_an_in_process_guard_runs_records_what_the_guard_did() {
    // An in-process guard cannot be stopped: the run's end waits for it (until its own deadline),
    // so its record is its outcome (success), not `cancelled`, while the task is cancelled.
    use rmcp::model::{CallToolRequestParams, ClientRequest};
    use rmcp::service::PeerRequestOptions;
    let server = Server::start(TESTBED).await;
    let Value::Object(arguments) = json!({"script": "sleep_in_process(#{millis: 700}); 1"}) else {
        unreachable!()
    };
    let request = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new("run_script").with_arguments(arguments),
    ));
    let pending = server
        .client
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .expect("sent");
    let events = server
        .events_until(|r| {
            r.iter()
                .any(|e| e["event"] == "function_call_started" && e["function"] == "sleep_in_process")
        })
        .await;
    assert!(!events.is_empty());
    pending.cancel(Some("stop".into())).await.expect("cancelled");
    let events = server
        .events_until(|r| {
            r.iter()
                .any(|e| e["event"] == "request_finished" && e["tool"] == "run_script")
        })
        .await;
    let finished = events
        .iter()
        .find(|e| e["event"] == "function_call_finished" && e["function"] == "sleep_in_process")
        .expect("the call's record");
    assert_eq!(finished["status"], "success", "{finished}");
    let request = events
        .iter()
        .find(|e| e["event"] == "request_finished" && e["tool"] == "run_script")
        .expect("the request's record");
    assert_eq!(request["status"], "cancelled", "{request}");
}
