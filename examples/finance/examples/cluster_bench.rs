//! Cluster bench (issue 14): Warden nodes sharing one PostgreSQL task store.
//!
//! ```sh
//! cargo build --release -p warden-finance && \
//!   scripts/with-postgres cargo run --release -p warden-finance --example cluster_bench [-- --tasks 120]
//! ```
//!
//! (a) Claim latency: `PgStore` directly on a fresh database, 1,000 queued
//! tasks taken by one claimer, then 1,000 by three concurrent claimers (three
//! pools, as three nodes): each `claim` timed. (b) Submit → start and (c)
//! throughput: 1, 2 and 3 release `warden-finance` nodes (stdio servers on
//! the same fresh database, each with its default two task slots), each with
//! a client declaring the tasks extension; `--tasks` (120) trivial
//! `run_script` tasks submitted round-robin over the nodes, polled to their
//! end: first 30 one at a time (each waited for), then all at once.
//! Submit → start is the time between a task's `task_queued` event (the
//! node that took the call) and its `task_created` event (the node that
//! claimed it: its directory and worker set up). Throughput is tasks ended
//! per second, with its ratio to one node. This machine has 2 cores: every
//! node shares them, so more nodes add claimers, not CPU.

// A bench: any failure should stop it loudly.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, GetTaskParams, Implementation,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use sqlx::Connection;
use warden::Principal;
use warden::cluster::postgres::PgStore;
use warden::task_store::{State, TaskRecord, TaskStore, now_ms};

fn arg(name: &str, default: usize) -> usize {
    let mut args = std::env::args().skip_while(|a| a != name).skip(1);
    args.next().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn ms(samples: &[Duration], q: f64) -> f64 {
    let i = ((samples.len() as f64 * q) as usize).min(samples.len() - 1);
    samples[i].as_secs_f64() * 1000.0
}

fn row(name: &str, samples: &mut [Duration]) {
    samples.sort();
    println!(
        "{name:<48} p50 {:>8.3} ms   p99 {:>8.3} ms   (n={})",
        ms(samples, 0.50),
        ms(samples, 0.99),
        samples.len()
    );
}

/// A fresh database on the cluster `WARDEN_TEST_DATABASE_URL` names.
async fn fresh_database(tag: &str) -> String {
    let admin = std::env::var("WARDEN_TEST_DATABASE_URL")
        .expect("WARDEN_TEST_DATABASE_URL is unset: run this under scripts/with-postgres");
    let name = format!("warden_bench_{tag}_{}", std::process::id());
    let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name}"))
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .unwrap();
    let base = admin.rsplit_once('/').unwrap().0;
    format!("{base}/{name}")
}

#[tokio::main]
async fn main() {
    let tasks = arg("--tasks", 120);
    println!("Cluster bench: PostgreSQL task store; {tasks} tasks per node count");
    claim_latency().await;
    let mut baseline = None;
    for nodes in 1..=3 {
        let rate = run_nodes(nodes, tasks).await;
        let base = *baseline.get_or_insert(rate);
        println!(
            "throughput, {nodes} node(s): {rate:>7.1} tasks/s   ({:.2}× one node)",
            rate / base
        );
    }
}

fn queued(id: String, at: i64) -> TaskRecord {
    TaskRecord {
        id,
        owner: Principal::new("bench").unwrap(),
        tool: "run_script".into(),
        state: State::Queued,
        summary: None,
        status_message: None,
        error: None,
        created_ms: at,
        updated_ms: at,
        ttl_ms: 3_600_000,
        location: String::new(),
        detached: true,
        node: String::new(),
        lease_until_ms: 0,
    }
}

async fn claim_latency() {
    let url = fresh_database("claims").await;
    let mut pools = Vec::new();
    for _ in 0..3 {
        pools.push(PgStore::open(&url).await.unwrap().0);
    }
    let request = json!({"tool": "run_script", "arguments": {"script": "1"}});
    for claimers in [1usize, 3] {
        for i in 0..1_000 {
            let record = queued(format!("task_{claimers}{i:031x}"), now_ms());
            pools[0].enqueue(&record, &request, None, 100_000).await.unwrap();
        }
        let mut handles = Vec::new();
        for (n, pool) in pools.iter().take(claimers).enumerate() {
            let pool = pool.clone();
            handles.push(tokio::spawn(async move {
                let mut samples = Vec::new();
                loop {
                    let started = Instant::now();
                    let claimed = pool
                        .claim(&format!("bench-{n}/1/1"), now_ms(), now_ms() + 60_000)
                        .await
                        .unwrap();
                    if claimed.is_none() {
                        return samples;
                    }
                    samples.push(started.elapsed());
                }
            }));
        }
        let mut samples = Vec::new();
        for handle in handles {
            samples.extend(handle.await.unwrap());
        }
        row(&format!("claim, {claimers} concurrent claimer(s)"), &mut samples);
    }
}

