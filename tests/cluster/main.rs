//! Several Warden nodes sharing PostgreSQL and S3-compatible storage
//! (issue 14): `serve --http` nodes on one database and one bucket, as
//! behind a load balancer. Needs the servers `scripts/test` starts
//! (`WARDEN_TEST_DATABASE_URL`, `WARDEN_TEST_S3_URL` and the `AWS_*`
//! variables). One test at a time: some restart the database.
//!
//! A test binary of its own: cargo runs test binaries one after another,
//! so these CPU-heavy runs (hundreds of sandboxed workers on three nodes)
//! never overlap the timing-sensitive tests of `it`.
//!
//! `balancer` runs `deploy/nginx.conf` in front of three nodes; it needs
//! nginx (`scripts/with-nginx`, run by `scripts/test`), not PostgreSQL or S3.

// The shared helpers of `it` hold more than these tests use.
#![allow(dead_code)]

#[path = "../it/common/mod.rs"]
mod common;
#[path = "../it/fake_model.rs"]
mod fake_model;

mod balancer;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rmcp::model::ClientConfig;
use rmcp::service::{ClientLifecycleMode, RoleClient, RunningService};
use serde_json::{Value, json};
use sqlx::Connection;

use common::http::{HttpServer, PRINCIPALS};
use common::tasks::{cancel_task, client_config, get_task, start_task, wire};
use common::{ENDLESS, FINANCE, TESTBED, read_jsonl, structured};

/// One cluster test at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A variable `scripts/test` sets, or a failure saying to use it.
fn required(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is unset: run the tests with scripts/test, which starts PostgreSQL and S3 on loopback")
    })
}

/// A fresh database on the test cluster; its URL.
async fn fresh_database() -> String {
    let admin = required("WARDEN_TEST_DATABASE_URL");
    let name = format!("warden_c_{}", uuid_hex());
    let mut conn = sqlx::PgConnection::connect(&admin)
        .await
        .expect("connect to the test cluster");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("create database");
    let base = admin
        .rsplit_once('/')
        .map(|(base, _)| base)
        .expect("a database in the URL");
    format!("{base}/{name}")
}

fn uuid_hex() -> String {
    format!("{:032x}", rand_u128())
}

fn rand_u128() -> u128 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    nanos ^ (u128::from(std::process::id()) << 64)
}

/// Nodes on one fresh database and one fresh S3 prefix, with alice's and
/// bob's API tokens.
struct Cluster {
    /// The server every node runs (the example app unless a test says).
    binary: &'static str,
    nodes: Vec<HttpServer>,
    database: String,
    env: Vec<(String, String)>,
    _tokens: tempfile::TempDir,
}

impl Cluster {
    async fn start(count: usize, extra: &[(&str, &str)]) -> Cluster {
        Self::start_with(FINANCE, count, extra).await
    }

    /// [`Cluster::start`] with every node running `binary`.
    async fn start_with(binary: &'static str, count: usize, extra: &[(&str, &str)]) -> Cluster {
        let database = fresh_database().await;
        let store = format!("{}/{}", required("WARDEN_TEST_S3_URL"), uuid_hex());
        let tokens = tempfile::tempdir().expect("temp dir");
        let file = common::http::tokens_file(tokens.path());
        let mut env: Vec<(String, String)> = vec![
            ("WARDEN_DATABASE_URL".into(), database.clone()),
            ("WARDEN_ARTIFACT_STORE".into(), store),
            ("WARDEN_API_TOKENS_FILE".into(), file),
            ("WARDEN_CALLS_PER_MINUTE".into(), "1000000".into()),
            ("WARDEN_TASKS_PER_PRINCIPAL".into(), "1000".into()),
        ];
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let mut cluster = Cluster {
            binary,
            nodes: Vec::new(),
            database,
            env,
            _tokens: tokens,
        };
        for _ in 0..count {
            cluster.add_node().await;
        }
        cluster
    }

    async fn add_node(&mut self) {
        let id = format!("node-{}", self.nodes.len());
        let mut env: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        env.push(("WARDEN_NODE_ID", id.as_str()));
        self.nodes.push(HttpServer::start(self.binary, &env).await);
    }

