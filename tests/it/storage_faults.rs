//! Storage faults and file modes (issue 24, findings 5, 9, 10 and 11):
//! everything the server creates under the artifacts directory is private;
//! a read-only artifacts directory at start leaves the server serving with
//! task tools refused until it is writable; a full disk never leaves a task
//! `running` forever nor a file truncated. A task store that opens late
//! (locked) delays only the task tools, never the first answer.
//!
//! The read-only and full-disk cases need a file system that refuses
//! writes. As root (where 0500 stops nothing) they mount one: a read-only
//! bind mount, a small tmpfs. A test that cannot make one says why on
//! stderr and returns (it never passes silently on a setup that stops no
//! write: each one checks that its setup refuses a write first).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use crate::common::tasks::{StdioServer, get_task};
use crate::common::*;

/// Calls `tool` on `server` and returns the answer.
async fn call(server: &StdioServer, tool: &str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    tokio::time::timeout(
        Duration::from_secs(60),
        server
            .peer()
            .call_tool(rmcp::model::CallToolRequestParams::new(tool.to_string()).with_arguments(arguments)),
    )
    .await
    .expect("answered in time")
    .expect("tools/call answered")
}

/// The error message of an error answer.
fn message(answer: &CallToolResult) -> String {
    structured(answer)["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `list_tasks`' entry for `id`.
async fn listed(server: &StdioServer, id: &str) -> Option<Value> {
    let answer = call(server, "list_tasks", json!({})).await;
    structured(&answer)["tasks"]
        .as_array()?
        .iter()
        .find(|t| t["task_id"] == id)
        .cloned()
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Runs `mount args…`; the error is its stderr.
fn mount(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new("mount")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run mount: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "mount {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

/// A mount the test made over `path`; unmounted when dropped.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// `dir` made read-only: a read-only bind mount over itself as root, mode
/// 0500 otherwise. Dropping it makes `dir` writable again.
enum ReadOnly {
    Bind(Option<Mounted>),
    Mode(PathBuf),
}

impl ReadOnly {
    fn new(dir: &Path) -> Result<Self, String> {
        let made = if is_root() {
            let path = dir.to_str().expect("utf-8 path");
            mount(&["--bind", path, path])?;
            let bound = Mounted(dir.to_path_buf());
            mount(&["-o", "remount,ro,bind", path])?;
            ReadOnly::Bind(Some(bound))
        } else {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o500))
                .map_err(|e| e.to_string())?;
            ReadOnly::Mode(dir.to_path_buf())
        };
        let probe = dir.join("probe");
        if std::fs::write(&probe, b"x").is_ok() {
            let _ = std::fs::remove_file(&probe);
            return Err("the read-only setup does not stop writes here".into());
        }
        Ok(made)
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        match self {
            ReadOnly::Bind(mounted) => drop(mounted.take()),
            ReadOnly::Mode(dir) => {
                let _ = std::fs::set_permissions(&*dir, std::fs::Permissions::from_mode(0o700));
            }
        }
    }
}

/// Every entry under `root` (itself included) that is not a 0700 directory
/// or a 0600 regular file, with what it is.
fn not_private(root: &Path) -> Vec<String> {
    let mut bad = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).expect("stat");
        let mode = meta.permissions().mode() & 0o7777;
        let kind = meta.file_type();
        if kind.is_dir() {
            if mode != 0o700 {
                bad.push(format!("{} is a directory with mode {mode:o}", path.display()));
            }
            stack.extend(
                std::fs::read_dir(&path)
                    .expect("list")
                    .flatten()
                    .map(|e| e.path()),
            );
        } else if kind.is_file() {
            if mode != 0o600 {
                bad.push(format!("{} is a file with mode {mode:o}", path.display()));
            }
        } else {
            bad.push(format!(
                "{} is neither a regular file nor a directory ({kind:?})",
                path.display()
            ));
        }
    }
    bad
}

