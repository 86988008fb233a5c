//! The settings and the authentication step, over real HTTP: an axum server on
//! 127.0.0.1 with the layer in front of a route that echoes the principal.

use std::collections::HashMap;
use std::path::PathBuf;

use axum::extract::State;
use axum::middleware::Next;
use axum::routing::post;
use axum::{Extension, Json};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

const ISSUER: &str = "https://issuer.test";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("tests/fixtures/oauth")
        .join(name)
}

fn settings(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + Send + use<> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

fn config_error(pairs: &[(&str, &str)]) -> String {
    Auth::from_lookup("http://127.0.0.1:1/mcp", settings(pairs))
        .map(|_| ())
        .expect_err("a configuration error")
        .to_string()
}

#[test]
fn nothing_set_means_no_authentication() {
    let auth = Auth::from_lookup(
        "http://127.0.0.1:1/mcp",
        settings(&[("WARDEN_OAUTH_SCOPES", "  ")]),
    );
    assert!(matches!(auth, Ok(None)), "blank values count as unset");
}

#[test]
fn partial_oauth_settings_name_the_missing_variable() {
    let jwks = fixture("test-jwks.json").display().to_string();
    let err = config_error(&[(ISSUER_VAR, ISSUER)]);
    assert!(err.starts_with("WARDEN_OAUTH_JWKS is not set"), "{err}");
    let err = config_error(&[("WARDEN_OAUTH_JWKS", &jwks)]);
    assert!(err.starts_with("WARDEN_OAUTH_ISSUER is not set"), "{err}");
    let err = config_error(&[(SCOPES_VAR, "mcp:tools")]);
    assert!(err.starts_with("WARDEN_OAUTH_ISSUER is not set"), "{err}");
    let err = config_error(&[(ISSUER_VAR, "issuer.test"), ("WARDEN_OAUTH_JWKS", &jwks)]);
    assert!(err.contains(ISSUER_VAR) && err.contains("https://"), "{err}");
    let err = config_error(&[
        (ISSUER_VAR, ISSUER),
        ("WARDEN_OAUTH_JWKS", "/nonexistent/jwks.json"),
    ]);
    assert!(
        err.contains("WARDEN_OAUTH_JWKS") && err.contains("/nonexistent/jwks.json"),
        "{err}"
    );
    let err = config_error(&[(TOKENS_FILE_VAR, "/nonexistent/tokens")]);
    assert!(
        err.starts_with("WARDEN_API_TOKENS_FILE /nonexistent/tokens: cannot be read"),
        "{err}"
    );
}

#[test]
fn the_resource_url_is_checked_and_split() {
    let r = Resource::parse("https://warden.example.com/team/mcp/").expect("valid");
    assert_eq!(
        r.metadata_url(),
        "https://warden.example.com/.well-known/oauth-protected-resource/team/mcp"
    );
    let r = Resource::parse("http://127.0.0.1:8080").expect("valid");
    assert_eq!(
        r.metadata_url(),
        "http://127.0.0.1:8080/.well-known/oauth-protected-resource"
    );
    for bad in [
        "127.0.0.1:8080/mcp",
        "https:///mcp",
        "https://h/mcp?x=1",
        "https://h/mcp#f",
        "https://h/m\"cp",
    ] {
        let err = Resource::parse(bad).map(|_| ()).expect_err(bad).to_string();
        assert!(err.contains("(WARDEN_PUBLIC_URL)"), "{err}");
    }
}

/// One HTTP/1.1 exchange: status, headers (lower-case names, in order) and
/// the JSON body (or `Value::Null`).
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or_default()
    }
}

async fn request(addr: std::net::SocketAddr, method: &str, path: &str, headers: &[&[u8]]) -> Reply {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut raw =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n")
            .into_bytes();
    for header in headers {
        raw.extend_from_slice(header);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"\r\n");
    stream.write_all(&raw).await.expect("send");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.expect("receive");
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status");
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.to_string()))
        .collect();
    let body = serde_json::from_str(body).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        body,
    }
}

