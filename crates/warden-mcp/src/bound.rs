//! The answer bound: every `tools/call` answer (and every task result
//! `tasks/get` carries) fits `ServingLimits::max_answer_bytes`
//! ([`crate::limits::DEFAULT_MAX_ANSWER_BYTES`], `WARDEN_MAX_ANSWER_BYTES`) on the wire:
//! structuredContent, text content and `_meta` together, with
//! [`ANSWER_ENVELOPE_BYTES`] of it left for the JSON-RPC envelope.
//!
//! The one place answers are bounded. The server hands every answer here
//! as an [`Answer`] (a built-in's from `crate::builtins::Reply`, a
//! guard's from `WardenServer::guard_call`, a task's in `tasks/get`), with
//! the cuts its typed builder already made (a task's receipt hashes) and
//! where its whole value already is, if anywhere (a task's `result.json`).
//! An answer within the bound, with nothing cut, goes out unchanged. One
//! over it is cut in this order:
//!
//! 1. the text content stops repeating structuredContent: it becomes a
//!    short JSON summary of the value (a success) or the same fitted
//!    value (an error: Claude Code shows an error's text, a success's
//!    structuredContent);
//! 2. charts and artifact links keep at most a quarter of the bound;
//! 3. the value keeps what fits ([`warden_core::answer::fit`]: leading
//!    items of long lists and maps, a share of each large entry).
//!
//! A cut value says so at its top: `truncated: true` and a `truncation`
//! object (`Marker`): the limit, the whole answer's size, each cut with
//! kept and total counts, and `whole`, the task and file holding the whole
//! value, also sent as a `resource_link`. A value not already in a task's
//! `result.json` is kept first, as a task of the caller of its own
//! (`TaskRunner::keep_answer`: `value.json`). A guard's structuredContent
//! must match its output schema, so it is never cut: a guard value that
//! does not fit whole comes back `isError` with `answer_too_large` (status
//! `success`: it ran), its head and the pointer in the text. Content-only
//! results keep their leading blocks and end with a marker block.

use rmcp::model::{CallToolResult, ContentBlock, Resource};
use serde_json::{Map, Value, json};

use crate::limits::{ANSWER_CUTS_LISTED, ANSWER_ENVELOPE_BYTES};
use warden_calls::events::Origin;
use warden_core::answer::{self, Cut, size};
use warden_core::error::GuardError;
use warden_task::{TaskRunner, TaskStatus};

/// The key of the marker a cut value carries at its top: `true`.
pub(crate) const TRUNCATED_KEY: &str = "truncated";
/// The key of the marker's details (`Marker`).
pub(crate) const TRUNCATION_KEY: &str = "truncation";

/// The least a summary text gets: 1,024 bytes.
const MIN_SUMMARY_BYTES: usize = 1_024;
/// The most a summary text gets: 16 KiB (the value itself is in
/// structuredContent and, whole, behind the pointer).
const MAX_SUMMARY_BYTES: usize = 16 * 1024;

/// Where an answer's whole value is kept: `filename` of task `task_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Whole {
    pub task_id: String,
    pub filename: String,
}

impl Whole {
    /// A task's `result.json`.
    pub fn result_of(task_id: &str) -> Self {
        Self {
            task_id: task_id.to_string(),
            filename: warden_calls::artifacts::RESULT_FILE.to_string(),
        }
    }

    fn uri(&self) -> String {
        crate::resources::uri(&self.task_id, &self.filename)
    }

    /// The `resource_link` to it.
    fn link(&self) -> ContentBlock {
        ContentBlock::resource_link(
            Resource::new(self.uri(), format!("whole answer: {}", self.filename))
                .with_mime_type("application/json"),
        )
    }
}

/// An answer on its way to the client, with what the bound needs to know.
#[derive(Debug)]
pub struct Answer {
    pub result: CallToolResult,
    /// Where its whole value already is (a task's `result.json`).
    pub whole: Option<Whole>,
    /// Parts its typed builder already cut from the value.
    pub cuts: Vec<Cut>,
    /// A guard's success: structuredContent must match the guard's output
    /// schema, so it goes out whole or not at all.
    pub fixed_schema: bool,
    /// How the answered call ended (a kept answer's record shows it).
    pub status: TaskStatus,
}

impl Answer {
    /// An answer no builder cut and no file holds.
    pub fn plain(result: CallToolResult) -> Self {
        let status = if result.is_error == Some(true) {
            TaskStatus::Failed
        } else {
            TaskStatus::Success
        };
        Self {
            result,
            whole: None,
            cuts: Vec::new(),
            fixed_schema: false,
            status,
        }
    }

