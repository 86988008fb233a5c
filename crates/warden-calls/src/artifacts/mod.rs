//! The artifact store: one directory per task under the artifacts root.
//!
//! The server is its only writer. Task ids are `task_` + 32 hex digits and
//! are validated before any path is built; the task directory is opened
//! from a held descriptor of the root without following a link, and every
//! file in it through [`safe_path`] relative to that descriptor, refusing
//! absolute names, `..`, control characters and links at every component.
//! Every task belongs to the principal that created it ([`owner`]), and
//! every client-facing lookup goes through that principal's [`View`], in
//! which other principals' tasks do not exist. What a script writes is
//! bounded by [`quota`]; what the store keeps, by [`retention`] on its own
//! thread; tasks a dead server left are found through [`owner`].
//!
//! With a remote copy attached ([`ArtifactStore::with_remote`]: the
//! facade attaches the S3 one of `WARDEN_ARTIFACT_STORE`), a finished
//! task's files are also copied to shared storage ([`remote::RemoteCopy`])
//! so that every node can answer for every task:
//! [`ArtifactStore::upload_task`] after `result.json`, lookups through a
//! [`View`] falling back to the copy when the local directory does not
//! exist, and removal deleting both.

pub mod chunk;
pub mod owner;
pub mod quota;
pub mod remote;
pub mod retention;
pub mod safe_path;
mod shared;
mod view;
pub mod worker_log;

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use crate::limits::CallLimits;
use crate::tenant::Principal;
pub use chunk::{ChunkAnswer, Encoding};
use quota::{Quota, Usage};
pub use remote::RemoteCopy;
use retention::{Entry, Policy, Pruner};
use safe_path::Durability::{Commit, Deferred};
pub use view::View;
use warden_core::error::GuardError;

/// Task directory layout.
pub const OUTPUTS_DIR: &str = "outputs";
/// The saved task result.
pub const RESULT_FILE: &str = "result.json";
/// What a task waiting for the person keeps in its directory (the
/// question, the answers so far and the journal): while it is there and no
/// result is, the task waits rather than having lost its server.
pub const WAITING_FILE: &str = "waiting.json";

/// The URI prefix of task artifacts as MCP resources (served by
/// `mcp::resources`; app resources may not use it).
pub const URI_SCHEME: &str = warden_core::registry::ARTIFACT_URI_SCHEME;

/// Prefix of a task directory being set up: it gets its `task_…` name only
/// once its owner record is written, so no listing ever shows a task
/// without its owner.
const STAGING_PREFIX: &str = ".new-";

/// A task this server is running: whose it is and what it wrote.
#[derive(Clone)]
struct RunningTask {
    principal: Principal,
    usage: Arc<Mutex<Usage>>,
    /// Bytes under `outputs/` of all of this principal's running tasks,
    /// shared by them. Locked before `usage` (see [`ArtifactStore::write_output`]).
    principal_bytes: Arc<Mutex<u64>>,
}

#[derive(Clone)]
pub struct ArtifactStore {
    root: PathBuf,
    policy: Policy,
    quota: Quota,
    /// The tasks this server is running, by id: inserted by
    /// [`ArtifactStore::create_task`], removed by [`ArtifactStore::end_task`].
    /// A task in here is never pruned.
    running: Arc<Mutex<HashMap<String, RunningTask>>>,
    /// The retention thread; started by the first task.
    pruner: Arc<Pruner>,
    /// The remote copy of finished tasks (`WARDEN_ARTIFACT_STORE`), set
    /// once before the server starts ([`ArtifactStore::with_remote`]);
    /// shared by every clone of the store.
    remote: Option<Arc<dyn RemoteCopy>>,
}

impl std::fmt::Debug for ArtifactStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArtifactStore")
            .field("root", &self.root)
            .field("policy", &self.policy)
            .field("quota", &self.quota)
            .field("remote", &self.remote_url())
            .finish()
    }
}

