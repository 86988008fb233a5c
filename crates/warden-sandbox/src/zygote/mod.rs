//! The worker zygote: one confined process that forks a fresh worker per
//! call, so a call does not pay for an `exec` (see [`child`] for the
//! zygote process itself, and why).
//!
//! The server's side is [`Zygote`]. What a forked worker runs is not this
//! crate's business: the zygote is the application binary, started with
//! the arguments its owner gives (the executor's re-exec flags), and its
//! child calls the entry point its owner passes to [`child::serve`].
//!
//! One thread owns the zygote and its control socket; calls hand it orders
//! through a channel and await the answer, so a call's future never blocks
//! a runtime thread, and a dropped call can still have its worker reaped
//! (the order is sent without waiting for the answer).
//!
//! The thread starts the zygote on the first order and replaces it after
//! [`ZYGOTE_MAX_CHILDREN`] children, or when it stops answering or dies.
//! A zygote that died while idle (killed from outside, out of memory) is
//! noticed before the next spawn is sent to it, or when that spawn finds
//! its socket closed: a new zygote then serves the same call, so a dead
//! zygote costs only the calls that were running in its children.
//! A replaced zygote stays until its last child has been reaped: closing
//! its socket earlier would end it, and with it (by their parent-death
//! signal) the calls its children are still serving.
//!
//! **One spare.** A worker's start is mostly its own: after the fork it
//! takes its descriptors, lowers its rlimits, confines itself (a script
//! worker loads its Landlock ruleset and seccomp filter) and says hello,
//! 0.5–0.9 ms of a trivial script task on the development machine. So
//! whenever it has nothing else to do, the thread forks the next worker
//! ahead of its call, with pipes and a stderr buffer of its own
//! ([`Spare`]), under the rlimits the last call asked for; a call under
//! the same rlimits takes it ([`Zygote::take_spare`]) and finds it
//! confined and waiting on its stdin. It is the same worker a call would
//! have forked (one per call, never reused), only earlier: a spare under
//! other rlimits is never handed out (it is replaced), and one that died
//! while it waited (its zygote killed, say) is noticed by its closed
//! stdout and never handed out either.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock, mpsc};

use nix::sys::socket::{AddressFamily, SockFlag, SockType, setsockopt, socketpair, sockopt};
use nix::sys::time::TimeVal;
use tokio::sync::oneshot;

pub mod child;

pub use child::ZYGOTE_ARG;
use child::{Order, Reply, read_reply, send_order};

use crate::limits::{ZYGOTE_ANSWER_TIMEOUT, ZYGOTE_MAX_CHILDREN};
use crate::process::{Ended, Rlimits, confine_std, release_group, track_group, worker_env};
use crate::stderr::StderrBuffer;

/// Forks guard workers through a zygote. Cheap to clone; its thread and
/// the zygote start on the first spawn, so a server that never runs an
/// isolated guard starts neither.
#[derive(Debug, Clone)]
pub struct Zygote {
    keeper: Arc<Lazy>,
}

#[derive(Debug)]
struct Lazy {
    exe: PathBuf,
    args: Vec<OsString>,
    orders: OnceLock<mpsc::Sender<Job>>,
    /// The worker forked ahead of its call, shared with the thread that
    /// forks it.
    spare: Arc<Mutex<Option<Spare>>>,
    /// Whether the thread keeps a spare ([`Zygote::with_spare`]).
    spares: bool,
}

/// A worker forked before any call asked for it, with its own pipes and
/// stderr buffer: the caller owns it (and must have it reaped) once
/// [`Zygote::take_spare`] hands it out.
#[derive(Debug)]
pub struct Spare {
    /// Its pid, which is also its process group id.
    pub pid: u32,
    /// The server's end of its stdin.
    pub stdin: std::io::PipeWriter,
    /// The server's end of its stdout.
    pub stdout: std::io::PipeReader,
    /// Its stderr.
    pub stderr: StderrBuffer,
    rlimits: Rlimits,
}

