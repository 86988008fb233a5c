//! Sandbox layers the script worker applies to itself at start, while it is
//! still single-threaded, on top of what every worker gets before `exec`
//! (`crate::process`: rlimits, no inherited descriptors,
//! no-new-privileges, no capabilities):
//!
//! 1. a new network namespace (no interfaces but a down loopback): its own,
//!    or the one its zygote entered for every worker it forks, when
//!    seccomp and Landlock's scopes keep them apart inside it
//!    ([`prepare_zygote`]);
//! 2. the capabilities that namespace's user namespace granted, dropped again;
//! 3. a process limit (`RLIMIT_NPROC` 0): no new process or thread;
//! 4. a Landlock ruleset that denies every filesystem access and TCP
//!    bind/connect and, on a kernel with ABI 6, abstract Unix sockets and
//!    signals beyond the worker itself;
//! 5. a seccomp filter allowing only the system calls the Rhai engine and
//!    its pipe need ([`ALLOWED_SYSCALLS`]); anything else fails with `EPERM`.
//!
//! Each layer is checked against the kernel and reported in [`Layers`],
//! never assumed. Why seccomp on top of the others: root is exempt from
//! `RLIMIT_NPROC`, and Landlock does not stop `socket()` for anything but
//! TCP or a process image replacing itself; the filter stops creating
//! processes, sockets, and new descriptors of any kind.

use std::collections::BTreeMap;

use landlock::{ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetStatus};
use nix::libc;
use nix::sched::{CloneFlags, unshare};
use nix::sys::resource::{Resource, getrlimit, setrlimit};

use serde::{Deserialize, Serialize};

/// Sandbox layers as the worker found them (never assumed).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Layers {
    /// A network namespace of its own or its zygote's (only loopback, and it is down).
    pub network_namespace: bool,
    /// Landlock: "full", "partial" or "unavailable".
    pub landlock: String,
    /// rlimits applied before exec.
    pub rlimits: bool,
    /// `PR_SET_NO_NEW_PRIVS`: no `exec` can grant privileges.
    #[serde(default)]
    pub no_new_privileges: bool,
    /// Every capability set empty (bounding, ambient, effective, permitted,
    /// inheritable), also inside the worker's user namespace.
    #[serde(default)]
    pub capabilities_dropped: bool,
    /// `RLIMIT_NPROC` 0 (root is exempt: `seccomp` covers it).
    #[serde(default)]
    pub process_limit: bool,
    /// The seccomp system-call allowlist (no processes, sockets, files).
    #[serde(default)]
    pub seccomp: bool,
}

impl Layers {
    /// The layers not in force, named as the README and preflight name them.
    pub fn missing(&self) -> Vec<String> {
        let mut missing = Vec::new();
        if !self.network_namespace {
            missing.push("network namespace".to_string());
        }
        if self.landlock != "full" {
            missing.push(format!("Landlock ({})", self.landlock));
        }
        for (held, name) in [
            (self.rlimits, "rlimits"),
            (self.no_new_privileges, "no-new-privileges"),
            (self.capabilities_dropped, "capabilities dropped"),
            (self.process_limit, "process limit"),
            (self.seccomp, "seccomp"),
        ] {
            if !held {
                missing.push(name.to_string());
            }
        }
        missing
    }
}

