//! HTTP transport bench (issue 12): Warden's Streamable HTTP endpoint next
//! to a bare axum JSON echo endpoint, driven by the same load generator in
//! the same run, and the server's memory per idle session.
//!
//! ```sh
//! cargo build --release -p warden-finance && \
//!   cargo run --release -p warden-finance --example http_bench [-- --seconds 5 --clients 50 --sessions 1000]
//! ```
//!
//! `--server PATH` measures another build of the server (`scripts/bench
//! --baseline` runs it for two); `--sessions 0` skips the idle sessions.
//!
//! Throughput and p50/p99 of an in-process guard call (`get_quote`, a
//! stateless 2026-07-28 `tools/call`, so each request stands alone) with 50
//! concurrent keep-alive clients; the same clients POSTing the same-sized
//! JSON to `/echo` on a bare axum server give the baseline. Target: Warden
//! ≥ 0.5× the bare endpoint's throughput. Then 1,000 2025-11-25 sessions are
//! opened and left idle: target ≤ 50 KB of server RSS per session.

// A bench: any failure should stop it loudly.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One load: `clients` loops POSTing `body` to `url` for `seconds`; with
/// `session`, each loop first opens a 2025-11-25 session (not timed) and
/// sends its requests in it.
struct Load {
    url: String,
    body: Value,
    headers: Vec<(&'static str, &'static str)>,
    clients: u64,
    seconds: u64,
    session: bool,
}

impl Load {
    /// Latencies of every request made, sorted.
    async fn run(self) -> Vec<Duration> {
        let Load {
            url,
            body,
            headers,
            clients,
            seconds,
            session,
        } = self;
        let body = body.to_string();
        let until = Instant::now() + Duration::from_secs(seconds);
        let mut loops = Vec::new();
        for _ in 0..clients {
            let (url, body, headers) = (url.clone(), body.clone(), headers.clone());
            loops.push(tokio::spawn(async move {
                let client = reqwest::Client::builder()
                    .pool_max_idle_per_host(1)
                    .build()
                    .unwrap();
                let mut latencies = Vec::new();
                let mut headers: Vec<(&'static str, String)> =
                    headers.iter().map(|(n, v)| (*n, v.to_string())).collect();
                if session {
                    headers.push(("mcp-session-id", open_session(&client, &url).await));
                    headers.push(("mcp-protocol-version", "2025-11-25".into()));
                }
                while Instant::now() < until {
                    let start = Instant::now();
                    let mut request = client
                        .post(&url)
                        .header("content-type", "application/json")
                        .header("accept", "application/json, text/event-stream")
                        .body(body.clone());
                    for (name, value) in &headers {
                        request = request.header(*name, value.as_str());
                    }
                    let response = request.send().await.expect("request");
                    assert!(response.status().is_success(), "{}", response.status());
                    let text = response.text().await.expect("body");
                    assert!(!text.contains("\"isError\":true"), "{text}");
                    latencies.push(start.elapsed());
                }
                latencies
            }));
        }
        let mut all = Vec::new();
        for handle in loops {
            all.extend(handle.await.unwrap());
        }
        all.sort();
        all
    }
}

fn text_arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_string())
}

fn report(name: &str, latencies: &[Duration], seconds: u64) -> f64 {
    let rate = latencies.len() as f64 / seconds as f64;
    let pick = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "{name:<34} {rate:>9.0} req/s   p50 {:>7.3} ms   p99 {:>7.3} ms   ({} requests)",
        pick(0.50).as_secs_f64() * 1000.0,
        pick(0.99).as_secs_f64() * 1000.0,
        latencies.len()
    );
    rate
}

/// Opens a 2025-11-25 session (initialize, initialized); returns its id.
async fn open_session(client: &reqwest::Client, url: &str) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}});
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(initialize.to_string())
        .send()
        .await
        .unwrap();
    let id = response.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let _ = response.text().await;
    client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &id)
        .header("mcp-protocol-version", "2025-11-25")
        .body(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string())
        .send()
        .await
        .unwrap();
    id
}

/// CPU time (user + system) a process has used so far, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) closed by ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<f64>().ok()))
        .sum();
    // USER_HZ is 100 on Linux.
    ticks / 100.0
}

/// Runs one load phase and prints its figures with the CPU each side used
/// per request: the server's (`server_pid`) and the load generator's (this
/// process). CPU per request does not depend on how the two cores were
/// shared, so it places the cost where throughput alone cannot.
async fn phase(name: &str, server_pid: u32, load: Load) -> f64 {
    let seconds = load.seconds;
    let (server_before, own_before) = (cpu_seconds(server_pid), cpu_seconds(std::process::id()));
    let latencies = load.run().await;
    let (server_after, own_after) = (cpu_seconds(server_pid), cpu_seconds(std::process::id()));
    let rate = report(name, &latencies, seconds);
    let per = |cpu: f64| cpu * 1e6 / latencies.len().max(1) as f64;
    println!(
        "{:<34} server CPU {:>6.1} us/request, load generator {:>6.1} us/request",
        "",
        per(server_after - server_before),
        per(own_after - own_before)
    );
    rate
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// `--serve-echo`: the bare axum JSON echo endpoint; prints its URL.
fn serve_echo() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let echo = axum::Router::new().route(
            "/echo",
            axum::routing::post(|axum::Json(v): axum::Json<Value>| async move { axum::Json(v) }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("http://{}/echo", listener.local_addr().unwrap());
        axum::serve(listener, echo).await.unwrap();
    });
}

