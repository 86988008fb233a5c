//! What a client of an older protocol revision can read in a tool's
//! result.
//!
//! Warden answers every session in the shapes of the newest revision, and
//! a session's client may have negotiated an older one: `resource_link`
//! content exists from 2025-06-18 and `audio` from 2025-03-26, and an
//! older client's SDK refuses the whole result when it meets a block its
//! revision does not define (the Python SDK before 1.10 loses the result
//! of every `run_script` that wrote an output). Each such block becomes a
//! `text` block saying what it was and how to read it; nothing else
//! changes (fields an older revision does not know, `structuredContent`
//! among them, are ignored by its clients).

use rmcp::model::{CallToolResponse, ContentBlock, ProtocolVersion};

/// `response` as a client of `revision` (the one it asked for in
/// `initialize`; `None` off a session) can read it.
pub(crate) fn readable(
    mut response: CallToolResponse,
    revision: Option<&ProtocolVersion>,
) -> CallToolResponse {
    let Some(revision) = revision else {
        return response;
    };
    if *revision >= ProtocolVersion::V_2025_06_18 {
        return response;
    }
    if let CallToolResponse::Complete(result) = &mut response {
        for block in &mut result.content {
            if let Some(text) = older_form(block, revision) {
                *block = ContentBlock::text(text);
            }
        }
    }
    response
}

/// The text standing in for `block` where `revision` has no such block.
fn older_form(block: &ContentBlock, revision: &ProtocolVersion) -> Option<String> {
    match block {
        ContentBlock::ResourceLink(link) => Some(format!(
            "resource {} ({}{}): {}; read it with read_artifact or resources/read",
            link.name,
            link.mime_type.as_deref().unwrap_or("unknown type"),
            link.size.map(|n| format!(", {n} bytes")).unwrap_or_default(),
            link.uri,
        )),
        ContentBlock::Audio(audio) if *revision < ProtocolVersion::V_2025_03_26 => Some(format!(
            "audio ({}, {} bytes of base64) left out: protocol revision {revision} has no audio content",
            audio.mime_type,
            audio.data.len()
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolResult, Resource};

    fn with_link() -> CallToolResponse {
        let mut link =
            Resource::new("warden://artifacts/t1/outputs/a.csv", "a.csv").with_mime_type("text/csv");
        link.size = Some(12);
        CallToolResult::success(vec![
            ContentBlock::text("{}"),
            ContentBlock::resource_link(link),
            ContentBlock::audio("AAAA", "audio/wav"),
        ])
        .into()
    }

    fn kinds(response: &CallToolResponse) -> Vec<String> {
        let CallToolResponse::Complete(result) = response else {
            panic!("a complete result")
        };
        let value = serde_json::to_value(&result.content).expect("serialises");
        value
            .as_array()
            .expect("a list")
            .iter()
            .map(|b| b["type"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    #[test]
    fn each_revision_gets_only_the_blocks_it_defines() {
        // 2025-06-18 and later: unchanged; 2025-03-26: no resource_link; 2024-11-05: no audio either.
        let newest = readable(with_link(), Some(&ProtocolVersion::V_2025_11_25));
        assert_eq!(kinds(&newest), ["text", "resource_link", "audio"]);
        assert_eq!(
            kinds(&readable(with_link(), None)),
            ["text", "resource_link", "audio"]
        );
        let march = readable(with_link(), Some(&ProtocolVersion::V_2025_03_26));
        assert_eq!(kinds(&march), ["text", "text", "audio"]);
        let CallToolResponse::Complete(result) = &march else {
            panic!("complete")
        };
        let said = serde_json::to_value(&result.content[1]).expect("serialises");
        let said = said["text"].as_str().unwrap_or_default();
        assert!(
            said.contains("warden://artifacts/t1/outputs/a.csv") && said.contains("text/csv, 12 bytes"),
            "{said}"
        );
        let oldest = readable(with_link(), Some(&ProtocolVersion::V_2024_11_05));
        assert_eq!(kinds(&oldest), ["text", "text", "text"]);
    }
}
