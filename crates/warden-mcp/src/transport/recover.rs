//! Recovering the `id` of a JSON-RPC message that did not parse, so its
//! error reply can name the request the client is waiting on.
//!
//! The input may be truncated (the first bytes of an oversized line) or
//! malformed anywhere, so this is a tolerant scan rather than a parser: it
//! walks the top-level object, skipping strings and nested containers, and
//! stops at the first `"id": <string or integer>` member it can read whole.
//! Anything it cannot read whole is "no id" — never a guessed one.

use rmcp::model::{NumberOrString, RequestId};

/// The `id` member of the top-level object in `bytes`, when one can be
/// read whole before the input ends or goes wrong.
pub(crate) fn request_id(bytes: &[u8]) -> Option<RequestId> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    let mut depth = 1usize;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                let end = string_end(bytes, at)?;
                if depth == 1 && &bytes[at..end] == b"\"id\"" {
                    let colon = skip_space(bytes, end);
                    if bytes.get(colon) == Some(&b':') {
                        return id_value(bytes, skip_space(bytes, colon + 1));
                    }
                }
                at = end;
            }
            b'{' | b'[' => {
                depth += 1;
                at += 1;
            }
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return None;
                }
                at += 1;
            }
            _ => at += 1,
        }
    }
    None
}

/// The index just past the string literal starting at `start` (a `"`).
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
    None
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(|b| b.is_ascii_whitespace()) {
        at += 1;
    }
    at
}

/// A string or integer id starting at `at`, read whole (a number must be
/// followed by a delimiter, so a truncated `12` of `123` is not taken).
fn id_value(bytes: &[u8], at: usize) -> Option<RequestId> {
    match bytes.get(at)? {
        b'"' => {
            let end = string_end(bytes, at)?;
            let text: String = serde_json::from_slice(&bytes[at..end]).ok()?;
            Some(NumberOrString::String(text.into()))
        }
        b'-' | b'0'..=b'9' => {
            let end = at
                + bytes[at..]
                    .iter()
                    .position(|b| !(b.is_ascii_digit() || *b == b'-'))?;
            if !matches!(bytes[end], b',' | b'}' | b' ' | b'\t' | b'\r' | b'\n') {
                return None;
            }
            let number = std::str::from_utf8(&bytes[at..end]).ok()?.parse::<i64>().ok()?;
            Some(NumberOrString::Number(number))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> Option<String> {
        request_id(text.as_bytes()).map(|id| id.to_string())
    }

    #[test]
    fn reads_the_top_level_id_of_broken_json() {
        // A malformed message still yields the id the client waits on.
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"#).as_deref(),
            Some("7")
        );
        assert_eq!(
            id(r#"{"id" : "a\"b", "method": tools/list}"#).as_deref(),
            Some("a\"b")
        );
        assert_eq!(id(r#"{"params":{"id":1},"id":-3,"x":}"#).as_deref(), Some("-3"));
    }

    #[test]
    fn never_guesses() {
        // Nested ids, values that merely say "id", truncated ids and non-objects give no id.
        assert_eq!(id(r#"{"params":{"id":1}"#), None);
        assert_eq!(id(r#"{"method":"id","x":1"#), None);
        assert_eq!(id(r#"{"id":12"#), None);
        assert_eq!(id(r#"{"id":"abc"#), None);
        assert_eq!(id(r#"[{"id":1}]"#), None);
        assert_eq!(id(r#"{"id":1.5}"#), None);
        assert_eq!(id("not json"), None);
    }
}
