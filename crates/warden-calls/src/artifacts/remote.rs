//! The seam to a copy of task files on shared storage, so that every node
//! can answer for every task (`WARDEN_ARTIFACT_STORE`).
//!
//! [`RemoteCopy`] is what [`super::ArtifactStore`] and its [`super::View`]
//! need from such a copy, and no more: the store uploads a finished task
//! and deletes an expired one; a view asks the copy who owns a task, reads
//! a chunk and lists the files when the local directory does not exist.
//! This crate holds no implementation: the S3 one is
//! `warden_cluster::s3::Remote`, and the facade attaches it at startup
//! ([`super::ArtifactStore::with_remote`]), so a build without the `s3`
//! feature compiles no object-store client.
//!
//! An implementation keeps the local rules exactly: the same chunk
//! answers ([`super::chunk_answer`]), the same errors for a missing file
//! ([`super::safe_path`]), and `owner.json` uploaded second to last and
//! `result.json` last, so a reader never sees more of a half-uploaded task
//! than of a running one. Every method is synchronous (the callers are);
//! an error is a [`GuardError`] naming the store and the fix.

use std::os::fd::OwnedFd;

use super::{ChunkAnswer, Encoding};
use crate::tenant::Principal;
use warden_core::error::GuardError;

/// A copy of finished tasks' files that every node reads. Object-safe:
/// the store holds it as `Arc<dyn RemoteCopy>`.
pub trait RemoteCopy: Send + Sync + std::fmt::Debug {
    /// The store as messages and `/readyz` name it (`s3://bucket/prefix`).
    fn url(&self) -> &str;

    /// Where a task's copy lives (`s3://bucket/prefix/task_…`), shown as
    /// its directory by lookups that answer from the copy.
    fn task_url(&self, task_id: &str) -> String;

    /// Copies the task directory `dir` (held open by the caller): every
    /// regular file the local listing shows and a read can name,
    /// `owner.json` second to last and `result.json` last. Returns the
    /// number of files sent.
    fn upload_task(&self, task_id: &str, dir: OwnedFd) -> Result<usize, GuardError>;

    /// The principal owning the copy of `task_id`, from its `owner.json`:
    /// `None` when there is no copy or its record names no one.
    fn owner(&self, task_id: &str) -> Result<Option<Principal>, GuardError>;

    /// One chunk of a file of the copy: the answer, and the errors, the
    /// local directory gives for the same file.
    fn read(
        &self,
        task_id: &str,
        filename: &str,
        offset: u64,
        max_bytes: usize,
        encoding: Encoding,
    ) -> Result<ChunkAnswer, GuardError>;

    /// The files of the copy (relative names, sorted, with sizes); empty
    /// when there is no copy.
    fn files(&self, task_id: &str) -> Result<Vec<(String, u64)>, GuardError>;

    /// Deletes the copy of `task_id`, `owner.json` first so lookups stop
    /// seeing it at once. Returns the number of objects deleted; no copy
    /// is not an error.
    fn remove_task(&self, task_id: &str) -> Result<usize, GuardError>;

    /// Whether the store takes a write now (`/readyz`, preflight).
    fn probe(&self) -> Result<(), GuardError>;
}
