//! The MCP Tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`):
//! long work that outlives the request asking for it.
//!
//! A client that declares the extension and asks for a task when it calls
//! one of the tools that run as tasks (`run_script`, `run_coding_task`,
//! `run_batch`, and guards with task support: see `server/guard_task.rs`)
//! is answered at once with a task handle whose id is the Warden task id; the work
//! goes on detached from the request (and from the client's connection)
//! and its record in the task store says how it stands. `tasks/get` reads
//! that record: `working` with the latest progress note, then `completed`
//! with the very result a plain call would have returned (a task that
//! failed is a completed call with `isError`), `cancelled`, or `failed`
//! when the failure was the server's: it died under the task
//! (`interrupted`) or the task's worker died. `tasks/cancel` is defined
//! for every state: a queued task never runs and ends `cancelled`; a
//! running one (or one waiting for its principal's share of the task
//! slots) is stopped, its worker killed, and ends `cancelled`; an ended
//! one keeps its record (acknowledged on 2026-07-28, refused naming its
//! status on a 2025-11-25 session).
//! Another principal's task id is unknown, exactly like an id that never
//! existed.
//!
//! Only a request that asks for a task gets one (`asks_for_task`):
//! declaring the extension alone is not asking, so clients that do not
//! ask (or do not declare the extension) get the plain call, unchanged.
//!
//! The client may ask for a shorter retention than the default with the
//! request `_meta` key [`TTL_META_KEY`] (milliseconds; see
//! [`warden_task::records`]): the extension itself has no such field.

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, DetailedTask, JsonObject, Task, TaskPayload, TaskStatus as McpStatus};
use serde_json::{Value, json};

use crate::bound::{Answer, Whole};
use crate::limits::{ANSWER_ENVELOPE_BYTES, TASK_POLL_INTERVAL_MS};
use warden_calls::artifacts::ArtifactStore;
use warden_calls::limits::MAX_INLINE_RESULT_BYTES;
use warden_calls::tenant::Principal;
use warden_core::error::TaskErrorKind;
use warden_task::result::{Saved, SavedHead, read_saved};
use warden_task::store::{State, TaskRecord, iso8601};
use warden_task::{ResultError, TaskResult, TaskStatus};

/// What a queued task runs, as its record keeps it: the built-in, its
/// arguments, the caller's trace context, and the OAuth scopes the
/// request's token granted. The scopes are stored because the task may run
/// later, on another node, and the policy's scope rules must see what the
/// request carried; a record without them (queued before they were kept)
/// runs with none, so scope rules refuse rather than allow.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct QueuedRequest {
    #[serde(default)]
    pub tool: String,
    #[serde(default)]
    pub arguments: Value,
    #[serde(default)]
    pub traceparent: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// What a task that waited for the person resumes with (set by the
    /// store when it pauses; see `crate::waiting`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<warden_core::approval::Carried>,
}

impl QueuedRequest {
    /// The request a claimed record holds (an unreadable one names no tool).
    pub(crate) fn of(stored: &Value) -> Self {
        serde::Deserialize::deserialize(stored).unwrap_or_default()
    }

