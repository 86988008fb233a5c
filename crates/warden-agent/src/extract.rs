//! Pulling the Rhai code out of a model reply.

/// The first fenced code block (```rhai, ```rust, ```js or bare ```), or
/// `None` when the reply has no block.
pub fn code_block(reply: &str) -> Option<String> {
    let start = reply.find("```")?;
    let after_fence = &reply[start + 3..];
    let body_start = after_fence.find('\n')? + 1;
    let body = &after_fence[body_start..];
    let end = body.find("```")?;
    let code = body[..end].trim();
    (!code.is_empty()).then(|| code.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_first_fenced_block_with_or_without_a_language() {
        // Prose around the block is ignored; an unterminated block is no block.
        assert_eq!(
            code_block("Plan:\n```rhai\nlet x = 1;\n```\nmore").as_deref(),
            Some("let x = 1;")
        );
        assert_eq!(code_block("```\nx\n```").as_deref(), Some("x"));
        assert_eq!(code_block("no code here"), None);
        assert_eq!(code_block("```rhai\nunterminated"), None);
    }
}