fn main() {
    if std::env::args().any(|a| a == "--serve-echo") {
        return serve_echo();
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench());
}

async fn bench() {
    let seconds = arg("--seconds", 5);
    let clients = arg("--clients", 50);
    let sessions = arg("--sessions", 1000);
    let exe = std::env::current_exe().unwrap();
    let sibling = exe.parent().unwrap().parent().unwrap().join("warden-finance");
    let server_bin = std::path::PathBuf::from(text_arg("--server", &sibling.to_string_lossy()));
    assert!(
        server_bin.exists(),
        "build it first: cargo build --release -p warden-finance"
    );

    // The bare endpoint runs in a process of its own with Warden's runtime
    // shape (two worker threads), so both servers meet the load the same way.
    let mut echo = tokio::process::Command::new(&exe)
        .arg("--serve-echo")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut echo_lines = BufReader::new(echo.stdout.take().unwrap()).lines();
    let echo_url = echo_lines.next_line().await.unwrap().expect("echo address");

    let artifacts = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(&server_bin)
        .args(["serve", "--http", "127.0.0.1:0"])
        .env("WARDEN_ARTIFACTS_DIR", artifacts.path())
        .env("WARDEN_MAX_CONCURRENT_CALLS", "64")
        .env("WARDEN_ADMISSION_QUEUE", "4096")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines.next_line().await.unwrap().expect("server line");
        if let Some(at) = line.find("http://") {
            break line[at..].split_whitespace().next().unwrap().to_string();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    // `--capabilities JSON`: what the client declares (e.g. `{"elicitation": {}}`, as most do).
    let capabilities: Value =
        serde_json::from_str(&text_arg("--capabilities", "{}")).expect("--capabilities JSON");
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": capabilities});
    // `--tool NAME --arguments JSON` measures another tool (default: the in-process get_quote).
    let tool: &'static str = Box::leak(text_arg("--tool", "get_quote").into_boxed_str());
    let arguments: Value =
        serde_json::from_str(&text_arg("--arguments", r#"{"symbol": "AAPL"}"#)).expect("--arguments JSON");
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": tool, "arguments": arguments, "_meta": meta}});
    let headers = vec![
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
    ];
    println!("HTTP bench: {clients} concurrent clients, {seconds} s each, loopback");
    // Warm both up, then measure each in turn.
    for (url, headers) in [(echo_url.clone(), vec![]), (url.clone(), headers.clone())] {
        let warm = Load {
            url,
            body: call.clone(),
            headers,
            clients,
            seconds: 1,
            session: false,
        };
        warm.run().await;
    }
    let echo_pid = echo.id().unwrap();
    let bare = phase(
        "bare axum JSON echo",
        echo_pid,
        Load {
            url: echo_url,
            body: call.clone(),
            headers: vec![],
            clients,
            seconds,
            session: false,
        },
    )
    .await;
    let stateless = phase(
        &format!("warden {tool} (2026-07-28 stateless)"),
        pid,
        Load {
            url: url.clone(),
            body: call.clone(),
            headers: headers.clone(),
            clients,
            seconds,
            session: false,
        },
    )
    .await;
    let in_session = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                            "params": {"name": tool, "arguments": call["params"]["arguments"].clone()}});
    // `--ping`: MCP `ping` in sessions, answered by rmcp without Warden's
    // handler: the transport's own ceiling on this machine.
    let in_session = if std::env::args().any(|a| a == "--ping") {
        json!({"jsonrpc": "2.0", "id": 7, "method": "ping"})
    } else {
        in_session
    };
    let sessions_rate = phase(
        &format!("warden {tool} (2025-11-25 sessions)"),
        pid,
        Load {
            url: url.clone(),
            body: in_session,
            headers: vec![],
            clients,
            seconds,
            session: true,
        },
    )
    .await;
    println!(
        "throughput ratio warden/bare: stateless {:.2}, sessions {:.2} (target >= 0.5)",
        stateless / bare,
        sessions_rate / bare
    );

    // Idle sessions.
    if sessions == 0 {
        let _ = child.kill().await;
        let _ = echo.kill().await;
        return;
    }
    let before = rss_kib(pid);
    let client = reqwest::Client::new();
    for _ in 0..sessions {
        open_session(&client, &url).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kib(pid);
    let per = (after.saturating_sub(before)) as f64 / sessions as f64;
    println!(
        "RSS with {sessions} idle sessions: {before} KiB -> {after} KiB = {per:.1} KiB per session (target <= 50 KB)"
    );
    let _ = child.kill().await;
    let _ = echo.kill().await;
}
