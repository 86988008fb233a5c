//! Who owns a task: `owner.json` in its directory.
//!
//! Two owners, one record. The *principal* that created the task (see
//! [`crate::tenant`]) owns it for good: every client-facing lookup shows a
//! task only to that principal ([`super::view`]). The record is written
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

use serde_json::{Value, json};

use crate::node::start_time;
use crate::tenant::Principal;

/// The task-directory file naming the owner.
pub const OWNER_FILE: &str = "owner.json";

/// Largest owner record read: 4 KiB (a principal name is at most 256 bytes).
pub(crate) const OWNER_READ_BYTES: u64 = 4096;

/// The owner record of a task `principal` creates in this process.
pub fn record(principal: &Principal) -> Value {
    let pid = std::process::id();
    json!({"pid": pid, "start_time": start_time(pid), "principal": principal.as_str()})
}

/// The owner record of the task directory `dir`, if it has a readable one:
/// `Ok(None)` when there is no owner file, `Err(())` when it cannot be read
/// or parsed.
pub fn read_at<Fd: AsFd>(dir: &Fd) -> Result<Option<Value>, ()> {
    match super::safe_path::open_read_at(dir, "filename", &[OWNER_FILE]) {
        Ok(file) => serde_json::from_reader(file.take(OWNER_READ_BYTES))
            .map(Some)
            .map_err(drop),
        Err(error) if error.code == crate::error::codes::NOT_FOUND => Ok(None),
        Err(_) => Err(()),
    }
}

/// The principal an owner record names: `local` when it names none (a task
/// from before principals), `None` when its `principal` is not a valid name.
pub fn principal_of(owner: Option<&Value>) -> Option<Principal> {
    match owner.and_then(|o| o.get("principal")) {
        None => Some(Principal::local()),
        Some(Value::String(name)) => Principal::new(name).ok(),
        Some(_) => None,
    }
}

/// The principal owning the task directory `dir` (see the module docs):
/// `None` means no one.
pub fn principal_at<Fd: AsFd>(dir: &Fd) -> Option<Principal> {
    read_at(dir).ok().and_then(|owner| principal_of(owner.as_ref()))
}

/// Whether the process an owner record names is still that process.
pub fn alive(owner: &Value) -> bool {
    let Some(pid) = owner["pid"].as_u64().and_then(|p| u32::try_from(p).ok()) else {
        return false;
    };
    match (start_time(pid), owner["start_time"].as_u64()) {
        (Some(now), Some(then)) => now == then,
        // No start time recorded (no /proc when it was written): trust the pid.
        (Some(_), None) => true,
        (None, _) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_records_belong_to_local_and_bad_ones_to_no_one() {
        // No principal field (or no file) is `local`; a malformed name is no one.
        let alice = Principal::new("alice").expect("name");
        assert_eq!(principal_of(Some(&record(&alice))), Some(alice));
        assert_eq!(
            principal_of(Some(&json!({"pid": 1, "start_time": 2}))),
            Some(Principal::local())
        );
        assert_eq!(principal_of(None), Some(Principal::local()));
        assert_eq!(principal_of(Some(&json!({"principal": ""}))), None);
        assert_eq!(principal_of(Some(&json!({"principal": 7}))), None);
    }

    #[test]
    fn this_process_is_alive_and_a_changed_start_time_is_not() {
        // The owner check compares pid and start time, so a reused pid is dead.
        let me = record(&Principal::local());
        assert!(alive(&me));
        let mut reused = me.clone();
        reused["start_time"] = json!(me["start_time"].as_u64().unwrap_or(0) + 1);
        assert!(!alive(&reused));
        assert!(!alive(&json!({"pid": u32::MAX - 1, "start_time": 1})));
    }
}
