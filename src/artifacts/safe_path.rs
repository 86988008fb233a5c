//! Opening files inside a task directory without ever following a link.
//!
//! Names are checked first (relative, no `..`, no empty or hidden-escape
//! components), then every component is opened with `O_NOFOLLOW` relative
//! to the directory before it (`openat`). A symlink swapped in between a
//! check and the open is therefore still refused: there is no separate check.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::Path;

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use crate::error::GuardError;

fn invalid(field: &str, message: impl AsRef<str>) -> GuardError {
    GuardError::invalid_input(field, message)
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
    let parts: Vec<&str> = name.split('/').collect();
    for part in &parts {
        if part.is_empty() || *part == "." || *part == ".." {
            return Err(invalid(
                field,
                format!("'{name}' contains '{part}'; '..', '.' and empty segments are not allowed"),
            ));
        }
        if part.contains('\0') {
            return Err(invalid(field, "contains a NUL byte"));
        }
    }
    Ok(parts)
}

/// Opens `root/<parts…>` for reading; every component must be a real
/// directory or file, never a symlink.
pub fn open_read(root: &Path, field: &str, parts: &[&str]) -> Result<File, GuardError> {
    open_in(root, field, parts, OFlag::O_RDONLY, false)
}

/// Creates (or truncates) `root/<parts…>`, creating directories on the way.
pub fn open_write(root: &Path, field: &str, parts: &[&str]) -> Result<File, GuardError> {
    open_in(
        root,
        field,
        parts,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_TRUNC,
        true,
    )
}

fn open_in(
    root: &Path,
    field: &str,
    parts: &[&str],
    flags: OFlag,
    create_dirs: bool,
) -> Result<File, GuardError> {
    let io = |e: nix::Error, what: &str| -> GuardError {
        match e {
            nix::Error::ELOOP | nix::Error::ENOTDIR => invalid(
                field,
                format!("'{what}' is a symbolic link or not a directory; links are refused"),
            ),
            nix::Error::ENOENT => GuardError::new("not_found", format!("{field}: '{what}' does not exist")),
            other => GuardError::failed(format!("{field}: cannot open '{what}': {other}")),
        }
    };
    let dir_flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut dir: OwnedFd =
        nix::fcntl::open(root, dir_flags, Mode::empty()).map_err(|e| io(e, &root.display().to_string()))?;
    let Some((last, dirs)) = parts.split_last() else {
        return Err(invalid(field, "must not be empty"));
    };
    for part in dirs {
        if create_dirs {
            match nix::sys::stat::mkdirat(&dir, *part, Mode::from_bits_truncate(0o755)) {
                Ok(()) | Err(nix::Error::EEXIST) => {}
                Err(e) => return Err(io(e, part)),
            }
        }
        dir = openat(&dir, *part, dir_flags, Mode::empty()).map_err(|e| io(e, part))?;
    }
    let file = openat(
        &dir,
        *last,
        flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o644),
    )
    .map_err(|e| io(e, last))?;
    let file = File::from(file);
    let meta = file
        .metadata()
        .map_err(|e| GuardError::failed(format!("{field}: {e}")))?;
    if !meta.is_file() {
        return Err(invalid(field, format!("'{last}' is not a regular file")));
    }
    Ok(file)
}
