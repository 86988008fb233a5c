//! Per-task storage quotas for what a script writes under `outputs/`.
//!
//! The server is the only writer of a task directory, so it keeps each
//! running task's usage in memory — entries (files and directories), bytes
//! and the names written — instead of walking the tree: checking a write
//! costs one `fstatat` per component, and the task result lists its
//! artifacts from memory, so a task that flooded its outputs still ends
//! at once. A refused write changes nothing and is a catchable
//! `quota_exceeded` error naming the quota, its value and what to do.
//! The per-principal budget is checked here too, against the outputs of
//! all of that principal's running tasks ([`check_principal`]).

use std::collections::BTreeMap;

use crate::limits::{MAX_ARTIFACT_DEPTH, MAX_ARTIFACT_NAME_BYTES, MAX_ARTIFACT_PATH_BYTES};
use crate::tenant::Principal;
use warden_core::error::{GuardError, codes};

/// The per-task quotas a store enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    pub max_files: usize,
    pub max_bytes: u64,
    /// Bytes all running tasks of one (bound) principal may keep under
    /// `outputs/` together ([`crate::limits::DEFAULT_PRINCIPAL_ARTIFACT_BYTES`]).
    pub principal_max_bytes: u64,
}

/// What one running task has written under `outputs/`.
#[derive(Debug, Default)]
pub struct Usage {
    /// Files and directories created.
    pub entries: usize,
    /// Bytes of the files as they are now.
    pub bytes: u64,
    /// Files written, by name, with their size.
    pub files: BTreeMap<String, u64>,
}

fn exceeded(message: String) -> GuardError {
    GuardError::new(codes::QUOTA_EXCEEDED, message).with_field("filename")
}

/// Checks a name's shape against the depth and length quotas.
pub fn check_name(filename: &str, parts: &[&str]) -> Result<(), GuardError> {
    if parts.len() > MAX_ARTIFACT_DEPTH {
        return Err(exceeded(format!(
            "filename: '{}…' is {} levels deep; the artifact depth quota is {MAX_ARTIFACT_DEPTH} levels per name: use a flatter layout",
            cut(filename, 64),
            parts.len()
        )));
    }
    if let Some(part) = parts.iter().find(|p| p.len() > MAX_ARTIFACT_NAME_BYTES) {
        return Err(exceeded(format!(
            "filename: a component of {} bytes ('{}…') is over the name length quota of {MAX_ARTIFACT_NAME_BYTES} bytes per component: use a shorter name",
            part.len(),
            cut(part, 32)
        )));
    }
    if filename.len() > MAX_ARTIFACT_PATH_BYTES {
        return Err(exceeded(format!(
            "filename: {} bytes is over the path length quota of {MAX_ARTIFACT_PATH_BYTES} bytes per name: use a shorter path",
            filename.len()
        )));
    }
    Ok(())
}

impl Usage {
    /// Checks that a write adding `new_entries` entries and `size` bytes in
    /// place of `replaced` bytes stays within `quota`.
    pub fn check(
        &self,
        quota: Quota,
        new_entries: usize,
        size: u64,
        replaced: u64,
    ) -> Result<(), GuardError> {
        if self.entries + new_entries > quota.max_files {
            return Err(exceeded(format!(
                "filename: this task already created {} of its {} files and directories (the artifact file quota, WARDEN_TASK_MAX_FILES); write fewer, larger files (e.g. one CSV) or overwrite an existing one",
                self.entries, quota.max_files
            )));
        }
        let after = self.bytes - replaced.min(self.bytes) + size;
        if after > quota.max_bytes {
            return Err(exceeded(format!(
                "filename: writing {size} bytes would bring this task's artifacts to {after} bytes, over the artifact byte quota of {} bytes (WARDEN_TASK_MAX_MB); write less or summarize",
                quota.max_bytes
            )));
        }
        Ok(())
    }

    /// Records a write that `check` allowed and that succeeded.
    pub fn record(&mut self, filename: &str, new_entries: usize, size: u64, replaced: u64) {
        self.entries += new_entries;
        self.bytes = self.bytes - replaced.min(self.bytes) + size;
        self.files.insert(filename.to_string(), size);
    }
}

/// Checks that writing `size` bytes in place of `replaced` keeps the
/// running tasks of `principal`, which hold `running_bytes` now, within
/// the principal's artifact budget.
pub fn check_principal(
    principal: &Principal,
    quota: Quota,
    running_bytes: u64,
    size: u64,
    replaced: u64,
) -> Result<(), GuardError> {
    let after = running_bytes.saturating_sub(replaced) + size;
    if after > quota.principal_max_bytes {
        return Err(exceeded(format!(
            "filename: writing {size} bytes would bring the artifacts of the running tasks of principal '{principal}' to {after} bytes, over its artifact budget of {} bytes (WARDEN_PRINCIPAL_ARTIFACT_MB); write less or summarize",
            quota.principal_max_bytes
        )));
    }
    Ok(())
}

/// At most `max` bytes of `text`, cut on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_name_the_limit_and_overwrites_count_once() {
        // Files and bytes are refused past the quota; an overwrite adds no entry and replaces its bytes.
        let quota = Quota {
            max_files: 2,
            max_bytes: 10,
            principal_max_bytes: 100,
        };
        let mut usage = Usage::default();
        usage.check(quota, 1, 6, 0).expect("fits");
        usage.record("a", 1, 6, 0);
        let error = usage.check(quota, 1, 5, 0).expect_err("bytes");
        assert_eq!(error.code, "quota_exceeded");
        assert!(error.message.contains("10 bytes"), "{}", error.message);
        usage.check(quota, 0, 9, 6).expect("overwrite fits");
        usage.record("a", 0, 9, 6);
        assert_eq!((usage.entries, usage.bytes), (1, 9));
        usage.record("b", 1, 0, 0);
        let error = usage.check(quota, 1, 0, 0).expect_err("files");
        assert!(error.message.contains("2 files"), "{}", error.message);
    }

    #[test]
    fn the_principal_budget_counts_all_its_running_tasks() {
        // 90 bytes held elsewhere + 20 is over a 100-byte budget; replacing 10 of them fits.
        let quota = Quota {
            max_files: 10,
            max_bytes: 1000,
            principal_max_bytes: 100,
        };
        let alice = Principal::new("alice").expect("name");
        let error = check_principal(&alice, quota, 90, 20, 0).expect_err("over");
        assert_eq!(error.code, "quota_exceeded");
        assert!(
            error.message.contains("WARDEN_PRINCIPAL_ARTIFACT_MB") && error.message.contains("'alice'"),
            "{}",
            error.message
        );
        check_principal(&alice, quota, 90, 20, 10).expect("an overwrite fits");
    }

    #[test]
    fn depth_and_length_quotas() {
        // Too deep, a too-long component and a too-long path are each quota_exceeded.
        let deep: Vec<&str> = vec!["d"; MAX_ARTIFACT_DEPTH + 1];
        assert_eq!(check_name("d/…", &deep).expect_err("deep").code, "quota_exceeded");
        let long = "x".repeat(MAX_ARTIFACT_NAME_BYTES + 1);
        assert!(check_name(&long, &[&long]).is_err());
        let part = "y".repeat(200);
        let parts = vec![part.as_str(); 6];
        assert!(check_name(&parts.join("/"), &parts).is_err());
        assert!(check_name("a/b.csv", &["a", "b.csv"]).is_ok());
    }
}
