//! The server config of a scenario run:
//! `{"server": {"command", "args", "cwd", "env", "startup_timeout_seconds", "call_timeout_seconds"}}`.
//!
//! `cwd` is relative to the config file's directory; a `command` containing
//! a slash is relative to that cwd, a bare name is looked up on PATH. Loaded
//! once by [`super::run`]; a problem here is a setup error (exit 2).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::SetupError;

/// Time the server gets to answer `initialize` when the config names none: 30 s.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Time each tools/call (and tools/list) gets when neither the case nor the
/// config names one: 60 s, the default guard timeout.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Largest timeout a config or case may name: 3,600 s.
pub const MAX_TIMEOUT_SECONDS: f64 = 3600.0;

#[derive(Debug, Deserialize)]
struct ConfigFile {
    server: ServerSpec,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerSpec {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    startup_timeout_seconds: Option<f64>,
    #[serde(default)]
    call_timeout_seconds: Option<f64>,
}

/// A validated server config with every path resolved.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The config file itself (absolute), passed to prompt adapters.
    pub path: PathBuf,
    /// The program to start: absolute when the config gave a path.
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Absolute working directory of the server.
    pub cwd: PathBuf,
    /// Added to (and overriding) this process's environment.
    pub env: BTreeMap<String, String>,
    pub startup_timeout: Duration,
    pub call_timeout: Duration,
}

impl ServerConfig {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Self, SetupError> {
        let text = std::fs::read_to_string(path).map_err(|source| SetupError::Unreadable {
            what: "server config",
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |detail: String| SetupError::Invalid {
            what: "server config",
            path: path.to_path_buf(),
            detail,
        };
        let deserializer = &mut serde_json::Deserializer::from_str(&text);
        let file: ConfigFile = serde_path_to_error::deserialize(deserializer).map_err(|e| {
            invalid(format!(
                "at {}: {}; expected {{\"server\": {{\"command\": ..., \"args\": [...], \"cwd\": ..., \"env\": {{}}}}}}",
                e.path(),
                e.inner()
            ))
        })?;
        let spec = file.server;
        if spec.command.trim().is_empty() {
            return Err(invalid("server.command is empty; name the server binary".into()));
        }
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let base = absolute.parent().map(Path::to_path_buf).unwrap_or_default();
        let cwd = base.join(spec.cwd.as_deref().unwrap_or("."));
        let cwd = std::fs::canonicalize(&cwd).map_err(|e| {
            invalid(format!(
                "server.cwd {} (relative to the config file) is not usable: {e}",
                cwd.display()
            ))
        })?;
        let program = if spec.command.contains('/') {
            // Lexically drop "." parts so messages show a clean path.
            cwd.join(&spec.command)
                .components()
                .filter(|c| !matches!(c, std::path::Component::CurDir))
                .collect()
        } else {
            PathBuf::from(&spec.command)
        };
        Ok(Self {
            path: absolute,
            program,
            args: spec.args,
            cwd,
            env: spec.env,
            startup_timeout: seconds(spec.startup_timeout_seconds, DEFAULT_STARTUP_TIMEOUT)
                .map_err(|e| invalid(format!("server.startup_timeout_seconds {e}")))?,
            call_timeout: seconds(spec.call_timeout_seconds, DEFAULT_CALL_TIMEOUT)
                .map_err(|e| invalid(format!("server.call_timeout_seconds {e}")))?,
        })
    }

    /// The command line, program first, for messages and the report.
    pub fn command_line(&self) -> String {
        std::iter::once(self.program.display().to_string())
            .chain(self.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A timeout outside (0, [`MAX_TIMEOUT_SECONDS`]]. The text follows the
/// setting's name ("server.call_timeout_seconds must be …").
#[derive(Debug, thiserror::Error)]
#[error("must be greater than 0 and at most {max}, got {secs}", max = MAX_TIMEOUT_SECONDS)]
pub struct BadSeconds {
    secs: f64,
}

/// A timeout in seconds from a config or case, or `default` when absent.
pub fn seconds(value: Option<f64>, default: Duration) -> Result<Duration, BadSeconds> {
    match value {
        None => Ok(default),
        Some(secs) if secs > 0.0 && secs <= MAX_TIMEOUT_SECONDS => Ok(Duration::from_secs_f64(secs)),
        Some(secs) => Err(BadSeconds { secs }),
    }
}
