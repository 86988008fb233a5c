//! The catalogue: what each guard is for and which data it needs, derived
//! from the registry alone.
//!
//! It owns the one vocabulary of data names, the *slots*: the property names
//! of the guards' input schemas, required and optional. Nothing here is a
//! hand-kept list; a guard's fields join the vocabulary when it registers.
//! The catalogue built-ins (`list_guards`, `describe_guard`,
//! `bundle_coverage`, `check_backtest`) read it; it never runs a guard.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Value, json};

use crate::guard::Guard;
use crate::registry::ScriptFunction;

/// Why a registered guard is callable both ways.
pub const GUARD_REASON: &str =
    "a registered guard: callable as an MCP tool with JSON arguments, and by the same name in scripts";

/// The mode `list_guards` shows for a script-only function.
pub const SCRIPT_MODE: &str = "script";

/// Slot → guard names, in name order.
pub type SlotIndex = BTreeMap<String, Vec<String>>;

/// The slots (input field names) a guard requires and accepts optionally.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Slots {
    /// Fields the input schema lists as required.
    pub required: Vec<String>,
    /// The other properties (they have defaults or are alternatives).
    pub optional: Vec<String>,
}

/// The slots of `guard`, read from its input schema.
pub fn slots(guard: &Guard) -> Slots {
    let schema = guard.input_schema();
    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default();
    let optional = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| props.keys().filter(|k| !required.contains(k)).cloned().collect())
        .unwrap_or_default();
    Slots { required, optional }
}

/// Whether `guard` accepts a field called `slot`.
pub fn accepts(guard: &Guard, slot: &str) -> bool {
    guard
        .input_schema()
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|props| props.contains_key(slot))
}

/// The first sentence of a description (the rustdoc convention): the
/// first paragraph's lines joined with spaces, up to the first `.`, `!` or
/// `?` that ends a sentence (followed by a space or the paragraph's end).
/// A sentence wrapped over several lines of a doc comment is whole; a
/// paragraph without such an ending is whole.
pub fn summary(description: &str) -> String {
    let paragraph: Vec<&str> = description
        .lines()
        .map(str::trim)
        .skip_while(|line| line.is_empty())
        .take_while(|line| !line.is_empty())
        .collect();
    let paragraph = paragraph.join(" ");
    let mut chars = paragraph.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if matches!(c, '.' | '!' | '?')
            && chars.peek().is_none_or(|(_, next)| next.is_whitespace())
            && !(c == '.' && abbreviation(&paragraph[..i]))
        {
            return paragraph[..i + c.len_utf8()].to_string();
        }
    }
    paragraph
}

/// Whether the word before a period makes it an abbreviation's ("e.g.",
/// "i.e.", "etc.", "vs.", a single letter), not a sentence's end.
fn abbreviation(before: &str) -> bool {
    let word = before
        .rsplit(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    word.chars().count() == 1
        || ["e.g", "i.e", "etc", "vs", "cf", "approx", "incl", "resp"].contains(&word.as_str())
}

/// Slot → guards using it (required or optional), and slot → guards
/// requiring it; both in name order. Over `guards`: the registry's, or
/// those one caller sees ([`crate::registry::Visible::iter`]).
pub fn vocabulary<'a>(guards: impl IntoIterator<Item = &'a Guard>) -> (SlotIndex, SlotIndex) {
    let mut used_by = SlotIndex::new();
    let mut required_by = SlotIndex::new();
    for guard in guards {
        let Slots { required, optional } = slots(guard);
        for slot in &required {
            required_by
                .entry(slot.clone())
                .or_default()
                .push(guard.name.clone());
        }
        for slot in required.into_iter().chain(optional) {
            used_by.entry(slot).or_default().push(guard.name.clone());
        }
    }
    for guards in used_by.values_mut() {
        guards.sort_unstable();
    }
    (used_by, required_by)
}

/// The required slots of `guard` missing from `have`.
pub fn missing(guard: &Guard, have: &BTreeSet<String>) -> Vec<String> {
    slots(guard)
        .required
        .into_iter()
        .filter(|slot| !have.contains(slot))
        .collect()
}

/// What a bundle of slots covers.
#[derive(Debug, Default, Serialize)]
pub struct Coverage {
    /// The slots given, sorted and deduplicated.
    pub have: Vec<String>,
    /// Given slots no guard uses (often a typo).
    pub unknown: Vec<String>,
    /// Guards whose required slots are all present.
    pub ready: Vec<String>,
    /// Guard → the required slots it still misses.
    pub not_ready: BTreeMap<String, Vec<String>>,
    /// Slot → guards it alone would make ready.
    pub one_slot_away: SlotIndex,
}

