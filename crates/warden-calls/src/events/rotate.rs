//! The files behind the event logs: appends of whole records, and the
//! global log's rotation by size.
//!
//! When a write would take the file past its size cap, the file becomes
//! `events.jsonl.1`, `.1` becomes `.2`, and so on up to `.N`; the oldest is
//! deleted and a fresh `events.jsonl` is created. Only the event writer
//! thread writes here, and it hands over whole records per write, so a
//! record is never split across two files. Files are opened without
//! following a symlink, regular files only, and kept mode 0600
//! ([`crate::artifacts::safe_path::make_private`]).
//!
//! A write the disk refuses part-way (ENOSPC, EIO) must not leave half a
//! record: [`Appender`] writes its buffer in one go and, when that fails
//! after some bytes landed, cuts the file back to where the write began.
//! The records of the failed write are lost (the disk had no room for
//! them); the file stays whole lines of JSON.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::limits::EVENTS_REOPEN_INTERVAL;

/// Opens `path` for appending: never through a symlink (`O_NOFOLLOW`),
/// never waiting on a FIFO, a regular file only, mode 0600 (a file an
/// older Warden left readable by others is tightened).
pub(crate) fn open_log(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(crate::artifacts::safe_path::FILE_MODE)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)?;
    crate::artifacts::safe_path::make_private(&file)?;
    Ok(file)
}

/// A buffered appender that never leaves a torn record: bytes gather in
/// memory (whole records only) and go to the file in one write; a write
/// that fails part-way is cut back, so the file ends on a record boundary.
pub(crate) struct Appender {
    file: File,
    pending: Vec<u8>,
    /// Bytes gathered before a write.
    buffer: usize,
}

impl Appender {
    pub(crate) fn new(file: File, buffer: usize) -> Self {
        Self {
            file,
            pending: Vec::with_capacity(buffer.min(64 * 1024)),
            buffer,
        }
    }

    /// Adds whole records; writes when the buffer is full.
    pub(crate) fn append(&mut self, records: &[u8]) -> std::io::Result<()> {
        self.pending.extend_from_slice(records);
        if self.pending.len() >= self.buffer {
            return self.flush();
        }
        Ok(())
    }

    /// Writes what is gathered. On failure the gathered records are
    /// dropped (memory stays bounded while the disk is full) and any part
    /// of them that landed is cut off again, unless another process
    /// appended meanwhile (then the file is left as it is: cutting would
    /// remove its records).
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let before = self.file.metadata()?.len();
        let mut written = 0;
        let outcome = loop {
            if written == self.pending.len() {
                break Ok(());
            }
            match self.file.write(&self.pending[written..]) {
                Ok(0) => break Err(std::io::Error::from(std::io::ErrorKind::WriteZero)),
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        if outcome.is_err()
            && written > 0
            && self
                .file
                .metadata()
                .is_ok_and(|m| m.len() == before + written as u64)
        {
            let _ = self.file.set_len(before);
        }
        self.pending.clear();
        outcome
    }

    /// Writes what is gathered and syncs the file's data to the disk.
    pub(crate) fn sync(&mut self) -> std::io::Result<()> {
        self.flush()?;
        self.file.sync_data()
    }
}

impl Drop for Appender {
    /// Writes what is gathered, as the `BufWriter` it replaced did.
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// A size-capped, rotating append-only log file. While its file cannot
/// be opened it drops records and tries again, at most once per
/// [`EVENTS_REOPEN_INTERVAL`], when records come.
pub(crate) struct RotatingFile {
    path: PathBuf,
    /// `None` while the file cannot be opened.
    file: Option<Appender>,
    /// When to try opening the file again, while it is closed.
    retry_at: Instant,
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
            file: Some(Appender::new(file, buffer)),
            retry_at: Instant::now(),
            written,
            max_bytes,
            keep: keep.max(1),
            buffer,
        })
    }

    /// A log at `path` that could not be opened now: it opens the file
    /// with the first records after [`EVENTS_REOPEN_INTERVAL`].
    pub(crate) fn closed(path: PathBuf, max_bytes: u64, keep: usize, buffer: usize) -> Self {
        Self {
            path,
            file: None,
            retry_at: Instant::now() + EVENTS_REOPEN_INTERVAL,
            written: 0,
            max_bytes,
            keep: keep.max(1),
            buffer,
        }
    }

    /// The open file, opening it if it is closed and a retry is due.
    fn file(&mut self) -> Option<&mut Appender> {
        if self.file.is_none() && Instant::now() >= self.retry_at {
            self.retry_at = Instant::now() + EVENTS_REOPEN_INTERVAL;
            let opened = self
                .path
                .parent()
                .map_or(Ok(()), crate::artifacts::safe_path::create_private_dir_all)
                .and_then(|()| open_log(&self.path))
                .and_then(|file| Ok((file.metadata()?.len(), file)));
            if let Ok((written, file)) = opened {
                self.written = written;
                self.file = Some(Appender::new(file, self.buffer));
            }
        }
        self.file.as_mut()
    }

    fn rotated(&self, n: usize) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    /// Shifts `.k` to `.k+1` (dropping the oldest) and starts a new file.
    fn rotate(&mut self) -> std::io::Result<()> {
        if let Some(file) = self.file.as_mut() {
            file.flush()?;
        }
        let _ = std::fs::remove_file(self.rotated(self.keep));
        for n in (1..self.keep).rev() {
            let from = self.rotated(n);
            if from.exists() {
                std::fs::rename(&from, self.rotated(n + 1))?;
            }
        }
        std::fs::rename(&self.path, self.rotated(1))?;
        self.written = 0;
        match open_log(&self.path) {
            Ok(file) => {
                self.file = Some(Appender::new(file, self.buffer));
                Ok(())
            }
            Err(error) => {
                // The old file is renamed: it takes no more records.
                self.file = None;
                self.retry_at = Instant::now() + EVENTS_REOPEN_INTERVAL;
                Err(error)
            }
        }
    }
}

