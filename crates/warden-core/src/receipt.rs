//! Receipts: what a guard call took and gave, as hashes anyone can
//! recompute.
//!
//! A number nobody can recompute is worthless in research, so a call can
//! come with a [`CallReceipt`]: the SHA-256 of its arguments and of its
//! output, each in RFC 8785 canonical form (JSON Canonicalization Scheme,
//! written by [`canonical`]), plus what ran — the guard and its
//! version, the app and its version, Warden's version, the build (the
//! SHA-256 of the server executable) and the execution mode. The canonical
//! form makes the hash independent of key order, whitespace and number
//! spelling (`100.0` and `100` are one number, as in JavaScript): a
//! client that canonicalizes the same arguments with any RFC 8785
//! implementation gets the same hash.
//!
//! Integers are hashed exactly. RFC 8785 writes every number as an IEEE
//! double, so it would give `9007199254740993` and `9007199254740992` one
//! hash although a guard taking an integer gets two different values, and
//! a receipt (or a person's approval) would vouch for an argument that
//! was never given. So an integer beyond ±2^53 (the doubles' exact range)
//! is written as its own decimal digits; every other value is written as
//! RFC 8785 writes it, so for arguments without such integers the bytes —
//! and the hash — are exactly RFC 8785's (`docs/receipts.md`).
//!
//! The format is documented in `docs/receipts.md`; a new field that
//! changes what a receipt means changes [`CALL_RECEIPT_FORMAT`].

mod script_value;

use std::io::Read as _;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// The `format` of a [`CallReceipt`].
pub const CALL_RECEIPT_FORMAT: &str = "warden.call-receipt/1";

/// The `format` of a task's receipt.
pub const TASK_RECEIPT_FORMAT: &str = "warden.task-receipt/1";

/// Warden's own version, as receipts give it.
pub const WARDEN_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The app a receipt was made by: its name and version as registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppIdentity {
    pub name: String,
    pub version: String,
}

impl Default for AppIdentity {
    fn default() -> Self {
        Self {
            name: "warden-app".into(),
            version: "0.0.0".into(),
        }
    }
}

/// One guard call's receipt. Made only for a call that returned an output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallReceipt {
    /// [`CALL_RECEIPT_FORMAT`].
    pub format: String,
    pub guard: String,
    /// The guard's own version, when it was registered with one
    /// (`Guard::version`); otherwise the app's version stands for it.
    pub guard_version: Option<String>,
    pub app: AppIdentity,
    pub warden_version: String,
    /// `sha256:` and the hex SHA-256 of the server executable ([`build_id`]).
    pub build: String,
    /// How the call ran: in_process | isolated | pure_inline.
    pub execution: String,
    /// `sha256:` and the hex SHA-256 of the arguments' canonical JSON.
    pub arguments_sha256: String,
    /// `sha256:` and the hex SHA-256 of the output's canonical JSON.
    pub output_sha256: String,
}

/// The facts about a build every receipt repeats.
#[derive(Debug, Clone)]
pub struct Provenance {
    pub app: AppIdentity,
    pub build: String,
}

impl Provenance {
    /// The receipt of one call of `guard` (registered with `guard_version`)
    /// that took arguments hashing to `arguments_sha256` ([`digest`],
    /// taken before the call consumed them) and returned `output`.
    pub fn call(
        &self,
        guard: &str,
        guard_version: Option<&str>,
        execution: &str,
        arguments_sha256: String,
        output: &Value,
    ) -> CallReceipt {
        CallReceipt {
            format: CALL_RECEIPT_FORMAT.into(),
            guard: guard.into(),
            guard_version: guard_version.map(str::to_string),
            app: self.app.clone(),
            warden_version: WARDEN_VERSION.into(),
            build: self.build.clone(),
            execution: execution.into(),
            arguments_sha256,
            output_sha256: digest(output),
        }
    }
}

/// The canonical JSON of `value`: RFC 8785's, except that an integer
/// beyond ±2^53 keeps its exact digits (see the module docs).
///
/// Written here rather than through a general canonicalizer: a call's
/// arguments and output are hashed on every guard call through a script's
/// door, and `serde_json_canonicalizer` (which re-parses every key, buffers
/// every member and writes through a boxed writer per token) was a fifth of
/// the door thread's time for a one-key object. The tests hold this writer
/// to that crate's bytes on generated values.
pub fn canonical(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    write_canonical(value, &mut out);
    out
}

/// Largest integer magnitude a double holds exactly: 2^53.
const EXACT_DOUBLE_INTEGER: u64 = 1 << 53;

/// Whether `number` is an integer a double would round.
fn inexact_integer(number: &serde_json::Number) -> bool {
    number
        .as_u64()
        .map(|n| n > EXACT_DOUBLE_INTEGER)
        .or_else(|| number.as_i64().map(|n| n.unsigned_abs() > EXACT_DOUBLE_INTEGER))
        .unwrap_or(false)
}

