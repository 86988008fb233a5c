//! A scripted OpenAI-compatible endpoint on 127.0.0.1 for agent tests.
//!
//! Answers `POST /v1/chat/completions` with canned replies in order (the
//! last one repeats), and records every request body so tests can check
//! what the server sent. Speaks just enough HTTP/1.1 for ureq.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A reply whose code block computes a delta and answers (one guard call).
pub const GREEKS_ANSWER: &str = "```rhai\nlet g = calc_greeks_t(#{option_type: \"call\", spot: 100.0, strike: 100.0, time_to_expiry: 0.5, volatility: 0.2, rate: 0.03});\nfinal_answer(#{task_type: \"analysis\", summary: \"delta\", metrics: #{delta: g.delta}})\n```";

/// One scripted behaviour.
#[derive(Clone)]
pub enum Reply {
    /// Answer with this assistant message.
    Content(String),
    /// Wait this long before answering (to test timeouts).
    Slow(Duration, String),
    /// Answer with this message and a `usage` of (prompt, completion) tokens.
    Counted(String, u64, u64),
    /// Answer with this message and this raw `usage` value (another
    /// spelling, absurd counts, anything an endpoint may send).
    Usage(String, Value),
}

pub struct FakeModel {
    pub base: String,
    pub requests: Arc<Mutex<Vec<Value>>>,
}

impl FakeModel {
    pub async fn start(replies: Vec<Reply>) -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let seen = seen.clone();
                let replies = replies.clone();
                tokio::spawn(async move {
                    while let Some(body) = read_request(&mut socket).await {
                        let index = {
                            let mut seen = seen.lock().expect("lock");
                            seen.push(body);
                            seen.len() - 1
                        };
                        let reply = replies[index.min(replies.len() - 1)].clone();
                        let (content, usage) = match reply {
                            Reply::Content(text) => (text, None),
                            Reply::Slow(delay, text) => {
                                tokio::time::sleep(delay).await;
                                (text, None)
                            }
                            Reply::Counted(text, prompt, completion) => (
                                text,
                                Some(json!({"prompt_tokens": prompt, "completion_tokens": completion,
                                            "total_tokens": prompt + completion})),
                            ),
                            Reply::Usage(text, usage) => (text, Some(usage)),
                        };
                        let mut body = json!({"model": "scripted-1", "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]});
                        if let Some(usage) = usage {
                            body["usage"] = usage;
                        }
                        let body = body.to_string();
                        let response = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if socket.write_all(response.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        FakeModel { base, requests }
    }

    /// Environment for a server that should use this endpoint.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("WARDEN_MODEL_API_KEY", "test-key".to_string()),
            ("WARDEN_MODEL_API_BASE", self.base.clone()),
            ("WARDEN_MODEL_ID", "scripted".to_string()),
        ]
    }

    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().expect("lock").clone()
    }
}

/// Reads one HTTP request and returns its JSON body; None at EOF.
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Value> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let headers = String::from_utf8_lossy(&buffer[..header_end]).to_lowercase();
    let length: usize = headers
        .lines()
        .find_map(|l| {
            l.strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap_or(0))
        })
        .unwrap_or(0);
    while buffer.len() < header_end + length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    serde_json::from_slice(&buffer[header_end..header_end + length]).ok()
}
