//! Opening files inside a task directory without ever following a link.
//!
//! Names are checked first (relative, no `..`, no empty components, no
//! control or bidi characters), then every component is opened with
//! `O_NOFOLLOW` relative to the directory before it (`openat`), starting
//! from a held directory descriptor. A symlink swapped in between a check
//! and the open is therefore still refused: there is no separate check.
//! Reads open with `O_NONBLOCK` and accept regular files only, so a FIFO
//! planted by someone who can write the store never blocks the server.
//! Writes go to a temporary name and are renamed into place, so a failed
//! write leaves no truncated file; files are created 0600, directories 0700.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fstatat};
use nix::unistd::{UnlinkatFlags, unlinkat};

use warden_core::error::GuardError;

/// Mode of every file the store creates.
pub const FILE_MODE: u32 = 0o600;
/// Mode of every directory the store creates.
pub const DIR_MODE: u32 = 0o700;

/// Creates (or truncates) a file the server writes beside a task's
/// artifacts (the worker's stderr log, the readiness probe): private
/// ([`FILE_MODE`]) and never through a symbolic link. Open for reading
/// too: the server reads back a worker's log to explain a crash.
pub fn create_private(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)?;
    make_private(&file)?;
    Ok(file)
}

/// The one rule for what the server creates under the artifacts
/// directory, applied to a file it opened for writing: a regular file
/// (not a FIFO or a device someone planted), mode [`FILE_MODE`]. The
/// creation modes already say 0600; this also tightens a file an older
/// Warden (or a umask) left readable by others, so the rule holds for
/// files that existed before too. An error names what is wrong.
pub fn make_private(file: &File) -> std::io::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file; only regular files are written (move it aside)",
        ));
    }
    if meta.mode() & 0o7777 != FILE_MODE {
        file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
    }
    Ok(())
}

/// Creates `path` (and its missing parents) as a private directory
/// ([`DIR_MODE`]) whatever the umask: the artifacts root and everything
/// the server makes under it. A directory that already exists is left as
/// the operator made it (its files are private either way).
pub fn create_private_dir_all(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if std::fs::symlink_metadata(path).is_ok() {
        return std::fs::DirBuilder::new().recursive(true).create(path);
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(DIR_MODE))
}

/// Prefix of a file being written; never a name a script may use.
const TEMP_PREFIX: &str = ".warden-tmp-";

/// Whether `name` is a file being written (never listed: it becomes its
/// real name, whole, or disappears).
pub fn is_temporary(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX)
}

/// A fresh temporary name for a file about to be written in place of
/// another, in the same directory.
pub fn temporary_name() -> String {
    format!("{TEMP_PREFIX}{}", uuid::Uuid::new_v4().simple())
}

fn invalid(field: &str, message: impl AsRef<str>) -> GuardError {
    GuardError::invalid_input(field, message)
}

/// Characters refused in names: C0 and C1 controls, DEL, and the Unicode
/// marks that reorder how a name is displayed (bidi embeddings, overrides,
/// isolates and directional marks), which make a listed name lie about
/// what it is.
fn refused_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}'
        )
}

/// Splits a relative file name into checked components.
pub fn components<'a>(field: &str, name: &'a str) -> Result<Vec<&'a str>, GuardError> {
    if name.is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    if name.starts_with('/') {
        return Err(invalid(
            field,
            format!("'{name}' is absolute; give a path relative to the task directory"),
        ));
    }
    if let Some(c) = name.chars().find(|c| refused_char(*c)) {
        return Err(invalid(
            field,
            format!(
                "contains the control or bidi character U+{:04X}; use printable characters only",
                u32::from(c)
            ),
        ));
    }
    let parts: Vec<&str> = name.split('/').collect();
    for part in &parts {
        if part.is_empty() || *part == "." || *part == ".." {
            return Err(invalid(
                field,
                format!("'{name}' contains '{part}'; '..', '.' and empty segments are not allowed"),
            ));
        }
        if part.starts_with(TEMP_PREFIX) {
            return Err(invalid(
                field,
                format!("'{part}' starts with '{TEMP_PREFIX}', which the server reserves"),
            ));
        }
    }
    Ok(parts)
}

/// The answer for a failed open of `what`: a link or a non-directory on
/// the way, a missing name, or another error. A remote copy
/// (`super::remote`) answers a missing file with the same errors.
pub fn io_error(field: &str, what: &str, e: nix::Error) -> GuardError {
    match e {
        nix::Error::ELOOP | nix::Error::ENOTDIR => invalid(
            field,
            format!("'{what}' is a symbolic link or not a directory; links are refused"),
        ),
        nix::Error::ENOENT => GuardError::new(
            warden_core::error::codes::NOT_FOUND,
            format!("{field}: '{what}' does not exist"),
        ),
        other => GuardError::failed(format!("{field}: cannot open '{what}': {other}")),
    }
}

fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

/// Opens the directory `name` inside `dir`, refusing a link.
pub fn open_dir_at<Fd: AsFd>(dir: &Fd, field: &str, name: &str) -> Result<OwnedFd, GuardError> {
    openat(dir, name, dir_flags(), Mode::empty()).map_err(|e| io_error(field, name, e))
}

/// Opens `path` itself as a directory (the artifacts root; following a link
/// there is the operator's choice, not a writer's).
pub fn open_root(path: &Path) -> Result<OwnedFd, GuardError> {
    nix::fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        GuardError::failed(format!(
            "cannot open the artifacts directory {}: {e}; set WARDEN_ARTIFACTS_DIR to a readable directory",
            path.display()
        ))
    })
}

/// Opens `<dir>/<parts…>` for reading: a regular file only, never a link,
/// and never blocking (a FIFO or device is refused, not waited on).
pub fn open_read_at<Fd: AsFd>(dir: &Fd, field: &str, parts: &[&str]) -> Result<File, GuardError> {
    let Some((last, dirs)) = parts.split_last() else {
        return Err(invalid(field, "must not be empty"));
    };
    let mut held: Option<OwnedFd> = None;
    for part in dirs {
        let next = match &held {
            Some(fd) => open_dir_at(fd, field, part)?,
            None => open_dir_at(dir, field, part)?,
        };
        held = Some(next);
    }
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let opened = match &held {
        Some(fd) => openat(fd, *last, flags, Mode::empty()),
        None => openat(dir, *last, flags, Mode::empty()),
    };
    let file = File::from(opened.map_err(|e| io_error(field, last, e))?);
    let meta = file
        .metadata()
        .map_err(|e| GuardError::failed(format!("{field}: {e}")))?;
    if !meta.is_file() {
        return Err(not_regular(field, last));
    }
    Ok(file)
}

/// The answer for reading `name`, which is not a regular file (a
/// directory, a FIFO, a device).
pub fn not_regular(field: &str, name: &str) -> GuardError {
    invalid(
        field,
        format!("'{name}' is not a regular file; only regular files can be read"),
    )
}

/// What a write to `<dir>/<parts…>` would change: directories it would
/// create, and the size of the regular file it would replace.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub new_dirs: usize,
    pub replaced: Option<u64>,
}

/// Looks at `<dir>/<parts…>` without changing anything.
pub fn probe_at<Fd: AsFd>(dir: &Fd, field: &str, parts: &[&str]) -> Result<Probe, GuardError> {
    let Some((last, dirs)) = parts.split_last() else {
        return Err(invalid(field, "must not be empty"));
    };
    let mut held: Option<OwnedFd> = None;
    for (i, part) in dirs.iter().enumerate() {
        let opened = match &held {
            Some(fd) => openat(fd, *part, dir_flags(), Mode::empty()),
            None => openat(dir, *part, dir_flags(), Mode::empty()),
        };
        match opened {
            Ok(fd) => held = Some(fd),
            Err(nix::Error::ENOENT) => {
                return Ok(Probe {
                    new_dirs: dirs.len() - i,
                    replaced: None,
                });
            }
            Err(e) => return Err(io_error(field, part, e)),
        }
    }
    let stat = match &held {
        Some(fd) => fstatat(fd, *last, AtFlags::AT_SYMLINK_NOFOLLOW),
        None => fstatat(dir, *last, AtFlags::AT_SYMLINK_NOFOLLOW),
    };
    match stat {
        Ok(stat) if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG => Ok(Probe {
            new_dirs: 0,
            replaced: Some(stat.st_size as u64),
        }),
        Ok(_) => Err(invalid(
            field,
            format!("'{last}' exists and is not a regular file; choose another name"),
        )),
        Err(nix::Error::ENOENT) => Ok(Probe::default()),
        Err(e) => Err(io_error(field, last, e)),
    }
}