/// Whether `value` holds an integer a double would round.
pub fn has_inexact_integer(value: &Value) -> bool {
    match value {
        Value::Number(number) => inexact_integer(number),
        Value::Array(items) => items.iter().any(has_inexact_integer),
        Value::Object(map) => map.values().any(has_inexact_integer),
        _ => false,
    }
}

/// RFC 8785's form: members sorted by their keys' UTF-16 code units, no
/// whitespace, strings escaped as ECMAScript's `JSON.stringify` does, and
/// numbers as its `Number.prototype.toString` writes doubles (`ryu-js`).
/// An integer is written as its decimal digits: for one within ±2^53 those
/// are exactly the double's digits, and one beyond keeps them (see the
/// module docs).
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => write_number(number, out),
        Value::String(text) => crate::json::push_str(out, text),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let members = map.iter().map(|(key, member)| (key.as_str(), member)).collect();
            let _: Option<()> = write_object(members, out, |member, out| {
                write_canonical(member, out);
                Some(())
            });
        }
    }
}

/// Writes `members` as a canonical object, each value by `write_value`
/// (which may give up: `None`, and the object is left unfinished).
/// Sorted by the keys' UTF-16 code units: a map's own order is its keys'
/// bytes', which is that order too unless a key holds a character from
/// U+E000 up.
fn write_object<V>(
    mut members: Vec<(&str, V)>,
    out: &mut Vec<u8>,
    mut write_value: impl FnMut(V, &mut Vec<u8>) -> Option<()>,
) -> Option<()> {
    if members.iter().any(|(key, _)| key.bytes().any(|b| b >= 0xEE)) {
        members.sort_unstable_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
    } else if !members.is_sorted_by(|(a, _), (b, _)| a <= b) {
        members.sort_unstable_by_key(|(key, _)| *key);
    }
    out.push(b'{');
    for (i, (key, member)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        crate::json::push_str(out, key);
        out.push(b':');
        write_value(member, out)?;
    }
    out.push(b'}');
    Some(())
}

fn write_number(number: &serde_json::Number, out: &mut Vec<u8>) {
    if let Some(n) = number.as_u64() {
        out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    } else if let Some(n) = number.as_i64() {
        out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    } else if let Some(n) = number.as_f64().filter(|n| n.is_finite()) {
        out.extend_from_slice(ryu_js::Buffer::new().format_finite(n).as_bytes());
    } else {
        // A `Number` is finite; should one ever not be, its own spelling.
        out.extend_from_slice(number.to_string().as_bytes());
    }
}

/// `sha256:` and the hex SHA-256 of `value`'s canonical JSON.
pub fn digest(value: &Value) -> String {
    sha256_hex(&canonical(value))
}

/// [`digest`] of a script value's JSON form, written straight from the
/// value (see `script_value`); `None` when only the JSON conversion knows
/// that form (or whether there is one), or the value is nested deeper
/// than `max_depth`: ask it then.
pub fn digest_script_value(value: &rhai::Dynamic, max_depth: usize) -> Option<String> {
    script_value::canonical_script_value(value, max_depth).map(|bytes| sha256_hex(&bytes))
}

/// `sha256:` and the hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A running SHA-256 (of a file read in pieces, of a list of receipts).
#[derive(Default, Clone)]
pub struct Hasher(Sha256);

impl Hasher {
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// `sha256:` and the hex digest.
    pub fn finish(self) -> String {
        hex(&self.0.finalize())
    }
}

/// `sha256:` and `bytes` in lowercase hex. By table, not `write!`: a
/// script's inline calls make two digests each, and the formatting
/// machinery was a tenth of their cost.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(7 + bytes.len() * 2);
    out.push_str("sha256:");
    for byte in bytes {
        out.push(DIGITS[usize::from(byte >> 4)] as char);
        out.push(DIGITS[usize::from(byte & 0xf)] as char);
    }
    out
}

/// `sha256:` and the hex SHA-256 of the running executable: the build's
/// identity. Read once, on the first receipt (not at start: it is ~50 ms
/// for a 40 MB binary, and most processes never make a receipt); `unknown`
/// when the executable cannot be read (deleted after an upgrade).
pub fn build_id() -> &'static str {
    static BUILD: OnceLock<String> = OnceLock::new();
    BUILD.get_or_init(|| hash_executable().unwrap_or_else(|_| "unknown".into()))
}

/// Starts hashing the executable on a background thread, once, so that a
/// task's receipt at its end does not wait for it: a task calls this when
/// it begins ([`build_id`] then finds the hash ready, or waits only for
/// what is left of it).
pub fn prefetch_build_id() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("warden-build-id".into())
            .spawn(|| {
                build_id();
            });
        // No thread: the first receipt hashes it on its own thread instead.
        drop(spawned);
    });
}