impl Spare {
    /// Whether it died while it waited: nothing else holds the writing end
    /// of its stdout, so the pipe hangs up when it ends.
    fn hung_up(&self) -> bool {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd as _;
        let mut fds = [PollFd::new(self.stdout.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(_) => fds[0]
                .revents()
                .is_some_and(|r| r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR)),
            Err(_) => true,
        }
    }
}

/// One worker's stdio, as the child will see it.
pub struct Stdio3 {
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

enum Job {
    Spawn {
        stdio: Stdio3,
        rlimits: Rlimits,
        answer: oneshot::Sender<std::io::Result<u32>>,
    },
    Reap {
        pid: u32,
        answer: Option<oneshot::Sender<Option<ExitStatus>>>,
    },
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Spawn { .. } => f.write_str("Spawn"),
            Job::Reap { pid, .. } => write!(f, "Reap({pid})"),
        }
    }
}

impl Zygote {
    /// A handle that will start `exe` with `args` (which must make it
    /// call [`child::serve`]) as a zygote on the first spawn.
    pub fn new(exe: PathBuf, args: Vec<OsString>) -> Self {
        Self::build(exe, args, false)
    }

    /// [`Zygote::new`] keeping a [`Spare`] ready after the first spawn.
    /// For workers whose calls mostly share their rlimits (script tasks:
    /// one timeout for all but the few that set their own); guard workers'
    /// rlimits follow each guard's timeout, so a spare would often be
    /// forked for nothing.
    pub fn with_spare(exe: PathBuf, args: Vec<OsString>) -> Self {
        Self::build(exe, args, true)
    }

    fn build(exe: PathBuf, args: Vec<OsString>, spares: bool) -> Self {
        Self {
            keeper: Arc::new(Lazy {
                exe,
                args,
                orders: OnceLock::new(),
                spare: Arc::default(),
                spares,
            }),
        }
    }

    /// The keeper thread's order channel, started on first use.
    fn orders(&self) -> &mpsc::Sender<Job> {
        self.keeper.orders.get_or_init(|| {
            let (orders, jobs) = mpsc::channel();
            let keeper = Keeper {
                exe: self.keeper.exe.clone(),
                args: self.keeper.args.clone(),
                current: None,
                retiring: Vec::new(),
                owners: HashMap::new(),
                spare: self.keeper.spare.clone(),
                spares: self.keeper.spares,
                wanted: None,
            };
            let started = std::thread::Builder::new()
                .name("warden-zygote".into())
                .spawn(move || keeper.serve(jobs));
            if let Err(error) = started {
                // Every spawn then fails with the channel closed.
                tracing::warn!("cannot start the worker zygote's thread: {error}");
            }
            orders
        })
    }

    /// Forks a worker with `stdio` under `rlimits`; its pid, which is also
    /// its process group id.
    pub async fn spawn(&self, stdio: Stdio3, rlimits: Rlimits) -> std::io::Result<u32> {
        let (answer, answered) = oneshot::channel();
        self.orders()
            .send(Job::Spawn {
                stdio,
                rlimits,
                answer,
            })
            .map_err(|_| std::io::Error::other("the worker zygote's thread is gone"))?;
        answered
            .await
            .map_err(|_| std::io::Error::other("the worker zygote's thread is gone"))?
    }

    /// The spare worker, when one is ready under exactly `rlimits` and still
    /// alive. The next one is forked once a worker has been reaped (the
    /// call that took this one ended) and no order waits: not while the
    /// call that took it runs, on a machine with few cores. `None` before
    /// the first [`Zygote::spawn`] (nothing is forked before a call asks).
    pub fn take_spare(&self, rlimits: Rlimits) -> Option<Spare> {
        let orders = self.keeper.orders.get()?;
        let spare = {
            let mut slot = self.keeper.spare.lock().unwrap_or_else(|p| p.into_inner());
            if slot.as_ref()?.rlimits != rlimits {
                return None;
            }
            slot.take()?
        };
        if spare.hung_up() {
            release_group(spare.pid);
            let _ = orders.send(Job::Reap {
                pid: spare.pid,
                answer: None,
            });
            return None;
        }
        Some(spare)
    }