    /// As the store keeps it.
    pub(crate) fn to_stored(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Request `_meta` key with the TTL (ms) a client asks for its task.
pub(crate) const TTL_META_KEY: &str = "warden/taskTtlMs";

/// Request `_meta` key with which a `tools/call` asks to run as a task:
/// `true` (or an object). A 2025-11-25 client's `params.task` never
/// reaches the handler: rmcp 3.11 models SEP-2663, whose `tools/call` has
/// no such field, and drops it while parsing.
pub(crate) const TASK_META_KEY: &str = "warden/task";

/// Whether a `tools/call` asks to run as an MCP task. Declaring the
/// extension is consent to receive a task, not a request for one: the MCP
/// Inspector declares it on a 2025-11-25 session and shows an empty result
/// when a plain call comes back as a task handle. So a task is made only
/// when the client declared the extension (`declared`) and the request
/// asks: [`TASK_META_KEY`] set (or a TTL asked with [`TTL_META_KEY`]), or,
/// under the 2026-07-28 rules, the request's own `_meta` client
/// capabilities declare the extension (SEP-2663: the server decides per
/// request among clients that declare it there). `_meta.warden/task:
/// false` always gets a plain result. A value that is neither a boolean
/// nor an object is an error naming the key.
pub(crate) fn asks_for_task(
    meta: &rmcp::model::RequestMetaObject,
    declared: bool,
) -> Result<bool, ErrorData> {
    let explicit = match meta.get(TASK_META_KEY) {
        None | Some(Value::Null) => None,
        Some(Value::Bool(asked)) => Some(*asked),
        Some(Value::Object(_)) => Some(true),
        Some(other) => {
            return Err(ErrorData::invalid_params(
                format!(
                    "_meta.{TASK_META_KEY} must be true (run as an MCP task) or false (a plain result), got {other}"
                ),
                None,
            ));
        }
    };
    if !declared {
        return Ok(false);
    }
    let per_request = meta.protocol_version().is_some_and(|v| !v.has_initialize())
        && meta.client_capabilities().is_some_and(|c| c.supports_tasks());
    Ok(explicit.unwrap_or(per_request || meta.get(TTL_META_KEY).is_some_and(|v| !v.is_null())))
}

/// The answer to `tasks/cancel` for a task that has already ended: an
/// invalid-params error (the 2025-11-25 rule for a task in a terminal
/// status) saying how it ended and that nothing changed.
pub(crate) fn already_ended(record: &TaskRecord) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "task '{}' already ended ({}): there is nothing to cancel and its record and result are unchanged; \
             tasks/get returns its result",
            record.id,
            record.state.as_str()
        ),
        Some(json!({"task_id": record.id, "status": record.state.as_str()})),
    )
}

/// The TTL a request asks for, if any; a value that is not a positive
/// integer is an error naming the key.
pub(crate) fn requested_ttl(meta: &rmcp::model::RequestMetaObject) -> Result<Option<u64>, ErrorData> {
    match meta.get(TTL_META_KEY) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value.as_u64().filter(|ms| *ms > 0).map(Some).ok_or_else(|| {
            ErrorData::invalid_params(
                format!(
                    "_meta.{TTL_META_KEY} must be a positive integer number of milliseconds, got {value}; \
                     omit it for the server's default retention"
                ),
                None,
            )
        }),
    }
}

/// The answer for a task id the caller has no task under.
pub(crate) fn unknown_task(id: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "no task '{id}': it never existed here, expired, or is not yours; list_tasks shows your tasks"
        ),
        None,
    )
}

/// A store failure, as a protocol error.
pub(crate) fn store_error(error: warden_task::store::StoreError) -> ErrorData {
    ErrorData::internal_error(error.to_string(), None)
}

/// The task's base fields (id, status, times, TTL, poll interval).
pub(crate) fn handle(record: &TaskRecord) -> Task {
    let status = match record.state {
        State::Queued | State::Running => McpStatus::Working,
        State::Waiting => McpStatus::InputRequired,
        State::Ended(TaskStatus::Cancelled) => McpStatus::Cancelled,
        State::Ended(_) if protocol_failure(record) => McpStatus::Failed,
        State::Ended(_) => McpStatus::Completed,
    };
    let mut task = Task::new(
        record.id.clone(),
        status,
        iso8601(record.created_ms),
        iso8601(record.updated_ms),
    )
    .with_ttl_ms(u64::try_from(record.ttl_ms).unwrap_or(0))
    .with_poll_interval_ms(TASK_POLL_INTERVAL_MS);
    task.status_message = match record.state {
        State::Queued | State::Running | State::Waiting => record.status_message.clone(),
        State::Ended(_) => record.summary.clone(),
    };
    task
}

/// Whether the task ended on a failure of the server's rather than of
/// its work (SEP-2663 `failed`): its server went away, or its worker died
/// (a guard that panicked included). A tool error ends `completed`, its
/// result an error.
fn protocol_failure(record: &TaskRecord) -> bool {
    let kind = record
        .error
        .as_ref()
        .map(ResultError::from_stored)
        .and_then(|error| error.kind());
    matches!(kind, Some(TaskErrorKind::Interrupted | TaskErrorKind::Worker))
}