    /// A session client of `who` on node `n`, declaring the tasks extension.
    async fn client(&self, n: usize, who: &str) -> RunningService<RoleClient, ClientConfig> {
        self.nodes[n]
            .client_with(
                client_config(true),
                Some(token(who)),
                ClientLifecycleMode::Initialize,
            )
            .await
            .expect("initialize over HTTP")
    }

    /// A session client of `who` on node `n` that does not declare tasks.
    async fn plain_client(&self, n: usize, who: &str) -> RunningService<RoleClient, ClientConfig> {
        self.nodes[n]
            .client_with(
                client_config(false),
                Some(token(who)),
                ClientLifecycleMode::Initialize,
            )
            .await
            .expect("initialize over HTTP")
    }

    /// `SELECT id, state, node FROM tasks`, by id.
    async fn records(&self) -> HashMap<String, (String, String)> {
        let mut conn = sqlx::PgConnection::connect(&self.database)
            .await
            .expect("connect");
        let rows: Vec<(String, String, String)> = sqlx::query_as("SELECT id, state, node FROM tasks")
            .fetch_all(&mut conn)
            .await
            .expect("records");
        rows.into_iter()
            .map(|(id, state, node)| (id, (state, node)))
            .collect()
    }
}

fn token(who: &str) -> &'static str {
    PRINCIPALS
        .iter()
        .find(|(name, _, _)| *name == who)
        .map(|(_, token, _)| *token)
        .expect("a test principal")
}

