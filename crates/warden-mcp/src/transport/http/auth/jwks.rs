//! The OAuth issuer's signing keys (`WARDEN_OAUTH_JWKS`): loaded from a URL
//! or a file, cached, and reloaded when a token names a key id the cache
//! lacks or the cache is old, never more often than
//! [`JWKS_MIN_REFRESH_INTERVAL`].
//!
//! Only asymmetric keys are kept (RSA, EC P-256/P-384, Ed25519), each with
//! the algorithms it may verify: its JWK `alg` if it names one, else its
//! family's. Symmetric (`oct`) keys, encryption keys and unknown key types
//! are dropped, so a token can never be checked with HMAC over a public key.
//! A fetch is bounded by [`JWKS_FETCH_TIMEOUT`] and [`JWKS_MAX_BYTES`] and
//! runs on the blocking pool; a failed reload keeps the old keys.

use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};

use crate::limits::{JWKS_FETCH_TIMEOUT, JWKS_MAX_AGE, JWKS_MAX_BYTES, JWKS_MIN_REFRESH_INTERVAL};

/// The variable naming the key set.
pub(super) const JWKS_VAR: &str = "WARDEN_OAUTH_JWKS";

/// Where the keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum JwksSource {
    Url(String),
    File(PathBuf),
}

impl JwksSource {
    /// `https://…` is a URL; `http://` only to a loopback host (a key set
    /// fetched in clear over a network could be swapped by anyone on the
    /// path); anything else is a file path.
    pub(super) fn parse(value: &str) -> Result<Self, JwksError> {
        if value.starts_with("https://") {
            return Ok(Self::Url(value.to_string()));
        }
        if let Some(rest) = value.strip_prefix("http://") {
            let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            let host = if host.starts_with('[') {
                host.split(']')
                    .next()
                    .map(|h| h.trim_start_matches('['))
                    .unwrap_or_default()
            } else {
                host.split(':').next().unwrap_or_default()
            };
            let loopback =
                host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
            if loopback {
                return Ok(Self::Url(value.to_string()));
            }
            return Err(JwksError::Cleartext);
        }
        if value.contains("://") {
            return Err(JwksError::NotUrlOrPath);
        }
        Ok(Self::File(PathBuf::from(value)))
    }
}

impl std::fmt::Display for JwksSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Url(url) => f.write_str(url),
            Self::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// A usable verification key.
#[derive(Clone)]
pub(super) struct Key {
    kid: Option<String>,
    pub(super) key: DecodingKey,
    pub(super) algorithms: Vec<Algorithm>,
}

/// The keys of one load, and when it happened.
struct KeySet {
    keys: Vec<Key>,
    loaded: Instant,
}

impl KeySet {
    /// The key a token's `kid` names. A token without `kid` is accepted
    /// only when the set holds exactly one key (it cannot be ambiguous).
    fn find(&self, kid: Option<&str>) -> Option<Key> {
        match kid {
            Some(kid) => self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)).cloned(),
            None if self.keys.len() == 1 => self.keys.first().cloned(),
            None => None,
        }
    }
}

/// The cached key set with its reload policy.
pub(super) struct Jwks {
    source: JwksSource,
    /// The current keys, swapped whole by a successful reload.
    keys: RwLock<Arc<KeySet>>,
    /// When a load was last attempted. Held across a reload, so concurrent
    /// requests that need one wait for the single reload in flight instead
    /// of starting their own.
    last_attempt: tokio::sync::Mutex<Instant>,
    /// Least time between loads: [`JWKS_MIN_REFRESH_INTERVAL`] (shorter in
    /// tests).
    min_interval: Duration,
    /// Age at which a background reload starts: [`JWKS_MAX_AGE`].
    max_age: Duration,
}

