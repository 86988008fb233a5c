//! Runs cases against a connected server, one at a time in suite order (a
//! `concurrent_tool` case runs its own requests in parallel).
//!
//! Called by [`super::run`] after the tool and contract checks. Each case
//! yields a [`CaseReport`]; a failure says what differed (path, expected,
//! actual), never just "failed".

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::service::{Peer, RoleClient};
use serde_json::{Map, Value, json};
use tokio::sync::Semaphore;

use super::assertions::{Mismatch, check_call, check_prompt};
use super::client::call;
use super::config::{ServerConfig, seconds};
use super::prompt::{PromptSource, answer};
use super::report::{CaseReport, RequestReport, Verdict, describe_all};
use super::suite::{Case, CaseKind, ConcurrentCase, PromptCase, Requests, ToolCase};

/// What every case needs from the run.
pub(crate) struct RunContext<'a> {
    pub peer: Peer<RoleClient>,
    pub config: &'a ServerConfig,
    pub prompts: PromptSource,
    /// Tool names from tools/list, for checking prompt tool calls.
    pub listed: Vec<String>,
}

/// Runs one case.
pub(crate) async fn run_case(context: &RunContext<'_>, case: &Case) -> CaseReport {
    let started = Instant::now();
    let mut report = CaseReport {
        id: case.id.clone(),
        suite: case.suite.clone(),
        kind: case.type_name(),
        status: Verdict::Passed,
        result: None,
        results: None,
        error: None,
        failures: Vec::new(),
        duration_ms: 0.0,
    };
    match &case.kind {
        CaseKind::Tool(tool) => tool_case(context, tool, &mut report).await,
        CaseKind::Concurrent(concurrent) => concurrent_case(context, concurrent, &mut report).await,
        CaseKind::Prompt(prompt) => prompt_case(context, prompt, case, &mut report).await,
    }
    report.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    report
}

fn call_timeout(context: &RunContext<'_>, case: &ToolCase) -> Duration {
    // Validated when the suite was loaded.
    seconds(case.timeout_seconds, context.config.call_timeout).unwrap_or(context.config.call_timeout)
}

async fn tool_case(context: &RunContext<'_>, case: &ToolCase, report: &mut CaseReport) {
    let outcome = call(
        &context.peer,
        &case.tool,
        &case.arguments,
        call_timeout(context, case),
    )
    .await;
    report.result = Some(outcome.to_report());
    report.judge(check_call(&case.expect(), &outcome));
}

async fn concurrent_case(context: &RunContext<'_>, case: &ConcurrentCase, report: &mut CaseReport) {
    let calls: Vec<(String, Map<String, Value>)> = match &case.requests {
        Requests::Count(n) => vec![(case.call.tool.clone(), case.call.arguments.clone()); *n],
        Requests::List(list) => list
            .iter()
            .map(|r| {
                (
                    r.tool.clone().unwrap_or_else(|| case.call.tool.clone()),
                    r.arguments.clone().unwrap_or_else(|| case.call.arguments.clone()),
                )
            })
            .collect(),
    };
    let slots = Arc::new(Semaphore::new(case.max_concurrency.unwrap_or(calls.len()).max(1)));
    let timeout = call_timeout(context, &case.call);
    let expect = Arc::new(case.call.expect());
    let mut running = tokio::task::JoinSet::new();
    for (index, (tool, arguments)) in calls.into_iter().enumerate() {
        let peer = context.peer.clone();
        let slots = slots.clone();
        let expect = expect.clone();
        running.spawn(async move {
            // The semaphore lives as long as the case; it is never closed.
            let _permit = slots.acquire_owned().await.ok();
            let started = Instant::now();
            let outcome = call(&peer, &tool, &arguments, timeout).await;
            let failures = check_call(&expect, &outcome);
            RequestReport {
                index,
                tool,
                status: Verdict::of(&failures),
                result: outcome.to_report(),
                error: (!failures.is_empty()).then(|| describe_all(&failures)),
                failures,
                duration_ms: started.elapsed().as_secs_f64() * 1000.0,
            }
        });
    }
    let mut results = Vec::new();
    while let Some(joined) = running.join_next().await {
        match joined {
            Ok(result) => results.push(result),
            Err(error) => report.failures.push(Mismatch::new(
                "requests",
                Value::Null,
                Value::Null,
                format!("a request task failed: {error}"),
            )),
        }
    }
    results.sort_by_key(|r| r.index);
    let failed: Vec<String> = results
        .iter()
        .filter(|r| r.status == Verdict::Failed)
        .map(|r| format!("[{}] {}", r.index, r.error.as_deref().unwrap_or("")))
        .collect();
    let total = results.len();
    report.results = Some(results);
    let mut failures = std::mem::take(&mut report.failures);
    if !failed.is_empty() {
        failures.push(Mismatch::new(
            "requests",
            json!(format!("all {total} requests pass")),
            json!(format!("{} of {total} failed", failed.len())),
            failed.join("; "),
        ));
    }
    report.judge(failures);
}

async fn prompt_case(context: &RunContext<'_>, prompt: &PromptCase, case: &Case, report: &mut CaseReport) {
    match answer(
        &context.prompts,
        prompt,
        &case.raw,
        &case.id,
        &context.config.path,
    )
    .await
    {
        Ok(Some(answer)) => {
            report.result = Some(json!({
                "response": answer.response,
                "tool_calls": answer.tool_calls,
                "source": match context.prompts {
                    PromptSource::Replay => "replay",
                    PromptSource::Adapter(_) => "adapter",
                },
            }));
            report.judge(check_prompt(prompt, &answer, &context.listed));
        }
        Ok(None) => {
            report.status = Verdict::Skipped;
            report.error = Some("no replay data and no --prompt-adapter: nothing answers this prompt".into());
        }
        Err(error) => report.judge(vec![Mismatch::new(
            "adapter",
            Value::Null,
            Value::Null,
            error.to_string(),
        )]),
    }
}
