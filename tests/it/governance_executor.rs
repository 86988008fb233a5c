//! Resource governance of the executor (issue 10, classes 3, 4, 5 and 10):
//! guard threads, admission, `$artifact` memory, argument depth and the
//! script worker's message cap. Each test attacks one bound and checks the
//! server keeps answering.

use std::time::{Duration, Instant};

use rmcp::model::{ClientRequest, PingRequest};
use serde_json::{Value, json};

use crate::common::*;

/// A `/proc/<pid>/status` field in its unit (kB for memory, a count for Threads).
fn status_field(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn threads(server: &Server) -> u64 {
    status_field(server.pid, "Threads")
}

/// The server's threads named `name` (guard-pool threads are
/// `warden-guard`, script door threads `warden-door`).
fn threads_named(server: &Server, name: &str) -> usize {
    std::fs::read_dir(format!("/proc/{}/task", server.pid))
        .map(|tasks| {
            tasks
                .flatten()
                .filter(|task| {
                    std::fs::read_to_string(task.path().join("comm")).is_ok_and(|c| c.trim() == name)
                })
                .count()
        })
        .unwrap_or(0)
}

/// Threads tokio may add on its own (its blocking pool serves stdin,
/// stdout and process reaping): slack for whole-process thread counts.
const TOKIO_SLACK: u64 = 8;

/// How long a ping takes to be answered (panics after 5 s).
async fn ping(server: &Server) -> Duration {
    let started = Instant::now();
    tokio::time::timeout(
        Duration::from_secs(5),
        server
            .client
            .send_request(ClientRequest::PingRequest(PingRequest::default())),
    )
    .await
    .expect("ping answered within 5 s")
    .expect("ping succeeded");
    started.elapsed()
}

async fn run_script(server: &Server, script: &str, timeout: u64) -> Value {
    let result = server
        .call(
            "run_script",
            json!({"script": script, "timeout_seconds": timeout}),
        )
        .await;
    structured(&result)
}

fn message(value: &Value) -> String {
    value["error"]["message"].as_str().unwrap_or_default().to_string()
}

/// `{"a": {"a": … 1}}`, `levels` objects deep.
fn nested(levels: usize) -> Value {
    let mut value = json!(1);
    for _ in 0..levels {
        value = json!({ "a": value });
    }
    value
}

/// Runs futures concurrently on this task.
async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<_> = futures.into_iter().map(Box::pin).map(Some).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
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
async fn with_every_guard_thread_hung_ping_and_fresh_calls_are_still_answered() {
    // Hung in-process guards hold all 3 guard threads + 2 overdue permits: ping answers, in-process calls are busy, isolated run.
    let server = Server::start_with_env(
        TESTBED,
        &[
            ("WARDEN_MAX_CONCURRENT_CALLS", "8"),
            ("WARDEN_MAX_GUARD_THREADS", "3"),
            ("WARDEN_MAX_OVERDUE_IN_PROCESS", "2"),
            ("WARDEN_ADMISSION_WAIT_MS", "300"),
        ],
    )
    .await;
    // Two waves: each call times out at 1 s and its thread sleeps on for a minute.
    for wave in [3, 2] {
        let hung = (0..wave)
            .map(|_| server.call("sleep_in_process", json!({"millis": 60_000})))
            .collect();
        for result in join_all(hung).await {
            assert_eq!(error_code(&result), "timed_out", "{:?}", structured(&result));
        }
    }
    let answered_in = ping(&server).await;
    assert!(answered_in < Duration::from_secs(1), "ping took {answered_in:?}");
    let started = Instant::now();
    let fresh = server.call("get_quote", json!({"symbol": "AAPL"})).await;
    assert_eq!(error_code(&fresh), "server_busy", "{:?}", structured(&fresh));
    let text = message(&structured(&fresh));
    assert!(
        text.starts_with("Server busy; retry later") && text.contains("all 3 in-process guard threads"),
        "{text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // Isolated guards need no guard thread.
    let isolated = server.call("price_option_t", call_args()).await;
    assert!(!is_error(&isolated), "{:?}", structured(&isolated));
}

#[tokio::test]
async fn overrunning_batches_cannot_exhaust_the_servers_threads() {
    // 20 batches × 25 hanging in-process calls: threads stay within the guard-thread budget and ping answers.
    let server = Server::start_with_env(
        TESTBED,
        &[
            ("WARDEN_MAX_CONCURRENT_CALLS", "20"),
            ("WARDEN_MAX_GUARD_THREADS", "8"),
            ("WARDEN_MAX_OVERDUE_IN_PROCESS", "4"),
            ("WARDEN_ADMISSION_WAIT_MS", "200"),
        ],
    )
    .await;
    let before = threads(&server);
    let hang = json!({"name": "sleep_in_process", "arguments": {"millis": 60_000}});
    let batch = json!({"calls": vec![hang; 25]});
    let batches = (0..20).map(|_| server.call("run_batch", batch.clone())).collect();
    let results = join_all(batches).await;
    let mut codes = std::collections::BTreeMap::<String, usize>::new();
    for result in &results {
        for call in structured(result)["calls"].as_array().expect("a batch result") {
            *codes
                .entry(call["error"]["code"].as_str().unwrap_or("none").to_string())
                .or_default() += 1;
        }
    }
    // Every call was answered: at most 12 overran (8 + 4 overdue), the rest found no guard thread.
    let timed_out = codes.get("timed_out").copied().unwrap_or(0);
    assert!((8..=12).contains(&timed_out), "{codes:?}");
    assert_eq!(codes.get("server_busy"), Some(&(500 - timed_out)), "{codes:?}");
    let guard_threads = threads_named(&server, "warden-guard");
    assert!(
        guard_threads <= 12,
        "{guard_threads} guard threads; the budget is 12"
    );
    let after = threads(&server);
    assert!(
        after <= before + 12 + TOKIO_SLACK,
        "threads grew from {before} to {after}; the budget is 12"
    );
    let answered_in = ping(&server).await;
    assert!(answered_in < Duration::from_secs(1), "ping took {answered_in:?}");
    let fresh = server.call("price_option_t", call_args()).await;
    assert!(!is_error(&fresh), "{:?}", structured(&fresh));
}

#[tokio::test]
async fn a_script_looping_over_a_hanging_guard_does_not_grow_threads() {
    // 10 calls of a hanging in-process guard from a script: 2 overrun, the rest get a catchable server_busy.
    let server = Server::start_with_env(
        TESTBED,
        &[
            ("WARDEN_MAX_GUARD_THREADS", "1"),
            ("WARDEN_MAX_OVERDUE_IN_PROCESS", "1"),
            ("WARDEN_ADMISSION_WAIT_MS", "200"),
        ],
    )
    .await;
    let before = threads(&server);
    let script = r#"
        let codes = [];
        for i in 0..10 {
            try { sleep_in_process(#{millis: 60000}); codes.push("ok"); } catch (e) { codes.push(e.code); }
        }
        codes
    "#;
    let result = run_script(&server, script, 30).await;
    assert_eq!(result["status"], "success", "{result}");
    let codes: Vec<&str> = result["value"]
        .as_array()
        .expect("codes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(codes[..2], ["timed_out", "timed_out"], "{codes:?}");
    assert!(codes[2..].iter().all(|c| *c == "server_busy"), "{codes:?}");
    // Two door threads are stuck in the guard (plus, briefly, the session's last one).
    let door_threads = threads_named(&server, "warden-door");
    assert!(door_threads <= 3, "{door_threads} door threads");
    let after = threads(&server);
    assert!(
        after <= before + 3 + TOKIO_SLACK,
        "threads grew from {before} to {after}"
    );
    assert!(ping(&server).await < Duration::from_secs(1));
}

#[tokio::test]
async fn a_direct_call_waits_briefly_for_a_slot_instead_of_being_refused() {
    // One call slot held for 0.5 s: a call arriving meanwhile waits for it and succeeds.
    let server = Server::start_with_env(TESTBED, &[("WARDEN_MAX_CONCURRENT_CALLS", "1")]).await;
    let (held, waited) = tokio::join!(
        server.call("slow_echo", json!({"millis": 500, "tag": "hold"})),
        async {
            tokio::time::sleep(Duration::from_millis(150)).await;
            let started = Instant::now();
            let result = server.call("get_quote", json!({"symbol": "AAPL"})).await;
            (result, started.elapsed())
        }
    );
    assert!(!is_error(&held), "{:?}", structured(&held));
    let (result, elapsed) = waited;
    assert!(
        !is_error(&result),
        "refused instead of waiting: {:?}",
        structured(&result)
    );
    assert!(elapsed > Duration::from_millis(150), "did not wait: {elapsed:?}");
}

#[tokio::test]
async fn beyond_the_wait_queue_or_the_wait_time_a_call_is_busy() {
    // Queue of 1, wait of 0.5 s: the second waiter is refused at once, the first after 0.5 s.
    let server = Server::start_with_env(
        TESTBED,
        &[
            ("WARDEN_MAX_CONCURRENT_CALLS", "1"),
            ("WARDEN_ADMISSION_QUEUE", "1"),
            ("WARDEN_ADMISSION_WAIT_MS", "500"),
        ],
    )
    .await;
    let timed = |delay: u64| {
        let server = &server;
        async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            let started = Instant::now();
            let result = server.call("get_quote", json!({"symbol": "AAPL"})).await;
            (result, started.elapsed())
        }
    };
    let (held, (first, first_took), (second, second_took)) = tokio::join!(
        server.call("slow_echo", json!({"millis": 4000, "tag": "hold"})),
        timed(300),
        timed(500),
    );
    assert!(!is_error(&held));
    assert_eq!(error_code(&first), "server_busy", "{:?}", structured(&first));
    assert!(
        message(&structured(&first)).contains("stayed in use for 500 ms"),
        "{:?}",
        structured(&first)
    );
    assert!(
        first_took >= Duration::from_millis(450) && first_took < Duration::from_millis(2500),
        "{first_took:?}"
    );
    assert_eq!(error_code(&second), "server_busy", "{:?}", structured(&second));
    assert!(
        message(&structured(&second)).contains("already wait"),
        "{:?}",
        structured(&second)
    );
    assert!(second_took < Duration::from_millis(300), "{second_took:?}");
    let events = server
        .events_until(|r| r.iter().filter(|e| e["event"] == "request_rejected").count() == 2)
        .await;
    assert_eq!(
        events.iter().filter(|e| e["event"] == "request_rejected").count(),
        2
    );
}

/// A script that writes a ~0.9 MiB one-column CSV; returns its task id.
async fn write_big_csv(server: &Server) -> String {
    // "1.25\n" × 2^17 + "1.5\n" × 2^16 = 917,504 bytes of rows.
    let script = r#"
        let a = "1.25\n"; for i in 0..17 { a += a; }
        let b = "1.5\n"; for i in 0..16 { b += b; }
        write_artifact("big.csv", "v\n" + a + b);
        1
    "#;
    let result = run_script(server, script, 60).await;
    assert_eq!(result["status"], "success", "{result}");
    result["task_id"].as_str().expect("task id").to_string()
}

#[tokio::test]
async fn a_batch_of_thousands_of_artifact_references_is_refused_before_loading() {
    // 2,000 references to a 0.9 MiB artifact: refused arguments_too_large naming call and reference; RSS stays small.
    let server = Server::start(TESTBED).await;
    let task_id = write_big_csv(&server).await;
    let reference = json!({"$artifact": {"task_id": task_id, "filename": "outputs/big.csv"}, "column": "v"});
    let call = json!({"name": "check_performance", "arguments": {"returns": vec![reference; 80]}});
    let started = Instant::now();
    let result = server.call("run_batch", json!({"calls": vec![call; 25]})).await;
    let value = structured(&result);
    assert!(is_error(&result), "{value}");
    assert_eq!(value["error"]["code"], "arguments_too_large", "{value}");
    // 0.9 MiB × 9 references pass the 8,000,000-byte cap.
    assert_eq!(
        value["error"]["field"], "calls[0].arguments.returns[8]",
        "{value}"
    );
    let text = message(&value);
    assert!(
        text.contains("calls[0] (check_performance)")
            && text.contains("outputs/big.csv")
            && text.contains("917506 bytes"),
        "{text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let peak_kb = status_field(server.pid, "VmHWM");
    assert!(
        peak_kb > 0 && peak_kb < 100 * 1024,
        "server peak RSS {peak_kb} kB"
    );
    let events = server.events_until(|_| false).await;
    assert!(
        !events
            .iter()
            .any(|r| r["event"] == "function_call_started" && r["mode"] == "batch"),
        "a refused batch runs nothing"
    );
    // The same artifact within the cap still feeds a guard.
    let reference = json!({"$artifact": {"task_id": task_id, "filename": "outputs/big.csv"}, "column": "v"});
    let ok = server
        .call(
            "run_batch",
            json!({"calls": [{"name": "check_performance", "arguments": {"returns": reference}}]}),
        )
        .await;
    assert!(!is_error(&ok), "{:?}", structured(&ok));
}

#[tokio::test]
async fn arguments_nested_too_deep_are_invalid_arguments_on_every_path() {
    // 70 levels: refused for a direct call, a batch call and (catchably) a script call, isolated or in-process.
    let server = Server::start(TESTBED).await;
    let deep = json!({"symbol": "AAPL", "extra": nested(69)});
    let direct = server.call("get_quote", deep.clone()).await;
    assert_eq!(
        error_code(&direct),
        "invalid_arguments",
        "{:?}",
        structured(&direct)
    );
    let text = message(&structured(&direct));
    assert!(text.contains("70 levels deep; the limit is 64"), "{text}");

    let batch = server
        .call(
            "run_batch",
            json!({"calls": [{"name": "get_quote", "arguments": deep}, {"name": "get_quote", "arguments": {"symbol": "AAPL"}}]}),
        )
        .await;
    let batch = structured(&batch);
    assert_eq!(batch["calls"][0]["error"]["code"], "invalid_arguments", "{batch}");
    assert!(message(&batch["calls"][0]).contains("levels deep"), "{batch}");
    assert_eq!(batch["calls"][1]["status"], "success", "{batch}");

    // The script worker refuses them before sending (5,000 levels would
    // overflow its stack in the JSON conversion); the executor would too.
    let script = r#"
        let caught = [];
        for levels in [100, 200, 5000] {
            let m = 1;
            for i in 0..levels { m = #{a: m}; }
            for guard in ["get_quote", "price_option_t"] {
                try {
                    if guard == "get_quote" { get_quote(#{symbol: "AAPL", extra: m}); }
                    else { price_option_t(#{option_type: "call", spot: 100.0, strike: 100.0, time_to_expiry: 1.0, volatility: 0.2, rate: 0.0, extra: m}); }
                    caught.push("none");
                } catch (e) { caught.push(e.code + ": " + e.message); }
            }
        }
        caught.push(get_quote(#{symbol: "AAPL"}).symbol);
        caught
    "#;
    let result = run_script(&server, script, 30).await;
    assert_eq!(result["status"], "success", "{result}");
    let caught: Vec<&str> = result["value"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(caught.len(), 7, "{caught:?}");
    for refused in &caught[..6] {
        assert!(
            refused.starts_with("invalid_arguments: ") && refused.contains("levels deep; the limit is 64"),
            "{caught:?}"
        );
    }
    assert_eq!(caught[6], "AAPL");

    // A script whose own value is that deep fails with a reason; the worker survives to say so.
    let deep_value = run_script(&server, "let m = 1; for i in 0..5000 { m = #{a: m}; } m", 30).await;
    assert_eq!(deep_value["status"], "failed", "{deep_value}");
    assert_eq!(deep_value["error"]["kind"], "limit", "{deep_value}");
    assert!(
        deep_value["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("levels deep"),
        "{deep_value}"
    );
}

#[tokio::test]
async fn a_worker_message_over_the_cap_is_refused_and_the_server_keeps_serving() {
    // A 2 MiB control-character string is a 12 MiB message: catchable for calls and writes, the end of a run as a result.
    let server = Server::start(TESTBED).await;
    let build = r#"let s = "\x01"; for i in 0..21 { s += s; }"#;
    let script = format!(
        r#"{build}
        let caught = [];
        try {{ get_quote(#{{symbol: s}}); }} catch (e) {{ caught.push(e.code + ": " + e.message); }}
        try {{ write_artifact("big.txt", s); }} catch (e) {{ caught.push(e.code + ": " + e.message); }}
        caught"#
    );
    let result = run_script(&server, &script, 60).await;
    assert_eq!(result["status"], "success", "{result}");
    let caught = result["value"].as_array().expect("list");
    let call = caught[0].as_str().unwrap_or_default();
    assert!(
        call.starts_with("arguments_too_large: the call to 'get_quote' is a 12582")
            && call.contains("capped at 8065536 bytes"),
        "{caught:?}"
    );
    let write = caught[1].as_str().unwrap_or_default();
    assert!(
        write.starts_with("artifact_too_large: write_artifact sent a"),
        "{caught:?}"
    );

    // A result over the cap ends the run with the reason.
    let result = run_script(&server, &format!("{build} s"), 60).await;
    assert_eq!(result["status"], "failed", "{result}");
    let reason = result["error"]["message"].as_str().unwrap_or_default();
    assert!(
        reason.contains("the script's result is a") && reason.contains("over the 8065536-byte cap"),
        "{result}"
    );
    assert!(ping(&server).await < Duration::from_secs(1));
    let fresh = server.call("get_quote", json!({"symbol": "AAPL"})).await;
    assert!(!is_error(&fresh), "{:?}", structured(&fresh));
}
