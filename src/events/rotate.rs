//! The file behind the global `events.jsonl`: appends, and rotates by size.
//!
//! When a write would take the file past its size cap, the file becomes
//! `events.jsonl.1`, `.1` becomes `.2`, and so on up to `.N`; the oldest is
//! deleted and a fresh `events.jsonl` is created. Only the event writer
//! thread writes here, and it hands over whole records per write, so a
//! record is never split across two files. Files are opened without
//! following a symlink and created mode 0600.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Opens `path` for appending: never through a symlink (`O_NOFOLLOW`), new
/// files readable by the owner only.
pub(crate) fn open_log(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
}

/// A size-capped, rotating append-only log file.
pub(crate) struct RotatingFile {
    path: PathBuf,
    file: BufWriter<File>,
    /// Bytes in the current file (its length at open, plus what we wrote).
    written: u64,
    max_bytes: u64,
    keep: usize,
    buffer: usize,
}

impl RotatingFile {
    pub(crate) fn open(path: PathBuf, max_bytes: u64, keep: usize, buffer: usize) -> std::io::Result<Self> {
        let file = open_log(&path)?;
        let written = file.metadata()?.len();
        Ok(Self {
            path,
            file: BufWriter::with_capacity(buffer, file),
            written,
            max_bytes,
            keep: keep.max(1),
            buffer,
        })
    }

    fn rotated(&self, n: usize) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    /// Shifts `.k` to `.k+1` (dropping the oldest) and starts a new file.
    fn rotate(&mut self) -> std::io::Result<()> {
        self.file.flush()?;
        let _ = std::fs::remove_file(self.rotated(self.keep));
        for n in (1..self.keep).rev() {
            let from = self.rotated(n);
            if from.exists() {
                std::fs::rename(&from, self.rotated(n + 1))?;
            }
        }
        std::fs::rename(&self.path, self.rotated(1))?;
        self.file = BufWriter::with_capacity(self.buffer, open_log(&self.path)?);
        self.written = 0;
        Ok(())
    }
}

impl Write for RotatingFile {
    /// Takes `buf` whole (one or more complete records), rotating first
    /// when it would not fit in the current file.
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.written > 0 && self.written + buf.len() as u64 > self.max_bytes {
            // A failed rotation must not lose the record: keep appending to
            // the current file and try again on the next write.
            let _ = self.rotate();
        }
        self.file.write_all(buf)?;
        self.written += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_at_the_cap_and_keeps_n_files() {
        // Past the cap the log shifts to .1…, keeps N rotated files, and never splits a record.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut log = RotatingFile::open(path.clone(), 100, 2, 16).unwrap();
        let record = [b'x'; 39].iter().copied().chain([b'\n']).collect::<Vec<u8>>();
        for _ in 0..20 {
            log.write_all(&record).unwrap();
        }
        log.flush().unwrap();
        for name in ["events.jsonl", "events.jsonl.1", "events.jsonl.2"] {
            let len = std::fs::metadata(dir.path().join(name)).unwrap().len();
            assert!(len <= 100 && len.is_multiple_of(40), "{name}: {len}");
        }
        assert!(!dir.path().join("events.jsonl.3").exists());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn never_follows_a_link() {
        // A symlink planted at the log path is refused, not followed.
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"").unwrap();
        let path = dir.path().join("events.jsonl");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(open_log(&path).is_err());
    }
}