impl ArtifactStore {
    /// A store under `root` keeping the newest `keep` task directories,
    /// with the default quotas and budgets (see [`ArtifactStore::with_limits`]).
    pub fn new(root: impl Into<PathBuf>, keep: usize) -> Self {
        let defaults = CallLimits::default();
        Self {
            root: root.into(),
            policy: Policy {
                keep: keep.max(1),
                max_bytes: defaults.store_max_bytes,
                max_age: defaults.tasks_max_age,
                principal_max_bytes: defaults.principal_artifact_bytes,
            },
            quota: Quota {
                max_files: defaults.task_max_files,
                max_bytes: defaults.task_max_bytes,
                principal_max_bytes: defaults.principal_artifact_bytes,
            },
            running: Arc::default(),
            pruner: Arc::default(),
            remote: None,
        }
    }

    /// Copies finished tasks to `remote` and answers from it for tasks
    /// whose local directory does not exist (see [`remote`]).
    pub fn with_remote(mut self, remote: Arc<dyn RemoteCopy>) -> Self {
        self.remote = Some(remote);
        self
    }

    /// The remote copy, if one is attached (`/readyz` probes it).
    pub fn remote(&self) -> Option<&dyn RemoteCopy> {
        self.remote.as_deref()
    }

    /// `s3://bucket/prefix` of the remote copy, if one is attached.
    pub fn remote_url(&self) -> Option<&str> {
        self.remote.as_deref().map(RemoteCopy::url)
    }

    /// Copies a finished task's files to the remote copy, `result.json`
    /// last (see [`remote`]); nothing to do without one. The runner calls
    /// it once `result.json` is written; an error says why (the store is
    /// unreachable, a file cannot be read), and the task's files stay in
    /// the local directory either way.
    pub fn upload_task(&self, task_id: &str) -> Result<(), GuardError> {
        if let Some(remote) = &self.remote {
            remote.upload_task(task_id, self.open_task(task_id)?)?;
        }
        Ok(())
    }

    /// Deletes the remote copy of a task, if there is one; a failure is
    /// logged (a removal has no caller to tell).
    fn remove_remote(&self, task_id: &str) {
        if let Some(remote) = &self.remote
            && let Err(error) = remote.remove_task(task_id)
        {
            tracing::warn!(
                task_id,
                "the object-store copy of an expired task was not deleted: {}",
                error.message
            );
        }
    }

    /// Whether the store takes a write now (`/readyz`): creates, writes
    /// and removes a probe file in the root, without following links.
    pub fn probe_writable(&self) -> std::io::Result<()> {
        safe_path::create_private_dir_all(&self.root)?;
        let probe = self.root.join(format!(".ready-{}", std::process::id()));
        let written = safe_path::create_private(&probe)
            .and_then(|mut file| std::io::Write::write_all(&mut file, b"ok"));
        let removed = std::fs::remove_file(&probe);
        written.and(removed)
    }

    /// Takes the task quotas and store budgets from `limits`.
    pub fn with_limits(mut self, limits: &CallLimits) -> Self {
        self.policy = Policy {
            keep: limits.tasks_kept.max(1),
            max_bytes: limits.store_max_bytes,
            max_age: limits.tasks_max_age,
            principal_max_bytes: limits.principal_artifact_bytes,
        };
        self.quota = Quota {
            max_files: limits.task_max_files,
            max_bytes: limits.task_max_bytes,
            principal_max_bytes: limits.principal_artifact_bytes,
        };
        self
    }

    /// Creates a new, empty task directory (0700) owned by `principal`,
    /// with its `outputs/` and `owner.json`, and asks the retention thread
    /// for a pass. The directory is set up under a hidden name and renamed
    /// to its id only after the owner record is durably written.
    pub fn create_task(&self, principal: &Principal) -> Result<(String, PathBuf), GuardError> {
        let task_id = new_task_id();
        let dir = self.create_task_with_id(principal, &task_id)?;
        Ok((task_id, dir))
    }

