//! Warden's scripts: the Rhai sandbox that composes guards, in one crate
//! split by side. Apps use the `warden` facade.
//!
//! [`worker`] is the sandboxed side: the script worker process (entry point,
//! sandbox layers, engine, guard bindings, charts, and its door — the pipe).
//! [`host`] is the server side: the session that starts a worker and its
//! door, which answers the worker's guard calls through the executor (the
//! `warden-calls` crate below: a script reaches a guard no other way).
//! [`protocol`] is the one wire format between the two.
//!
//! ```
//! use warden_core::error::GuardError;
//!
//! // What a script sees for each item of a `map_call`: its output, or
//! // the error it can branch on.
//! let ok = warden_script::protocol::map_item(Ok(serde_json::json!(2.5)));
//! assert_eq!(ok, serde_json::json!({"ok": 2.5}));
//! let failed = warden_script::protocol::map_item(Err(GuardError::invalid_input("spot", "must be positive")));
//! assert_eq!(failed["error"]["field"], "spot");
//! ```

#![warn(unreachable_pub)]

pub mod host;
pub mod limits;
pub mod protocol;
pub mod worker;

/// Second argument after `WORKER_ARG` that selects a script worker.
pub const SCRIPT_WORKER: &str = "script";

/// Where a server's script workers come from: a zygote of the application
/// binary `exe` (re-executed once, on the first task, as `exe WORKER_ARG
/// script ZYGOTE_ARG`; the app's worker branch then runs
/// [`worker::zygote_main`]) that forks one worker per task. The zygote
/// builds the registry and the worker's engine once ([`worker::Ready`]), so
/// a task's worker skips the `exec`, the loader, the registry and the
/// engine a fresh worker paid for. Each child still enters its own session,
/// takes its task's stdio and rlimits (`warden_sandbox::zygote::child`) and
/// applies every sandbox layer itself ([`warden_sandbox::layers::apply`])
/// before its hello, as an exec'd worker did, so the layers a task reports
/// are its own process's. After the first task the zygote keeps the next
/// task's worker forked and confined ahead of it (a spare, named
/// `warden-spare` until its task arrives; `warden_sandbox::zygote::Spare`):
/// the task takes it instead of waiting for its fork and confinement.
pub fn workers(exe: std::path::PathBuf) -> warden_sandbox::zygote::Zygote {
    warden_sandbox::zygote::Zygote::with_spare(
        exe,
        vec![
            warden_calls::worker::WORKER_ARG.into(),
            SCRIPT_WORKER.into(),
            warden_sandbox::zygote::ZYGOTE_ARG.into(),
        ],
    )
}

/// The registry reserves every script helper's name, so no guard can
/// shadow one: its list and the helpers the worker binds must agree.
#[cfg(test)]
mod reserved_names {
    #[test]
    fn helpers_names_every_helper_the_bindings_register() {
        use crate::worker::bindings::HELPERS;
        let source = include_str!("worker/bindings.rs");
        for call in source.split("register_fn(").skip(1) {
            let literal = call.trim_start().strip_prefix('"');
            if let Some(name) = literal.and_then(|rest| rest.split('"').next()) {
                let chart = crate::worker::charts::HELPERS.contains(&name);
                assert!(
                    HELPERS.contains(&name) || chart,
                    "helper {name} is missing from HELPERS"
                );
            }
        }
    }

    #[test]
    fn every_script_helper_name_is_reserved() {
        let charts = crate::worker::charts::HELPERS;
        let prelude = crate::worker::prelude::PRELUDE;
        for helper in crate::worker::bindings::HELPERS
            .iter()
            .chain(&charts)
            .chain(&prelude)
        {
            assert!(
                warden_core::registry::RESERVED_SCRIPT_NAMES.contains(helper),
                "script helper {helper} is not in warden_core::registry::RESERVED_SCRIPT_NAMES"
            );
        }
    }
}