/// The only system calls a script worker may make once its filter is in:
/// pipe I/O, memory, signals and clocks for the Rust runtime and Rhai,
/// exiting (and aborting: `tgkill` on itself). Found with `strace -f` on
/// scripts that call every kind of guard, write and read artifacts, print,
/// time out and run out of memory; `fcntl` is allowed separately, to read
/// descriptor flags only, and `prctl` to name the calling thread only
/// (`PR_SET_NAME`: a spare worker takes its own name back). Path-based calls
/// are absent even when harmless (`stat` would let a script probe which
/// files exist). Deliberately absent: `open`/`openat`, `socket`,
/// `pipe`, `dup*`, `clone`/`clone3`/`fork`/`vfork`, `execve`/`execveat`,
/// `ptrace`, `mount`, `kill` of others, any other `prctl`, `seccomp`, `bpf`,
/// `unshare`, `setns`, `ioctl`.
pub const ALLOWED_SYSCALLS: &[libc::c_long] = &[
    libc::SYS_read,
    libc::SYS_readv,
    libc::SYS_write,
    libc::SYS_writev,
    libc::SYS_close,
    libc::SYS_lseek,
    libc::SYS_fstat,
    libc::SYS_ppoll,
    libc::SYS_brk,
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mremap,
    libc::SYS_mprotect,
    libc::SYS_madvise,
    libc::SYS_futex,
    libc::SYS_sched_yield,
    libc::SYS_sched_getaffinity,
    libc::SYS_getrandom,
    libc::SYS_clock_gettime,
    libc::SYS_clock_getres,
    libc::SYS_clock_nanosleep,
    libc::SYS_nanosleep,
    libc::SYS_gettimeofday,
    libc::SYS_getpid,
    libc::SYS_gettid,
    libc::SYS_tgkill,
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_sigaltstack,
    libc::SYS_restart_syscall,
    libc::SYS_exit,
    libc::SYS_exit_group,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_poll,
];

pub use crate::env::SKIP_ENV;

/// What a script workers' zygote set up once for the workers it forks
/// ([`prepare_zygote`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prepared {
    /// The zygote entered a network namespace its workers share.
    pub shared_network_namespace: bool,
    /// Landlock can scope abstract Unix sockets and signals (ABI 6).
    pub scopes: bool,
    /// [`syscall_filter`], compiled once (a tenth of a forked worker's
    /// start when each compiled its own); `None` when it does not build
    /// here, and each worker then finds out itself.
    pub filter: Option<seccompiler::BpfProgram>,
}

/// Whether `layer` is turned off by [`SKIP_ENV`].
fn skipped(layer: &str) -> bool {
    std::env::var(SKIP_ENV)
        .unwrap_or_default()
        .split(',')
        .any(|s| s.trim() == layer)
}

/// In a script workers' zygote, before it forks its first worker: enters a
/// network namespace the workers share, so a task does not pay for making
/// and tearing down one of its own (0.6 ms of a trivial task's 2.7 ms on
/// the development machine). Only when every layer that keeps workers
/// apart inside one namespace holds: seccomp (no socket of any kind) and
/// Landlock's scopes (an abstract Unix socket, the one way two processes
/// meet in an empty namespace without the file system, reaches only its
/// own worker; nor does a signal). Otherwise each worker enters its own,
/// as a worker started alone does. The user namespace entered with it
/// grants capabilities inside it: they are dropped again at once.
pub fn prepare_zygote() -> Prepared {
    let scopes = scopes_supported();
    let share = scopes && !skipped("network_namespace") && !skipped("landlock") && !skipped("seccomp");
    let shared_network_namespace = share && enter_network_namespace();
    if shared_network_namespace {
        let _ = crate::process::drop_capabilities();
    }
    Prepared {
        shared_network_namespace,
        scopes,
        filter: syscall_filter().ok(),
    }
}

/// Whether this kernel's Landlock scopes abstract Unix sockets and
/// signals (ABI 6), found by creating (not applying) such a ruleset.
fn scopes_supported() -> bool {
    use landlock::{CompatLevel, Compatible, Scope};
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .scope(Scope::from_all(ABI::V6))
        .and_then(|ruleset| ruleset.create())
        .is_ok()
}