    /// [`ArtifactStore::create_task`] for an id chosen earlier (a queued
    /// task's, see [`new_task_id`]); an id that is malformed or already has
    /// a directory is an error.
    pub fn create_task_with_id(&self, principal: &Principal, task_id: &str) -> Result<PathBuf, GuardError> {
        Self::check_id(task_id)?;
        let task_id = task_id.to_string();
        let staging = format!("{STAGING_PREFIX}{task_id}");
        let cannot = |e: &dyn std::fmt::Display| {
            GuardError::failed(format!(
                "cannot create task directory under {}: {e}; set WARDEN_ARTIFACTS_DIR to a writable directory",
                self.root.display()
            ))
        };
        safe_path::create_private_dir_all(&self.root).map_err(|e| cannot(&e))?;
        let root = safe_path::open_root(&self.root)?;
        let mode = nix::sys::stat::Mode::from_bits_truncate(safe_path::DIR_MODE);
        // A task that waited for the person and resumes on the node that
        // ran it finds its directory: it is taken over (same owner only),
        // and the resumed run writes over what the first run left.
        if self.root.join(&task_id).is_dir() {
            let dir = safe_path::open_dir_at(&root, "task_id", &task_id)?;
            let owner = owner::read_at(&dir).ok().flatten();
            if owner::principal_of(owner.as_ref()).as_ref() != Some(principal) {
                return Err(cannot(&format!(
                    "the directory of task {task_id} exists and is not this principal's"
                )));
            }
            let record = owner::OwnerRecord::new(principal).to_bytes();
            safe_path::write_atomic_at(&dir, "filename", &[owner::OWNER_FILE], &record, Deferred)?;
            let _ = nix::sys::stat::mkdirat(&dir, OUTPUTS_DIR, mode);
            return Ok(self.register_running(principal, task_id));
        }
        nix::sys::stat::mkdirat(&root, staging.as_str(), mode).map_err(|e| cannot(&e))?;
        let set_up = || -> Result<(), GuardError> {
            let dir = safe_path::open_dir_at(&root, "task_id", &staging)?;
            nix::sys::stat::mkdirat(&dir, OUTPUTS_DIR, mode).map_err(|e| cannot(&e))?;
            let owner = owner::OwnerRecord::new(principal).to_bytes();
            safe_path::write_atomic_at(&dir, "filename", &[owner::OWNER_FILE], &owner, Deferred)?;
            // The task's event log is appended by the events module; created
            // here so it is private like everything else in the directory.
            let _ = safe_path::create_log_at(&dir, "events.jsonl");
            nix::fcntl::renameat(&root, staging.as_str(), &root, task_id.as_str()).map_err(|e| cannot(&e))
        };
        if let Err(error) = set_up() {
            let _ = std::fs::remove_dir_all(self.root.join(&staging));
            return Err(error);
        }
        Ok(self.register_running(principal, task_id))
    }

    /// Counts task `task_id` of `principal` as running here; its directory.
    fn register_running(&self, principal: &Principal, task_id: String) -> PathBuf {
        let running = RunningTask {
            principal: principal.clone(),
            usage: Arc::default(),
            principal_bytes: self.principal_bytes(principal),
        };
        lock(&self.running).insert(task_id.clone(), running);
        self.pruner.forget(&task_id);
        self.request_prune();
        self.root.join(task_id)
    }

    /// The running-bytes counter `principal`'s running tasks share (a new
    /// one when it has none running).
    fn principal_bytes(&self, principal: &Principal) -> Arc<Mutex<u64>> {
        lock(&self.running)
            .values()
            .find(|task| &task.principal == principal)
            .map(|task| task.principal_bytes.clone())
            .unwrap_or_default()
    }

    /// Forgets a task's usage: it is no longer running here.
    pub fn end_task(&self, task_id: &str) {
        let Some(task) = lock(&self.running).remove(task_id) else {
            return;
        };
        let mut principal_bytes = lock(&task.principal_bytes);
        *principal_bytes = principal_bytes.saturating_sub(lock(&task.usage).bytes);
    }

    /// Asks the retention thread for a pass; never waits for it.
    pub fn request_prune(&self) {
        let store = self.clone();
        self.pruner.request(move || store);
    }

