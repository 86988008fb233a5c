//! This server process's identity (its *node*), and whether the process
//! a name names still runs.
//!
//! A node is named `host/pid/start`: the host (`WARDEN_NODE_ID` when set,
//! e.g. a pod name; else the host name), the process id and that
//! process's start time in clock ticks since boot (field 22 of
//! `/proc/<pid>/stat`), so a reused pid is not mistaken for the node. Every
//! event record and task span carries it, and a task record names the node
//! running it. A running task whose node is gone on this host was left by
//! a server that died: it is ended `interrupted` when any server opens the
//! store, and whenever a client asks about it. A node on another host
//! cannot be checked this way and is taken to be alive: its lease decides
//! (see `task::records`). `WARDEN_NODE_ID` must differ between hosts.

/// The start time of `pid` in clock ticks since boot, if it is alive.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count
    // fields from the last ')'. Field 3 is the first after it.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// This server process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub host: String,
    pub pid: u32,
    pub start: Option<u64>,
}

impl Node {
    /// The process this code runs in (computed once).
    pub fn this() -> Self {
        static THIS: std::sync::OnceLock<Node> = std::sync::OnceLock::new();
        THIS.get_or_init(Self::compute).clone()
    }

    fn compute() -> Self {
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

/// This node's host part: `WARDEN_NODE_ID`, else the host name
/// (`/proc/sys/kernel/hostname`), else `localhost`; never containing `/`.
fn host_name() -> String {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        warden_core::config::var("WARDEN_NODE_ID")
            .filter(|id| !id.trim().is_empty())
            .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
            .map(|name| name.trim().replace('/', "_"))
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| "localhost".into())
    })
    .clone()
}

/// This node's name, as records and events carry it.
pub fn name() -> String {
    name_ref().to_string()
}

/// [`name`], borrowed (every event record carries it).
pub fn name_ref() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| Node::this().name())
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