/// A release node: a stdio server on `database`, its client declaring tasks.
async fn node(database: &str, artifacts: &Path, id: usize) -> RunningService<RoleClient, ClientConfig> {
    let binary = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/release/warden-finance");
    let mut command = tokio::process::Command::new(binary);
    command
        .env("WARDEN_ARTIFACTS_DIR", artifacts)
        .env("WARDEN_DATABASE_URL", database)
        .env("WARDEN_NODE_ID", format!("node-{id}"))
        .env("WARDEN_CALLS_PER_MINUTE", "1000000")
        .env_remove("WARDEN_ARTIFACT_STORE")
        .stderr(std::process::Stdio::null());
    let config = ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::new("cluster-bench", "0"),
    );
    config
        .serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap()
}

async fn run_nodes(count: usize, tasks: usize) -> f64 {
    let database = fresh_database(&format!("nodes{count}")).await;
    let dirs: Vec<tempfile::TempDir> = (0..count).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut clients = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        clients.push(node(&database, dir.path(), i).await);
    }
    // Unloaded: one task at a time, each waited for.
    let mut alone = Vec::new();
    for k in 0..UNLOADED {
        let id = submit(&clients[k % count], k).await;
        wait_ended(&clients[k % count], &id).await;
        alone.push((k % count, id));
    }
    // Loaded: every task submitted at once, then waited for.
    let started = Instant::now();
    let mut ids = Vec::new();
    for k in 0..tasks {
        ids.push((k % count, submit(&clients[k % count], k).await));
    }
    for (n, id) in &ids {
        wait_ended(&clients[*n], id).await;
    }
    let rate = tasks as f64 / started.elapsed().as_secs_f64();
    for client in clients {
        let _ = client.cancel().await;
    }
    // Submit → start, from the nodes' event logs.
    let mut queued_at: HashMap<String, i64> = HashMap::new();
    let mut created_at: HashMap<String, i64> = HashMap::new();
    for dir in &dirs {
        let text = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap_or_default();
        for event in text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
            let id = event["task_id"].as_str().unwrap_or_default().to_string();
            let at = humantime::parse_rfc3339(event["timestamp"].as_str().unwrap_or_default())
                .map(|t| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64);
            let Ok(at) = at else { continue };
            match event["event"].as_str() {
                Some("task_queued") => {
                    queued_at.insert(id, at);
                }
                Some("task_created") => {
                    created_at.insert(id, at);
                }
                _ => {}
            }
        }
    }
    let latency = |ids: &[(usize, String)]| -> Vec<Duration> {
        ids.iter()
            .filter_map(|(_, id)| Some(created_at.get(id)? - queued_at.get(id)?))
            .map(|d| Duration::from_millis(d.max(0) as u64))
            .collect()
    };
    row(
        &format!("submit → start, {count} node(s), one at a time"),
        &mut latency(&alone),
    );
    row(
        &format!("submit → start, {count} node(s), {tasks} at once"),
        &mut latency(&ids),
    );
    rate
}

/// Tasks timed one at a time for the unloaded submit → start.
const UNLOADED: usize = 30;

async fn submit(client: &RunningService<RoleClient, ClientConfig>, k: usize) -> String {
    let mut params = CallToolRequestParams::new("run_script");
    params.arguments = json!({"script": format!("{k} + 1")}).as_object().cloned();
    let CallToolResponse::Task(task) = client.call_tool_once(params).await.unwrap() else {
        panic!("expected a task")
    };
    task.task.task_id
}

async fn wait_ended(client: &RunningService<RoleClient, ClientConfig>, id: &str) {
    loop {
        let answer = client.get_task(GetTaskParams::new(id.to_string())).await.unwrap();
        if answer.task.status().is_terminal() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