    /// One retention pass (on the retention thread).
    fn prune(&self) {
        let (running, mut principal_totals) = {
            let running = lock(&self.running);
            let mut totals: HashMap<Principal, u64> = HashMap::new();
            for task in running.values() {
                totals.insert(task.principal.clone(), *lock(&task.principal_bytes));
            }
            (running.keys().cloned().collect::<Vec<String>>(), totals)
        };
        let Ok(root) = safe_path::open_root(&self.root) else {
            return;
        };
        let mut entries = Vec::new();
        let listed = self.task_dirs(|id| self.pruner.finished(id).map(|known| (known.modified, known)));
        for (id, modified, known) in listed {
            let running_here = running.contains(&id);
            let (finished, bytes, principal) = match known.filter(|_| !running_here) {
                Some(known) => (true, known.bytes, known.principal),
                None => self.first_look(&root, &id, modified, running_here),
            };
            entries.push(Entry {
                age: retention::age_since(modified),
                id,
                finished,
                running_here,
                bytes,
                principal,
            });
        }
        for id in retention::doomed(&entries, self.policy, &mut principal_totals) {
            self.pruner.remove(&self.root, &id);
            // Its record goes too (take_pruned): so does its copy.
            self.remove_remote(&id);
        }
        // Leftovers of a pass a crash interrupted, and of task set-ups a
        // crash interrupted (a set-up takes milliseconds; these are old).
        if let Ok(listing) = std::fs::read_dir(&self.root) {
            for entry in listing.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let stale_setup = name.starts_with(STAGING_PREFIX)
                    && entry
                        .path()
                        .symlink_metadata()
                        .is_ok_and(|m| retention::age(&m) > retention::RUNNING_GRACE);
                if name.starts_with(retention::TRASH_PREFIX) || stale_setup {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        shared::sweep(&self.root);
    }

    /// Whether task `id` has finished, its bytes (0 unless it finished and
    /// is not running here) and its principal, read from its directory; a
    /// finished task's are kept for later passes.
    fn first_look(
        &self,
        root: &OwnedFd,
        id: &str,
        modified: std::time::SystemTime,
        running_here: bool,
    ) -> (bool, u64, Option<Principal>) {
        let dir = safe_path::open_dir_at(root, "task_id", id).ok();
        let finished = dir
            .as_ref()
            .map(|dir| {
                nix::sys::stat::fstatat(dir, RESULT_FILE, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).is_ok()
            })
            .unwrap_or(true);
        let principal = dir.as_ref().and_then(owner::principal_at);
        if running_here || !finished {
            return (finished, 0, principal);
        }
        let facts = self
            .pruner
            .measure_finished(id, &self.root.join(id), modified, principal);
        (true, facts.bytes, facts.principal)
    }

    /// The tasks a dead server left running: no `result.json`, not
    /// waiting for the person, and an owner that is gone (or no owner file
    /// and older than a minute). Called once when a server opens the
    /// store, which ends each `interrupted` (`warden_task::records`).
    pub fn dead_tasks(&self) -> Vec<String> {
        let mut dead = Vec::new();
        let Ok(root) = safe_path::open_root(&self.root) else {
            return dead;
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
            // Ended, or waiting for the person (no server holds it).
            if nix::sys::stat::fstatat(&dir, RESULT_FILE, at).is_ok()
                || nix::sys::stat::fstatat(&dir, WAITING_FILE, at).is_ok()
            {
                continue;
            }
            let gone = match owner::read_at(&dir).ok().flatten() {
                Some(owner) => !owner.alive(),
                None => std::fs::symlink_metadata(self.root.join(&id))
                    .map(|m| retention::age(&m) > std::time::Duration::from_secs(60))
                    .unwrap_or(false),
            };
            if gone {
                dead.push(id);
            }
        }
        dead
    }

    /// A file directly in a task's directory, opened to read: never
    /// through a link, a regular file only.
    pub fn open_task_file(&self, task_id: &str, name: &str) -> Result<std::fs::File, GuardError> {
        let dir = self.open_task(task_id)?;
        safe_path::open_read_at(&dir, "filename", &[name])
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
    /// open of the task goes through the returned descriptor. Whoever owns
    /// it: client-facing lookups use [`View::open_task`].
    fn open_task(&self, task_id: &str) -> Result<OwnedFd, GuardError> {
        let root = safe_path::open_root(&self.root)?;
        Self::open_task_at(&root, task_id)
    }

    /// [`ArtifactStore::open_task`] from the root's descriptor.
    fn open_task_at(root: &OwnedFd, task_id: &str) -> Result<OwnedFd, GuardError> {
        Self::check_id(task_id)?;
        nix::fcntl::openat(
            root,
            task_id,
            nix::fcntl::OFlag::O_RDONLY
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_NOFOLLOW
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| match e {
            nix::Error::ENOENT => no_task(task_id),
            nix::Error::ELOOP | nix::Error::ENOTDIR => GuardError::invalid_input(
                "task_id",
                "the task directory is a link or not a directory; links are refused",
            ),
            other => GuardError::failed(format!("task_id: cannot open task '{task_id}': {other}")),
        })
    }

    /// Writes a file the server produces (actions, registry, saved
    /// values) atomically: a crash or a full disk leaves the old file or
    /// the whole new one, never a truncated one. It is made durable with
    /// the task's result ([`ArtifactStore::write_result`], the task's one
    /// commit: see [`safe_path::Durability`]).
    pub fn write_task_file(&self, task_id: &str, name: &str, bytes: &[u8]) -> Result<(), GuardError> {
        let dir = self.open_task(task_id)?;
        let parts = safe_path::components("filename", name)?;
        safe_path::write_atomic_at(&dir, "filename", &parts, bytes, Deferred)
    }

    /// Puts `name` in the task's directory with `bytes` as
    /// [`ArtifactStore::write_task_file`] does, as a link to the one copy
    /// every task holding the same bytes shares (the registry snapshot: see
    /// `shared`). Only for files no one appends to or edits in place.
    pub fn link_task_file(&self, task_id: &str, name: &str, bytes: &[u8]) -> Result<(), GuardError> {
        let [name] = safe_path::components("filename", name)?[..] else {
            return Err(GuardError::invalid_input(
                "filename",
                "must be a file directly in the task directory",
            ));
        };
        let root = safe_path::open_root(&self.root)?;
        let dir = Self::open_task_at(&root, task_id)?;
        shared::link_at(&root, &dir, name, bytes)
    }

    /// Writes `name` as [`ArtifactStore::write_task_file`] does, as the
    /// commit of what the task wrote so far (see [`ArtifactStore::write_result`]):
    /// for a file that ends a run without a result (`waiting.json`, which
    /// keeps a task waiting for the person through a crash of the machine).
    pub fn commit_task_file(&self, task_id: &str, name: &str, bytes: &[u8]) -> Result<(), GuardError> {
        let dir = self.open_task(task_id)?;
        let parts = safe_path::components("filename", name)?;
        safe_path::write_atomic_at(&dir, "filename", &parts, bytes, Commit)
    }

    /// Writes `result.json` as the task's commit: a temporary file written
    /// out, the rename, one sync of the directory that commits it with every
    /// rename the task made before ([`safe_path::Durability::Commit`]). An
    /// error says why, so the caller can fail the task with it.
    pub fn write_result(&self, task_id: &str, bytes: &[u8]) -> Result<(), GuardError> {
        let dir = self.open_task(task_id)?;
        safe_path::write_atomic_at(&dir, "filename", &[RESULT_FILE], bytes, Commit)
    }

    /// Writes `result.json` as [`ArtifactStore::write_result`] does, unless
    /// the task directory has one already (the runner retrying a result
    /// whose first write failed, see `task::records`). A task directory
    /// that no longer exists (or an id that names none) needs nothing.
    pub fn ensure_result(&self, task_id: &str, bytes: &[u8]) -> Result<(), GuardError> {
        let dir = match self.open_task(task_id) {
            Ok(dir) => dir,
            Err(error) if error.code == warden_core::error::codes::GUARD_FAILED => return Err(error),
            Err(_) => return Ok(()),
        };
        let at = nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW;
        if nix::sys::stat::fstatat(&dir, RESULT_FILE, at).is_ok() {
            return Ok(());
        }
        safe_path::write_atomic_at(&dir, "filename", &[RESULT_FILE], bytes, Commit)
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
                warden_core::error::codes::ARTIFACT_TOO_LARGE,
                format!(
                    "filename: '{filename}' is {} bytes; the limit is {cap} bytes per file",
                    bytes.len()
                ),
            ));
        }
        let parts = safe_path::components("filename", filename)?;
        quota::check_name(filename, &parts)?;
        let task = lock(&self.running).get(task_id).cloned().ok_or_else(|| {
            GuardError::failed(format!(
                "task '{task_id}' is not running here; artifacts are written only while a task runs"
            ))
        })?;
        let dir = self.open_task(task_id)?;
        let outputs = safe_path::open_dir_at(&dir, "filename", OUTPUTS_DIR)?;
        // The principal's counter first, then the task's: every writer
        // takes them in this order.
        let mut principal_bytes = lock(&task.principal_bytes);
        let mut usage = lock(&task.usage);
        let probe = safe_path::probe_at(&outputs, "filename", &parts)?;
        let new_entries = probe.new_dirs + usize::from(probe.replaced.is_none());
        let size = bytes.len() as u64;
        let replaced = probe.replaced.unwrap_or(0);
        usage.check(self.quota, new_entries, size, replaced)?;
        if crate::tenant::limits::bound(&task.principal) {
            quota::check_principal(&task.principal, self.quota, *principal_bytes, size, replaced)?;
        }
        safe_path::write_atomic_at(&outputs, "filename", &parts, bytes, Deferred)?;
        let before = usage.bytes;
        usage.record(filename, new_entries, size, replaced);
        *principal_bytes = (*principal_bytes + usage.bytes).saturating_sub(before);
        Ok(size)
    }

