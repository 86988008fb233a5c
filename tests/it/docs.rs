//! The operating guide against the source: the limits table in
//! docs/operating.md names every constant of every crate's `limits` module
//! (`crates/*/src/limits.rs`) with its true default, and every `WARDEN_*`
//! override with its true range; every
//! `WARDEN_*` variable the library reads is documented in that guide.
//!
//! The table's columns are `| limit | constant | default | override (range)
//! | when it is hit |`. A constant cell holds one or more `NAME`s (several
//! separated by ` / `, matched in order to the defaults, which are separated
//! the same way). Defaults are read as a number and an optional unit
//! (bytes, KiB, MiB, GiB, µs, ms, s, h, days); a constant's value is evaluated
//! from its `const NAME: T = …;` line, so a drift on either side fails here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::workspace_root;

/// Where the documented table and the source of truth live, relative to
/// the workspace root. Update these when the files move.
const OPERATING_MD: &str = "docs/operating.md";
/// Each crate keeps the limits it enforces in `src/limits.rs`: every such
/// file under `crates/` is read (found, not listed, so a crate that gains
/// one is covered).
const CRATES: &str = "crates";
const LIMITS_RS: &str = "src/limits.rs";
/// The script sandbox's operator switches (`WARDEN_SANDBOX*`).
const SANDBOX_RS: [&str; 3] = [
    "crates/warden-sandbox/src/policy.rs",
    "crates/warden-sandbox/src/layers.rs",
    "crates/warden-sandbox/src/env.rs",
];
const TABLE_HEADER: &str = "| limit | constant | default | override (range) | when it is hit |";

/// Every crate's `limits.rs`, relative to the workspace root, sorted.
fn limits_files() -> Vec<String> {
    let root = workspace_root().join(CRATES);
    let mut files: Vec<String> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|entry| {
            entry
                .expect("directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .map(|krate| format!("{CRATES}/{krate}/{LIMITS_RS}"))
        .filter(|file| workspace_root().join(file).is_file())
        .collect();
    files.sort();
    for krate in ["warden-core", "warden-calls", "warden-task", "warden-mcp"] {
        assert!(
            files.contains(&format!("{CRATES}/{krate}/{LIMITS_RS}")),
            "no {LIMITS_RS} in {krate}: {files:?}"
        );
    }
    files
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(workspace_root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// One row of the limits table.
#[derive(Debug)]
struct Row {
    limit: String,
    constants: Vec<String>,
    default: String,
    overrides: String,
}

fn limits_table(markdown: &str) -> Vec<Row> {
    let mut lines = markdown.lines().skip_while(|l| l.trim() != TABLE_HEADER);
    assert!(
        lines.next().is_some(),
        "{OPERATING_MD} has no line `{TABLE_HEADER}`"
    );
    lines
        .skip(1) // the |---| separator
        .take_while(|l| l.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 5, "a limits row needs five cells: {line}");
            Row {
                limit: cells[0].to_string(),
                constants: backticked(cells[1]),
                default: cells[2].to_string(),
                overrides: cells[3].to_string(),
            }
        })
        .collect()
}

/// The `CONSTANT_NAMES` quoted in a cell, in order.
fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .map(str::to_string)
        .collect()
}

/// `WARDEN_*` names in a text, in order, each at most once.
fn warden_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("WARDEN_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        let name = tail[..end].trim_end_matches('_').to_string();
        if name.len() > "WARDEN_".len() && !names.contains(&name) {
            names.push(name);
        }
        rest = &tail[end..];
    }
    names
}

// ---- the source side ----

/// `const NAME: TYPE = EXPR;` declarations of one file: name → (type, expr).
/// A `#[cfg(test)]` module and everything after it is ignored.
fn consts_of(source: &str) -> BTreeMap<String, (String, String)> {
    let source = non_test(source);
    let mut out = BTreeMap::new();
    for (i, _) in source.match_indices("const ") {
        let before = &source[..i];
        let line_start = before.rfind('\n').map_or(0, |n| n + 1);
        let prefix = before[line_start..].trim();
        if !(prefix.is_empty() || prefix.starts_with("pub")) {
            continue; // `const` inside an expression or a comment
        }
        let decl = &source[i + "const ".len()..];
        let Some(end) = decl.find(';') else { continue };
        let decl = &decl[..end];
        let (Some((name, rest)), true) = (decl.split_once(':'), decl.contains('=')) else {
            continue;
        };
        let Some((ty, expr)) = rest.split_once('=') else {
            continue;
        };
        let name = name.trim();
        if name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            out.insert(name.to_string(), (ty.trim().to_string(), expr.trim().to_string()));
        }
    }
    out
}

