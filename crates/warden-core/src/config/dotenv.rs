//! An explicit `.env` loader: `KEY=VALUE` lines, nothing more.
//!
//! Not a shell parser: no `export`, no `$VAR` expansion, no multi-line
//! values. `#` starts a comment line; one pair of matching quotes around a
//! value is removed. Only Warden's (`WARDEN_*`) and OpenTelemetry's
//! (`OTEL_*`) variables are taken: a `.env` that sets `PATH` or
//! `LD_PRELOAD` must not reach the server or its workers. The values go to
//! [`crate::config`], never into the process environment; a variable
//! already in the environment wins over the file. The CLI calls [`load`]
//! once at startup and warns about the names it ignored.
//!
//! Decision (issue 11): kept instead of `dotenvy`. Its parser accepts
//! `export`, `$VAR` expansion from the process environment and multi-line
//! values — a larger language than a settings file for a sandboxed server
//! needs, and one whose expansion would copy unrelated environment values
//! into Warden's settings. This parser is 20 lines with its tests beside it;
//! nothing was measured, the choice is about the accepted syntax.

use std::path::Path;

/// What [`load`] did with a `.env` file (names only, never values).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// Variables taken into the configuration.
    pub applied: Vec<String>,
    /// Variables the file sets that Warden does not read from a `.env`
    /// (not `WARDEN_*` or `OTEL_*`); the caller should warn naming them.
    pub ignored: Vec<String>,
}

/// Reads `path` if it exists and installs its `WARDEN_*`/`OTEL_*` values as
/// the configuration overlay ([`crate::config::install`]).
pub fn load(path: &Path) -> Loaded {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Loaded::default();
    };
    let (accepted, ignored): (Vec<_>, Vec<_>) = parse(&text)
        .into_iter()
        .partition(|(key, _)| crate::config::allowed(key));
    let applied = accepted.iter().map(|(key, _)| key.clone()).collect();
    crate::config::install(accepted);
    let mut ignored: Vec<String> = ignored.into_iter().map(|(key, _)| key).collect();
    ignored.dedup();
    Loaded { applied, ignored }
}

/// The `KEY=VALUE` pairs of a `.env` text.
pub fn parse(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                return None;
            }
            let (key, value) = line.split_once('=')?;
            let key = key.trim();
            if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return None;
            }
            let value = value.trim();
            let value = ['"', '\'']
                .iter()
                .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
                .unwrap_or(value);
            Some((key.to_string(), value.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_variables_are_ignored_and_named() {
        // PATH and LD_PRELOAD in a .env are named as ignored, never applied.
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(".env");
        std::fs::write(
            &path,
            "LD_PRELOAD=/x.so\nWARDEN_DOTENV_UNIT=1\nPATH=/evil\nOTEL_SERVICE_NAME=s\n",
        )
        .expect("write");
        let loaded = load(&path);
        assert_eq!(loaded.applied, vec!["WARDEN_DOTENV_UNIT", "OTEL_SERVICE_NAME"]);
        assert_eq!(loaded.ignored, vec!["LD_PRELOAD", "PATH"]);
        assert_ne!(std::env::var("PATH").ok().as_deref(), Some("/evil"));
        assert!(std::env::var_os("WARDEN_DOTENV_UNIT").is_none());
    }

    #[test]
    fn parses_pairs_comments_and_quotes_without_shell_rules() {
        // Comments and blanks skipped, quotes stripped, $VAR left as text.
        let pairs = parse("# c\n\nA=1\nB = \"two words\"\nC='x'\nD=$HOME\nbad line\n");
        assert_eq!(
            pairs,
            vec![
                ("A".into(), "1".into()),
                ("B".into(), "two words".into()),
                ("C".into(), "x".into()),
                ("D".into(), "$HOME".into()),
            ]
        );
    }
}
