//! Which process owns a running task: `owner.json` in its directory.
//!
//! A task directory without `result.json` is either running or was left by
//! a server that died. The owner file records the server's pid and the
//! start time of that process (field 22 of `/proc/<pid>/stat`, so a reused
//! pid is not mistaken for the owner); a task whose owner is gone is marked
//! `interrupted` when a server opens the store.

use serde_json::{Value, json};

/// The task-directory file naming the owner.
pub const OWNER_FILE: &str = "owner.json";

/// The start time of `pid` in clock ticks since boot, if it is alive.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count
    // fields from the last ')'. Field 3 is the first after it.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// The owner record of this process.
pub fn this_process() -> Value {
    let pid = std::process::id();
    json!({"pid": pid, "start_time": start_time(pid)})
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
    fn this_process_is_alive_and_a_changed_start_time_is_not() {
        // The owner check compares pid and start time, so a reused pid is dead.
        let me = this_process();
        assert!(alive(&me));
        let mut reused = me.clone();
        reused["start_time"] = json!(me["start_time"].as_u64().unwrap_or(0) + 1);
        assert!(!alive(&reused));
        assert!(!alive(&json!({"pid": u32::MAX - 1, "start_time": 1})));
    }
}