impl Write for RotatingFile {
    /// Takes `buf` whole: complete records, often a batch of them. Runs of
    /// records that fit the current file are appended together; before a
    /// record that would not fit, the file rotates, so no file passes the
    /// cap unless one record alone does.
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let (mut start, mut run) = (0, 0);
        for record in buf.split_inclusive(|b| *b == b'\n') {
            let after = self.written + (run + record.len()) as u64;
            if after > self.max_bytes && (run > 0 || self.written > 0) {
                self.append(&buf[start..start + run])?;
                start += run;
                run = 0;
                if self.written > 0 {
                    // A failed rotation must not lose the record: keep
                    // appending to the current file and try again later.
                    let _ = self.rotate();
                }
            }
            run += record.len();
        }
        self.append(&buf[start..start + run])?;
        Ok(buf.len())
    }

    /// A failed write is not reported: its records are already dropped
    /// (see [`Appender::flush`]), and the writer thread would only print
    /// the error, which library code never does.
    fn flush(&mut self) -> std::io::Result<()> {
        if let Some(file) = self.file.as_mut() {
            let _ = file.flush();
        }
        Ok(())
    }
}

impl RotatingFile {
    /// Appends whole records to the current file, or drops them while it
    /// is closed (see the type's docs).
    fn append(&mut self, records: &[u8]) -> std::io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let Some(file) = self.file() else {
            return Ok(());
        };
        file.append(records)?;
        self.written += records.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_of_records_is_split_across_files_at_record_boundaries() {
        // The event writer gets records a batch at a time: one write of 20 records still
        // leaves every file within the cap, and a record longer than the cap gets a file alone.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut log = RotatingFile::open(path.clone(), 100, 10, 16).unwrap();
        let record = [b'x'; 39].iter().copied().chain([b'\n']).collect::<Vec<u8>>();
        log.write_all(&record.repeat(5)).unwrap();
        let long = [b'y'; 150].iter().copied().chain([b'\n']).collect::<Vec<u8>>();
        log.write_all(&[long.clone(), record.clone()].concat()).unwrap();
        log.flush().unwrap();
        let read = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
        // Oldest first: 2 + 2 + 1 short records, then the long one alone, then the last short.
        assert_eq!(read("events.jsonl.4"), record.repeat(2));
        assert_eq!(read("events.jsonl.3"), record.repeat(2));
        assert_eq!(read("events.jsonl.2"), record);
        assert_eq!(read("events.jsonl.1"), long);
        assert_eq!(read("events.jsonl"), record);
    }

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

    #[test]
    fn a_write_the_disk_refuses_leaves_no_torn_record() {
        // /dev/full refuses every write: the appender reports it, drops the records, and a
        // regular file that took part of a write is cut back to its last whole record.
        let full = std::fs::OpenOptions::new().append(true).open("/dev/full");
        if let Ok(full) = full {
            let mut log = Appender::new(full, 16);
            assert!(log.append(&[b'x'; 40]).is_err());
            assert!(log.pending.is_empty(), "memory stays bounded");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut log = Appender::new(open_log(&path).unwrap(), 1 << 20);
        log.append(b"{\"a\":1}\n").unwrap();
        log.flush().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\":1}\n");
    }

    #[test]
    fn a_log_that_cannot_be_opened_opens_with_later_records() {
        // A closed log drops records until a retry is due, then opens the file (0600) and writes.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("events.jsonl");
        let mut log = RotatingFile::closed(path.clone(), 1 << 20, 2, 16);
        log.write_all(b"{\"dropped\":1}\n").unwrap();
        assert!(!path.exists(), "no retry before the interval");
        log.retry_at = Instant::now();
        log.write_all(b"{\"kept\":1}\n").unwrap();
        log.flush().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"kept\":1}\n");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