fn hash_executable() -> std::io::Result<String> {
    let mut file = std::fs::File::open("/proc/self/exe")?;
    let mut hasher = Hasher::default();
    let mut buffer = vec![0; 1 << 20];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            return Ok(hasher.finish());
        }
        hasher.update(&buffer[..read]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_beyond_two_to_the_53_are_hashed_exactly() {
        // 2^53 + 1 and 2^53 are one double but two arguments: two hashes; RFC 8785's bytes everywhere else.
        let odd = serde_json::json!({"b": [9007199254740993u64, 1.5], "a": "x"});
        let even = serde_json::json!({"b": [9007199254740992u64, 1.5], "a": "x"});
        assert_ne!(digest(&odd), digest(&even));
        assert_eq!(
            canonical(&odd),
            br#"{"a":"x","b":[9007199254740993,1.5]}"#.to_vec()
        );
        assert_eq!(
            canonical(&even),
            serde_json_canonicalizer::to_vec(&even).expect("jcs")
        );
        // Members sorted by UTF-16 code units ("z" before "é"), leaves as RFC 8785 writes them.
        let negative = serde_json::json!({"\u{e9}": -9007199254740993i64, "z": 1e300});
        assert_eq!(
            String::from_utf8(canonical(&negative)).expect("utf-8"),
            "{\"z\":1e+300,\"\u{e9}\":-9007199254740993}"
        );
    }

    /// RFC 8785 §3.2.2's example: whitespace, number forms and string
    /// escapes.
    #[test]
    fn canonical_form_matches_rfc_8785_example() {
        let input = r#"{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"#;
        let value: Value = serde_json::from_str(input).expect("RFC example parses");
        let expected = r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#;
        assert_eq!(String::from_utf8(canonical(&value)).expect("utf-8"), expected);
    }

    /// RFC 8785 §3.2.3: keys sorted by UTF-16 code units, not bytes.
    #[test]
    fn keys_sort_by_utf16_code_units() {
        let input = r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}"#;
        let value: Value = serde_json::from_str(input).expect("parses");
        let expected = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\
\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}";
        assert_eq!(String::from_utf8(canonical(&value)).expect("utf-8"), expected);
    }

    #[test]
    fn the_digest_ignores_spelling_but_not_values() {
        let a: Value = serde_json::from_str(r#"{"spot": 100.0, "vol": 0.2}"#).expect("json");
        let b: Value = serde_json::from_str(r#"{ "vol":0.20,"spot":100 }"#).expect("json");
        let c: Value = serde_json::from_str(r#"{"spot": 101, "vol": 0.2}"#).expect("json");
        assert_eq!(digest(&a), digest(&b));
        assert_ne!(digest(&a), digest(&c));
        // SHA-256 of the canonical text, independently known.
        assert_eq!(
            sha256_hex(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(digest(&a), sha256_hex(br#"{"spot":100,"vol":0.2}"#));
    }

    /// The writer's bytes are `serde_json_canonicalizer`'s (an RFC 8785
    /// implementation) on generated values without integers beyond ±2^53:
    /// keys on both sides of U+E000 and beyond the BMP, escapes, and
    /// doubles of every magnitude.
    #[test]
    fn the_writer_matches_an_rfc_8785_implementation_on_generated_values() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        const KEYS: [&str; 12] = [
            "a",
            "b",
            "spot",
            "\u{e9}",
            "\u{20ac}",
            "\u{e000}",
            "\u{ffef}",
            "\u{1f600}",
            "\u{fb33}",
            "\r",
            "q\"\\",
            "",
        ];
        fn generate(next: &mut dyn FnMut() -> u64, depth: u32) -> Value {
            let pick = next() % if depth > 3 { 6 } else { 8 };
            match pick {
                0 => Value::Null,
                1 => Value::Bool(next().is_multiple_of(2)),
                2 => {
                    let n = (next() % (2 * EXACT_DOUBLE_INTEGER + 1)) as i64 - EXACT_DOUBLE_INTEGER as i64;
                    Value::from(n >> (next() % 54))
                }
                3 => {
                    let bits = next();
                    let double = f64::from_bits(bits);
                    let double = if double.is_finite() {
                        double
                    } else {
                        (bits % 1000) as f64 / 7.0
                    };
                    Value::from(double)
                }
                4 => Value::from(((next() % 2_000_001) as f64 - 1e6) / 1e3),
                5 => {
                    let len = (next() % 6) as usize;
                    let text: String = (0..len)
                        .map(|_| {
                            let key = KEYS[(next() % KEYS.len() as u64) as usize];
                            let control = char::from(((next() % 32) as u8).min(0x1f));
                            format!("{key}{control}\u{7f}/")
                        })
                        .collect();
                    Value::String(text)
                }
                6 => Value::Array((0..next() % 5).map(|_| generate(next, depth + 1)).collect()),
                _ => Value::Object(
                    (0..next() % 7)
                        .map(|_| {
                            let key = KEYS[(next() % KEYS.len() as u64) as usize];
                            (format!("{key}{}", next() % 3), generate(next, depth + 1))
                        })
                        .collect(),
                ),
            }
        }
        for _ in 0..5_000 {
            let value = generate(&mut next, 0);
            let reference = serde_json_canonicalizer::to_vec(&value).expect("canonicalizes");
            assert_eq!(
                String::from_utf8_lossy(&canonical(&value)),
                String::from_utf8_lossy(&reference),
                "{value}"
            );
        }
    }
}
