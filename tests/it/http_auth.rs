//! Authentication of `serve --http`, end to end: the finance app is started
//! on a free loopback port with API tokens and OAuth configured, and spoken
//! to over real HTTP — raw requests for the refusals (status, exact
//! `WWW-Authenticate`, JSON code), rmcp's Streamable HTTP client for the
//! requests that get through. JWTs are signed with the test-only key in
//! tests/fixtures/oauth/; the JWKS the server trusts is made by the test
//! from that key.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{FINANCE, call_args, read_jsonl, workspace_root};

const ISSUER: &str = "https://issuer.test";
const KID: &str = "http-auth-test";
const SCOPE: &str = "mcp:tools";
const ALICE_TOKEN: &str = "alice-3f1d9c27b8e54a60";

/// A `warden-finance serve --http` process, killed on drop.
struct HttpServer {
    child: tokio::process::Child,
    addr: SocketAddr,
    artifacts: tempfile::TempDir,
    /// Holds the token file and the JWKS for the server's lifetime.
    _config: tempfile::TempDir,
}

impl HttpServer {
    /// Starts the app with API tokens (alice) and OAuth (the test key,
    /// scope `mcp:tools` required) and waits until `/healthz` answers.
    async fn start() -> Self {
        let config = tempfile::tempdir().expect("temp dir");
        let tokens = config.path().join("tokens");
        std::fs::write(
            &tokens,
            format!("# test tokens\nalice {}\n", sha256_hex(ALICE_TOKEN)),
        )
        .expect("tokens file");
        let jwks = config.path().join("jwks.json");
        std::fs::write(&jwks, test_jwks()).expect("jwks file");
        let addr = free_addr();
        let artifacts = tempfile::tempdir().expect("temp dir");
        let mut command = tokio::process::Command::new(FINANCE);
        command
            .args(["serve", "--http", &addr.to_string()])
            .env("WARDEN_ARTIFACTS_DIR", artifacts.path())
            .env("WARDEN_API_TOKENS_FILE", &tokens)
            .env("WARDEN_OAUTH_ISSUER", ISSUER)
            .env("WARDEN_OAUTH_JWKS", &jwks)
            .env("WARDEN_OAUTH_SCOPES", SCOPE)
            .env_remove("WARDEN_OAUTH_AUDIENCE")
            .env_remove("WARDEN_PUBLIC_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let child = command.spawn().expect("spawn warden-finance serve --http");
        let server = Self {
            child,
            addr,
            artifacts,
            _config: config,
        };
        let started = Instant::now();
        while request(addr, "GET", "/healthz", &[], "").await.map(|r| r.status) != Some(200) {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the server did not answer /healthz"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        server
    }

    fn mcp_url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    fn metadata_url(&self) -> String {
        format!("http://{}/.well-known/oauth-protected-resource/mcp", self.addr)
    }

    /// POSTs an `initialize` to `/mcp` with these extra header lines.
    async fn post(&self, headers: &[&str]) -> Reply {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
        let mut lines = vec![
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
        ];
        lines.extend_from_slice(headers);
        request(self.addr, "POST", "/mcp", &lines, &body.to_string())
            .await
            .expect("an answer")
    }

    /// POSTs with `Authorization: Bearer <token>`.
    async fn post_bearer(&self, token: &str) -> Reply {
        self.post(&[&format!("Authorization: Bearer {token}")]).await
    }

    /// An rmcp client session authenticated with `token`.
    async fn connect(&self, token: &str) -> Result<RunningService<RoleClient, ()>, String> {
        let config = StreamableHttpClientTransportConfig::with_uri(self.mcp_url()).auth_header(token);
        let transport = StreamableHttpClientTransport::from_config(config);
        tokio::time::timeout(Duration::from_secs(15), ().serve(transport))
            .await
            .map_err(|_| "initialize timed out".to_string())?
            .map_err(|e| format!("{e:?}"))
    }

    /// A `{"principal": …}` event record for `tool`, waiting up to 5 s.
    async fn principal_of_call(&self, tool: &str) -> Option<String> {
        let path = self.artifacts.path().join("events.jsonl");
        let started = Instant::now();
        loop {
            let found = read_jsonl(&path)
                .into_iter()
                .find(|r| r.to_string().contains(tool) && r.get("principal").is_some())
                .and_then(|r| r["principal"].as_str().map(str::to_string));
            if found.is_some() || started.elapsed() > Duration::from_secs(5) {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

fn free_addr() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr")
}

fn sha256_hex(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn signing_key(file: &str) -> EncodingKey {
    let pem = std::fs::read(workspace_root().join("tests/fixtures/oauth").join(file)).expect("test key");
    EncodingKey::from_rsa_pem(&pem).expect("an RSA private key")
}

/// The JWK Set of the test signing key, with [`KID`].
fn test_jwks() -> String {
    let mut jwk =
        Jwk::from_encoding_key(&signing_key("test-signing-key.pem"), Algorithm::RS256).expect("a JWK");
    jwk.common.key_id = Some(KID.into());
    serde_json::to_string(&JwkSet { keys: vec![jwk] }).expect("JSON")
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// A JWT for `sub` with the scope, an hour left, for `server`; `change`
/// overrides claims.
fn jwt(server: &HttpServer, sub: &str, change: Value) -> String {
    jwt_signed_by(server, sub, change, "test-signing-key.pem")
}

fn jwt_signed_by(server: &HttpServer, sub: &str, change: Value, key_file: &str) -> String {
    let mut claims = json!({"iss": ISSUER, "aud": server.mcp_url(), "sub": sub, "scope": SCOPE,
        "exp": now() + 3600, "iat": now()});
    for (k, v) in change.as_object().expect("an object") {
        claims[k] = v.clone();
    }
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(KID.into());
    encode(&header, &claims, &signing_key(key_file)).expect("signs")
}

/// One HTTP/1.1 exchange, as received.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// Sends one request (with `Connection: close`) and reads the whole reply;
/// `None` if nothing listens yet.
async fn request(addr: SocketAddr, method: &str, path: &str, headers: &[&str], body: &str) -> Option<Reply> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let mut raw = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for header in headers {
        raw.push_str(header);
        raw.push_str("\r\n");
    }
    raw.push_str("\r\n");
    raw.push_str(body);
    stream.write_all(raw.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let mut lines = head.lines();
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.to_string()))
        .collect();
    Some(Reply {
        status,
        headers,
        body: body.to_string(),
    })
}

/// The challenge of a 401 for a bad token: `error_description` and the rest.
fn invalid_token(server: &HttpServer, description: &str) -> String {
    format!(
        "Bearer error=\"invalid_token\", error_description=\"{description}\", scope=\"{SCOPE}\", resource_metadata=\"{}\"",
        server.metadata_url()
    )
}

/// Calls the pricing guard through `client` and returns the principal its
/// event records carry.
async fn call_and_get_principal(
    server: &HttpServer,
    client: &RunningService<RoleClient, ()>,
) -> Option<String> {
    let Value::Object(arguments) = call_args() else {
        panic!("call_args is an object")
    };
    let result = client
        .call_tool(CallToolRequestParams::new("price_option_t").with_arguments(arguments))
        .await
        .expect("tools/call answered");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    server.principal_of_call("price_option_t").await
}

#[tokio::test]
async fn api_tokens_good_wrong_and_missing() {
    // /mcp needs a listed API token: none or a wrong one gets 401 with the
    // exact challenge; a good one works through rmcp's client and its
    // principal is on the call's events.
    let server = HttpServer::start().await;
    let r = server.post(&[]).await;
    assert_eq!(r.status, 401, "{r:?}");
    let expected = format!(
        "Bearer scope=\"{SCOPE}\", resource_metadata=\"{}\"",
        server.metadata_url()
    );
    assert_eq!(r.header("www-authenticate"), Some(expected.as_str()));
    assert_eq!(r.json()["code"], "authentication_required");

    let r = server.post_bearer("not-alices-token").await;
    assert_eq!(r.status, 401, "{r:?}");
    assert_eq!(
        r.header("www-authenticate"),
        Some(invalid_token(&server, "unknown token").as_str())
    );
    assert_eq!(r.json()["code"], "invalid_token");

    let err = server
        .connect("not-alices-token")
        .await
        .map(|_| ())
        .expect_err("refused");
    assert!(
        err.contains("AuthRequired") && err.contains("invalid_token"),
        "{err}"
    );

    let client = server
        .connect(ALICE_TOKEN)
        .await
        .expect("alice's token is accepted");
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "price_option_t"));
    assert_eq!(
        call_and_get_principal(&server, &client).await.as_deref(),
        Some("alice")
    );
}

#[tokio::test]
async fn jwts_valid_expired_foreign_forged_and_unscoped() {
    // A JWT from the issuer, for this resource, in date, with the scope,
    // acts for its `sub`; each broken variant gets 401 (or 403 for the
    // scope) with the exact challenge.
    let server = HttpServer::start().await;
    let client = server
        .connect(&jwt(&server, "bob", json!({})))
        .await
        .expect("a valid JWT is accepted");
    assert_eq!(
        call_and_get_principal(&server, &client).await.as_deref(),
        Some("bob")
    );

    let cases = [
        (jwt(&server, "bob", json!({"exp": now() - 3600})), "token expired"),
        (
            jwt(&server, "bob", json!({"aud": "https://other.example/mcp"})),
            "wrong audience",
        ),
        (
            jwt(&server, "bob", json!({"iss": "https://evil.example"})),
            "wrong issuer",
        ),
        (
            jwt_signed_by(&server, "bob", json!({}), "test-untrusted-key.pem"),
            "bad signature",
        ),
    ];
    for (token, description) in cases {
        let r = server.post_bearer(&token).await;
        assert_eq!(r.status, 401, "{description}: {r:?}");
        assert_eq!(
            r.header("www-authenticate"),
            Some(invalid_token(&server, description).as_str())
        );
        assert_eq!(r.json()["code"], "invalid_token", "{description}");
    }

    let r = server
        .post_bearer(&jwt(&server, "bob", json!({"scope": "openid profile"})))
        .await;
    assert_eq!(r.status, 403, "{r:?}");
    let expected = format!(
        "Bearer error=\"insufficient_scope\", scope=\"{SCOPE}\", resource_metadata=\"{}\"",
        server.metadata_url()
    );
    assert_eq!(r.header("www-authenticate"), Some(expected.as_str()));
    assert_eq!(r.json()["code"], "insufficient_scope");
}

#[tokio::test]
async fn the_protected_resource_metadata_is_served_without_a_token() {
    // RFC 9728 at both well-known paths, naming this resource, the issuer
    // and the scope.
    let server = HttpServer::start().await;
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let r = request(server.addr, "GET", path, &[], "")
            .await
            .expect("an answer");
        assert_eq!(r.status, 200, "{path}: {r:?}");
        let mut doc = r.json();
        let name = doc.as_object_mut().and_then(|d| d.remove("resource_name"));
        assert!(
            name.as_ref()
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty()),
            "{path}: {name:?}"
        );
        assert_eq!(
            doc,
            json!({
                "resource": server.mcp_url(),
                "authorization_servers": [ISSUER],
                "scopes_supported": [SCOPE],
                "bearer_methods_supported": ["header"],
            }),
            "{path}"
        );
    }
}
