//! `preflight --url http://…/mcp`: the MCP checks against a running HTTP
//! server, as a remote client meets it.
//!
//! Raw HTTP (ureq) rather than a client library, so each check can name
//! the status and header that went wrong: `/healthz` and `/readyz`, the
//! authentication challenge (a request without the token must get 401 with
//! `WWW-Authenticate`), a 2025-11-25 session (initialize, `tools/list`
//! across pages, DELETE), and a stateless 2026-07-28 `server/discover`. The
//! bearer token is read from the environment variable named on the command
//! line (never the command line itself, where `ps` would show it). It never
//! calls a tool.

use std::time::Duration;

use serde_json::{Value, json};

use super::report::{Check, ServerSummary};

/// The revision the session check initializes with.
const SESSION_REVISION: &str = "2025-11-25";
/// The stateless revision `server/discover` is sent with.
const STATELESS_REVISION: &str = "2026-07-28";
/// Largest response body read: 16 MiB (as the stdio probe's line cap).
const MAX_BODY: u64 = super::MAX_PROBE_LINE;

/// What the HTTP probe found.
pub(crate) struct HttpOutcome {
    pub checks: Vec<Check>,
    pub server: ServerSummary,
    pub tools: Option<Vec<Value>>,
}

/// Why an MCP request over HTTP produced no result: the server could not
/// be reached, answered another status, or sent no matching JSON-RPC
/// answer. The text is a failed check's message.
#[derive(Debug, thiserror::Error)]
enum RpcError {
    #[error("cannot reach {url}: {error}")]
    Unreachable { url: String, error: ureq::Error },
    #[error("HTTP {status}: {excerpt}")]
    Status { status: u16, excerpt: String },
    #[error("JSON-RPC error: {0}")]
    Rpc(Value),
    #[error("no JSON-RPC answer with id {id} in: {excerpt}")]
    NoAnswer { id: u64, excerpt: String },
}

/// One HTTP answer: status, the headers the checks read, the body.
struct Answer {
    status: u16,
    session: Option<String>,
    challenge: Option<String>,
    body: String,
}

struct Probe {
    agent: ureq::Agent,
    url: String,
    token: Option<String>,
}

/// Runs every check against `url` (blocking; call on a blocking thread).
pub(crate) fn probe(url: &str, token: Option<String>, timeout: Duration) -> HttpOutcome {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let probe = Probe {
        agent,
        url: url.trim_end_matches('/').to_string(),
        token,
    };
    let mut outcome = HttpOutcome {
        checks: Vec::new(),
        server: ServerSummary {
            command: vec![probe.url.clone()],
            ..ServerSummary::default()
        },
        tools: None,
    };
    let base = probe.url.strip_suffix("/mcp").unwrap_or(&probe.url).to_string();
    outcome.checks.push(probe.health(&base, "healthz"));
    outcome.checks.push(probe.health(&base, "readyz"));
    outcome.checks.push(probe.authentication());
    probe.session(&mut outcome);
    outcome.checks.push(probe.stateless());
    outcome
}