/// Serves `/mcp` (echoing the principal as `{"principal": …}`) behind the
/// layer, plus the public routes.
async fn serve(pairs: &[(&str, &str)]) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let resource = format!("http://{addr}/mcp");
    let lookup = settings(pairs);
    let auth = tokio::task::spawn_blocking(move || Auth::from_lookup(&resource, lookup))
        .await
        .expect("join")
        .expect("valid settings")
        .expect("authentication configured");
    let auth = Arc::new(auth.with_resource_name("Test app"));
    let echo = |Extension(p): Extension<Principal>| async move { Json(json!({"principal": p.as_str()})) };
    let app = axum::Router::new()
        .route("/mcp", post(echo))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&auth),
            |State(auth): State<Arc<Auth>>, request: Request, next: Next| async move {
                match auth.admit(request).await {
                    Ok(request) => next.run(request).await,
                    Err(refused) => *refused,
                }
            },
        ))
        .merge(auth.public_routes());
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

fn sha256_hex(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn tokens_file(dir: &tempfile::TempDir) -> String {
    let path = dir.path().join("tokens");
    std::fs::write(&path, format!("# test\nalice {}\n", sha256_hex("alice-token"))).expect("write");
    path.display().to_string()
}

fn jwt(addr: std::net::SocketAddr, extra: Value) -> String {
    let mut claims = json!({
        "iss": ISSUER, "aud": format!("http://{addr}/mcp"), "sub": "bob",
        "exp": jsonwebtoken::get_current_timestamp() + 600,
    });
    for (k, v) in extra.as_object().expect("object") {
        claims[k] = v.clone();
    }
    let key = EncodingKey::from_rsa_pem(&std::fs::read(fixture("test-signing-key.pem")).expect("pem"))
        .expect("key");
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("warden-test-1".into());
    encode(&header, &claims, &key).expect("signs")
}

fn bearer(token: &str) -> Vec<u8> {
    format!("Authorization: Bearer {token}").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_oauth_over_http() {
    // Every answer of the layer with both methods and a required scope:
    // status, exact challenge, code, and the principal reaching the route.
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = tokens_file(&dir);
    let jwks = fixture("test-jwks.json").display().to_string();
    let addr = serve(&[
        (TOKENS_FILE_VAR, &tokens),
        (ISSUER_VAR, ISSUER),
        ("WARDEN_OAUTH_JWKS", &jwks),
        (SCOPES_VAR, "mcp:tools"),
    ])
    .await;
    let metadata = format!("http://{addr}/.well-known/oauth-protected-resource/mcp");

    let r = request(addr, "POST", "/mcp", &[]).await;
    assert_eq!((r.status, r.code()), (401, "authentication_required"));
    assert_eq!(
        r.header("www-authenticate"),
        Some(format!("Bearer scope=\"mcp:tools\", resource_metadata=\"{metadata}\"").as_str())
    );
    let message = r.body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(ISSUER) && message.contains("API token"),
        "{message}"
    );

    let r = request(addr, "POST", "/mcp", &[b"Authorization: Basic YWxpY2U6eA=="]).await;
    assert_eq!((r.status, r.code()), (401, "authentication_required"));

    let r = request(addr, "POST", "/mcp", &[&bearer("alice-token")]).await;
    assert_eq!((r.status, &r.body), (200, &json!({"principal": "alice"})));
    let r = request(addr, "POST", "/mcp", &[b"authorization: bearer alice-token"]).await;
    assert_eq!(r.status, 200, "the scheme is case-insensitive");

    let r = request(addr, "POST", "/mcp", &[&bearer("alice-token2")]).await;
    assert_eq!((r.status, r.code()), (401, "invalid_token"));
    assert_eq!(
        r.header("www-authenticate"),
        Some(
            format!(
                "Bearer error=\"invalid_token\", error_description=\"unknown token\", scope=\"mcp:tools\", \
                 resource_metadata=\"{metadata}\""
            )
            .as_str()
        )
    );

    let good = jwt(addr, json!({"scope": "mcp:tools"}));
    let r = request(addr, "POST", "/mcp", &[&bearer(&good)]).await;
    assert_eq!((r.status, &r.body), (200, &json!({"principal": "bob"})));

    let unscoped = jwt(addr, json!({}));
    let r = request(addr, "POST", "/mcp", &[&bearer(&unscoped)]).await;
    assert_eq!((r.status, r.code()), (403, "insufficient_scope"));
    assert_eq!(
        r.header("www-authenticate"),
        Some(
            format!(
                "Bearer error=\"insufficient_scope\", scope=\"mcp:tools\", resource_metadata=\"{metadata}\""
            )
            .as_str()
        )
    );

    // `local` is the operator's name: no JWT can claim it.
    let operator = jwt(addr, json!({"scope": "mcp:tools", "sub": "local"}));
    let r = request(addr, "POST", "/mcp", &[&bearer(&operator)]).await;
    assert_eq!((r.status, r.code()), (401, "invalid_token"));
    assert!(
        r.body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("reserved"),
        "{:?}",
        r.body
    );

    let expired = jwt(addr, json!({"scope": "mcp:tools", "exp": 1_000_000_000}));
    let r = request(addr, "POST", "/mcp", &[&bearer(&expired)]).await;
    assert_eq!((r.status, r.code()), (401, "invalid_token"));
    assert!(
        r.header("www-authenticate")
            .is_some_and(|h| h.contains("error_description=\"token expired\"")),
        "{:?}",
        r.headers
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_authorization_is_a_400() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = tokens_file(&dir);
    let addr = serve(&[(TOKENS_FILE_VAR, &tokens)]).await;
    let long = bearer(&"a".repeat(MAX_AUTHORIZATION_BYTES));
    let cases: [&[&[u8]]; 5] = [
        &[b"Authorization: Bearer"],
        &[b"Authorization: Bearer a\"b"],
        &[
            b"Authorization: Bearer alice-token",
            b"Authorization: Bearer alice-token",
        ],
        &[b"Authorization: Bearer caf\xc3\xa9"],
        &[&long],
    ];
    for headers in cases {
        let r = request(addr, "POST", "/mcp", headers).await;
        assert_eq!(
            (r.status, r.code()),
            (400, "malformed_authorization"),
            "{headers:?}"
        );
        let challenge = r.header("www-authenticate").unwrap_or_default();
        assert!(
            challenge.starts_with("Bearer error=\"invalid_request\""),
            "{challenge}"
        );
    }
    // Just under the cap is read (and refused as unknown, not malformed).
    let fits = bearer(&"a".repeat(MAX_AUTHORIZATION_BYTES - "Bearer ".len()));
    assert_eq!(request(addr, "POST", "/mcp", &[&fits]).await.status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_tokens_alone_advertise_no_oauth() {
    // Without OAuth the challenge has no resource_metadata and the
    // metadata document does not exist.
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = tokens_file(&dir);
    let addr = serve(&[(TOKENS_FILE_VAR, &tokens)]).await;
    let r = request(addr, "POST", "/mcp", &[]).await;
    assert_eq!((r.status, r.header("www-authenticate")), (401, Some("Bearer")));
    let r = request(addr, "POST", "/mcp", &[&bearer("nope")]).await;
    assert_eq!(
        r.header("www-authenticate"),
        Some("Bearer error=\"invalid_token\", error_description=\"unknown token\"")
    );
    let r = request(addr, "GET", WELL_KNOWN, &[]).await;
    assert_eq!(r.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metadata_document_is_public() {
    let jwks = fixture("test-jwks.json").display().to_string();
    let addr = serve(&[
        (ISSUER_VAR, ISSUER),
        ("WARDEN_OAUTH_JWKS", &jwks),
        (SCOPES_VAR, "mcp:tools,mcp:read"),
    ])
    .await;
    let expected = json!({
        "resource": format!("http://{addr}/mcp"),
        "authorization_servers": [ISSUER],
        "scopes_supported": ["mcp:tools", "mcp:read"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Test app",
    });
    for path in [WELL_KNOWN.to_string(), format!("{WELL_KNOWN}/mcp")] {
        let r = request(addr, "GET", &path, &[]).await;
        assert_eq!((r.status, &r.body), (200, &expected), "{path}");
        assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    }
    // An opaque token with OAuth only is not a JWT.
    let r = request(addr, "POST", "/mcp", &[&bearer("opaque")]).await;
    assert_eq!((r.status, r.code()), (401, "invalid_token"));
}

#[test]
fn every_code_is_documented_in_the_security_guide() {
    let guide = std::fs::read_to_string(
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("docs/security.md"),
    )
    .expect("docs/security.md");
    let missing: Vec<&str> = reply::codes::ALL
        .iter()
        .copied()
        .filter(|c| !guide.contains(&format!("`{c}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "codes missing from docs/security.md: {missing:?}"
    );
}
