//! Resource governance, storage (issue 10, classes 1, 3, 6 and 7): task
//! quotas, names, function_calls.json, store retention, result sizes,
//! truthful and durable task records, and filesystem hygiene when someone
//! else can write the artifacts directory.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

async fn run(server: &Server, script: &str, timeout: u64) -> Value {
    let result = server
        .call(
            "run_script",
            json!({"script": script, "timeout_seconds": timeout}),
        )
        .await;
    structured(&result)
}

/// A task's directory: results name it relative to the artifacts root.
fn task_dir(server: &Server, result: &Value) -> PathBuf {
    server
        .artifacts
        .path()
        .join(result["task_dir"].as_str().expect("task_dir"))
}

/// The task directories under `root`.
fn task_dirs(root: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(root)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("task_"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until a task directory exists under `root` and returns it.
async fn first_task(root: &Path) -> PathBuf {
    for _ in 0..200 {
        if let Some(dir) = task_dirs(root).into_iter().next() {
            return dir;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no task directory appeared under {}", root.display());
}

fn read_result(dir: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(dir.join("result.json")).ok()?).ok()
}

/// A finished task directory planted in the store, `hours` old.
fn plant_task(root: &Path, id_digit: char, bytes: usize, hours: u64) -> PathBuf {
    let dir = root.join(format!("task_{}", id_digit.to_string().repeat(32)));
    std::fs::create_dir_all(dir.join("outputs")).expect("plant outputs");
    std::fs::write(dir.join("outputs/data.bin"), vec![b'x'; bytes]).expect("plant data");
    std::fs::write(dir.join("result.json"), r#"{"status":"success"}"#).expect("plant result");
    let when = std::time::SystemTime::now() - Duration::from_secs(hours * 3600);
    std::fs::File::open(&dir)
        .and_then(|d| d.set_modified(when))
        .expect("age the planted task");
    dir
}

const QUOTA_SCRIPT: &str = r#"
let r = #{};
try { write_artifact("a/b/c/d/e/f/g/h/i.txt", "x"); r.depth = "written"; } catch (e) { r.depth = e; }
let long = ""; long.pad(300, "n");
try { write_artifact(long, "x"); r.name = "written"; } catch (e) { r.name = e; }
let part = ""; part.pad(250, "p");
try { write_artifact(part + "/" + part + "/" + part + "/" + part + "/" + part, "x"); r.path = "written"; } catch (e) { r.path = e; }
let big = ""; big.pad(600000, "b");
write_artifact("big1.bin", big);
try { write_artifact("big2.bin", big); r.bytes = "written"; } catch (e) { r.bytes = e; }
write_artifact("big1.bin", big);
let n = 0;
loop {
  try { write_artifact("f" + n + ".txt", "x"); n += 1; } catch (e) { r.files = e; break; }
  if n > 50 { break; }
}
r.written = n;
r.done = true;
r
"#;

#[tokio::test]
async fn file_byte_depth_and_name_quotas_are_catchable_quota_exceeded() {
    // Per-task quotas (files, bytes, depth, component and path length) refuse the write with a
    // catchable quota_exceeded naming the quota and its value; the script catches it and goes on,
    // and an overwrite neither adds an entry nor counts its bytes twice.
    let server = Server::start_with_env(
        TESTBED,
        &[("WARDEN_TASK_MAX_FILES", "5"), ("WARDEN_TASK_MAX_MB", "1")],
    )
    .await;
    let result = run(&server, QUOTA_SCRIPT, 30).await;
    let value = &result["value"];
    assert_eq!(value["done"], true, "{result}");
    for (quota, needle) in [
        ("depth", "8 levels"),
        ("name", "255 bytes"),
        ("path", "1024 bytes"),
        ("bytes", "1048576 bytes"),
        ("files", "5 files"),
    ] {
        assert_eq!(value[quota]["code"], "quota_exceeded", "{quota}: {result}");
        let message = value[quota]["message"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{quota}: {message}");
        assert_eq!(value[quota]["field"], "filename", "{quota}");
    }
    // big1.bin plus four one-byte files make the five entries.
    assert_eq!(value["written"], 4, "{result}");
    let outputs = task_dir(&server, &result).join("outputs");
    assert_eq!(std::fs::read_dir(&outputs).unwrap().count(), 5);
    assert!(!outputs.join("big2.bin").exists());
}

#[tokio::test]
async fn control_and_bidi_characters_in_names_are_refused() {
    // Newlines, DEL, C1 controls and bidi overrides/isolates/marks in a name are invalid_input
    // on `filename`; nothing is written.
    let server = Server::start(TESTBED).await;
    let script = r#"
        let codes = [];
        for name in ["a\nb.txt", "c\x7f.txt", "d\u0085.txt", "invoice\u202Etxt.exe", "\u2066e.txt", "f\u200F.txt", "g\u061C.txt"] {
            try { write_artifact(name, "x"); codes.push("written"); } catch (e) { codes.push(e.code + ":" + e.field); }
        }
        codes
    "#;
    let result = run(&server, script, 30).await;
    let codes = result["value"].as_array().expect("codes").clone();
    assert_eq!(codes.len(), 7, "{result}");
    assert!(codes.iter().all(|c| c == "invalid_input:filename"), "{codes:?}");
    assert_eq!(
        std::fs::read_dir(task_dir(&server, &result).join("outputs"))
            .unwrap()
            .count(),
        0
    );
}

#[tokio::test]
async fn function_calls_json_stays_bounded_and_valid_for_a_long_loop() {
    // DEFAULT_CALLS_RECORDED: 12,000 calls leave 10,000 records and one summary of the other
    // 2,000 — valid JSON, and the counts add up to every call.
    let server = Server::start(TESTBED).await;
    let script = r#"
        let n = 0.0;
        for i in 0..12000 { n += add_pure(#{a: 1.0, b: 1.0}).result; }
        n
    "#;
    let result = run(&server, script, 60).await;
    assert_eq!(result["function_calls"], 12000, "{result}");
    let text = std::fs::read_to_string(task_dir(&server, &result).join("function_calls.json")).unwrap();
    let calls: Vec<Value> = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(calls.len(), 10_001);
    let summary = calls.last().unwrap();
    assert_eq!(summary["summarized"], true, "{summary}");
    assert_eq!(summary["calls"], 2000);
    assert_eq!(summary["by_function"]["add_pure"], 2000);
}

#[tokio::test]
async fn retention_removes_old_and_oversized_tasks_but_keeps_running_and_recent_ones() {
    // Retention is bytes- and age-aware: a 2-day-old task and one that does not fit the store
    // budget are removed (by the sweep at start or at the next task start); a small recent one
    // and the running one stay. The tasks are planted before the server starts: planted beside a
    // running server, its start-up sweep could remove one between its creation and its aging.
    let store = tempfile::tempdir().expect("temp dir");
    let root = store.path().to_path_buf();
    let old = plant_task(&root, 'a', 10, 48);
    let big = plant_task(&root, 'b', 2 * 1024 * 1024, 2);
    let recent = plant_task(&root, 'c', 10, 1);
    let dir = root.to_string_lossy().to_string();
    let server = Server::start_with_env(
        TESTBED,
        &[
            ("WARDEN_ARTIFACTS_DIR", dir.as_str()),
            ("WARDEN_STORE_MAX_MB", "1"),
            ("WARDEN_TASKS_MAX_AGE_HOURS", "24"),
        ],
    )
    .await;
    let result = run(&server, "1", 30).await;
    assert_eq!(result["status"], "success", "{result}");
    let gone = eventually(Duration::from_secs(10), || !old.exists() && !big.exists()).await;
    assert!(gone, "old {} big {}", old.exists(), big.exists());
    assert!(recent.exists(), "a small recent task is kept");
    let new_task = root.join(result["task_dir"].as_str().expect("task_dir"));
    assert!(new_task.exists(), "the new task is kept");
}

#[tokio::test]
async fn deleting_a_huge_old_tree_never_blocks_a_task_start_or_a_call() {
    // Removing old task trees runs on the retention thread: a task start and concurrent calls
    // are answered long before a 60,000-file tree is gone.
    let server = Server::start_with_env(TESTBED, &[("WARDEN_TASKS_KEPT", "1")]).await;
    let root = server.artifacts.path().to_path_buf();
    let old = root.join(format!("task_{}", "d".repeat(32)));
    for d in 0..300 {
        let sub = old.join("outputs").join(format!("d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..200 {
            std::fs::File::create(sub.join(format!("f{f}"))).unwrap();
        }
    }
    std::fs::write(old.join("result.json"), "{}").unwrap();
    let when = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::open(&old).unwrap().set_modified(when).unwrap();

    let started = Instant::now();
    let result = run(&server, "1", 30).await;
    let task_started = started.elapsed();
    assert_eq!(result["status"], "success", "{result}");
    let mut slowest = Duration::ZERO;
    let mut calls = 0;
    let gone = loop {
        let trash_left = std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(".trash-"));
        if !old.exists() && !trash_left {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the old tree was never removed"
        );
        let at = Instant::now();
        let answer = server.call("list_guards", json!({})).await;
        assert!(!is_error(&answer));
        slowest = slowest.max(at.elapsed());
        calls += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        task_started * 2 < gone,
        "the task start ({task_started:?}) waited for the deletion ({gone:?})"
    );
    assert!(
        slowest < Duration::from_millis(500),
        "a call took {slowest:?} during the deletion ({calls} calls)"
    );
}

#[tokio::test]
async fn an_artifact_flood_keeps_the_result_small_and_on_time() {
    // A script that writes artifacts until its deadline (past its file quota, catching the
    // errors) gets a result ≤ 256 KiB, on time, with the first 100 artifacts listed, the total
    // count and a pointer to list_artifacts.
    let server = Server::start_with_env(TESTBED, &[("WARDEN_TASK_MAX_FILES", "300")]).await;
    let script = r#"
        let i = 0;
        loop { try { write_artifact("flood/" + i + ".txt", "x"); } catch (e) {} i += 1; }
    "#;
    let started = Instant::now();
    let answer = server
        .call("run_script", json!({"script": script, "timeout_seconds": 2}))
        .await;
    let elapsed = started.elapsed();
    let bytes = serde_json::to_vec(&answer).unwrap().len();
    let result = structured(&answer);
    assert!(elapsed < Duration::from_millis(2_600), "{elapsed:?}");
    assert!(bytes <= 256 * 1024, "{bytes} bytes");
    assert_eq!(result["status"], "timed_out", "{result}");
    assert_eq!(result["artifacts"].as_array().map(Vec::len), Some(100));
    assert_eq!(
        result["artifacts_total"], 299,
        "300 entries: the flood/ directory and 299 files"
    );
    assert!(
        result["artifacts_note"]
            .as_str()
            .unwrap_or_default()
            .contains("list_artifacts")
    );
}

#[tokio::test]
async fn a_large_value_is_saved_to_a_file_and_referenced() {
    // A value over 64 KiB is not inlined: value.json holds it and the result points there.
    let server = Server::start(TESTBED).await;
    let result = run(&server, r#"let s = ""; s.pad(300000, "v"); s"#, 30).await;
    assert_eq!(result["value"], Value::Null, "{}", result["value_note"]);
    assert_eq!(result["value_file"], "value.json");
    let saved: Value = serde_json::from_str(
        &std::fs::read_to_string(task_dir(&server, &result).join("value.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(saved.as_str().map(str::len), Some(300000));
    let chunk = server
        .call(
            "read_artifact",
            json!({"task_id": result["task_id"], "filename": "value.json", "max_bytes": 16}),
        )
        .await;
    assert!(!is_error(&chunk));
}

#[tokio::test]
async fn an_oversized_final_answer_is_saved_to_a_file_and_the_result_stays_small() {
    // A final answer that would make the result larger than 256 KiB keeps a short summary
    // inline; its full summary, metrics and assumptions go to answer.json.
    let server = Server::start(TESTBED).await;
    let script = r#"
        add_pure(#{a: 1.0, b: 2.0});
        let s = ""; s.pad(200000, "m");
        final_answer(#{task_type: "analysis", summary: s, metrics: #{a: s}, assumptions: [s]})
    "#;
    let answer = server
        .call("run_script", json!({"script": script, "timeout_seconds": 30}))
        .await;
    let bytes = serde_json::to_vec(&answer).expect("json").len();
    let result = structured(&answer);
    assert!(bytes <= 256 * 1024, "{bytes} bytes");
    assert_eq!(result["status"], "success", "{}", result["summary"]);
    assert_eq!(result["answer_file"], "answer.json");
    let saved: Value = serde_json::from_str(
        &std::fs::read_to_string(task_dir(&server, &result).join("answer.json")).expect("answer.json"),
    )
    .expect("json");
    assert_eq!(saved["metrics"]["a"].as_str().map(str::len), Some(200000));
}

#[tokio::test]
async fn long_artifact_names_a_full_output_and_a_big_value_still_fit_the_result() {
    // The result stays ≤ 256 KiB even when 100 listed artifacts have ~1 KB names and value and
    // output are near their own caps: fewer artifacts are listed, with the count and the pointer.
    let server = Server::start(TESTBED).await;
    let script = r#"
        let part = ""; part.pad(240, "p");
        for i in 0..120 { write_artifact(part + "/" + part + "/" + part + "/" + part + i, "x"); }
        let s = ""; s.pad(60000, "o");
        print(s);
        let v = ""; v.pad(60000, "v");
        v
    "#;
    // result.json is that result; the answer is also within the answer bound (100,000 bytes
    // by default), cut with `truncated: true` and pointing at result.json (tests/it/answers.rs).
    let answer = run(&server, script, 60).await;
    let bytes = serde_json::to_vec(&answer).expect("json").len();
    assert!(bytes <= 100_000, "{bytes} bytes");
    assert_eq!(answer["truncated"], true);
    assert_eq!(answer["truncation"]["whole"]["filename"], "result.json");
    let saved = std::fs::read(task_dir(&server, &answer).join("result.json")).expect("result.json");
    assert!(saved.len() <= 256 * 1024 + 64 * 1024, "{} bytes", saved.len());
    let result: Value = serde_json::from_slice(&saved).expect("json");
    assert!(serde_json::to_vec(&result).expect("json").len() <= 256 * 1024);
    assert_eq!(result["artifacts_total"], 120, "{}", result["summary"]);
    let listed = result["artifacts"].as_array().map(Vec::len).unwrap_or(0);
    assert!(listed > 0 && listed < 100, "{listed} listed");
    assert!(
        result["artifacts_note"]
            .as_str()
            .unwrap_or_default()
            .contains("list_artifacts")
    );
    assert_eq!(result["value"].as_str().map(str::len), Some(60000));
}

#[tokio::test]
async fn a_refused_write_leaves_no_partial_or_temporary_file() {
    // A write that fails (its name is taken by a directory) leaves the old tree as it was and no
    // temporary file; the one-by-one failure of the write itself is pinned by the safe_path unit test.
    let server = Server::start(TESTBED).await;
    let script = r#"
        write_artifact("a/b.txt", "keep");
        let big = ""; big.pad(500000, "y");
        let code = "";
        try { write_artifact("a", big); } catch (e) { code = e.code; }
        code
    "#;
    let result = run(&server, script, 30).await;
    assert_eq!(result["value"], "invalid_input", "{result}");
    let outputs = task_dir(&server, &result).join("outputs");
    let names: Vec<String> = std::fs::read_dir(&outputs)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["a".to_string()]);
    assert_eq!(std::fs::read_to_string(outputs.join("a/b.txt")).unwrap(), "keep");
    assert_eq!(std::fs::read_dir(outputs.join("a")).unwrap().count(), 1);
}

#[tokio::test]
async fn a_result_that_cannot_be_saved_fails_the_task_with_the_reason() {
    // result.json is written by temp file + rename: when it cannot be put in place (its name is
    // a non-empty directory here), the task is `failed` with the reason, never `success`.
    let server = Server::start(TESTBED).await;
    let root = server.artifacts.path().to_path_buf();
    let call = server.call(
        "run_script",
        json!({"script": "sleep_in_process(#{millis: 1500}); 1", "timeout_seconds": 30}),
    );
    let blocker = async {
        let dir = first_task(&root).await;
        std::fs::create_dir_all(dir.join("result.json/blocker")).unwrap();
    };
    let (answer, ()) = tokio::join!(call, blocker);
    let result = structured(&answer);
    assert_eq!(result["status"], "failed", "{result}");
    assert!(
        result["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("could not be saved"),
        "{result}"
    );
}

#[tokio::test]
async fn a_client_that_disconnects_leaves_a_cancelled_record() {
    // When the client goes away mid-task, the server cancels the task and records it
    // `cancelled` before it exits.
    let server = Server::start(TESTBED).await;
    let root = server.artifacts.path().to_path_buf();
    let pid = server.pid;
    let Server {
        client, artifacts, ..
    } = server;
    let peer = client.peer().clone();
    let pending = tokio::spawn(async move {
        let mut arguments = serde_json::Map::new();
        arguments.insert("script".into(), json!(ENDLESS));
        arguments.insert("timeout_seconds".into(), json!(60));
        peer.call_tool(rmcp::model::CallToolRequestParams::new("run_script").with_arguments(arguments))
            .await
    });
    let dir = first_task(&root).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(client);
    pending.abort();
    let recorded = eventually(Duration::from_secs(15), || read_result(&dir).is_some()).await;
    assert!(recorded, "no result.json after the client left");
    let result = read_result(&dir).unwrap();
    assert_eq!(result["status"], "cancelled", "{result}");
    assert!(
        eventually(Duration::from_secs(10), || !Path::new(&format!("/proc/{pid}"))
            .exists())
        .await,
        "the server did not exit"
    );
    drop(artifacts);
}

#[tokio::test]
async fn a_server_stopped_by_sigterm_records_its_running_task_cancelled() {
    // TaskRunner::shutdown: on SIGTERM the server cancels its running tasks and waits for their
    // `cancelled` records before it exits.
    let server = Server::start(TESTBED).await;
    let root = server.artifacts.path().to_path_buf();
    let call = server.try_call("run_script", json!({"script": ENDLESS, "timeout_seconds": 60}));
    let stopper = async {
        let dir = first_task(&root).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(server.pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        dir
    };
    let (_answer, dir) = tokio::join!(call, stopper);
    let pid = server.pid;
    assert!(
        eventually(Duration::from_secs(10), || !Path::new(&format!(
            "/proc/{pid}/stat"
        ))
        .exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z"))
        .await,
        "the server did not exit"
    );
    let result = read_result(&dir).expect("result.json written before exit");
    assert_eq!(result["status"], "cancelled", "{result}");
}

#[tokio::test]
async fn a_task_left_by_a_killed_server_is_interrupted_after_restart() {
    // A SIGKILLed server leaves a task without result.json; the next server marks it
    // `interrupted` (status failed), so list_tasks and get_task_result tell the truth.
    let server = Server::start(TESTBED).await;
    let root = server.artifacts.path().to_path_buf();
    let call = server.try_call("run_script", json!({"script": ENDLESS, "timeout_seconds": 60}));
    let killer = async {
        let dir = first_task(&root).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(server.pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        dir
    };
    let (answer, dir) = tokio::join!(call, killer);
    assert!(answer.is_err(), "the killed server answered: {answer:?}");
    assert!(read_result(&dir).is_none(), "a killed server wrote no record");
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let again = Server::start_with_env(TESTBED, &[("WARDEN_ARTIFACTS_DIR", root.to_str().unwrap())]).await;
    let answer = again.call("get_task_result", json!({"task_id": id})).await;
    let result = &structured(&answer)["result"];
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["error"]["kind"], "interrupted", "{result}");
    // It says where the calls it made before the crash are recorded, since its own files may not,
    // and, read back from its own log (written through at each one), that it made no side effect.
    let message = result["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("the server's events.jsonl records each one"),
        "{result}"
    );
    assert!(
        message.contains("it had started no call of a destructive guard"),
        "{result}"
    );
    assert!(result.get("side_effects").is_none(), "{result}");
    let listed = structured(&again.call("list_tasks", json!({})).await);
    let entry = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task_id"] == id.as_str())
        .cloned();
    assert_eq!(entry.unwrap()["status"], "failed");
}

#[tokio::test]
async fn read_artifact_on_a_fifo_answers_at_once_and_the_server_keeps_serving() {
    // A FIFO planted in a task directory is refused (regular files only), never waited on.
    let server = Server::start(TESTBED).await;
    let result = run(&server, "1", 30).await;
    let fifo = task_dir(&server, &result).join("outputs/pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let started = Instant::now();
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        server.call(
            "read_artifact",
            json!({"task_id": result["task_id"], "filename": "outputs/pipe"}),
        ),
    )
    .await
    .expect("read_artifact on a FIFO must not hang");
    assert!(is_error(&answer));
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(!is_error(&server.call("list_guards", json!({})).await));
}

#[tokio::test]
async fn a_task_directory_swapped_for_a_symlink_is_refused() {
    // The task directory is opened without following links: a task dir replaced by a link to
    // another directory is refused by read_artifact, list_artifacts and get_task_result.
    let server = Server::start(TESTBED).await;
    let result = run(&server, r#"write_artifact("x.txt", "secret")"#, 30).await;
    let dir = task_dir(&server, &result);
    let elsewhere = server.artifacts.path().join("elsewhere");
    std::fs::rename(&dir, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
    let id = result["task_id"].clone();
    for (tool, arguments) in [
        (
            "read_artifact",
            json!({"task_id": id, "filename": "outputs/x.txt"}),
        ),
        ("list_artifacts", json!({"task_id": id})),
        ("get_task_result", json!({"task_id": id})),
    ] {
        let answer = server.call(tool, arguments).await;
        assert!(is_error(&answer), "{tool} followed the link");
        assert_eq!(error_code(&answer), "invalid_input", "{tool}");
    }
}

#[tokio::test]
async fn everything_a_task_creates_is_private() {
    // Files under a task directory are 0600 and directories 0700.
    let server = Server::start(TESTBED).await;
    let result = run(
        &server,
        r#"write_artifact("d/e/f.txt", "x"); add_pure(#{a: 1.0, b: 2.0})"#,
        30,
    )
    .await;
    assert_eq!(result["status"], "success", "{result}");
    let dir = task_dir(&server, &result);
    let mut stack = vec![dir.clone()];
    let mut seen = 0;
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o777;
        if meta.is_dir() {
            assert_eq!(mode, 0o700, "{}", path.display());
            stack.extend(std::fs::read_dir(&path).unwrap().flatten().map(|e| e.path()));
        } else {
            assert_eq!(mode, 0o600, "{}", path.display());
        }
        seen += 1;
    }
    assert!(seen >= 10, "{seen} entries");
    // So are the server's own logs beside the tasks.
    let root = server.artifacts.path();
    for (path, expected) in [
        (root.join(".diagnostics"), 0o700),
        (root.join(".diagnostics/workers"), 0o700),
        (root.join("events.jsonl"), 0o600),
    ] {
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, expected, "{}", path.display());
    }
}

#[tokio::test]
async fn a_deadline_inside_a_guard_call_ends_the_task_timed_out() {
    // An isolated guard call cut short by the task deadline ends the task `timed_out`, not `failed`.
    let server = Server::start(TESTBED).await;
    let result = run(&server, "slow_echo(#{millis: 30000})", 2).await;
    assert_eq!(result["status"], "timed_out", "{result}");
    let result = run(&server, "sleep_in_process(#{millis: 5000}); 1", 1).await;
    assert_eq!(result["status"], "timed_out", "{result}");
}