impl Probe {
    fn health(&self, base: &str, path: &str) -> Check {
        let name = format!("http.{path}");
        match self.agent.get(&format!("{base}/{path}")).call() {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = read_body(response);
                if status == 200 {
                    Check::pass(&name, format!("/{path} answered 200"))
                } else {
                    Check::fail(
                        &name,
                        format!("/{path} answered {status}: {}", excerpt(&body)),
                        "see the failing check in the body; /readyz needs a writable artifacts directory, a worker that starts and every managed resource loaded",
                    )
                }
            }
            Err(error) => Check::fail(
                &name,
                format!("cannot reach {base}/{path}: {error}"),
                "check the URL, that the server runs `serve --http`, and that this machine can reach it",
            ),
        }
    }

    /// A request without the token must be challenged when a token is
    /// given; without a token the server must not demand one.
    fn authentication(&self) -> Check {
        let bare = self.post(&initialize(), &[], false);
        match (bare, &self.token) {
            (Err(error), _) => Check::fail("http.auth", error.to_string(), "check the URL"),
            (Ok(answer), Some(_)) if answer.status == 401 => match answer.challenge {
                Some(challenge) if challenge.starts_with("Bearer") => Check::pass(
                    "http.auth",
                    "a request without the token is refused 401 with a Bearer challenge",
                ),
                _ => Check::fail(
                    "http.auth",
                    "401 without a `WWW-Authenticate: Bearer …` header",
                    "the MCP authorization spec requires the challenge (with resource_metadata)",
                ),
            },
            (Ok(answer), Some(_)) => Check::warn(
                "http.auth",
                format!(
                    "a request without a token was answered {}, not 401",
                    answer.status
                ),
                "this server does not authenticate: only expose it on loopback",
            ),
            (Ok(answer), None) if answer.status == 401 => Check::fail(
                "http.auth",
                "the server requires a token",
                "put the token in an environment variable and pass its name: --token-env NAME",
            ),
            (Ok(_), None) => Check::pass("http.auth", "the server serves without authentication (loopback)"),
        }
    }

    /// A 2025-11-25 session: initialize, initialized, tools/list, DELETE.
    fn session(&self, outcome: &mut HttpOutcome) {
        let answer = match self.post(&initialize(), &[], true) {
            Ok(answer) => answer,
            Err(error) => {
                outcome
                    .checks
                    .push(Check::fail("mcp.initialize", error.to_string(), "check the URL"));
                return;
            }
        };
        let result = match rpc_result(&answer, 1) {
            Ok(result) => result,
            Err(error) => {
                outcome.checks.push(Check::fail(
                    "mcp.initialize",
                    error.to_string(),
                    "the endpoint must answer MCP initialize (is the path /mcp?)",
                ));
                return;
            }
        };
        outcome.server.read_initialize(&result);
        let Some(session) = answer.session else {
            outcome.checks.push(Check::fail(
                "mcp.initialize",
                "initialize answered without an Mcp-Session-Id header",
                "a 2025-11-25 server must open a session",
            ));
            return;
        };
        outcome.checks.push(Check::pass(
            "mcp.initialize",
            format!(
                "session opened, protocol {}",
                outcome.server.protocol_version.as_deref().unwrap_or("?")
            ),
        ));
        let headers = [
            ("mcp-session-id", session.as_str()),
            ("mcp-protocol-version", SESSION_REVISION),
        ];
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let _ = self.post(&initialized, &headers, true);
        let listed = self.tools(&headers, outcome);
        outcome.checks.push(listed);
        let mut close = self.agent.delete(&self.url).header("mcp-session-id", &session);
        if let Some(token) = &self.token {
            close = close.header("authorization", &format!("Bearer {token}"));
        }
        let _ = close.call();
    }

    fn tools(&self, headers: &[(&str, &str)], outcome: &mut HttpOutcome) -> Check {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for page in 0..super::MAX_TOOL_PAGES {
            let id = 2 + page as u64;
            let params = match &cursor {
                Some(cursor) => json!({"cursor": cursor}),
                None => json!({}),
            };
            let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params});
            let result = self
                .post(&request, headers, true)
                .and_then(|answer| rpc_result(&answer, id));
            match result {
                Ok(result) => {
                    tools.extend(result["tools"].as_array().cloned().unwrap_or_default());
                    cursor = result["nextCursor"].as_str().map(str::to_string);
                    if cursor.is_none() {
                        let count = tools.len();
                        outcome.tools = Some(tools);
                        return Check::pass("mcp.tools_list", format!("{count} tools listed"));
                    }
                }
                Err(error) => {
                    return Check::fail("mcp.tools_list", error.to_string(), "see the server's log");
                }
            }
        }
        Check::fail(
            "mcp.tools_list",
            format!("tools/list still had pages after {}", super::MAX_TOOL_PAGES),
            "the server's cursor never ends",
        )
    }

    /// A stateless 2026-07-28 `server/discover`.
    fn stateless(&self) -> Check {
        let meta = json!({"io.modelcontextprotocol/protocolVersion": STATELESS_REVISION,
                          "io.modelcontextprotocol/clientCapabilities": {}});
        let request =
            json!({"jsonrpc": "2.0", "id": 900, "method": "server/discover", "params": {"_meta": meta}});
        let headers = [
            ("mcp-protocol-version", STATELESS_REVISION),
            ("mcp-method", "server/discover"),
        ];
        let result = self
            .post(&request, &headers, true)
            .and_then(|answer| rpc_result(&answer, 900));
        match result {
            Ok(result) => {
                let versions = result["supportedVersions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if versions.iter().any(|v| v == STATELESS_REVISION) {
                    Check::pass("mcp.discover", "server/discover answered (2026-07-28 stateless)")
                } else {
                    Check::warn(
                        "mcp.discover",
                        "server/discover answered without 2026-07-28 among supportedVersions",
                        "stateless clients will fall back to sessions",
                    )
                }
            }
            Err(error) => Check::fail(
                "mcp.discover",
                error.to_string(),
                "2026-07-28 clients need server/discover and stateless requests",
            ),
        }
    }

    /// POSTs a JSON-RPC message; `authorized` adds the bearer token.
    fn post(&self, body: &Value, headers: &[(&str, &str)], authorized: bool) -> Result<Answer, RpcError> {
        let mut request = self
            .agent
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if authorized && let Some(token) = &self.token {
            request = request.header("authorization", &format!("Bearer {token}"));
        }
        let response = request
            .send(body.to_string().as_bytes())
            .map_err(|error| RpcError::Unreachable {
                url: self.url.clone(),
                error,
            })?;
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let session = header("mcp-session-id");
        let challenge = header("www-authenticate");
        let status = response.status().as_u16();
        Ok(Answer {
            status,
            session,
            challenge,
            body: read_body(response),
        })
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": SESSION_REVISION, "capabilities": {},
        "clientInfo": {"name": "warden-preflight", "version": env!("CARGO_PKG_VERSION")}}})
}

fn read_body(response: ureq::http::Response<ureq::Body>) -> String {
    response
        .into_body()
        .with_config()
        .limit(MAX_BODY)
        .read_to_string()
        .unwrap_or_default()
}

/// The `result` of the JSON-RPC response with `id` in a JSON or SSE body.
fn rpc_result(answer: &Answer, id: u64) -> Result<Value, RpcError> {
    if answer.status != 200 {
        return Err(RpcError::Status {
            status: answer.status,
            excerpt: excerpt(&answer.body),
        });
    }
    let messages = answer
        .body
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .chain(std::iter::once(answer.body.trim()))
        .filter_map(|text| serde_json::from_str::<Value>(text).ok());
    for message in messages {
        if message["id"] != json!(id) {
            continue;
        }
        if let Some(error) = message.get("error") {
            return Err(RpcError::Rpc(error.clone()));
        }
        return Ok(message["result"].clone());
    }
    Err(RpcError::NoAnswer {
        id,
        excerpt: excerpt(&answer.body),
    })
}

fn excerpt(text: &str) -> String {
    text.chars().take(200).collect()
}
