//! Pulling the Rhai code out of a model reply.

/// Fence languages taken as code (a bare fence too); a block fenced as
/// anything else (`text`, `json`: output the model quotes) is prose.
const CODE_LANGUAGES: &[&str] = &["rhai", "rust", "rs", "js", "javascript"];

/// The fenced code blocks of a reply (fenced as `rhai`, `rust`, `js` or
/// with no language), in order; an unterminated block is none.
pub(crate) fn code_blocks(reply: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut rest = reply;
    while let Some(start) = rest.find("```") {
        let after_fence = &rest[start + 3..];
        let Some(line_end) = after_fence.find('\n') else {
            break;
        };
        let language = after_fence[..line_end].trim().to_ascii_lowercase();
        let body = &after_fence[line_end + 1..];
        let Some(end) = body.find("```") else {
            break;
        };
        let code = body[..end].trim();
        if (language.is_empty() || CODE_LANGUAGES.contains(&language.as_str())) && !code.is_empty() {
            blocks.push(code.to_string());
        }
        rest = &body[end + 3..];
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_every_code_block_in_order_and_skips_quoted_output() {
        // Prose around the blocks is ignored; an unterminated block is no block.
        assert_eq!(
            code_blocks("Plan:\n```rhai\nlet x = 1;\n```\nmore"),
            ["let x = 1;"]
        );
        assert_eq!(code_blocks("```\nx\n```"), ["x"]);
        assert!(code_blocks("no code here").is_empty());
        assert!(code_blocks("```rhai\nunterminated").is_empty());
        assert_eq!(
            code_blocks("```rhai\na\n```\nthen\n```text\nout\n```\n```rhai\nb\n```"),
            ["a", "b"]
        );
    }
}
