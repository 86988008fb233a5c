//! `bundle_coverage`: which guards a bundle of data can run, and what is
//! missing. Read-only over the slot vocabulary in [`warden_core::catalogue`].

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, BuiltinTool, Call, Reply, decode, tool};
use warden_core::catalogue::{SlotIndex, coverage, vocabulary};
use warden_core::error::GuardError;
use warden_core::future::BoxFuture;

/// Which guards can run on the data you have: give the slot names you hold, get back what is ready and what is missing.
///
/// Slots are the guards' input field names (one shared vocabulary: `returns` means the same data for every
/// guard that takes it). With `slots`: {have, unknown (names no guard uses), ready (guards whose required slots
/// are all present), not_ready {guard: [missing slots]}, one_slot_away {slot: [guards it alone would unlock]}}.
/// Without `slots`: the whole vocabulary, {vocabulary {slot: [guards using it]}, required_by {slot: [guards
/// requiring it]}}. Script-only functions take no slots and are not counted. check_backtest runs the ready ones.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct BundleCoverageInput {
    /// Slot names you have data for, e.g. ["series", "threshold"] (the guards' input field names); omit for the vocabulary.
    #[serde(default)]
    pub slots: Option<Vec<String>>,
}

pub(super) struct BundleCoverage;

/// The answer without `slots`: the whole vocabulary.
#[derive(Debug, Serialize)]
struct Vocabulary {
    count: usize,
    vocabulary: SlotIndex,
    required_by: SlotIndex,
}

impl Builtin for BundleCoverage {
    fn kind(&self) -> BuiltinTool {
        BuiltinTool::BundleCoverage
    }
    fn mode(&self) -> &'static str {
        "direct"
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<BundleCoverageInput>(self.name(), "Which guards your data can run", true)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, GuardError>> {
        Box::pin(async move {
            let input: BundleCoverageInput = decode(call.arguments)?;
            // Counted over the guards this caller may call only.
            let registry = call.ctx.visible(call.origin);
            let Some(slots) = input.slots else {
                let (vocabulary, required_by) = vocabulary(registry.iter());
                return Reply::data(&Vocabulary {
                    count: vocabulary.len(),
                    vocabulary,
                    required_by,
                });
            };
            let have: BTreeSet<String> = slots.into_iter().collect();
            Reply::data(&coverage(registry.iter(), &have))
        })
    }
}
