//! Warden's session manager (`mcp::transport::http::sessions::manager`):
//! idle sessions are closed after `WARDEN_HTTP_SESSION_IDLE_SECONDS` while
//! used ones stay, and a client that lost a request's SSE stream resumes it
//! with `Last-Event-ID` and gets the answer it missed.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::http::{HttpServer, post};
use crate::common::*;

/// Opens a 2025-11-25 session (initialize, initialized); returns its id.
async fn open(server: &HttpServer) -> String {
    let answer = server.initialize(&[]).await;
    assert_eq!(answer.status(), 200);
    let id = answer.headers()["mcp-session-id"]
        .to_str()
        .expect("id")
        .to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let sent = post(&server.url, &initialized, &in_session(&id))
        .send()
        .await
        .expect("sent");
    assert!(sent.status().is_success(), "{}", sent.status());
    id
}

fn in_session(id: &str) -> [(&str, &str); 2] {
    [("mcp-session-id", id), ("mcp-protocol-version", "2025-11-25")]
}

async fn ping(server: &HttpServer, id: &str) -> u16 {
    let ping = json!({"jsonrpc": "2.0", "id": 5, "method": "ping"});
    let answer = post(&server.url, &ping, &in_session(id))
        .send()
        .await
        .expect("answered");
    let status = answer.status().as_u16();
    let _ = answer.text().await;
    status
}

#[tokio::test]
async fn an_idle_session_is_closed_and_a_used_one_stays() {
    // WARDEN_HTTP_SESSION_IDLE_SECONDS=10: a session nobody used for longer is gone (404);
    // one pinged every 3 s is still served.
    let server = HttpServer::start(FINANCE, &[("WARDEN_HTTP_SESSION_IDLE_SECONDS", "10")]).await;
    let idle = open(&server).await;
    let used = open(&server).await;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(ping(&server, &used).await, 200, "a used session is kept");
    }
    assert_eq!(ping(&server, &idle).await, 404, "an idle session is closed");
    assert_eq!(ping(&server, &used).await, 200);
}

/// The SSE events of a body: (id, data as JSON when it has some).
fn events(body: &str) -> Vec<(String, Option<Value>)> {
    body.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|line| line.strip_prefix(name))
                    .map(|v| v.trim().to_string())
            };
            let data = field("data:").filter(|d| !d.is_empty());
            (
                field("id:").unwrap_or_default(),
                data.and_then(|d| serde_json::from_str(&d).ok()),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_client_that_lost_a_calls_stream_resumes_it_and_gets_the_answer() {
    // The client reads the call's priming event, drops the stream, and after the call ended
    // asks again with Last-Event-ID: the answer it missed comes back, once.
    let server = HttpServer::start(TESTBED, &[]).await;
    let id = open(&server).await;
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                      "params": {"name": "sleep_in_process", "arguments": {"millis": 500}}});
    let mut answer = post(&server.url, &call, &in_session(&id))
        .send()
        .await
        .expect("answered");
    assert_eq!(answer.status(), 200);
    let first = answer.chunk().await.expect("read").expect("a first event");
    let first = String::from_utf8_lossy(&first).to_string();
    let (priming, _) = events(&first).into_iter().next().expect("priming event");
    assert!(priming.starts_with("0/"), "{first}");
    drop(answer);
    tokio::time::sleep(Duration::from_millis(900)).await;

    let resumed = reqwest::Client::new()
        .get(&server.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &id)
        .header("mcp-protocol-version", "2025-11-25")
        .header("last-event-id", &priming)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .expect("resumed");
    assert_eq!(resumed.status(), 200);
    let body = resumed.text().await.expect("the stream ends after the answer");
    let answers: Vec<Value> = events(&body)
        .into_iter()
        .filter_map(|(_, data)| data)
        .filter(|data| data["id"] == 9)
        .collect();
    assert_eq!(answers.len(), 1, "{body}");
    assert_eq!(answers[0]["result"]["structuredContent"]["result"], 500, "{body}");
}