/// `tasks/get`'s answer for `record`, owned by `principal`: an ended
/// task carries the result its call would have returned, read from its
/// `result.json`, within the answer bound `limit` (see [`crate::bound`]);
/// a waiting one its question (`asked`, see `crate::waiting`).
pub(crate) fn detailed(
    store: &ArtifactStore,
    principal: &Principal,
    record: &TaskRecord,
    limit: usize,
    asked: Option<rmcp::model::InputRequests>,
) -> DetailedTask {
    let task = handle(record);
    let payload = match task.status {
        McpStatus::InputRequired => match asked {
            Some(input_requests) => TaskPayload::InputRequired { input_requests },
            None => TaskPayload::Working,
        },
        McpStatus::Working => TaskPayload::Working,
        McpStatus::Cancelled => TaskPayload::Cancelled,
        McpStatus::Failed => {
            let mut error = json!({
                "code": rmcp::model::ErrorCode::INTERNAL_ERROR.0,
                "message": record.summary.clone().unwrap_or_else(|| "interrupted".into()),
                "data": {"task_id": record.id, "error": record.error},
            });
            let room = limit.saturating_sub(ANSWER_ENVELOPE_BYTES + warden_core::answer::size(&error));
            if let Some((listed, total)) = side_effects(store, principal, record, room) {
                error["data"]["side_effects"] = listed;
                if let Some(total) = total {
                    error["data"]["side_effects_total"] = total.into();
                }
            }
            TaskPayload::Failed { error: object(error) }
        }
        _ => TaskPayload::Completed {
            result: object(
                serde_json::to_value(completed(store, principal, record, limit)).unwrap_or_default(),
            ),
        },
    };
    DetailedTask::new(task, payload)
}

/// The side effects a task whose server died had started, from its
/// `result.json` (see `warden_task::records`): what its failed `tasks/get`
/// carries besides the error, so the client sees which calls may have
/// taken effect. The last ones that fit `room` bytes (the answer bound's
/// share left by the error), with the total when that is fewer than the
/// result lists; `get_task_result` pages the whole result.
fn side_effects(
    store: &ArtifactStore,
    principal: &Principal,
    record: &TaskRecord,
    room: usize,
) -> Option<(Value, Option<usize>)> {
    let Ok(Saved::Whole(text)) = read_saved(store.view(principal), &record.id) else {
        return None;
    };
    /// The one field read here: deserializing the whole `TaskResult` from
    /// text as well as from a `Value` (as `completed` does) compiled its
    /// 60 KB reader twice.
    #[derive(serde::Deserialize)]
    struct Listed {
        side_effects: Option<Vec<warden_calls::events::recovered::SideEffect>>,
    }
    let listed = serde_json::from_str::<Listed>(&text).ok()?.side_effects?;
    let total = listed.len();
    // Room for the key, the brackets and the total.
    let mut used = 64;
    let kept = listed
        .iter()
        .rev()
        .take_while(|side_effect| {
            used += warden_core::answer::size(side_effect) + 1;
            used <= room
        })
        .count();
    let shown = serde_json::to_value(&listed[total - kept..]).unwrap_or_default();
    Some((shown, (kept < total).then_some(total)))
}

/// The call result of an ended task, from its `result.json`; when that
/// cannot be read, the record's summary and error with a pointer to the
/// file.
pub(crate) fn completed(
    store: &ArtifactStore,
    principal: &Principal,
    record: &TaskRecord,
    limit: usize,
) -> CallToolResult {
    let saved = match read_saved(store.view(principal), &record.id) {
        Ok(Saved::Whole(text)) => serde_json::from_str::<Value>(&text).ok(),
        _ => None,
    };
    match saved {
        Some(value) => {
            let typed = TaskResult::from_json(&value);
            // A guard task: the answer its plain call returns.
            let answer = typed
                .as_ref()
                .ok()
                .and_then(|typed| typed.answer.clone())
                .and_then(|answer| serde_json::from_value::<CallToolResult>(answer).ok());
            if let Some(answer) = answer {
                return answer;
            }
            let success = SavedHead::of(&value).succeeded();
            // Its files, read through the type (a result this version
            // cannot read as one gets no links or images).
            let mut answer = match typed {
                Ok(typed) => task_answer(store.view(principal), Some(value), typed, success, limit),
                Err(_) => Answer::plain(if success {
                    CallToolResult::structured(value)
                } else {
                    CallToolResult::structured_error(value)
                }),
            };
            answer.whole = Some(Whole::result_of(&record.id));
            crate::bound::bounded_kept(answer, limit)
        }
        None => CallToolResult::structured_error(json!({
            "status": record.state.as_str(), "task_id": record.id, "summary": record.summary,
            "error": record.error,
            "note": "the full result could not be read inline: read result.json with read_artifact",
        })),
    }
}

