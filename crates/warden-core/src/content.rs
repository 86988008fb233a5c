//! MCP content blocks an app can return: text, images, audio and embedded
//! resources.
//!
//! Most guards answer with typed JSON (structuredContent). Some answers are
//! not data but media: a rendered chart, a voice clip, a document to show.
//! A guard whose output type is `Vec<Content>` answers with these blocks
//! as they are (see [`crate::guard`](mod@crate::guard)); prompts ([`crate::Prompt`]) and
//! resources ([`crate::StaticResource`], [`crate::ResourceTemplate`]) are
//! made of the same parts. The JSON form is MCP's own, so a block crosses
//! the worker pipe and reaches the client unchanged. Warden's own types
//! keep rmcp out of the public API.

use base64::Engine as _;
use rmcp::model::{ContentBlock, ResourceContents};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One MCP content block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Content {
    /// Plain text.
    Text { text: String },
    /// An image, base64-encoded.
    Image {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// An audio clip, base64-encoded.
    Audio {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// A resource's contents, embedded in the answer.
    Resource { resource: Embedded },
}

/// The contents of one resource: its URI, MIME type and body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Embedded {
    pub uri: String,
    #[serde(rename = "mimeType")]
    pub mime_type: String,
    #[serde(flatten)]
    pub body: Body,
}

/// A resource body: text, or bytes (base64 on the wire, as MCP's `blob`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Body {
    Text(String),
    Blob(String),
}

impl Body {
    /// A text body.
    pub fn text(text: impl Into<String>) -> Self {
        Body::Text(text.into())
    }

    /// A binary body (base64-encoded here).
    pub fn bytes(bytes: impl AsRef<[u8]>) -> Self {
        Body::Blob(base64(bytes.as_ref()))
    }
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into() }
    }

    /// An image block from the image's bytes, e.g. a PNG with `image/png`.
    pub fn image(bytes: impl AsRef<[u8]>, mime_type: impl Into<String>) -> Self {
        Content::Image {
            data: base64(bytes.as_ref()),
            mime_type: mime_type.into(),
        }
    }

    /// An audio block from the clip's bytes, e.g. a WAV with `audio/wav`.
    pub fn audio(bytes: impl AsRef<[u8]>, mime_type: impl Into<String>) -> Self {
        Content::Audio {
            data: base64(bytes.as_ref()),
            mime_type: mime_type.into(),
        }
    }

    /// An embedded resource.
    pub fn resource(uri: impl Into<String>, mime_type: impl Into<String>, body: Body) -> Self {
        Content::Resource {
            resource: Embedded {
                uri: uri.into(),
                mime_type: mime_type.into(),
                body,
            },
        }
    }

    /// The rmcp block the server sends.
    pub fn into_block(self) -> ContentBlock {
        match self {
            Content::Text { text } => ContentBlock::text(text),
            Content::Image { data, mime_type } => ContentBlock::image(data, mime_type),
            Content::Audio { data, mime_type } => ContentBlock::audio(data, mime_type),
            Content::Resource { resource } => ContentBlock::resource(resource.into_contents()),
        }
    }
}

impl Embedded {
    /// The rmcp resource contents the server sends.
    pub fn into_contents(self) -> ResourceContents {
        let contents = match self.body {
            Body::Text(text) => ResourceContents::text(text, self.uri),
            Body::Blob(blob) => ResourceContents::blob(blob, self.uri),
        };
        contents.with_mime_type(self.mime_type)
    }
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_serializes_in_mcp_shape() {
        // The JSON form is MCP's, so a block crosses the worker pipe and reaches clients unchanged.
        let blocks = vec![
            Content::text("hi"),
            Content::image([1u8, 2, 3], "image/png"),
            Content::resource("test://x", "text/plain", Body::text("body")),
        ];
        let json = serde_json::to_value(&blocks).expect("json");
        assert_eq!(json[0], serde_json::json!({"type": "text", "text": "hi"}));
        assert_eq!(
            json[1],
            serde_json::json!({"type": "image", "data": "AQID", "mimeType": "image/png"})
        );
        assert_eq!(
            json[2],
            serde_json::json!({"type": "resource", "resource": {"uri": "test://x", "mimeType": "text/plain", "text": "body"}})
        );
        let back: Vec<Content> = serde_json::from_value(json.clone()).expect("round trip");
        assert_eq!(back, blocks);
        let rmcp: Vec<ContentBlock> = back.into_iter().map(Content::into_block).collect();
        assert_eq!(serde_json::to_value(rmcp).expect("rmcp json"), json);
    }
}
