//! API tokens: the table read from `WARDEN_API_TOKENS_FILE` and the
//! constant-time lookup of a presented token.
//!
//! The file holds one `PRINCIPAL SHA256_HEX_OF_TOKEN` per line, so the
//! server never stores a token, only its SHA-256. A presented token is
//! hashed and compared with *every* entry using `subtle`, whatever matched
//! earlier: the time taken depends on the number of entries only, never on
//! which principal matched or how many bytes of a hash agreed. Parsing
//! errors name the file, the line and the fix, and never repeat the line
//! (an operator may have pasted a token where its hash belongs).

use std::path::Path;

use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};

use super::AuthConfigError;
use warden_calls::tenant::Principal;

/// The variable naming the token file.
pub(super) const TOKENS_FILE_VAR: &str = "WARDEN_API_TOKENS_FILE";

/// The SHA-256 of "change-me", the token the old `deploy/tokens.txt`
/// example shipped with a working line: whoever read the example holds it,
/// so a file that still lists it stops the server.
const PLACEHOLDER_HASH: &str = "e2186dbdb1bb4193608605e84f33208765b5693b55edd4f730a719a100eeea6f";

/// One line of the file: who, and the SHA-256 of their token.
struct Entry {
    principal: Principal,
    hash: [u8; 32],
}

/// The API tokens the server accepts. `Debug` shows the principals, never
/// the hashes.
pub(super) struct TokenTable {
    entries: Vec<Entry>,
}

