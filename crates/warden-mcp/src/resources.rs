//! Task artifacts as MCP resources.
//!
//! A task result carries a `resource_link` per file under `outputs/`, with
//! the URI `warden://artifacts/{task_id}/{path}`; `resources/read` on such a
//! URI returns the whole file (text, or base64 for binary data) through the
//! same safe-path checks as `read_artifact`, from the caller's own tasks
//! only (another principal's task answers as an unknown one). Files larger than one
//! `read_artifact` chunk are refused with a pointer to `read_artifact`.
//! PNG artifacts also travel inline as image content ([`images`]) while
//! they fit the result size cap, so a client shows charts at once.
//!
//! URIs are built and read with `percent-encoding` (already in the tree
//! through rmcp, so it costs no build time): a name with a space, `#`, `?`
//! or `%` still gives a valid URI, and the same name comes back out of it.
//! Names made of URI-safe characters give the same URI as before.

use base64::Engine as _;
use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};
use rmcp::ErrorData;
use rmcp::model::{ContentBlock, ReadResourceResult, Resource, ResourceContents, ResourceTemplate};

use crate::limits::MAX_RESULT_IMAGES;
use warden_calls::artifacts::{Encoding, View, mime_type};
use warden_task::TaskResult;
use warden_task::limits::MAX_READ_CHUNK_BYTES;

/// Base64 of the 8-byte PNG signature's first 6 bytes: every PNG starts so.
const PNG_BASE64_START: &str = "iVBORw0K";

/// URI prefix of task artifacts.
pub(crate) const SCHEME: &str = warden_calls::artifacts::URI_SCHEME;

/// Escaped in each part of an artifact URI: controls, space and the
/// characters RFC 3986 reserves for other parts of a URI (`/` is kept: it
/// separates the components of an artifact path, as in the file system).
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}');

/// The URI of one task artifact.
pub(crate) fn uri(task_id: &str, path: &str) -> String {
    format!(
        "{SCHEME}{}/{}",
        utf8_percent_encode(task_id, SEGMENT),
        utf8_percent_encode(path, SEGMENT)
    )
}

/// The template clients can fill in.
pub(crate) fn template() -> ResourceTemplate {
    ResourceTemplate::new(format!("{SCHEME}{{task_id}}/{{path}}"), "task-artifact")
}

/// Resource links for the `artifacts` of a task result (none unless it
/// names its task).
pub(crate) fn links(result: &TaskResult) -> Vec<ContentBlock> {
    let (Some(task_id), Some(artifacts)) = (&result.task_id, &result.artifacts) else {
        return Vec::new();
    };
    artifacts
        .iter()
        .map(|artifact| {
            let path = &artifact.path;
            let resource = Resource::new(uri(task_id, path), &artifact.name).with_mime_type(mime_type(path));
            ContentBlock::resource_link(resource)
        })
        .collect()
}

/// Image content for the PNG `artifacts` of a task result, in list order:
/// at most [`MAX_RESULT_IMAGES`], and only while the tool result — the
/// result JSON twice (structuredContent and its text mirror; `json_bytes`
/// is its compact size as sent) plus the images' base64 — stays within
/// `cap` bytes (the smaller of
/// [`MAX_INLINE_RESULT_BYTES`](warden_calls::limits::MAX_INLINE_RESULT_BYTES) and the answer
/// bound). A PNG that does not fit, or is not really a PNG, is left to its
/// resource link.
pub(crate) fn images(
    store: View<'_>,
    result: &TaskResult,
    json_bytes: usize,
    cap: usize,
) -> Vec<ContentBlock> {
    let (Some(task_id), Some(artifacts)) = (&result.task_id, &result.artifacts) else {
        return Vec::new();
    };
    let mut budget = cap.saturating_sub(json_bytes.saturating_mul(2));
    let mut images = Vec::new();
    for path in artifacts.iter().map(|a| a.path.as_str()) {
        if images.len() == MAX_RESULT_IMAGES || budget == 0 {
            break;
        }
        if mime_type(path) != "image/png" {
            continue;
        }
        // Base64 is 4 bytes per 3: read at most what fits once encoded.
        let fits = (budget / 4 * 3).min(MAX_READ_CHUNK_BYTES);
        if fits == 0 {
            break;
        }
        let Ok(chunk) = store.read(task_id, path, 0, fits, Encoding::Base64) else {
            continue;
        };
        if chunk.next_offset.is_some() || !chunk.content.starts_with(PNG_BASE64_START) {
            continue;
        }
        budget = budget.saturating_sub(chunk.content.len());
        images.push(ContentBlock::image(chunk.content, "image/png"));
    }
    images
}

