//! The coding-agent loop: model → code → script worker → observation → …
//!
//! Runs in the server. The model client never enters the sandbox; the code
//! it writes runs in the task's script worker with a persistent scope, so
//! a failed step can be repaired by the next. Budgets: steps (blocks that
//! ran: a block the worker's check refused before running costs a reply,
//! not a step), model calls, guard calls through the door, inline calls
//! (pure guards and script-only functions, a far larger budget), the
//! per-model-call timeout and the task deadline. The final answer must
//! pass the contract.

use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::ModelConfig;
use super::model::{Completion, Message, Usage, complete};
use crate::limits::{
    AGENT_MAX_MODEL_CALLS, AGENT_MAX_OBSERVATION_BYTES, AGENT_MAX_STEPS, AGENT_PLANNING_INTERVAL,
};
use warden_calls::events::Origin;
use warden_core::error::{GuardError, TaskErrorKind};
use warden_core::future::BoxFuture;
use warden_script::host::progress::{Progress, note};
use warden_script::host::session::{Budget, RunEnd, Session};
use warden_script::protocol::RunOutcome;
use warden_task::limits::AGENT_MAX_GUARD_CALLS;
use warden_task::store::{UsageEntry, now_ms, utc_day};
use warden_task::{
    Claim, Ending, ModelFailure, ResultError, Task, TaskResult, TaskRunner, TaskStatus, TokenUsage,
    WorkerFacts, abnormal_end, contract,
};

/// Runs one coding task and returns its result.
/// Boxed: compiled here once, not in each crate that awaits it
/// ([`warden_core::future`]).
pub fn run_coding_task<'a>(
    runner: &'a TaskRunner,
    config: &'a ModelConfig,
    prompt: &'a str,
    timeout: std::time::Duration,
    origin: &'a mut Origin,
    cancel: CancellationToken,
    (claim, progress): (Option<&'a Claim>, Option<&'a Progress>),
) -> BoxFuture<'a, Result<TaskResult, GuardError>> {
    Box::pin(async move {
        let cancel = &cancel;
        runner
            .run(origin, timeout, cancel, claim, async |task, origin| {
                task.model = Some(config.model_id.clone());
                // Its blocks share the agent's budgets: recorded, so a replay spends the same.
                task.limits = warden_task::task_receipt::RunLimits::coding(timeout, config.inline_calls);
                let denied = runner.executor.denied_guards(origin);
                let system = super::prompt::system_prompt(
                    runner.executor.registry(),
                    &denied,
                    config.inline_calls,
                    timeout,
                    prompt,
                );
                task.write_file("prompt.txt", prompt.as_bytes())?;
                task.write_file("agent_instructions.md", system.as_bytes())?;
                let (result, facts) =
                    converse(runner, config, task, origin, (cancel, progress), (system, prompt)).await;
                Ok(Ending::Finished(Box::new(result), Box::new(facts)))
            })
            .await
    })
}

/// The model's conversation in one worker session of `task`: the task's
/// result and what its worker did.
async fn converse(
    runner: &TaskRunner,
    config: &ModelConfig,
    task: &Task,
    origin: &Origin,
    (cancel, progress): (&CancellationToken, Option<&Progress>),
    (system, prompt): (String, &str),
) -> (TaskResult, WorkerFacts) {
    task.events.emit(
        origin,
        "agent_started",
        json!({"registered_functions": runner.executor.registry().len(), "model": config.model_id}),
    );
    let mut facts = WorkerFacts::default();
    let mut actions = 0usize;
    let mut agent_origin = task.origin_under(origin);
    agent_origin.trace = warden_calls::telemetry::start(
        "agent.run",
        SpanKind::Internal,
        &task.trace,
        vec![KeyValue::new("gen_ai.request.model", config.model_id.clone())],
    );
    let result = match task.start_worker(origin, || ()).await {
        Ok((mut session, ())) => {
            let mut agent = Agent {
                runner,
                config,
                task,
                origin: &agent_origin,
                cancel,
                progress,
                session: &mut session,
                messages: vec![Message::system(system), Message::user(prompt)],
                model_calls: 0,
                actions: 0,
                door_calls: 0,
                inline_calls: 0,
                usage: TokenUsage {
                    model: config.model_id.clone(),
                    ..TokenUsage::default()
                },
                unrun_blocks: 0,
            };
            let mut result = agent.drive().await;
            result.usage = Some(agent.usage.clone());
            actions = agent.actions;
            facts = session.take_facts();
            facts.exit = Some(session.finish());
            result
        }
        Err(reason) => TaskResult::failure(
            TaskStatus::Failed,
            TaskErrorKind::Worker,
            format!("the script worker failed to start: {reason}"),
        ),
    };
    warden_calls::telemetry::end(
        &agent_origin.trace,
        result.status.as_str(),
        result.error_kind().map(TaskErrorKind::as_str),
    );
    task.events.emit(
        origin,
        "agent_finished",
        json!({"status": result.status, "task_type": result.task_type, "actions": actions,
               "function_calls": facts.calls.made}),
    );
    (result, facts)
}

