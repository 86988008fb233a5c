//! Strict object keys with helpful refusals: a key that is a near miss for an
//! expected one (case-insensitive match, a prefix either way, or within two
//! edits, a transposition counting as one) is named as a probable typo; any
//! other unexpected key is refused with the list of expected keys.

use serde_json::{Map, Value};

use super::super::error::DomainError;

/// Optimal-string-alignment edit distance (Levenshtein plus adjacent
/// transpositions), on characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev2: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                cur[j] = cur[j].min(prev2[j - 2] + 1);
            }
        }
        prev2 = std::mem::replace(&mut prev, cur);
    }
    prev[b.len()]
}

/// The expected key that `key` most probably meant, if it is a near miss:
/// equal ignoring case, a prefix of it (or it of the key), or within two
/// edits. The closest candidate wins; ties go to the earlier one.
pub fn near_miss<'a>(key: &str, expected: &[&'a str]) -> Option<&'a str> {
    let k = key.to_lowercase();
    if k.is_empty() {
        return None;
    }
    if let Some(e) = expected.iter().find(|e| e.to_lowercase() == k) {
        return Some(e);
    }
    if let Some(e) = expected.iter().find(|e| {
        let e = e.to_lowercase();
        e.starts_with(&k) || k.starts_with(&e)
    }) {
        return Some(e);
    }
    expected
        .iter()
        .map(|e| (edit_distance(&k, &e.to_lowercase()), *e))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, e)| e)
}

/// The refusal for one unexpected key: a probable typo, or an unknown key
/// with the expected list. `what` names the kind of key ("key", "column").
pub fn unexpected(key: &str, expected: &[&str], what: &str) -> String {
    match near_miss(key, expected) {
        Some(e) => format!("{what} '{key}' looks like a mistyped '{e}'"),
        None => {
            let hint = if super::date::Date::parse(key).is_ok() {
                " (a date-keyed mapping is not accepted: send {\"index\": [dates], \"values\": [...]})"
            } else if key == "data" {
                " (pandas orient='split' is not accepted: send \"records\")"
            } else {
                ""
            };
            format!(
                "unknown {what} '{key}'; expected one of {}{hint}",
                expected.join(", ")
            )
        }
    }
}

/// Refuses any key of `obj` outside `expected`, naming `field`.
pub fn check_keys(obj: &Map<String, Value>, expected: &[&str], field: &str) -> Result<(), DomainError> {
    match obj.keys().find(|k| !expected.contains(&k.as_str())) {
        Some(k) => Err(DomainError::field(field, unexpected(k, expected, "key"))),
        None => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    const SERIES: [&str; 5] = ["index", "values", "name", "dtype", "freq"];

    #[test]
    fn edit_distance_by_hand() {
        // Pins distances worked out by hand: kitten→sitting 3, a swap counts 1.
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("vlaues", "values"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn near_misses_are_found() {
        // Pins the three near-miss rules: case, prefix and ≤ 2 edits.
        assert_eq!(near_miss("Values", &SERIES), Some("values"));
        assert_eq!(near_miss("vals", &SERIES), Some("values"));
        assert_eq!(near_miss("val", &SERIES), Some("values"));
        assert_eq!(near_miss("values_list", &SERIES), Some("values"));
        assert_eq!(near_miss("indx", &SERIES), Some("index"));
        assert_eq!(near_miss("frq", &SERIES), Some("freq"));
        assert_eq!(near_miss("foo", &SERIES), None);
        assert_eq!(near_miss("returns", &SERIES), None);
    }

    #[test]
    fn messages_name_the_field() {
        // Pins the exact refusal texts from the payload conventions.
        let o = json!({"vals": [1]});
        let e = check_keys(o.as_object().unwrap(), &SERIES, "returns").unwrap_err();
        assert_eq!(
            e.to_string(),
            "returns: key 'vals' looks like a mistyped 'values'"
        );
        let o = json!({"values": [1], "foo": 1});
        let e = check_keys(o.as_object().unwrap(), &SERIES, "returns").unwrap_err();
        assert_eq!(
            e.to_string(),
            "returns: unknown key 'foo'; expected one of index, values, name, dtype, freq"
        );
        assert!(unexpected("2020-01-02", &SERIES, "key").contains("date-keyed"));
    }
}
