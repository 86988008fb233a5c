//! Authentication of `serve --http`, end to end: the finance app on a free
//! loopback port with API tokens and OAuth configured, spoken to over real
//! HTTP — raw requests for the refusals (status, exact `WWW-Authenticate`,
//! JSON code), rmcp's Streamable HTTP client for the requests that get
//! through. JWTs are signed with the test-only key in tests/fixtures/oauth/;
//! the JWKS the server trusts is made by the test from that key.

use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::service::{ClientLifecycleMode, RoleClient, RunningService};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::http::{HttpServer, initialize, post};
use crate::common::oauth::{GOOD_KEY, ISSUER, jwks_file};
use crate::common::{FINANCE, call_args, read_jsonl};

const SCOPE: &str = "mcp:tools";
const ALICE_TOKEN: &str = "alice-3f1d9c27b8e54a60";

/// The server with API tokens (alice) and OAuth (the test key, scope
/// `mcp:tools` required), and the directory holding their files.
struct Authenticated {
    server: HttpServer,
    _config: tempfile::TempDir,
}

impl Authenticated {
    async fn start() -> Self {
        let config = tempfile::tempdir().expect("temp dir");
        let tokens = config.path().join("tokens");
        let line = format!("# test tokens\nalice {}\n", sha256_hex(ALICE_TOKEN));
        std::fs::write(&tokens, line).expect("tokens file");
        let (tokens, jwks) = (tokens.display().to_string(), jwks_file(config.path()));
        let server = HttpServer::start(
            FINANCE,
            &[
                ("WARDEN_API_TOKENS_FILE", &tokens),
                ("WARDEN_OAUTH_ISSUER", ISSUER),
                ("WARDEN_OAUTH_JWKS", &jwks),
                ("WARDEN_OAUTH_SCOPES", SCOPE),
            ],
        )
        .await;
        Self {
            server,
            _config: config,
        }
    }

    fn metadata_url(&self) -> String {
        format!("{}/.well-known/oauth-protected-resource/mcp", self.server.base)
    }

    /// An `initialize` POST to `/mcp` with `Authorization: Bearer <token>`
    /// (none when `None`): status, `WWW-Authenticate` and the JSON `code`.
    async fn post(&self, token: Option<&str>) -> (u16, String, String) {
        let authorization = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = authorization
            .iter()
            .map(|a| ("authorization", a.as_str()))
            .collect();
        let response = post(&self.server.url, &initialize(), &headers)
            .send()
            .await
            .expect("an answer");
        let status = response.status().as_u16();
        let challenge = response
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        (
            status,
            challenge,
            body["code"].as_str().unwrap_or_default().to_string(),
        )
    }

    /// The challenge of a 401 for a bad token.
    fn invalid_token(&self, description: &str) -> String {
        format!(
            "Bearer error=\"invalid_token\", error_description=\"{description}\", scope=\"{SCOPE}\", \
             resource_metadata=\"{}\"",
            self.metadata_url()
        )
    }

    /// A JWT for `sub` with the scope and an hour left, signed by the
    /// fixture key `key_file`; `change` overrides claims.
    fn jwt(&self, sub: &str, change: Value, key_file: &str) -> String {
        let mut claims = json!({"sub": sub, "scope": SCOPE});
        for (k, v) in change.as_object().expect("an object") {
            claims[k] = v.clone();
        }
        crate::common::oauth::jwt(&self.server.url, claims, key_file)
    }

