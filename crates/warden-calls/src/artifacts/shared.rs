//! One copy of the files many tasks hold with the same bytes.
//!
//! Every task directory has a `registry.json`, the guards its caller could
//! see, byte for byte the same for every task under one registry and
//! policy. Each distinct content is written once, under
//! `<root>/.shared/<sha256 of the bytes>`, and hard-linked into each task
//! directory: a new name, not a new inode.
//!
//! Why: on ext4 without a journal, creating an inode skips every inode of
//! its block group deleted in the last minutes (`recently_deleted`), one
//! lookup each, so where tasks come and go (retention removes one for each
//! one made) every inode a task creates costs 0.1–0.3 ms, and every one it
//! frees makes the next ones dearer (docs/benchmarks.md, eighth round).
//!
//! A link is safe to share because nothing Warden does writes a task file
//! in place: every write puts a new file over the name
//! ([`super::safe_path::write_atomic_at`]), which leaves the shared copy
//! and every other link as they were. Only files that are snapshots, read
//! and never edited, are shared: `owner.json` is not (an operator handing
//! one task to someone else edits it, and must not hand over its siblings).
//! A shared copy is made durable once (its data, then its name), so a
//! task's commit, which syncs its own directory, makes the task's link
//! durable with contents that already are. Sizes are counted in each task
//! that links them (retention and quotas: an overcount, never an
//! undercount). A copy no task links any more (link count 1) is removed by
//! the retention pass ([`sweep`]); a copy at the file system's link limit
//! is replaced by a fresh one, so the next tasks link that. Where the file
//! system refuses links, the task gets its own copy, as before.

use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::Mode;
use nix::unistd::{UnlinkatFlags, linkat, unlinkat};

use super::safe_path::{self, DIR_MODE, Durability, FILE_MODE};
use warden_core::error::GuardError;

/// The directory of shared copies, under the artifacts root. Hidden, and
/// not a `task_` name, so no listing of tasks sees it.
pub(crate) const SHARED_DIR: &str = ".shared";

/// How long an unlinked shared copy (or a temporary one) is kept before a
/// retention pass removes it: a copy is linked within microseconds of being
/// written, so a minute never removes one a task is about to link — and
/// if it did, the task writes it again ([`link_at`]).
pub(crate) const SHARED_GRACE: Duration = Duration::from_secs(60);

/// Puts `name` in the task directory `dir` as a link to the one copy of
/// `bytes` under the artifacts root `root`, replacing a file of that name;
/// writes the task its own copy ([`Durability::Deferred`]) when the file
/// system will not link.
pub(crate) fn link_at<Fd: AsFd>(
    root: &OwnedFd,
    dir: &Fd,
    name: &str,
    bytes: &[u8],
) -> Result<(), GuardError> {
    if link(root, dir, name, bytes).is_ok() {
        return Ok(());
    }
    safe_path::write_atomic_at(dir, "filename", &[name], bytes, Durability::Deferred)
}

fn link<Fd: AsFd>(root: &OwnedFd, dir: &Fd, name: &str, bytes: &[u8]) -> nix::Result<()> {
    link_with(root, dir.as_fd(), name, bytes, &hard_link)
}