/// How a write survives a crash of the machine. A crash of the server
/// process loses nothing either way: once renamed into place, a file is in
/// the page cache and the kernel writes it out.
///
/// A task makes its files durable once, at its end, not one by one: each
/// fsync is a journal commit and a cache flush (about 0.5 ms each on the
/// development machine, nine of them in a trivial task before), so its
/// files are written [`Durability::Deferred`] and its `result.json` is
/// the task's one [`Durability::Commit`], whose one flush is the only one
/// on the answer's path.
///
/// What the commit covers after a crash of the machine, on a journaling
/// file system (ext4, XFS): the task's names (every file renamed into
/// place before it, its directories) are in the journal it commits, and
/// the committed file is whole. A deferred file's contents may not have
/// reached the disk yet: it is then whole or empty, never torn (an empty
/// `owner.json` belongs to no one). `syncfs` would cover the contents too,
/// but it writes back every dirty page and inode of the file system, a
/// neighbour's included: a task start behind a freshly written
/// 60,000-file tree took 359 ms with it (`tests/it/governance_storage.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Atomic (readers see the old file or the whole new one); its name
    /// is durable with the next commit in its file system.
    Deferred,
    /// The commit: this file's contents are written out under a temporary
    /// name and waited for ([`write_out`]: no journal commit, no cache
    /// flush), then it is renamed into place and its directory synced:
    /// one journal commit (this file's blocks, its name and every rename
    /// made before) behind one cache flush. A crash before that commit
    /// leaves no file, never a torn one.
    Commit,
}

