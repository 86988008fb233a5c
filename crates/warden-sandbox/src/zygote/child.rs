//! The worker zygote: one process that forks a fresh guard worker per call.
//!
//! Starting a worker with `exec` pays for the loader, the relocations and
//! the page faults of the whole binary on every call (3–4 ms on the
//! development machine); forking an idle copy that has already started
//! costs a fraction of a millisecond. The zygote is the application binary,
//! started once with [`ZYGOTE_ARG`] under the confinement of every worker
//! ([`crate::process::confine`]: scrubbed environment, no
//! privilege, no capability, rlimits, death with the server). It builds
//! its registry and then only forks: it never runs a guard, reads no
//! request and holds no descriptor but its control socket, so each child
//! starts from the state an exec'd worker would reach.
//!
//! A child enters a session of its own (its pid is its group id, which the
//! server kills), takes the call's descriptors as its stdin, stdout and
//! stderr, closes every other one, lowers its rlimits to its call's and
//! runs the worker entry point its owner passed to [`serve`], as an exec'd
//! worker does. It dies with the zygote,
//! and the zygote with the server (both by [`crate::process::PARENT_DEATH_SIGNAL`]).
//!
//! What a fork keeps that an `exec` redraws is the address-space layout:
//! the server replaces the zygote after
//! [`crate::limits::ZYGOTE_MAX_CHILDREN`] children.
//!
//! The zygote reaps a child only when the server asks, after it killed the
//! child's group: until then the zombie holds the pid and group id, so the
//! kill can never reach an unrelated process.
//!
//! Wire: a `SOCK_SEQPACKET` socket on the zygote's stdin. An [`Order`] is
//! five little-endian `u64`s (a spawn carries the child's three
//! descriptors as `SCM_RIGHTS`); a [`Reply`] is two.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::ExitCode;

use crate::process::Rlimits;
use nix::errno::Errno;
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid};

/// The argument that makes the application binary a zygote rather than a
/// one-call worker (its owner checks for it and calls [`serve`]).
pub const ZYGOTE_ARG: &str = "__warden-zygote";

const ORDER_BYTES: usize = 5 * 8;
const REPLY_BYTES: usize = 2 * 8;

/// The process name (`comm`) of a spare worker while it waits for its
/// call (see [`crate::zygote::Spare`]): `ps` and the tests tell it from a
/// worker serving a call by it. The worker takes its own name back when
/// its call arrives ([`claimed`]).
pub const SPARE_NAME: &str = "warden-spare";

/// What the server asks of the zygote.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Order {
    /// Fork a worker under these limits; its stdin, stdout and stderr
    /// come with the message.
    Spawn(Rlimits),
    /// Fork a spare: a worker as [`Order::Spawn`] forks, named
    /// [`SPARE_NAME`] until its call arrives.
    Spare(Rlimits),
    /// Reap this child (the server has killed its group).
    Reap(u32),
}

/// The zygote's answer: the child's pid, its raw wait status, or an errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    Spawned(u32),
    Reaped(i32),
    Failed(i32),
}

impl Order {
    pub fn encode(self) -> [u8; ORDER_BYTES] {
        let words = match self {
            Order::Spawn(r) => [1, r.memory, r.cpu_seconds, r.open_files, r.file_size],
            Order::Reap(pid) => [2, u64::from(pid), 0, 0, 0],
            Order::Spare(r) => [3, r.memory, r.cpu_seconds, r.open_files, r.file_size],
        };
        let mut out = [0; ORDER_BYTES];
        for (chunk, word) in out.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let words = words::<5>(bytes)?;
        let rlimits = Rlimits {
            memory: words[1],
            cpu_seconds: words[2],
            open_files: words[3],
            file_size: words[4],
        };
        match words[0] {
            1 => Some(Order::Spawn(rlimits)),
            2 => u32::try_from(words[1]).ok().map(Order::Reap),
            3 => Some(Order::Spare(rlimits)),
            _ => None,
        }
    }
}

impl Reply {
    pub fn encode(self) -> [u8; REPLY_BYTES] {
        let (kind, value): (u64, u64) = match self {
            Reply::Spawned(pid) => (1, u64::from(pid)),
            Reply::Reaped(status) => (2, status as u32 as u64),
            Reply::Failed(errno) => (3, errno as u32 as u64),
        };
        let mut out = [0; REPLY_BYTES];
        out[..8].copy_from_slice(&kind.to_le_bytes());
        out[8..].copy_from_slice(&value.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let [kind, value] = words::<2>(bytes)?;
        let value = u32::try_from(value).ok()?;
        match kind {
            1 => Some(Reply::Spawned(value)),
            2 => Some(Reply::Reaped(value as i32)),
            3 => Some(Reply::Failed(value as i32)),
            _ => None,
        }
    }
}

fn words<const N: usize>(bytes: &[u8]) -> Option<[u64; N]> {
    if bytes.len() != N * 8 {
        return None;
    }
    let mut words = [0; N];
    for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        *word = u64::from_le_bytes(chunk.try_into().ok()?);
    }
    Some(words)
}