fn non_test(source: &str) -> &str {
    source.find("#[cfg(test)]").map_or(source, |at| &source[..at])
}

/// The library's source folders: the facade's and every crate under it
/// along the spine (the scenario runner, `warden-testing`, is a tool, not
/// the library).
const LIBRARY_SOURCES: &[&str] = &[
    "src",
    "crates/warden-core/src",
    "crates/warden-sandbox/src",
    "crates/warden-calls/src",
    "crates/warden-script/src",
    "crates/warden-task/src",
    "crates/warden-agent/src",
    "crates/warden-cluster/src",
    "crates/warden-mcp/src",
];

/// Every Rust file of the library.
fn library_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in LIBRARY_SOURCES {
        rust_files(&workspace_root().join(dir), &mut files);
    }
    files
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every constant of the library: the crates' limits.rs first (a name is
/// declared in one of them only), then any other file's (a name declared
/// in two other files is left out as ambiguous).
struct Constants {
    limits: BTreeMap<String, (String, String)>,
    others: BTreeMap<String, Option<(String, String)>>,
}

impl Constants {
    fn load() -> Self {
        let limits_files = limits_files();
        let mut limits = BTreeMap::new();
        for file in &limits_files {
            for (name, decl) in consts_of(&read(file)) {
                let again = limits.insert(name.clone(), decl);
                assert!(
                    again.is_none(),
                    "{name} is declared in two limits.rs files ({file})"
                );
            }
        }
        let files = library_files();
        let mut others: BTreeMap<String, Option<(String, String)>> = BTreeMap::new();
        for file in files
            .iter()
            .filter(|f| !limits_files.iter().any(|l| f.ends_with(l)))
        {
            let text = std::fs::read_to_string(file).expect("source file");
            for (name, decl) in consts_of(&text) {
                others
                    .entry(name)
                    .and_modify(|seen| *seen = None)
                    .or_insert(Some(decl));
            }
        }
        Self { limits, others }
    }

    fn get(&self, name: &str) -> Option<&(String, String)> {
        self.limits
            .get(name)
            .or_else(|| self.others.get(name).and_then(Option::as_ref))
    }

    /// The value of a constant: a number (durations in seconds), or the
    /// members of a tuple.
    fn value(&self, name: &str) -> Vec<f64> {
        let (_, expr) = self
            .get(name)
            .unwrap_or_else(|| panic!("no single `const {name}` in the library"));
        self.eval(expr)
    }

    fn eval(&self, expr: &str) -> Vec<f64> {
        let tokens = tokenize(expr);
        let mut parser = Parser {
            tokens: &tokens,
            at: 0,
            constants: self,
        };
        let value = parser.expr();
        assert_eq!(parser.at, tokens.len(), "cannot evaluate `{expr}`");
        value
    }
}

fn tokenize(expr: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut chars = expr.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            let mut word = String::new();
            while let Some(&c) = chars
                .peek()
                .filter(|c| c.is_ascii_alphanumeric() || **c == '_' || **c == ':')
            {
                word.push(c);
                chars.next();
            }
            tokens.push(word);
        } else if c == '<' {
            chars.next();
            assert_eq!(chars.next(), Some('<'), "only `<<` is supported in `{expr}`");
            tokens.push("<<".into());
        } else {
            tokens.push(c.to_string());
            chars.next();
        }
    }
    tokens
}