struct Agent<'a> {
    runner: &'a TaskRunner,
    config: &'a ModelConfig,
    task: &'a Task,
    origin: &'a Origin,
    cancel: &'a CancellationToken,
    progress: Option<&'a Progress>,
    session: &'a mut Session,
    messages: Vec<Message>,
    model_calls: usize,
    /// Steps: blocks that ran.
    actions: usize,
    /// Guard calls through the door so far (a map_call is one).
    door_calls: u64,
    /// Inline calls so far (pure guards, script-only functions).
    inline_calls: u64,
    /// The model's token usage so far.
    usage: TokenUsage,
    /// Code blocks of the last reply after its first, which did not run:
    /// the next observation says so.
    unrun_blocks: usize,
}

/// What a step's final answer leads to.
enum Verdict {
    /// The task ends with this result.
    Done(Box<TaskResult>),
    /// The task goes on; `problem` is what to report if no later step
    /// finishes it.
    GoesOn { problem: String },
}

impl Agent<'_> {
    /// Loops until a final answer passes the contract or a budget runs out.
    async fn drive(&mut self) -> TaskResult {
        let mut last_problem = String::from("the model never called final_answer");
        while self.actions < AGENT_MAX_STEPS {
            if self.model_calls >= AGENT_MAX_MODEL_CALLS {
                return TaskResult::failure(
                    TaskStatus::Failed,
                    TaskErrorKind::Limit,
                    format!("model call budget ({AGENT_MAX_MODEL_CALLS}) exhausted; {last_problem}"),
                );
            }
            if self.cancel.is_cancelled() {
                return abnormal_end(RunEnd::Cancelled, self.task.timeout);
            }
            let reply = match self.ask().await {
                Ok(reply) => reply,
                Err(result) => return result,
            };
            self.messages.push(Message::assistant(reply.clone()));
            // One block runs per reply; more are never dropped silently:
            // the model is told they did not run.
            let mut blocks = super::extract::code_blocks(&reply).into_iter();
            let skipped = blocks.len().saturating_sub(1);
            let Some(code) = blocks.next() else {
                last_problem = "the model replied without a code block".into();
                self.observe(
                    "Observation: your reply had no ```rhai code block. Reply with exactly one code block; finish with final_answer(#{...})."
                        .into(),
                );
                continue;
            };
            self.unrun_blocks = skipped;
            let step = self.actions + 1;
            let code_file = format!("agent_actions/action_{step:03}.rhai");
            let outcome = match self.run_block(step, &code, &code_file).await {
                Ok(outcome) => outcome,
                Err(result) => return result,
            };
            self.door_calls += outcome.door_calls;
            self.inline_calls += outcome.inline_calls;
            // Refused by the check before it ran: nothing happened, so no
            // step is spent (the reply was); the next block overwrites
            // this one's file.
            if outcome.not_run {
                last_problem = "the last block was refused by the check before it ran".into();
                self.observe(observation(&outcome));
                continue;
            }
            self.actions = step;
            let error_kind = outcome.error.as_ref().map(|e| e.kind);
            let status = if error_kind.is_some() { "failed" } else { "success" };
            self.step_event(step, status, error_kind.map(TaskErrorKind::as_str), &code_file);
            note(self.progress, format!("step {step} {status}")).await;
            // A step cut short by the deadline (inside a guard call, say)
            // ended because of it.
            if error_kind == Some(TaskErrorKind::Timeout)
                || (error_kind.is_some() && Instant::now() >= self.task.deadline)
            {
                return abnormal_end(RunEnd::TimedOut, self.task.timeout);
            }
            if let Some(answer) = outcome.final_answer.clone() {
                match self.judge(&answer, outcome).await {
                    Verdict::Done(result) => return *result,
                    Verdict::GoesOn { problem } => {
                        last_problem = problem;
                        continue;
                    }
                }
            }
            if let Some(error) = &outcome.error {
                last_problem = format!(
                    "the last step failed with a {} error: {}",
                    error.kind, error.message
                );
            }
            let mut observation = observation(&outcome);
            if self.actions.is_multiple_of(AGENT_PLANNING_INTERVAL) {
                observation.push_str("\n\nYou have used {n} of {max} steps. Restate your plan briefly in a comment, then continue."
                    .replace("{n}", &self.actions.to_string())
                    .replace("{max}", &AGENT_MAX_STEPS.to_string())
                    .as_str());
            }
            self.observe(observation);
        }
        TaskResult::failure(
            TaskStatus::Failed,
            TaskErrorKind::Limit,
            format!("step budget ({AGENT_MAX_STEPS}) exhausted; {last_problem}"),
        )
    }

    /// Runs one code block as step `step` (kept in `code_file`); `Err` ends
    /// the task (the worker failed, was cancelled or timed out).
    async fn run_block(
        &mut self,
        step: usize,
        code: &str,
        code_file: &str,
    ) -> Result<RunOutcome, TaskResult> {
        let _ = self.task.write_file(code_file, code.as_bytes());
        let budget = Budget {
            calls_left: AGENT_MAX_GUARD_CALLS.saturating_sub(self.door_calls),
            count_pure: true,
        };
        self.session.inline_calls_left = self.config.inline_calls.saturating_sub(self.inline_calls);
        let ctx = self.task.context(self.origin, self.cancel, self.progress);
        match self.session.run(&ctx, code, self.task.deadline, budget).await {
            RunEnd::Finished(outcome) => Ok(outcome),
            other => {
                self.actions = step;
                self.step_event(step, "failed", Some("worker"), code_file);
                Err(abnormal_end(other, self.task.timeout))
            }
        }
    }

    /// Judges a step's final answer against the contract: the task's
    /// result, or why the task goes on (the model was told, in the next
    /// observation: the person's answer, or what to fix).
    async fn judge(&mut self, answer: &serde_json::Value, outcome: RunOutcome) -> Verdict {
        let counts = self.session.call_counts();
        match contract::check(answer, counts.made, counts.ok) {
            Ok(answer) if answer.task_type == "needs_input" && !answer.missing.is_empty() => {
                // Ask the person instead of ending (when they can be
                // asked); their answer is the next observation.
                if let Some(given) = self.ask_person(&answer).await {
                    self.observe(format!(
                        "Observation: the person answered your question ({}): {given}. Continue the task with these values and finish with final_answer.",
                        answer.summary
                    ));
                    return Verdict::GoesOn {
                        problem: "the model asked the person and did not finish".into(),
                    };
                }
                Verdict::Done(Box::new(self.answered(&answer, outcome)))
            }
            Ok(answer) => Verdict::Done(Box::new(self.answered(&answer, outcome))),
            Err(reason) => {
                // What the step printed is kept: the model needs the
                // numbers it computed to answer again.
                let mut text = printed(&outcome);
                text.push_str(&format!(
                    "final_answer was refused: {reason}. Fix it and call final_answer again."
                ));
                self.observe(capped(text));
                Verdict::GoesOn {
                    problem: format!("the final answer broke the contract: {reason}"),
                }
            }
        }
    }

    /// One model call with its events; a failure ends the task.
    async fn ask(&mut self) -> Result<String, TaskResult> {
        let limit = self.runner.limits().task_tokens;
        if limit > 0 && self.usage.total_tokens >= limit {
            let message = format!(
                "the task used {} model tokens, its limit is {limit} (WARDEN_TASK_TOKENS): no further model call was made",
                self.usage.total_tokens
            );
            return Err(TaskResult::failure(
                TaskStatus::Failed,
                TaskErrorKind::Limit,
                message,
            ));
        }
        self.within_daily_tokens().await?;
        self.model_calls += 1;
        let n = self.model_calls;
        let events = &self.task.events;
        events.emit(
            self.origin,
            "model_call_started",
            json!({"model_call": n, "streaming": false}),
        );
        let remaining = self.task.deadline.saturating_duration_since(Instant::now());
        let timeout = self.config.call_timeout.min(remaining);
        let started = std::time::Instant::now();
        let span = warden_calls::telemetry::start(
            "model.generate",
            SpanKind::Client,
            &self.origin.trace,
            vec![
                KeyValue::new("gen_ai.request.model", self.config.model_id.clone()),
                KeyValue::new("warden.model_call", n as i64),
            ],
        );
        let reply = tokio::select! {
            reply = complete(self.config, &self.messages, timeout) => reply,
            _ = self.cancel.cancelled() => return Err(abnormal_end(RunEnd::Cancelled, self.task.timeout)),
        };
        let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        let (status, error_type) = match &reply {
            Ok(_) => ("success", None),
            Err(error) => ("failed", Some(error.kind)),
        };
        // What the call is counted as: the reply's usage or its estimate;
        // a reply refused for an absurd count is counted by its estimate
        // too (the endpoint did the work). Only a call nothing came back
        // from counts nothing.
        let usage = match &reply {
            Ok(completion) => Some(completion.usage),
            Err(error) => error.usage,
        };
        if let Some(usage) = usage {
            self.usage
                .add(usage.input_tokens, usage.output_tokens, usage.estimated);
            self.record_usage(usage).await;
            // Each count is at most MAX_MODEL_TOKENS_PER_RESPONSE: no i64 overflow.
            let mut attributes = vec![
                KeyValue::new("gen_ai.usage.input_tokens", usage.input_tokens as i64),
                KeyValue::new("gen_ai.usage.output_tokens", usage.output_tokens as i64),
                KeyValue::new("warden.usage_estimated", usage.estimated),
            ];
            if let Ok(Completion {
                model: Some(model), ..
            }) = &reply
            {
                attributes.push(KeyValue::new("gen_ai.response.model", model.clone()));
            }
            warden_calls::telemetry::set_attributes(&span, attributes);
        }
        warden_calls::telemetry::end(&span, status, error_type);
        events.emit(
            self.origin,
            "model_call_finished",
            json!({"model_call": n, "streaming": false, "status": status, "error_type": error_type, "duration_ms": duration_ms,
                   "input_tokens": usage.map(|u| u.input_tokens), "output_tokens": usage.map(|u| u.output_tokens),
                   "usage_estimated": usage.map(|u| u.estimated)}),
        );
        note(self.progress, format!("model call {n} {status}")).await;
        reply.map(|completion| completion.text).map_err(|error| {
            if error.kind == "timeout" && Instant::now() >= self.task.deadline {
                return abnormal_end(RunEnd::TimedOut, self.task.timeout);
            }
            TaskResult::failure(
                TaskStatus::Failed,
                TaskErrorKind::Model,
                format!("model call {n} failed: {error}"),
            )
            .with_error(ResultError::Model(ModelFailure {
                kind: TaskErrorKind::Model,
                model_error: error.kind.to_string(),
                message: error.message,
            }))
        })
    }

    /// The task's result for an accepted final answer. What the last step
    /// printed on its way to the answer is part of the answer's evidence.
    fn answered(&self, answer: &contract::Answer, outcome: RunOutcome) -> TaskResult {
        TaskResult {
            output: Some(outcome.output),
            output_truncated: Some(outcome.output_truncated),
            steps: Some(self.actions),
            model_calls: Some(self.model_calls),
            ..TaskResult::answer(answer)
        }
    }

    /// Asks the person behind the request the `missing` fields of a
    /// `needs_input` answer, as a form; their values when they accepted,
    /// `None` when they declined, did not answer by the deadline, or
    /// nobody can be asked (the task then ends `needs_input`, as before).
    /// Each question and its outcome is an event.
    async fn ask_person(&mut self, answer: &contract::Answer) -> Option<String> {
        let asker = warden_core::ask::for_this_task()?;
        let fields: Vec<&String> = answer.missing.keys().collect();
        let (message, requested_schema) = contract::missing_form(&answer.summary, &answer.missing);
        let question = warden_core::ask::Question::Elicit {
            message: message.clone(),
            requested_schema: requested_schema.clone(),
        };
        let deadline = self.task.deadline.into_std();
        let answered = tokio::task::spawn_blocking(move || asker(question, Some(deadline)))
            .await
            .ok()?;
        let content = match &answered {
            Ok(reply) if reply["action"] == "accept" => Some(reply["content"].clone()),
            _ => None,
        };
        let outcome = match &answered {
            Ok(reply) => reply["action"].clone(),
            Err(error) => json!(error.code),
        };
        // Kept for the receipt, as every answer to the task's questions is.
        let form: warden_core::ask::Elicitation = answered
            .as_ref()
            .ok()
            .and_then(|reply| serde_json::from_value(reply.clone()).ok())
            .unwrap_or(warden_core::ask::Elicitation {
                action: warden_core::ask::Action::Cancel,
                content: Default::default(),
            });
        let record = self.session.record_input(
            &self.origin.principal,
            message,
            requested_schema,
            form,
            warden_calls::executor::confirm::now_iso8601(),
        );
        self.task.events.emit(
            self.origin,
            "question_answered",
            json!({"fields": fields, "action": outcome, "answered": content.is_some(), "answer": record}),
        );
        content.map(|c| c.to_string())
    }

    /// Refuses the next model call once the principal's tokens today
    /// reached `WARDEN_PRINCIPAL_DAILY_TOKENS` (a store that cannot say
    /// refuses it too: spending unchecked is what the limit prevents).
    async fn within_daily_tokens(&self) -> Result<(), TaskResult> {
        let limit = self.runner.limits().principal_daily_tokens;
        if limit == 0 {
            return Ok(());
        }
        let principal = &self.origin.principal;
        let today = utc_day(now_ms());
        let used = match self.runner.records.usage(Some(principal), &today).await {
            Ok(rows) => rows
                .iter()
                .fold(0u64, |sum, r| sum.saturating_add(r.total_tokens)),
            Err(error) => {
                let message =
                    format!("cannot check the daily model token limit, so no model call was made: {error}");
                return Err(TaskResult::failure(
                    TaskStatus::Failed,
                    TaskErrorKind::Storage,
                    message,
                ));
            }
        };
        if used < limit {
            return Ok(());
        }
        let message = format!(
            "principal '{}' used {used} model tokens today ({today}, UTC), its daily limit is {limit} (WARDEN_PRINCIPAL_DAILY_TOKENS): no model call was made; it resets at 00:00 UTC",
            principal.as_str()
        );
        Err(TaskResult::failure(
            TaskStatus::Failed,
            TaskErrorKind::Limit,
            message,
        ))
    }

    /// Adds one answered call to the task's usage in the store, for the
    /// daily limit and the `usage` report (an estimated one counts in
    /// `calls_without_usage`). A store that cannot take it
    /// gets a `usage_not_recorded` event instead; the task goes on (the call has happened either way).
    async fn record_usage(&self, usage: Usage) {
        let entry = UsageEntry {
            task_id: self.task.id.clone(),
            owner: self.origin.principal.clone(),
            day: utc_day(now_ms()),
            model: self.config.model_id.clone(),
            model_calls: 1,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            calls_without_usage: u64::from(usage.estimated),
        };
        if let Err(error) = self.runner.records.add_usage(&entry).await {
            self.task.events.emit(
                self.origin,
                "usage_not_recorded",
                json!({"error": error.to_string(), "input_tokens": entry.input_tokens, "output_tokens": entry.output_tokens}),
            );
        }
    }

    /// Sends an observation with what is left of the budgets, so the
    /// model can plan its remaining steps.
    fn observe(&mut self, mut text: String) {
        if self.unrun_blocks > 0 {
            text.insert_str(
                0,
                &format!(
                    "Note: your reply had {} code blocks; only the first ran (one block per reply). \
                     Send the rest in your next reply if it is still needed.\n",
                    self.unrun_blocks + 1
                ),
            );
            self.unrun_blocks = 0;
        }
        text.push('\n');
        text.push_str(&super::prompt::budget_left(
            self.actions,
            self.model_calls,
            self.door_calls,
            self.config.inline_calls.saturating_sub(self.inline_calls),
        ));
        self.messages.push(Message::user(text));
    }

    fn step_event(&self, step: usize, status: &str, error_type: Option<&str>, code_file: &str) {
        self.task.events.emit(
            self.origin,
            "agent_step_finished",
            json!({"step": step, "status": status, "error_type": error_type, "code_file": code_file}),
        );
    }
}