    /// The files a running task wrote under `outputs/` (by name, with
    /// sizes), from memory; `None` when the task is not running here.
    pub fn written(&self, task_id: &str) -> Option<Vec<(String, u64)>> {
        let task = lock(&self.running).get(task_id).cloned()?;
        let usage = lock(&task.usage);
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

    /// The artifacts root.
    pub fn root(&self) -> &std::path::Path {
        &self.root
    }

    /// Removes a task directory (an expired task): renamed out of sight,
    /// then deleted; and its object-store copy, whichever node ran it. A
    /// task running here is never removed.
    pub fn remove_task(&self, task_id: &str) {
        if self.remove_directory(task_id) {
            self.remove_remote(task_id);
        }
    }

    /// Removes this node's directory of a task, renamed out of sight then
    /// deleted, and leaves its object-store copy: for a directory made here
    /// for a task whose record another server ended meanwhile, whose copy
    /// is that server's. `false` (nothing done) for a task running here or
    /// an id that names no task.
    pub fn remove_directory(&self, task_id: &str) -> bool {
        if Self::check_id(task_id).is_err() || lock(&self.running).contains_key(task_id) {
            return false;
        }
        let trash = self.root.join(format!("{}{task_id}", retention::TRASH_PREFIX));
        if std::fs::rename(self.root.join(task_id), &trash).is_ok() {
            let _ = std::fs::remove_dir_all(trash);
        }
        self.pruner.forget(task_id);
        true
    }

    /// The ids of the task directories retention removed since the last
    /// call, so that their records can be removed too.
    pub fn take_pruned(&self) -> Vec<String> {
        self.pruner.take_removed()
    }

    /// The principal owning a task directory, and its saved result if it
    /// has one (`None` for either when unreadable). For rebuilding records.
    pub fn task_facts(&self, task_id: &str) -> (Option<Principal>, Option<Value>) {
        let Ok(dir) = self.open_task(task_id) else {
            return (None, None);
        };
        let principal = owner::principal_at(&dir);
        let result = read_at(
            &dir,
            task_id,
            RESULT_FILE,
            0,
            crate::limits::MAX_INLINE_RESULT_BYTES,
            Encoding::Utf8,
        )
        .ok()
        .filter(|chunk| chunk.next_offset.is_none())
        .and_then(|chunk| serde_json::from_str(&chunk.content).ok());
        (principal, result)
    }

    /// Task ids, newest first.
    pub fn task_ids(&self) -> Vec<String> {
        self.task_dirs(|_| None::<(std::time::SystemTime, ())>)
            .into_iter()
            .map(|(name, _, _)| name)
            .collect()
    }

    /// [`ArtifactStore::task_ids`] with each directory's modification time,
    /// newest first: `known`'s when it has one (a finished task a pass has
    /// seen, which no longer changes; what it knows comes along), else read
    /// now. A pass over a store
    /// of finished tasks is then one directory listing, not a `stat` per
    /// task (100,000 of them, `WARDEN_TASKS_KEPT`'s ceiling, five times a
    /// second under a steady stream of tasks).
    fn task_dirs<T>(
        &self,
        known: impl Fn(&str) -> Option<(std::time::SystemTime, T)>,
    ) -> Vec<(String, std::time::SystemTime, Option<T>)> {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut tasks: Vec<(std::time::SystemTime, String, Option<T>)> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().to_string();
                if !name.starts_with("task_") {
                    return None;
                }
                // The listing's own type (no `stat`): a link is not a directory.
                if let Some((modified, facts)) = known(&name)
                    && entry.file_type().is_ok_and(|kind| kind.is_dir())
                {
                    return Some((modified, name, Some(facts)));
                }
                let meta = entry.path().symlink_metadata().ok()?;
                meta.is_dir()
                    .then(|| (meta.modified().unwrap_or(std::time::UNIX_EPOCH), name, None))
            })
            .collect();
        tasks.sort_unstable_by(|a, b| (b.0, &b.1).cmp(&(a.0, &a.1)));
        tasks
            .into_iter()
            .map(|(modified, name, facts)| (name, modified, facts))
            .collect()
    }
}

