//! Every answer has a bound (issue 38, point 17): answers measured as the
//! client receives them, the JSON-RPC response line on stdio, stay within
//! `WARDEN_MAX_ANSWER_BYTES` (100,000 bytes by default); a cut answer says
//! `truncated: true` with totals and points at the whole value, which reads
//! back whole with `read_artifact`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{FINANCE, TESTBED};

/// The default answer bound (`DEFAULT_MAX_ANSWER_BYTES`).
const BOUND: usize = 100_000;

/// A server spoken to line by line, so each answer is measured as sent.
struct Wire {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    next_id: u64,
    _artifacts: tempfile::TempDir,
}

impl Wire {
    /// Starts `binary` with `env` and completes the MCP handshake.
    fn start(binary: &str, env: &[(&str, &str)]) -> Wire {
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
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut wire = Wire {
            child,
            stdin,
            lines,
            next_id: 1,
            _artifacts: artifacts,
        };
        wire.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "wire", "version": "1"}}),
        );
        wire.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        wire
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("server reads stdin");
        stdin.flush().expect("server reads stdin");
    }

    /// Sends a request and returns its response line's length and JSON
    /// (notifications in between are skipped).
    fn request(&mut self, method: &str, params: Value) -> (usize, Value) {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(120))
                .expect("the server answered in time");
            let message: Value = serde_json::from_str(&line).expect("the server wrote JSON");
            if message["id"] == id {
                return (line.len(), message);
            }
        }
    }

    /// Calls `tool`; the answer must be within `bound` bytes on the wire.
    fn call(&mut self, tool: &str, arguments: Value, bound: usize) -> Value {
        let (bytes, message) = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        assert!(
            bytes <= bound,
            "{tool} answered {bytes} bytes, over the {bound}-byte bound"
        );
        message["result"].clone()
    }

    /// The whole of `filename` of task `task_id`, read with read_artifact
    /// chunk by chunk, each answer within `bound`.
    fn read_whole(&mut self, task_id: &str, filename: &str, bound: usize) -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut offset = 0u64;
        loop {
            let result = self.call(
                "read_artifact",
                json!({"task_id": task_id, "filename": filename, "offset": offset, "max_bytes": 262_144}),
                bound,
            );
            let chunk = &result["structuredContent"];
            assert_ne!(result["isError"], true, "{result}");
            bytes.extend_from_slice(chunk["content"].as_str().expect("utf-8 content").as_bytes());
            match chunk["next_offset"].as_u64() {
                Some(next) => offset = next,
                None => return bytes,
            }
        }
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A value's `truncation` marker, checked for what every cut answer says.
fn marker_of(value: &Value, bound: usize) -> Value {
    assert_eq!(value["truncated"], true, "no truncated marker: {value}");
    let marker = value["truncation"].clone();
    assert_eq!(marker["limit_bytes"], bound);
    assert!(marker["answer_bytes"].as_u64().is_some(), "{marker}");
    assert!(marker["whole"]["task_id"].as_str().is_some(), "{marker}");
    marker
}

/// The cut at `at` in a marker.
fn cut<'a>(marker: &'a Value, at: &str) -> &'a Value {
    marker["cut"]
        .as_array()
        .and_then(|cuts| cuts.iter().find(|c| c["at"] == at))
        .unwrap_or_else(|| panic!("no cut at {at}: {marker}"))
}

/// The `resource_link` blocks of a result, by URI.
fn links(result: &Value) -> Vec<String> {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "resource_link")
        .filter_map(|b| b["uri"].as_str().map(String::from))
        .collect()
}