/// `shift := sum ('<<' sum)*; sum := product ('+' product)*;
/// product := atom ('*' atom)*; atom := number | CONST | Duration::from_secs(e)
/// | Duration::from_millis(e) | Duration::from_micros(e) | '(' e (',' e)* ')'`.
struct Parser<'a> {
    tokens: &'a [String],
    at: usize,
    constants: &'a Constants,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(String::as_str)
    }
    fn take(&mut self) -> &str {
        self.at += 1;
        self.tokens
            .get(self.at - 1)
            .map(String::as_str)
            .expect("an expression")
    }
    fn expr(&mut self) -> Vec<f64> {
        let mut value = self.sum();
        while self.peek() == Some("<<") {
            self.take();
            value = vec![scalar(&value) * 2f64.powf(scalar(&self.sum()))];
        }
        value
    }
    fn sum(&mut self) -> Vec<f64> {
        let mut value = self.product();
        while self.peek() == Some("+") {
            self.take();
            value = vec![scalar(&value) + scalar(&self.product())];
        }
        value
    }
    fn product(&mut self) -> Vec<f64> {
        let mut value = self.atom();
        while self.peek() == Some("*") {
            self.take();
            value = vec![scalar(&value) * scalar(&self.atom())];
        }
        value
    }
    fn atom(&mut self) -> Vec<f64> {
        let token = self.take().to_string();
        if token == "(" {
            let mut members = self.expr();
            while self.peek() == Some(",") {
                self.take();
                members.extend(self.expr());
            }
            assert_eq!(self.take(), ")");
            return members;
        }
        if let Ok(n) = token.replace('_', "").parse::<f64>() {
            return vec![n];
        }
        let scale = if token.ends_with("Duration::from_secs") {
            Some(1.0)
        } else if token.ends_with("Duration::from_millis") {
            Some(0.001)
        } else if token.ends_with("Duration::from_micros") {
            Some(0.000_001)
        } else {
            None
        };
        if let Some(scale) = scale {
            assert_eq!(self.take(), "(");
            let value = scalar(&self.expr());
            assert_eq!(self.take(), ")");
            return vec![value * scale];
        }
        self.constants.value(&token)
    }
}

fn scalar(value: &[f64]) -> f64 {
    assert_eq!(value.len(), 1, "a tuple used in arithmetic");
    value[0]
}

/// The `WARDEN_*` overrides the limits parts' `from_env` read, with their ranges:
/// every `env_number(VAR, MIN, MAX)` call of every crate's limits.rs.
fn env_overrides(constants: &Constants) -> BTreeMap<String, (f64, f64)> {
    let mut out = BTreeMap::new();
    for file in limits_files() {
        env_overrides_of(&read(&file), constants, &mut out);
    }
    assert!(
        out.len() >= 10,
        "found only {} env_number calls in {CRATES}/*/{LIMITS_RS}",
        out.len()
    );
    out
}

fn env_overrides_of(source: &str, constants: &Constants, out: &mut BTreeMap<String, (f64, f64)>) {
    for (i, _) in non_test(source).match_indices("env_number(") {
        let args = &source[i + "env_number(".len()..];
        let args = &args[..args.find(')').expect("closing parenthesis")];
        let parts: Vec<&str> = args.split(',').map(str::trim).collect();
        let [var, min, max] = parts[..] else { continue };
        let var = if let Some(literal) = var.strip_prefix('"') {
            literal.trim_end_matches('"').to_string()
        } else if let Some((ty, expr)) = constants.get(var).filter(|(ty, _)| ty.contains("str")) {
            let _ = ty;
            expr.trim_matches('"').to_string()
        } else {
            continue; // the function's own definition
        };
        let range = (scalar(&constants.eval(min)), scalar(&constants.eval(max)));
        let again = out.insert(var.clone(), range);
        assert!(again.is_none(), "{var} is read by two env_number calls");
    }
}

// ---- the documented side ----

/// `"2, or the core count"` → 2; `"64 MiB"` → 67108864; `"30 days"` → 2592000.
fn documented_number(text: &str) -> Option<f64> {
    let text = text.trim();
    let digits: String = text
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '.')
        .collect();
    let number: f64 = digits
        .trim_end_matches([',', '.'])
        .replace(',', "")
        .parse()
        .ok()?;
    let rest = text[digits.len()..].trim_start();
    if rest.starts_with("µs") {
        return Some(number * 0.000_001);
    }
    let unit = rest
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("");
    let scale = match unit {
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "ms" => 0.001,
        "h" => 3600.0,
        "day" | "days" => 86_400.0,
        _ => 1.0, // bytes, s, or a count
    };
    Some(number * scale)
}