    /// Reaps worker `pid` (kill its group first) and says how it ended;
    /// `None` when that is unknown (its zygote died).
    pub async fn reap(&self, pid: u32) -> Option<ExitStatus> {
        let (answer, answered) = oneshot::channel();
        self.orders()
            .send(Job::Reap {
                pid,
                answer: Some(answer),
            })
            .ok()?;
        answered.await.ok().flatten()
    }

    /// Reaps worker `pid` without waiting (a dropped call).
    pub fn reap_detached(&self, pid: u32) {
        let _ = self.orders().send(Job::Reap { pid, answer: None });
    }
}

/// The zygote thread's state.
struct Keeper {
    exe: PathBuf,
    args: Vec<OsString>,
    /// The zygote that forks new workers.
    current: Option<Process>,
    /// Replaced zygotes whose children are not all reaped yet.
    retiring: Vec<Process>,
    /// Which zygote (by its pid) forked each live worker.
    owners: HashMap<u32, u32>,
    /// The spare, shared with [`Zygote::take_spare`].
    spare: Arc<Mutex<Option<Spare>>>,
    spares: bool,
    /// The rlimits of the last call forked: the next spare's.
    wanted: Option<Rlimits>,
}

/// One zygote process and its control socket.
struct Process {
    child: Child,
    control: OwnedFd,
    forked: u32,
    live: u32,
}

impl Process {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// One order and its reply, or why there was none.
    fn ask(&self, order: Order, fds: &[RawFd]) -> Result<Reply, Unanswered> {
        send_order(self.control.as_raw_fd(), order, fds).map_err(|_| Unanswered::Gone)?;
        match read_reply(self.control.as_raw_fd()) {
            Ok(Some(reply)) => Ok(reply),
            // SO_RCVTIMEO expired (EAGAIN is EWOULDBLOCK on Linux).
            Err(nix::errno::Errno::EAGAIN) => Err(Unanswered::Silent),
            // The socket closed (a read of 0 bytes decodes to nothing), or
            // the zygote said something that is not a reply.
            Ok(None) | Err(_) => Err(Unanswered::Gone),
        }
    }

    /// Whether the zygote process has ended. It is left a zombie
    /// (`WNOWAIT`), so its pid and group stay reserved until [`Self::end`]
    /// kills the group and reaps it.
    fn exited(&self) -> bool {
        use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
        let Ok(pid) = i32::try_from(self.pid()) else {
            return false;
        };
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        matches!(
            waitid(Id::Pid(nix::unistd::Pid::from_raw(pid)), flags),
            Ok(status) if status != WaitStatus::StillAlive
        )
    }

    /// Kills and reaps the zygote (its children die with it); how it
    /// ended, when that could be read.
    fn end(mut self) -> Option<ExitStatus> {
        release_group(self.pid());
        self.child.wait().ok()
    }
}

/// Why a zygote gave no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unanswered {
    /// Its socket is closed or it answered nonsense: it died or is dying.
    /// A spawn it never answered may go to a new zygote.
    Gone,
    /// Silent past [`ZYGOTE_ANSWER_TIMEOUT`]: the call has waited long
    /// enough and fails; the next one starts a new zygote.
    Silent,
}

impl Keeper {
    fn serve(mut self, jobs: mpsc::Receiver<Job>) {
        loop {
            // Orders first; the spare only when none is waiting.
            let job = match jobs.try_recv() {
                Ok(job) => job,
                Err(mpsc::TryRecvError::Empty) => {
                    self.refill();
                    match jobs.recv() {
                        Ok(job) => job,
                        Err(_) => break,
                    }
                }
                Err(mpsc::TryRecvError::Disconnected) => break,
            };
            match job {
                Job::Spawn {
                    stdio,
                    rlimits,
                    answer,
                } => {
                    self.wanted = self.spares.then_some(rlimits);
                    let spawned = self.spawn(&stdio, rlimits, false);
                    if let Err(Ok(pid)) = answer.send(spawned) {
                        // The call was dropped while its worker was forked.
                        release_group(pid);
                        self.reap(pid);
                    }
                }
                Job::Reap { pid, answer } => {
                    let status = self.reap(pid);
                    if let Some(answer) = answer {
                        let _ = answer.send(status);
                    }
                }
            }
        }
        // The server is shutting down: end every zygote and its children.
        self.discard_spare();
        for process in self.current.take().into_iter().chain(self.retiring.drain(..)) {
            let _ = process.end();
        }
    }

