//! The span tree across processes, read from the file exporter
//! (WARDEN_TRACE_EXPORTER=file): parentage from the MCP call down to the
//! guard inside its worker, for a direct call and for a coding task.

use std::collections::HashMap;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, MetaObject, RequestMetaObject};
use serde_json::{Value, json};

use crate::common::*;
use crate::fake_model::{FakeModel, Reply};

const INCOMING: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

async fn spans_until(path: &std::path::Path, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let start = std::time::Instant::now();
    loop {
        let spans = read_jsonl(path);
        if ready(&spans) || start.elapsed() > Duration::from_secs(3) {
            return spans;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A server exporting spans to a file; returns the file's path.
async fn traced_server(extra: &[(&str, &str)]) -> (Server, tempfile::TempDir, std::path::PathBuf) {
    let trace_dir = tempfile::tempdir().expect("temp dir");
    let trace_file = trace_dir.path().join("spans.jsonl");
    let file = trace_file.to_string_lossy().to_string();
    let mut env = vec![
        ("WARDEN_TRACE_EXPORTER", "file"),
        ("WARDEN_TRACE_FILE", file.as_str()),
    ];
    env.extend_from_slice(extra);
    let server = Server::start_with_env(FINANCE, &env).await;
    (server, trace_dir, trace_file)
}

fn by_name<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn parent_of<'a>(spans: &'a [Value], span: &Value) -> Option<&'a Value> {
    let index: HashMap<&str, &Value> = spans
        .iter()
        .map(|s| (s["span_id"].as_str().unwrap_or_default(), s))
        .collect();
    index.get(span["parent_span_id"].as_str()?).copied()
}

#[tokio::test]
async fn a_direct_isolated_call_traces_from_the_client_into_the_worker() {
    // mcp.tool.call (SERVER, child of the caller's traceparent) → function.call → library.function in the worker.
    let (server, _trace_dir, trace_file) = traced_server(&[]).await;
    let mut meta = MetaObject::new();
    meta.set_traceparent(INCOMING);
    let mut params =
        CallToolRequestParams::new("price_option_t").with_arguments(call_args().as_object().unwrap().clone());
    params.meta = Some(RequestMetaObject(meta));
    let result = server.client.call_tool(params).await.unwrap();
    assert!(!is_error(&result));
    let spans = spans_until(&trace_file, |s| by_name(s, "mcp.tool.call").len() == 1).await;
    let tool = by_name(&spans, "mcp.tool.call")[0];
    assert_eq!(tool["kind"], "server");
    assert_eq!(
        tool["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736",
        "incoming traceparent honoured"
    );
    assert_eq!(tool["parent_span_id"], "00f067aa0ba902b7");
    assert_eq!(tool["attributes"]["mcp.tool.name"], "price_option_t");
    assert_eq!(tool["attributes"]["warden.outcome"], "success");
    let call = by_name(&spans, "function.call")[0];
    assert_eq!(parent_of(&spans, call).unwrap()["name"], "mcp.tool.call");
    assert_eq!(call["attributes"]["warden.execution_mode"], "isolated");
    let library = by_name(&spans, "library.function")[0];
    assert_eq!(parent_of(&spans, library).unwrap()["name"], "function.call");
    assert_eq!(library["attributes"]["warden.recorded_in"], "worker");
    assert_ne!(
        library["attributes"]["process.pid"],
        json!(server.pid),
        "recorded in another process"
    );
    assert_eq!(library["trace_id"], tool["trace_id"]);
    let raw = std::fs::read_to_string(&trace_file).unwrap();
    assert!(!raw.contains("10.45"), "no result values in spans");
    // Events carry the ids of the request's span.
    let events = server
        .events_until(|r| r.iter().any(|e| e["event"] == "request_finished"))
        .await;
    assert_eq!(events[0]["trace_id"], tool["trace_id"]);
    assert_eq!(events[0]["span_id"], tool["span_id"]);
}

#[tokio::test]
async fn a_failed_call_sets_the_error_status() {
    // Outcome and error status on every span of a failing call.
    let (server, _trace_dir, trace_file) = traced_server(&[]).await;
    server.call("get_quote", json!({"symbol": "NOPE"})).await;
    let spans = spans_until(&trace_file, |s| by_name(s, "mcp.tool.call").len() == 1).await;
    for name in ["mcp.tool.call", "function.call", "library.function"] {
        let span = by_name(&spans, name)[0];
        assert_eq!(span["status"], "error", "{name}: {span}");
    }
    assert_eq!(
        by_name(&spans, "mcp.tool.call")[0]["status_description"],
        "invalid_input"
    );
}

#[tokio::test]
async fn a_coding_task_traces_agent_model_and_guard_calls_across_processes() {
    // mcp.tool.call → task.worker → agent.run → {model.generate, function.call → library.function}.
    let model = FakeModel::start(vec![Reply::Content(
        "```rhai\nlet p = price_option_t(#{option_type: \"call\", spot: 100.0, strike: 100.0, time_to_expiry: 1.0, volatility: 0.2, rate: 0.05});\ncheck_rf_convention(#{rf: 0.0001, periods_per_year: 252.0});\nfinal_answer(#{task_type: \"analysis\", summary: \"ok\", metrics: #{p: p.result}})\n```"
            .into(),
    )])
    .await;
    let env = model.env();
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (server, _trace_dir, trace_file) = traced_server(&pairs).await;
    let result = server
        .call(
            "run_coding_task",
            json!({"prompt": "price", "timeout_seconds": 60}),
        )
        .await;
    assert_eq!(
        structured(&result)["status"],
        "success",
        "{:?}",
        structured(&result)
    );
    let spans = spans_until(&trace_file, |s| by_name(s, "mcp.tool.call").len() == 1).await;
    let chain = |name: &str| -> Vec<String> {
        let mut names = Vec::new();
        let mut current = by_name(&spans, name).first().copied();
        while let Some(span) = current {
            names.push(span["name"].as_str().unwrap().to_string());
            current = parent_of(&spans, span);
        }
        names
    };
    assert_eq!(
        chain("model.generate"),
        ["model.generate", "agent.run", "task.worker", "mcp.tool.call"]
    );
    assert_eq!(
        chain("library.function"),
        [
            "library.function",
            "function.call",
            "agent.run",
            "task.worker",
            "mcp.tool.call"
        ]
    );
    let inline: Vec<&Value> = by_name(&spans, "function.call")
        .into_iter()
        .filter(|s| s["attributes"]["warden.execution_mode"] == "pure_inline")
        .collect();
    assert_eq!(inline.len(), 1, "the pure call inside the script is traced too");
    assert_eq!(parent_of(&spans, inline[0]).unwrap()["name"], "agent.run");
    let trace_ids: std::collections::HashSet<&str> =
        spans.iter().map(|s| s["trace_id"].as_str().unwrap()).collect();
    assert_eq!(trace_ids.len(), 1, "one trace");
    assert_eq!(
        by_name(&spans, "model.generate")[0]["attributes"]["gen_ai.request.model"],
        "scripted"
    );
}
