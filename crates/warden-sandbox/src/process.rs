//! Process confinement applied to every worker between fork and exec.
//!
//! Each worker gets its own session and process group (so one `killpg` kills
//! it and anything it started), dies with the server (PDEATHSIG), runs
//! under rlimits, starts from an allow-listed environment
//! ([`crate::env`], [`scrub_env`]),
//! inherits no descriptor but its stdio (every other one is marked
//! close-on-exec), can never gain privileges (`PR_SET_NO_NEW_PRIVS`) and
//! holds no capability: bounding, ambient, effective, permitted and
//! inheritable sets are all emptied, so even a worker running as root
//! cannot mount, trace, change owners or load modules. Only
//! async-signal-safe calls happen in [`confine`]: the closure runs in the
//! forked child before `exec`.

use std::collections::BTreeSet;
use std::io;
use std::sync::Mutex;

use nix::libc;
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::limits::{DEFAULT_WORKER_CPU_GRACE_SECS, WorkerLimits};

/// What a worker receives when the server dies without killing it (a
/// SIGKILL of the server): SIGTERM, not SIGKILL, because a guard worker
/// turns it into a SIGKILL of its whole process group, so processes a
/// guard started die with the server too. A worker that has not set that
/// up yet, and every script worker, dies by SIGTERM's default action.
pub const PARENT_DEATH_SIGNAL: Signal = Signal::SIGTERM;

pub use crate::env::{scrub_env, worker_env};

/// The rlimits for one worker, fixed before the fork.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rlimits {
    pub memory: u64,
    pub cpu_seconds: u64,
    pub open_files: u64,
    pub file_size: u64,
}

impl Rlimits {
    /// Limits for a worker whose wall-clock budget is `timeout_secs`.
    pub fn for_call(limits: &WorkerLimits, timeout_secs: u64) -> Self {
        Self {
            memory: limits.worker_memory,
            cpu_seconds: timeout_secs.max(1) + DEFAULT_WORKER_CPU_GRACE_SECS,
            open_files: limits.worker_open_files,
            file_size: limits.worker_file_size,
        }
    }
}

/// Arranges for `command`'s child to start in a new session, die with this
/// process, run under `rlimits`, inherit no extra descriptor, and hold no
/// privilege. Call [`scrub_env`] too.
pub fn confine(command: &mut tokio::process::Command, rlimits: Rlimits) {
    confine_std(command.as_std_mut(), rlimits);
}

/// [`confine`] for a `std` command (the worker zygote is started from a
/// thread of its own, outside the runtime).
#[allow(unsafe_code)]
pub fn confine_std(command: &mut std::process::Command, rlimits: Rlimits) {
    use std::os::unix::process::CommandExt as _;
    let parent = nix::unistd::getpid();
    // SAFETY: the closure only makes async-signal-safe system calls (setsid,
    // prctl, getppid, getrlimit, setrlimit, close_range, fcntl, capset) and
    // allocates nothing.
    unsafe {
        command.pre_exec(move || {
            enter_own_session(parent)?;
            close_inherited_descriptors();
            apply_rlimits(rlimits)?;
            nix::sys::prctl::set_no_new_privs().map_err(io::Error::from)?;
            drop_capabilities()
        });
    }
}

/// The first steps of every worker, in the child of `parent`'s fork: a
/// session and process group of its own, and [`PARENT_DEATH_SIGNAL`] when
/// `parent` dies. Refuses to go on when `parent` already died between the
/// fork and the `prctl` (no signal would ever come). Async-signal-safe.
pub fn enter_own_session(parent: nix::unistd::Pid) -> io::Result<()> {
    nix::unistd::setsid().map_err(io::Error::from)?;
    nix::sys::prctl::set_pdeathsig(PARENT_DEATH_SIGNAL).map_err(io::Error::from)?;
    if nix::unistd::getppid() != parent {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// Sets `rlimits` as both soft and hard limits (the CPU hard limit one
/// second above, so SIGXCPU comes before SIGKILL), and no core dumps.
/// Limits can only be lowered: a worker forked from the zygote lowers the
/// zygote's to its call's. Async-signal-safe.
pub fn apply_rlimits(rlimits: Rlimits) -> io::Result<()> {
    setrlimit(Resource::RLIMIT_AS, rlimits.memory, rlimits.memory).map_err(io::Error::from)?;
    setrlimit(
        Resource::RLIMIT_CPU,
        rlimits.cpu_seconds,
        rlimits.cpu_seconds.saturating_add(1),
    )
    .map_err(io::Error::from)?;
    setrlimit(Resource::RLIMIT_NOFILE, rlimits.open_files, rlimits.open_files).map_err(io::Error::from)?;
    setrlimit(Resource::RLIMIT_FSIZE, rlimits.file_size, rlimits.file_size).map_err(io::Error::from)?;
    setrlimit(Resource::RLIMIT_CORE, 0, 0).map_err(io::Error::from)
}

/// Closes every descriptor above stderr, for a forked worker that runs
/// without an `exec` (nothing of the zygote's may stay open in it).
#[allow(unsafe_code)]
pub fn close_descriptors_above_stderr() -> io::Result<()> {
    // SAFETY: a plain system call on integers.
    let closed = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            0 as libc::c_uint,
        )
    };
    if closed == 0 {
        return Ok(());
    }
    Err(io::Error::last_os_error())
}