/// Applies every layer it can and says which ones hold. `prepared` is what
/// the worker's zygote set up ([`prepare_zygote`]); `None` for a worker
/// started alone.
pub fn apply(prepared: Option<&Prepared>) -> Layers {
    let shared = prepared.is_some_and(|p| p.shared_network_namespace);
    let network_namespace = !skipped("network_namespace") && (shared || enter_network_namespace());
    let scopes = match prepared {
        Some(prepared) => prepared.scopes,
        None => scopes_supported(),
    };
    // The user namespace just entered grants every capability inside it:
    // give them back before running anything.
    let dropped = crate::process::drop_capabilities().is_ok();
    // Read once, before Landlock denies /proc: the threads and the
    // capabilities left, as the kernel sees them.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let others = other_threads(&status);
    let capabilities_dropped = dropped && no_capabilities_left(&status);
    let process_limit = !skipped("process_limit") && limit_processes();
    let landlock = if skipped("landlock") {
        "skipped".to_string()
    } else {
        match (deny_filesystem_and_network(scopes), others) {
            // Landlock binds the calling thread only (an app that embeds
            // Warden in its own runtime starts threads before the worker
            // branch): say so rather than "full".
            (status, 0) => status,
            (status, n) => format!("{status}, this thread only ({n} others unrestricted)"),
        }
    };
    let no_new_privileges = nix::sys::prctl::get_no_new_privs().unwrap_or(false);
    let rlimits = address_space_limited();
    // Last: the filter forbids what the layers above needed.
    let seccomp =
        !skipped("seccomp") && install_syscall_filter(prepared.and_then(|p| p.filter.as_ref())).is_ok();
    Layers {
        network_namespace,
        landlock,
        rlimits,
        no_new_privileges,
        capabilities_dropped,
        process_limit,
        seccomp,
    }
}

fn enter_network_namespace() -> bool {
    // As root a plain network namespace works; otherwise a user namespace
    // grants the capability for it.
    unshare(CloneFlags::CLONE_NEWNET).is_ok()
        || unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET).is_ok()
}

/// Threads of this process besides the calling one, per the kernel
/// (`status`: the text of `/proc/self/status`).
fn other_threads(status: &str) -> usize {
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .map_or(0, |n| n.saturating_sub(1))
}

/// Whether this process holds no capability, per the kernel: every set
/// empty, the bounding set too when running as root (only root regains
/// bounding capabilities on `exec`; an unprivileged process cannot drop
/// them and, under no-new-privileges, cannot use them).
fn no_capabilities_left(status: &str) -> bool {
    if status.is_empty() {
        return false;
    }
    let mut sets = vec!["CapInh:", "CapPrm:", "CapEff:", "CapAmb:"];
    if nix::unistd::geteuid().is_root() {
        sets.push("CapBnd:");
    }
    sets.iter().all(|set| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(set))
            .is_some_and(|value| value.trim().chars().all(|c| c == '0'))
    })
}

/// `RLIMIT_NPROC` 0: this user may start no further process or thread from
/// here. Root (the real uid 0, even inside a user namespace) is exempt,
/// which is why the seccomp filter also refuses `clone`.
fn limit_processes() -> bool {
    setrlimit(Resource::RLIMIT_NPROC, 0, 0).is_ok()
        && getrlimit(Resource::RLIMIT_NPROC).is_ok_and(|(soft, hard)| soft == 0 && hard == 0)
}

/// Denies every filesystem access and TCP bind/connect; with `scopes`
/// (a kernel with Landlock ABI 6), also abstract Unix sockets and signals
/// beyond this worker.
fn deny_filesystem_and_network(scopes: bool) -> String {
    let abi = ABI::V5;
    let ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.handle_access(AccessNet::from_all(abi)))
        .and_then(|r| {
            if scopes {
                r.scope(landlock::Scope::from_all(ABI::V6))
            } else {
                Ok(r)
            }
        })
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self());
    match ruleset {
        Ok(status) => match status.ruleset {
            RulesetStatus::FullyEnforced => "full".into(),
            RulesetStatus::PartiallyEnforced => "partial".into(),
            RulesetStatus::NotEnforced => "unavailable".into(),
        },
        Err(_) => "unavailable".into(),
    }
}