    /// Forks a spare under the rlimits last asked for, unless one is ready
    /// under them; replaces one under others. A spare that cannot be forked
    /// is not tried again before the next order (the next call forks its
    /// own worker and says why, if it cannot either).
    fn refill(&mut self) {
        let Some(rlimits) = self.wanted else {
            return;
        };
        let ready = {
            let slot = self.spare.lock().unwrap_or_else(|p| p.into_inner());
            slot.as_ref().map(|spare| spare.rlimits == rlimits)
        };
        match ready {
            Some(true) => return,
            Some(false) => self.discard_spare(),
            None => {}
        }
        match self.fork_spare(rlimits) {
            Ok(spare) => *self.spare.lock().unwrap_or_else(|p| p.into_inner()) = Some(spare),
            Err(error) => tracing::debug!("no spare worker: {error}"),
        }
    }

    fn fork_spare(&mut self, rlimits: Rlimits) -> std::io::Result<Spare> {
        let stderr = StderrBuffer::new()?;
        let (worker_stdin, stdin) = std::io::pipe()?;
        let (stdout, worker_stdout) = std::io::pipe()?;
        let stdio = Stdio3 {
            stdin: worker_stdin.into(),
            stdout: worker_stdout.into(),
            stderr: stderr.for_worker()?,
        };
        let pid = self.spawn(&stdio, rlimits, true)?;
        Ok(Spare {
            pid,
            stdin,
            stdout,
            stderr,
            rlimits,
        })
    }

    /// Kills and reaps the spare, if there is one.
    fn discard_spare(&mut self) {
        let spare = self.spare.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(spare) = spare {
            release_group(spare.pid);
            self.reap(spare.pid);
        }
    }

    /// Forks a worker, replacing a zygote found dead, and trying once more
    /// with a new zygote when the current one died on this very order
    /// (a child it may have forked before dying dies with it, by its
    /// parent-death signal, and was never handed the request).
    fn spawn(&mut self, stdio: &Stdio3, rlimits: Rlimits, spare: bool) -> std::io::Result<u32> {
        if self.current.as_ref().is_some_and(Process::exited) {
            self.bury_current();
        }
        match self.spawn_once(stdio, rlimits, spare) {
            Err((error, Some(Unanswered::Gone))) => {
                tracing::warn!("{error}; starting a new one for the same call");
                self.spawn_once(stdio, rlimits, spare).map_err(|(error, _)| error)
            }
            other => other.map_err(|(error, _)| error),
        }
    }

    /// One spawn order; on failure, whether the zygote left no answer.
    fn spawn_once(
        &mut self,
        stdio: &Stdio3,
        rlimits: Rlimits,
        spare: bool,
    ) -> Result<u32, (std::io::Error, Option<Unanswered>)> {
        if self
            .current
            .as_ref()
            .is_some_and(|z| z.forked >= ZYGOTE_MAX_CHILDREN)
        {
            self.retire_current();
        }
        if self.current.is_none() {
            self.current = Some(self.start(rlimits).map_err(|e| (e, None))?);
        }
        let Some(zygote) = self.current.as_mut() else {
            return Err((std::io::Error::other("no worker zygote"), None));
        };
        let fds = [
            stdio.stdin.as_raw_fd(),
            stdio.stdout.as_raw_fd(),
            stdio.stderr.as_raw_fd(),
        ];
        let order = if spare {
            Order::Spare(rlimits)
        } else {
            Order::Spawn(rlimits)
        };
        match zygote.ask(order, &fds) {
            Ok(Reply::Spawned(pid)) => {
                zygote.forked += 1;
                zygote.live += 1;
                let owner = zygote.pid();
                self.owners.insert(pid, owner);
                track_group(pid);
                Ok(pid)
            }
            Ok(Reply::Failed(errno)) => Err((std::io::Error::from_raw_os_error(errno), None)),
            // No answer, or a reap's answer to a spawn: this zygote is done.
            other => {
                let detail = self.bury_current();
                let error = std::io::Error::other(format!(
                    "the worker zygote stopped answering{detail}; the next call starts a new one"
                ));
                Err((error, other.err()))
            }
        }
    }