impl std::fmt::Debug for Jwks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jwks")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Jwks {
    /// Loads the keys once (blocking). A source that cannot be read or
    /// holds no usable key is an error naming it.
    pub(super) fn load(source: JwksSource) -> Result<Self, JwksError> {
        let keys = load_keys(&source)?;
        if keys.is_empty() {
            return Err(JwksError::NoUsableKey(source.to_string()));
        }
        let now = Instant::now();
        Ok(Self {
            source,
            keys: RwLock::new(Arc::new(KeySet { keys, loaded: now })),
            last_attempt: tokio::sync::Mutex::new(now),
            min_interval: JWKS_MIN_REFRESH_INTERVAL,
            max_age: JWKS_MAX_AGE,
        })
    }

    #[cfg(test)]
    pub(super) fn with_intervals(mut self, min_interval: Duration, max_age: Duration) -> Self {
        self.min_interval = min_interval;
        self.max_age = max_age;
        self
    }

    fn current(&self) -> Arc<KeySet> {
        match self.keys.read() {
            Ok(keys) => Arc::clone(&keys),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// The key for `kid`: from the cache, else after one rate-limited
    /// reload. An old cache is reloaded in the background meanwhile.
    pub(super) async fn key(self: &Arc<Self>, kid: Option<&str>) -> Option<Key> {
        let keys = self.current();
        if let Some(key) = keys.find(kid) {
            if keys.loaded.elapsed() >= self.max_age {
                let jwks = Arc::clone(self);
                tokio::spawn(async move { jwks.reload().await });
            }
            return Some(key);
        }
        self.reload().await;
        self.current().find(kid)
    }

    /// Reloads unless a load was attempted within the minimum interval.
    async fn reload(&self) {
        let mut last = self.last_attempt.lock().await;
        if last.elapsed() < self.min_interval {
            return;
        }
        *last = Instant::now();
        let source = self.source.clone();
        let loaded = tokio::task::spawn_blocking(move || load_keys(&source)).await;
        match loaded {
            Ok(Ok(keys)) if !keys.is_empty() => {
                let set = Arc::new(KeySet {
                    keys,
                    loaded: Instant::now(),
                });
                match self.keys.write() {
                    Ok(mut current) => *current = set,
                    Err(poisoned) => *poisoned.into_inner() = set,
                }
            }
            Ok(Ok(_)) => {
                tracing::warn!(source = %self.source, "JWKS reload found no usable key; keeping the old keys")
            }
            Ok(Err(reason)) => {
                tracing::warn!(source = %self.source, "JWKS reload failed, keeping the old keys: {reason}")
            }
            Err(e) => tracing::warn!(source = %self.source, "JWKS reload did not finish: {e}"),
        }
    }
}

/// Reads the document and keeps its usable keys.
fn load_keys(source: &JwksSource) -> Result<Vec<Key>, JwksError> {
    let bytes = match source {
        JwksSource::Url(url) => fetch(url)?,
        JwksSource::File(path) => read_file(path)?,
    };
    let document: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|error| JwksError::NotJson(source.to_string(), error))?;
    let Some(entries) = document.get("keys").and_then(|k| k.as_array()) else {
        return Err(JwksError::NoKeys(source.to_string()));
    };
    Ok(entries
        .iter()
        .filter_map(|entry| serde_json::from_value::<Jwk>(entry.clone()).ok())
        .filter_map(|jwk| usable(&jwk))
        .collect())
}

/// The key and its algorithms, or `None` for a key Warden will not verify
/// with (symmetric, encryption-only, unsupported curve or type, or an
/// `alg` that does not fit the key).
fn usable(jwk: &Jwk) -> Option<Key> {
    if jwk.common.public_key_use == Some(PublicKeyUse::Encryption) {
        return None;
    }
    let family: &[Algorithm] = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => &[
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
        ],
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => &[Algorithm::ES256],
            EllipticCurve::P384 => &[Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => &[Algorithm::EdDSA],
        _ => return None,
    };
    let algorithms = match jwk.common.key_algorithm {
        None => family.to_vec(),
        Some(alg) => {
            let alg = key_algorithm(alg)?;
            if !family.contains(&alg) {
                return None;
            }
            vec![alg]
        }
    };
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(Key {
        kid: jwk.common.key_id.clone(),
        key,
        algorithms,
    })
}

fn key_algorithm(alg: KeyAlgorithm) -> Option<Algorithm> {
    Algorithm::try_from(alg).ok()
}