fn address_space_limited() -> bool {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_AS)
        .map(|(soft, _)| soft != nix::sys::resource::RLIM_INFINITY)
        .unwrap_or(false)
}

/// The compiled filter: [`ALLOWED_SYSCALLS`] allowed, anything else
/// `EPERM`. `EPERM` rather than killing the worker: a call the list missed
/// then fails the way a denied file access does (a classified error the
/// script's result shows) instead of a SIGSYS crash; either way the call
/// does not happen.
pub fn syscall_filter() -> Result<seccompiler::BpfProgram, seccompiler::BackendError> {
    let arch = seccompiler::TargetArch::try_from(std::env::consts::ARCH)?;
    // `c_long` is `i64` here, but not on every target.
    #[allow(clippy::useless_conversion)]
    let mut rules: BTreeMap<i64, Vec<seccompiler::SeccompRule>> = ALLOWED_SYSCALLS
        .iter()
        .map(|&call| (i64::from(call), Vec::new()))
        .collect();
    // `fcntl` only to read descriptor flags (std checks a descriptor is
    // open before closing it); never F_DUPFD, which makes a new one.
    let read_flags = [libc::F_GETFD, libc::F_GETFL]
        .into_iter()
        .map(|command| {
            seccompiler::SeccompCondition::new(
                1,
                seccompiler::SeccompCmpArgLen::Dword,
                seccompiler::SeccompCmpOp::Eq,
                command as u64,
            )
            .and_then(|condition| seccompiler::SeccompRule::new(vec![condition]))
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_fcntl, read_flags);
    // `prctl` only to name the calling thread: a spare worker takes its own
    // name back when its task arrives (`zygote::child::claimed`).
    let set_name = seccompiler::SeccompCondition::new(
        0,
        seccompiler::SeccompCmpArgLen::Dword,
        seccompiler::SeccompCmpOp::Eq,
        libc::PR_SET_NAME as u64,
    )
    .and_then(|condition| seccompiler::SeccompRule::new(vec![condition]))?;
    rules.insert(libc::SYS_prctl, vec![set_name]);
    let filter = seccompiler::SeccompFilter::new(
        rules,
        seccompiler::SeccompAction::Errno(libc::EPERM as u32),
        seccompiler::SeccompAction::Allow,
        arch,
    )?;
    filter.try_into()
}

/// Installs [`syscall_filter`] (`compiled`, or compiled now) on every
/// thread of this process (there is one, unless an app embedding Warden
/// started others before the worker branch). It also sets
/// no-new-privileges, which it needs.
fn install_syscall_filter(compiled: Option<&seccompiler::BpfProgram>) -> Result<(), seccompiler::Error> {
    match compiled {
        Some(program) => seccompiler::apply_filter_all_threads(program),
        None => seccompiler::apply_filter_all_threads(&syscall_filter()?),
    }
}

/// Why a kernel layer of the script worker is not available here (for
/// `--check`, which turns it into a warning with the fix).
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("the seccomp filter does not build here: {0}")]
    FilterBuild(seccompiler::BackendError),
    #[error("the seccomp filter could not be installed: {0}")]
    FilterInstall(String),
    #[error("fork failed: {0}")]
    Fork(nix::errno::Errno),
    #[error("{0}")]
    Landlock(String),
}

