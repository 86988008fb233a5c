//! The future a crate's async API hands to the crates above it.
//!
//! An `async fn`'s state machine is compiled in the crate that polls it,
//! not the crate that defines it, and so is every `async fn` it awaits:
//! the facade that awaited `warden-mcp`'s serve loop compiled rmcp's
//! service, the task runner and the executor again, and `warden-mcp`
//! compiled `warden-task`'s again (the one-guard app carried seven copies
//! of the executor's call and of a task's finish). A public async entry
//! point that other crates await on a large path therefore returns a
//! [`BoxFuture`] made in its own crate: its state machine is compiled once,
//! there, and the crates above poll it through a pointer, for one
//! allocation per call (docs/benchmarks.md, fifth round).

use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future: see the module docs for when to return one.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
