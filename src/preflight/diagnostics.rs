//! The private directory where preflight leaves what it saw: the server's
//! stderr, the raw MCP transcript and a copy of the report.
//!
//! Created once per run, mode 0700, under `<artifacts>/.diagnostics/` when
//! that is writable, else as a fresh temp directory. Older preflight
//! directories beyond [`KEEP_PREFLIGHT_DIRS`] are removed so repeated runs do
//! not pile up.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Preflight diagnostics directories kept under `<artifacts>/.diagnostics`:
/// 10. Creating an eleventh removes the oldest. Temp-dir fallbacks are not
/// pruned (the OS temp cleaner owns them).
pub const KEEP_PREFLIGHT_DIRS: usize = 10;

const PREFIX: &str = "preflight-";

/// Creates this run's diagnostics directory.
pub(crate) fn create(artifacts_dir: &Path) -> std::io::Result<PathBuf> {
    let absolute = std::path::absolute(artifacts_dir).unwrap_or_else(|_| artifacts_dir.to_path_buf());
    let parent = absolute.join(".diagnostics");
    let stamp = humantime::format_rfc3339_seconds(SystemTime::now())
        .to_string()
        .replace(':', "");
    let name = format!(
        "{PREFIX}{stamp}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let preferred = parent.join(name);
    let created = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&preferred)
        .and_then(|()| std::fs::set_permissions(&preferred, std::fs::Permissions::from_mode(0o700)));
    if created.is_ok() {
        prune(&parent);
        return Ok(preferred);
    }
    create_temporary()
}

/// A private diagnostics directory under the system's temporary directory
/// (tempfile creates it with mode 0700), kept after the run.
pub(crate) fn create_temporary() -> std::io::Result<PathBuf> {
    let dir = tempfile::Builder::new().prefix("warden-preflight-").tempdir()?;
    Ok(dir.keep())
}

/// Removes the oldest `preflight-*` directories beyond the keep count.
fn prune(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(PREFIX))
        .map(|e| e.path())
        .collect();
    // Names start with a UTC timestamp, so name order is age order.
    dirs.sort_unstable();
    let excess = dirs.len().saturating_sub(KEEP_PREFLIGHT_DIRS);
    for old in dirs.into_iter().take(excess) {
        let _ = std::fs::remove_dir_all(old);
    }
}