/// Polls `tasks/get` until the task ended, tolerating failed polls (a
/// database restarting) until `limit`.
async fn ended(client: &RunningService<RoleClient, ClientConfig>, id: &str, limit: Duration) -> Value {
    let start = Instant::now();
    loop {
        if let Ok(answer) = get_task(client, id).await
            && answer.task.status().is_terminal()
        {
            return wire(&answer);
        }
        assert!(start.elapsed() < limit, "task {id} did not end within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn call<H: rmcp::ClientHandler>(
    client: &RunningService<RoleClient, H>,
    tool: &str,
    arguments: Value,
) -> Value {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let result = client
        .call_tool(rmcp::model::CallToolRequestParams::new(tool.to_string()).with_arguments(arguments))
        .await
        .expect("tools/call");
    let mut value = structured(&result);
    value["isError"] = json!(result.is_error.unwrap_or(false));
    value
}

#[tokio::test]
async fn three_nodes_run_200_tasks_once_each_and_every_node_reads_every_result() {
    let _one = ONE_AT_A_TIME.lock().await;
    let cluster = Cluster::start(3, &[("WARDEN_MAX_CONCURRENT_TASKS", "2")]).await;
    let mut clients = Vec::new();
    for n in 0..3 {
        clients.push([cluster.client(n, "alice").await, cluster.client(n, "bob").await]);
    }
    let owner = |k: usize| k % 2;
    let mut ids = Vec::new();
    for k in 0..200 {
        let script = format!(r#"write_artifact("out.txt", "task-{k}"); {k}"#);
        let task = start_task(
            &clients[k % 3][owner(k)],
            "run_script",
            json!({"script": script}),
            None,
        )
        .await;
        ids.push(task.task.task_id);
    }
    for (k, id) in ids.iter().enumerate() {
        // Polled on another node than the one that took the call.
        let answer = ended(&clients[(k + 1) % 3][owner(k)], id, Duration::from_secs(180)).await;
        assert_eq!(answer["status"], "completed", "{answer}");
        let result = &answer["result"]["structuredContent"];
        assert_eq!(result["status"], "success", "{answer}");
        assert_eq!(result["value"], json!(k), "{answer}");
    }
    // Each ran exactly once: one worker start per task over all nodes' event logs.
    let mut starts: HashMap<String, usize> = HashMap::new();
    for node in &cluster.nodes {
        for event in read_jsonl(&node.artifacts.path().join("events.jsonl")) {
            if event["event"] == "task_worker_started" {
                *starts
                    .entry(event["task_id"].as_str().unwrap_or_default().to_string())
                    .or_default() += 1;
            }
        }
    }
    for id in &ids {
        assert_eq!(
            starts.get(id),
            Some(&1),
            "task {id} started {:?} times",
            starts.get(id)
        );
    }
    let records = cluster.records().await;
    let ran_on: std::collections::BTreeSet<&str> = ids
        .iter()
        .map(|id| records[id].1.split('/').next().unwrap_or_default())
        .collect();
    assert_eq!(ran_on.len(), 3, "every node took tasks: {ran_on:?}");
    // Every result and file from every node, with its owner's credentials only.
    for (k, id) in ids.iter().enumerate().step_by(7) {
        for node in &clients {
            let mine = call(&node[owner(k)], "get_task_result", json!({"task_id": id})).await;
            assert_eq!(mine["result"]["status"], "success", "{mine}");
            let file = call(
                &node[owner(k)],
                "read_artifact",
                json!({"task_id": id, "filename": "outputs/out.txt"}),
            )
            .await;
            assert_eq!(file["content"], format!("task-{k}"), "{file}");
            let theirs = call(&node[1 - owner(k)], "get_task_result", json!({"task_id": id})).await;
            assert_eq!(theirs["error"]["code"], "not_found", "{theirs}");
        }
    }
}

#[tokio::test]
async fn a_killed_nodes_tasks_are_interrupted_within_the_lease_and_nothing_else_changes() {
    let _one = ONE_AT_A_TIME.lock().await;
    let lease = 3;
    let mut cluster = Cluster::start(1, &[("WARDEN_TASK_LEASE_SECONDS", "3")]).await;
    let first = cluster.client(0, "alice").await;
    let quick = start_task(&first, "run_script", json!({"script": "1 + 1"}), None)
        .await
        .task
        .task_id;
    assert_eq!(
        ended(&first, &quick, Duration::from_secs(30)).await["status"],
        "completed"
    );
    let endless = json!({"script": ENDLESS, "timeout_seconds": 120});
    let mut running = Vec::new();
    for _ in 0..2 {
        running.push(
            start_task(&first, "run_script", endless.clone(), None)
                .await
                .task
                .task_id,
        );
    }
    let start = Instant::now();
    while !running.iter().all(|id| cluster.records_sync_running(id)) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the tasks never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster.add_node().await;
    let other = cluster.client(1, "alice").await;
    let _ = cluster.nodes[0].child.start_kill();
    let killed = Instant::now();
    for id in &running {
        let answer = ended(&other, id, Duration::from_secs(lease + 10)).await;
        assert_eq!(answer["status"], "failed", "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("interrupted"),
            "{answer}"
        );
    }
    let took = killed.elapsed();
    eprintln!("interrupted {took:?} after the kill (lease {lease} s)");
    assert!(
        took <= Duration::from_secs(lease + 1) + Duration::from_millis(500),
        "interrupted after {took:?}, lease {lease} s"
    );
    let answer = ended(&other, &quick, Duration::from_secs(5)).await;
    assert_eq!(
        answer["status"], "completed",
        "the finished task is unchanged: {answer}"
    );
}

#[tokio::test]
async fn a_killed_nodes_destructive_call_is_named_by_the_node_that_ends_its_task() {
    // Node 0 runs a destructive guard as an MCP task and is killed mid-call. Node 1 cannot read
    // node 0's directory; it finds the call in the database, where node 0 recorded it before the
    // function ran, and ends the task naming it. A node started later reads the same from S3.
    let _one = ONE_AT_A_TIME.lock().await;
    let lease = 3;
    let mut cluster = Cluster::start_with(TESTBED, 1, &[("WARDEN_TASK_LEASE_SECONDS", "3")]).await;
    let first = cluster.client(0, "alice").await;
    let arguments = json!({"record": "ledger-7"});
    let id = start_task(&first, "wipe_scratch_slowly", arguments.clone(), None)
        .await
        .task
        .task_id;
    let start = Instant::now();
    while cluster.side_effects(&id).await.is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the call's start was never recorded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let recorded = cluster.side_effects(&id).await;
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0]["status"], "unknown", "{recorded:?}");
    // Two nodes outlive it: both heartbeats find the lapsed lease, one ends the task.
    cluster.add_node().await;
    cluster.add_node().await;
    let other = cluster.client(1, "alice").await;
    let _ = cluster.nodes[0].child.start_kill();
    let answer = ended(&other, &id, Duration::from_secs(lease + 10)).await;
    let sha = {
        use sha2::Digest;
        format!(
            "sha256:{:x}",
            sha2::Sha256::digest(arguments.to_string().as_bytes())
        )
    };
    let named = |answer: &Value| {
        assert_eq!(answer["status"], "failed", "{answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("stopped renewing its lease")
                && message.contains("wipe_scratch_slowly (unknown)"),
            "{answer}"
        );
        let shown = &answer["error"]["data"]["side_effects"];
        assert_eq!(shown.as_array().map(Vec::len), Some(1), "{answer}");
        assert_eq!(shown[0]["function"], "wipe_scratch_slowly", "{answer}");
        assert_eq!(shown[0]["status"], "unknown", "{answer}");
        assert_eq!(
            shown[0]["arguments_sha256"],
            sha.as_str(),
            "the call recorded is the call made"
        );
    };
    named(&answer);
    let second = cluster.client(2, "alice").await;
    named(&ended(&second, &id, Duration::from_secs(5)).await);
    // A node started later reads the task's copy in the bucket.
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.add_node().await;
    let later = cluster.client(3, "alice").await;
    named(&ended(&later, &id, Duration::from_secs(5)).await);
}

#[tokio::test]
async fn a_destructive_call_the_database_cannot_record_does_not_run() {
    // The person approves a script's deletion while the database goes down: the call's start
    // cannot be recorded, so it does not run (side_effect_unrecorded), and the script is told.
    let _one = ONE_AT_A_TIME.lock().await;
    let control = required("WARDEN_TEST_PG_RESTART");
    let cluster = Cluster::start_with(TESTBED, 1, &[]).await;
    let stop = control.clone();
    let approver = common::approver::Approver::approving_after(move || {
        let stopped = std::process::Command::new("sh")
            .args(["-c", &format!("{stop} stop")])
            .status()
            .expect("stop the database");
        assert!(stopped.success(), "the stop command failed");
    });
    let client = cluster.nodes[0]
        .client_with(
            approver.clone(),
            Some(token("alice")),
            ClientLifecycleMode::Initialize,
        )
        .await
        .expect("initialize over HTTP");
    let script = r#"let r = wipe_scratch(#{record: "ledger-9"}); r"#;
    let asked = Instant::now();
    let answer = call(
        &client,
        "run_script",
        json!({"script": script, "timeout_seconds": 60}),
    )
    .await;
    // The call's start waited for a connection (5 s), the task's ending for at most 6 s more.
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(25), "answered after {took:?}");
    let started = tokio::process::Command::new("sh")
        .args(["-c", &format!("{control} start")])
        .status()
        .await
        .expect("start the database");
    assert!(started.success(), "the start command failed");
    assert_eq!(approver.forms().len(), 1, "asked once");
    let text = answer.to_string();
    assert!(
        text.contains("side_effect_unrecorded") && text.contains("did not run"),
        "{answer}"
    );
    assert_ne!(answer["status"], "success", "{answer}");
    // Once the database is back the record ends as the answer did (a heartbeat writes the
    // ending it could not take), and nothing of the call is there: no start, so no end either.
    let task = answer["task_id"].as_str().expect("a task id").to_string();
    let start = Instant::now();
    loop {
        if let Ok(mut conn) = sqlx::PgConnection::connect(&cluster.database).await {
            let state: Option<String> = sqlx::query_scalar("SELECT state FROM tasks WHERE id = $1")
                .bind(&task)
                .fetch_optional(&mut conn)
                .await
                .expect("state");
            if state.as_deref() == Some("failed") {
                let rows: i64 =
                    sqlx::query_scalar("SELECT COUNT(*) FROM task_side_effects WHERE task_id = $1")
                        .bind(&task)
                        .fetch_one(&mut conn)
                        .await
                        .expect("count");
                assert_eq!(rows, 0);
                break;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the record did not end once the database was back"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl Cluster {
    /// The side effects task `id` recorded in the database, in order.
    async fn side_effects(&self, id: &str) -> Vec<Value> {
        let mut conn = sqlx::PgConnection::connect(&self.database)
            .await
            .expect("connect");
        let rows: Vec<String> =
            sqlx::query_scalar("SELECT side_effect FROM task_side_effects WHERE task_id = $1 ORDER BY seq")
                .bind(id)
                .fetch_all(&mut conn)
                .await
                .expect("side effects");
        rows.iter()
            .map(|text| serde_json::from_str(text).expect("JSON"))
            .collect()
    }
}

impl Cluster {
    /// Whether task `id` is running (from the database), blocking briefly.
    fn records_sync_running(&self, id: &str) -> bool {
        let database = self.database.clone();
        let id = id.to_string();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                let mut conn = sqlx::PgConnection::connect(&database).await.expect("connect");
                let state: Option<String> = sqlx::query_scalar("SELECT state FROM tasks WHERE id = $1")
                    .bind(&id)
                    .fetch_optional(&mut conn)
                    .await
                    .expect("state");
                state.as_deref() == Some("running")
            })
        })
        .join()
        .unwrap_or(false)
    }
}