/// A fresh task id: `task_` + 32 hex digits.
pub fn new_task_id() -> String {
    format!("task_{}", uuid::Uuid::new_v4().simple())
}

/// The answer for a task id that does not exist — or that belongs to
/// another principal: the same code and message, so an answer never tells
/// whether someone else's task exists.
pub fn no_task(task_id: &str) -> GuardError {
    GuardError::new(
        warden_core::error::codes::NOT_FOUND,
        format!("task_id: no task '{task_id}'; call list_tasks to see existing tasks"),
    )
}

/// One chunk of `filename` in the task directory `dir`.
fn read_at(
    dir: &OwnedFd,
    task_id: &str,
    filename: &str,
    offset: u64,
    max_bytes: usize,
    encoding: Encoding,
) -> Result<ChunkAnswer, GuardError> {
    let parts = safe_path::components("filename", filename)?;
    let mut file = safe_path::open_read_at(dir, "filename", &parts)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let chunk = chunk::read_chunk(&mut file, size, offset, max_bytes, encoding)?;
    Ok(chunk_answer(task_id, filename, offset, encoding, chunk))
}

/// The `read_artifact` answer for one chunk, wherever it was read from
/// (public for [`RemoteCopy`] implementations, which answer alike).
pub fn chunk_answer(
    task_id: &str,
    filename: &str,
    offset: u64,
    encoding: Encoding,
    chunk: chunk::Chunk,
) -> ChunkAnswer {
    ChunkAnswer {
        task_id: task_id.to_string(),
        filename: filename.to_string(),
        encoding,
        mime_type: mime_type(filename).to_string(),
        content: chunk.content,
        size_bytes: chunk.size_bytes,
        offset,
        next_offset: chunk.next_offset,
    }
}

impl retention::Pass for ArtifactStore {
    fn run(&self) {
        self.prune();
    }
}

/// Lists regular files under `dir`, at most [`crate::limits::MAX_ARTIFACT_DEPTH`]
/// + 1 levels down (deeper trees were not written by the server).
///
/// Public for [`RemoteCopy`] implementations, which upload what it lists.
pub fn walk(dir: OwnedFd, prefix: &str, depth: usize, found: &mut Vec<(String, u64)>) {
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
        } else if kind == nix::sys::stat::SFlag::S_IFREG && !safe_path::is_temporary(&name) {
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
