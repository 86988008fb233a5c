//! Hostile input at the transport and in the logs (issue 10, classes 2, 4
//! and 9): malformed and oversized JSON-RPC lines, a client that stops
//! reading answers, huge strings headed for events.jsonl, event-log
//! rotation, guard error results and non-finite guard output.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;

/// A server spoken to line by line, without an MCP client, so a test can
/// send what no client library would.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    _artifacts: tempfile::TempDir,
}

impl Raw {
    /// Starts `binary` and completes the MCP handshake.
    fn start(binary: &str, env: &[(&str, &str)]) -> Raw {
        let artifacts = tempfile::tempdir().expect("temp dir");
        let mut command = Command::new(binary);
        command
            .env("WARDEN_ARTIFACTS_DIR", artifacts.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("spawn server");
        let stdout = child.stdout.take().expect("piped stdout");
        // A rendezvous channel: the reader thread reads a line only when
        // the test asks for one, so a test that asks for none leaves the
        // server's answers unread in the pipe, like a stalled client.
        let (tx, lines) = mpsc::sync_channel(0);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut raw = Raw {
            child,
            stdin,
            lines,
            _artifacts: artifacts,
        };
        raw.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        );
        assert_eq!(raw.next(30)["id"], 0);
        raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        raw
    }

    fn send_line(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(line).expect("server reads stdin");
        stdin.write_all(b"\n").expect("server reads stdin");
        stdin.flush().expect("server reads stdin");
    }

    fn send(&mut self, message: &Value) {
        self.send_line(message.to_string().as_bytes());
    }

