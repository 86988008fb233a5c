//! Server lifetime: clean exit on EOF, no orphaned workers on SIGKILL.

use std::time::Duration;

use serde_json::json;

use crate::common::*;

/// Starts a 30 s isolated call that also spawns `sleep <marker>`, waits
/// until its worker runs, and returns the marker and the worker pids.
async fn start_long_call(server: &Server) -> (u64, Vec<u32>, tokio::task::JoinHandle<()>) {
    let marker = unique_marker();
    let peer = server.client.peer().clone();
    let arguments = json!({"millis": 30_000, "child_marker": marker});
    let pending = tokio::spawn(async move {
        let params = rmcp::model::CallToolRequestParams::new("slow_echo")
            .with_arguments(arguments.as_object().cloned().unwrap_or_default());
        let _ = peer.call_tool(params).await;
    });
    assert!(
        eventually(Duration::from_secs(3), || marker_alive(marker)).await,
        "worker started"
    );
    let workers = children_of(server.pid);
    assert!(!workers.is_empty());
    (marker, workers, pending)
}

fn gone(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
    stat.map(|s| s.contains(") Z ")).unwrap_or(true)
}

#[tokio::test]
async fn stdin_eof_exits_cleanly_and_leaves_no_worker() {
    // Closing the client while a call runs ends the server, its worker and the worker's child.
    let server = Server::start(TESTBED).await;
    let pid = server.pid;
    let (marker, workers, pending) = start_long_call(&server).await;
    let _ = server.client.cancel().await;
    pending.abort();
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
    // PDEATHSIG: neither a worker nor a process its guard started outlives
    // a server killed with SIGKILL (the worker kills its own group).
    let server = Server::start(TESTBED).await;
    let (marker, workers, _pending) = start_long_call(&server).await;
    let pid = nix::unistd::Pid::from_raw(server.pid as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    assert!(
        eventually(Duration::from_secs(3), || workers.iter().all(|w| gone(*w))).await,
        "worker outlived the server"
    );
    assert!(
        eventually(Duration::from_secs(3), || !marker_alive(marker)).await,
        "the guard's child process outlived the server"
    );
}
