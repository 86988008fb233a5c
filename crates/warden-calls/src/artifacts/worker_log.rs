//! A worker's stderr log, on disk only when the worker wrote something.
//!
//! Workers write to stderr only when something goes wrong (a panic, an
//! allocation they could not make), yet every isolated guard call created
//! a log file and deleted it empty, and every script task left an empty
//! `worker_stderr.log`. On the journal-less ext4 this was measured on, each
//! inode created costs more for every inode deleted near it in the last
//! minutes (docs/benchmarks.md, eighth round): a create and a delete per
//! call taxed every call after it. The worker now writes into memory
//! ([`StderrBuffer`]) and the log is written only when it is not empty,
//! whole (bounded by the worker's RLIMIT_FSIZE, as the file was).

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use warden_sandbox::stderr::StderrBuffer;

/// A worker's stderr and the file it is kept in when not empty.
#[derive(Debug)]
pub struct WorkerLog {
    buffer: StderrBuffer,
    path: PathBuf,
    /// Bytes of the buffer already in the file.
    kept: u64,
}

impl WorkerLog {
    /// A log kept at `path` when written to: in memory until then, or,
    /// where the kernel refuses memory files, the file at `path` itself
    /// (private, created now, removed again if it stays empty).
    pub fn new(path: &Path) -> std::io::Result<Self> {
        let buffer = match StderrBuffer::new() {
            Ok(buffer) => buffer,
            Err(_) => StderrBuffer::in_file(super::safe_path::create_private(path)?),
        };
        Ok(Self {
            buffer,
            path: path.to_path_buf(),
            kept: 0,
        })
    }

    /// A log kept at `path` of a worker whose stderr is `buffer` already
    /// (a spare worker, forked before its call had a log).
    pub fn with_buffer(buffer: StderrBuffer, path: &Path) -> Self {
        Self {
            buffer,
            path: path.to_path_buf(),
            kept: 0,
        }
    }

    /// A descriptor for the worker's stderr.
    pub fn for_worker(&self) -> std::io::Result<OwnedFd> {
        self.buffer.for_worker()
    }

    /// Where the log is kept.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the worker wrote so far, as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.buffer.contents().unwrap_or_default()).into_owned()
    }

    /// Writes what the worker wrote to the file, whole, when it wrote
    /// anything since the last time; an empty log leaves no file. Returns
    /// whether the file now exists.
    pub fn keep(&mut self) -> bool {
        let len = self.buffer.len();
        if self.buffer.kept_in_place() {
            if len == 0 {
                let _ = std::fs::remove_file(&self.path);
                return false;
            }
            return true;
        }
        if len <= self.kept {
            return self.kept > 0;
        }
        let written = self.buffer.contents().and_then(|bytes| {
            let mut file = super::safe_path::create_private(&self.path)?;
            file.write_all(&bytes)
        });
        if written.is_ok() {
            self.kept = len;
        }
        self.kept > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_log_leaves_no_file_and_a_written_one_is_kept_whole() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("worker.log");
        let mut log = WorkerLog::new(&path).expect("log");
        assert!(!log.keep());
        assert!(!path.exists(), "nothing written, no file");
        let write = |log: &WorkerLog, text: &str| {
            let status = std::process::Command::new("sh")
                .args(["-c", &format!("printf '{text}' >&2")])
                .stderr(log.for_worker().expect("fd"))
                .status()
                .expect("sh");
            assert!(status.success());
        };
        write(&log, "thread panicked\n");
        assert_eq!(log.text(), "thread panicked\n");
        assert!(log.keep());
        write(&log, "memory allocation of 8 bytes failed\n");
        assert!(log.keep());
        assert_eq!(
            std::fs::read_to_string(&path).expect("log"),
            "thread panicked\nmemory allocation of 8 bytes failed\n"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, super::super::safe_path::FILE_MODE);
    }
}
