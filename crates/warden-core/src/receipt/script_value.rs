//! The canonical JSON of a script value, written straight from it.
//!
//! A script's inline call hashes its arguments and its output (the first
//! `warden_script::limits::DEFAULT_CALLS_RECORDED` calls of a task). Going through the value's JSON form first built a
//! `serde_json::Value` per hash — every key and string copied, every map
//! rebuilt — and made the hashed calls of a loop 1.8× slower than the
//! build that hashed the script value through a serializer. This writer
//! walks the value itself and writes exactly the bytes [`super::canonical`]
//! writes for its JSON form (a test holds the two together on generated
//! values); anything it does not know (a timestamp, a custom type, a
//! function pointer, a blob) is left to the JSON form.

use rhai::Dynamic;

/// The canonical JSON of `value`'s JSON form, or `None` when it holds a
/// kind of value only the JSON conversion knows how to treat, or is nested
/// deeper than `max_depth` (the conversion decides about it).
pub(super) fn canonical_script_value(value: &Dynamic, max_depth: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(128);
    write(value, &mut out, max_depth)?;
    Some(out)
}

fn write(value: &Dynamic, out: &mut Vec<u8>, depth_left: usize) -> Option<()> {
    // A shared value (a closure's capture) has no JSON form of its own.
    if value.is_shared() {
        return None;
    }
    if value.is_unit() {
        out.extend_from_slice(b"null");
    } else if let Ok(b) = value.as_bool() {
        out.extend_from_slice(if b { b"true" } else { b"false" });
    } else if let Ok(n) = value.as_int() {
        out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    } else if let Ok(n) = value.as_float() {
        // A non-finite double has no JSON number: the conversion makes it null.
        match n.is_finite() {
            true => out.extend_from_slice(ryu_js::Buffer::new().format_finite(n).as_bytes()),
            false => out.extend_from_slice(b"null"),
        }
    } else if let Ok(c) = value.as_char() {
        crate::json::push_str(out, c.encode_utf8(&mut [0; 4]));
    } else if let Ok(text) = value.as_immutable_string_ref() {
        crate::json::push_str(out, &text);
    } else if let Ok(items) = value.as_array_ref() {
        let depth_left = depth_left.checked_sub(1)?;
        out.push(b'[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write(item, out, depth_left)?;
        }
        out.push(b']');
    } else if let Ok(map) = value.as_map_ref() {
        let depth_left = depth_left.checked_sub(1)?;
        let members = map.iter().map(|(key, member)| (key.as_str(), member)).collect();
        super::write_object(members, out, |member, out| write(member, out, depth_left))?;
    } else {
        return None;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rhai::{Array, Map};

    /// A small deterministic generator (xorshift), so a failure replays.
    struct Draw(u64);

    impl Draw {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn text(&mut self) -> String {
            const PIECES: [&str; 12] = [
                "a", "Z", "é", "\u{E000}", "\u{FFFD}", "😀", "\"", "\\", "\n", "\u{1}", "key", "\u{7F}",
            ];
            (0..self.next() % 5)
                .map(|_| PIECES[(self.next() % PIECES.len() as u64) as usize])
                .collect()
        }

        fn value(&mut self, depth: usize) -> Dynamic {
            match self.next() % if depth == 0 { 7 } else { 9 } {
                0 => Dynamic::UNIT,
                1 => Dynamic::from_bool(self.next().is_multiple_of(2)),
                2 => Dynamic::from_int(self.next() as i64 >> (self.next() % 64)),
                3 => Dynamic::from_float(f64::from_bits(self.next())),
                4 => Dynamic::from_float((self.next() % 2_000) as f64 / 8.0 - 100.0),
                5 => self.text().into(),
                6 => Dynamic::from_char(char::from_u32((self.next() % 0x11_0000) as u32).unwrap_or('x')),
                7 => (0..self.next() % 4)
                    .map(|_| self.value(depth - 1))
                    .collect::<Array>()
                    .into(),
                _ => (0..self.next() % 5)
                    .map(|_| (self.text().into(), self.value(depth - 1)))
                    .collect::<Map>()
                    .into(),
            }
        }
    }

    #[test]
    fn a_script_value_is_written_as_its_json_form_is() {
        let mut draw = Draw(0x9E37_79B9_7F4A_7C15);
        for _ in 0..5_000 {
            let value = draw.value(4);
            let json: serde_json::Value = rhai::serde::from_dynamic(&value).expect("JSON form");
            assert_eq!(
                canonical_script_value(&value, 64).map(String::from_utf8),
                Some(Ok(
                    String::from_utf8(super::super::canonical(&json)).expect("utf-8")
                )),
                "{value:?}"
            );
        }
    }

    #[test]
    fn values_only_the_conversion_knows_and_deep_ones_are_left_to_it() {
        let pointer = Dynamic::from(rhai::FnPtr::new("f").expect("name"));
        assert_eq!(canonical_script_value(&pointer, 64), None);
        let mut deep = Dynamic::UNIT;
        for _ in 0..5 {
            deep = vec![deep].into();
        }
        assert!(canonical_script_value(&deep, 5).is_some());
        assert_eq!(canonical_script_value(&deep, 4), None);
    }
}