/// The documented range right after `var` in an override cell: `(1–64)`.
fn documented_range(cell: &str, var: &str) -> Option<(f64, f64)> {
    let after = &cell[cell.find(var)? + var.len()..];
    let after = after.trim_start_matches('`').trim_start().strip_prefix('(')?;
    let (min, rest) = after.split_once('–')?;
    let max = rest.split(')').next()?;
    Some((documented_number(min)?, documented_number(max)?))
}

#[test]
fn every_limits_constant_has_a_row_with_its_true_default() {
    // A row removed, a constant added without a row, or a default that
    // drifted from its `const` (either side) fails here.
    let rows = limits_table(&read(OPERATING_MD));
    let constants = Constants::load();
    let documented: Vec<&String> = rows.iter().flat_map(|r| &r.constants).collect();
    let missing: Vec<&String> = constants
        .limits
        .iter()
        .filter(|(_, (ty, _))| !ty.contains("str"))
        .map(|(name, _)| name)
        .filter(|name| !documented.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "constants of {CRATES}/*/{LIMITS_RS} with no row in the limits table of {OPERATING_MD}: {missing:?}"
    );
    let mut checked = 0;
    for row in rows.iter().filter(|r| !r.constants.is_empty()) {
        let values: Vec<f64> = row.constants.iter().flat_map(|c| constants.value(c)).collect();
        let stated: Vec<&str> = row.default.split(" / ").collect();
        assert_eq!(
            stated.len(),
            values.len(),
            "row '{}': {} value(s) in the source, {} documented ('{}')",
            row.limit,
            values.len(),
            stated.len(),
            row.default
        );
        for (text, value) in stated.iter().zip(&values) {
            let documented = documented_number(text)
                .unwrap_or_else(|| panic!("row '{}': '{text}' does not start with a number", row.limit));
            assert_eq!(
                documented, *value,
                "row '{}' ({:?}): documented '{text}' = {documented}, the source says {value}",
                row.limit, row.constants
            );
            checked += 1;
        }
    }
    assert!(checked >= 50, "only {checked} defaults checked");
}

#[test]
fn every_warden_override_is_in_the_table_with_its_true_range() {
    // Every limits part's from_env variables and the sandbox switches each appear in
    // the override column; each range matches the env_number bounds.
    let rows = limits_table(&read(OPERATING_MD));
    let constants = Constants::load();
    for (var, (min, max)) in env_overrides(&constants) {
        let row = rows
            .iter()
            .find(|r| warden_names(&r.overrides).contains(&var))
            .unwrap_or_else(|| {
                panic!("{var} (read by a limits part's from_env) has no row in the limits table")
            });
        let range = documented_range(&row.overrides, &var)
            .unwrap_or_else(|| panic!("row '{}': no `(min–max)` after {var}", row.limit));
        assert_eq!(
            range,
            (min, max),
            "row '{}': documented range of {var}",
            row.limit
        );
    }
    let sandbox_vars: Vec<String> = SANDBOX_RS
        .iter()
        .flat_map(|file| warden_names(non_test(&read(file))))
        .filter(|var| var.starts_with("WARDEN_SANDBOX"))
        .collect();
    assert!(
        sandbox_vars.contains(&"WARDEN_SANDBOX_SKIP".to_string()),
        "{sandbox_vars:?}"
    );
    let overrides: Vec<String> = rows.iter().flat_map(|r| warden_names(&r.overrides)).collect();
    for var in sandbox_vars {
        assert!(
            overrides.contains(&var),
            "{var} ({SANDBOX_RS:?}) has no row in the limits table"
        );
    }
    // And nothing documented that the library does not read.
    let files = library_files();
    let source: String = files
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("source"))
        .collect();
    for var in overrides {
        assert!(
            source.contains(&format!("\"{var}\"")),
            "{var} is documented but never read by the library ({LIBRARY_SOURCES:?})"
        );
    }
}

