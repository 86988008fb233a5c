//! A worker's stderr, kept in memory until there is something to keep.
//!
//! A script worker writes to stderr only when something goes wrong (a
//! panic, an allocation it could not make), so nearly every task's log was
//! an empty file: one inode each, which on the journal-less ext4 this was
//! measured on costs 0.05–0.3 ms to create and makes every later creation
//! dearer once it is deleted (docs/benchmarks.md, eighth round). The worker
//! writes into an anonymous memory file instead (`memfd_create`), and its
//! owner copies it to disk only when it is not empty.
//!
//! It is bounded as a file on disk is: RLIMIT_FSIZE applies to a memory
//! file too (a test below stops a writer at it), and the memory goes when
//! the last descriptor closes.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;

use nix::sys::memfd::{MFdFlags, memfd_create};

/// A worker's stderr: an anonymous memory file, or the log file itself
/// where the kernel refuses memory files ([`StderrBuffer::in_file`]).
#[derive(Debug)]
pub struct StderrBuffer(File, Kept);

/// Whether what the worker writes is on disk already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    InMemory,
    InPlace,
}

impl StderrBuffer {
    /// A new, empty buffer (close-on-exec: only the descriptor given to the
    /// worker, [`StderrBuffer::for_worker`], reaches it).
    pub fn new() -> io::Result<Self> {
        let fd = memfd_create("warden-worker-stderr", MFdFlags::MFD_CLOEXEC)?;
        Ok(Self(File::from(fd), Kept::InMemory))
    }

    /// The log file itself as the buffer, for where `memfd_create` is
    /// refused (a container's seccomp profile): the worker writes straight
    /// to disk, as before memory files, and there is nothing to copy.
    pub fn in_file(log: File) -> Self {
        Self(log, Kept::InPlace)
    }

    /// Whether what the worker writes is already in its log on disk.
    pub fn kept_in_place(&self) -> bool {
        self.1 == Kept::InPlace
    }

    /// A descriptor of the same file for the worker's stderr.
    pub fn for_worker(&self) -> io::Result<OwnedFd> {
        self.0.try_clone().map(OwnedFd::from)
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.0.metadata().map_or(0, |m| m.len())
    }

    /// Whether nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Everything written so far (read at offset 0: the worker's writes
    /// move the offset both descriptors share, never this read).
    pub fn contents(&self) -> io::Result<Vec<u8>> {
        let mut bytes = vec![0; usize::try_from(self.len()).unwrap_or(usize::MAX)];
        let mut filled = 0;
        while filled < bytes.len() {
            match self.0.read_at(&mut bytes[filled..], filled as u64)? {
                0 => break,
                n => filled += n,
            }
        }
        bytes.truncate(filled);
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_writes_into_it_and_is_stopped_at_its_file_size_limit() {
        let buffer = StderrBuffer::new().expect("memfd");
        assert!(buffer.is_empty());
        // dash's `ulimit -f` counts 512-byte blocks: 8 blocks, 4 KiB.
        let status = std::process::Command::new("sh")
            .args(["-c", "echo first >&2; ulimit -f 8; head -c 100000 /dev/zero >&2"])
            .stderr(buffer.for_worker().expect("dup"))
            .status()
            .expect("sh");
        assert!(!status.success(), "the writer is stopped: {status:?}");
        assert_eq!(buffer.len(), 4096, "RLIMIT_FSIZE bounds the memory file");
        let contents = buffer.contents().expect("read");
        assert_eq!(&contents[..6], b"first\n");
        assert_eq!(contents.len(), 4096);
        assert!(!buffer.kept_in_place());
    }

    #[test]
    fn a_log_file_as_the_buffer_is_kept_in_place_and_read_the_same_way() {
        let path = std::env::temp_dir().join(format!("warden-stderr-test-{}", std::process::id()));
        let log = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("file");
        let _ = std::fs::remove_file(&path);
        let buffer = StderrBuffer::in_file(log);
        let status = std::process::Command::new("sh")
            .args(["-c", "echo panicked >&2"])
            .stderr(buffer.for_worker().expect("dup"))
            .status()
            .expect("sh");
        assert!(status.success());
        assert!(buffer.kept_in_place());
        assert_eq!(buffer.contents().expect("read"), b"panicked\n");
    }
}
