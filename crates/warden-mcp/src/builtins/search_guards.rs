//! `search_guards`: the guards that match a few words, best first, each
//! with its signature and one sentence (see `warden_core::search`).
//!
//! Read-only over the caller's view of the registry: a guard the policy
//! denies is never found. It runs nothing.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use warden_core::search::{DEFAULT_SEARCH_HITS, Hit, MAX_SEARCH_HITS};

use super::{Builtin, BuiltinTool, Call, Reply, decode, in_range, tool};
use warden_core::error::GuardError;
use warden_core::future::BoxFuture;

/// Find guards by what they do: a few words (e.g. "implied volatility", "transaction costs") ranked over
/// guard names, titles, categories, argument names and descriptions.
///
/// Each hit: name, category, signature (how a script calls it, every type spelled out), doc (the first
/// sentence of its description) and score, best first. Call describe_guard for one guard's full
/// description and schemas.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SearchGuardsInput {
    /// A few words saying what the guard should do (at most 512 bytes are read: MAX_QUERY_BYTES).
    pub query: String,
    /// How many hits at most: 1 to 25 (default 8).
    #[serde(default)]
    pub limit: Option<u64>,
}

pub(super) struct SearchGuards;

/// The hits, and how many guards were searched.
#[derive(Serialize)]
struct Found {
    query: String,
    hits: Vec<Hit>,
    searched: usize,
}

impl Builtin for SearchGuards {
    fn kind(&self) -> BuiltinTool {
        BuiltinTool::SearchGuards
    }
    fn mode(&self) -> &'static str {
        "direct"
    }
    fn tool(&self) -> rmcp::model::Tool {
        tool::<SearchGuardsInput>(self.name(), "Search guards", true)
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Reply, GuardError>> {
        Box::pin(async move {
            let input: SearchGuardsInput = decode(call.arguments)?;
            let limit = match input.limit {
                Some(limit) => in_range("limit", limit, 1, MAX_SEARCH_HITS as u64)? as usize,
                None => DEFAULT_SEARCH_HITS,
            };
            if warden_core::search::words(&input.query).is_empty() {
                return Err(GuardError::invalid_input(
                    "query",
                    "give a few words saying what the guard should do, e.g. \"implied volatility\"",
                ));
            }
            let registry = call.ctx.visible(call.origin);
            let hits = warden_core::search::search(registry.iter(), &input.query, limit);
            Reply::data(&Found {
                query: warden_core::search::cut(&input.query).to_string(),
                hits,
                searched: registry.iter().count(),
            })
        })
    }
}