#[test]
fn every_warden_variable_the_library_reads_is_documented() {
    // A new `"WARDEN_…"` string in library code (outside unit tests) needs a
    // line in the operating guide.
    let guide = read(OPERATING_MD);
    let documented = warden_names(&guide);
    let files = library_files();
    let mut undocumented = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("source");
        for (i, _) in non_test(&text).match_indices("\"WARDEN_") {
            let name = warden_names(&text[i + 1..]).into_iter().next().expect("a name");
            let literal_ends = text[i + 1 + name.len()..].starts_with('"');
            if literal_ends && !documented.contains(&name) && !undocumented.contains(&name) {
                undocumented.push(name);
            }
        }
    }
    assert!(
        undocumented.is_empty(),
        "read by the library but not in {OPERATING_MD}: {undocumented:?}"
    );
}

/// GitHub's anchor for a heading: lowercase, punctuation dropped, spaces
/// to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn links_between_the_guides_resolve() {
    // Every relative link in the README and docs/ names a file that exists
    // and, with `#anchor`, a heading of that file.
    let root = workspace_root();
    let mut pages = vec![PathBuf::from("README.md"), PathBuf::from("tests/mcp/README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let name = entry.expect("entry").file_name();
        pages.push(Path::new("docs").join(name));
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(root.join(page)).expect("page");
        for (i, _) in text.match_indices("](") {
            let target = &text[i + 2..];
            let target = &target[..target.find(')').unwrap_or(target.len())];
            if target.starts_with("http") || target.contains(' ') {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            let path = if file.is_empty() {
                root.join(page)
            } else {
                root.join(page.parent().expect("parent")).join(file)
            };
            if !path.exists() {
                broken.push(format!("{}: {target} (no such file)", page.display()));
                continue;
            }
            if anchor.is_empty() || path.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let headings = std::fs::read_to_string(&path).expect("linked page");
            let found = headings
                .lines()
                .filter_map(|l| l.strip_prefix('#'))
                .any(|h| slug(h.trim_start_matches('#')) == anchor);
            if !found {
                broken.push(format!("{}: {target} (no such heading)", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

#[test]
fn only_a_process_entry_point_prints() {
    // Library code never prints: outside the command line (src/cli.rs) and
    // unit tests, a print macro sits in a function that returns the
    // process's ExitCode (docs/architecture.md).
    let files = library_files();
    let mut printing = Vec::new();
    for file in files {
        let relative = file
            .strip_prefix(workspace_root())
            .unwrap_or(&file)
            .display()
            .to_string();
        if relative == "src/cli.rs" || relative.ends_with("/tests.rs") || relative.contains("/tests/") {
            continue;
        }
        let full = std::fs::read_to_string(&file).expect("source");
        let text = non_test(&full);
        for mac in ["println!(", "eprintln!(", "print!(", "eprint!("] {
            for (at, _) in text.match_indices(mac) {
                let before = text[..at].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let start = text[..at].rfind("fn ").expect("a print macro inside a function");
                let signature = &text[start..start + text[start..].find('{').unwrap_or(0)];
                if !signature.contains("ExitCode") {
                    let line = text[..at].lines().count();
                    printing.push(format!("{relative}:{line}: in {}", signature.trim()));
                }
            }
        }
    }
    assert!(
        printing.is_empty(),
        "printing outside an entry point (return an error to the caller instead): {printing:#?}"
    );
}

/// The facade's `[features]` as (name, on by default), from Cargo.toml.
fn cargo_features() -> BTreeMap<String, bool> {
    let manifest = read("Cargo.toml");
    let section = manifest
        .split("\n[features]\n")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("a [features] section in Cargo.toml");
    let mut names = Vec::new();
    let mut defaults = Vec::new();
    for line in section.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (name, value) = line.split_once('=').expect("name = [...]");
        let name = name.trim().to_string();
        if name == "default" {
            defaults = value
                .trim()
                .trim_matches(['[', ']'])
                .split(',')
                .map(|v| v.trim().trim_matches('"').to_string())
                .filter(|v| !v.is_empty())
                .collect();
        } else {
            names.push(name);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let on = defaults.contains(&name);
            (name, on)
        })
        .collect()
}

#[test]
fn the_readme_feature_table_is_the_facades_features() {
    // Every feature of Cargo.toml has a README row saying whether it is on
    // by default, and the README names no feature that does not exist.
    let readme = read("README.md");
    let documented: BTreeMap<String, bool> = readme
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let name = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let default = match *cells.get(2)? {
                "yes" => true,
                "no" => false,
                _ => return None,
            };
            Some((name.to_string(), default))
        })
        .collect();
    assert_eq!(
        documented,
        cargo_features(),
        "README.md's feature table (left) and Cargo.toml's [features] (right) disagree"
    );
}

/// Every guide a user reads: the README, docs/*.md and `.env.example`.
fn guides() -> Vec<(String, String)> {
    let mut guides = vec![
        ("README.md".to_string(), read("README.md")),
        (".env.example".to_string(), read(".env.example")),
    ];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(workspace_root().join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    for path in docs {
        let text = std::fs::read_to_string(&path).expect("guide");
        guides.push((path.display().to_string(), text));
    }
    guides
}

#[test]
fn every_warden_variable_the_guides_name_exists_in_the_code() {
    // The other direction: a variable a guide names (a renamed or removed setting) must still be read somewhere.
    let mut sources = String::new();
    let mut files = Vec::new();
    for dir in ["crates", "src", "examples", "tests/bin", "scripts", "deploy"] {
        let root = workspace_root().join(dir);
        all_files(&root, &mut files);
    }
    for file in files {
        sources.push_str(&std::fs::read_to_string(&file).unwrap_or_default());
    }
    let mut stale = Vec::new();
    for (guide, text) in guides() {
        for name in warden_names(&text) {
            // A family written with a wildcard (`WARDEN_MODEL_*`) is a prefix.
            if !sources.contains(&name) {
                stale.push(format!("{guide}: {name}"));
            }
        }
    }
    assert!(stale.is_empty(), "named in a guide but read nowhere: {stale:?}");
}

fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if !path.ends_with("target") && !path.ends_with("node_modules") {
                all_files(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

#[test]
fn the_cli_table_is_the_cli() {
    // Every subcommand `--help` lists has a row in the guide's CLI table and every row's command exists; formats match.
    let dir = tempfile::tempdir().expect("temp dir");
    let help = crate::common::run_cli(crate::common::FINANCE, &["--help"], &[], dir.path());
    assert_eq!(help.code, 0, "{help:?}");
    let guide = read(OPERATING_MD);
    let table: Vec<&str> = guide
        .lines()
        .skip_while(|line| !line.starts_with("| command | what it does |"))
        .take_while(|line| line.starts_with('|'))
        .skip(2)
        .collect();
    let first_cells: Vec<String> = table
        .iter()
        .map(|line| {
            line.split(" | ")
                .next()
                .unwrap_or_default()
                .trim_start_matches("| ")
                .to_string()
        })
        .collect();
    let commands: Vec<&str> = help
        .stdout
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    assert!(commands.len() >= 6, "{}", help.stdout);
    for command in &commands {
        assert!(
            first_cells
                .iter()
                .any(|cell| cell.contains(&format!("`{command}"))),
            "`{command}` (from --help) has no row in the CLI table of {OPERATING_MD}"
        );
    }
    for cell in first_cells.iter().filter(|cell| !cell.starts_with("*(")) {
        let named = cell
            .trim_matches(|c| c == '`' || c == '*')
            .split_whitespace()
            .next()
            .unwrap_or_default();
        let named = named.trim_matches('`');
        if named.starts_with('-') || named.starts_with('(') || named.is_empty() {
            assert!(
                help.stdout.contains(named.split('|').next().unwrap_or(named)),
                "the flag {named} in the CLI table is not in --help"
            );
        } else {
            assert!(
                commands.contains(&named),
                "the CLI table names `{named}`, which --help does not list"
            );
        }
    }
    let tools = crate::common::run_cli(crate::common::FINANCE, &["tools", "-h"], &[], dir.path());
    let formats: Vec<String> = tools
        .stdout
        .split("possible values: ")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .map(|values| values.split(", ").map(str::to_string).collect())
        .unwrap_or_default();
    assert!(!formats.is_empty(), "{}", tools.stdout);
    let row = table
        .iter()
        .find(|line| line.starts_with("| `tools --format"))
        .expect("a tools --format row");
    let documented: Vec<&str> = row
        .trim_start_matches("| `tools --format ")
        .split('`')
        .next()
        .unwrap_or_default()
        .split("\\|")
        .collect();
    assert_eq!(
        documented, formats,
        "tools --format values in {OPERATING_MD} vs --help"
    );
}