/// Links `shared/key` as `dir/name`.
type Linker = dyn Fn(&OwnedFd, &str, BorrowedFd<'_>, &str) -> nix::Result<()>;

fn hard_link(shared: &OwnedFd, key: &str, dir: BorrowedFd<'_>, name: &str) -> nix::Result<()> {
    linkat(shared, key, dir, name, AtFlags::empty())
}

/// [`link`] with the link itself given (a test stands in a file system
/// whose link limit is low).
fn link_with(
    root: &OwnedFd,
    dir: BorrowedFd<'_>,
    name: &str,
    bytes: &[u8],
    make_link: &Linker,
) -> nix::Result<()> {
    let key = key_of(bytes);
    let key = key.as_str();
    let shared = open_shared_dir(root)?;
    // At most twice: the copy may be missing (first use, or swept) or at
    // its link limit, and is then written afresh once.
    for attempt in 0..2 {
        match make_link(&shared, key, dir, name) {
            Ok(()) => return Ok(()),
            Err(nix::Error::EEXIST) => return replace_with_link(&shared, key, &dir, name),
            Err(nix::Error::ENOENT | nix::Error::EMLINK) if attempt == 0 => write_copy(&shared, key, bytes)?,
            Err(error) => return Err(error),
        }
    }
    Err(nix::Error::ENOENT)
}

/// The name of the copy of `bytes`: their SHA-256, in hex.
fn key_of(bytes: &[u8]) -> String {
    let digest = warden_core::receipt::sha256_hex(bytes);
    digest.trim_start_matches("sha256:").to_string()
}

/// `name` exists in `dir` (a task resumed in its old directory): the link
/// is made under a temporary name and renamed over it.
fn replace_with_link<Fd: AsFd>(shared: &OwnedFd, key: &str, dir: &Fd, name: &str) -> nix::Result<()> {
    let temp = safe_path::temporary_name();
    linkat(shared, key, dir, temp.as_str(), AtFlags::empty())?;
    renameat(dir, temp.as_str(), dir, name).inspect_err(|_| {
        let _ = unlinkat(dir, temp.as_str(), UnlinkatFlags::NoRemoveDir);
    })
}

/// Opens `.shared`, making it (durably) the first time.
fn open_shared_dir(root: &OwnedFd) -> nix::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match openat(root, SHARED_DIR, flags, Mode::empty()) {
        Err(nix::Error::ENOENT) => {
            match nix::sys::stat::mkdirat(root, SHARED_DIR, Mode::from_bits_truncate(DIR_MODE)) {
                Ok(()) => nix::unistd::fsync(root)?,
                Err(nix::Error::EEXIST) => {}
                Err(error) => return Err(error),
            }
            openat(root, SHARED_DIR, flags, Mode::empty())
        }
        opened => opened,
    }
}

/// Writes the copy `key` of `bytes` whole and durable (its data, then its
/// name), over any copy of that name (one at its link limit keeps serving
/// the tasks that link it).
fn write_copy(shared: &OwnedFd, key: &str, bytes: &[u8]) -> nix::Result<()> {
    let temp = safe_path::temporary_name();
    let fd = openat(
        shared,
        temp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(FILE_MODE),
    )?;
    let mut file = std::fs::File::from(fd);
    let written = file
        .write_all(bytes)
        .map_err(|e| e.raw_os_error().map_or(nix::Error::EIO, nix::Error::from_raw))
        .and_then(|()| nix::unistd::fsync(&file))
        .and_then(|()| renameat(shared, temp.as_str(), shared, key));
    drop(file);
    if let Err(error) = written {
        let _ = unlinkat(shared, temp.as_str(), UnlinkatFlags::NoRemoveDir);
        return Err(error);
    }
    nix::unistd::fsync(shared)
}

