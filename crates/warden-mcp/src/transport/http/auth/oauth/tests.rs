//! JWT validation against the test key pair in tests/fixtures/oauth/.

use std::path::PathBuf;

use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};

use super::*;

const ISSUER: &str = "https://issuer.test";
const RESOURCE: &str = "http://127.0.0.1:8080/mcp";
const KID: &str = "warden-test-1";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("tests/fixtures/oauth")
        .join(name)
}

fn oauth(scopes: &[&str]) -> OAuth {
    let jwks = Jwks::load(JwksSource::File(fixture("test-jwks.json"))).expect("fixture JWKS");
    OAuth::with_jwks(ISSUER, RESOURCE, scopes, jwks)
}

fn now() -> i64 {
    i64::try_from(jsonwebtoken::get_current_timestamp()).expect("timestamp")
}

/// Valid claims for `alice`, an hour left.
fn claims() -> Value {
    json!({"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "exp": now() + 3600, "iat": now()})
}

fn sign_with(claims: &Value, kid: Option<&str>, pem: &str) -> String {
    let key = EncodingKey::from_rsa_pem(&std::fs::read(fixture(pem)).expect("pem")).expect("an RSA key");
    let mut header = Header::new(Algorithm::RS256);
    header.kid = kid.map(str::to_string);
    encode(&header, claims, &key).expect("signs")
}

fn sign(claims: &Value) -> String {
    sign_with(claims, Some(KID), "test-signing-key.pem")
}

fn with(change: &[(&str, Value)]) -> Value {
    let mut c = claims();
    for (k, v) in change {
        c[*k] = v.clone();
    }
    c
}

async fn description(oauth: &OAuth, token: &str) -> &'static str {
    match oauth.validate(token).await {
        Err(JwtRejection::Invalid { description, .. }) => description,
        other => panic!("expected invalid_token, got {other:?}"),
    }
}

#[tokio::test]
async fn a_valid_token_acts_for_its_sub() {
    let oauth = oauth(&[]);
    assert_eq!(
        oauth.validate(&sign(&claims())).await.map(|(p, _)| p.to_string()),
        Ok("alice".into())
    );
    // `aud` may be a list that includes this resource.
    let token = sign(&with(&[("aud", json!(["https://other", RESOURCE]))]));
    assert!(oauth.validate(&token).await.is_ok());
}

#[tokio::test]
async fn expiry_and_not_before_are_enforced_with_a_small_leeway() {
    let oauth = oauth(&[]);
    let leeway = i64::try_from(JWT_LEEWAY.as_secs()).expect("secs");
    let expired = sign(&with(&[("exp", json!(now() - leeway - 30))]));
    assert_eq!(description(&oauth, &expired).await, "token expired");
    let early = sign(&with(&[("nbf", json!(now() + leeway + 60))]));
    assert_eq!(description(&oauth, &early).await, "token not yet valid");
    // Within the leeway both pass (clock skew).
    let skewed = sign(&with(&[("exp", json!(now() - 5)), ("nbf", json!(now() + 5))]));
    assert!(oauth.validate(&skewed).await.is_ok());
}

#[tokio::test]
async fn audience_and_issuer_must_match() {
    let oauth = oauth(&[]);
    let other = sign(&with(&[("aud", json!("https://other.service/mcp"))]));
    assert_eq!(description(&oauth, &other).await, "wrong audience");
    let foreign = sign(&with(&[("iss", json!("https://evil.test"))]));
    assert_eq!(description(&oauth, &foreign).await, "wrong issuer");
    match oauth.validate(&other).await {
        Err(JwtRejection::Invalid { message, .. }) => assert!(message.contains(RESOURCE), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn required_claims_are_required() {
    let oauth = oauth(&[]);
    for claim in ["exp", "iss", "aud", "sub"] {
        let mut c = claims();
        c.as_object_mut().expect("object").remove(claim);
        assert_eq!(
            description(&oauth, &sign(&c)).await,
            "missing claim",
            "without {claim}"
        );
    }
    let bad_sub = sign(&with(&[("sub", json!("a\u{7}b"))]));
    assert_eq!(description(&oauth, &bad_sub).await, "invalid sub");
}

#[tokio::test]
async fn a_foreign_key_or_unknown_kid_is_refused() {
    let oauth = oauth(&[]);
    // Signed by a key outside the JWKS but naming the trusted kid.
    let forged = sign_with(&claims(), Some(KID), "test-untrusted-key.pem");
    assert_eq!(description(&oauth, &forged).await, "bad signature");
    let unknown = sign_with(&claims(), Some("not-in-jwks"), "test-signing-key.pem");
    assert_eq!(description(&oauth, &unknown).await, "unknown signing key");
    // The fixture set has one key, so a token without kid uses it.
    assert!(
        oauth
            .validate(&sign_with(&claims(), None, "test-signing-key.pem"))
            .await
            .is_ok()
    );
    // A tampered payload breaks the signature.
    let token = sign(&claims());
    let mut parts: Vec<String> = token.split('.').map(str::to_string).collect();
    parts[1] = sign(&with(&[("sub", json!("mallory"))]))
        .split('.')
        .nth(1)
        .expect("payload")
        .into();
    assert_eq!(description(&oauth, &parts.join(".")).await, "bad signature");
}

#[tokio::test]
async fn alg_none_and_hmac_are_never_accepted() {
    use base64::Engine;
    let oauth = oauth(&[]);
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let none = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT", "kid": KID})),
        b64(&claims())
    );
    assert_eq!(description(&oauth, &none).await, "malformed token");
    // HS256 keyed with the public key material (the classic confusion).
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(KID.into());
    let public = std::fs::read(fixture("test-jwks.json")).expect("jwks");
    let hs = encode(
        &header,
        &claims(),
        &EncodingKey::from_secret(&public).expect("hmac key"),
    )
    .expect("signs");
    assert_eq!(description(&oauth, &hs).await, "algorithm not allowed");
    assert_eq!(description(&oauth, "not-a-jwt").await, "malformed token");
}

#[tokio::test]
async fn every_configured_scope_is_required() {
    let oauth = oauth(&["mcp:tools", "mcp:read"]);
    assert_eq!(
        oauth.validate(&sign(&claims())).await,
        Err(JwtRejection::MissingScopes(vec![
            "mcp:tools".into(),
            "mcp:read".into()
        ]))
    );
    let partial = sign(&with(&[("scope", json!("openid mcp:read"))]));
    assert_eq!(
        oauth.validate(&partial).await,
        Err(JwtRejection::MissingScopes(vec!["mcp:tools".into()]))
    );
    let full = sign(&with(&[("scope", json!("mcp:read openid mcp:tools"))]));
    let (_, granted) = oauth.validate(&full).await.expect("valid");
    assert_eq!(
        granted.to_vec(),
        vec!["mcp:read", "openid", "mcp:tools"],
        "every granted scope is kept for the policy"
    );
    let scp = sign(&with(&[("scp", json!(["mcp:tools", "mcp:read"]))]));
    assert!(oauth.validate(&scp).await.is_ok());
}

#[test]
fn scopes_parse_from_spaces_or_commas() {
    assert_eq!(
        parse_scopes(" mcp:tools,mcp:read  mcp:tools ,").ok(),
        Some(vec!["mcp:tools".to_string(), "mcp:read".to_string()])
    );
    assert_eq!(parse_scopes("").ok(), Some(vec![]));
    let err = parse_scopes("a\"b").expect_err("quote").to_string();
    assert!(err.contains(SCOPES_VAR), "{err}");
}