    /// The next message from the server, waiting up to `seconds`.
    fn next(&self, seconds: u64) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(seconds))
            .expect("the server answered in time");
        serde_json::from_str(&line).expect("the server wrote JSON")
    }

    fn memory(&self) -> (u64, u64) {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("server alive");
        let kb = |key: &str| -> u64 {
            status
                .lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
                .expect("a memory figure")
        };
        (kb("VmRSS:"), kb("VmHWM:"))
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn malformed_messages_get_error_replies_with_their_id_and_serving_goes_on() {
    // Broken JSON → -32700 with the id a lenient scan recovers; wrong shape → -32600; too deep and a
    // batch say so; then a ping works.
    let mut raw = Raw::start(FINANCE, &[]);
    raw.send_line(br#"{"jsonrpc":"2.0","id":41,"method":"tools/list","params":{"#);
    let reply = raw.next(10);
    assert_eq!(reply["id"], 41, "{reply}");
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    raw.send_line(br#"{"jsonrpc":"2.0","id":"q-42","method":7}"#);
    let reply = raw.next(10);
    assert_eq!(reply["id"], "q-42", "{reply}");
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    raw.send_line(b"not json at all");
    let reply = raw.next(10);
    assert_eq!(reply["id"], Value::Null, "{reply}");
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    // Valid JSON nested deeper than serde_json reads is told so, not that it is broken.
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":44,"method":"ping","params":{{"x":{}{}}}}}"#,
        "[".repeat(150),
        "]".repeat(150)
    );
    raw.send_line(deep.as_bytes());
    let reply = raw.next(10);
    assert_eq!(reply["id"], 44, "{reply}");
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("nests 152 levels") && message.contains("at most 127"),
        "{message}"
    );
    // A batch is named as one.
    raw.send_line(br#"[{"jsonrpc":"2.0","id":45,"method":"ping"}]"#);
    let reply = raw.next(10);
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("JSON-RPC batch"),
        "{reply}"
    );
    raw.send(&json!({"jsonrpc": "2.0", "id": 43, "method": "ping"}));
    let reply = raw.next(10);
    assert_eq!(reply["id"], 43, "{reply}");
    assert!(reply.get("result").is_some(), "{reply}");
}

#[test]
fn an_oversized_line_is_answered_without_being_buffered() {
    // A 96 MB line gets -32600 naming the cap, with its id, and the server's peak RSS grows far less than the line.
    let mut raw = Raw::start(FINANCE, &[]);
    let (_, before) = raw.memory();
    let mut line =
        br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{"pad":""#
            .to_vec();
    line.resize(line.len() + 96 * 1024 * 1024, b'a');
    line.extend_from_slice(br#""}}}"#);
    raw.send_line(&line);
    drop(line);
    let reply = raw.next(60);
    assert_eq!(reply["id"], 7, "{reply}");
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("WARDEN_MAX_MESSAGE_BYTES"), "{message}");
    let (_, after) = raw.memory();
    assert!(
        after - before < 40 * 1024,
        "peak RSS grew by {} KiB for a 96 MiB line",
        after - before
    );
    raw.send(&json!({"jsonrpc": "2.0", "id": 8, "method": "ping"}));
    assert_eq!(raw.next(10)["id"], 8);
}

#[test]
fn a_client_that_stops_reading_answers_stops_the_server_reading() {
    // 20k requests with no answer read: server memory stays < 100 MB; once read, every request is answered.
    const REQUESTS: i64 = 20_000;
    let mut raw = Raw::start(FINANCE, &[]);
    let mut stdin = raw.stdin.take().unwrap();
    // The writer blocks once the server stops reading: that is the point.
    let writer = std::thread::spawn(move || {
        for id in 1..=REQUESTS {
            let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
            if writeln!(stdin, "{request}").is_err() {
                return;
            }
        }
        let _ = stdin.flush();
        // Keep stdin open until the answers are read.
        std::thread::sleep(Duration::from_secs(600));
    });
    std::thread::sleep(Duration::from_secs(15));
    let (rss, peak) = raw.memory();
    assert!(
        peak < 100 * 1024,
        "server peak RSS {peak} KiB (now {rss} KiB) with answers unread"
    );
    let mut answered = std::collections::HashSet::new();
    while answered.len() < REQUESTS as usize {
        let reply = raw.next(120);
        assert!(reply.get("result").is_some(), "{reply}");
        answered.insert(reply["id"].as_i64().unwrap());
    }
    drop(writer);
}

#[tokio::test]
async fn a_huge_caller_chosen_string_never_enters_events_whole() {
    // A 500 KB error code built from the caller's input is cut with a marker in every event record.
    let server = Server::start(TESTBED).await;
    let code = format!("code:{}", "E".repeat(500_000));
    let result = server.call("misbehave", json!({"how": code})).await;
    assert!(is_error(&result));
    // The caller gets the head of the code within the answer bound, and where the whole error is.
    let answer = structured(&result);
    assert!(error_code(&result).starts_with("EEEE"), "{answer}");
    assert_eq!(answer["truncated"], true, "{answer}");
    assert!(answer["truncation"]["whole"]["task_id"].is_string(), "{answer}");
    assert!(serde_json::to_vec(&result).expect("json").len() <= 100_000);
    let records = server
        .events_until(|r| r.iter().any(|e| e["event"] == "request_finished"))
        .await;
    let finished = records
        .iter()
        .find(|e| e["event"] == "request_finished")
        .expect("request_finished recorded");
    let error_type = finished["error_type"].as_str().unwrap();
    assert!(error_type.len() < 2048, "{} bytes", error_type.len());
    assert!(
        error_type.ends_with("…[truncated 498976 bytes]"),
        "{}",
        &error_type[1000..]
    );
    let raw = std::fs::read_to_string(server.artifacts.path().join("events.jsonl")).unwrap();
    assert!(
        raw.lines().all(|line| line.len() < 8 * 1024),
        "an event line is too long"
    );
}

#[tokio::test]
async fn the_event_log_rotates_at_its_size_and_keeps_n_files() {
    // With a 4 KiB cap and 2 kept, many calls leave events.jsonl, .1 and .2, each ≤ 4 KiB, whole records only.
    let server = Server::start_with_env(
        FINANCE,
        &[("WARDEN_EVENTS_MAX_BYTES", "4096"), ("WARDEN_EVENTS_KEEP", "2")],
    )
    .await;
    for _ in 0..40 {
        server.call("price_option_t", call_args()).await;
    }
    let dir = server.artifacts.path();
    let _ = server
        .events_until(|r| r.iter().filter(|e| e["event"] == "request_finished").count() >= 2)
        .await;
    let mut total = 0;
    for name in ["events.jsonl", "events.jsonl.1", "events.jsonl.2"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|_| panic!("{name} exists"));
        assert!(text.len() <= 4096, "{name}: {} bytes", text.len());
        for line in text.lines() {
            serde_json::from_str::<Value>(line).unwrap_or_else(|_| panic!("{name}: a split record"));
        }
        total += text.lines().count();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(name)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{name}");
    }
    assert!(total >= 10, "{total} records kept");
    assert!(
        !dir.join("events.jsonl.3").exists(),
        "more than 2 rotated files kept"
    );
}

#[tokio::test]
async fn a_guard_error_has_no_structured_content_contradicting_its_output_schema() {
    // isError results of a guard with an outputSchema carry their error JSON in text, and no structuredContent.
    let server = Server::start(FINANCE).await;
    let tools = server.client.list_all_tools().await.unwrap();
    let tool = tools.iter().find(|t| t.name == "price_option_t").unwrap();
    assert!(tool.output_schema.is_some());
    let result = server.call("price_option_t", json!({"spot": "abc"})).await;
    assert!(is_error(&result));
    assert!(
        result.structured_content.is_none(),
        "{:?}",
        result.structured_content
    );
    let text = &result.content[0].as_text().unwrap().text;
    let error: Value = serde_json::from_str(text).unwrap();
    assert_eq!(error["error"]["code"], "invalid_arguments", "{error}");
    assert!(error["request_id"].as_str().unwrap().starts_with("req_"));
}

#[tokio::test]
async fn a_non_finite_guard_output_fails_naming_the_field() {
    // 1e308 + 1e308 is infinity: in-process (pure) and isolated calls fail with non_finite_output on `result`, never {"result": null}.
    let server = Server::start(TESTBED).await;
    for guard in ["add_pure", "add_isolated"] {
        let result = server.call(guard, json!({"a": 1e308, "b": 1e308})).await;
        assert!(is_error(&result), "{guard}: {:?}", result.structured_content);
        let error = &structured(&result)["error"];
        assert_eq!(error["code"], "non_finite_output", "{guard}: {error}");
        assert_eq!(error["field"], "result", "{guard}: {error}");
    }
    let fine = server.call("add_pure", json!({"a": 1, "b": 2})).await;
    assert_eq!(structured(&fine)["result"], 3.0);
}

#[test]
fn reusing_the_id_of_a_running_request_is_refused_and_the_first_is_answered() {
    // A second request with a running request's id gets -32600 at once; the first still gets its answer.
    let mut raw = Raw::start(TESTBED, &[]);
    let call = |millis: u64| {
        json!({"jsonrpc": "2.0", "id": 50, "method": "tools/call",
               "params": {"name": "slow_echo", "arguments": {"millis": millis, "tag": format!("t{millis}")}}})
    };
    raw.send(&call(1500));
    raw.send(&call(1));
    let refused = raw.next(10);
    assert_eq!(refused["id"], 50, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already used"),
        "{refused}"
    );
    let answered = raw.next(30);
    assert_eq!(answered["id"], 50, "{answered}");
    assert_eq!(
        answered["result"]["structuredContent"]["tag"], "t1500",
        "{answered}"
    );
}