/// Removes the shared copies no task links any more, and temporary files a
/// crash left, once older than [`SHARED_GRACE`] (a retention pass).
pub(crate) fn sweep(root: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(listing) = std::fs::read_dir(root.join(SHARED_DIR)) else {
        return;
    };
    for entry in listing.flatten() {
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let unlinked = meta.nlink() <= 1 || safe_path::is_temporary(&entry.file_name().to_string_lossy());
        if meta.is_file() && unlinked && super::retention::age(&meta) > SHARED_GRACE {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether `dir/name` is a link to a shared copy (tests).
#[cfg(test)]
pub(crate) fn is_shared<Fd: AsFd>(dir: &Fd, name: &str) -> bool {
    nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| st.st_nlink > 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs() -> (tempfile::TempDir, OwnedFd, OwnedFd, OwnedFd) {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(tmp.path().join("task_a")).expect("task_a");
        std::fs::create_dir(tmp.path().join("task_b")).expect("task_b");
        let root = safe_path::open_root(tmp.path()).expect("root");
        let a = safe_path::open_dir_at(&root, "t", "task_a").expect("a");
        let b = safe_path::open_dir_at(&root, "t", "task_b").expect("b");
        (tmp, root, a, b)
    }

    #[test]
    fn tasks_with_the_same_bytes_share_one_inode_and_a_rewrite_touches_only_its_own() {
        use std::os::unix::fs::MetadataExt;
        let (tmp, root, a, b) = dirs();
        link_at(&root, &a, "registry.json", b"{\"tools\":1}").expect("a");
        link_at(&root, &b, "registry.json", b"{\"tools\":1}").expect("b");
        let meta_a = std::fs::metadata(tmp.path().join("task_a/registry.json")).expect("meta a");
        let meta_b = std::fs::metadata(tmp.path().join("task_b/registry.json")).expect("meta b");
        assert_eq!(meta_a.ino(), meta_b.ino(), "one inode for both");
        assert_eq!(meta_a.nlink(), 3, "the shared copy and two tasks");
        assert_eq!(meta_a.mode() & 0o777, FILE_MODE);
        // A task resumed in its directory links new bytes over its old file.
        link_at(&root, &a, "registry.json", b"{\"tools\":2}").expect("a again");
        let read =
            |task: &str| std::fs::read_to_string(tmp.path().join(task).join("registry.json")).expect("read");
        assert_eq!(read("task_a"), "{\"tools\":2}");
        assert_eq!(
            read("task_b"),
            "{\"tools\":1}",
            "the other task's file is as it was"
        );
        // A write over the name replaces the link, never the shared copy.
        safe_path::write_atomic_at(&b, "filename", &["registry.json"], b"own", Durability::Deferred)
            .expect("own");
        assert_eq!(read("task_b"), "own");
        assert!(!is_shared(&b, "registry.json"));
        let copy = tmp.path().join(SHARED_DIR).join(key_of(b"{\"tools\":1}"));
        assert_eq!(std::fs::read_to_string(&copy).expect("copy"), "{\"tools\":1}");
        // No temporary file is left anywhere.
        for dir in ["task_a", "task_b", SHARED_DIR] {
            let names: Vec<String> = std::fs::read_dir(tmp.path().join(dir))
                .expect("list")
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            assert!(
                names.iter().all(|n| !safe_path::is_temporary(n)),
                "{dir}: {names:?}"
            );
        }
    }

    #[test]
    fn a_copy_at_its_link_limit_is_replaced_and_its_tasks_keep_theirs() {
        // A file system that allows one task per copy: the second task gets a fresh copy.
        use std::os::unix::fs::MetadataExt;
        let (tmp, root, a, b) = dirs();
        let at_most_two =
            |shared: &OwnedFd, key: &str, dir: BorrowedFd<'_>, name: &str| match nix::sys::stat::fstatat(
                shared,
                key,
                AtFlags::AT_SYMLINK_NOFOLLOW,
            ) {
                Ok(st) if st.st_nlink >= 2 => Err(nix::Error::EMLINK),
                _ => hard_link(shared, key, dir, name),
            };
        link_with(&root, a.as_fd(), "registry.json", b"same", &at_most_two).expect("a");
        link_with(&root, b.as_fd(), "registry.json", b"same", &at_most_two).expect("b");
        let meta = |task: &str| std::fs::metadata(tmp.path().join(task).join("registry.json")).expect("meta");
        assert_ne!(meta("task_a").ino(), meta("task_b").ino(), "b links a fresh copy");
        let copy = std::fs::metadata(tmp.path().join(SHARED_DIR).join(key_of(b"same"))).expect("copy");
        assert_eq!(
            copy.ino(),
            meta("task_b").ino(),
            "the shared name is the fresh copy"
        );
        assert_eq!(meta("task_a").nlink(), 1, "a keeps the old one");
        for task in ["task_a", "task_b"] {
            assert_eq!(
                std::fs::read(tmp.path().join(task).join("registry.json")).expect("read"),
                b"same"
            );
        }
    }

    #[test]
    fn a_swept_or_missing_copy_is_written_again_and_only_unlinked_old_copies_are_swept() {
        use std::os::unix::fs::MetadataExt;
        let (tmp, root, a, b) = dirs();
        link_at(&root, &a, "snapshot.json", b"one").expect("one");
        link_at(&root, &a, "registry.json", b"two").expect("two");
        let shared = tmp.path().join(SHARED_DIR);
        let one = shared.join(key_of(b"one"));
        let two = shared.join(key_of(b"two"));
        // "two" loses its only task; both copies are made old.
        std::fs::remove_file(tmp.path().join("task_a/registry.json")).expect("unlink");
        let old = std::time::SystemTime::now() - SHARED_GRACE - Duration::from_secs(5);
        for copy in [&one, &two] {
            std::fs::File::options()
                .write(true)
                .open(copy)
                .and_then(|f| f.set_modified(old))
                .expect("age");
        }
        sweep(tmp.path());
        assert!(one.exists(), "a copy a task links stays");
        assert!(!two.exists(), "an old copy no task links goes");
        // The next task with those bytes writes the copy again.
        link_at(&root, &b, "registry.json", b"two").expect("again");
        assert_eq!(std::fs::metadata(&two).expect("two").nlink(), 2);
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("task_b/registry.json")).expect("read"),
            "two"
        );
        // A young unlinked copy is kept (a task may be about to link it).
        std::fs::remove_file(tmp.path().join("task_b/registry.json")).expect("unlink b");
        sweep(tmp.path());
        assert!(two.exists());
    }
}
