//! Finding guards by what they do: `search_guards`, as an MCP tool and a
//! script function, and the coding prompt's choice of which signatures to
//! show in full.
//!
//! A query is split into lowercase words (stop words dropped). Each word
//! scores against a guard's fields, the best field counting: its name's
//! words ([`NAME_WEIGHT`]), title ([`TITLE_WEIGHT`]), category
//! ([`CATEGORY_WEIGHT`]), argument names ([`ARGUMENT_WEIGHT`]); a word of
//! its description adds [`DOC_WEIGHT`] on top. A word that only begins a
//! field's word (`vol` of `volatility`) counts half, and a word that many
//! guards match counts less than a rare one (see [`rank`]). Two query words that
//! follow each other in the name add [`PHRASE_BONUS`], and a query that
//! spells the whole name adds [`EXACT_NAME_BONUS`]: "implied volatility"
//! finds `implied_volatility` first. Ranking is deterministic (score, then
//! name), and only guards that matched are returned.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use crate::guard::Guard;
use crate::signature::Renderer;

/// Hits a search returns when it is not told how many.
pub const DEFAULT_SEARCH_HITS: usize = 8;

/// Most hits one search returns: its answer's bound (each hit is one
/// signature and one sentence).
pub const MAX_SEARCH_HITS: usize = 25;

/// Longest query read, in bytes; the rest is ignored (a query is a few
/// words, never a document).
pub const MAX_QUERY_BYTES: usize = 512;

/// Score of a query word found among the name's words.
pub const NAME_WEIGHT: f64 = 6.0;
/// Score of a query word found in the title.
pub const TITLE_WEIGHT: f64 = 4.0;
/// Score of a query word found in the category.
pub const CATEGORY_WEIGHT: f64 = 3.0;
/// Score of a query word found among the argument names' words.
pub const ARGUMENT_WEIGHT: f64 = 2.0;
/// Added when a query word is also in the description.
pub const DOC_WEIGHT: f64 = 1.0;
/// Added per pair of query words that follow each other in the name.
pub const PHRASE_BONUS: f64 = 8.0;
/// Added when the query's words are the name's words.
pub const EXACT_NAME_BONUS: f64 = 20.0;

/// Words that say nothing about which guard is meant.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "by", "for", "from", "how", "i", "in", "is", "it", "of", "on", "or",
    "the", "to", "what", "which", "with",
];

/// One guard a search found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    pub name: String,
    pub category: String,
    /// How a script calls it: `name(#{arguments}) -> outputs`, every type
    /// spelled out.
    pub signature: String,
    /// The first sentence of its description.
    pub doc: String,
    /// Its score (see the module docs); hits come highest first.
    pub score: f64,
}

/// The lowercase words of `text` that carry meaning: split at anything
/// but letters and digits (so `snake_case` names split too), stop words
/// dropped.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .collect()
}

/// The guards among `guards` that match `query`, best first, at most
/// `limit` (capped at [`MAX_SEARCH_HITS`]).
pub fn search<'a>(guards: impl Iterator<Item = &'a Guard>, query: &str, limit: usize) -> Vec<Hit> {
    let guards: Vec<&Guard> = guards.collect();
    rank(&guards, query)
        .into_iter()
        .filter(|(score, _)| *score > 0.0)
        .take(limit.min(MAX_SEARCH_HITS))
        .map(|(score, guard)| hit(guard, score))
        .collect()
}

/// Every guard of `guards` with its score for `query`, best first (ties in
/// the order given). A query word counts more the fewer guards it
/// matches: its weight is scaled by ln(1 + n / m), n guards of which m
/// match it, so "check" (in most of an app's names) ranks below "quote"
/// (in one).
pub fn rank<'a>(guards: &[&'a Guard], query: &str) -> Vec<(f64, &'a Guard)> {
    let query = words(cut(query));
    let fields: Vec<Fields> = guards.iter().map(|guard| Fields::of(guard)).collect();
    let rarity: Vec<f64> = query
        .iter()
        .map(|word| {
            let matching = fields.iter().filter(|f| f.matches(word) > 0.0).count();
            if matching == 0 {
                0.0
            } else {
                (1.0 + guards.len() as f64 / matching as f64).ln()
            }
        })
        .collect();
    let mut ranked: Vec<(f64, usize, &Guard)> = guards
        .iter()
        .zip(&fields)
        .enumerate()
        .map(|(at, (guard, fields))| (fields.score(&query, &rarity), at, *guard))
        .collect();
    ranked.sort_unstable_by(|(a, at_a, _), (b, at_b, _)| b.total_cmp(a).then(at_a.cmp(at_b)));
    ranked
        .into_iter()
        .map(|(score, _, guard)| (score, guard))
        .collect()
}

/// `query` within [`MAX_QUERY_BYTES`], cut at a character boundary: the
/// part a search reads.
pub fn cut(query: &str) -> &str {
    let mut end = query.len().min(MAX_QUERY_BYTES);
    while !query.is_char_boundary(end) {
        end -= 1;
    }
    &query[..end]
}

/// A guard's words, by field.
struct Fields {
    name: Vec<String>,
    title: Vec<String>,
    category: Vec<String>,
    arguments: Vec<String>,
    doc: BTreeSet<String>,
}