    /// Whether it must be cut or marked: over `limit`, or cut already.
    fn needs_bound(&self, limit: usize) -> bool {
        !self.cuts.is_empty() || size(&self.result) > limit.saturating_sub(ANSWER_ENVELOPE_BYTES)
    }
}

/// `answer` within the server's answer bound: unchanged when it fits;
/// else its whole value kept (unless already in a task's file) and the
/// answer cut (see the module docs), with an `answer_truncated` event.
pub(crate) async fn bounded(
    tasks: &TaskRunner,
    limit: usize,
    origin: &Origin,
    mut answer: Answer,
) -> CallToolResult {
    if !answer.needs_bound(limit) {
        return answer.result;
    }
    let whole = match answer.whole.take() {
        Some(whole) => Ok(whole),
        None => tasks
            .keep_answer(origin, answer.status, &whole_value(&answer.result))
            .await
            .map(|task_id| Whole {
                task_id,
                filename: warden_task::VALUE_FILE.to_string(),
            }),
    };
    let answer_bytes = size(&answer.result);
    tasks.executor.events().emit(
        origin,
        "answer_truncated",
        json!({"answer_bytes": answer_bytes, "limit_bytes": limit,
               "kept_in": whole.as_ref().ok().map(|w| &w.task_id)}),
    );
    apply(answer, limit, whole)
}

/// [`bounded`] for an answer whose whole value a task's file already
/// holds (`tasks/get`: the task's `result.json`): never keeps a copy and
/// emits no event (no request of a tool is answered).
pub(crate) fn bounded_kept(mut answer: Answer, limit: usize) -> CallToolResult {
    if !answer.needs_bound(limit) {
        return answer.result;
    }
    let whole = answer
        .whole
        .take()
        .ok_or_else(|| GuardError::failed("no task file holds it"));
    apply(answer, limit, whole)
}

/// What is kept of an answer cut to the bound: its structuredContent; a
/// result without one, its single JSON text, else its content blocks.
fn whole_value(result: &CallToolResult) -> Value {
    if let Some(value) = &result.structured_content {
        return value.clone();
    }
    if let [ContentBlock::Text(text)] = result.content.as_slice()
        && let Ok(value @ Value::Object(_)) = serde_json::from_str::<Value>(&text.text)
    {
        return value;
    }
    json!({"content": result.content, "isError": result.is_error})
}

/// `answer` cut to `limit` (see the module docs), pointing at `whole`
/// (or saying why the whole value could not be kept).
pub(crate) fn apply(answer: Answer, limit: usize, whole: Result<Whole, GuardError>) -> CallToolResult {
    let target = limit.saturating_sub(ANSWER_ENVELOPE_BYTES);
    let answer_bytes = size(&answer.result);
    let Answer {
        result,
        cuts: typed,
        fixed_schema,
        ..
    } = answer;
    let mut shell = result;
    let structured = shell.structured_content.take();
    let content = std::mem::take(&mut shell.content);
    let error = shell.is_error == Some(true);
    let mirror = structured.as_ref().map(Value::to_string);
    let (mut payload, mut extras) = (Vec::new(), Vec::new());
    for block in content {
        match &block {
            ContentBlock::Text(text) if Some(&text.text) == mirror.as_ref() => {}
            ContentBlock::Image(_) | ContentBlock::ResourceLink(_) if structured.is_some() => {
                extras.push(block)
            }
            _ => payload.push(block),
        }
    }
    drop(mirror);
    let marker = Marker {
        limit,
        answer_bytes,
        whole: whole.as_ref().ok().cloned(),
        whole_error: whole.err(),
    };
    let (extras, extra_cuts) = keep_blocks(extras, target / 4);
    let mut prior = typed;
    prior.extend(extra_cuts);
    shell.content = extras;
    if let Some(whole) = &marker.whole {
        shell.content.push(whole.link());
    }
    // The keys and separators the value and its text add to the shell.
    let mut room = target.saturating_sub(size(&shell) + 64);
    for _ in 0..4 {
        let candidate = build(
            &shell,
            room,
            structured.as_ref(),
            &payload,
            &prior,
            &marker,
            fixed_schema,
            error,
        );
        let used = size(&candidate);
        if used <= target {
            return candidate;
        }
        room = room.saturating_sub(used - target + 256);
    }
    // Estimates missed by more than the retries cover: the marker alone.
    let mut last = shell;
    last.content
        .retain(|b| matches!(b, ContentBlock::ResourceLink(_)));
    last.content.truncate(1);
    let mut all = prior;
    all.push(Cut::items("content", 0, payload.len()));
    last.content.insert(
        0,
        ContentBlock::text(marked(Value::Object(Map::new()), &all, &marker).to_string()),
    );
    last
}