    fn reap(&mut self, pid: u32) -> Option<ExitStatus> {
        let owner = self.owners.remove(&pid)?;
        let zygote = match self.current.as_mut() {
            Some(current) if current.pid() == owner => current,
            _ => self.retiring.iter_mut().find(|z| z.pid() == owner)?,
        };
        let reply = zygote.ask(Order::Reap(pid), &[]);
        zygote.live = zygote.live.saturating_sub(1);
        let status = match reply {
            Ok(Reply::Reaped(raw)) => Some(ExitStatus::from_raw(raw)),
            Ok(_) => None,
            Err(_) => {
                self.bury(owner);
                return None;
            }
        };
        self.end_drained();
        status
    }

    /// Starts a zygote under `rlimits` without their CPU limit (each child
    /// sets its call's).
    fn start(&self, rlimits: Rlimits) -> std::io::Result<Process> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )?;
        setsockopt(
            &ours,
            sockopt::ReceiveTimeout,
            &TimeVal::new(ZYGOTE_ANSWER_TIMEOUT.as_secs() as _, 0),
        )?;
        let mut command = Command::new(&self.exe);
        command
            .args(&self.args)
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            // A zygote that cannot start says why on the server's stderr;
            // its workers write to their own logs.
            .stderr(Stdio::inherit())
            .env_clear()
            .envs(worker_env());
        confine_std(
            &mut command,
            Rlimits {
                cpu_seconds: nix::libc::RLIM_INFINITY,
                ..rlimits
            },
        );
        let child = command.spawn()?;
        track_group(child.id());
        Ok(Process {
            child,
            control: ours,
            forked: 0,
            live: 0,
        })
    }

    /// Moves the current zygote aside: it forks no more and ends once its
    /// last child is reaped.
    fn retire_current(&mut self) {
        if let Some(zygote) = self.current.take() {
            self.retiring.push(zygote);
        }
        self.end_drained();
    }

    fn end_drained(&mut self) {
        let (drained, kept) = self.retiring.drain(..).partition(|z| z.live == 0);
        self.retiring = kept;
        for zygote in drained {
            let _ = zygote.end();
        }
    }

    /// Lets go of the spare when zygote `pid` forked it: the spare dies
    /// with it (by its parent-death signal) and can no longer be reaped.
    fn drop_spare_of(&mut self, zygote: u32) {
        let mut slot = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(spare) = slot.take_if(|s| self.owners.get(&s.pid) == Some(&zygote)) {
            release_group(spare.pid);
        }
    }

    /// Ends the current zygote after it failed; says how it ended.
    fn bury_current(&mut self) -> String {
        let Some(zygote) = self.current.take() else {
            return String::new();
        };
        let pid = zygote.pid();
        self.drop_spare_of(pid);
        self.owners.retain(|_, owner| *owner != pid);
        // Asked before the kill, so the status read after it is the
        // zygote's own end, not the kill's.
        let exited = zygote.exited();
        let status = zygote.end();
        if exited {
            format!(" ({})", Ended::of(status))
        } else {
            String::new()
        }
    }

    /// Ends zygote `pid` after it failed; its workers' ends are unknown.
    fn bury(&mut self, pid: u32) {
        self.drop_spare_of(pid);
        self.owners.retain(|_, owner| *owner != pid);
        if self.current.as_ref().is_some_and(|z| z.pid() == pid) {
            self.bury_current();
            return;
        }
        if let Some(at) = self.retiring.iter().position(|z| z.pid() == pid) {
            let _ = self.retiring.swap_remove(at).end();
        }
    }
}