/// A task result's answer (see [`crate::bound`]): its value structured
/// (an error unless `success`), with the receipt hashes cut as
/// [`TaskResult::into_answer`] cuts them (`saved`, the result as
/// `result.json` holds it, is sent as saved when nothing is cut); then its
/// PNG charts inline (while the answer stays within the smaller of
/// [`MAX_INLINE_RESULT_BYTES`] and the answer bound `limit`; read through
/// the owner's view, so from the object store on a node that did not run
/// the task) and a link per artifact. Its `result.json` holds the whole.
pub(crate) fn task_answer(
    store: warden_calls::artifacts::View<'_>,
    saved: Option<Value>,
    task: TaskResult,
    success: bool,
    limit: usize,
) -> Answer {
    let links = crate::resources::links(&task);
    let listed = TaskResult {
        task_id: task.task_id.clone(),
        artifacts: task.artifacts.clone(),
        ..TaskResult::bare(task.status)
    };
    let whole = task.task_id.as_deref().map(Whole::result_of);
    let status = task.status;
    let (shown, cuts) = task.into_answer();
    let value = match saved {
        Some(saved) if cuts.is_empty() => saved,
        _ => shown,
    };
    let cap = MAX_INLINE_RESULT_BYTES.min(limit.saturating_sub(ANSWER_ENVELOPE_BYTES));
    let images = crate::resources::images(store, &listed, warden_core::answer::size(&value), cap);
    let mut result = if success {
        CallToolResult::structured(value)
    } else {
        CallToolResult::structured_error(value)
    };
    result.content.extend(images);
    result.content.extend(links);
    Answer {
        result,
        whole,
        cuts,
        fixed_schema: false,
        status,
    }
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => {
            let mut map = JsonObject::new();
            map.insert("value".into(), other);
            map
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ClientCapabilities, MetaObject, ProtocolVersion, RequestMetaObject};

    fn meta(value: Value) -> RequestMetaObject {
        match value {
            Value::Object(map) => RequestMetaObject(MetaObject(map)),
            _ => RequestMetaObject::default(),
        }
    }

    #[test]
    fn only_a_request_that_asks_gets_a_task() {
        // Declaring the extension is not asking (the Inspector's 2025-11-25 session); the
        // warden/task key, a TTL, or 2026-07-28 per-request capabilities ask.
        let none = meta(json!({}));
        assert!(!asks_for_task(&none, true).unwrap());
        assert!(asks_for_task(&meta(json!({TASK_META_KEY: true})), true).unwrap());
        assert!(asks_for_task(&meta(json!({TASK_META_KEY: {}})), true).unwrap());
        assert!(asks_for_task(&meta(json!({TTL_META_KEY: 5000})), true).unwrap());
        assert!(!asks_for_task(&meta(json!({TASK_META_KEY: true})), false).unwrap());
        let mut stateless = RequestMetaObject::default();
        stateless.set_protocol_version(ProtocolVersion::V_2026_07_28);
        stateless.set_client_capabilities(ClientCapabilities::builder().enable_tasks().build());
        assert!(asks_for_task(&stateless, true).unwrap());
        stateless.insert(TASK_META_KEY.into(), json!(false));
        assert!(!asks_for_task(&stateless, true).unwrap());
        let error = asks_for_task(&meta(json!({TASK_META_KEY: "yes"})), true).unwrap_err();
        assert!(error.message.contains(TASK_META_KEY), "{}", error.message);
    }
}
