//! A server binary serving MCP over Streamable HTTP on a free loopback
//! port, and rmcp clients for both protocol revisions.

use std::process::Stdio;
use std::time::Duration;

use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::{AsyncBufReadExt, BufReader};

/// A running `serve --http 127.0.0.1:0` and where it listens.
pub struct HttpServer {
    pub child: tokio::process::Child,
    /// The MCP endpoint, e.g. `http://127.0.0.1:41234/mcp`.
    pub url: String,
    /// The server root, e.g. `http://127.0.0.1:41234`.
    pub base: String,
    pub artifacts: tempfile::TempDir,
    /// stderr after the listening line, read by [`HttpServer::stop`].
    stderr: Option<tokio::task::JoinHandle<String>>,
}

impl HttpServer {
    /// Starts `binary serve --http 127.0.0.1:0` with a private artifacts
    /// directory and `env`, and waits for its listening line.
    pub async fn start(binary: &str, env: &[(&str, &str)]) -> HttpServer {
        Self::start_on(binary, "127.0.0.1:0", env)
            .await
            .unwrap_or_else(|stderr| panic!("server did not start: {stderr}"))
    }

    /// Like [`HttpServer::start`] on `addr`; `Err(stderr)` when the server
    /// exits instead of listening.
    pub async fn start_on(binary: &str, addr: &str, env: &[(&str, &str)]) -> Result<HttpServer, String> {
        Self::launch(tokio::process::Command::new(binary), addr, env).await
    }

    /// Like [`HttpServer::start_on`] on a free port, with `dir` as the
    /// working directory (where the server reads `.env`).
    pub async fn start_in(
        binary: &str,
        dir: &std::path::Path,
        env: &[(&str, &str)],
    ) -> Result<HttpServer, String> {
        let mut command = tokio::process::Command::new(binary);
        command.current_dir(dir);
        Self::launch(command, "127.0.0.1:0", env).await
    }

    async fn launch(
        mut command: tokio::process::Command,
        addr: &str,
        env: &[(&str, &str)],
    ) -> Result<HttpServer, String> {
        let artifacts = tempfile::tempdir().expect("temp dir");
        command
            .args(["serve", "--http", addr])
            .env("WARDEN_ARTIFACTS_DIR", artifacts.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("spawn server");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let mut seen = String::new();
        let url = loop {
            let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
                .await
                .expect("server output in time")
                .expect("read stderr");
            let Some(line) = line else {
                return Err(seen);
            };
            seen.push_str(&line);
            seen.push('\n');
            if let Some(at) = line.find("serving MCP at ") {
                let rest = &line[at + "serving MCP at ".len()..];
                break rest.split_whitespace().next().expect("url").to_string();
            }
        };
        let stderr = tokio::spawn(async move {
            let mut rest = String::new();
            while let Ok(Some(line)) = lines.next_line().await {
                rest.push_str(&line);
                rest.push('\n');
            }
            rest
        });
        let base = url.trim_end_matches("/mcp").to_string();
        Ok(HttpServer {
            child,
            url,
            base,
            artifacts,
            stderr: Some(stderr),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("server pid")
    }

    /// A client on the 2025-11-25 revision (initialize, a session, SSE).
    pub async fn session_client(&self, token: Option<&str>) -> RunningService<RoleClient, ()> {
        self.try_client(token, ClientLifecycleMode::Initialize)
            .await
            .expect("initialize over HTTP")
    }

    /// A client on the stateless 2026-07-28 revision (`server/discover`).
    pub async fn stateless_client(&self, token: Option<&str>) -> RunningService<RoleClient, ()> {
        self.try_client(
            token,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover over HTTP")
    }

    pub async fn try_client(
        &self,
        token: Option<&str>,
        lifecycle: ClientLifecycleMode,
    ) -> Result<RunningService<RoleClient, ()>, rmcp::service::ClientInitializeError> {
        self.client_with((), token, lifecycle).await
    }

    /// A client with its own handler (e.g. one collecting progress).
    pub async fn client_with<H: rmcp::ClientHandler>(
        &self,
        handler: H,
        token: Option<&str>,
        lifecycle: ClientLifecycleMode,
    ) -> Result<RunningService<RoleClient, H>, rmcp::service::ClientInitializeError> {
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url.as_str());
        if let Some(token) = token {
            config = config.auth_header(token);
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        tokio::time::timeout(
            Duration::from_secs(10),
            handler.serve_with_lifecycle(transport, lifecycle),
        )
        .await
        .expect("lifecycle in time")
    }

    /// A raw 2025-11-25 initialize POST with `headers`, as sent (no session
    /// is kept): for the status codes and headers rmcp's client hides.
    pub async fn initialize(&self, headers: &[(&str, &str)]) -> reqwest::Response {
        post(&self.url, &initialize(), headers)
            .send()
            .await
            .expect("initialize POST")
    }

    /// Sends SIGTERM and waits for the exit; returns its code and stderr.
    pub async fn stop(&mut self) -> (Option<i32>, String) {
        let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let status = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("server exits after SIGTERM")
            .expect("wait");
        let stderr = match self.stderr.take() {
            Some(task) => task.await.unwrap_or_default(),
            None => String::new(),
        };
        (status.code(), stderr)
    }
}

/// A JSON-RPC POST to `url` as a 2025-11-25 client without a session
/// would send it, plus `headers`.
pub fn post(url: &str, body: &serde_json::Value, headers: &[(&str, &str)]) -> reqwest::RequestBuilder {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request
}

/// An initialize request body.
pub fn initialize() -> serde_json::Value {
    serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
}

/// The test principals: name, API token, and the token's SHA-256 (what a
/// tokens file holds; computed once with `sha256sum`).
pub const PRINCIPALS: [(&str, &str, &str); 2] = [
    (
        "alice",
        "alice-tenant-token-7c1e",
        "5f0cf4e496fc259d62ba9d40c9619748eb871840ea45bfba2bdae31161e9b91c",
    ),
    (
        "bob",
        "bob-tenant-token-94d2",
        "d733550655800b99804f43ade8b35dd7b7f020a73833afa3165e816ba5fac71a",
    ),
];

/// An API tokens file naming every test principal ([`PRINCIPALS`]), in
/// `dir`; its path, for `WARDEN_API_TOKENS_FILE`.
pub fn tokens_file(dir: &std::path::Path) -> String {
    let file = dir.join("tokens");
    let lines: String = PRINCIPALS
        .iter()
        .map(|(name, _, hash)| format!("{name} {hash}\n"))
        .collect();
    std::fs::write(&file, format!("# test principals\n{lines}")).expect("tokens file");
    file.to_string_lossy().into_owned()
}
