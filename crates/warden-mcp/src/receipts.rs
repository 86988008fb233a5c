//! Call receipts over MCP: how a client asks for one and where it comes
//! back (see `warden_core::receipt` for what a receipt holds).
//!
//! A direct `tools/call` asks with `_meta: {"warden/receipt": true}` and
//! gets the receipt in the result's `_meta` under the same key, so a
//! client that never asks sees exactly today's result. `run_batch` asks
//! with its `receipt` option instead, and tasks always record them.

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, MetaObject, RequestMetaObject};
use serde_json::Value;

use warden_core::receipt::CallReceipt;

/// The `_meta` key a client asks for a receipt with, and the result's
/// `_meta` key it comes back under.
pub(crate) const RECEIPT_META_KEY: &str = "warden/receipt";

/// Whether the request's `_meta` asks for a receipt: `true` or `false`
/// (absent or null is `false`); anything else is refused, naming the key.
pub(crate) fn asked(meta: &RequestMetaObject) -> Result<bool, ErrorData> {
    match meta.get(RECEIPT_META_KEY) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(asked)) => Ok(*asked),
        Some(other) => Err(ErrorData::invalid_params(
            format!(
                "_meta.{RECEIPT_META_KEY} must be true (return the call's receipt) or false, got {other}"
            ),
            None,
        )),
    }
}

/// Puts `receipt` in `result`'s `_meta`.
pub(crate) fn attach(result: &mut CallToolResult, receipt: &CallReceipt) {
    let meta = result.meta.get_or_insert_with(|| MetaObject(Default::default()));
    meta.0.insert(
        RECEIPT_META_KEY.to_string(),
        serde_json::to_value(receipt).unwrap_or(Value::Null),
    );
}