impl Fields {
    fn of(guard: &Guard) -> Self {
        Self {
            name: words(guard.tool_name()),
            title: guard.title.as_deref().map(words).unwrap_or_default(),
            category: words(&guard.category),
            arguments: guard
                .input_schema()
                .get("properties")
                .and_then(Value::as_object)
                .map(|properties| properties.keys().flat_map(|key| words(key)).collect())
                .unwrap_or_default(),
            doc: words(guard.description()).into_iter().collect(),
        }
    }

    /// The best field's weighted match of `word`, plus the description's.
    fn matches(&self, word: &str) -> f64 {
        let best = [
            (NAME_WEIGHT, &self.name),
            (TITLE_WEIGHT, &self.title),
            (CATEGORY_WEIGHT, &self.category),
            (ARGUMENT_WEIGHT, &self.arguments),
        ]
        .into_iter()
        .map(|(weight, field)| weight * matches(word, field))
        .fold(0.0, f64::max);
        best + if self.doc.contains(word) { DOC_WEIGHT } else { 0.0 }
    }

    /// How well the guard matches the query words (0: not at all), each
    /// word's match scaled by its `rarity`.
    fn score(&self, query: &[String], rarity: &[f64]) -> f64 {
        let total: f64 = query
            .iter()
            .zip(rarity)
            .map(|(word, rarity)| self.matches(word) * rarity)
            .sum();
        if total == 0.0 {
            return 0.0;
        }
        let pairs = query
            .windows(2)
            .filter(|pair| self.name.windows(2).any(|named| named == *pair))
            .count();
        let exact = if *query == self.name {
            EXACT_NAME_BONUS
        } else {
            0.0
        };
        total + PHRASE_BONUS * pairs as f64 + exact
    }
}

/// 1 when `field` has `word`, 0.5 when one of its words begins with it
/// (or it begins with one of them, for words of at least 3 letters), else 0.
fn matches(word: &str, field: &[String]) -> f64 {
    if field.iter().any(|w| w == word) {
        return 1.0;
    }
    let partial = |short: &str, long: &str| short.len() >= 3 && long.starts_with(short);
    if field.iter().any(|w| partial(word, w) || partial(w, word)) {
        0.5
    } else {
        0.0
    }
}

fn hit(guard: &Guard, score: f64) -> Hit {
    let described = Renderer::default().describe(guard);
    let signature = described
        .lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("- ")
        .to_string();
    Hit {
        name: guard.tool_name().to_string(),
        category: guard.category.clone(),
        signature,
        doc: crate::catalogue::summary(guard.description()),
        score,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::GuardError;
    use crate::guard::guard;
    use schemars::JsonSchema;
    use serde::Deserialize;

    /// Solves the Black-Scholes volatility that reproduces a market price.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Vol {
        price: f64,
        strike: f64,
    }
    fn implied_volatility(_: Vol) -> Result<f64, GuardError> {
        Ok(0.2)
    }
    /// Prices a European option.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Price {
        spot: f64,
        volatility: f64,
    }
    fn price_option(_: Price) -> Result<f64, GuardError> {
        Ok(1.0)
    }
    /// The latest quote for a symbol.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Quote {
        symbol: String,
    }
    fn get_quote(_: Quote) -> Result<f64, GuardError> {
        Ok(1.0)
    }

    fn guards() -> Vec<Guard> {
        vec![
            guard(price_option).category("pricing"),
            guard(get_quote).category("market data"),
            guard(implied_volatility).category("pricing"),
        ]
    }

    #[test]
    fn the_named_guard_ranks_first_and_only_matches_come_back() {
        // "implied volatility" spells a name: first, ahead of a guard that takes a volatility.
        let guards = guards();
        let hits = search(guards.iter(), "implied volatility", 10);
        let names: Vec<&str> = hits.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["implied_volatility", "price_option"], "{hits:?}");
        assert!(hits[0].score > hits[1].score);
        assert!(
            hits[0].signature.starts_with("implied_volatility(#{"),
            "{}",
            hits[0].signature
        );
        assert_eq!(
            hits[0].doc,
            "Solves the Black-Scholes volatility that reproduces a market price."
        );
        // A category word, an argument's prefix, and nothing at all.
        assert_eq!(search(guards.iter(), "market", 10)[0].name, "get_quote");
        assert_eq!(search(guards.iter(), "vol", 10).len(), 2);
        assert!(search(guards.iter(), "weather forecast", 10).is_empty());
        assert!(search(guards.iter(), "the of and", 10).is_empty());
    }

    #[test]
    fn the_limit_and_the_query_are_bounded() {
        // At most MAX_SEARCH_HITS hits; a query past MAX_QUERY_BYTES is read up to it.
        let many: Vec<Guard> = (0..40)
            .map(|i| guard(get_quote).name(format!("quote_{i}")))
            .collect();
        assert_eq!(search(many.iter(), "quote", 1000).len(), MAX_SEARCH_HITS);
        assert_eq!(search(many.iter(), "quote", 3).len(), 3);
        let long = format!("quote {}", "é".repeat(MAX_QUERY_BYTES));
        assert_eq!(search(many.iter(), &long, 5).len(), 5);
        let late = format!("{} quote", "x".repeat(MAX_QUERY_BYTES));
        assert!(search(many.iter(), &late, 5).is_empty());
    }
}
