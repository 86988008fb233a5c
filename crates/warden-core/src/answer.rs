//! Fitting a JSON value into a byte budget, saying what was cut.
//!
//! The answer bound (`warden_mcp::limits::DEFAULT_MAX_ANSWER_BYTES`) is applied
//! by the MCP layer; this module is its pure part, over `serde_json`
//! values only: [`fit`] returns a value whose compact JSON is at most the
//! budget, and one [`Cut`] per part it shortened, each with what was kept
//! and what there was. Typed builders that cut a part themselves (a task
//! result's receipt hashes) report it with the same [`Cut`], so a client
//! reads one marker whoever cut.
//!
//! How a value is fitted, from the root down: a value that fits is kept
//! whole. A list or map whose entries could each keep a useful share
//! ([`MIN_SHARE`] bytes) keeps every entry, the small ones whole and the
//! large ones fitted to an equal share (a batch's calls each keep their
//! status and the head of their output). One with too many entries for
//! that keeps its leading entries whole, in order, and drops the rest (the
//! first metrics, the first artifacts). A string keeps its leading
//! characters. Numbers, booleans and `null` are never cut (none is longer
//! than a share).

use serde::Serialize;
use serde_json::{Map, Value};

/// Least bytes an entry fitted to an equal share gets; with less, its
/// container keeps leading entries instead (see the module docs).
pub const MIN_SHARE: usize = 256;

/// Longest JSON Pointer a [`Cut`] names: 200 bytes, the rest cut with
/// `…` (a long map key must not make the marker itself large).
pub const MAX_POINTER_BYTES: usize = 200;

/// One part of a value an answer shortened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cut {
    /// Where, as a JSON Pointer into the answer's value (`/metrics`,
    /// `/receipt/artifacts`); `content:image` and `content:resource_link`
    /// name content blocks left out of an answer.
    pub at: String,
    /// How much of it the answer keeps.
    pub kept: usize,
    /// How much there is in the whole value.
    pub total: usize,
    /// What `kept` and `total` count: `items` (a list), `entries` (a map)
    /// or `bytes` (a string's UTF-8).
    pub unit: &'static str,
}

impl Cut {
    /// A list at `at` of which the first `kept` of `total` items are kept.
    pub fn items(at: impl Into<String>, kept: usize, total: usize) -> Self {
        Self {
            at: at.into(),
            kept,
            total,
            unit: "items",
        }
    }
}

