//! Who owns a task: `owner.json` in its directory.
//!
//! Two owners, one record. The *principal* that created the task (see
//! [`crate::tenant`]) owns it for good: every client-facing lookup shows a
//! task only to that principal (`super::view`). The record is written
//! durably before the task directory gets its name, so a task is never
//! visible without it. Tasks recorded before principals existed (no
//! `principal` field, or no owner file at all) belong to `local`; a record
//! that cannot be read belongs to no one, so nobody sees that task.
//!
//! The *server process* running the task owns it until it ends: a task
//! directory without `result.json` is either running or was left by a
//! server that died. The record holds the server's pid and the start time
//! of that process (field 22 of `/proc/<pid>/stat`, so a reused pid is not
//! mistaken for the owner); a task whose process is gone is marked
//! `interrupted` when a server opens the store.

use std::io::Read;
use std::os::fd::AsFd;

use serde::{Deserialize, Serialize};

use crate::node::start_time;
use crate::tenant::Principal;

/// The task-directory file naming the owner.
pub const OWNER_FILE: &str = "owner.json";

/// Largest owner record read: 4 KiB (a principal name is at most 256 bytes).
pub const OWNER_READ_BYTES: u64 = 4096;

/// The record in `owner.json`. Every field is optional when read, so
/// records from older servers still parse; a record whose fields have the
/// wrong types does not parse, and then belongs to no one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerRecord {
    /// The server process running the task; none means not alive.
    #[serde(default)]
    pub pid: Option<u32>,
    /// That process's start time (field 22 of `/proc/<pid>/stat`); none
    /// when it could not be read, and then the pid alone is trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<u64>,
    /// The principal that created the task; none means `local` (a task
    /// from before principals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
}

impl OwnerRecord {
    /// The record of a task `principal` creates in this process.
    pub fn new(principal: &Principal) -> Self {
        // This process's start, read from /proc once (`Node::this`), not
        // once per task.
        let this = crate::node::Node::this();
        Self {
            pid: Some(this.pid),
            start_time: this.start,
            principal: Some(principal.as_str().to_string()),
        }
    }

    /// A record read from bytes (a local file or a remote copy): `None`
    /// when they are not an owner record.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }

    /// The record as the bytes of `owner.json`.
    pub fn to_bytes(&self) -> Vec<u8> {
        // A struct of integers and a string always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Whether the process this record names is still that process.
    pub fn alive(&self) -> bool {
        let Some(pid) = self.pid else {
            return false;
        };
        match (start_time(pid), self.start_time) {
            (Some(now), Some(then)) => now == then,
            // No start time recorded (no /proc when it was written): trust the pid.
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

/// The owner record of the task directory `dir`, if it has a readable one:
/// `Ok(None)` when there is no owner file, `Err(())` when it cannot be read
/// or parsed.
pub(crate) fn read_at<Fd: AsFd>(dir: &Fd) -> Result<Option<OwnerRecord>, ()> {
    match super::safe_path::open_read_at(dir, "filename", &[OWNER_FILE]) {
        Ok(file) => {
            // One read, not serde's byte at a time through an unbuffered file.
            let mut bytes = Vec::new();
            file.take(OWNER_READ_BYTES)
                .read_to_end(&mut bytes)
                .map_err(drop)?;
            serde_json::from_slice(&bytes).map(Some).map_err(drop)
        }
        Err(error) if error.code == warden_core::error::codes::NOT_FOUND => Ok(None),
        Err(_) => Err(()),
    }
}

/// The principal an owner record names: `local` when there is no record or
/// it names none (a task from before principals), `None` when its
/// `principal` is not a valid name.
pub fn principal_of(owner: Option<&OwnerRecord>) -> Option<Principal> {
    match owner.and_then(|o| o.principal.as_deref()) {
        None => Some(Principal::local()),
        Some(name) => Principal::new(name).ok(),
    }
}

/// The principal owning the task directory `dir` (see the module docs):
/// `None` means no one.
pub fn principal_at<Fd: AsFd>(dir: &Fd) -> Option<Principal> {
    read_at(dir).ok().and_then(|owner| principal_of(owner.as_ref()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn from(value: serde_json::Value) -> Option<OwnerRecord> {
        OwnerRecord::parse(value.to_string().as_bytes())
    }

    #[test]
    fn legacy_records_belong_to_local_and_bad_ones_to_no_one() {
        // No principal field (or no file) is `local`; a malformed name is no one.
        let alice = Principal::new("alice").expect("name");
        assert_eq!(principal_of(Some(&OwnerRecord::new(&alice))), Some(alice));
        assert_eq!(
            principal_of(from(json!({"pid": 1, "start_time": 2})).as_ref()),
            Some(Principal::local())
        );
        assert_eq!(principal_of(None), Some(Principal::local()));
        assert_eq!(principal_of(from(json!({"principal": ""})).as_ref()), None);
        // A principal that is not a string is not an owner record at all.
        assert_eq!(from(json!({"principal": 7})), None);
    }

    #[test]
    fn the_record_reads_back_as_written() {
        let record = OwnerRecord::new(&Principal::new("bob").expect("name"));
        let text = String::from_utf8(record.to_bytes()).expect("utf-8");
        assert!(text.contains("\"principal\":\"bob\""), "{text}");
        assert_eq!(OwnerRecord::parse(text.as_bytes()), Some(record));
    }

    #[test]
    fn this_process_is_alive_and_a_changed_start_time_is_not() {
        // The owner check compares pid and start time, so a reused pid is dead.
        let me = OwnerRecord::new(&Principal::local());
        assert!(me.alive());
        let reused = OwnerRecord {
            start_time: Some(me.start_time.unwrap_or(0) + 1),
            ..me.clone()
        };
        assert!(!reused.alive());
        let gone = from(json!({"pid": u32::MAX - 1, "start_time": 1})).expect("a record");
        assert!(!gone.alive());
        assert!(!from(json!({"principal": "alice"})).expect("a record").alive());
    }
}
