//! The artifact store: one directory per task under the artifacts root.
//!
//! The server is its only writer. Task ids are `task_` + 32 hex digits and
//! are validated before any path is built; the task directory is opened
//! from a held descriptor of the root without following a link, and every
//! file in it through [`safe_path`] relative to that descriptor, refusing
//! absolute names, `..`, control characters and links at every component.
//! What a script writes is bounded by [`quota`]; what the store keeps, by
//! [`retention`] on its own thread; tasks a dead server left are found
//! through [`owner`].

pub mod chunk;
pub mod owner;
pub mod quota;
pub mod retention;
pub mod safe_path;

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};

use crate::error::GuardError;
use crate::limits::Limits;
pub use chunk::Encoding;
use quota::{Quota, Usage};
use retention::{Entry, Policy, Pruner};

/// Task directory layout.
pub const OUTPUTS_DIR: &str = "outputs";
/// The saved task result.
pub const RESULT_FILE: &str = "result.json";

#[derive(Clone)]
pub struct ArtifactStore {
    root: PathBuf,
    policy: Policy,
    quota: Quota,
    /// Usage of the tasks this server is running, by id: inserted by
    /// [`ArtifactStore::create_task`], removed by [`ArtifactStore::end_task`].
    /// A task in here is never pruned.
    running: Arc<Mutex<HashMap<String, Arc<Mutex<Usage>>>>>,
    /// The retention thread; started by the first task.
    pruner: Arc<Pruner>,
}

impl std::fmt::Debug for ArtifactStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArtifactStore")
            .field("root", &self.root)
            .field("policy", &self.policy)
            .field("quota", &self.quota)
            .finish()
    }
}

impl ArtifactStore {
    /// A store under `root` keeping the newest `keep` task directories,
    /// with the default quotas and budgets (see [`ArtifactStore::with_limits`]).
    pub fn new(root: impl Into<PathBuf>, keep: usize) -> Self {
        let defaults = Limits::default();
        Self {
            root: root.into(),
            policy: Policy {
                keep: keep.max(1),
                max_bytes: defaults.store_max_bytes,
                max_age: defaults.tasks_max_age,
            },
            quota: Quota {
                max_files: defaults.task_max_files,
                max_bytes: defaults.task_max_bytes,
            },
            running: Arc::default(),
            pruner: Arc::default(),
        }
    }