/// Redirects followed when fetching the key set: each target is checked
/// against the same https / loopback-http rule as the configured URL, so a
/// redirect cannot downgrade the fetch to clear text on a network.
const JWKS_MAX_REDIRECTS: usize = 3;

fn fetch(configured: &str) -> Result<Vec<u8>, JwksError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(JWKS_FETCH_TIMEOUT))
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    let mut url = configured.to_string();
    let mut redirects = 0;
    let mut response = loop {
        let response = agent
            .get(&url)
            .header("Accept", "application/json")
            .call()
            .map_err(|e| match e {
                ureq::Error::Timeout(_) => JwksError::Slow(url.clone()),
                other => JwksError::Fetch(url.clone(), other),
            })?;
        let status = response.status().as_u16();
        if !(300..400).contains(&status) {
            break response;
        }
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        redirects += 1;
        match JwksSource::parse(&location) {
            Ok(JwksSource::Url(next)) if redirects <= JWKS_MAX_REDIRECTS => url = next,
            _ => return Err(JwksError::Redirect(configured.to_string(), location)),
        }
    };
    let status = response.status().as_u16();
    if status != 200 {
        return Err(JwksError::Status(url, status));
    }
    response
        .body_mut()
        .with_config()
        .limit(JWKS_MAX_BYTES as u64)
        .read_to_vec()
        .map_err(|e| match e {
            ureq::Error::BodyExceedsLimit(_) => JwksError::TooLarge(url.clone()),
            other => JwksError::ReadBody(url.clone(), other),
        })
}

fn read_file(path: &std::path::Path) -> Result<Vec<u8>, JwksError> {
    let file =
        std::fs::File::open(path).map_err(|error| JwksError::Open(path.display().to_string(), error))?;
    let mut bytes = Vec::new();
    file.take(JWKS_MAX_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| JwksError::Read(path.display().to_string(), error))?;
    if bytes.len() > JWKS_MAX_BYTES {
        return Err(JwksError::TooLarge(path.display().to_string()));
    }
    Ok(bytes)
}