/// Sends `order` (with `fds` for a spawn) on `socket`.
pub fn send_order(socket: RawFd, order: Order, fds: &[RawFd]) -> nix::Result<()> {
    let bytes = order.encode();
    let iov = [IoSlice::new(&bytes)];
    let rights = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
    sendmsg::<()>(socket, &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None).map(drop)
}

/// Reads one reply from `socket`; `None` when the zygote is gone or said
/// something that is not a reply.
pub fn read_reply(socket: RawFd) -> nix::Result<Option<Reply>> {
    let mut bytes = [0u8; REPLY_BYTES + 1];
    let mut iov = [IoSliceMut::new(&mut bytes)];
    let read = loop {
        match recvmsg::<()>(socket, &mut iov, None, MsgFlags::empty()) {
            Err(Errno::EINTR) => continue,
            other => break other?.bytes,
        }
    };
    Ok(Reply::decode(&bytes[..read]))
}

/// Entry point of the zygote process: serves orders on stdin until the
/// server closes it (exit 0). Each forked child, once it is a worker (its
/// own session, the call's stdio, the call's rlimits), runs `worker` and
/// exits with 0 if it succeeded, else 3.
pub fn serve(worker: impl Fn() -> ExitCode) -> ExitCode {
    // The control socket is the zygote's stdin, used as is: a child's
    // stdin replaces it, so no child ever holds it.
    let control = std::io::stdin().as_raw_fd();
    let zygote = nix::unistd::getpid();
    loop {
        let mut bytes = [0u8; ORDER_BYTES + 1];
        let mut space = nix::cmsg_space!([RawFd; 3]);
        let mut iov = [IoSliceMut::new(&mut bytes)];
        let received = recvmsg::<()>(control, &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC);
        let (read, fds) = match received {
            Err(Errno::EINTR) => continue,
            Err(_) => return ExitCode::SUCCESS,
            Ok(message) if message.bytes == 0 => return ExitCode::SUCCESS,
            Ok(message) => (message.bytes, owned_rights(&message)),
        };
        let reply = match (Order::decode(&bytes[..read]), <[OwnedFd; 3]>::try_from(fds)) {
            (Some(Order::Spawn(rlimits)), Ok(stdio)) => spawn(&worker, zygote, rlimits, stdio, false),
            (Some(Order::Spare(rlimits)), Ok(stdio)) => spawn(&worker, zygote, rlimits, stdio, true),
            (Some(Order::Reap(pid)), _) => reap(pid),
            _ => Reply::Failed(Errno::EINVAL as i32),
        };
        let answer = reply.encode();
        if sendmsg::<()>(
            control,
            &[IoSlice::new(&answer)],
            &[],
            MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .is_err()
        {
            return ExitCode::SUCCESS;
        }
    }
}

/// The descriptors a message carried, owned (closed when dropped).
#[allow(unsafe_code)]
fn owned_rights(message: &nix::sys::socket::RecvMsg<'_, '_, ()>) -> Vec<OwnedFd> {
    let mut owned = Vec::new();
    if let Ok(cmsgs) = message.cmsgs() {
        for cmsg in cmsgs {
            if let ControlMessageOwned::ScmRights(fds) = cmsg {
                // SAFETY: the kernel just installed these descriptors in
                // this process for this message; nothing else owns them.
                owned.extend(fds.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
            }
        }
    }
    owned
}

/// Forks one worker. The parent's copies of `stdio` close when this returns.
#[allow(unsafe_code)]
fn spawn(
    worker: &dyn Fn() -> ExitCode,
    zygote: Pid,
    rlimits: Rlimits,
    stdio: [OwnedFd; 3],
    spare: bool,
) -> Reply {
    // SAFETY: the zygote is single-threaded (it starts no thread and runs
    // no guard), so the child may allocate and lock freely.
    match unsafe { nix::unistd::fork() } {
        Ok(ForkResult::Parent { child }) => Reply::Spawned(child.as_raw() as u32),
        Ok(ForkResult::Child) => {
            if spare {
                name_spare();
            }
            let code = forked_worker(worker, zygote, rlimits, stdio);
            // Never return into the zygote's loop. A worker's codes are 0
            // and 3.
            std::process::exit(if code == ExitCode::SUCCESS { 0 } else { 3 })
        }
        Err(errno) => Reply::Failed(errno as i32),
    }
}

/// The name a spare had before it was named [`SPARE_NAME`].
static OWN_NAME: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();

/// In a forked spare: names it [`SPARE_NAME`], keeping its own name for
/// [`claimed`]. A name that cannot be read or set leaves it as it is.
fn name_spare() {
    let Ok(own) = nix::sys::prctl::get_name() else {
        return;
    };
    if OWN_NAME.set(own).is_ok()
        && let Ok(spare) = std::ffi::CString::new(SPARE_NAME)
    {
        let _ = nix::sys::prctl::set_name(&spare);
    }
}

/// Whether this process was forked as a spare (it may then prepare for
/// its call while it waits: the call is not waiting for it yet).
pub fn forked_as_spare() -> bool {
    OWN_NAME.get().is_some()
}

/// Called by a worker when its call arrives: a spare takes its own name
/// back (`prctl(PR_SET_NAME)`, which the script worker's seccomp filter
/// allows for this); any other worker is left as it is.
pub fn claimed() {
    if let Some(own) = OWN_NAME.get() {
        let _ = nix::sys::prctl::set_name(own);
    }
}

/// The forked child's entry point: `worker` once it is a worker.
fn forked_worker(
    worker: &dyn Fn() -> ExitCode,
    zygote: Pid,
    rlimits: Rlimits,
    stdio: [OwnedFd; 3],
) -> ExitCode {
    match become_worker(zygote, rlimits, stdio) {
        Ok(()) => worker(),
        Err(error) => {
            eprintln!("warden worker: cannot set up a forked worker: {error}");
            ExitCode::from(3)
        }
    }
}

/// In the forked child: a session of its own, the call's stdio, nothing
/// else open, the call's rlimits.
fn become_worker(zygote: Pid, rlimits: Rlimits, stdio: [OwnedFd; 3]) -> std::io::Result<()> {
    crate::process::enter_own_session(zygote)?;
    let [stdin, stdout, stderr] = stdio;
    nix::unistd::dup2_stderr(&stderr)?;
    nix::unistd::dup2_stdin(&stdin)?;
    nix::unistd::dup2_stdout(&stdout)?;
    // Closed through their owners first, so the sweep below closes only
    // what no Rust value owns.
    drop((stdin, stdout, stderr));
    crate::process::close_descriptors_above_stderr()?;
    crate::process::apply_rlimits(rlimits)
}

fn reap(pid: u32) -> Reply {
    let Ok(raw) = i32::try_from(pid) else {
        return Reply::Failed(Errno::EINVAL as i32);
    };
    // The server is done with this worker and has killed its group; the
    // child itself is killed here too, in case it had not yet made its
    // group (a call cancelled right after the fork). It is this process's
    // unreaped child, so the pid cannot belong to anything else.
    let _ = nix::sys::signal::kill(Pid::from_raw(raw), nix::sys::signal::Signal::SIGKILL);
    loop {
        return match waitpid(Pid::from_raw(raw), None) {
            Err(Errno::EINTR) => continue,
            Err(errno) => Reply::Failed(errno as i32),
            Ok(WaitStatus::Exited(_, code)) => Reply::Reaped((code & 0xff) << 8),
            Ok(WaitStatus::Signaled(_, signal, core)) => {
                Reply::Reaped(signal as i32 | if core { 0x80 } else { 0 })
            }
            Ok(_) => Reply::Failed(Errno::ECHILD as i32),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_and_replies_survive_the_wire() {
        // Every order and reply decodes to itself; short or unknown messages decode to nothing.
        let spawn = Order::Spawn(Rlimits {
            memory: 1 << 30,
            cpu_seconds: u64::MAX,
            open_files: 64,
            file_size: 16 << 20,
        });
        let Order::Spawn(limits) = spawn else {
            unreachable!()
        };
        for order in [spawn, Order::Spare(limits), Order::Reap(4242)] {
            assert_eq!(Order::decode(&order.encode()), Some(order));
        }
        for reply in [
            Reply::Spawned(7),
            Reply::Reaped(9),
            Reply::Reaped(0x100),
            Reply::Failed(11),
        ] {
            assert_eq!(Reply::decode(&reply.encode()), Some(reply));
        }
        assert_eq!(Order::decode(&[1, 2, 3]), None);
        assert_eq!(Reply::decode(&[0; 16]), None);
    }
}