/// One attempt at the cut answer, its value and text within `room`.
#[allow(clippy::too_many_arguments)]
fn build(
    shell: &CallToolResult,
    room: usize,
    structured: Option<&Value>,
    payload: &[ContentBlock],
    prior: &[Cut],
    marker: &Marker,
    fixed_schema: bool,
    error: bool,
) -> CallToolResult {
    let mut out = shell.clone();
    let summary_room = (room / 8).clamp(MIN_SUMMARY_BYTES, MAX_SUMMARY_BYTES);
    let mut front = Vec::new();
    match structured {
        Some(value) if fixed_schema && !error => {
            if size(value) + summary_room <= room {
                // Whole in structuredContent; the text is a summary.
                front.push(summary(value, room - size(value), prior, marker));
                out.structured_content = Some(value.clone());
            } else {
                // It cannot go whole and may not be cut: an error saying
                // the call succeeded, with the head of its value.
                let message = format!(
                    "the guard ran and succeeded, but its answer ({} bytes) is over the {}-byte answer limit (WARDEN_MAX_ANSWER_BYTES) and its output schema does not allow cutting it; {}; the call need not be made again",
                    marker.answer_bytes,
                    marker.limit,
                    marker.where_whole()
                );
                let wrapped = json!({
                    "status": "success",
                    "error": {"code": warden_core::error::codes::ANSWER_TOO_LARGE, "message": message},
                    "output": value,
                });
                front.push(fitted(&wrapped, room, prior, marker).to_string());
                out.is_error = Some(true);
            }
        }
        Some(value) => {
            let own = if error {
                room / 2
            } else {
                room.saturating_sub(summary_room)
            };
            let value_fitted = fitted(value, own, prior, marker);
            let text = value_fitted.to_string();
            if size(&value_fitted) + text.len() + 16 <= room {
                front.push(text);
            } else {
                front.push(summary(
                    value,
                    room.saturating_sub(size(&value_fitted)),
                    prior,
                    marker,
                ));
            }
            out.structured_content = Some(value_fitted);
        }
        None => match payload {
            [ContentBlock::Text(text)]
                if serde_json::from_str::<Value>(&text.text).is_ok_and(|v| v.is_object()) =>
            {
                let value: Value = serde_json::from_str(&text.text).unwrap_or_default();
                front.push(fitted(&value, room, prior, marker).to_string());
            }
            _ => {
                let reserve = marker.max_size() + 64;
                let (blocks, mut cuts) = keep_payload(payload, room.saturating_sub(reserve));
                let mut all = prior.to_vec();
                all.append(&mut cuts);
                let mut blocks = blocks;
                blocks.push(ContentBlock::text(
                    marked(Value::Object(Map::new()), &all, marker).to_string(),
                ));
                blocks.append(&mut out.content);
                out.content = blocks;
                return out;
            }
        },
    }
    let mut blocks: Vec<ContentBlock> = front.into_iter().map(ContentBlock::text).collect();
    blocks.append(&mut out.content);
    out.content = blocks;
    out
}

/// `value` fitted into `budget` bytes with its marker, when anything of
/// it is cut (`prior`, or here); a value that fits with nothing cut
/// comes back as it is.
fn fitted(value: &Value, budget: usize, prior: &[Cut], marker: &Marker) -> Value {
    let (value, cuts) = answer::fit(value, budget.saturating_sub(marker.max_size()));
    if prior.is_empty() && cuts.is_empty() {
        return value;
    }
    let mut all = prior.to_vec();
    all.extend(cuts);
    marked(value, &all, marker)
}

/// A success's text when structuredContent does not repeat in it: the
/// value fitted into `budget` (at most [`MAX_SUMMARY_BYTES`]) with a note
/// that structuredContent carries more.
fn summary(value: &Value, budget: usize, prior: &[Cut], marker: &Marker) -> String {
    let budget = budget.min(MAX_SUMMARY_BYTES);
    let note = "a summary of this answer: structuredContent carries it (the text does not repeat it, to stay within the answer limit)";
    let mut object = match value {
        Value::Object(map) => map.clone(),
        other => Map::from_iter([("value".to_string(), other.clone())]),
    };
    object.insert("text_note".into(), Value::String(note.into()));
    let (fitted, cuts) = answer::fit(&Value::Object(object), budget.saturating_sub(marker.max_size()));
    let mut all = prior.to_vec();
    all.extend(cuts);
    marked(fitted, &all, marker).to_string()
}

/// `value` with `truncated: true` and the `truncation` marker at its top
/// (a value that is not a map is wrapped as `{"value": …}`).
fn marked(value: Value, cuts: &[Cut], marker: &Marker) -> Value {
    let mut object = match value {
        Value::Object(map) => map,
        other => Map::from_iter([("value".to_string(), other)]),
    };
    object.insert(TRUNCATED_KEY.into(), Value::Bool(true));
    object.insert(TRUNCATION_KEY.into(), marker.to_json(cuts));
    Value::Object(object)
}

