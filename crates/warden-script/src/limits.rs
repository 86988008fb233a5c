//! The limits the script layer enforces: the Rhai engine's budgets, the
//! script worker's line cap and artifact size, charts and reports,
//! `map_call`, the calls recorded per task and the journal a paused task
//! carries.
//!
//! None is an operator setting (the script's tunable budgets, its
//! deadline and argument cap, belong to the executor's and the task
//! runner's parts). The rule of every crate's `limits` module is in
//! [`warden_core::limits`].

/// Largest journal a detached task carries while it waits for the person:
/// 4 MiB of JSON (every guard call before the question, with its reply;
/// see `warden_script::host::journal`). It lives in the task's record (a
/// PostgreSQL row for a cluster), so it is bounded like one: a run whose
/// journal is larger cannot pause and fails naming this limit. No
/// override: return less from the calls before the question, or write
/// large data to artifacts.
pub const MAX_JOURNAL_BYTES: usize = 4 * 1024 * 1024;

/// Rhai operations per script run: 500,000,000. Hitting it ends the script
/// with a `limit` error. Not a time bound: the deadline is enforced separately.
pub const SCRIPT_MAX_OPERATIONS: u64 = 500_000_000;

/// Nested function calls in a script: 64 (`limit` error: stack overflow).
pub const SCRIPT_MAX_CALL_LEVELS: usize = 64;

/// Expression nesting: 64 at top level, 32 inside functions (parse error).
pub const SCRIPT_MAX_EXPR_DEPTHS: (usize, usize) = (64, 32);

/// Longest string a script may build: 4 MiB (`limit` error). Per string,
/// not total: total memory is bounded by the worker's RLIMIT_AS.
pub const SCRIPT_MAX_STRING_BYTES: usize = 4 * 1024 * 1024;

/// Largest array: 200,000 items; largest object map: 10,000 keys.
/// Rhai re-measures a container on every insert, so growth is quadratic:
/// keep tables to tens of thousands of rows (aggregate in guards instead).
pub const SCRIPT_MAX_ARRAY_ITEMS: usize = 200_000;

/// See [`SCRIPT_MAX_ARRAY_ITEMS`].
pub const SCRIPT_MAX_MAP_KEYS: usize = 10_000;

/// Variables alive at once in a script scope: 10,000.
pub const SCRIPT_MAX_VARIABLES: usize = 10_000;

/// Printed output kept per script run: 64 KiB; the rest is dropped and the
/// result says `output_truncated: true`.
pub const SCRIPT_MAX_OUTPUT_BYTES: usize = 64 * 1024;

/// Largest file `write_artifact` accepts: 1 MiB decoded (`artifact_too_large`).
pub const DEFAULT_MAX_ARTIFACT_BYTES: usize = 1024 * 1024;

/// Inline pure calls per task recorded one by one in events.jsonl: 1,000
/// (a `function_call_started` and a `function_call_finished` each, like
/// any call). Beyond it, each batch of up to 1,024 calls the script worker
/// reports becomes one `pure_calls_summarized` record — calls, failed,
/// counts per function and per error type, total duration — in both event
/// logs. function_calls.json and, when tracing, spans still keep every
/// call. Why: two ~390-byte records per call let one 100,000-call loop add
/// 78 MB to each event log and cost the
/// server more than the calls themselves cost the worker.
pub const DEFAULT_PURE_CALLS_DETAILED: usize = 1_000;

/// How long after a task's deadline the server waits for the script worker
/// to stop itself (with a classified `timeout` error) before killing its
/// process group: 50 ms. The task never answers later than deadline + this.
pub const SCRIPT_KILL_GRACE: std::time::Duration = std::time::Duration::from_millis(50);

/// How long each side of a script's pipe polls for the other's next
/// message before its read blocks: 50 µs. A guard call through the door
/// takes the server a few microseconds and a script loop reaches its next
/// call in a few more, so both sides usually find the message while still
/// polling and neither CPU halts; a sleeping reader must be woken, which on
/// the VM this was measured on cost most of a 20 µs door call (see
/// `warden_sandbox::pipe`). A longer guard call or script computation costs
/// each side at most this much CPU per message before it sleeps.
pub const DOOR_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// Room for a script worker's message around its payload: 64 KiB (message
/// type, guard name, artifact filename and encoding).
pub const WORKER_LINE_ENVELOPE_BYTES: usize = 64 * 1024;

