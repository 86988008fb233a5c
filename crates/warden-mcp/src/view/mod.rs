//! The MCP App view of a task (SEP-1865, extension `io.modelcontextprotocol/ui`).
//!
//! One page, [`URI`], shows a person what `run_script`, `run_coding_task`
//! or `run_batch` returned: status, summary and metrics, every PNG
//! artifact as an image, every CSV artifact as a sortable table, a batch's
//! calls. A host that speaks MCP Apps sees [`link`]'s `_meta.ui.resourceUri`
//! on those tools' definitions, reads the page with `resources/read`, runs it
//! in a sandboxed iframe and hands it the tool result; hosts without Apps
//! ignore the metadata and keep showing the result as before (the result
//! itself does not change).
//!
//! The page holds no data and no secrets, so it is the same for every
//! principal: the artifacts it shows are fetched through the host's bridge
//! with `read_artifact` calls, which the server answers from the caller's
//! own tasks only. It needs no network origin, so its resource declares no
//! CSP domains and runs under the host's strictest default policy.

use rmcp::model::{ReadResourceResult, Resource, ResourceContents, Tool};
use serde_json::{Map, Value, json};

/// The MCP Apps extension id, as declared in the server's capabilities.
pub(crate) const EXTENSION_ID: &str = "io.modelcontextprotocol/ui";

/// The view's resource URI.
pub(crate) const URI: &str = "ui://warden/task.html";

/// The MIME type MCP Apps hosts render (`RESOURCE_MIME_TYPE` in the SDK).
pub(crate) const MIME_TYPE: &str = "text/html;profile=mcp-app";

/// The page: one self-contained file (inline CSS and JS, no external
/// fetches); see its head comment for why the bridge client is hand-written.
const PAGE: &str = include_str!("task.html");

/// The extension's entry in `capabilities.extensions`: the MIME types of the
/// views this server offers.
pub(crate) fn capability() -> Map<String, Value> {
    let mut settings = Map::new();
    settings.insert("mimeTypes".into(), json!([MIME_TYPE]));
    settings
}

/// Whether `uri` is the view.
pub(crate) fn is(uri: &str) -> bool {
    uri == URI
}

/// The view's entry in `resources/list`.
pub(crate) fn resource() -> Resource {
    Resource::new(URI, "task-view")
        .with_title("Task result view")
        .with_description("MCP App view of a task result: status, summary, metrics, charts and CSV tables")
        .with_mime_type(MIME_TYPE)
}

/// `resources/read` of the view: `None` for any other URI.
pub(crate) fn read(uri: &str) -> Option<ReadResourceResult> {
    is(uri)
        .then(|| ReadResourceResult::new(vec![ResourceContents::text(PAGE, URI).with_mime_type(MIME_TYPE)]))
}

/// `tool` with its view linked: `_meta.ui.resourceUri`, plus the flat
/// `_meta["ui/resourceUri"]` key that hosts written against the SDK's 1.x
/// still read (the SDK's own `registerAppTool` writes both).
pub(crate) fn link(mut tool: Tool) -> Tool {
    let mut meta = tool.meta.take().unwrap_or_default();
    let ui = meta.0.entry("ui").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(ui) = ui {
        ui.insert("resourceUri".into(), Value::String(URI.into()));
    }
    meta.0.insert("ui/resourceUri".into(), Value::String(URI.into()));
    tool.meta = Some(meta);
    tool
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn link_sets_both_keys_and_keeps_other_meta() {
        let mut tool = Tool::new("t", "d", Arc::new(Map::new()));
        let mut meta = rmcp::model::MetaObject::default();
        meta.0.insert("other".into(), json!(1));
        tool.meta = Some(meta);
        let linked = serde_json::to_value(link(tool)).unwrap_or_default();
        assert_eq!(linked["_meta"]["ui"]["resourceUri"], URI);
        assert_eq!(linked["_meta"]["ui/resourceUri"], URI);
        assert_eq!(linked["_meta"]["other"], 1);
    }

    #[test]
    fn read_serves_the_page_only_at_its_uri() {
        let read = read(URI).map(|r| serde_json::to_value(r).unwrap_or_default());
        let contents = read.as_ref().map(|r| &r["contents"][0]);
        assert_eq!(contents.map(|c| c["mimeType"].clone()), Some(json!(MIME_TYPE)));
        assert!(
            contents
                .and_then(|c| c["text"].as_str())
                .is_some_and(|t| t.contains("ui/initialize"))
        );
        assert!(super::read("ui://warden/other.html").is_none());
    }
}
