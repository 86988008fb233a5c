//! The server side of a script run: [`session`] starts a sandboxed script
//! worker and drives it, `door` answers its messages (guard calls go
//! through the executor), [`calls`] streams `function_calls.json`, and
//! [`progress`] sends live progress to the client.

pub mod calls;
pub(crate) mod door;
pub mod journal;
pub mod plan;
pub mod progress;
pub mod session;
