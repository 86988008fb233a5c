//! Which server process runs a task, and whether it still does.
//!
//! A record names its server as `host/pid/start`: the host name, the
//! process id and that process's start time in clock ticks since boot
//! (field 22 of `/proc/<pid>/stat`), so a reused pid is not mistaken for
//! the server. A running record whose server is gone on this host was
//! left by a server that died: it is ended `interrupted` when any server
//! opens the store, and whenever a client asks about it. A server on
//! another host cannot be checked this way and is taken to be alive.

use crate::artifacts::owner::start_time;

/// This server process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub host: String,
    pub pid: u32,
    pub start: Option<u64>,
}

impl Node {
    /// The process this code runs in.
    pub fn this() -> Self {
        let pid = std::process::id();
        Self {
            host: host_name(),
            pid,
            start: start_time(pid),
        }
    }

    /// The name stored in a record.
    pub fn name(&self) -> String {
        match self.start {
            Some(start) => format!("{}/{}/{start}", self.host, self.pid),
            None => format!("{}/{}/-", self.host, self.pid),
        }
    }

    /// The node a stored name names, if it is well formed.
    pub fn parse(name: &str) -> Option<Self> {
        let mut parts = name.rsplitn(3, '/');
        let start = parts.next()?;
        let pid = parts.next()?.parse().ok()?;
        let host = parts.next()?.to_string();
        Some(Self {
            host,
            pid,
            start: start.parse().ok(),
        })
    }
}

/// Whether the server a record names may still be running its task:
/// `false` only when it is on this host and its process is gone (or the
/// pid now belongs to another process). A name that cannot be read is
/// taken as gone.
pub fn alive(name: &str) -> bool {
    let Some(node) = Node::parse(name) else {
        return false;
    };
    if node.host != host_name() {
        return true;
    }
    match (start_time(node.pid), node.start) {
        (Some(now), Some(then)) => now == then,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// This machine's host name (`/proc/sys/kernel/hostname`), or `localhost`.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty() && !name.contains('/'))
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_dead_or_reused_pid_is_not() {
        let me = Node::this();
        assert!(alive(&me.name()));
        assert_eq!(Node::parse(&me.name()), Some(me.clone()));
        // Same pid, another start time: the pid was reused.
        let reused = Node {
            start: me.start.map(|s| s + 1),
            ..me.clone()
        };
        assert!(!alive(&reused.name()));
        // A pid beyond pid_max is never alive.
        let gone = Node {
            pid: u32::MAX - 1,
            ..me.clone()
        };
        assert!(!alive(&gone.name()));
        // Another host cannot be checked from here.
        let remote = Node {
            host: "elsewhere".into(),
            pid: u32::MAX - 1,
            ..me
        };
        assert!(alive(&remote.name()));
        assert!(!alive("garbage"));
    }
}
