//! Warden's tasks: script runs with a task directory, events and a checked
//! result, their records and stores, and batches. Apps use the `warden`
//! facade.
//!
//! `run_script` and the coding agent both come here. A task holds a task
//! slot (separate from call slots), gets `<artifacts>/task_…/`, runs in a
//! sandboxed script worker (`warden_script::host::session`) and ends with `result.json`,
//! written by the server after the final answer passed [`contract`]: a
//! [`TaskResult`] ([`result`]), built and capped as a type.
//!
//! Records never lie: `result.json` is written atomically and durably, and
//! a failed write fails the task with the reason; a task whose request is
//! cancelled, or whose future is dropped, or that is still running when
//! the server shuts down ([`TaskRunner::shutdown`]) is recorded
//! `cancelled`. A result returned to the client stays under
//! [`warden_calls::limits::MAX_INLINE_RESULT_BYTES`]: the artifact list, `value` and an oversized
//! final answer are capped, with pointers to where the rest is.
//!
//! Every task has a record in the task store ([`store`], through
//! [`records`]): a task a request waits for gets one when it begins; a
//! task asked for as an MCP task was queued with one and is claimed by a
//! server with a free slot (`service`: the queue, leases, the heartbeat,
//! draining). When there is an object store, a finished task's files are
//! copied there before its record ends, so any node can answer for it.
//!
//! ```
//! use warden_task::{TaskResult, TaskStatus};
//!
//! // A task that did not finish is never `success`: its result says how it ended.
//! use warden_core::error::TaskErrorKind;
//! let result = TaskResult::failure(TaskStatus::TimedOut, TaskErrorKind::Timeout, "the task ran out of time");
//! assert_eq!(result.status.as_str(), "timed_out");
//! let saved: serde_json::Value = serde_json::from_slice(&result.to_bytes()).expect("JSON");
//! assert_eq!(saved["status"], "timed_out");
//! ```

#![warn(unreachable_pub)]

pub mod batch;
/// A batch run as a detached task.
mod batch_task;
/// A queued task this server claimed, handed to it explicitly.
mod claim;
mod claimed_call;
pub mod contract;
/// How tasks end: status, abnormal ends, the names of their files.
mod ending;
mod kept;
mod ledger;
pub mod limits;
mod phases;
pub mod records;
pub mod replay;
pub mod result;
/// The task runner and the one shape of every task.
mod runner;
mod running;
/// Script tasks: `run_script`, a replay's scripts.
mod script_task;
mod service;
pub mod store;
/// A task in progress and its verbs.
mod task;
pub mod task_receipt;

pub use claim::Claim;
pub use ending::{ANSWER_FILE, TaskStatus, VALUE_FILE, abnormal_end, result_dir};
pub use result::{ArtifactRef, ModelFailure, ResultError, TaskResult, TokenUsage};
pub use runner::{Ending, TaskRunner};
pub use task::{PauseError, Task};

pub use warden_script::host::calls::FUNCTION_CALLS_FILE;
pub use warden_script::host::session::WorkerFacts;