/// The coverage of `have` over `guards` (every registered guard, or
/// those one caller sees).
pub fn coverage<'a, I>(guards: I, have: &BTreeSet<String>) -> Coverage
where
    I: IntoIterator<Item = &'a Guard>,
    I::IntoIter: Clone,
{
    let guards = guards.into_iter();
    let (used_by, _) = vocabulary(guards.clone());
    let mut out = Coverage {
        have: have.iter().cloned().collect(),
        unknown: have
            .iter()
            .filter(|s| !used_by.contains_key(*s))
            .cloned()
            .collect(),
        ..Coverage::default()
    };
    for guard in guards {
        let lacking = missing(guard, have);
        match lacking.as_slice() {
            [] => out.ready.push(guard.name.clone()),
            [only] => {
                out.one_slot_away
                    .entry(only.clone())
                    .or_default()
                    .push(guard.name.clone());
                out.not_ready.insert(guard.name.clone(), lacking);
            }
            _ => {
                out.not_ready.insert(guard.name.clone(), lacking);
            }
        }
    }
    out
}

/// One `list_guards` row for a registered guard.
pub fn guard_entry(guard: &Guard) -> Value {
    let Slots { required, optional } = slots(guard);
    json!({
        "name": guard.name,
        "category": guard.category,
        "summary": summary(guard.description()),
        "slots": required,
        "optional_slots": optional,
        "mode": guard.mode.as_str(),
        "callable": "json_and_script",
        "reason": GUARD_REASON,
    })
}

/// One `list_guards` row for a script-only function.
pub fn script_entry(function: &ScriptFunction) -> Value {
    json!({
        "name": function.name,
        "category": function.category,
        "summary": summary(function.description),
        "signature": function.signature,
        "slots": [],
        "optional_slots": [],
        "mode": SCRIPT_MODE,
        "callable": "script_only",
        "reason": function.reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::GuardError;
    use crate::guard::guard;
    use crate::registry::Registry;

    /// Needs a and b.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Ab {
        a: f64,
        b: f64,
        #[serde(default)]
        c: f64,
    }

    /// Needs a only.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct A {
        a: f64,
    }

    fn ab(_: Ab) -> Result<f64, GuardError> {
        Ok(0.0)
    }

    fn only_a(_: A) -> Result<f64, GuardError> {
        Ok(0.0)
    }

    fn registry() -> Registry {
        Registry::new(vec![guard(ab), guard(only_a)]).unwrap()
    }

    #[test]
    fn slots_come_from_the_input_schema() {
        // Required fields are slots; fields with defaults are optional slots.
        let registry = registry();
        let s = slots(registry.get("ab").unwrap());
        assert_eq!(s.required, vec!["a", "b"]);
        assert_eq!(s.optional, vec!["c"]);
        let (used_by, required_by) = vocabulary(registry.iter());
        assert_eq!(used_by["a"], vec!["ab", "only_a"]);
        assert_eq!(used_by["c"], vec!["ab"]);
        assert!(!required_by.contains_key("c"));
    }

    #[test]
    fn coverage_names_missing_slots_and_what_one_more_unlocks() {
        // With only `a`, `ab` misses `b`, and `b` alone would unlock it.
        let have: BTreeSet<String> = ["a".to_string(), "zz".to_string()].into();
        let registry = registry();
        let c = coverage(registry.iter(), &have);
        assert_eq!(c.ready, vec!["only_a"]);
        assert_eq!(c.not_ready["ab"], vec!["b"]);
        assert_eq!(c.one_slot_away["b"], vec!["ab"]);
        assert_eq!(c.unknown, vec!["zz"]);
    }

    #[test]
    fn summary_is_the_first_sentence_even_when_wrapped() {
        // list_guards shows one sentence per guard, never a line cut mid-sentence.
        assert_eq!(summary("\n  First line.\n\nMore."), "First line.");
        assert_eq!(
            summary("Price a European option under\nBlack-Scholes (e.g. 1.5 years). Then more."),
            "Price a European option under Black-Scholes (e.g. 1.5 years)."
        );
        assert_eq!(
            summary("No ending\nat all\n\nNext paragraph."),
            "No ending at all"
        );
        assert_eq!(summary(""), "");
    }
}
