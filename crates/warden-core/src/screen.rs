//! Text as a person sees it on a screen: what a confirmation form shows
//! and what an error message echoes of a client's input. Characters that
//! would not show as themselves (controls, bidirectional overrides,
//! zero-width and blank-drawing characters) are escaped as `\u{…}`, so
//! nothing can hide or reorder the words around it.

/// `text` as a confirmation form shows it: every character that would not
/// show on a screen as itself escaped as `\u{…}`, so nothing the guard
/// receives, or the source that computes it, can be hidden from the
/// person or drawn as something it is not.
pub fn shown(text: &str) -> String {
    text.chars()
        .fold(String::with_capacity(text.len()), |mut out, c| {
            if c != '\n' && c != '\t' && invisible(c) {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            } else {
                out.push(c);
            }
            out
        })
}

/// Characters a form must not show raw: controls (C0 — [`shown`] keeps
/// the line feed and the tab —, DEL, C1), line and paragraph separators, format characters (zero-width,
/// bidirectional controls, tags, Arabic and Syriac marks, the soft
/// hyphen, …), variation selectors, private-use characters, and
/// characters that draw as blank (Hangul fillers, the braille blank, the
/// object replacement character, musical and shorthand format controls).
/// A line separator would draw fake lines inside a value; a format
/// character reorders or hides what is shown.
fn invisible(c: char) -> bool {
    matches!(c as u32,
        0x0000..=0x001F | 0x007F..=0x009F | 0x00AD | 0x034F | 0x0600..=0x0605 | 0x061C | 0x06DD
        | 0x070F | 0x0890..=0x0891 | 0x08E2 | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180B..=0x180F
        | 0x200B..=0x200F | 0x2028..=0x202E | 0x2060..=0x206F | 0x2800 | 0x3164 | 0xFE00..=0xFE0F
        | 0xFEFF | 0xFFA0 | 0xFFF0..=0xFFFC | 0x110BD | 0x110CD | 0x13430..=0x1345F
        | 0x1BCA0..=0x1BCA3 | 0x1D159 | 0x1D173..=0x1D17A | 0xE0000..=0xE0FFF
        | 0xE000..=0xF8FF | 0xF0000..=0x10FFFF)
}

/// `text` with every character that would not show on a screen as
/// itself escaped as `\u{…}`, as a confirmation form shows it
/// ([`shown`]; line feeds and tabs kept). Error messages
/// echo what a client sent (a symbol, a variant, a field name) and are
/// read by a person or a model: a NUL, a right-to-left override or a
/// zero-width character in the input must not hide or reorder the words
/// around it. A message without one is returned as it is.
pub fn visible(text: String) -> String {
    if text.chars().any(|c| c != '\n' && c != '\t' && invisible(c)) {
        shown(&text)
    } else {
        text
    }
}
