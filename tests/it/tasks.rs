//! Task-level promises: progress notifications, cancellation, and task
//! slots that are separate from call slots.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ProgressNotificationParam};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::common::*;

/// A client that keeps every progress message it receives.
#[derive(Clone, Default)]
struct ProgressCollector {
    messages: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for ProgressCollector {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Ok(mut messages) = self.messages.lock() {
            messages.push(params.message.unwrap_or_default());
        }
    }
}

#[tokio::test]
async fn a_script_reports_progress_for_guard_calls_and_artifacts() {
    // The client's progressToken gets one notification per guard call and
    // artifact, and one per batch of inline pure calls.
    let artifacts = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(FINANCE);
    command.env("WARDEN_ARTIFACTS_DIR", artifacts.path());
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let collector = ProgressCollector::default();
    let client = collector.clone().serve(transport).await.unwrap();
    let script = r#"get_quote(#{symbol: "AAPL"}); get_quote(#{symbol: "MSFT"}); write_artifact("a.txt", "x");
        for i in 0..1500 { check_rf_convention(#{rf: 0.0, periods_per_year: 252}); } 1"#;
    let arguments = json!({"script": script}).as_object().unwrap().clone();
    let result = client
        .call_tool(CallToolRequestParams::new("run_script").with_arguments(arguments))
        .await
        .unwrap();
    assert_eq!(structured(&result)["status"], "success");
    let messages = collector.messages.lock().unwrap().clone();
    let guard_notes = messages
        .iter()
        .filter(|m| m.starts_with("guard call get_quote"))
        .count();
    assert_eq!(guard_notes, 2, "{messages:?}");
    assert!(messages.iter().any(|m| m == "artifact a.txt"), "{messages:?}");
    let inline: Vec<&String> = messages
        .iter()
        .filter(|m| m.starts_with("inline pure calls"))
        .collect();
    assert_eq!(inline.len(), 2, "batches of 1,024: {messages:?}");
    assert!(inline[1].ends_with("1502 guard calls so far"), "{messages:?}");
}

#[tokio::test]
async fn cancelling_a_script_kills_its_worker_and_records_cancelled() {
    // A dropped run_script call ends with a cancelled result.json and no worker left.
    let server = Server::start(FINANCE).await;
    let call = server.call("run_script", json!({"script": ENDLESS, "timeout_seconds": 60}));
    assert!(
        tokio::time::timeout(Duration::from_millis(800), call)
            .await
            .is_err()
    );
    assert!(
        eventually(Duration::from_secs(3), || server.workers().is_empty()).await,
        "script worker survived"
    );
    let saved = eventually(Duration::from_secs(3), || {
        std::fs::read_dir(server.artifacts.path())
            .unwrap()
            .flatten()
            .any(|e| e.path().join("result.json").exists())
    })
    .await;
    assert!(saved, "result.json written");
    // result.json is the task's commit; its record follows within moments.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    let tasks = loop {
        let tasks = structured(&server.call("list_tasks", json!({})).await).clone();
        if tasks["tasks"][0]["status"] != "running" || tokio::time::Instant::now() > deadline {
            break tasks;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(tasks["tasks"][0]["status"], "cancelled", "{tasks:?}");
}

#[tokio::test]
async fn task_slots_are_separate_from_call_slots() {
    // Two long scripts fill the task slots: a third is busy, yet direct calls still run.
    let server = Server::start(FINANCE).await;
    let long = || server.call("run_script", json!({"script": ENDLESS, "timeout_seconds": 3}));
    let (first, second, third) = tokio::join!(long(), long(), async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let busy = server.call("run_script", json!({"script": "1"})).await;
        let direct = server.call("price_option_t", call_args()).await;
        (busy, direct)
    });
    let (busy, direct) = third;
    assert_eq!(error_code(&busy), "server_busy", "{:?}", structured(&busy));
    assert!(
        !is_error(&direct),
        "direct call starved by tasks: {:?}",
        structured(&direct)
    );
    for long in [first, second] {
        assert_eq!(structured(&long)["status"], "timed_out");
    }
    let records: Vec<Value> = server
        .events_until(|r| r.iter().any(|e| e["event"] == "request_rejected"))
        .await;
    assert!(
        records
            .iter()
            .any(|e| e["event"] == "request_rejected" && e["tool"] == "run_script")
    );
}

#[tokio::test]
async fn task_results_link_their_artifacts_as_readable_resources() {
    // Each output file comes back as a resource_link whose URI resources/read serves.
    let server = Server::start(FINANCE).await;
    let result = server
        .call(
            "run_script",
            json!({"script": r#"write_artifact("r.csv", "a,b\n1,2\n"); 1"#}),
        )
        .await;
    let link = result
        .content
        .iter()
        .find_map(|c| match c {
            rmcp::model::ContentBlock::ResourceLink(resource) => Some(resource.clone()),
            _ => None,
        })
        .expect("a resource link");
    assert!(
        link.uri.starts_with("warden://artifacts/task_") && link.uri.ends_with("/outputs/r.csv"),
        "{}",
        link.uri
    );
    let read = server
        .client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(link.uri.clone()))
        .await
        .unwrap();
    let text = serde_json::to_value(&read).unwrap().to_string();
    assert!(text.contains("a,b\\n1,2\\n"), "{text}");
    let escape = server
        .client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            link.uri.replace("outputs/r.csv", "../x"),
        ))
        .await;
    assert!(escape.is_err(), "traversal through a resource URI is refused");
}

#[tokio::test]
async fn old_task_directories_are_pruned_beyond_the_retention_limit() {
    // WARDEN_TASKS_KEPT=2: after four tasks only the two newest remain.
    let server = Server::start_with_env(FINANCE, &[("WARDEN_TASKS_KEPT", "2")]).await;
    let mut ids = Vec::new();
    for n in 0..4 {
        let result = server.call("run_script", json!({"script": format!("{n}")})).await;
        ids.push(structured(&result)["task_id"].as_str().unwrap().to_string());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Retention runs beside the requests, at most every RETENTION_INTERVAL
    // (200 ms): the pass the last task start asked for comes within it.
    let mut listed: Vec<String> = Vec::new();
    for _ in 0..50 {
        let tasks = server.call("list_tasks", json!({})).await;
        listed = structured(&tasks)["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["task_id"].as_str().unwrap().to_string())
            .collect();
        if listed.len() <= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.contains(&ids[3]), "the newest task is kept: {listed:?}");
    let gone = server.call("get_task_result", json!({"task_id": ids[0]})).await;
    assert_eq!(error_code(&gone), "not_found");
}

#[tokio::test]
async fn the_task_slot_count_is_set_by_warden_max_concurrent_tasks() {
    // With one task slot, a second script is busy while the first runs, and runs once it ended.
    let server = Server::start_with_env(FINANCE, &[("WARDEN_MAX_CONCURRENT_TASKS", "1")]).await;
    let long = server.call("run_script", json!({"script": ENDLESS, "timeout_seconds": 2}));
    let (long, busy) = tokio::join!(long, async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        server.call("run_script", json!({"script": "1"})).await
    });
    assert_eq!(structured(&long)["status"], "timed_out");
    assert_eq!(error_code(&busy), "server_busy", "{:?}", structured(&busy));
    assert!(
        structured(&busy)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("all 1 task slots"),
        "{:?}",
        structured(&busy)
    );
    let after = server.call("run_script", json!({"script": "1"})).await;
    assert_eq!(structured(&after)["status"], "success");
}

#[tokio::test]
async fn a_task_waits_briefly_for_a_slot_instead_of_being_refused() {
    // With one task slot taken by a 1 s script, a script arriving meanwhile waits (up to the admission wait) and runs.
    let server = Server::start_with_env(
        FINANCE,
        &[
            ("WARDEN_MAX_CONCURRENT_TASKS", "1"),
            ("WARDEN_ADMISSION_WAIT_MS", "5000"),
        ],
    )
    .await;
    let long = server.call("run_script", json!({"script": ENDLESS, "timeout_seconds": 1}));
    let (long, waited) = tokio::join!(long, async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = std::time::Instant::now();
        let result = server.call("run_script", json!({"script": "40 + 2"})).await;
        (result, started.elapsed())
    });
    let (waited, elapsed) = waited;
    assert_eq!(structured(&long)["status"], "timed_out");
    assert_eq!(
        structured(&waited)["status"],
        "success",
        "{:?}",
        structured(&waited)
    );
    assert_eq!(structured(&waited)["value"], 42);
    assert!(
        elapsed >= Duration::from_millis(400),
        "it did not wait: {elapsed:?}"
    );
}

#[tokio::test]
async fn results_name_the_task_directory_relative_to_the_artifacts_root() {
    // task_dir in a task result and in get_task_result is the task's directory under the
    // artifacts root (= its task_id), never the server's absolute path, which appears nowhere.
    let server = Server::start(FINANCE).await;
    let result = server
        .call(
            "run_script",
            json!({"script": "write_artifact(\"a.txt\", \"x\"); 1"}),
        )
        .await;
    let result = structured(&result);
    let task_id = result["task_id"].as_str().expect("task_id");
    assert_eq!(result["task_dir"], task_id, "{result}");
    let root = server.artifacts.path().to_string_lossy().to_string();
    assert!(
        !result.to_string().contains(&root),
        "the absolute path leaked: {result}"
    );
    let dir = server.artifacts.path().join(result["task_dir"].as_str().unwrap());
    assert!(dir.join("result.json").is_file(), "{dir:?}");
    assert!(dir.join("outputs/a.txt").is_file(), "{dir:?}");
    let saved = server.call("get_task_result", json!({"task_id": task_id})).await;
    let saved = structured(&saved);
    assert_eq!(saved["task_dir"], task_id, "{saved}");
    assert_eq!(saved["result"]["task_dir"], task_id, "{saved}");
    assert!(
        !saved.to_string().contains(&root),
        "the absolute path leaked: {saved}"
    );
}