/// Marks every descriptor above stderr close-on-exec, so the worker
/// inherits only its stdio (the server's sockets, logs, a client's leaked
/// descriptors stay behind). Close-on-exec rather than closed: std still
/// needs its own exec-error pipe until the `exec`. Async-signal-safe.
#[allow(unsafe_code)]
fn close_inherited_descriptors() {
    // SAFETY: plain system calls on integers; no memory is shared.
    unsafe {
        let marked = libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
        );
        if marked == 0 {
            return;
        }
        // Kernels before 5.11: walk the descriptor table instead.
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        let highest = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur.min(1 << 20) as libc::c_int
        } else {
            1024
        };
        for fd in 3..highest {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

/// `struct __user_cap_header_struct` of `capset(2)`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct` of `capset(2)` (two of them in v3).
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit capability sets.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Empties the bounding set (so an `exec` as root cannot regain anything),
/// the ambient set, and the effective, permitted and inheritable sets.
/// Dropping from the bounding set needs `CAP_SETPCAP`; a process without it
/// has nothing to drop there that it could use, so `EPERM` is not an error,
/// and it stops the loop: every further drop would be refused the same way
/// (63 refused system calls in each unprivileged worker's start before).
/// Async-signal-safe.
#[allow(unsafe_code)]
pub fn drop_capabilities() -> io::Result<()> {
    // SAFETY: prctl and capset with integer arguments and pointers to
    // locals that outlive the calls.
    unsafe {
        for capability in 0..64 {
            // EINVAL: past the kernel's last capability; EPERM: no
            // CAP_SETPCAP, so no drop can succeed.
            if libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0) != 0 {
                break;
            }
        }
        // EINVAL on kernels without ambient capabilities (before 4.3).
        libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        let header = CapHeader {
            version: CAPABILITY_VERSION_3,
            pid: 0,
        };
        let empty = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &header, empty.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Process groups of workers that are running now. Shutdown kills them all
/// explicitly rather than trusting every future to be dropped in time.
static LIVE_GROUPS: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// Records a started worker's process group (never one `killable`
/// refuses, so shutdown cannot hit the server's own group).
pub fn track_group(pgid: u32) {
    if killable(pgid).is_none() {
        return;
    }
    if let Ok(mut groups) = LIVE_GROUPS.lock() {
        groups.insert(pgid);
    }
}

/// The process group `pgid` as a kill target, or `None` when killing it
/// would hit something that is not a worker: 0 (`killpg(0)` is the
/// caller's own group — what a pid read after the child was reaped
/// defaults to), 1 (init), anything beyond `pid_t`, and the server's own
/// process group (a worker always has a group of its own, by `setsid`).
fn killable(pgid: u32) -> Option<Pid> {
    let pid = i32::try_from(pgid).ok().filter(|&pid| pid > 1)?;
    (pid != nix::unistd::getpgrp().as_raw()).then(|| Pid::from_raw(pid))
}

/// Kills a worker's whole process group. Harmless if it is already gone;
/// does nothing for a group `killable` refuses.
pub fn kill_group(pgid: u32) {
    if let Some(pid) = killable(pgid) {
        let _ = killpg(pid, Signal::SIGKILL);
    }
}

/// Kills a tracked group and forgets it (the worker is being reaped).
pub fn release_group(pgid: u32) {
    kill_group(pgid);
    if let Ok(mut groups) = LIVE_GROUPS.lock() {
        groups.remove(&pgid);
    }
}

/// Kills every worker group still running; called on shutdown.
pub fn kill_all_workers() {
    let groups = LIVE_GROUPS
        .lock()
        .map(|mut g| std::mem::take(&mut *g))
        .unwrap_or_default();
    for pgid in groups {
        kill_group(pgid);
    }
}

/// How a worker process ended: the one place exit statuses are classified
/// (guard workers and script workers). Shown as "killed by SIGKILL",
/// "exited with exit status: 3" or "vanished".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Killed by a signal, named (`SIGKILL`) or numbered (`signal 99`).
    Signal(String),
    /// Exited on its own with this status.
    Exited(std::process::ExitStatus),
    /// No status could be read.
    Vanished,
}

impl Ended {
    pub fn of(status: Option<std::process::ExitStatus>) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match status {
            Some(s) => match s.signal() {
                Some(signal) => Self::Signal(
                    Signal::try_from(signal)
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_else(|_| format!("signal {signal}")),
                ),
                None => Self::Exited(s),
            },
            None => Self::Vanished,
        }
    }
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Signal(name) => write!(f, "killed by {name}"),
            Self::Exited(status) => write!(f, "exited with {status}"),
            Self::Vanished => f.write_str("vanished"),
        }
    }
}