    #[cfg(feature = "http")]
    /// Whether the store takes a write now (`/readyz`): creates, writes
    /// and removes a probe file in the root, without following links.
    pub fn probe_writable(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.root)?;
        let probe = self.root.join(format!(".ready-{}", std::process::id()));
        let written = safe_path::create_private(&probe)
            .and_then(|mut file| std::io::Write::write_all(&mut file, b"ok"));
        let removed = std::fs::remove_file(&probe);
        written.and(removed)
    }

    /// Takes the task quotas and store budgets from `limits`.
    pub fn with_limits(mut self, limits: &Limits) -> Self {
        self.policy = Policy {
            keep: limits.tasks_kept.max(1),
            max_bytes: limits.store_max_bytes,
            max_age: limits.tasks_max_age,
        };
        self.quota = Quota {
            max_files: limits.task_max_files,
            max_bytes: limits.task_max_bytes,
        };
        self
    }

    /// Creates a new, empty task directory (0700) with its `outputs/` and
    /// `owner.json`, and asks the retention thread for a pass.
    pub fn create_task(&self) -> Result<(String, PathBuf), GuardError> {
        let task_id = format!("task_{}", uuid::Uuid::new_v4().simple());
        let cannot = |e: &dyn std::fmt::Display| {
            GuardError::failed(format!(
                "cannot create task directory under {}: {e}; set WARDEN_ARTIFACTS_DIR to a writable directory",
                self.root.display()
            ))
        };
        std::fs::create_dir_all(&self.root).map_err(|e| cannot(&e))?;
        let root = safe_path::open_root(&self.root)?;
        let mode = nix::sys::stat::Mode::from_bits_truncate(safe_path::DIR_MODE);
        nix::sys::stat::mkdirat(&root, task_id.as_str(), mode).map_err(|e| cannot(&e))?;
        let dir = safe_path::open_dir_at(&root, "task_id", &task_id)?;
        nix::sys::stat::mkdirat(&dir, OUTPUTS_DIR, mode).map_err(|e| cannot(&e))?;
        let owner = owner::this_process().to_string();
        safe_path::write_atomic_at(&dir, "filename", &[owner::OWNER_FILE], owner.as_bytes(), false)?;
        // The task's event log is appended by the events module; created
        // here so it is private like everything else in the directory.
        let _ = safe_path::create_log_at(&dir, "events.jsonl");
        lock(&self.running).insert(task_id.clone(), Arc::default());
        self.request_prune();
        Ok((task_id.clone(), self.root.join(task_id)))
    }

    /// Forgets a task's usage: it is no longer running here.
    pub fn end_task(&self, task_id: &str) {
        lock(&self.running).remove(task_id);
    }

    /// Asks the retention thread for a pass; never waits for it.
    pub fn request_prune(&self) {
        let store = self.clone();
        self.pruner.request(move || store);
    }

    /// One retention pass (on the retention thread).
    fn prune(&self) {
        let running: Vec<String> = lock(&self.running).keys().cloned().collect();
        let Ok(root) = safe_path::open_root(&self.root) else {
            return;
        };
        let mut entries = Vec::new();
        for id in self.task_ids() {
            let Ok(meta) = std::fs::symlink_metadata(self.root.join(&id)) else {
                continue;
            };
            let finished = safe_path::open_dir_at(&root, "task_id", &id)
                .map(|dir| {
                    nix::sys::stat::fstatat(&dir, RESULT_FILE, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
                        .is_ok()
                })
                .unwrap_or(true);
            let running_here = running.contains(&id);
            let bytes = if running_here || !finished {
                0
            } else {
                self.pruner.size_of(&id, &self.root.join(&id))
            };
            entries.push(Entry {
                age: retention::age(&meta),
                id,
                finished,
                running_here,
                bytes,
            });
        }
        for id in retention::doomed(&entries, self.policy) {
            self.pruner.remove(&self.root, &id);
        }
        // Leftovers of a pass a crash interrupted.
        if let Ok(listing) = std::fs::read_dir(&self.root) {
            for entry in listing.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with(retention::TRASH_PREFIX) {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
    }

    /// Marks `interrupted` every task a dead server left running: no
    /// `result.json`, and an owner that is gone (or no owner file and
    /// older than a minute). Called once when a server opens the store;
    /// also asks for a retention pass, so a store over its budgets is
    /// trimmed without waiting for a task. Returns the ids marked.
    pub fn mark_interrupted(&self) -> Vec<String> {
        let marked = self.mark_dead_tasks();
        self.request_prune();
        marked
    }

    fn mark_dead_tasks(&self) -> Vec<String> {
        let mut marked = Vec::new();
        let Ok(root) = safe_path::open_root(&self.root) else {
            return marked;
        };
        let running: Vec<String> = lock(&self.running).keys().cloned().collect();
        for id in self.task_ids() {
            if running.contains(&id) {
                continue;
            }
            let Ok(dir) = safe_path::open_dir_at(&root, "task_id", &id) else {
                continue;
            };
            let at = nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW;
            if nix::sys::stat::fstatat(&dir, RESULT_FILE, at).is_ok() {
                continue;
            }
            let owner = safe_path::open_read_at(&dir, "filename", &[owner::OWNER_FILE])
                .ok()
                .and_then(|f| serde_json::from_reader::<_, Value>(std::io::Read::take(f, 4096)).ok());
            let dead = match &owner {
                Some(owner) => !owner::alive(owner),
                None => std::fs::symlink_metadata(self.root.join(&id))
                    .map(|m| retention::age(&m) > std::time::Duration::from_secs(60))
                    .unwrap_or(false),
            };
            if !dead {
                continue;
            }
            let result = json!({
                "status": "failed", "task_type": "failed", "task_id": id,
                "summary": "interrupted: the server running this task stopped before it finished",
                "metrics": {}, "assumptions": [],
                "error": crate::error::TaskError::new(
                    crate::error::TaskErrorKind::Interrupted,
                    "the server process that ran this task is gone",
                ),
                "owner": owner,
            });
            let bytes = serde_json::to_vec_pretty(&result).unwrap_or_default();
            if safe_path::write_atomic_at(&dir, "filename", &[RESULT_FILE], &bytes, true).is_ok() {
                marked.push(id);
            }
        }
        marked
    }

    fn check_id(task_id: &str) -> Result<(), GuardError> {
        let valid = task_id
            .strip_prefix("task_")
            .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
        if valid {
            return Ok(());
        }
        Err(GuardError::invalid_input(
            "task_id",
            format!(
                "'{task_id}' is not a task id (expected 'task_' followed by 32 hex digits, as returned by run_script or list_tasks)"
            ),
        ))
    }

    /// Opens an existing task directory after validating the id: from a
    /// held descriptor of the root, never following a link. Every other
    /// open of the task goes through the returned descriptor.
    pub fn open_task(&self, task_id: &str) -> Result<OwnedFd, GuardError> {
        Self::check_id(task_id)?;
        let root = safe_path::open_root(&self.root)?;
        nix::fcntl::openat(
            &root,
            task_id,
            nix::fcntl::OFlag::O_RDONLY
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_NOFOLLOW
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| match e {
            nix::Error::ENOENT => GuardError::new(
                crate::error::codes::NOT_FOUND,
                format!("task_id: no task '{task_id}'; call list_tasks to see existing tasks"),
            ),
            nix::Error::ELOOP | nix::Error::ENOTDIR => GuardError::invalid_input(
                "task_id",
                "the task directory is a link or not a directory; links are refused",
            ),
            other => GuardError::failed(format!("task_id: cannot open task '{task_id}': {other}")),
        })
    }

    /// The path of an existing task directory, after checking that it is a
    /// real directory (for display, and for callers that open by path with
    /// [`safe_path::open_read`], which refuses a link there too).
    pub fn task_dir(&self, task_id: &str) -> Result<PathBuf, GuardError> {
        self.open_task(task_id)?;
        Ok(self.root.join(task_id))
    }

    /// Writes a file the server produces (actions, registry), atomically.
    pub fn write_task_file(&self, task_id: &str, name: &str, bytes: &[u8]) -> Result<(), GuardError> {
        let dir = self.open_task(task_id)?;
        let parts = safe_path::components("filename", name)?;
        safe_path::write_atomic_at(&dir, "filename", &parts, bytes, false)
    }

    /// Writes `result.json` atomically and durably: a temporary file,
    /// fsync, rename, fsync of the directory. An error says why, so the
    /// caller can fail the task with it.
    pub fn write_result(&self, task_id: &str, bytes: &[u8]) -> Result<(), GuardError> {
        let dir = self.open_task(task_id)?;
        safe_path::write_atomic_at(&dir, "filename", &[RESULT_FILE], bytes, true)
    }

    /// `write_artifact` from a script: a file under `outputs/`, capped per
    /// file and by the task's quotas, written atomically.
    pub fn write_output(
        &self,
        task_id: &str,
        filename: &str,
        bytes: &[u8],
        cap: usize,
    ) -> Result<u64, GuardError> {
        if bytes.len() > cap {
            return Err(GuardError::new(
                crate::error::codes::ARTIFACT_TOO_LARGE,
                format!(
                    "filename: '{filename}' is {} bytes; the limit is {cap} bytes per file",
                    bytes.len()
                ),
            ));
        }
        let parts = safe_path::components("filename", filename)?;
        quota::check_name(filename, &parts)?;
        let usage = lock(&self.running).get(task_id).cloned().ok_or_else(|| {
            GuardError::failed(format!(
                "task '{task_id}' is not running here; artifacts are written only while a task runs"
            ))
        })?;
        let dir = self.open_task(task_id)?;
        let outputs = safe_path::open_dir_at(&dir, "filename", OUTPUTS_DIR)?;
        let mut usage = lock(&usage);
        let probe = safe_path::probe_at(&outputs, "filename", &parts)?;
        let new_entries = probe.new_dirs + usize::from(probe.replaced.is_none());
        let size = bytes.len() as u64;
        let replaced = probe.replaced.unwrap_or(0);
        usage.check(self.quota, new_entries, size, replaced)?;
        safe_path::write_atomic_at(&outputs, "filename", &parts, bytes, false)?;
        usage.record(filename, new_entries, size, replaced);
        Ok(size)
    }

    /// The files a running task wrote under `outputs/` (by name, with
    /// sizes), from memory; `None` when the task is not running here.
    pub fn written(&self, task_id: &str) -> Option<Vec<(String, u64)>> {
        let usage = lock(&self.running).get(task_id).cloned()?;
        let usage = lock(&usage);
        Some(usage.files.iter().map(|(n, s)| (n.clone(), *s)).collect())
    }

    /// `read_written_artifact` from a script: a whole file under `outputs/`.
    pub fn read_output(&self, task_id: &str, filename: &str, cap: usize) -> Result<String, GuardError> {
        let parts = safe_path::components("filename", filename)?;
        let dir = self.open_task(task_id)?;
        let outputs = safe_path::open_dir_at(&dir, "filename", OUTPUTS_DIR)?;
        let mut file = safe_path::open_read_at(&outputs, "filename", &parts)?;
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
        let parts = safe_path::components("filename", filename)?;
        let dir = self.open_task(task_id)?;
        let mut file = safe_path::open_read_at(&dir, "filename", &parts)?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let chunk = chunk::read_chunk(&mut file, size, offset, max_bytes, encoding)?;
        Ok(json!({
            "task_id": task_id,
            "filename": filename,
            "encoding": encoding,
            "mime_type": mime_type(filename),
            "content": chunk.content,
            "size_bytes": chunk.size_bytes,
            "offset": offset,
            "next_offset": chunk.next_offset,
        }))
    }

    /// Files of a task (relative names, sorted), skipping links and
    /// anything that is not a regular file, walked from held descriptors.
    pub fn files(&self, task_id: &str) -> Result<Vec<(String, u64)>, GuardError> {
        let dir = self.open_task(task_id)?;
        let mut found = Vec::new();
        walk(dir, "", 0, &mut found);
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

impl retention::Pass for ArtifactStore {
    fn run(&self) {
        self.prune();
    }
}

/// Lists regular files under `dir`, at most [`crate::limits::MAX_ARTIFACT_DEPTH`]
/// + 1 levels down (deeper trees were not written by the server).
fn walk(dir: OwnedFd, prefix: &str, depth: usize, found: &mut Vec<(String, u64)>) {
    use std::os::fd::AsRawFd;
    // Lists the held directory itself: /proc/self/fd/N is the open
    // directory, not a path resolved again.
    let Ok(listing) = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd())) else {
        return;
    };
    let mut subdirs = Vec::new();
    for entry in listing.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(stat) = nix::sys::stat::fstatat(&dir, name.as_str(), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
        else {
            continue;
        };
        let kind = nix::sys::stat::SFlag::from_bits_truncate(stat.st_mode) & nix::sys::stat::SFlag::S_IFMT;
        if kind == nix::sys::stat::SFlag::S_IFDIR {
            subdirs.push(name);
        } else if kind == nix::sys::stat::SFlag::S_IFREG {
            found.push((format!("{prefix}{name}"), stat.st_size as u64));
        }
    }
    if depth > crate::limits::MAX_ARTIFACT_DEPTH {
        return;
    }
    for name in subdirs {
        if let Ok(sub) = safe_path::open_dir_at(&dir, "filename", &name) {
            walk(sub, &format!("{prefix}{name}/"), depth + 1, found);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// A MIME type from the file extension (any case), for list_artifacts,
/// read_artifact, resource links and image content.
pub fn mime_type(name: &str) -> &'static str {
    let extension = name.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    match extension.as_str() {
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
