//! `verify_receipt`: recompute one call from its receipt on this server.
//!
//! A receipt holds hashes, not values, so the caller gives the arguments
//! the call was made with; they must hash to the receipt's
//! `arguments_sha256` before anything runs. The guard then runs as a
//! direct call (same admission, limits and events) and its output's hash
//! is compared. A difference is reported with both hashes and the output
//! recomputed here; the report names what else differs between the
//! receipt and this server (app, guard version, build), and a guard
//! declared `open_world` is named as such, since its output may differ
//! because the world did.
//!
//! A guard annotated destructive or not idempotent is never recomputed:
//! running it again would repeat its side effect on the word of a
//! receipt anyone can write, with nobody asked. The answer is then
//! `not_recomputable` with the reason, after the arguments are checked.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Builtin, BuiltinTool, Call, Reply, decode, tool};
use warden_calls::executor::CallRequest;
use warden_core::error::GuardError;
use warden_core::future::BoxFuture;
use warden_core::receipt::digest;

/// Verify a call receipt by recomputing the call here: give the receipt (from a call's _meta["warden/receipt"] or a run_batch call's "receipt") and the arguments the call was made with.
///
/// The arguments must hash to the receipt's arguments_sha256 (else verdict "arguments_differ" and nothing runs); then the guard runs once
/// and its output's SHA-256 is compared. A guard that is destructive or not idempotent is never run again: verdict "not_recomputable"
/// with the reason. Returns {verdict: "identical" | "output_differs" | "arguments_differ" | "not_recomputable", reason, guard, arguments_sha256,
/// output_sha256: {receipt, recomputed}, output (recomputed, when it differs), differences: [what else differs: app, guard_version, build],
/// nondeterministic (the guard reads the outside world, so a difference may be the world's)}.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct VerifyReceiptInput {
    /// The receipt, as a call returned it (its guard, arguments_sha256 and output_sha256 are required).
    pub receipt: ReceiptToVerify,
    /// The arguments the call was made with, exactly as they were sent, e.g. {"x": 1, "label": "a"}.
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

/// The parts of a call receipt verification reads; the rest of a receipt
/// is accepted as it is.
#[derive(Debug, Deserialize, JsonSchema)]
pub(super) struct ReceiptToVerify {
    /// The guard's name.
    pub guard: String,
    /// "sha256:" and 64 hex digits.
    pub arguments_sha256: String,
    /// "sha256:" and 64 hex digits.
    pub output_sha256: String,
    #[serde(default)]
    pub guard_version: Option<String>,
    /// {name, version} of the app that made it.
    #[serde(default)]
    pub app: Option<Value>,
    #[serde(default)]
    pub build: Option<String>,
}

pub(super) struct VerifyReceipt;

#[derive(Serialize)]
struct Report {
    verdict: &'static str,
    /// Why the call was not recomputed (`not_recomputable`).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    guard: String,
    arguments_sha256: Pair,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_sha256: Option<Pair>,
    /// The output recomputed here, when it differs from the receipt's.
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<Value>,
    differences: Vec<Difference>,
    nondeterministic: bool,
}

#[derive(Serialize)]
struct Pair {
    receipt: String,
    recomputed: String,
}

/// Something other than the output that differs between the receipt and
/// this server.
#[derive(Serialize)]
struct Difference {
    field: &'static str,
    receipt: Value,
    here: Value,
}

impl Builtin for VerifyReceipt {
    fn kind(&self) -> BuiltinTool {
        BuiltinTool::VerifyReceipt
    }
    fn mode(&self) -> &'static str {
        "direct"
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<VerifyReceiptInput>(self.name(), "Verify a call receipt", true)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, GuardError>> {
        Box::pin(async move {
            let input: VerifyReceiptInput = decode(call.arguments)?;
            let receipt = input.receipt;
            // A guard the policy denies this caller is unknown to it.
            let visible = call.ctx.visible(call.origin);
            let Some(guard) = visible.get(&receipt.guard) else {
                return Err(visible.unknown_guard(&receipt.guard).with_field("receipt.guard"));
            };
            let registry = visible.registry();
            let arguments = Value::Object(input.arguments);
            let arguments_sha256 = Pair {
                recomputed: digest(&arguments),
                receipt: receipt.arguments_sha256.clone(),
            };
            let nondeterministic = guard.hints.open_world || !guard.hints.idempotent;
            let provenance = registry.provenance();
            let mut differences = Vec::new();
            let mut differ = |field, receipt: Option<Value>, here: Value| {
                if let Some(receipt) = receipt
                    && receipt != here
                {
                    differences.push(Difference { field, receipt, here });
                }
            };
            let app = serde_json::to_value(&provenance.app).unwrap_or(Value::Null);
            differ("app", receipt.app.clone(), app);
            differ(
                "guard_version",
                receipt.guard_version.clone().map(Value::from),
                guard.guard_version().map_or(Value::Null, Value::from),
            );
            differ(
                "build",
                receipt.build.clone().map(Value::from),
                Value::from(provenance.build),
            );
            // Nothing runs for other arguments than the receipt's, nor for
            // a guard whose call must not be repeated.
            let not_run = if arguments_sha256.receipt != arguments_sha256.recomputed {
                Some(("arguments_differ", None))
            } else {
                not_recomputable(guard).map(|reason| ("not_recomputable", Some(reason)))
            };
            if let Some((verdict, reason)) = not_run {
                return Reply::data(&Report {
                    verdict,
                    reason,
                    guard: receipt.guard,
                    arguments_sha256,
                    output_sha256: None,
                    output: None,
                    differences,
                    nondeterministic,
                });
            }
            let output = call
                .ctx
                .executor()
                // Only guards without side effects get here; a destructive
                // one would be refused all the same (no consent).
                .call(CallRequest::new(
                    &receipt.guard,
                    arguments,
                    &*call.origin,
                    call.cancel.clone(),
                ))
                .await
                .map_err(|failure| failure.error)?;
            let recomputed = digest(&output);
            let identical = recomputed == receipt.output_sha256;
            Reply::data(&Report {
                verdict: if identical { "identical" } else { "output_differs" },
                reason: None,
                guard: receipt.guard,
                arguments_sha256,
                output_sha256: Some(Pair {
                    receipt: receipt.output_sha256,
                    recomputed,
                }),
                output: (!identical).then_some(output),
                differences,
                nondeterministic,
            })
        })
    }
}

/// Why `guard` must not be run again to verify a receipt, if it must not.
fn not_recomputable(guard: &warden_core::guard::Guard) -> Option<String> {
    let name = &guard.name;
    if guard.hints.destructive {
        return Some(format!(
            "'{name}' is annotated destructive: recomputing it would repeat its side effect, so its receipts cannot be verified by recomputation; compare the receipt's hashes with your own records instead"
        ));
    }
    if !guard.hints.idempotent {
        return Some(format!(
            "'{name}' is not idempotent: calling it again is not the same call, so its receipts cannot be verified by recomputation; compare the receipt's hashes with your own records instead"
        ));
    }
    None
}