/// Duplicates stdout for protocol use and points fd 1 at stderr.
///
/// The protocol descriptor (fd 3) is close-on-exec: it is the server's
/// answer pipe, and a program a guard starts must not inherit it, or it
/// could write an answer of its own before the guard's. What a guard's
/// child inherits is stdin (already read), and fds 1 and 2, the call's
/// diagnostics log.
pub fn redirect_stdout() -> std::io::Result<std::fs::File> {
    use nix::fcntl::{FcntlArg, fcntl};
    use std::os::fd::AsFd;
    let protocol = owned(fcntl(std::io::stdout().as_fd(), FcntlArg::F_DUPFD_CLOEXEC(3))?);
    nix::unistd::dup2_stdout(std::io::stderr().as_fd())?;
    Ok(std::fs::File::from(protocol))
}

#[allow(unsafe_code)]
fn owned(fd: std::os::fd::RawFd) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd as _;
    // SAFETY: `fd` was just returned by fcntl(F_DUPFD_CLOEXEC): open, and
    // owned by nothing else.
    unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_kills_group_zero_init_or_its_own_group() {
        // killpg(0) would kill the server's own group; 1 is init.
        assert!(killable(0).is_none());
        assert!(killable(1).is_none());
        assert!(killable(u32::MAX).is_none());
        let own = nix::unistd::getpgrp().as_raw() as u32;
        assert!(killable(own).is_none());
        // Still alive after asking to kill them all.
        kill_group(0);
        kill_group(own);
        track_group(0);
        assert!(!LIVE_GROUPS.lock().map(|g| g.contains(&0)).unwrap_or(true));
        let other = if own == 4_000_000 { 4_000_001 } else { 4_000_000 };
        assert_eq!(killable(other), Some(Pid::from_raw(other as i32)));
    }

    #[tokio::test]
    async fn a_confined_child_has_no_privilege_and_no_extra_descriptor() {
        // NoNewPrivs 1, every capability set empty, only fds 0-2 (+ the
        // one `ls` opens itself) after exec, even with a leaked fd here.
        // Close-on-exec padding, so the leaked descriptor is not number 3.
        let _padding: Vec<std::fs::File> = (0..12)
            .filter_map(|_| std::fs::File::open("/dev/null").ok())
            .collect();
        let leaked = nix::unistd::dup(std::io::stderr()).expect("dup");
        let fd = std::os::fd::AsRawFd::as_raw_fd(&leaked);
        nix::fcntl::fcntl(
            &leaked,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
        )
        .expect("fcntl");
        let mut command = tokio::process::Command::new("sh");
        command
            .arg("-c")
            .arg("grep -E '^(NoNewPrivs|CapInh|CapPrm|CapEff|CapBnd|CapAmb)' /proc/self/status; ls /proc/self/fd")
            .stdout(std::process::Stdio::piped());
        scrub_env(&mut command);
        confine(&mut command, Rlimits::for_call(&WorkerLimits::default(), 5));
        let output = command.output().await.expect("run sh");
        drop(leaked);
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(text.contains("NoNewPrivs:\t1"), "{text}");
        // The bounding set can only be emptied with CAP_SETPCAP (root).
        let bounding = nix::unistd::geteuid().is_root().then_some("CapBnd");
        for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"]
            .into_iter()
            .chain(bounding)
        {
            assert!(
                text.contains(&format!("{set}:\t0000000000000000")),
                "{set}: {text}"
            );
        }
        let fds: Vec<i32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        assert!(!fds.contains(&fd), "leaked fd {fd} reached the child: {fds:?}");
        // `ls` itself holds its directory open as fd 3.
        assert!(fds.iter().all(|&f| f <= 3), "{fds:?}");
    }
}
