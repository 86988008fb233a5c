//! The paper-order guards: where the ledger lives, and the two guards.
//!
//! Both run `in_process`. An isolated worker could write the file too (only
//! script workers are Landlocked), but it would need the ledger's path and
//! the artifacts directory passed through the worker allow-list, and a
//! fresh process per order gains nothing for a few lines of file I/O;
//! concurrent calls are serialised by the ledger's `flock` either way.

use std::path::PathBuf;

use warden::GuardError;

use crate::domain::paper_orders::{
    Ledger, ListOrdersInput, OrderList, PlaceOrderInput, PlacedOrder, new_order,
};

/// The ledger's file name in the artifacts directory when
/// `WARDEN_FINANCE_LEDGER` is unset.
pub const DEFAULT_LEDGER_FILE: &str = "paper-orders.jsonl";

/// The artifacts directory as Warden resolves it for this app (which sets
/// no `App::artifacts_dir` of its own): `WARDEN_ARTIFACTS_DIR`, else
/// `./artifacts`.
fn artifacts_dir() -> PathBuf {
    warden::config::var_os("WARDEN_ARTIFACTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("artifacts"))
}

/// The paper ledger: `WARDEN_FINANCE_LEDGER` (environment or `.env`,
/// through Warden's configuration), else `paper-orders.jsonl` in the
/// artifacts directory.
pub fn ledger_path() -> PathBuf {
    warden::config::var_os("WARDEN_FINANCE_LEDGER")
        .map(PathBuf::from)
        .unwrap_or_else(|| artifacts_dir().join(DEFAULT_LEDGER_FILE))
}

/// Destructive: appends one line per new order to the ledger.
pub fn place_paper_order(input: PlaceOrderInput) -> Result<PlacedOrder, GuardError> {
    let placed_at = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    let order = new_order(input, placed_at)?;
    let path = ledger_path();
    if warden::config::var_os("WARDEN_FINANCE_LEDGER").is_none() {
        // The server makes the artifacts directory at start; the CLI's `call`
        // may come first. An error here shows when the ledger is opened.
        let _ = std::fs::create_dir_all(artifacts_dir());
    }
    Ok(Ledger::new(path).place(order)?)
}

/// Read-only: the ledger's orders, newest last.
pub fn list_paper_orders(input: ListOrdersInput) -> Result<OrderList, GuardError> {
    Ok(Ledger::new(ledger_path()).list(input)?)
}