/// `resources/read` for an artifact URI, in the caller's view of the store.
pub(crate) fn read(store: View<'_>, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    // The error names the resource in `data.uri` (SEP-2164).
    let not_ours = || {
        ErrorData::invalid_params(
            format!("unknown resource '{uri}': expected {SCHEME}{{task_id}}/{{path}}"),
            Some(serde_json::json!({"uri": uri})),
        )
    };
    let rest = uri.strip_prefix(SCHEME).ok_or_else(not_ours)?;
    let (task_id, path) = rest.split_once('/').ok_or_else(not_ours)?;
    let task_id = percent_decode_str(task_id)
        .decode_utf8()
        .map_err(|_| not_ours())?;
    let path = percent_decode_str(path).decode_utf8().map_err(|_| not_ours())?;
    let (task_id, path) = (task_id.as_ref(), path.as_ref());
    let as_params = |e: warden_core::error::GuardError| {
        ErrorData::invalid_params(e.message, Some(serde_json::json!({"uri": uri})))
    };
    let chunk = store
        .read(task_id, path, 0, MAX_READ_CHUNK_BYTES, Encoding::Base64)
        .map_err(as_params)?;
    if chunk.next_offset.is_some() {
        return Err(ErrorData::invalid_params(
            format!(
                "'{path}' is larger than {MAX_READ_CHUNK_BYTES} bytes: read it with read_artifact in chunks"
            ),
            None,
        ));
    }
    let encoded = chunk.content;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&encoded)
        .unwrap_or_default();
    let contents = match String::from_utf8(bytes) {
        Ok(text) => ResourceContents::text(text, uri),
        Err(_) => ResourceContents::blob(encoded, uri),
    };
    Ok(ReadResourceResult::new(vec![
        contents.with_mime_type(mime_type(path)),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_calls::limits::MAX_INLINE_RESULT_BYTES;
    use warden_task::TaskStatus;
    use warden_task::result::ArtifactRef;

    /// A file that starts like a PNG, `size` bytes long.
    fn fake_png(size: usize) -> Vec<u8> {
        let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
        bytes.resize(size, 7);
        bytes
    }

    #[test]
    fn chart_images_travel_inline_only_while_they_fit_the_result_cap() {
        // A small PNG becomes image content; one past the cap and a non-PNG stay links only.
        let root = tempfile::tempdir().expect("temp dir");
        let store = warden_calls::artifacts::ArtifactStore::new(root.path(), 10);
        let local = warden_calls::tenant::Principal::local();
        let (task_id, _) = store.create_task(&local).expect("task");
        let cap = 1 << 20;
        store
            .write_output(&task_id, "small.png", &fake_png(10_000), cap)
            .expect("small");
        store
            .write_output(&task_id, "big.png", &fake_png(300_000), cap)
            .expect("big");
        store
            .write_output(&task_id, "fake.png", b"not a png at all", cap)
            .expect("fake");
        store
            .write_output(&task_id, "data.csv", b"a,b\n", cap)
            .expect("csv");
        let mut result = TaskResult::bare(TaskStatus::Success).with_task_id(&task_id);
        result.artifacts = Some(
            ["big.png", "data.csv", "fake.png", "small.png"]
                .map(|name| ArtifactRef {
                    path: format!("outputs/{name}"),
                    name: name.into(),
                })
                .to_vec(),
        );
        let images = images(
            store.view(&local),
            &result,
            result.size(),
            MAX_INLINE_RESULT_BYTES,
        );
        assert_eq!(images.len(), 1, "only small.png fits and is a PNG");
        // Another principal's view sees no task, hence no image.
        let alice = warden_calls::tenant::Principal::new("alice").expect("principal");
        assert!(
            super::images(
                store.view(&alice),
                &result,
                result.size(),
                MAX_INLINE_RESULT_BYTES
            )
            .is_empty()
        );
        let ContentBlock::Image(image) = &images[0] else {
            panic!("an image block")
        };
        assert_eq!(image.mime_type, "image/png");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(&image.data)
            .expect("base64");
        assert_eq!(decoded, fake_png(10_000));
        assert_eq!(links(&result).len(), 4, "every artifact keeps its link");
    }

    /// Artifact URIs escape what a URI cannot carry and read back to the name.
    #[test]
    fn uris_escape_and_round_trip_names() {
        assert_eq!(
            uri("task_1", "outputs/r.csv"),
            "warden://artifacts/task_1/outputs/r.csv"
        );
        let built = uri("task_1", "outputs/a b#1%.csv");
        assert_eq!(built, "warden://artifacts/task_1/outputs/a%20b%231%25.csv");
        let rest = built.strip_prefix(SCHEME).unwrap_or_default();
        let decoded = percent_decode_str(rest).decode_utf8().map(|c| c.into_owned());
        assert_eq!(decoded.ok().as_deref(), Some("task_1/outputs/a b#1%.csv"));
    }
}