#[tokio::test]
async fn everything_the_server_creates_under_the_artifacts_dir_is_private() {
    // Directories 0700, regular files 0600, nothing else: the root the server creates, tasks.db
    // with its -wal and -shm, events.jsonl and its rotations, task directories, result.json and
    // function_calls.json, after a task that wrote an artifact and a queued MCP task.
    let base = tempfile::tempdir().expect("temp dir");
    let root = base.path().join("artifacts");
    let root_text = root.to_str().expect("utf-8 path").to_string();
    let server = StdioServer::start(
        TESTBED,
        &root,
        &[("WARDEN_EVENTS_MAX_BYTES", "4096"), ("WARDEN_EVENTS_KEEP", "3")],
        true,
    )
    .await;
    // This client declares MCP tasks: both runs are queued, claimed and run as tasks.
    // An isolated guard's worker leaves its stderr log under .diagnostics/ too.
    let script = r#"write_artifact("d/e/report.txt", "x"); add_pure(#{a: 1.0, b: 2.0}); add_isolated(#{a: 1.0, b: 2.0}); 1"#;
    let mut ids = Vec::new();
    for script in [script, "1"] {
        let created = crate::common::tasks::start_task(
            server.peer(),
            "run_script",
            json!({"script": script, "timeout_seconds": 30}),
            None,
        )
        .await;
        let id = created.task.task_id.clone();
        let answers =
            crate::common::tasks::poll_until_ended(server.peer(), &id, Duration::from_secs(30)).await;
        let last = answers.last().expect("an answer");
        assert!(
            crate::common::tasks::has_status(last, rmcp::model::TaskStatus::Completed),
            "{last:?}"
        );
        ids.push(id);
    }
    let dir = root.join(&ids[0]);
    for name in ["result.json", "function_calls.json", "outputs/d/e/report.txt"] {
        assert!(dir.join(name).exists(), "{name}");
    }
    for name in [
        "tasks.db",
        "tasks.db-wal",
        "tasks.db-shm",
        "events.jsonl",
        "events.jsonl.1",
    ] {
        assert!(root.join(name).exists(), "{name} under {root_text}");
    }
    let bad = not_private(&root);
    assert!(bad.is_empty(), "not private:\n{}", bad.join("\n"));
}