/// A script that makes a guard call and answers with `n` metrics.
fn metrics_script(n: usize) -> String {
    format!(
        r#"get_quote(#{{symbol: "AAPL"}});
let m = #{{}};
for i in 0..{n} {{ m["metric_" + i] = i * 1.5; }}
final_answer(#{{task_type: "analysis", summary: "{n} metrics", metrics: m}})"#
    )
}

#[test]
fn a_script_that_wrote_a_thousand_files_answers_under_the_bound_with_its_receipt_cut() {
    // Was 278 KB: the receipt listed every artifact's hash. Now the answer keeps the first 100
    // hashes with the total, and result.json (the pointer) still has all 1,000.
    let mut server = Wire::start(FINANCE, &[]);
    let script = r#"for i in 0..1000 { write_artifact("f_" + i + ".txt", "x" + i); } "done""#;
    let result = server.call("run_script", json!({"script": script}), BOUND);
    let value = &result["structuredContent"];
    assert_eq!(value["status"], "success", "{value}");
    assert_eq!(value["artifacts_total"], 1000);
    let marker = marker_of(value, BOUND);
    let receipt_cut = cut(&marker, "/receipt/artifacts");
    assert_eq!(
        (receipt_cut["kept"].as_u64(), receipt_cut["total"].as_u64()),
        (Some(100), Some(1000))
    );
    assert_eq!(value["receipt"]["artifacts"].as_array().map(Vec::len), Some(100));
    let task_id = value["task_id"].as_str().expect("task id").to_string();
    assert_eq!(marker["whole"]["task_id"], task_id.as_str());
    assert_eq!(marker["whole"]["filename"], "result.json");
    assert!(
        links(&result)
            .iter()
            .any(|uri| uri.ends_with(&format!("{task_id}/result.json"))),
        "no link to the whole result"
    );
    let whole: Value =
        serde_json::from_slice(&server.read_whole(&task_id, "result.json", BOUND)).expect("JSON");
    assert_eq!(whole["receipt"]["artifacts"].as_array().map(Vec::len), Some(1000));
}

#[test]
fn a_final_answer_with_six_thousand_metrics_answers_under_the_bound_and_reads_back_whole() {
    // Was 417 KB: the value twice. Now structuredContent keeps the leading metrics with the total,
    // the text is a short summary, and result.json has all 6,000; get_task_result is bounded too.
    let mut server = Wire::start(FINANCE, &[]);
    let result = server.call("run_script", json!({"script": metrics_script(6000)}), BOUND);
    let value = &result["structuredContent"];
    assert_eq!(value["status"], "success", "{value}");
    let marker = marker_of(value, BOUND);
    assert!(
        marker["answer_bytes"].as_u64().unwrap_or(0) > BOUND as u64,
        "{marker}"
    );
    let metrics_cut = cut(&marker, "/metrics");
    assert_eq!(metrics_cut["total"], 6000);
    let kept = value["metrics"].as_object().map(|m| m.len()).unwrap_or(0);
    assert_eq!(metrics_cut["kept"], kept);
    assert!(kept > 1000, "only {kept} metrics kept");
    let text = result["content"][0]["text"].as_str().expect("a text block");
    assert!(
        text.len() < BOUND / 4,
        "the text repeats the value: {} bytes",
        text.len()
    );
    let summary: Value = serde_json::from_str(text).expect("the text is JSON");
    assert_eq!(summary["truncated"], true);
    assert_eq!(summary["truncation"]["whole"], marker["whole"]);
    let task_id = value["task_id"].as_str().expect("task id").to_string();
    let whole: Value =
        serde_json::from_slice(&server.read_whole(&task_id, "result.json", BOUND)).expect("JSON");
    assert_eq!(whole["metrics"].as_object().map(|m| m.len()), Some(6000));
    assert_eq!(whole["metrics"]["metric_5999"], 5999.0 * 1.5);

    let saved = server.call("get_task_result", json!({"task_id": task_id}), BOUND);
    let saved_marker = marker_of(&saved["structuredContent"], BOUND);
    assert_eq!(saved_marker["whole"]["filename"], "result.json");
    assert_eq!(cut(&saved_marker, "/result/metrics")["total"], 6000);
}

#[test]
fn a_guard_answer_over_the_bound_is_an_error_pointing_at_its_whole_output() {
    // Its output schema forbids cutting structuredContent: 20,000 rows come back isError with
    // answer_too_large (status success: the guard ran), the head, and a kept copy that reads back
    // whole; 1,500 rows fit once, so they go whole as structuredContent with a summary text.
    let mut server = Wire::start(TESTBED, &[]);
    let result = server.call("many_rows", json!({"count": 20_000}), BOUND);
    assert_eq!(result["isError"], true);
    assert!(result.get("structuredContent").is_none());
    let text: Value =
        serde_json::from_str(result["content"][0]["text"].as_str().expect("text")).expect("JSON");
    assert_eq!(text["status"], "success");
    assert_eq!(text["error"]["code"], "answer_too_large");
    let marker = marker_of(&text, BOUND);
    assert_eq!(cut(&marker, "/output/rows")["total"], 20_000);
    let (task_id, filename) = (
        marker["whole"]["task_id"].as_str().expect("kept").to_string(),
        marker["whole"]["filename"].as_str().expect("file").to_string(),
    );
    assert_eq!(filename, "value.json");
    assert!(
        links(&result)
            .iter()
            .any(|uri| uri.ends_with(&format!("{task_id}/value.json")))
    );
    let whole: Value = serde_json::from_slice(&server.read_whole(&task_id, &filename, BOUND)).expect("JSON");
    assert_eq!(whole["rows"].as_array().map(Vec::len), Some(20_000));
    assert_eq!(whole["rows"][19_999]["label"], "row number 19999");
    // The kept answer is a task of the caller, named after the tool.
    let tasks = server.call("list_tasks", json!({}), BOUND);
    assert!(
        tasks["structuredContent"].to_string().contains(&task_id),
        "list_tasks does not show the kept answer"
    );

    let result = server.call("many_rows", json!({"count": 1_500}), BOUND);
    assert_ne!(result["isError"], true);
    assert_eq!(
        result["structuredContent"]["rows"].as_array().map(Vec::len),
        Some(1_500)
    );
    let text: Value =
        serde_json::from_str(result["content"][0]["text"].as_str().expect("text")).expect("JSON");
    assert_eq!(text["truncated"], true);
}

#[test]
fn an_operator_lowers_the_bound_and_every_answer_keeps_to_it() {
    // WARDEN_MAX_ANSWER_BYTES=16384: a task result, a guard, a file read in chunks and a listing
    // all answer within it; the whole result still reads back.
    let bound = 16_384;
    let mut server = Wire::start(TESTBED, &[("WARDEN_MAX_ANSWER_BYTES", "16384")]);
    let result = server.call("run_script", json!({"script": metrics_script(2000)}), bound);
    let value = &result["structuredContent"];
    let marker = marker_of(value, bound);
    assert_eq!(cut(&marker, "/metrics")["total"], 2000);
    let task_id = value["task_id"].as_str().expect("task id").to_string();
    let whole: Value =
        serde_json::from_slice(&server.read_whole(&task_id, "result.json", bound)).expect("JSON");
    assert_eq!(whole["metrics"].as_object().map(|m| m.len()), Some(2000));
    let rows = server.call("many_rows", json!({"count": 1_000}), bound);
    assert_eq!(rows["isError"], true);
    server.call("list_guards", json!({}), bound);
    server.call("list_tasks", json!({"limit": 100}), bound);
    server.call("list_artifacts", json!({"task_id": task_id, "limit": 500}), bound);
}

#[test]
fn an_answer_bound_outside_its_range_stops_the_start_naming_the_variable() {
    let run = crate::common::run_cli(
        FINANCE,
        &["--list-tools"],
        &[("WARDEN_MAX_ANSWER_BYTES", "100")],
        std::path::Path::new("."),
    );
    assert_ne!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("WARDEN_MAX_ANSWER_BYTES"), "{}", run.stderr);
}