    /// Calls the pricing guard through `client` and returns the principal
    /// of its events.jsonl records (waiting up to 5 s for them).
    async fn principal_of_a_call(&self, client: &RunningService<RoleClient, ()>) -> Option<String> {
        let Value::Object(arguments) = call_args() else {
            panic!("call_args is an object")
        };
        let result = client
            .call_tool(CallToolRequestParams::new("price_option_t").with_arguments(arguments))
            .await
            .expect("tools/call answered");
        assert_ne!(result.is_error, Some(true), "{result:?}");
        let path = self.server.artifacts.path().join("events.jsonl");
        let started = Instant::now();
        loop {
            let found = read_jsonl(&path)
                .into_iter()
                .filter(|r| r.to_string().contains("price_option_t"))
                .find_map(|r| r["principal"].as_str().map(str::to_string));
            if found.is_some() || started.elapsed() > Duration::from_secs(5) {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

fn sha256_hex(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn api_tokens_good_wrong_and_missing() {
    // /mcp needs a listed API token: none or a wrong one gets 401 with the
    // exact challenge (rmcp's client sees it as AuthRequired); a good one
    // works through rmcp's client and its principal is on the call's events.
    let auth = Authenticated::start().await;
    let expected = format!(
        "Bearer scope=\"{SCOPE}\", resource_metadata=\"{}\"",
        auth.metadata_url()
    );
    assert_eq!(
        auth.post(None).await,
        (401, expected, "authentication_required".into())
    );
    assert_eq!(
        auth.post(Some("not-alices-token")).await,
        (401, auth.invalid_token("unknown token"), "invalid_token".into())
    );
    let refused = auth
        .server
        .try_client(Some("not-alices-token"), ClientLifecycleMode::Initialize)
        .await
        .map(|_| ())
        .expect_err("a wrong token is refused");
    let refused = format!("{refused:?}");
    assert!(
        refused.contains("AuthRequired") && refused.contains("invalid_token"),
        "{refused}"
    );

    let client = auth.server.session_client(Some(ALICE_TOKEN)).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "price_option_t"));
    assert_eq!(auth.principal_of_a_call(&client).await.as_deref(), Some("alice"));
}

#[tokio::test]
async fn jwts_valid_expired_foreign_forged_and_unscoped() {
    // A JWT from the issuer, for this resource, in date, with the scope,
    // acts for its `sub` (both protocol revisions); each broken variant
    // gets 401, or 403 for the missing scope, with the exact challenge.
    let auth = Authenticated::start().await;
    let bob = auth.jwt("bob", json!({}), GOOD_KEY);
    let client = auth.server.session_client(Some(&bob)).await;
    assert_eq!(auth.principal_of_a_call(&client).await.as_deref(), Some("bob"));
    let stateless = auth.server.stateless_client(Some(&bob)).await;
    assert!(stateless.list_all_tools().await.is_ok_and(|t| !t.is_empty()));

    let now = jsonwebtoken::get_current_timestamp();
    let cases = [
        (
            auth.jwt("bob", json!({"exp": now - 3600}), GOOD_KEY),
            "token expired",
        ),
        (
            auth.jwt("bob", json!({"aud": "https://other.example/mcp"}), GOOD_KEY),
            "wrong audience",
        ),
        (
            auth.jwt("bob", json!({"iss": "https://evil.example"}), GOOD_KEY),
            "wrong issuer",
        ),
        (
            auth.jwt("bob", json!({}), "test-untrusted-key.pem"),
            "bad signature",
        ),
    ];
    for (token, description) in cases {
        assert_eq!(
            auth.post(Some(&token)).await,
            (401, auth.invalid_token(description), "invalid_token".into()),
            "{description}"
        );
    }

    let unscoped = auth.jwt("bob", json!({"scope": "openid profile"}), GOOD_KEY);
    let expected = format!(
        "Bearer error=\"insufficient_scope\", scope=\"{SCOPE}\", resource_metadata=\"{}\"",
        auth.metadata_url()
    );
    assert_eq!(
        auth.post(Some(&unscoped)).await,
        (403, expected, "insufficient_scope".into())
    );
}

#[tokio::test]
async fn the_protected_resource_metadata_is_served_without_a_token() {
    // RFC 9728 at both well-known paths, naming this resource, the issuer
    // and the scope.
    let auth = Authenticated::start().await;
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let response = reqwest::get(format!("{}{path}", auth.server.base))
            .await
            .expect("an answer");
        assert_eq!(response.status().as_u16(), 200, "{path}");
        let mut doc: Value = response.json().await.expect("JSON");
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
                "resource": auth.server.url,
                "authorization_servers": [ISSUER],
                "scopes_supported": [SCOPE],
                "bearer_methods_supported": ["header"],
            }),
            "{path}"
        );
    }
}

#[tokio::test]
async fn a_browser_page_on_an_allowed_origin_gets_cors_answers() {
    // CORS: an allowed origin's preflight is answered before authentication (it carries no
    // token) and the real request's answer names the origin and exposes Mcp-Session-Id and
    // WWW-Authenticate; a foreign origin's preflight is refused and gets no CORS headers.
    let config = tempfile::tempdir().expect("temp dir");
    let tokens = config.path().join("tokens");
    std::fs::write(&tokens, format!("alice {}\n", sha256_hex(ALICE_TOKEN))).expect("tokens file");
    let tokens = tokens.display().to_string();
    let page = "http://localhost:6274";
    let server = HttpServer::start(
        FINANCE,
        &[
            ("WARDEN_API_TOKENS_FILE", &tokens),
            ("WARDEN_ALLOWED_ORIGINS", "http://localhost:*"),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let preflight = |origin: &str| {
        client
            .request(reqwest::Method::OPTIONS, &server.url)
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type, mcp-protocol-version",
            )
            .send()
    };
    let answer = preflight(page).await.expect("preflight answered");
    assert!(answer.status().is_success(), "{}", answer.status());
    let header = |answer: &reqwest::Response, name: &str| {
        answer
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase()
    };
    assert_eq!(header(&answer, "access-control-allow-origin"), page);
    assert!(header(&answer, "access-control-allow-methods").contains("post"));
    assert!(header(&answer, "access-control-allow-headers").contains("authorization"));

    let opened = post(
        &server.url,
        &initialize(),
        &[
            ("origin", page),
            ("authorization", &format!("Bearer {ALICE_TOKEN}")),
        ],
    )
    .send()
    .await
    .expect("initialize");
    assert_eq!(opened.status(), 200);
    assert_eq!(header(&opened, "access-control-allow-origin"), page);
    assert!(header(&opened, "access-control-expose-headers").contains("mcp-session-id"));
    assert!(opened.headers().contains_key("mcp-session-id"));

    // Without a token the 401 is still readable by the page: its challenge is exposed.
    let unauthenticated = post(&server.url, &initialize(), &[("origin", page)])
        .send()
        .await
        .expect("answered");
    assert_eq!(unauthenticated.status(), 401);
    assert_eq!(header(&unauthenticated, "access-control-allow-origin"), page);
    assert!(header(&unauthenticated, "access-control-expose-headers").contains("www-authenticate"));

    let foreign = preflight("http://evil.example").await.expect("answered");
    assert_eq!(foreign.status(), 403);
    assert!(!foreign.headers().contains_key("access-control-allow-origin"));
}
