//! The environment a worker starts with: an explicit allow-list.
//!
//! A worker (guard worker, the zygote, the script worker) and every program
//! a guard starts see only the variables named here, never the server's
//! whole environment: the server holds secrets (the input-state key, the
//! database URL, API token files, the model key, OAuth settings, cloud
//! credentials) that a guard has no use for and a hostile guard would
//! leak. What passes:
//!
//! - [`WORKER_ENV_NAMES`] and [`WORKER_ENV_PREFIXES`]: what any program
//!   needs to find tools, a home, a locale, a time zone, a temp dir, and
//!   Rust's backtrace switches;
//! - [`WORKER_SETTINGS`]: the Warden settings a worker reads itself;
//! - the names the app declares for its guards (`App::worker_variable`,
//!   e.g. `WARDEN_FINANCE_DATA`) and the names the operator lists in
//!   [`WORKER_ENV_VAR`], installed at start by [`configure`].
//!
//! Values come from the server's configuration ([`warden_core::config`]:
//! the process environment, then `.env`), so a `.env` setting an app's
//! guard reads reaches its worker. A name matching
//! [`WORKER_ENV_DENIED_PREFIXES`] never passes, whoever names it: naming
//! one is a start error, and [`worker_env`] drops it again in case.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::RwLock;

/// Variables every worker keeps, by exact name: what a program needs to
/// find tools, a home, a user name, a locale, a time zone and a temp dir,
/// and Rust's backtrace switches (a guard's panic then says where).
pub const WORKER_ENV_NAMES: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "RUST_BACKTRACE",
    "RUST_LIB_BACKTRACE",
];

/// Variables every worker keeps, by prefix: the locale categories.
pub const WORKER_ENV_PREFIXES: &[&str] = &["LC_"];

/// Warden's own settings that a worker reads itself: the layers an
/// operator asked the script worker to skip. Every other `WARDEN_*`
/// setting is read by the server only and stays there.
pub const WORKER_SETTINGS: &[&str] = &[SKIP_ENV];

/// Layers an operator asked the script worker not to apply, comma
/// separated: `network_namespace`, `landlock`, `process_limit`, `seccomp`.
/// For a host where one of them breaks scripts; a skipped layer is
/// reported missing like one the kernel refused, so every task start warns
/// and `WARDEN_SANDBOX=strict` refuses to run.
pub const SKIP_ENV: &str = "WARDEN_SANDBOX_SKIP";

/// The operator's setting naming more variables for workers, separated by
/// commas (e.g. `WARDEN_WORKER_ENV=HTTPS_PROXY,WARDEN_MY_DATA`): for
/// settings a guard reads that its app did not declare. Read at start;
/// a malformed or denied name stops the server.
pub const WORKER_ENV_VAR: &str = "WARDEN_WORKER_ENV";

/// Never passed to a worker, even when the app or [`WORKER_ENV_VAR`] names
/// them: the model settings (the API key), the input-state sealing key,
/// the database URL (with its password), the artifact store and the API
/// token file, the OAuth settings, OpenTelemetry's (its headers carry
/// tokens; a worker's spans go back through the server), and the dynamic
/// loader's `LD_*`.
pub const WORKER_ENV_DENIED_PREFIXES: &[&str] = &[
    "WARDEN_MODEL_",
    "WARDEN_INPUT_STATE_KEY",
    "WARDEN_DATABASE_URL",
    "WARDEN_ARTIFACT_STORE",
    "WARDEN_API_TOKENS_FILE",
    "WARDEN_OAUTH_",
    "OTEL_",
    "LD_",
];

/// The names the app and the operator added ([`configure`]); the latest
/// configuration wins (several servers built in one process, e.g. tests).
static EXTRA_NAMES: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// A name that cannot be passed to workers; the message names who asked
/// (`WARDEN_WORKER_ENV` or `App::worker_variable`) and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerEnvError {
    #[error(
        "{setting}: '{name}' is not a variable name; give names of letters, digits and '_', separated by commas"
    )]
    Malformed { setting: &'static str, name: String },
    #[error(
        "{setting}: '{name}' never reaches a worker (Warden's secrets, OTEL_* and LD_* stay in the server: {}); remove it",
        WORKER_ENV_DENIED_PREFIXES.join(", ")
    )]
    Denied { setting: &'static str, name: String },
}

