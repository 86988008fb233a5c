//! The artifact store: one directory per task under the artifacts root.
//!
//! The server is its only writer. Task ids are `task_` + 32 hex digits and
//! are validated before any path is built; files are opened through
//! [`safe_path`], which refuses absolute names, `..` and symbolic links at
//! every component.

pub mod chunk;
pub mod safe_path;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::error::GuardError;
pub use chunk::Encoding;

/// Task directory layout.
pub const OUTPUTS_DIR: &str = "outputs";

#[derive(Debug, Clone)]
pub struct ArtifactStore {
    root: PathBuf,
    /// Task directories kept; older ones are deleted when a task is created.
    keep: usize,
}

impl ArtifactStore {
    /// A store under `root` keeping the newest `keep` task directories.
    pub fn new(root: impl Into<PathBuf>, keep: usize) -> Self {
        Self {
            root: root.into(),
            keep: keep.max(1),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Creates a new, empty task directory with its `outputs/`.
    pub fn create_task(&self) -> Result<(String, PathBuf), GuardError> {
        let task_id = format!("task_{}", uuid::Uuid::new_v4().simple());
        let dir = self.root.join(&task_id);
        std::fs::create_dir_all(dir.join(OUTPUTS_DIR)).map_err(|e| {
            GuardError::failed(format!(
                "cannot create task directory under {}: {e}; set WARDEN_ARTIFACTS_DIR to a writable directory",
                self.root.display()
            ))
        })?;
        self.prune(&task_id);
        Ok((task_id, dir))
    }

    /// Deletes the oldest task directories beyond the retention limit.
    /// A task without `result.json` may still be running: it is kept until
    /// it is an hour old (longer than any task may run). Failures are
    /// ignored: retention must not fail a task.
    fn prune(&self, current: &str) {
        let running_grace = std::time::Duration::from_secs(3600);
        for old in self
            .task_ids()
            .iter()
            .skip(self.keep)
            .filter(|id| id.as_str() != current)
        {
            let dir = self.root.join(old);
            let finished = dir.join("result.json").exists();
            let age = std::fs::metadata(&dir)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .unwrap_or_default();
            if finished || age > running_grace {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }

    /// The directory of an existing task, after validating the id.
    pub fn task_dir(&self, task_id: &str) -> Result<PathBuf, GuardError> {
        let valid = task_id
            .strip_prefix("task_")
            .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
        if !valid {
            return Err(GuardError::invalid_input(
                "task_id",
                format!(
                    "'{task_id}' is not a task id (expected 'task_' followed by 32 hex digits, as returned by run_script or list_tasks)"
                ),
            ));
        }
        let dir = self.root.join(task_id);
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => Ok(dir),
            Ok(_) => Err(GuardError::invalid_input(
                "task_id",
                "task directory is a link or not a directory",
            )),
            Err(_) => Err(GuardError::new(
                "not_found",
                format!("task_id: no task '{task_id}'; call list_tasks to see existing tasks"),
            )),
        }
    }

    /// Writes a file the server produces (result.json, actions, logs).
    pub fn write_task_file(&self, task_id: &str, name: &str, bytes: &[u8]) -> Result<(), GuardError> {
        let dir = self.task_dir(task_id)?;
        let parts = safe_path::components("filename", name)?;
        let mut file = safe_path::open_write(&dir, "filename", &parts)?;
        file.write_all(bytes)
            .map_err(|e| GuardError::failed(format!("write {name}: {e}")))
    }

    /// `write_artifact` from a script: a file under `outputs/`, capped.
    pub fn write_output(
        &self,
        task_id: &str,
        filename: &str,
        bytes: &[u8],
        cap: usize,
    ) -> Result<u64, GuardError> {
        if bytes.len() > cap {
            return Err(GuardError::new(
                "artifact_too_large",
                format!(
                    "filename: '{filename}' is {} bytes; the limit is {cap} bytes per file",
                    bytes.len()
                ),
            ));
        }
        let parts = safe_path::components("filename", filename)?;
        let dir = self.task_dir(task_id)?.join(OUTPUTS_DIR);
        let mut file = safe_path::open_write(&dir, "filename", &parts)?;
        file.write_all(bytes)
            .map_err(|e| GuardError::failed(format!("write {filename}: {e}")))?;
        Ok(bytes.len() as u64)
    }

    /// `read_written_artifact` from a script: a whole file under `outputs/`.
    pub fn read_output(&self, task_id: &str, filename: &str, cap: usize) -> Result<String, GuardError> {
        let parts = safe_path::components("filename", filename)?;
        let dir = self.task_dir(task_id)?.join(OUTPUTS_DIR);
        let mut file = safe_path::open_read(&dir, "filename", &parts)?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let chunk = chunk::read_chunk(&mut file, size, 0, cap, Encoding::Utf8)?;
        Ok(chunk.content)
    }

    /// One chunk of a task file (`read_artifact`).
    pub fn read(
        &self,
        task_id: &str,
        filename: &str,
        offset: u64,
        max_bytes: usize,
        encoding: Encoding,
    ) -> Result<Value, GuardError> {
        let dir = self.task_dir(task_id)?;
        let parts = safe_path::components("filename", filename)?;
        let mut file = safe_path::open_read(&dir, "filename", &parts)?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let chunk = chunk::read_chunk(&mut file, size, offset, max_bytes, encoding)?;
        Ok(json!({
            "task_id": task_id,
            "filename": filename,
            "encoding": encoding,
            "content": chunk.content,
            "size_bytes": chunk.size_bytes,
            "offset": offset,
            "next_offset": chunk.next_offset,
        }))
    }

    /// Files of a task (relative names, sorted), skipping links.
    pub fn files(&self, task_id: &str) -> Result<Vec<(String, u64)>, GuardError> {
        let dir = self.task_dir(task_id)?;
        let mut found = Vec::new();
        walk(&dir, "", &mut found);
        found.sort();
        Ok(found)
    }

    /// Task ids, newest first.
    pub fn task_ids(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut tasks: Vec<(std::time::SystemTime, String)> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().to_string();
                let meta = entry.path().symlink_metadata().ok()?;
                (name.starts_with("task_") && meta.is_dir())
                    .then(|| (meta.modified().unwrap_or(std::time::UNIX_EPOCH), name))
            })
            .collect();
        tasks.sort_by(|a, b| b.cmp(a));
        tasks.into_iter().map(|(_, name)| name).collect()
    }
}

fn walk(dir: &Path, prefix: &str, found: &mut Vec<(String, u64)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        if meta.is_dir() {
            walk(&entry.path(), &format!("{name}/"), found);
        } else if meta.is_file() {
            found.push((name, meta.len()));
        }
    }
}

/// A MIME type from the file extension, for list_artifacts.
pub fn mime_type(name: &str) -> &'static str {
    match name.rsplit('.').next().unwrap_or("") {
        "csv" => "text/csv",
        "json" => "application/json",
        "jsonl" => "application/x-ndjson",
        "txt" | "rhai" | "log" => "text/plain",
        "md" => "text/markdown",
        "html" => "text/html",
        "png" => "image/png",
        "svg" => "image/svg+xml",
        _ => "application/octet-stream",
    }
}
