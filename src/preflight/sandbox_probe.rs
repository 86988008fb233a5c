//! Probes for the kernel features the script sandbox layers on: a private
//! network namespace, Landlock, and the rlimits every worker runs under.
//!
//! Called by [`super`] for both entry points. Each probe leaves this process as it
//! found it: the namespace is tried in a forked child that exits at once,
//! Landlock only creates (never applies) a ruleset, and rlimits are read,
//! not changed. A missing layer is a warning: workers still run, with one
//! wall fewer.

use nix::sys::resource::{Resource, getrlimit};

use super::report::Check;

/// The network namespace check: can an unprivileged child get its own
/// (empty) network stack?
pub(crate) fn network_namespace() -> Check {
    let name = "sandbox.network";
    match unshare_in_child() {
        Ok(()) => Check::pass(
            name,
            "a child can unshare(CLONE_NEWUSER|CLONE_NEWNET): script workers get no network",
        ),
        Err(reason) => Check::warn(
            name,
            format!("unshare(CLONE_NEWUSER|CLONE_NEWNET) refused: {reason}"),
            "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or \
the container's seccomp/AppArmor profile); without them scripts are kept off the network only by the Rhai engine",
        ),
    }
}

/// Why the namespace probe's child could not unshare, or why the probe
/// could not tell.
#[derive(Debug, thiserror::Error)]
enum UnshareError {
    /// The kernel's answer to the child, as its errno's description.
    #[error("{}", .0.desc())]
    Refused(nix::errno::Errno),
    #[error("probe child ended unexpectedly: {0:?}")]
    Unexpected(nix::sys::wait::WaitStatus),
    #[error("waitpid failed: {0}")]
    Wait(nix::errno::Errno),
    #[error("fork failed: {0}")]
    Fork(nix::errno::Errno),
}

/// Forks a child that tries the unshare and exits with the errno (0 on success).
#[allow(unsafe_code)]
fn unshare_in_child() -> Result<(), UnshareError> {
    use nix::sched::{CloneFlags, unshare};
    use nix::sys::wait::{WaitStatus, waitpid};
    use nix::unistd::{ForkResult, fork};
    // SAFETY: the child makes only two system calls (unshare, _exit) and
    // touches no lock, allocator or runtime state, so forking a
    // multi-threaded process is sound here.
    match unsafe { fork() } {
        Ok(ForkResult::Child) => {
            let code = match unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET) {
                Ok(()) => 0,
                Err(errno) => (errno as i32).clamp(1, 255),
            };
            // SAFETY: _exit ends the child without running this process's
            // atexit handlers or destructors, which belong to the parent.
            unsafe { nix::libc::_exit(code) }
        }
        Ok(ForkResult::Parent { child }) => match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, 0)) => Ok(()),
            Ok(WaitStatus::Exited(_, code)) => Err(UnshareError::Refused(nix::errno::Errno::from_raw(code))),
            Ok(other) => Err(UnshareError::Unexpected(other)),
            Err(errno) => Err(UnshareError::Wait(errno)),
        },
        Err(errno) => Err(UnshareError::Fork(errno)),
    }
}

/// The seccomp check: can a child install the script worker's system-call
/// filter?
pub(crate) fn seccomp() -> Check {
    let name = "sandbox.seccomp";
    let fix = "run on a Linux kernel with seccomp filters (CONFIG_SECCOMP_FILTER) and a container profile that \
allows a process to add its own; without it scripts rely on Landlock and the Rhai engine alone";
    match warden_sandbox::layers::probe_seccomp() {
        Ok(allowed) => Check::pass(
            name,
            format!(
                "a child can install the script worker's seccomp filter ({allowed} system calls allowed)"
            ),
        ),
        Err(reason) => Check::warn(name, reason.to_string(), fix),
    }
}

/// The Landlock check: the highest ABI whose filesystem rights the kernel
/// enforces.
pub(crate) fn landlock() -> Check {
    let name = "sandbox.landlock";
    match warden_sandbox::layers::probe_landlock() {
        Ok(abi) => Check::pass(
            name,
            format!("Landlock available: filesystem rights of ABI v{abi} enforceable"),
        ),
        Err(reason) => Check::warn(
            name,
            format!("Landlock unavailable: {reason}"),
            "use Linux 5.13+ with Landlock enabled (lsm=...,landlock); without it script workers have no kernel filesystem wall",
        ),
    }
}

/// The rlimits workers are confined by: one PASS, or one WARN per missing limit.
pub(crate) fn rlimits() -> Vec<Check> {
    let wanted = [
        (Resource::RLIMIT_AS, "RLIMIT_AS", "memory"),
        (Resource::RLIMIT_CPU, "RLIMIT_CPU", "CPU time"),
        (Resource::RLIMIT_NOFILE, "RLIMIT_NOFILE", "open files"),
        (Resource::RLIMIT_FSIZE, "RLIMIT_FSIZE", "file size"),
        (Resource::RLIMIT_CORE, "RLIMIT_CORE", "core dumps"),
    ];
    let mut checks = Vec::new();
    let mut present = Vec::new();
    for (resource, label, what) in wanted {
        match getrlimit(resource) {
            Ok(_) => present.push(label),
            Err(errno) => checks.push(Check::warn(
                &format!("sandbox.rlimit.{}", label.to_ascii_lowercase()),
                format!("{label} ({what}) unavailable: {errno}"),
                "run on a Linux kernel that supports this rlimit; workers cannot be capped on it",
            )),
        }
    }
    if checks.is_empty() {
        checks.push(Check::pass(
            "sandbox.rlimits",
            format!("{} supported", present.join(", ")),
        ));
    }
    checks
}