/// Whether a child process can install the script worker's seccomp filter
/// (tried in a forked child that exits at once): the number of system
/// calls the filter allows, or why not. For `--check`.
#[allow(unsafe_code)]
pub fn probe_seccomp() -> Result<usize, ProbeError> {
    use nix::sys::wait::{WaitStatus, waitpid};
    use nix::unistd::{ForkResult, fork};
    let program = syscall_filter().map_err(ProbeError::FilterBuild)?;
    // SAFETY: the child makes only system calls (prctl, seccomp, _exit)
    // on memory prepared before the fork, so forking is sound.
    match unsafe { fork() } {
        Ok(ForkResult::Child) => {
            let code = i32::from(seccompiler::apply_filter(&program).is_err());
            // SAFETY: _exit skips the parent's atexit handlers and destructors.
            unsafe { libc::_exit(code) }
        }
        Ok(ForkResult::Parent { child }) => match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, 0)) => Ok(ALLOWED_SYSCALLS.len()),
            other => Err(ProbeError::FilterInstall(format!("{other:?}"))),
        },
        Err(errno) => Err(ProbeError::Fork(errno)),
    }
}

/// The highest Landlock ABI whose filesystem rights the kernel enforces,
/// found by creating (not applying) rulesets; or the kernel's refusal.
/// For `--check`.
pub fn probe_landlock() -> Result<u8, ProbeError> {
    use landlock::{CompatLevel, Compatible};
    let abis = [
        (ABI::V6, 6),
        (ABI::V5, 5),
        (ABI::V4, 4),
        (ABI::V3, 3),
        (ABI::V2, 2),
        (ABI::V1, 1),
    ];
    let mut last_error = String::from("no ABI probed");
    for (abi, number) in abis {
        let created = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .and_then(|ruleset| ruleset.create());
        match created {
            Ok(_ruleset) => return Ok(number),
            Err(error) => last_error = error.to_string(),
        }
    }
    Err(ProbeError::Landlock(last_error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{MODE_ENV, Mode, refusal};

    /// Forks a child that installs the filter, runs `probe` and exits with
    /// the errno it got (0 if the call succeeded).
    #[allow(unsafe_code)]
    fn errno_under_filter(probe: fn() -> libc::c_long) -> i32 {
        use nix::sys::wait::{WaitStatus, waitpid};
        use nix::unistd::{ForkResult, fork};
        let program = syscall_filter().expect("filter compiles");
        // SAFETY: the child makes raw system calls only (seccomp, the probe,
        // _exit): it takes no lock and allocates nothing, so forking a
        // multi-threaded test process is sound.
        match unsafe { fork() }.expect("fork") {
            ForkResult::Child => {
                let code = match seccompiler::apply_filter(&program) {
                    Err(_) => 200,
                    Ok(()) if probe() >= 0 => 0,
                    Ok(()) => std::io::Error::last_os_error().raw_os_error().unwrap_or(201),
                };
                // SAFETY: ends the child without running the parent's
                // destructors or atexit handlers.
                unsafe { libc::_exit(code) }
            }
            ForkResult::Parent { child } => match waitpid(child, None).expect("waitpid") {
                WaitStatus::Exited(_, code) => code,
                other => panic!("probe child ended with {other:?}"),
            },
        }
    }

    #[allow(unsafe_code)]
    fn open_file() -> libc::c_long {
        // SAFETY: a NUL-terminated static path.
        unsafe {
            libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                c"/etc/hostname".as_ptr(),
                libc::O_RDONLY,
            )
        }
    }

    #[allow(unsafe_code)]
    fn open_socket() -> libc::c_long {
        // SAFETY: integer arguments only.
        unsafe { libc::syscall(libc::SYS_socket, libc::AF_INET, libc::SOCK_STREAM, 0) }
    }

    #[allow(unsafe_code)]
    fn start_process() -> libc::c_long {
        // SAFETY: a raw fork-like clone; if it were allowed, the child
        // would exit at once (SIGCHLD-only flags, no shared memory).
        let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0) };
        if pid == 0 {
            // SAFETY: the child leaves immediately.
            unsafe { libc::_exit(0) }
        }
        pid
    }

    #[allow(unsafe_code)]
    fn exec_shell() -> libc::c_long {
        let argv = [c"/bin/true".as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null::<libc::c_char>()];
        // SAFETY: NUL-terminated static strings and null-terminated arrays.
        unsafe { libc::syscall(libc::SYS_execve, argv[0], argv.as_ptr(), envp.as_ptr()) }
    }

    #[allow(unsafe_code)]
    fn trace_parent() -> libc::c_long {
        // SAFETY: integer arguments only.
        unsafe { libc::syscall(libc::SYS_ptrace, libc::PTRACE_TRACEME, 0, 0, 0) }
    }

    #[allow(unsafe_code)]
    fn get_pid() -> libc::c_long {
        // SAFETY: no arguments.
        unsafe { libc::syscall(libc::SYS_getpid) }
    }

    #[test]
    fn other_threads_are_counted_so_landlock_is_not_reported_full_for_them() {
        // A second live thread is seen (Landlock would bind only this one).
        let (stop, wait) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || wait.recv());
        assert!(other_threads(&std::fs::read_to_string("/proc/self/status").expect("status")) >= 1);
        drop(stop);
        let _ = thread.join();
    }

    #[test]
    fn strict_mode_refuses_any_missing_layer_and_warn_mode_none() {
        // strict + one layer missing → a refusal naming it and the variable.
        let full = Layers {
            network_namespace: true,
            landlock: "full".into(),
            rlimits: true,
            no_new_privileges: true,
            capabilities_dropped: true,
            process_limit: true,
            seccomp: true,
        };
        assert!(refusal(Mode::Strict, &full).is_none());
        let degraded = Layers {
            seccomp: false,
            ..full.clone()
        };
        let message = refusal(Mode::Strict, &degraded).expect("refused");
        assert!(
            message.contains("seccomp") && message.contains(MODE_ENV),
            "{message}"
        );
        assert!(refusal(Mode::Warn, &degraded).is_none());
        let no_landlock = Layers {
            landlock: "partial".into(),
            ..full
        };
        assert!(refusal(Mode::Strict, &no_landlock).is_some());
    }

    #[allow(unsafe_code)]
    fn duplicate_descriptor() -> libc::c_long {
        // SAFETY: integer arguments only.
        unsafe { libc::syscall(libc::SYS_fcntl, 2, libc::F_DUPFD, 10) }
    }

    #[allow(unsafe_code)]
    fn read_descriptor_flags() -> libc::c_long {
        // SAFETY: integer arguments only.
        unsafe { libc::syscall(libc::SYS_fcntl, 2, libc::F_GETFD) }
    }

    #[test]
    #[allow(unsafe_code)]
    fn landlock_scopes_keep_a_worker_from_another_process_abstract_socket() {
        // Why workers may share their zygote's network namespace: under the
        // scopes, connecting to an abstract Unix socket another process
        // listens on is refused (EPERM), where without them it connects.
        use std::os::linux::net::SocketAddrExt;
        use std::os::unix::net::{SocketAddr, UnixListener};
        if !scopes_supported() {
            eprintln!("skipped: this kernel's Landlock has no scopes (ABI 6)");
            return;
        }
        let name = format!("warden-scope-test-{}", std::process::id());
        let listener =
            UnixListener::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).expect("name"))
                .expect("listen");
        // sockaddr_un for the abstract name, built before the fork.
        // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
        let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        address.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (slot, byte) in address.sun_path[1..].iter_mut().zip(name.bytes()) {
            *slot = byte as libc::c_char;
        }
        let length = (std::mem::size_of::<libc::sa_family_t>() + 1 + name.len()) as libc::socklen_t;
        let connect_errno = |scoped: bool| -> i32 {
            use landlock::{Ruleset, RulesetAttr, Scope};
            use nix::sys::wait::{WaitStatus, waitpid};
            use nix::unistd::{ForkResult, fork};
            let ruleset = Ruleset::default()
                .handle_access(AccessFs::from_all(ABI::V5))
                .and_then(|r| {
                    if scoped {
                        r.scope(Scope::from_all(ABI::V6))
                    } else {
                        Ok(r)
                    }
                })
                .and_then(|r| r.create())
                .expect("ruleset");
            // SAFETY: the child makes raw system calls on memory prepared
            // before the fork (the ruleset's descriptor, the address) and
            // exits with _exit.
            match unsafe { fork() }.expect("fork") {
                ForkResult::Child => {
                    let code = match ruleset.restrict_self() {
                        Err(_) => 200,
                        // SAFETY: raw system calls on a local address.
                        Ok(_) => unsafe {
                            let socket = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                            let address = &address as *const libc::sockaddr_un as *const libc::sockaddr;
                            if libc::connect(socket, address, length) == 0 {
                                0
                            } else {
                                *libc::__errno_location()
                            }
                        },
                    };
                    // SAFETY: ends the child without the parent's destructors.
                    unsafe { libc::_exit(code) }
                }
                ForkResult::Parent { child } => match waitpid(child, None).expect("waitpid") {
                    WaitStatus::Exited(_, code) => code,
                    other => panic!("child ended with {other:?}"),
                },
            }
        };
        assert_eq!(connect_errno(false), 0, "without scopes the socket is reachable");
        assert_eq!(connect_errno(true), libc::EPERM, "the scope refuses it");
        drop(listener);
    }

    #[allow(unsafe_code)]
    fn poll_without_waiting() -> libc::c_long {
        let mut fds = [libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        }];
        let now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a live one-element array, a live timespec, no signal mask.
        unsafe {
            libc::syscall(
                libc::SYS_ppoll,
                fds.as_mut_ptr(),
                1,
                &now,
                std::ptr::null::<libc::sigset_t>(),
                0,
            )
        }
    }

    #[allow(unsafe_code)]
    fn name_this_thread() -> libc::c_long {
        // SAFETY: a NUL-terminated static name.
        unsafe {
            libc::syscall(
                libc::SYS_prctl,
                libc::PR_SET_NAME,
                c"warden-test".as_ptr(),
                0,
                0,
                0,
            )
        }
    }

    #[allow(unsafe_code)]
    fn make_dumpable() -> libc::c_long {
        // SAFETY: integer arguments only.
        unsafe { libc::syscall(libc::SYS_prctl, libc::PR_SET_DUMPABLE, 1, 0, 0, 0) }
    }

    #[allow(unsafe_code)]
    fn set_death_signal() -> libc::c_long {
        // SAFETY: integer arguments only.
        unsafe { libc::syscall(libc::SYS_prctl, libc::PR_SET_PDEATHSIG, 0, 0, 0, 0) }
    }

    #[test]
    fn the_filter_allows_prctl_only_to_name_the_thread() {
        // A spare worker takes its name back under the filter
        // (`zygote::child::claimed`); every other prctl stays denied.
        assert_eq!(errno_under_filter(name_this_thread), 0);
        assert_eq!(errno_under_filter(make_dumpable), libc::EPERM);
        assert_eq!(errno_under_filter(set_death_signal), libc::EPERM);
    }

    #[test]
    fn the_filter_denies_files_sockets_processes_exec_and_ptrace() {
        // Under the script worker's filter each of these fails with EPERM;
        // allowed calls (getpid, the door's zero-timeout ppoll, see
        // `crate::pipe`) still work.
        assert_eq!(errno_under_filter(get_pid), 0);
        assert_eq!(errno_under_filter(read_descriptor_flags), 0);
        assert_eq!(errno_under_filter(poll_without_waiting), 0);
        for (what, probe) in [
            ("openat", open_file as fn() -> libc::c_long),
            ("socket", open_socket),
            ("clone (fork)", start_process),
            ("execve", exec_shell),
            ("ptrace", trace_parent),
            ("fcntl F_DUPFD", duplicate_descriptor),
        ] {
            assert_eq!(errno_under_filter(probe), libc::EPERM, "{what} was not denied");
        }
    }
}