/// The leading `blocks` within `budget` bytes, in order; the cuts name
/// each kind left out (`content:image`, `content:resource_link`).
fn keep_blocks(blocks: Vec<ContentBlock>, budget: usize) -> (Vec<ContentBlock>, Vec<Cut>) {
    let kind = |b: &ContentBlock| match b {
        ContentBlock::Image(_) => "content:image",
        _ => "content:resource_link",
    };
    let mut totals: Vec<(&'static str, usize, usize)> = Vec::new();
    let mut kept = Vec::new();
    let mut used = 0;
    let mut full = false;
    for block in blocks {
        let name = kind(&block);
        let at = match totals.iter().position(|(k, _, _)| *k == name) {
            Some(at) => at,
            None => {
                totals.push((name, 0, 0));
                totals.len() - 1
            }
        };
        totals[at].2 += 1;
        let cost = size(&block) + 1;
        if !full && used + cost <= budget {
            used += cost;
            totals[at].1 += 1;
            kept.push(block);
        } else {
            full = true;
        }
    }
    let cuts = totals
        .into_iter()
        .filter(|(_, k, t)| k < t)
        .map(|(name, k, t)| Cut::items(name, k, t))
        .collect();
    (kept, cuts)
}

/// A content-only result's leading blocks within `budget`: whole ones,
/// then the head of the first text that does not fit.
fn keep_payload(blocks: &[ContentBlock], budget: usize) -> (Vec<ContentBlock>, Vec<Cut>) {
    let mut kept = Vec::new();
    let mut cuts = Vec::new();
    let mut left = budget;
    for (i, block) in blocks.iter().enumerate() {
        let cost = size(block) + 1;
        if cost <= left {
            kept.push(block.clone());
            left -= cost;
            continue;
        }
        if let ContentBlock::Text(text) = block
            && left > answer::MIN_SHARE
        {
            let (head, mut cut) = answer::fit(&Value::String(text.text.clone()), left - 32);
            if let Some(cut) = cut.first_mut() {
                cut.at = format!("content/{i}/text");
            }
            cuts.extend(cut);
            kept.push(ContentBlock::text(head.as_str().unwrap_or_default()));
        }
        break;
    }
    if kept.len() < blocks.len() || !cuts.is_empty() {
        cuts.insert(0, Cut::items("content", kept.len(), blocks.len()));
    }
    (kept, cuts)
}

/// What a cut answer says about itself (`truncation`).
#[derive(Debug, Clone)]
struct Marker {
    limit: usize,
    /// The whole answer's size as it would have been sent (without the envelope).
    answer_bytes: usize,
    whole: Option<Whole>,
    /// Why the whole value could not be kept, when it could not.
    whole_error: Option<GuardError>,
}

impl Marker {
    fn where_whole(&self) -> String {
        match (&self.whole, &self.whole_error) {
            (Some(whole), _) => format!(
                "the whole value is {} of task {}: read it with read_artifact (task_id, filename; follow next_offset) or resources/read {}",
                whole.filename,
                whole.task_id,
                whole.uri()
            ),
            (None, Some(error)) => format!("the whole value could not be kept: {}", error.message),
            (None, None) => "the whole value was not kept".to_string(),
        }
    }

    fn to_json(&self, cuts: &[Cut]) -> Value {
        let listed = &cuts[..cuts.len().min(ANSWER_CUTS_LISTED)];
        let mut marker = json!({
            "limit_bytes": self.limit,
            "answer_bytes": self.answer_bytes,
            "cut": listed,
            "whole": self.whole.as_ref().map(|w| json!({
                "task_id": w.task_id, "filename": w.filename, "uri": w.uri(),
            })),
            "note": format!(
                "cut to fit the {}-byte answer limit (WARDEN_MAX_ANSWER_BYTES); {}",
                self.limit,
                self.where_whole()
            ),
        });
        if cuts.len() > listed.len() {
            marker["cut_more"] = json!(cuts.len() - listed.len());
        }
        marker
    }

    /// The most its JSON (with the two keys) takes: every listed cut at
    /// its longest.
    fn max_size(&self) -> usize {
        let longest = Cut {
            at: "x".repeat(answer::MAX_POINTER_BYTES + 4),
            kept: usize::MAX,
            total: usize::MAX,
            unit: "entries",
        };
        let cuts = vec![longest; ANSWER_CUTS_LISTED + 1];
        size(&marked(Value::Object(Map::new()), &cuts, self)) + 16
    }
}

#[cfg(test)]
mod tests;
