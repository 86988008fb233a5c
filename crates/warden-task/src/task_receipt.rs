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

use crate::receipt::{AppIdentity, Hasher, Provenance, TASK_RECEIPT_FORMAT, WARDEN_VERSION};

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
}

/// The receipt of the task in `dir`, whose calls the worker's call log
/// counted and digested.
pub fn build(
    dir: &Path,
    provenance: Provenance,
    model: Option<String>,
    calls: usize,
    calls_sha256: String,
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
        artifacts: hash_files(dir, crate::artifacts::OUTPUTS_DIR),
    }
}

/// Every regular file under `dir/sub`, sorted by path (never through a
/// link: a task directory holds only what the server wrote, but a
/// receipt must not follow anything out of it).
fn hash_files(dir: &Path, sub: &str) -> Vec<FileHash> {
    let mut found = Vec::new();
    walk(&dir.join(sub), sub, &mut found);
    found.sort_by(|a, b| a.path.cmp(&b.path));
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