/// Why the key set could not be had, naming `WARDEN_OAUTH_JWKS` and where
/// it points.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JwksError {
    #[error(
        "{JWKS_VAR} is a plain http:// URL to a non-loopback host; use the issuer's https:// JWKS URL \
         (http:// is accepted for 127.0.0.1/localhost only)"
    )]
    Cleartext,
    #[error("{JWKS_VAR} must be an https:// URL or a file path")]
    NotUrlOrPath,
    #[error(
        "{JWKS_VAR} {0} holds no usable signing key (RSA, EC P-256/P-384 or Ed25519, \
         not `use: enc`, not symmetric); point it at the issuer's JWKS"
    )]
    NoUsableKey(String),
    #[error("{JWKS_VAR} {0} is not JSON: {1}")]
    NotJson(String, serde_json::Error),
    #[error("{JWKS_VAR} {0} has no `keys` array; it must be a JWK Set (RFC 7517)")]
    NoKeys(String),
    #[error("{JWKS_VAR} {0} did not answer within {secs} s", secs = JWKS_FETCH_TIMEOUT.as_secs())]
    Slow(String),
    #[error("cannot fetch {JWKS_VAR} {0}: {1}")]
    Fetch(String, ureq::Error),
    #[error("{JWKS_VAR} {0} answered HTTP {1}; check the URL")]
    Status(String, u16),
    #[error(
        "{JWKS_VAR} {0} redirected to '{1}', which is not an absolute https:// URL (or http:// to \
         127.0.0.1/localhost), or redirected more than {JWKS_MAX_REDIRECTS} times; set {JWKS_VAR} to the final URL"
    )]
    Redirect(String, String),
    #[error("cannot read {JWKS_VAR} {0}: {1}")]
    ReadBody(String, ureq::Error),
    #[error("cannot read {JWKS_VAR} {0}: {1}; set it to the issuer's JWKS URL or a readable file")]
    Open(String, std::io::Error),
    #[error("cannot read {JWKS_VAR} {0}: {1}")]
    Read(String, std::io::Error),
    #[error("{JWKS_VAR} {0} is larger than {JWKS_MAX_BYTES} bytes; a JWK Set is a few KiB")]
    TooLarge(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const FIXTURE_JWKS: &str = include_str!("../../../../../../tests/fixtures/oauth/test-jwks.json");

    #[test]
    fn sources_are_urls_loopback_http_or_files() {
        assert_eq!(
            JwksSource::parse("https://issuer/jwks").ok(),
            Some(JwksSource::Url("https://issuer/jwks".into()))
        );
        for ok in ["http://127.0.0.1:9/k", "http://localhost/k", "http://[::1]:8/k"] {
            assert!(matches!(JwksSource::parse(ok), Ok(JwksSource::Url(_))), "{ok}");
        }
        let err = JwksSource::parse("http://issuer.example/jwks")
            .expect_err("cleartext")
            .to_string();
        assert!(err.contains("https://"), "{err}");
        assert!(JwksSource::parse("ftp://x").is_err());
        assert_eq!(
            JwksSource::parse("keys.json").ok(),
            Some(JwksSource::File("keys.json".into()))
        );
    }

    #[test]
    fn only_asymmetric_signing_keys_are_kept() {
        // The fixture's RSA key is kept with its one `alg`; an `oct` key, an
        // encryption key, an RSA key claiming HS256 and a P-521 key are not.
        let rsa: serde_json::Value = serde_json::from_str(FIXTURE_JWKS).expect("fixture");
        let rsa = rsa["keys"][0].clone();
        let mut enc = rsa.clone();
        enc["use"] = "enc".into();
        let mut hs = rsa.clone();
        hs["alg"] = "HS256".into();
        let mut any = rsa.clone();
        any.as_object_mut().expect("object").remove("alg");
        let cases = [
            (rsa, Some(vec![Algorithm::RS256])),
            (
                serde_json::json!({"kty": "oct", "k": "c2VjcmV0", "kid": "h"}),
                None,
            ),
            (enc, None),
            (hs, None),
            (
                serde_json::json!({"kty": "EC", "crv": "P-521", "x": "AA", "y": "AA", "kid": "e"}),
                None,
            ),
        ];
        for (jwk, expected) in cases {
            let parsed: Jwk = serde_json::from_value(jwk.clone()).expect("a JWK");
            assert_eq!(usable(&parsed).map(|k| k.algorithms), expected, "{jwk}");
        }
        let parsed: Jwk = serde_json::from_value(any).expect("a JWK");
        assert_eq!(usable(&parsed).map(|k| k.algorithms.len()), Some(6));
    }

    #[test]
    fn oversized_and_empty_files_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let big = dir.path().join("big.json");
        std::fs::write(&big, vec![b' '; JWKS_MAX_BYTES + 1]).expect("write");
        let err = Jwks::load(JwksSource::File(big))
            .expect_err("too large")
            .to_string();
        assert!(err.contains("larger than"), "{err}");
        let empty = dir.path().join("empty.json");
        std::fs::write(&empty, r#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#).expect("write");
        let err = Jwks::load(JwksSource::File(empty))
            .expect_err("no usable key")
            .to_string();
        assert!(err.contains("no usable signing key"), "{err}");
        let err = Jwks::load(JwksSource::File(dir.path().join("missing.json")))
            .expect_err("missing")
            .to_string();
        assert!(err.contains(JWKS_VAR) && err.contains("missing.json"), "{err}");
    }

    /// A one-thread HTTP server answering every request with `body` and
    /// counting the requests.
    fn serve(body: &'static str) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/jwks", listener.local_addr().expect("addr"));
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&hits);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counter.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        (url, hits)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unknown_kids_reload_at_most_once_per_interval() {
        // 200 lookups of made-up kids, 50 of them concurrent, cost the
        // issuer one request after startup, not 200.
        let (url, hits) = serve(FIXTURE_JWKS);
        let jwks = tokio::task::spawn_blocking(move || Jwks::load(JwksSource::Url(url)))
            .await
            .expect("join")
            .expect("loads over http");
        let jwks = Arc::new(jwks.with_intervals(Duration::ZERO, Duration::from_secs(3600)));
        assert_eq!(hits.load(Ordering::SeqCst), 1, "the startup load");
        assert!(jwks.key(Some("warden-test-1")).await.is_some());
        assert_eq!(hits.load(Ordering::SeqCst), 1, "a known kid needs no reload");

        // With a zero interval every unknown kid reloads: the rule's effect
        // is visible by contrast.
        assert!(jwks.key(Some("made-up")).await.is_none());
        assert_eq!(hits.load(Ordering::SeqCst), 2);

        let mut limited = Arc::try_unwrap(jwks).expect("sole owner");
        limited.min_interval = Duration::from_secs(3600);
        let jwks = Arc::new(limited);
        let floods = (0..50).map(|i| {
            let jwks = Arc::clone(&jwks);
            tokio::spawn(async move { jwks.key(Some(&format!("bad-{i}"))).await.is_none() })
        });
        for flood in floods {
            assert!(flood.await.expect("join"));
        }
        for i in 0..150 {
            assert!(jwks.key(Some(&format!("more-{i}"))).await.is_none());
        }
        assert_eq!(hits.load(Ordering::SeqCst), 2, "no reload within the interval");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_old_cache_is_reloaded_in_the_background() {
        // A known kid is answered at once; a cache older than the maximum
        // age starts one reload.
        let (url, hits) = serve(FIXTURE_JWKS);
        let jwks = tokio::task::spawn_blocking(move || Jwks::load(JwksSource::Url(url)))
            .await
            .expect("join")
            .expect("loads");
        let jwks = Arc::new(jwks.with_intervals(Duration::ZERO, Duration::ZERO));
        assert!(jwks.key(Some("warden-test-1")).await.is_some());
        let reloaded = async {
            while hits.load(Ordering::SeqCst) < 2 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), reloaded)
            .await
            .expect("a background reload");
    }

    #[test]
    fn a_slow_issuer_times_out_and_an_oversized_one_is_cut() {
        // The fetch gives up after the timeout (not the OS's minutes) and
        // reads no more than the byte cap.
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/jwks", listener.local_addr().expect("addr"));
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for (n, stream) in listener.incoming().enumerate() {
                let Ok(mut stream) = stream else { continue };
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                if n == 1 {
                    let body = " ".repeat(JWKS_MAX_BYTES + 10);
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                }
                held.push(stream); // the first one never gets an answer
            }
        });
        let started = Instant::now();
        let err = fetch(&url).expect_err("times out").to_string();
        assert!(err.contains("did not answer"), "{err}");
        assert!(started.elapsed() < JWKS_FETCH_TIMEOUT + Duration::from_secs(3));
        let err = fetch(&url).expect_err("too large").to_string();
        assert!(err.contains("larger than"), "{err}");
    }

    #[test]
    fn a_redirect_is_held_to_the_https_or_loopback_rule() {
        // A loopback issuer redirecting to a clear-text network host is
        // refused (naming the target); one redirecting to loopback is followed.
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let target = format!("{base}/keys");
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                // The whole request head is read before answering: closing
                // a socket with unread bytes resets it.
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let request = String::from_utf8_lossy(&head).to_string();
                // Each answer closes its connection, and says so: a client
                // that reused it for the redirect would meet a reset.
                let reply = if request.starts_with("GET /away") {
                    "HTTP/1.1 302 Found\r\nLocation: http://203.0.113.9/jwks\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .to_string()
                } else if request.starts_with("GET /near") {
                    format!(
                        "HTTP/1.1 301 Moved\r\nLocation: {target}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                } else {
                    let body = "{\"keys\": []}";
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                };
                let _ = stream.write_all(reply.as_bytes());
            }
        });
        let err = fetch(&format!("{base}/away")).expect_err("refused").to_string();
        assert!(err.contains("redirected to 'http://203.0.113.9/jwks'"), "{err}");
        let bytes = fetch(&format!("{base}/near")).expect("followed");
        assert_eq!(bytes, b"{\"keys\": []}");
    }
}