#[tokio::test]
async fn a_cancel_sent_to_another_node_stops_the_task() {
    let _one = ONE_AT_A_TIME.lock().await;
    let cluster = Cluster::start(2, &[]).await;
    let clients = [cluster.client(0, "alice").await, cluster.client(1, "alice").await];
    let id = start_task(
        &clients[0],
        "run_script",
        json!({"script": ENDLESS, "timeout_seconds": 120}),
        None,
    )
    .await
    .task
    .task_id;
    let start = Instant::now();
    let runner = loop {
        if let Some((state, node)) = cluster.records().await.get(&id)
            && state == "running"
        {
            break node.clone();
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the task never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let other = usize::from(runner.starts_with("node-0"));
    // Its files are not on the other node yet: the answer says where it runs.
    let early = call(&clients[other], "list_artifacts", json!({"task_id": id})).await;
    let message = early["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("has not ended") && message.contains(runner.as_str()),
        "{early}"
    );
    cancel_task(&clients[other], &id).await.expect("tasks/cancel");
    let cancelled = Instant::now();
    let answer = ended(&clients[other], &id, Duration::from_secs(10)).await;
    assert_eq!(answer["status"], "cancelled", "{answer}");
    assert!(
        cancelled.elapsed() < Duration::from_secs(4),
        "took {:?}",
        cancelled.elapsed()
    );
}

#[tokio::test]
async fn the_database_restarted_mid_run_loses_no_record() {
    let _one = ONE_AT_A_TIME.lock().await;
    let restart = required("WARDEN_TEST_PG_RESTART");
    let cluster = Cluster::start(2, &[]).await;
    let clients = [cluster.client(0, "alice").await, cluster.client(1, "bob").await];
    let script = "let x = 0; for i in 0..3000000 { x += 1; } x";
    let mut ids = Vec::new();
    for k in 0..12 {
        ids.push((
            k % 2,
            start_task(&clients[k % 2], "run_script", json!({"script": script}), None)
                .await
                .task
                .task_id,
        ));
    }
    let status = tokio::process::Command::new("sh")
        .args(["-c", &restart])
        .status()
        .await
        .expect("restart the database");
    assert!(status.success(), "the restart command failed");
    for (who, id) in &ids {
        let answer = ended(&clients[*who], id, Duration::from_secs(120)).await;
        assert_eq!(answer["status"], "completed", "{answer}");
        assert_eq!(
            answer["result"]["structuredContent"]["status"], "success",
            "{answer}"
        );
    }
    let records = cluster.records().await;
    for (_, id) in &ids {
        assert_eq!(records.get(id).map(|r| r.0.as_str()), Some("success"), "{id}");
    }
}

#[tokio::test]
async fn the_object_store_down_is_a_clear_error_and_no_success_is_recorded() {
    let _one = ONE_AT_A_TIME.lock().await;
    // An endpoint nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let endpoint = format!("http://127.0.0.1:{port}");
    let cluster = Cluster::start(1, &[("AWS_ENDPOINT_URL", endpoint.as_str())]).await;
    let client = cluster.client(0, "alice").await;
    let id = start_task(
        &client,
        "run_script",
        json!({"script": r#"write_artifact("a.txt", "x"); 1"#}),
        None,
    )
    .await
    .task
    .task_id;
    let answer = ended(&client, &id, Duration::from_secs(60)).await;
    let result = &answer["result"]["structuredContent"];
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(result["status"], "failed", "{answer}");
    assert!(
        result["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("object store"),
        "{answer}"
    );
    assert_eq!(cluster.records().await[&id].0, "failed");
    let ready = reqwest::get(format!("{}/readyz", cluster.nodes[0].base))
        .await
        .expect("readyz");
    assert_eq!(ready.status(), 503);
}

#[tokio::test]
async fn preflight_checks_the_shared_database_and_the_bucket() {
    let _one = ONE_AT_A_TIME.lock().await;
    let database = fresh_database().await;
    let bucket = format!("{}/{}", required("WARDEN_TEST_S3_URL"), uuid_hex());
    let dir = tempfile::tempdir().expect("temp dir");
    let artifacts = dir.path().join("artifacts");
    let artifacts = artifacts.to_string_lossy().into_owned();
    let check = |env: Vec<(&str, &str)>| {
        let mut all = vec![("WARDEN_ARTIFACTS_DIR", artifacts.as_str())];
        all.extend(env);
        common::run_cli(FINANCE, &["--check"], &all, dir.path())
    };
    let good = check(vec![
        ("WARDEN_DATABASE_URL", database.as_str()),
        ("WARDEN_ARTIFACT_STORE", bucket.as_str()),
    ]);
    assert_eq!(good.code, 0, "{good:?}");
    assert!(
        good.stdout
            .contains("PASS  task_store        the PostgreSQL task store"),
        "{good:?}"
    );
    assert!(good.stdout.contains("PASS  object_store"), "{good:?}");
    // Nothing listens on port 1: both fail, naming what to fix.
    let bad = check(vec![
        ("WARDEN_DATABASE_URL", "postgres://warden@127.0.0.1:1/warden"),
        ("WARDEN_ARTIFACT_STORE", bucket.as_str()),
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
    ]);
    assert_ne!(bad.code, 0, "{bad:?}");
    assert!(bad.stdout.contains("FAIL  task_store"), "{bad:?}");
    assert!(bad.stdout.contains("WARDEN_DATABASE_URL"), "{bad:?}");
    assert!(bad.stdout.contains("FAIL  object_store"), "{bad:?}");
}

#[tokio::test]
async fn a_result_read_on_another_node_carries_its_chart_inline() {
    let _one = ONE_AT_A_TIME.lock().await;
    // A bound that takes the ~160 KB of base64 inline: under the default
    // 100,000-byte answer bound the chart comes as a resource_link instead
    // (tests/it/answers.rs), and this test is about the bucket's copy.
    let cluster = Cluster::start(2, &[("WARDEN_MAX_ANSWER_BYTES", "1000000")]).await;
    let clients = [cluster.client(0, "alice").await, cluster.client(1, "alice").await];
    let script = r#"let rows = [#{x: 1.0, y: 2.0}, #{x: 2.0, y: 3.0}, #{x: 3.0, y: 5.0}];
        write_artifact("chart.png", line_chart(rows, #{x: "x", y: "y", title: "t"})); 1"#;
    let id = start_task(&clients[0], "run_script", json!({"script": script}), None)
        .await
        .task
        .task_id;
    let answer = ended(&clients[0], &id, Duration::from_secs(60)).await;
    assert_eq!(
        answer["result"]["structuredContent"]["status"], "success",
        "{answer}"
    );
    let runner = cluster.records().await[&id].1.clone();
    // Asked on the node that did not run it: the PNG comes from the bucket.
    let other = usize::from(runner.starts_with("node-0"));
    let answer = ended(&clients[other], &id, Duration::from_secs(10)).await;
    let content = answer["result"]["content"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        content
            .iter()
            .any(|block| block["type"] == "image" && block["mimeType"] == "image/png"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_batch_on_another_node_reads_an_artifact_column_from_the_bucket() {
    let _one = ONE_AT_A_TIME.lock().await;
    let cluster = Cluster::start(2, &[]).await;
    let writer = cluster.client(0, "alice").await;
    let script = r#"write_artifact("p.csv", "close,vol\n1.5,2\n2.5,3\n"); 1"#;
    let id = start_task(&writer, "run_script", json!({"script": script}), None)
        .await
        .task
        .task_id;
    ended(&writer, &id, Duration::from_secs(60)).await;
    let runner = cluster.records().await[&id].1.clone();
    let other = usize::from(runner.starts_with("node-0"));
    let source = json!({"task_id": id, "filename": "outputs/p.csv"});
    let batch = json!({"calls": [
        {"name": "check_performance", "arguments": {"returns": {"$artifact": source, "column": "close"}}},
    ]});
    let mine = call(
        &cluster.plain_client(other, "alice").await,
        "run_batch",
        batch.clone(),
    )
    .await;
    assert_eq!(mine["status"], "success", "{mine}");
    assert_eq!(mine["calls"][0]["output"]["evidence"]["n_periods"], 2, "{mine}");
    // Bob's batch cannot reach alice's file on any node.
    let theirs = call(&cluster.plain_client(other, "bob").await, "run_batch", batch).await;
    assert_eq!(theirs["isError"], true, "{theirs}");
}

#[tokio::test]
async fn a_daily_token_limit_is_summed_over_every_node_and_usage_reads_postgresql() {
    // Alice's coding tasks on two nodes share one day's total in the
    // database: 135 tokens on node 0, 15 on node 1, and the third task,
    // on node 0, is refused before its model call. The CLI's report reads
    // the same database.
    let _one = ONE_AT_A_TIME.lock().await;
    use fake_model::{FakeModel, GREEKS_ANSWER, Reply};
    let model = FakeModel::start(vec![
        Reply::Counted("Let me think.".into(), 100, 20),
        Reply::Counted(GREEKS_ANSWER.into(), 10, 5),
    ])
    .await;
    let mut extra: Vec<(&str, String)> = model.env();
    extra.push(("WARDEN_PRINCIPAL_DAILY_TOKENS", "150".into()));
    let extra: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let cluster = Cluster::start(2, &extra).await;
    let coding = |node: usize| {
        let cluster = &cluster;
        async move {
            let client = cluster.plain_client(node, "alice").await;
            call(
                &client,
                "run_coding_task",
                json!({"prompt": "delta", "timeout_seconds": 60}),
            )
            .await
        }
    };
    for (node, expected) in [(0, 135), (1, 15)] {
        let result = coding(node).await;
        assert_eq!(result["status"], "success", "{result}");
        assert_eq!(result["usage"]["total_tokens"], expected, "{result}");
    }
    let asked = model.requests().len();
    let refused = coding(0).await;
    assert_eq!(refused["error"]["kind"], "limit", "{refused}");
    assert_eq!(
        model.requests().len(),
        asked,
        "no model call past the daily limit"
    );

    let report = common::usage_report(
        FINANCE,
        &["--days", "1", "--principal", "alice"],
        &[
            ("WARDEN_DATABASE_URL", cluster.database.as_ref()),
            (
                "WARDEN_ARTIFACTS_DIR",
                cluster.nodes[0].artifacts.path().as_os_str(),
            ),
        ],
    );
    let rows = report["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{report}");
    assert_eq!(rows[0]["principal"], "alice");
    assert_eq!(
        (
            &rows[0]["tasks"],
            &rows[0]["model_calls"],
            &rows[0]["total_tokens"]
        ),
        (&json!(2), &json!(3), &json!(150)),
        "{report}"
    );
}

#[tokio::test]
async fn a_task_waiting_for_the_person_is_answered_on_another_node_after_its_node_was_killed() {
    // Issue 40: node 0 runs the task to its question and is killed; node 1
    // shows the same question, takes the answer and resumes the script from
    // its journal (the quote is not fetched again): one ledger line.
    let _one = ONE_AT_A_TIME.lock().await;
    let ledger_dir = tempfile::tempdir().expect("temp dir");
    let ledger = ledger_dir.path().join("ledger.jsonl");
    let mut cluster = Cluster::start(2, &[("WARDEN_FINANCE_LEDGER", ledger.to_str().expect("path"))]).await;
    let first = cluster.client(0, "alice").await;
    let script = r#"let q = get_quote(#{symbol: "AAPL"});
place_paper_order(#{symbol: "AAPL", side: "buy", quantity: 10, limit_price: q.price, client_order_id: "node-ord"});
final_answer(#{task_type: "analysis", summary: "ordered", metrics: #{price: q.price}})"#;
    let id = start_task(
        &first,
        "run_script",
        json!({"script": script, "timeout_seconds": 60}),
        None,
    )
    .await
    .task
    .task_id;
    let start = Instant::now();
    let question = loop {
        let answer = wire(&get_task(&first, &id).await.expect("tasks/get"));
        if answer["status"] == "input_required" {
            break answer["inputRequests"].clone();
        }
        assert!(start.elapsed() < Duration::from_secs(30), "never asked: {answer}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        question["call-1"]["params"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("node-ord"))
    );
    let (state, node) = cluster.records().await.remove(&id).expect("the record");
    assert_eq!(
        (state.as_str(), node.as_str()),
        ("input_required", ""),
        "held by no node"
    );
    let _ = cluster.nodes[0].child.start_kill();

    let other = cluster.client(1, "alice").await;
    let again = wire(&get_task(&other, &id).await.expect("tasks/get on node 1"));
    assert_eq!(again["status"], "input_required", "{again}");
    assert_eq!(again["inputRequests"], question);
    let responses: rmcp::model::InputResponses = std::iter::once((
        "call-1".to_string(),
        json!({"action": "accept", "content": {"confirm": true}}),
    ))
    .collect();
    other
        .update_task(rmcp::model::UpdateTaskParams::new(id.clone(), responses))
        .await
        .expect("tasks/update on node 1");
    let done = ended(&other, &id, Duration::from_secs(30)).await;
    assert_eq!(done["result"]["structuredContent"]["status"], "success", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["receipt"]["approvals"][0]["principal"], "alice",
        "{done}"
    );
    let lines = std::fs::read_to_string(&ledger).expect("the ledger");
    assert_eq!(lines.lines().count(), 1, "{lines}");
    let node = cluster.records().await[&id].1.clone();
    assert!(node.starts_with("node-1/"), "resumed on node 1, not {node}");
    // The quote came from the journal on node 1.
    let log = read_jsonl(&cluster.nodes[1].artifacts.path().join(&id).join("events.jsonl"));
    let started = |guard: &str| {
        log.iter()
            .filter(|e| e["event"] == "function_call_started" && e["function"] == guard)
            .count()
    };
    assert_eq!((started("get_quote"), started("place_paper_order")), (0, 1));
    // The order is in the database too, with the answer that let it run (its end is written
    // without a wait: give it a moment).
    let start = Instant::now();
    let recorded = loop {
        let recorded = cluster.side_effects(&id).await;
        if recorded.iter().all(|r| r["status"] != "unknown") || start.elapsed() > Duration::from_secs(5) {
            break recorded;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0]["function"], "place_paper_order");
    assert_eq!(recorded[0]["status"], "success");
    assert_eq!(recorded[0]["approval"]["key"], "call-1", "{recorded:?}");
    assert_eq!(recorded[0]["approval"]["principal"], "alice", "{recorded:?}");
    assert_eq!(recorded[0]["approval"]["action"], "accept", "{recorded:?}");
}