/// The compact JSON size of `value`, in bytes, counted without building it.
pub fn size(value: &impl Serialize) -> usize {
    let mut counter = Counter(0);
    // Counting cannot fail; a value that cannot be serialised counts as 0.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// A writer that only counts.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `value` fitted into `budget` bytes of compact JSON (at least
/// [`MIN_SHARE`]), with the cuts made, in the order made. A value that
/// fits comes back unchanged with no cuts.
pub fn fit(value: &Value, budget: usize) -> (Value, Vec<Cut>) {
    let mut cuts = Vec::new();
    let mut at = String::new();
    let fitted = fit_at(value, budget.max(MIN_SHARE), &mut at, &mut cuts);
    (fitted, cuts)
}

fn fit_at(value: &Value, budget: usize, at: &mut String, cuts: &mut Vec<Cut>) -> Value {
    if size(value) <= budget {
        return value.clone();
    }
    match value {
        Value::String(text) => {
            let kept = prefix_within(text, budget.saturating_sub(2));
            cuts.push(Cut {
                at: pointer(at),
                kept: kept.len(),
                total: text.len(),
                unit: "bytes",
            });
            Value::String(kept.to_string())
        }
        Value::Array(items) => {
            let entries: Vec<(Option<&String>, &Value)> = items.iter().map(|v| (None, v)).collect();
            let fitted = fit_entries(&entries, budget, at, cuts, "items");
            Value::Array(fitted.into_iter().map(|(_, v)| v).collect())
        }
        Value::Object(map) => {
            let entries: Vec<(Option<&String>, &Value)> = map.iter().map(|(k, v)| (Some(k), v)).collect();
            let fitted = fit_entries(&entries, budget, at, cuts, "entries");
            let mut out = Map::new();
            for (key, value) in fitted {
                if let Some(key) = key {
                    out.insert(key.clone(), value);
                }
            }
            Value::Object(out)
        }
        scalar => scalar.clone(),
    }
}

/// The entries of a list (`key` `None`) or map, fitted into `budget`
/// bytes with their brackets and separators (see the module docs).
fn fit_entries<'a>(
    entries: &[(Option<&'a String>, &Value)],
    budget: usize,
    at: &mut String,
    cuts: &mut Vec<Cut>,
    unit: &'static str,
) -> Vec<(Option<&'a String>, Value)> {
    let n = entries.len();
    // Brackets, commas, and each key with its quotes and colon.
    let keys: Vec<usize> = entries
        .iter()
        .map(|(key, _)| key.map_or(0, |k| size(k) + 1))
        .collect();
    let sizes: Vec<usize> = entries.iter().map(|(_, v)| size(v)).collect();
    let overhead = 2 + n.saturating_sub(1) + keys.iter().sum::<usize>();
    let room = budget.saturating_sub(overhead);
    let mut out = Vec::with_capacity(n);
    if n > 0 && room >= n.saturating_mul(MIN_SHARE) {
        // Every entry keeps a share: the largest cap `c` such that the
        // entries, each cut to `c`, fit.
        let total_at = |cap: usize| sizes.iter().map(|s| (*s).min(cap)).sum::<usize>();
        let (mut low, mut high) = (MIN_SHARE, sizes.iter().copied().max().unwrap_or(MIN_SHARE));
        while low < high {
            let mid = low + (high - low).div_ceil(2);
            if total_at(mid) <= room {
                low = mid;
            } else {
                high = mid - 1;
            }
        }
        for (i, (key, value)) in entries.iter().enumerate() {
            let fitted = if sizes[i] <= low {
                (*value).clone()
            } else {
                descend(at, key.map(String::as_str), i, |at| fit_at(value, low, at, cuts))
            };
            out.push((*key, fitted));
        }
        return out;
    }
    // Too many entries to share: the leading ones, whole, in order; the
    // first that does not fit whole is fitted into what is left if that
    // is a useful share, and nothing after it is kept.
    let mut left = budget.saturating_sub(2);
    for (i, (key, value)) in entries.iter().enumerate() {
        let comma = usize::from(i > 0);
        let cost = comma + keys[i] + sizes[i];
        if cost <= left {
            out.push((*key, (*value).clone()));
            left -= cost;
            continue;
        }
        let share = left.saturating_sub(comma + keys[i]);
        if share >= MIN_SHARE {
            let fitted = descend(at, key.map(String::as_str), i, |at| {
                fit_at(value, share, at, cuts)
            });
            out.push((*key, fitted));
        }
        break;
    }
    if out.len() < n {
        cuts.push(Cut {
            at: pointer(at),
            kept: out.len(),
            total: n,
            unit,
        });
    }
    out
}

/// Runs `f` with `at` extended by the entry's key (or index), then restores `at`.
fn descend<T>(at: &mut String, key: Option<&str>, index: usize, f: impl FnOnce(&mut String) -> T) -> T {
    let len = at.len();
    at.push('/');
    match key {
        // JSON Pointer escaping (RFC 6901): `~` as `~0`, `/` as `~1`.
        Some(key) => at.push_str(&key.replace('~', "~0").replace('/', "~1")),
        None => at.push_str(&index.to_string()),
    }
    let out = f(at);
    at.truncate(len);
    out
}

/// `at` as a cut names it: at most [`MAX_POINTER_BYTES`].
fn pointer(at: &str) -> String {
    if at.len() <= MAX_POINTER_BYTES {
        return at.to_string();
    }
    format!("{}…", prefix_bytes(at, MAX_POINTER_BYTES))
}

/// The longest prefix of `text` of at most `max` bytes ending on a character boundary.
fn prefix_bytes(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The longest prefix of `text` whose JSON string body (escapes counted,
/// quotes not) is at most `max` bytes.
fn prefix_within(text: &str, max: usize) -> &str {
    let mut used = 0;
    for (i, c) in text.char_indices() {
        let width = match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        };
        if used + width > max {
            return &text[..i];
        }
        used += width;
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_that_fits_is_unchanged() {
        let value = json!({"a": [1, 2, 3], "b": "text"});
        assert_eq!(fit(&value, 1_000), (value.clone(), Vec::new()));
    }

    #[test]
    fn a_long_map_keeps_its_leading_entries_and_says_how_many_there_were() {
        // 6,000 metrics into 10 KB: the first ones whole, in order, and a cut naming /metrics.
        let metrics: Map<String, Value> = (0..6_000).map(|i| (format!("m{i:05}"), json!(i))).collect();
        let value = json!({"status": "success", "summary": "done", "metrics": metrics});
        let (fitted, cuts) = fit(&value, 10_000);
        assert!(size(&fitted) <= 10_000, "{}", size(&fitted));
        assert_eq!(fitted["status"], "success");
        let kept = fitted["metrics"].as_object().unwrap();
        assert!(kept.len() > 500, "{}", kept.len());
        assert!(
            kept.keys().zip(metrics.keys()).all(|(a, b)| a == b),
            "a prefix, in order"
        );
        assert_eq!(
            cuts,
            vec![Cut {
                at: "/metrics".into(),
                kept: kept.len(),
                total: 6_000,
                unit: "entries"
            }]
        );
    }

    #[test]
    fn a_few_large_entries_each_keep_a_share() {
        // 25 calls with 20 KB outputs into 30 KB: every call keeps its status and the head of its output.
        let calls: Vec<Value> = (0..25)
            .map(|i| json!({"index": i, "status": "success", "output": {"text": "x".repeat(20_000)}}))
            .collect();
        let (fitted, cuts) = fit(&json!({"calls": calls}), 30_000);
        assert!(size(&fitted) <= 30_000, "{}", size(&fitted));
        let calls = fitted["calls"].as_array().unwrap();
        assert_eq!(calls.len(), 25);
        assert!(calls.iter().all(|c| c["status"] == "success"));
        assert_eq!(cuts.len(), 25);
        assert_eq!(cuts[3].at, "/calls/3/output/text");
        assert_eq!((cuts[3].total, cuts[3].unit), (20_000, "bytes"));
    }

    #[test]
    fn strings_are_cut_on_characters_and_escapes_are_counted() {
        let value = json!("é\"\u{1}".repeat(1_000));
        let (fitted, cuts) = fit(&value, 300);
        assert!(size(&fitted) <= 300);
        assert_eq!(cuts[0].unit, "bytes");
        assert!(fitted.as_str().unwrap().len() < 300);
    }

    #[test]
    fn pointers_escape_keys_and_stay_short() {
        let long = "k/~".repeat(200);
        let mut inner = Map::new();
        inner.insert(long, json!("y".repeat(5_000)));
        let (_, cuts) = fit(&json!({"a": inner}), 1_000);
        assert!(cuts[0].at.starts_with("/a/k~1~0k"), "{}", cuts[0].at);
        assert!(cuts[0].at.len() <= MAX_POINTER_BYTES + '…'.len_utf8());
    }
}
