//! JSON text written by hand on hot paths (event records, call logs,
//! receipts' canonical form), where serde's generic writer costs more than
//! the work.

/// Appends `text` as a JSON string, escaped exactly as serde_json's
/// compact writer (and RFC 8785) escape it: `"` and `\` escaped, control
/// characters as `\b \t \n \f \r` or `\u00xx`, every other character as
/// itself. Verbatim when nothing needs escaping (names, ids, codes: most
/// strings these paths write), without serde_json's per-byte table walk
/// and writer calls.
pub fn push_str(out: &mut Vec<u8>, text: &str) {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        for text in [
            "",
            "plain",
            "q\"uote",
            "back\\slash",
            "tab\t",
            "\u{1}\u{1f}\u{7f}",
            "é€😀",
            "/",
        ] {
            let mut out = Vec::new();
            push_str(&mut out, text);
            assert_eq!(out, serde_json::to_vec(text).expect("serializes"), "{text:?}");
        }
    }
}
