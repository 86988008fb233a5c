//! OAuth access tokens for the tests: JWTs signed with the test-only key in
//! tests/fixtures/oauth/, and the JWKS a server trusts, made from that key.

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};

use crate::common::workspace_root;

/// The issuer the test servers trust (`WARDEN_OAUTH_ISSUER`).
pub const ISSUER: &str = "https://issuer.test";
/// The key id of the test signing key in the JWKS.
pub const KID: &str = "http-auth-test";
/// The fixture key the JWKS holds; `test-untrusted-key.pem` is another.
pub const GOOD_KEY: &str = "test-signing-key.pem";

pub fn signing_key(file: &str) -> EncodingKey {
    let pem = std::fs::read(workspace_root().join("tests/fixtures/oauth").join(file)).expect("test key");
    EncodingKey::from_rsa_pem(&pem).expect("an RSA private key")
}

/// The JWK Set of the test signing key, with [`KID`].
pub fn test_jwks() -> String {
    let mut jwk = Jwk::from_encoding_key(&signing_key(GOOD_KEY), Algorithm::RS256).expect("a JWK");
    jwk.common.key_id = Some(KID.into());
    serde_json::to_string(&JwkSet { keys: vec![jwk] }).expect("JSON")
}

/// A JWT from [`ISSUER`] for the resource `audience` with an hour left,
/// signed by the fixture key `key_file`; `claims` (`sub`, `scope`, …) are
/// added over those and may override them.
pub fn jwt(audience: &str, claims: Value, key_file: &str) -> String {
    let now = jsonwebtoken::get_current_timestamp();
    let mut all = json!({"iss": ISSUER, "aud": audience, "exp": now + 3600, "iat": now});
    for (k, v) in claims.as_object().expect("an object") {
        all[k] = v.clone();
    }
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(KID.into());
    encode(&header, &all, &signing_key(key_file)).expect("signs")
}

/// Writes the JWKS into `dir`; its path, for `WARDEN_OAUTH_JWKS`.
pub fn jwks_file(dir: &std::path::Path) -> String {
    let path = dir.join("jwks.json");
    std::fs::write(&path, test_jwks()).expect("jwks file");
    path.display().to_string()
}
