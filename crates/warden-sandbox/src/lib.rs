//! Warden's process sandbox, one layer above the core: how a worker
//! process is confined, how workers are forked (the zygote), and how the
//! script worker confines itself further.
//!
//! [`process`] is what every worker gets between fork and exec: its own
//! process group (killed as one), death with the server, rlimits, a
//! scrubbed environment ([`mod@env`]: an explicit allow-list), no inherited
//! descriptors, no privileges and no capabilities. [`layers`] is what the script worker applies to itself at
//! start: a network namespace, a process limit, Landlock and a seccomp
//! allowlist, each checked against the kernel and reported, never assumed.
//! [`policy`] is the server's rule (`WARDEN_SANDBOX`) for a missing layer.
//!
//! [`zygote`] is one confined process that forks a worker per call, and
//! its server side; [`process::redirect_stdout`] keeps a worker's stdout
//! for its protocol, [`stderr::StderrBuffer`] keeps its stderr in memory
//! until there is something to keep, and [`pipe::spin_until_readable`]
//! waits for a message expected within microseconds without sleeping
//! through it.
//!
//! It runs no guard and knows no protocol: the executor and the script
//! host above it decide what a worker runs (the zygote's child calls the
//! entry point its owner passes) and call [`process::confine`] on the
//! workers they start.
//!
//! ```
//! use warden_sandbox::{Rlimits, WorkerLimits};
//!
//! // A call's worker gets the configured memory and files, and a CPU
//! // budget of its timeout plus a grace second.
//! let rlimits = Rlimits::for_call(&WorkerLimits::default(), 5);
//! assert_eq!(rlimits.cpu_seconds, 6);
//! assert_eq!(rlimits.memory, WorkerLimits::default().worker_memory);
//! ```

#![warn(unreachable_pub)]

pub mod env;
pub mod layers;
pub mod limits;
pub mod pipe;
pub mod policy;
pub mod process;
pub mod stderr;
pub mod zygote;

pub use limits::WorkerLimits;
pub use process::{Rlimits, confine, confine_std};