/// Writes `file`'s dirty pages out and waits for them, with no journal
/// commit and no cache flush (`sync_file_range`): the directory sync that
/// follows commits the blocks they were given and flushes the cache once
/// for both. Git's `core.fsyncMethod=batch` relies on the same order.
#[allow(unsafe_code)]
pub fn write_out(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let flags = nix::libc::SYNC_FILE_RANGE_WAIT_BEFORE
        | nix::libc::SYNC_FILE_RANGE_WRITE
        | nix::libc::SYNC_FILE_RANGE_WAIT_AFTER;
    // SAFETY: a system call on a descriptor `file` keeps open, with
    // integer arguments only.
    let written = unsafe { nix::libc::sync_file_range(file.as_raw_fd(), 0, 0, flags) };
    if written == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Writes `bytes` to `<dir>/<parts…>` (creating directories 0700 on the
/// way) through a temporary 0600 file renamed into place: readers see the
/// old file or the whole new one, and a failed write leaves neither a
/// truncated file nor the temporary one. See [`Durability`] for what
/// survives a crash of the machine.
pub fn write_atomic_at<Fd: AsFd>(
    dir: &Fd,
    field: &str,
    parts: &[&str],
    bytes: &[u8],
    durability: Durability,
) -> Result<(), GuardError> {
    write_atomic_with(dir, field, parts, bytes, durability, &write_out)
}

/// [`write_atomic_at`] with the commit's write-out given (a test checks
/// when a commit writes out, and what a failed write-out leaves).
fn write_atomic_with<Fd: AsFd>(
    dir: &Fd,
    field: &str,
    parts: &[&str],
    bytes: &[u8],
    durability: Durability,
    sync: &dyn Fn(&File) -> std::io::Result<()>,
) -> Result<(), GuardError> {
    let Some((last, dirs)) = parts.split_last() else {
        return Err(invalid(field, "must not be empty"));
    };
    let mut held: Option<OwnedFd> = None;
    for part in dirs {
        let parent = match &held {
            Some(fd) => fd.as_fd(),
            None => dir.as_fd(),
        };
        match nix::sys::stat::mkdirat(parent, *part, Mode::from_bits_truncate(DIR_MODE)) {
            Ok(()) | Err(nix::Error::EEXIST) => {}
            Err(e) => return Err(io_error(field, part, e)),
        }
        let next = open_dir_at(&parent, field, part)?;
        held = Some(next);
    }
    let parent = match &held {
        Some(fd) => fd.as_fd(),
        None => dir.as_fd(),
    };
    let commit = durability == Durability::Commit;
    let temp = temporary_name();
    let fd = openat(
        parent,
        temp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(FILE_MODE),
    )
    .map_err(|e| io_error(field, last, e))?;
    let mut file = File::from(fd);
    let written = file
        .write_all(bytes)
        .map_err(|e| GuardError::failed(format!("{field}: cannot write '{last}': {e}")))
        .and_then(|()| {
            if !commit {
                return Ok(());
            }
            sync(&file).map_err(|e| GuardError::failed(format!("{field}: cannot make '{last}' durable: {e}")))
        })
        .and_then(|()| {
            renameat(parent, temp.as_str(), parent, *last).map_err(|e| {
                GuardError::failed(format!(
                    "{field}: cannot put '{last}' in place: {e}; a directory or another file may hold that name"
                ))
            })
        });
    drop(file);
    if let Err(error) = written {
        let _ = unlinkat(parent, temp.as_str(), UnlinkatFlags::NoRemoveDir);
        return Err(error);
    }
    if commit {
        nix::unistd::fsync(parent).map_err(|e| {
            GuardError::failed(format!("{field}: cannot sync the directory of '{last}': {e}"))
        })?;
    }
    Ok(())
}

/// Creates (or truncates) `<dir>/<name>` for appending by the server (logs),
/// 0600, never through a link.
pub fn create_log_at<Fd: AsFd>(dir: &Fd, name: &str) -> std::io::Result<File> {
    let fd = openat(
        dir,
        name,
        OFlag::O_WRONLY
            | OFlag::O_CREAT
            | OFlag::O_TRUNC
            | OFlag::O_NOFOLLOW
            | OFlag::O_CLOEXEC
            | OFlag::O_NONBLOCK,
        Mode::from_bits_truncate(FILE_MODE),
    )?;
    let file = File::from(fd);
    make_private(&file)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_are_refused_in_names() {
        // Newlines, DEL, C1 controls and bidi overrides/isolates/marks are invalid_input on the field.
        for name in [
            "a\nb",
            "a\u{7f}",
            "a\u{85}",
            "x\u{202E}gpj.exe",
            "\u{2066}a",
            "a\u{200F}",
            "\u{061C}",
        ] {
            let error = components("filename", name).expect_err(name);
            assert_eq!(error.field.as_deref(), Some("filename"), "{name:?}");
        }
        assert!(components("filename", "réseau/données.csv").is_ok());
    }

    #[test]
    fn a_failed_write_leaves_no_file_behind() {
        // Renaming onto a non-empty directory fails: neither the name nor a temporary file is left.
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("taken/inner")).expect("dirs");
        let root = open_root(dir.path()).expect("root");
        let error =
            write_atomic_at(&root, "filename", &["taken"], b"data", Durability::Commit).expect_err("refused");
        assert!(error.message.contains("taken"), "{error:?}");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("list")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["taken".to_string()]);
    }

    #[test]
    fn written_files_are_private() {
        // Files 0600, directories 0700, whatever the umask.
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let root = open_root(dir.path()).expect("root");
        write_atomic_at(&root, "filename", &["d", "f.txt"], b"x", Durability::Deferred).expect("write");
        let mode = |p: &str| {
            std::fs::metadata(dir.path().join(p))
                .expect("meta")
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!((mode("d"), mode("d/f.txt")), (0o700, 0o600));
    }

    #[test]
    fn a_commit_syncs_before_its_file_is_in_place_and_a_failed_sync_leaves_no_file() {
        // The sync runs while the new contents sit under a temporary name
        // and the earlier (deferred) file is in place (its name is in the
        // journal the sync commits); the committed name appears only after
        // it. A sync that fails leaves no file at all.
        let dir = tempfile::tempdir().expect("temp dir");
        let root = open_root(dir.path()).expect("root");
        write_atomic_at(&root, "filename", &["before.json"], b"{}", Durability::Deferred).expect("deferred");
        let synced = std::cell::Cell::new(0);
        let check = |_: &File| {
            synced.set(synced.get() + 1);
            assert!(
                dir.path().join("before.json").exists(),
                "the earlier file is covered"
            );
            assert!(
                !dir.path().join("result.json").exists(),
                "synced before the rename"
            );
            Ok(())
        };
        write_atomic_with(
            &root,
            "filename",
            &["result.json"],
            b"{}",
            Durability::Commit,
            &check,
        )
        .expect("commit");
        assert_eq!(synced.get(), 1);
        assert!(dir.path().join("result.json").exists());

        let deferred = std::cell::Cell::new(0);
        let count = |_: &File| {
            deferred.set(deferred.get() + 1);
            Ok(())
        };
        write_atomic_with(
            &root,
            "filename",
            &["later.json"],
            b"{}",
            Durability::Deferred,
            &count,
        )
        .expect("deferred");
        assert_eq!(deferred.get(), 0, "a deferred write syncs nothing");

        let failing = |_: &File| Err(std::io::Error::from_raw_os_error(nix::libc::EIO));
        let error = write_atomic_with(
            &root,
            "filename",
            &["end.json"],
            b"{}",
            Durability::Commit,
            &failing,
        )
        .expect_err("a failed sync fails the commit");
        assert!(
            error.message.contains("durable") && error.message.contains("end.json"),
            "{error:?}"
        );
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("list")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["before.json", "later.json", "result.json"]);
    }
}