#[tokio::test]
async fn a_read_only_artifacts_dir_at_start_refuses_task_tools_until_it_is_writable() {
    // The server starts on a read-only artifacts directory: guards answer; run_script,
    // list_tasks, get_task_result and tasks/get are refused naming the directory and
    // WARDEN_ARTIFACTS_DIR (never "damaged"); once writable, the next run_script opens the store.
    let base = tempfile::tempdir().expect("temp dir");
    let root = base.path().join("artifacts");
    std::fs::create_dir(&root).expect("artifacts dir");
    let locked = match ReadOnly::new(&root) {
        Ok(locked) => locked,
        Err(reason) => {
            eprintln!("skipped: cannot make a read-only directory here: {reason}");
            return;
        }
    };
    // One client without MCP tasks (plain tool calls), one with (task-augmented calls, tasks/*).
    let server = StdioServer::start(TESTBED, &root, &[], false).await;
    let tasks = StdioServer::start(TESTBED, &root, &[], true).await;
    let answer = call(&server, "add_pure", json!({"a": 1, "b": 2})).await;
    assert!(!is_error(&answer), "{answer:?}");
    let unknown = format!("task_{}", "0".repeat(32));
    let names_the_fix = |what: &str, text: &str| {
        assert!(
            text.contains(root.to_str().expect("utf-8 path")),
            "{what}: {text}"
        );
        assert!(text.contains("WARDEN_ARTIFACTS_DIR"), "{what}: {text}");
        assert!(!text.contains("damaged"), "{what}: {text}");
    };
    for (tool, arguments) in [
        ("run_script", json!({"script": "1", "timeout_seconds": 30})),
        ("list_tasks", json!({})),
        ("get_task_result", json!({"task_id": unknown})),
    ] {
        let answer = call(&server, tool, arguments).await;
        assert!(is_error(&answer), "{tool}: {answer:?}");
        names_the_fix(tool, &message(&answer));
    }
    let queued = tasks
        .peer()
        .call_tool_once(crate::common::tasks::call_params(
            "run_script",
            json!({"script": "1", "timeout_seconds": 30}),
            Some(json!({crate::common::tasks::TASK_META_KEY: true})),
        ))
        .await;
    let text = match queued {
        Err(error) => error.to_string(),
        Ok(other) => panic!("a task-augmented run_script was not refused: {other:?}"),
    };
    names_the_fix("run_script as a task", &text);
    let error = get_task(tasks.peer(), &unknown)
        .await
        .expect_err("tasks/get refused");
    names_the_fix("tasks/get", &error.to_string());

    drop(locked);
    let answer = call(
        &server,
        "run_script",
        json!({"script": "40 + 2", "timeout_seconds": 30}),
    )
    .await;
    let result = structured(&answer);
    assert_eq!(result["status"], "success", "{result}");
    let id = result["task_id"].as_str().expect("task_id");
    let entry = listed(&server, id).await.expect("listed once writable");
    assert_eq!(entry["status"], "success", "{entry}");
    assert!(root.join("tasks.db").exists());
    let created = crate::common::tasks::start_task(
        tasks.peer(),
        "run_script",
        json!({"script": "1", "timeout_seconds": 30}),
        None,
    )
    .await;
    let answers =
        crate::common::tasks::poll_until_ended(tasks.peer(), &created.task.task_id, Duration::from_secs(30))
            .await;
    let last = answers.last().expect("an answer");
    assert!(
        crate::common::tasks::has_status(last, rmcp::model::TaskStatus::Completed),
        "{last:?}"
    );
    // The event log, which could not be opened at start, opens with later records (at most
    // one attempt per EVENTS_REOPEN_INTERVAL, 5 s).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let answer = call(&server, "add_pure", json!({"a": 1, "b": 2})).await;
        assert!(!is_error(&answer), "{answer:?}");
        if !read_jsonl(&root.join("events.jsonl")).is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "events.jsonl never opened");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A tmpfs of `size` mounted at `dir`, or why not.
fn small_disk(dir: &Path, size: &str) -> Result<Mounted, String> {
    if !is_root() {
        return Err("mounting a tmpfs needs root".into());
    }
    let path = dir.to_str().expect("utf-8 path");
    mount(&[
        "-t",
        "tmpfs",
        "-o",
        &format!("size={size},mode=0700"),
        "tmpfs",
        path,
    ])?;
    Ok(Mounted(dir.to_path_buf()))
}

