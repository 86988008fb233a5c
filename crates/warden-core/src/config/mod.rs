//! Where Warden reads its settings: the process environment, then the
//! allowed lines of a `.env` file.
//!
//! Every `WARDEN_*` and `OTEL_*` setting is read through [`var`] (limits,
//! the artifacts directory, the model, tracing, preflight), so a `.env`
//! file configures the server without `std::env::set_var`: the process
//! environment is never mutated (mutating it is unsound once threads exist,
//! and would hand `.env` values to every child process). A variable set in
//! the process environment wins over the file. The overlay is installed
//! once, by the CLI (`crate::config::dotenv`) before any setting is read;
//! without it [`var`] is the process environment.
//!
//! An empty value means unset, in the environment and in `.env` alike:
//! `.env.example` copied as it is (`WARDEN_ARTIFACTS_DIR=`) must leave the
//! default in force, never configure an empty path.

pub mod dotenv;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::OnceLock;

/// Prefixes of the variables a `.env` file may set: Warden's own and
/// OpenTelemetry's. Anything else (`PATH`, `LD_PRELOAD`, …) is ignored.
pub const ALLOWED_PREFIXES: &[&str] = &["WARDEN_", "OTEL_"];

/// Values from `.env`, installed once. Never contains a variable the
/// process environment had when it was installed.
static OVERLAY: OnceLock<BTreeMap<String, String>> = OnceLock::new();

/// Whether a `.env` file may set `name`.
pub fn allowed(name: &str) -> bool {
    ALLOWED_PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

/// Installs the `.env` values (allowed names only; others are dropped).
/// Returns `false` if an overlay was installed already (the first wins).
pub fn install(values: impl IntoIterator<Item = (String, String)>) -> bool {
    OVERLAY.set(filtered(values)).is_ok()
}

/// A setting: the process environment's value, else the `.env` value.
pub fn var_os(name: &str) -> Option<OsString> {
    lookup(overlay(), name)
}

fn filtered(values: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    values.into_iter().filter(|(name, _)| allowed(name)).collect()
}

fn lookup(overlay: &BTreeMap<String, String>, name: &str) -> Option<OsString> {
    std::env::var_os(name)
        .filter(|value| !value.is_empty())
        .or_else(|| {
            overlay
                .get(name)
                .filter(|value| !value.is_empty())
                .map(OsString::from)
        })
}

/// A setting as text; `None` when unset or not valid UTF-8.
pub fn var(name: &str) -> Option<String> {
    var_os(name).and_then(|value| value.into_string().ok())
}

/// Every setting whose name starts with `prefix`, process environment
/// first, then the `.env` values it does not shadow.
pub fn vars_with_prefix(prefix: &str) -> BTreeMap<OsString, OsString> {
    let mut found: BTreeMap<OsString, OsString> = overlay()
        .iter()
        .filter(|(name, value)| name.starts_with(prefix) && !value.is_empty())
        .map(|(name, value)| (OsString::from(name), OsString::from(value)))
        .collect();
    for (name, value) in std::env::vars_os() {
        if !value.is_empty() && name.to_str().is_some_and(|n| n.starts_with(prefix)) {
            found.insert(name, value);
        }
    }
    found
}

fn overlay() -> &'static BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    OVERLAY.get().unwrap_or(&EMPTY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_warden_and_otel_names_are_allowed() {
        // A .env may configure Warden and OpenTelemetry, nothing else.
        assert!(allowed("WARDEN_MAX_TIMEOUT_SECONDS"));
        assert!(allowed("OTEL_EXPORTER_OTLP_ENDPOINT"));
        for name in ["PATH", "LD_PRELOAD", "HOME", "warden_x", "XWARDEN_Y"] {
            assert!(!allowed(name), "{name}");
        }
    }

    #[test]
    fn the_overlay_fills_in_without_touching_the_environment() {
        // An installed value is readable through var() but not via std::env,
        // a foreign name is dropped, and the process environment wins.
        let name = "WARDEN_CONFIG_UNIT_TEST_ONLY";
        let overlay = filtered([
            (name.to_string(), "from-dotenv".to_string()),
            ("LD_PRELOAD".to_string(), "/evil.so".to_string()),
            ("WARDEN_HOME".to_string(), "x".to_string()),
        ]);
        assert_eq!(lookup(&overlay, name), Some(OsString::from("from-dotenv")));
        assert!(std::env::var_os(name).is_none());
        assert!(!overlay.contains_key("LD_PRELOAD"));
        // The process environment wins over the file.
        let path = std::env::var_os("PATH");
        let overlay = BTreeMap::from([("PATH".to_string(), "/evil".to_string())]);
        assert_eq!(lookup(&overlay, "PATH"), path);
    }

    #[test]
    fn an_empty_value_means_unset() {
        // `WARDEN_ARTIFACTS_DIR=` as copied from .env.example leaves the default in force.
        let overlay = filtered([("WARDEN_CONFIG_EMPTY_UNIT_TEST".to_string(), String::new())]);
        assert_eq!(lookup(&overlay, "WARDEN_CONFIG_EMPTY_UNIT_TEST"), None);
    }
}