impl std::fmt::Debug for TokenTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenTable")
            .field(
                "principals",
                &self
                    .entries
                    .iter()
                    .map(|e| e.principal.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl TokenTable {
    /// Reads and parses the token file.
    pub(super) fn load(path: &Path) -> Result<Self, AuthConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| AuthConfigError::TokensFile {
            path: path.display().to_string(),
            line: None,
            problem: format!("cannot be read ({e}); set {TOKENS_FILE_VAR} to a readable file"),
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses the file's text; `path` is only used in error messages.
    pub(super) fn parse(text: &str, path: &str) -> Result<Self, AuthConfigError> {
        let problem = |line: usize, problem: String| AuthConfigError::TokensFile {
            path: path.to_string(),
            line: Some(line),
            problem,
        };
        let mut entries: Vec<(usize, Entry)> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            let fields: Vec<&str> = line
                .split_whitespace()
                .take_while(|field| !field.starts_with('#'))
                .collect();
            let (name, hex) = match fields[..] {
                [] => continue,
                [name, hex] => (name, hex),
                _ => {
                    return Err(problem(
                        number,
                        format!(
                            "expected `PRINCIPAL SHA256_HEX` (2 fields separated by spaces), found {} field(s); \
                             write the principal's name, a space and the SHA-256 of its token as \
                             `printf %s \"$TOKEN\" | sha256sum` prints it",
                            fields.len()
                        ),
                    ));
                }
            };
            let principal = Principal::authenticated(name)
                .map_err(|e| problem(number, format!("the principal (first field) is not usable: {e}")))?;
            let hash = parse_hash(hex).ok_or_else(|| {
                problem(
                    number,
                    "the second field is not 64 hexadecimal digits; write the SHA-256 of the token \
                     (`printf %s \"$TOKEN\" | sha256sum`), never the token itself"
                        .into(),
                )
            })?;
            if parse_hash(PLACEHOLDER_HASH) == Some(hash) {
                return Err(problem(
                    number,
                    "is the example's placeholder token \"change-me\", which anyone who read the example \
                     can use; make a token (e.g. `openssl rand -hex 32`), give it to the principal and \
                     write its SHA-256 here (`printf %s \"$TOKEN\" | sha256sum`)"
                        .into(),
                ));
            }
            if let Some((first, _)) = entries.iter().find(|(_, e)| e.hash == hash) {
                return Err(problem(
                    number,
                    format!("the same token hash is on line {first}; give each principal its own token"),
                ));
            }
            entries.push((number, Entry { principal, hash }));
        }
        if entries.is_empty() {
            return Err(AuthConfigError::TokensFile {
                path: path.to_string(),
                line: None,
                problem: format!(
                    "has no token lines; add `PRINCIPAL SHA256_HEX` lines, or unset {TOKENS_FILE_VAR}"
                ),
            });
        }
        Ok(Self {
            entries: entries.into_iter().map(|(_, e)| e).collect(),
        })
    }

    /// How many tokens the table holds.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The principal whose token this is, if any. Hashes the token and
    /// compares the digest with every entry in constant time: no early exit,
    /// no data-dependent branch until the single final one on "found".
    pub(super) fn lookup(&self, token: &str) -> Option<Principal> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = subtle::Choice::from(0);
        let mut index = 0u64;
        for (i, entry) in self.entries.iter().enumerate() {
            let hit = entry.hash.ct_eq(&digest);
            index.conditional_assign(&(i as u64), hit);
            found |= hit;
        }
        if bool::from(found) {
            let index = usize::try_from(index).ok()?;
            self.entries.get(index).map(|e| e.principal.clone())
        } else {
            None
        }
    }
}

/// 64 hex digits (either case) as 32 bytes.
fn parse_hash(hex: &str) -> Option<[u8; 32]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let text = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha256_hex(token: &str) -> String {
        Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    fn message(result: Result<TokenTable, AuthConfigError>) -> String {
        result.map(|_| ()).expect_err("a parse error").to_string()
    }

    #[test]
    fn the_examples_placeholder_token_is_refused() {
        // The old deploy/tokens.txt listed the hash of "change-me": that line
        // stops the server, naming the variable, the line and how to make a token.
        assert_eq!(sha256_hex("change-me"), PLACEHOLDER_HASH);
        let text = format!(
            "alice {}\nanalyst-1 {PLACEHOLDER_HASH}\n",
            sha256_hex("tok-alice")
        );
        let message = message(TokenTable::parse(&text, "tokens.txt"));
        assert!(
            message.starts_with("WARDEN_API_TOKENS_FILE tokens.txt line 2:"),
            "{message}"
        );
        assert!(
            message.contains("placeholder") && message.contains("openssl rand"),
            "{message}"
        );
    }

    #[test]
    fn parses_comments_blank_lines_and_either_hex_case() {
        // Comments (whole-line and trailing), blank lines and upper-case
        // hashes are accepted; every listed token maps to its principal.
        let text = format!(
            "# team tokens\n\nalice {}\n  bob   {}   # rotated 2025-01\n",
            sha256_hex("tok-alice"),
            sha256_hex("tok-bob").to_uppercase()
        );
        let table = TokenTable::parse(&text, "tokens.txt").expect("valid file");
        assert_eq!(table.len(), 2);
        assert_eq!(
            table.lookup("tok-alice").map(|p| p.to_string()),
            Some("alice".into())
        );
        assert_eq!(table.lookup("tok-bob").map(|p| p.to_string()), Some("bob".into()));
    }

    #[test]
    fn lookup_matches_only_the_whole_token() {
        // First, middle and last entries are found; a wrong token, a prefix,
        // an extension and the hash itself are not.
        let mut text = String::new();
        for i in 0..50 {
            text.push_str(&format!("p{i} {}\n", sha256_hex(&format!("token-{i}"))));
        }
        let table = TokenTable::parse(&text, "t").expect("valid");
        for i in [0, 25, 49] {
            assert_eq!(
                table.lookup(&format!("token-{i}")).map(|p| p.to_string()),
                Some(format!("p{i}"))
            );
        }
        for wrong in ["token-50", "token-", "token-10x", "", &sha256_hex("token-0")] {
            assert_eq!(table.lookup(wrong), None, "{wrong:?}");
        }
    }

    #[test]
    fn malformed_lines_name_file_line_and_fix_without_the_secret() {
        // A token pasted instead of its hash is refused without echoing it.
        let secret = "s3cr3t-token-value";
        let err = message(TokenTable::parse(
            &format!("# x\nalice {secret}\n"),
            "/etc/warden/tokens",
        ));
        assert!(err.contains("/etc/warden/tokens line 2"), "{err}");
        assert!(err.contains("sha256sum"), "{err}");
        assert!(!err.contains(secret), "{err}");

        let err = message(TokenTable::parse(&format!("{secret}\n"), "f"));
        assert!(err.contains("f line 1") && err.contains("found 1 field"), "{err}");
        assert!(!err.contains(secret), "{err}");

        let err = message(TokenTable::parse(&format!("a b {}\n", sha256_hex("x")), "f"));
        assert!(err.contains("found 3 field"), "{err}");

        let long = "x".repeat(300);
        let err = message(TokenTable::parse(&format!("{long} {}\n", sha256_hex("x")), "f"));
        assert!(err.contains("line 1") && err.contains("principal"), "{err}");
    }

    #[test]
    fn the_operator_name_is_refused() {
        let hash = sha256_hex("t");
        let error = message(TokenTable::parse(&format!("local {hash}\n"), "tokens"));
        assert!(error.contains("line 1") && error.contains("reserved"), "{error}");
    }

    #[test]
    fn duplicate_hashes_and_empty_files_are_refused() {
        let h = sha256_hex("shared");
        let err = message(TokenTable::parse(&format!("alice {h}\nbob {h}\n"), "f"));
        assert!(err.contains("line 2") && err.contains("line 1"), "{err}");
        let err = message(TokenTable::parse("# nothing yet\n\n", "f"));
        assert!(
            err.contains("no token lines") && err.contains(TOKENS_FILE_VAR),
            "{err}"
        );
    }

    #[test]
    fn debug_output_shows_principals_not_hashes() {
        let h = sha256_hex("t");
        let table = TokenTable::parse(&format!("alice {h}\n"), "f").expect("valid");
        let shown = format!("{table:?}");
        assert!(shown.contains("alice") && !shown.contains(&h[..16]), "{shown}");
    }
}