/// Longest line the server reads from a script worker, for a server whose
/// argument cap is `max_argument_bytes`: what the largest legitimate message
/// needs, plus [`WORKER_LINE_ENVELOPE_BYTES`]. That is a guard call with
/// arguments at the cap, or a `write_artifact` of
/// [`DEFAULT_MAX_ARTIFACT_BYTES`] in the worst JSON escaping (6 bytes per
/// byte, `\u0001`; base64 needs only 4 per 3), whichever is larger: 8,065,536
/// bytes with the defaults. A longer line is read no further than this:
/// the rest is skipped, and a guard call or artifact write gets a catchable
/// `arguments_too_large` / `artifact_too_large` reply; any other message
/// ends the run with the reason. Does not cap what the server sends back.
pub fn worker_line_cap(max_argument_bytes: usize) -> usize {
    max_argument_bytes.max(6 * DEFAULT_MAX_ARTIFACT_BYTES) + WORKER_LINE_ENVELOPE_BYTES
}

/// Guard calls recorded one by one in a task's `function_calls.json`:
/// 10,000 (about 1.2 MB). Later calls are counted into one closing
/// `{"summarized": …}` record (calls, failed, per function, per error type,
/// total duration), so the file stays valid JSON and its counts stay right
/// however long a script loops. Does not limit the calls themselves.
pub const DEFAULT_CALLS_RECORDED: usize = 10_000;

// ---- charts ----
// Script charts (`line_chart`, `bar_chart`, `scatter_chart`, `heatmap`,
// rendered by `crate::worker::charts` inside the script worker). A chart
// that breaks one of these is refused with a catchable script error
// (`chart_too_large`, naming the option or `rows`) before anything is
// drawn. A written chart or report is one file like any write_artifact:
// it counts against DEFAULT_MAX_ARTIFACT_BYTES, DEFAULT_TASK_MAX_FILES and
// DEFAULT_TASK_MAX_BYTES; none of the constants below bound those.

/// Default chart size when `width`/`height` are not given: 800 × 500 pixels.
pub const CHART_DEFAULT_WIDTH: u32 = 800;

/// See [`CHART_DEFAULT_WIDTH`].
pub const CHART_DEFAULT_HEIGHT: u32 = 500;

/// Smallest `width`/`height`: 200 × 150 pixels. Below it axes and title do
/// not fit; a smaller value is refused (`invalid_input`), not enlarged.
pub const CHART_MIN_WIDTH: u32 = 200;

/// See [`CHART_MIN_WIDTH`].
pub const CHART_MIN_HEIGHT: u32 = 150;

/// Largest `width`/`height`: 2,400 pixels each (a 2,400 × 2,400 RGB canvas
/// is 17 MB of worker memory while it is drawn). Larger is refused with
/// `chart_too_large`. Does not bound the encoded file, which is capped by
/// the artifact size limit (a noisy full-size PNG can exceed it:
/// write_artifact then fails with `artifact_too_large`).
pub const CHART_MAX_SIDE_PX: u32 = 2_400;

/// Points per chart, all series together (line and scatter points, bars):
/// 20,000. More is refused with `chart_too_large` on `rows`; aggregate or
/// sample first. Rows without a value are not points and do not count.
pub const CHART_MAX_POINTS: usize = 20_000;

/// Cells of a heatmap (distinct x values × distinct y values): 10,000
/// (e.g. 100 × 100). More is refused with `chart_too_large` on `rows`.
/// Empty cells of the grid count too: it is the grid that is drawn.
pub const CHART_MAX_HEATMAP_CELLS: usize = 10_000;

/// Series in one chart (y columns × `series` groups): 12. Beyond it the
/// colours repeat and the legend hides the plot, so it is refused
/// (`chart_too_large` on `series` or `y`).
pub const CHART_MAX_SERIES: usize = 12;

/// Characters in a title or axis label: 200 (`invalid_input`). Category
/// labels of a bar chart are cut to 40 characters instead, with "…".
pub const CHART_MAX_LABEL_CHARS: usize = 200;

/// Sections in one `report(...)`: 100; rows shown per table section: 500
/// (the rest is left out with a note saying how many). The page is one
/// artifact, so it is also bounded by the artifact size limit.
pub const REPORT_MAX_SECTIONS: usize = 100;

/// See [`REPORT_MAX_SECTIONS`].
pub const REPORT_MAX_TABLE_ROWS: usize = 500;

/// Items in one `map_call(name, items)`: 1,000. The items of a guard that
/// is not pure travel in one door message and count once against the door
/// budget; each is still a full guard call (validation, events,
/// function_calls.json, its own timeout). A longer list is refused with a
/// catchable `invalid_input` on `items` before any item runs: split it.
/// Does not bound the message size (the worker line cap does).
pub const MAX_MAP_CALL_ITEMS: usize = 1_000;
