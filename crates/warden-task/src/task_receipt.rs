//! A task's receipt: what a script task ran and made, as hashes.
//!
//! Beside each call's hashes in function_calls.json (see
//! `warden_script::host::calls`), a task that ran scripts carries one
//! receipt in its result: the SHA-256 of every script it ran (a coding
//! task's blocks, in order, with the model that wrote them), the count and
//! digest of every guard call (`calls_sha256`, which covers the calls
//! summarized after the first `DEFAULT_CALLS_RECORDED` too), and the
//! SHA-256 and size of every file under `outputs/`. With the app, build
//! and Warden versions, that is what a second run must match to be the
//! same computation. The format is documented in `docs/receipts.md`.

use std::path::Path;

use serde::{Deserialize, Serialize};

use warden_core::receipt::{AppIdentity, Hasher, Provenance, TASK_RECEIPT_FORMAT, WARDEN_VERSION};

/// Where a task keeps the scripts it ran, one file per run.
pub const SCRIPTS_DIR: &str = "agent_actions";

/// One file's hash and size, by its path in the task directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileHash {
    pub path: String,
    pub sha256: String,
    pub size: u64,
}

/// See the module doc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskReceipt {
    /// `warden.task-receipt/1`.
    pub format: String,
    pub app: AppIdentity,
    pub warden_version: String,
    pub build: String,
    /// Every script run, in the order run.
    pub scripts: Vec<FileHash>,
    /// The model that wrote the scripts (a coding task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Guard calls made.
    pub calls: usize,
    /// SHA-256 over every call's digest line, in the order they settled.
    pub calls_sha256: String,
    /// Every file under `outputs/`, by path.
    pub artifacts: Vec<FileHash>,
    /// The per-task limits the scripts ran under, so that a replay runs
    /// under the same ones (absent in receipts recorded before they were
    /// kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<RunLimits>,
    /// The person's answers a detached task waited for, in the order
    /// given: who, what exactly (the guard and the arguments' SHA-256, or
    /// the plan), for which script and build, and when (see
    /// `warden_core::approval`). Absent when nobody was asked that way.
    /// Bounded by the calls it could make: one record per destructive call
    /// (or plan) answered, so at most [`RunLimits::door_calls`] (10,000 for
    /// a `run_script`, 100 for a coding task) plus its plan; a task that
    /// waited carries them in its journal, within
    /// [`warden_script::limits::MAX_JOURNAL_BYTES`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<warden_core::approval::ApprovalRecord>,
}

/// The per-task limits a task's scripts ran under: its deadline and its
/// call budgets, shared by all its scripts (a coding task's blocks spend
/// one budget between them). Kept in the receipt because they change what
/// a run can do: a script that timed out at 1 s must time out again when
/// replayed, not run for the server's maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunLimits {
    /// The task's timeout from its start, in milliseconds: its deadline.
    pub timeout_ms: u64,
    /// Guard calls through the door (isolated and in-process guards; a
    /// `map_call` counts once) its scripts could make in all.
    pub door_calls: u64,
    /// Inline calls (pure guards, script-only functions) its scripts
    /// could make in all; `None`: not counted (a `run_script`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_calls: Option<u64>,
}

impl RunLimits {
    /// A `run_script` task's: `timeout`, and
    /// [`crate::limits::DEFAULT_SCRIPT_DOOR_CALLS`] door calls.
    pub fn script(timeout: std::time::Duration) -> Self {
        Self {
            timeout_ms: duration_ms(timeout),
            door_calls: crate::limits::DEFAULT_SCRIPT_DOOR_CALLS,
            inline_calls: None,
        }
    }

    /// A coding task's: `timeout`,
    /// [`crate::limits::AGENT_MAX_GUARD_CALLS`] door calls and
    /// `inline_calls` inline ones (`WARDEN_AGENT_MAX_INLINE_CALLS`).
    pub fn coding(timeout: std::time::Duration, inline_calls: u64) -> Self {
        Self {
            timeout_ms: duration_ms(timeout),
            door_calls: crate::limits::AGENT_MAX_GUARD_CALLS,
            inline_calls: Some(inline_calls),
        }
    }

    /// The timeout as a duration.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.timeout_ms)
    }
}

fn duration_ms(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The receipt of the task in `dir`, whose calls the worker's call log
/// counted and digested.
pub fn build(
    dir: &Path,
    provenance: Provenance,
    model: Option<String>,
    limits: RunLimits,
    calls: usize,
    calls_sha256: String,
    approvals: Vec<warden_core::approval::ApprovalRecord>,
) -> TaskReceipt {
    TaskReceipt {
        format: TASK_RECEIPT_FORMAT.into(),
        app: provenance.app,
        warden_version: WARDEN_VERSION.into(),
        build: provenance.build,
        scripts: hash_files(dir, SCRIPTS_DIR),
        model,
        calls,
        calls_sha256,
        artifacts: hash_files(dir, warden_calls::artifacts::OUTPUTS_DIR),
        limits: Some(limits),
        approvals,
    }
}

/// Every regular file under `dir/sub`, sorted by path (never through a
/// link: a task directory holds only what the server wrote, but a
/// receipt must not follow anything out of it).
fn hash_files(dir: &Path, sub: &str) -> Vec<FileHash> {
    let mut found = Vec::new();
    walk(&dir.join(sub), sub, &mut found);
    found.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    found
}

fn walk(dir: &Path, relative: &str, found: &mut Vec<FileHash>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else { continue };
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = format!("{relative}/{name}");
        if kind.is_dir() {
            walk(&entry.path(), &path, found);
        } else if kind.is_file()
            && let Some((sha256, size)) = hash_file(&entry.path())
        {
            found.push(FileHash { path, sha256, size });
        }
    }
}

fn hash_file(path: &Path) -> Option<(String, u64)> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path).ok()?;
    let mut hasher = Hasher::default();
    let mut buffer = vec![0; 64 * 1024];
    let mut size = 0u64;
    loop {
        let read = file.read(&mut buffer).ok()?;
        if read == 0 {
            return Some((hasher.finish(), size));
        }
        size += read as u64;
        hasher.update(&buffer[..read]);
    }
}
