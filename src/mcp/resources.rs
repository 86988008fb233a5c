//! Task artifacts as MCP resources.
//!
//! A task result carries a `resource_link` per file under `outputs/`, with
//! the URI `warden://artifacts/{task_id}/{path}`; `resources/read` on such a
//! URI returns the whole file (text, or base64 for binary data) through the
//! same safe-path checks as `read_artifact`. Files larger than one
//! `read_artifact` chunk are refused with a pointer to `read_artifact`.

use base64::Engine as _;
use rmcp::ErrorData;
use rmcp::model::{ContentBlock, ReadResourceResult, Resource, ResourceContents, ResourceTemplate};
use serde_json::Value;

use crate::artifacts::{ArtifactStore, Encoding, mime_type};
use crate::limits::MAX_READ_CHUNK_BYTES;

/// URI prefix of task artifacts.
pub const SCHEME: &str = "warden://artifacts/";

/// The template clients can fill in.
pub fn template() -> ResourceTemplate {
    ResourceTemplate::new(format!("{SCHEME}{{task_id}}/{{path}}"), "task-artifact")
}

/// Resource links for the `artifacts` of a task result.
pub fn links(result: &Value) -> Vec<ContentBlock> {
    let Some(task_id) = result.get("task_id").and_then(Value::as_str) else {
        return Vec::new();
    };
    let Some(artifacts) = result.get("artifacts").and_then(Value::as_array) else {
        return Vec::new();
    };
    artifacts
        .iter()
        .filter_map(|artifact| {
            let path = artifact.get("path")?.as_str()?;
            let name = artifact.get("name").and_then(Value::as_str).unwrap_or(path);
            let resource =
                Resource::new(format!("{SCHEME}{task_id}/{path}"), name).with_mime_type(mime_type(path));
            Some(ContentBlock::resource_link(resource))
        })
        .collect()
}

/// `resources/read` for an artifact URI.
pub fn read(store: &ArtifactStore, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let not_ours = || {
        ErrorData::invalid_params(
            format!("unknown resource '{uri}': expected {SCHEME}{{task_id}}/{{path}}"),
            None,
        )
    };
    let rest = uri.strip_prefix(SCHEME).ok_or_else(not_ours)?;
    let (task_id, path) = rest.split_once('/').ok_or_else(not_ours)?;
    let as_params = |e: crate::GuardError| ErrorData::invalid_params(e.message, None);
    let chunk = store
        .read(task_id, path, 0, MAX_READ_CHUNK_BYTES, Encoding::Base64)
        .map_err(as_params)?;
    if !chunk["next_offset"].is_null() {
        return Err(ErrorData::invalid_params(
            format!(
                "'{path}' is larger than {MAX_READ_CHUNK_BYTES} bytes: read it with read_artifact in chunks"
            ),
            None,
        ));
    }
    let encoded = chunk["content"].as_str().unwrap_or_default();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap_or_default();
    let contents = match String::from_utf8(bytes) {
        Ok(text) => ResourceContents::text(text, uri),
        Err(_) => ResourceContents::blob(encoded, uri),
    };
    Ok(ReadResourceResult::new(vec![
        contents.with_mime_type(mime_type(path)),
    ]))
}
