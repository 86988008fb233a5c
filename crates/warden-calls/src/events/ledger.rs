//! Side effects put on record beyond this machine.
//!
//! A destructive guard's call is written through to its task's own
//! `events.jsonl` before it runs (`executor::lifecycle`), so the next
//! server to open the same directory names it when the task's server died
//! (`recovered`). With several nodes on one shared task store, the node
//! that ends a dead node's task (its lease ran out) cannot read that
//! node's directory. A [`Ledger`] is where the start goes as well: the
//! executor awaits [`Ledger::started`] before the function runs, and a
//! start that cannot be put on record refuses the call
//! (`side_effect_unrecorded`): a side effect that could be left unnamed
//! never happens. How the call settled follows without a wait
//! ([`Ledger::settled`]); lost, it leaves the side effect `unknown`,
//! which says "it started and may have taken effect" — never more than is
//! known.
//!
//! The task layer implements it over the shared task store and attaches it
//! to a task's [`super::Events`] ([`super::Events::with_ledger`]); the
//! embedded store needs none, since whoever ends a task there reads its
//! directory.

use warden_core::future::BoxFuture;

use super::recovered::SideEffect;

/// Where a task's side effects are recorded beyond its node (see the
/// module docs).
pub trait Ledger: Send + Sync + std::fmt::Debug {
    /// Records that the call `call_id` starts `side_effect` (status
    /// `unknown`). Resolves once it is durable; `Err` says why it is not,
    /// and the call does not run.
    fn started(&self, call_id: &str, side_effect: &SideEffect) -> BoxFuture<'static, Result<(), String>>;

    /// Records how the call `call_id` settled, without waiting: a lost
    /// write leaves it `unknown`.
    fn settled(&self, call_id: &str, side_effect: &SideEffect);
}
