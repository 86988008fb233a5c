//! Sandbox layers the script worker applies to itself at start, while it is
//! still single-threaded: a new network namespace (no interfaces but a down
//! loopback) and a Landlock ruleset that denies every filesystem access and
//! TCP bind/connect. A layer the kernel refuses is reported, never assumed.

use landlock::{ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetStatus};
use nix::sched::{CloneFlags, unshare};

use super::protocol::Layers;

/// Applies every layer it can and says which ones hold.
pub fn apply() -> Layers {
    Layers {
        network_namespace: enter_network_namespace(),
        landlock: deny_filesystem_and_network(),
        rlimits: address_space_limited(),
    }
}

fn enter_network_namespace() -> bool {
    // As root a plain network namespace works; otherwise a user namespace
    // grants the capability for it.
    unshare(CloneFlags::CLONE_NEWNET).is_ok()
        || unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET).is_ok()
}

fn deny_filesystem_and_network() -> String {
    let abi = ABI::V5;
    let ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.handle_access(AccessNet::from_all(abi)))
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
