//! An explicit `.env` loader: `KEY=VALUE` lines, nothing more.
//!
//! Not a shell parser: no `export`, no `$VAR` expansion, no multi-line
//! values. `#` starts a comment line; one pair of matching quotes around a
//! value is removed. A variable already in the environment wins over the
//! file. The server calls [`load`] once at startup, before any thread starts.

use std::path::Path;

/// Reads `path` if it exists and sets the variables it defines that are not
/// already set. Returns the names it set (never the values).
pub fn load(path: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let mut set = Vec::new();
    for (key, value) in parse(&text) {
        if std::env::var_os(&key).is_none() {
            // SAFETY-free in edition 2024 terms: called before the runtime
            // starts any thread (see cli::main).
            #[allow(unsafe_code)]
            unsafe {
                std::env::set_var(&key, value);
            }
            set.push(key);
        }
    }
    set
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