/// "Observation:" and what the step printed, if anything.
fn printed(outcome: &RunOutcome) -> String {
    let mut text = String::from("Observation:\n");
    if !outcome.output.is_empty() {
        text.push_str("printed:\n");
        text.push_str(&outcome.output);
        if outcome.output_truncated {
            text.push_str("[output truncated]\n");
        }
    }
    text
}

/// What the model sees after a step: output, value or classified error.
fn observation(outcome: &RunOutcome) -> String {
    let mut text = printed(outcome);
    match &outcome.error {
        Some(error) => {
            let at = match (error.line, error.column) {
                (Some(line), Some(column)) => format!(" at line {line}, column {column}"),
                _ => String::new(),
            };
            let fix = if outcome.not_run {
                "The block did not run and used no step. Fix every problem listed and send it again."
            } else {
                "Fix the code and try again."
            };
            text.push_str(&format!("error ({}){at}: {}\n{fix}", error.kind, error.message));
        }
        None => text.push_str(&format!("value: {}", outcome.value)),
    }
    capped(text)
}

/// An observation cut to [`AGENT_MAX_OBSERVATION_BYTES`], with a note.
fn capped(mut text: String) -> String {
    if text.len() > AGENT_MAX_OBSERVATION_BYTES {
        let mut cut = AGENT_MAX_OBSERVATION_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n[observation truncated]");
    }
    text
}