/// Installs the names `app_names` (declared by the app) and the operator's
/// [`WORKER_ENV_VAR`] list as passed to every worker started from now on.
/// Refuses a malformed or denied name, naming it and who gave it.
pub fn configure(app_names: &[String]) -> Result<(), WorkerEnvError> {
    let operator = warden_core::config::var(WORKER_ENV_VAR).unwrap_or_default();
    let mut names = Vec::new();
    for name in app_names {
        names.push(checked("App::worker_variable", name.trim())?);
    }
    for name in operator.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        names.push(checked(WORKER_ENV_VAR, name)?);
    }
    names.sort_unstable();
    names.dedup();
    if let Ok(mut extra) = EXTRA_NAMES.write() {
        *extra = names;
    }
    Ok(())
}

fn checked(setting: &'static str, name: &str) -> Result<String, WorkerEnvError> {
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(WorkerEnvError::Malformed {
            setting,
            name: name.to_string(),
        });
    }
    if denied(name) {
        return Err(WorkerEnvError::Denied {
            setting,
            name: name.to_string(),
        });
    }
    Ok(name.to_string())
}

/// Whether `name` may never reach a worker.
pub fn denied(name: &str) -> bool {
    WORKER_ENV_DENIED_PREFIXES
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

/// The environment a worker starts with: the allow-list above, with values
/// from the server's configuration (process environment, then `.env`).
pub fn worker_env() -> Vec<(OsString, OsString)> {
    let extra = EXTRA_NAMES.read().map(|names| names.clone()).unwrap_or_default();
    let named = WORKER_ENV_NAMES
        .iter()
        .chain(WORKER_SETTINGS)
        .map(|name| name.to_string())
        .chain(extra);
    let mut env: BTreeMap<OsString, OsString> = named
        .filter_map(|name| warden_core::config::var_os(&name).map(|value| (OsString::from(name), value)))
        .collect();
    for prefix in WORKER_ENV_PREFIXES {
        env.extend(warden_core::config::vars_with_prefix(prefix));
    }
    env.retain(|name, _| !denied(&name.to_string_lossy()));
    env.into_iter().collect()
}

/// Clears `command`'s environment and sets [`worker_env`].
pub fn scrub_env(command: &mut tokio::process::Command) {
    command.env_clear().envs(worker_env());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_environment_is_an_allowlist() {
        // Only listed names and LC_*; no LD_*, no WARDEN_* but the worker
        // settings; PATH stays.
        let env = worker_env();
        let names: Vec<String> = env
            .iter()
            .map(|(n, _)| n.to_string_lossy().into_owned())
            .collect();
        for name in &names {
            assert!(
                WORKER_ENV_NAMES.contains(&name.as_str())
                    || WORKER_SETTINGS.contains(&name.as_str())
                    || WORKER_ENV_PREFIXES.iter().any(|p| name.starts_with(p)),
                "{name}"
            );
        }
        assert_eq!(
            names.contains(&"PATH".to_string()),
            std::env::var_os("PATH").is_some()
        );
    }

    #[test]
    fn secrets_and_malformed_names_are_refused_naming_who_gave_them() {
        // A denied or malformed name is an error naming it and its source.
        for secret in [
            "WARDEN_INPUT_STATE_KEY",
            "WARDEN_MODEL_API_KEY",
            "LD_PRELOAD",
            "OTEL_EXPORTER_OTLP_HEADERS",
        ] {
            let error = checked(WORKER_ENV_VAR, secret).expect_err(secret);
            assert!(matches!(error, WorkerEnvError::Denied { .. }), "{error}");
            assert!(error.to_string().starts_with("WARDEN_WORKER_ENV: '"), "{error}");
        }
        for bad in ["", "A B", "1X", "X=Y"] {
            let error = checked("App::worker_variable", bad).expect_err(bad);
            assert!(matches!(error, WorkerEnvError::Malformed { .. }), "{error}");
        }
        assert_eq!(
            checked(WORKER_ENV_VAR, "HTTPS_PROXY").as_deref(),
            Ok("HTTPS_PROXY")
        );
    }
}