#[test]
fn a_batch_over_the_bound_keeps_every_call_with_the_head_of_its_output() {
    // Four calls of 3,000 rows each (about 360 KB): every call keeps its status and the first
    // rows, each cut names its call, and the kept copy has every row of every call.
    let mut server = Wire::start(TESTBED, &[]);
    let calls: Vec<Value> = (0..4)
        .map(|_| json!({"name": "many_rows", "arguments": {"count": 3_000}}))
        .collect();
    let result = server.call("run_batch", json!({"calls": calls}), BOUND);
    let value = &result["structuredContent"];
    assert_eq!(value["succeeded"], 4, "{value}");
    let marker = marker_of(value, BOUND);
    for i in 0..4 {
        assert_eq!(value["calls"][i]["status"], "success");
        assert!(
            value["calls"][i]["output"]["rows"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
        );
        assert_eq!(cut(&marker, &format!("/calls/{i}/output/rows"))["total"], 3_000);
    }
    let (task_id, filename) = (
        marker["whole"]["task_id"].as_str().expect("kept").to_string(),
        marker["whole"]["filename"].as_str().expect("file").to_string(),
    );
    let whole: Value = serde_json::from_slice(&server.read_whole(&task_id, &filename, BOUND)).expect("JSON");
    for i in 0..4 {
        assert_eq!(
            whole["calls"][i]["output"]["rows"].as_array().map(Vec::len),
            Some(3_000)
        );
    }
}