/// Keeps the file system of a directory full: `filler` takes every byte,
/// and a thread takes back any page the server frees (a temporary file it
/// removes after a failed write), so the disk stays full until [`Filler::free`].
struct Filler {
    path: PathBuf,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Filler {
    fn start(dir: &Path) -> Filler {
        use std::io::Write;
        let path = dir.join("filler");
        let mut file = std::fs::File::create(&path).expect("filler");
        for chunk in [1 << 20, 4096, 1] {
            let bytes = vec![0u8; chunk];
            while file.write_all(&bytes).is_ok() {}
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let page = vec![0u8; 4096];
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                if file.write_all(&page).is_err() && file.write_all(&page[..1]).is_err() {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        });
        Filler {
            path,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops taking space and frees it all.
    fn free(mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        std::fs::remove_file(&self.path).expect("free space");
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Starts a task whose end comes while the disk is full: it calls a
/// guard, writes an artifact and sleeps; the disk fills once its worker
/// started. Returns the answer (after the task ended) and the filler.
async fn task_ending_on_a_full_disk(server: &StdioServer, root: &Path) -> (Value, Filler) {
    let script =
        r#"add_pure(#{a: 1.0, b: 2.0}); write_artifact("a.txt", "x"); sleep_in_process(#{millis: 2500}); 42"#;
    let answer = call(
        server,
        "run_script",
        json!({"script": script, "timeout_seconds": 60}),
    );
    let filler = async {
        let started = eventually(Duration::from_secs(20), || {
            read_jsonl(&root.join("events.jsonl"))
                .iter()
                .any(|e| e["event"] == "task_worker_started")
        })
        .await;
        assert!(started, "the task's worker did not start");
        Filler::start(root)
    };
    let (answer, filler) = tokio::join!(answer, filler);
    (structured(&answer), filler)
}

/// Every file under `root`: no temporary file left, and every JSON file
/// and JSON-lines log whole (no empty or torn file).
fn files_are_whole(root: &Path) {
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).expect("stat");
        if meta.is_dir() {
            stack.extend(
                std::fs::read_dir(&path)
                    .expect("list")
                    .flatten()
                    .map(|e| e.path()),
            );
            continue;
        }
        let name = path
            .file_name()
            .expect("a file name")
            .to_string_lossy()
            .into_owned();
        assert!(
            !name.starts_with(".warden-tmp-"),
            "temporary file left: {}",
            path.display()
        );
        if name.ends_with(".json") {
            let text = std::fs::read_to_string(&path).expect("read");
            let parsed: Result<Value, _> = serde_json::from_str(&text);
            assert!(parsed.is_ok(), "{} is not whole JSON: {text:?}", path.display());
        }
        if name.starts_with("events.jsonl") {
            let text = std::fs::read_to_string(&path).expect("read");
            assert!(
                text.is_empty() || text.ends_with('\n'),
                "{} ends mid-record",
                path.display()
            );
            for line in text.lines() {
                let parsed: Result<Value, _> = serde_json::from_str(line);
                assert!(parsed.is_ok(), "{}: torn record {line:?}", path.display());
            }
        }
    }
}

#[tokio::test]
async fn a_task_ending_on_a_full_disk_reaches_its_terminal_state_once_space_is_freed() {
    // result.json and the record cannot be written: the client is told failed/storage, reads
    // show `failed` (never `running`) while the disk is full, and once space is freed the record
    // and result.json are written; a new server on the same store reads `failed`/storage. No file
    // is left empty, torn or temporary.
    let base = tempfile::tempdir().expect("temp dir");
    let root = base.path().join("artifacts");
    std::fs::create_dir(&root).expect("artifacts dir");
    let _disk = match small_disk(&root, "16m") {
        Ok(disk) => disk,
        Err(reason) => {
            eprintln!("skipped: cannot make a small file system here: {reason}");
            return;
        }
    };
    let mut server = StdioServer::start(TESTBED, &root, &[], false).await;
    let (result, filler) = task_ending_on_a_full_disk(&server, &root).await;
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["error"]["kind"], "storage", "{result}");
    let id = result["task_id"].as_str().expect("task_id").to_string();
    let dir = root.join(result["task_dir"].as_str().expect("task_dir"));
    assert!(
        !dir.join("result.json").exists(),
        "the disk was not full when the task ended: its result.json was written"
    );

    let entry = listed(&server, &id).await.expect("listed");
    assert_eq!(entry["status"], "failed", "while the disk is full: {entry}");
    let answer = call(&server, "get_task_result", json!({"task_id": id})).await;
    assert_ne!(
        structured(&answer)["status"],
        "running",
        "while the disk is full: {answer:?}"
    );

    filler.free();
    let saved = eventually(Duration::from_secs(15), || dir.join("result.json").exists()).await;
    assert!(saved, "result.json was not written once space was freed");
    let answer = call(&server, "get_task_result", json!({"task_id": id})).await;
    let saved = &structured(&answer)["result"];
    assert_eq!(saved["status"], "failed", "{saved}");
    assert_eq!(saved["error"]["kind"], "storage", "{saved}");
    files_are_whole(&root);

    // The ending is in the store, not only in the first server's memory: a new server (whose
    // client declares MCP tasks, for tasks/get) reads it.
    server.kill().await;
    let again = StdioServer::start(TESTBED, &root, &[], true).await;
    let entry = listed(&again, &id).await.expect("listed after restart");
    assert_eq!(entry["status"], "failed", "{entry}");
    let answer = call(&again, "get_task_result", json!({"task_id": id})).await;
    assert_eq!(
        structured(&answer)["result"]["error"]["kind"],
        "storage",
        "{answer:?}"
    );
    let got = get_task(again.peer(), &id).await.expect("tasks/get");
    assert!(got.task.status().is_terminal(), "tasks/get: {got:?}");
}

#[tokio::test]
async fn a_task_whose_server_died_while_the_disk_was_full_is_settled_at_the_next_start() {
    // The server is killed while the task's ending waits for space: the next server (space
    // freed) ends the record `failed`/`interrupted` and writes its result.json.
    let base = tempfile::tempdir().expect("temp dir");
    let root = base.path().join("artifacts");
    std::fs::create_dir(&root).expect("artifacts dir");
    let _disk = match small_disk(&root, "16m") {
        Ok(disk) => disk,
        Err(reason) => {
            eprintln!("skipped: cannot make a small file system here: {reason}");
            return;
        }
    };
    let mut server = StdioServer::start(TESTBED, &root, &[], false).await;
    let (result, filler) = task_ending_on_a_full_disk(&server, &root).await;
    assert_eq!(result["status"], "failed", "{result}");
    let id = result["task_id"].as_str().expect("task_id").to_string();
    let dir = root.join(result["task_dir"].as_str().expect("task_dir"));
    assert!(
        !dir.join("result.json").exists(),
        "the disk was not full when the task ended: its result.json was written"
    );
    server.kill().await;
    filler.free();

    let again = StdioServer::start(TESTBED, &root, &[], false).await;
    let entry = listed(&again, &id).await.expect("listed after restart");
    assert_eq!(entry["status"], "failed", "{entry}");
    let answer = call(&again, "get_task_result", json!({"task_id": id})).await;
    let saved = &structured(&answer)["result"];
    assert_eq!(saved["status"], "failed", "{answer:?}");
    assert!(
        ["interrupted", "storage"].contains(&saved["error"]["kind"].as_str().unwrap_or_default()),
        "{saved}"
    );
    assert!(dir.join("result.json").exists());
    files_are_whole(&root);
}

#[tokio::test]
async fn a_store_that_opens_late_delays_only_the_task_tools() {
    // tasks.db held under an exclusive lock by another connection: the store cannot open
    // until it is released. The server still initializes and answers a guard; a run_script
    // started meanwhile waits for the same opening and succeeds once the lock is gone.
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("tasks.db");
    let holder = rusqlite::Connection::open(&db).expect("open tasks.db");
    holder.execute_batch("BEGIN EXCLUSIVE").expect("lock tasks.db");
    let server = StdioServer::start(FINANCE, dir.path(), &[], false).await;
    let quote = call(&server, "get_quote", json!({"symbol": "AAPL"})).await;
    assert!(!is_error(&quote), "a guard while the store is locked: {quote:?}");

    let peer = server.peer().clone();
    let script = tokio::spawn(async move {
        peer.call_tool(
            rmcp::model::CallToolRequestParams::new("run_script").with_arguments(
                json!({"script": "40 + 2", "timeout_seconds": 30})
                    .as_object()
                    .expect("object")
                    .clone(),
            ),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !script.is_finished(),
        "run_script answered before the store could open"
    );
    holder.execute_batch("COMMIT").expect("unlock tasks.db");
    drop(holder);
    let answer = tokio::time::timeout(Duration::from_secs(30), script)
        .await
        .expect("answered once the store opened")
        .expect("join")
        .expect("tools/call answered");
    let result = structured(&answer);
    assert_eq!(result["status"], "success", "{result}");
    let id = result["task_id"].as_str().expect("task_id");
    assert!(listed(&server, id).await.is_some(), "the task is recorded");
}
