//! Server lifetime: clean exit on EOF, no orphaned workers on SIGKILL.

use std::time::Duration;

use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn stdin_eof_exits_cleanly_and_leaves_no_worker() {
    // Closing the client while a call runs ends the server and its worker.
    let server = Server::start(TESTBED).await;
    let pid = server.pid;
    let marker = unique_marker();
    let client = server.client;
    let peer = client.peer().clone();
    let pending = tokio::spawn(async move {
        let _ = peer
            .call_tool(
                rmcp::model::CallToolRequestParams::new("slow_echo").with_arguments(
                    json!({"millis": 30_000, "child_marker": marker})
                        .as_object()
                        .unwrap()
                        .clone(),
                ),
            )
            .await;
    });
    assert!(
        eventually(Duration::from_secs(3), || marker_alive(marker)).await,
        "worker started"
    );
    let workers = children_of(pid);
    assert!(!workers.is_empty());
    let _ = client.cancel().await;
    pending.abort();
    let gone = |p: u32| !std::path::Path::new(&format!("/proc/{p}")).exists() || is_zombie(p);
    assert!(
        eventually(Duration::from_secs(3), || gone(pid)).await,
        "server exited"
    );
    assert!(
        eventually(Duration::from_secs(3), || workers.iter().all(|w| gone(*w))).await,
        "worker left behind"
    );
    assert!(
        eventually(Duration::from_secs(3), || !marker_alive(marker)).await,
        "worker's child left behind"
    );
}

#[tokio::test]
async fn sigkill_of_the_server_takes_its_workers_down() {
    // PDEATHSIG: a worker never outlives a server killed with SIGKILL.
    let server = Server::start(TESTBED).await;
    let pid = server.pid;
    let marker = unique_marker();
    let peer = server.client.peer().clone();
    let _pending = tokio::spawn(async move {
        let _ = peer
            .call_tool(
                rmcp::model::CallToolRequestParams::new("slow_echo").with_arguments(
                    json!({"millis": 30_000, "child_marker": marker})
                        .as_object()
                        .unwrap()
                        .clone(),
                ),
            )
            .await;
    });
    assert!(
        eventually(Duration::from_secs(3), || marker_alive(marker)).await,
        "worker started"
    );
    let workers = children_of(pid);
    assert!(!workers.is_empty());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let gone = |p: u32| !std::path::Path::new(&format!("/proc/{p}")).exists() || is_zombie(p);
    assert!(
        eventually(Duration::from_secs(3), || workers.iter().all(|w| gone(*w))).await,
        "worker outlived the server"
    );
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.contains(") Z "))
        .unwrap_or(true)
}
