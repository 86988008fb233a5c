//! The task runner ([`TaskRunner`]): task slots, the records, and the one
//! shape every task has ([`TaskRunner::run`]); the queue it serves is in
//! `service`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::claim::Claim;
use crate::limits::TaskLimits;
use crate::records::Records;
use crate::running::Running;
use crate::task::Task;
use crate::{TaskResult, TaskStatus, task_receipt};
use warden_calls::artifacts::ArtifactStore;
use warden_calls::events::Origin;
use warden_calls::executor::{Executor, Slots};
use warden_core::approval::Book;
use warden_core::error::{GuardError, TaskError, TaskErrorKind};
use warden_core::future::BoxFuture;
use warden_script::host::journal::JournalError;
use warden_script::host::session::WorkerFacts;

/// Runs tasks, and serves them (the queue, leases, cancellation: see
/// `service`). Built-ins reach it through
/// the MCP layer's `Runtime` (in the `warden` crate), not as their context.
pub struct TaskRunner {
    pub executor: Arc<Executor>,
    pub store: ArtifactStore,
    /// Forks the tasks' script workers (see [`warden_script::workers`]).
    pub(crate) script_workers: warden_sandbox::zygote::Zygote,
    /// Task slots: one permit per running task, taken (after a bounded
    /// wait, see [`warden_calls::executor::Slots`]) before its directory is
    /// created and released when the task's [`Task`] is dropped. A bound
    /// principal holds at most `tasks_per_principal` of them at once,
    /// direct tasks and tasks claimed from the queue alike (see
    /// [`TaskRunner::seat_claimed`]).
    pub(crate) task_slots: Slots,
    /// The cancellation tokens of the running tasks, so that
    /// [`TaskRunner::shutdown`] can cancel them and wait for their records.
    pub(crate) running: Arc<Running>,
    /// The task records (see [`crate::records`]).
    pub records: Arc<Records>,
    /// Started by the first task (or by [`TaskRunner::start_records`]).
    pub(crate) heartbeat: std::sync::Once,
    /// Notified when a task is queued here, so the claimer looks at once.
    pub submitted: Arc<tokio::sync::Notify>,
    /// Set when the server drains: it claims no more queued tasks (they
    /// wait for another server, or for this one's restart).
    pub(crate) draining: std::sync::atomic::AtomicBool,
    /// The runner's part of the server's limits (see [`TaskRunner::limits`]).
    limits: TaskLimits,
}

/// How a task's body ended (see [`TaskRunner::run`]).
pub enum Ending {
    /// With its result, and what its worker did.
    Finished(Box<TaskResult>, Box<WorkerFacts>),
    /// On a question `book` holds, with the journal of the calls made so
    /// far (or why it cannot be kept): the task waits for the answer.
    Paused {
        journal: Result<Vec<Value>, JournalError>,
        book: Arc<Book>,
        facts: Box<WorkerFacts>,
    },
}

impl TaskRunner {
    pub fn new(
        executor: Arc<Executor>,
        store: ArtifactStore,
        exe: std::path::PathBuf,
        limits: TaskLimits,
    ) -> Self {
        let store = store.with_limits(executor.limits());
        let calls = executor.limits();
        let records = Arc::new(Records::new(store.clone(), calls.tasks_max_age, &limits));
        let task_slots = Slots::new(
            "task",
            limits.max_concurrent_tasks,
            calls.admission_queue,
            calls.admission_wait,
        )
        .per_principal(
            limits.tasks_per_principal,
            "its task limit (WARDEN_TASKS_PER_PRINCIPAL)".into(),
        );
        Self {
            executor,
            store,
            script_workers: warden_script::workers(exe),
            task_slots,
            running: Arc::default(),
            records,
            heartbeat: std::sync::Once::new(),
            submitted: Arc::default(),
            draining: std::sync::atomic::AtomicBool::new(false),
            limits,
        }
    }

    /// The limits the runner enforces (its part of the server's limits;
    /// the executor's are [`Executor::limits`]).
    pub fn limits(&self) -> &TaskLimits {
        &self.limits
    }

    /// Opens the shared task store (`WARDEN_DATABASE_URL`) with `opener`
    /// (the app's, e.g. `warden_cluster::postgres::Opener`). Called before
    /// the runner is shared: it replaces the records, which nothing else
    /// holds yet.
    pub fn with_store_opener(mut self, opener: Arc<dyn crate::store::StoreOpener>) -> Self {
        let max_ttl = self.executor.limits().tasks_max_age;
        self.records = Arc::new(Records::new(self.store.clone(), max_ttl, &self.limits).with_opener(opener));
        self
    }

    /// The event handle of task `id`, whose directory is `dir`: its own
    /// `events.jsonl` besides the server's, and on a shared store its
    /// ledger, where each destructive call's start is recorded before it
    /// runs (see `warden_calls::events::ledger`).
    pub fn task_events(&self, id: &str, dir: &std::path::Path) -> warden_calls::events::Events {
        let events = self.executor.events().with_task_log(dir);
        match crate::ledger::StoreLedger::for_task(&self.records, id) {
            Some(ledger) => events.with_ledger(ledger),
            None => events,
        }
    }

    /// Takes a request of the principal's rate and a task slot (within
    /// its task limit), and creates the task directory, owned by
    /// `origin.principal`, and its record; `cancel` is the request's
    /// token, cancelled by [`TaskRunner::shutdown`] too. A task this
    /// server claimed from the queue (`claim`) already has its id, record
    /// and slot: it takes them from the claim.
    /// Boxed: compiled here once, not in each crate that awaits it
    /// ([`warden_core::future`]).
    pub fn begin<'a>(
        &'a self,
        origin: &'a mut Origin,
        timeout: Duration,
        cancel: &'a CancellationToken,
        claim: Option<&'a Claim>,
    ) -> BoxFuture<'a, Result<Task, GuardError>> {
        Box::pin(async move {
            let phases = crate::phases::Phases::new(std::time::Instant::now());
            self.start_heartbeat();
            // Its receipt names the build: hashed while the task runs.
            warden_core::receipt::prefetch_build_id();
            // A claimed MCP task: its id, record (running here) and slot exist
            // already; its rate was counted when it was queued.
            let claim = claim.and_then(Claim::take);
            let detached = claim.is_some();
            let (slot, id, dir) = self.seat(origin, cancel, claim).await?;
            let started = std::time::Instant::now();
            origin.task_id = Some(id.clone());
            let events = self.task_events(&id, &dir);
            events.emit(
                origin,
                "task_created",
                json!({"task_id": id, "detached": detached}),
            );
            let registry = registry_snapshot(&self.executor, origin).to_string();
            let trace = warden_calls::telemetry::start(
                "task.worker",
                opentelemetry::trace::SpanKind::Internal,
                &origin.trace,
                vec![
                    opentelemetry::KeyValue::new("warden.task_id", id.clone()),
                    opentelemetry::KeyValue::new("warden.node", warden_calls::node::name()),
                ],
            );
            let task = Task {
                trace,
                _slot: slot,
                executor: self.executor.clone(),
                script_workers: self.script_workers.clone(),
                input_state_ttl: self.limits.input_state_ttl,
                recorded: false,
                store: self.store.clone(),
                running: self.running.clone(),
                records: self.records.clone(),
                detached,
                id,
                dir,
                events,
                deadline: Instant::now() + timeout,
                timeout,
                model: None,
                limits: task_receipt::RunLimits::script(timeout),
                started,
                phases,
            };
            // A claimed task's record exists; a task a request waits for gets
            // one now. The store writes it on its own thread while this one
            // writes the registry snapshot: `join!` polls the record first,
            // which hands it to the store, then writes the file.
            let record = async {
                if detached {
                    return Ok(());
                }
                let ttl_ms = self.records.ttl_ms(None);
                self.records
                    .create(
                        &task.id,
                        &origin.principal,
                        &origin.tool,
                        &task.dir,
                        ttl_ms,
                        false,
                    )
                    .await
            };
            let snapshot = async {
                self.store
                    .link_task_file(&task.id, "registry.json", registry.as_bytes())
            };
            let (created, snapshot) = tokio::join!(record, snapshot);
            if let Err(error) = created {
                // No record: the directory alone would be a task nobody can see.
                let error = GuardError::from(error);
                let mut task = task;
                task.recorded = true;
                let id = task.id.clone();
                drop(task);
                self.store.remove_task(&id);
                return Err(error);
            }
            // Running here from now on: its record exists, so the heartbeat
            // renews its lease (a task it cannot find in the store is taken
            // for lost and cancelled).
            self.running.insert(&task.id, cancel, detached);
            if let Err(error) = snapshot {
                task.abandon(&error).await;
                return Err(error);
            }
            task.phases.mark(crate::phases::Phase::Seat);
            Ok(task)
        })
    }

    /// A task's slot, id and directory: a claimed task's own (its record
    /// ends `failed` if its directory cannot be made), or a new task's,
    /// after a request of the principal's rate and a slot within its task
    /// limit.
    async fn seat(
        &self,
        origin: &Origin,
        cancel: &CancellationToken,
        claim: Option<(String, warden_calls::executor::Admitted)>,
    ) -> Result<(warden_calls::executor::Admitted, String, std::path::PathBuf), GuardError> {
        match claim {
            Some((id, slot)) => match self.store.create_task_with_id(&origin.principal, &id) {
                Ok(dir) => Ok((slot, id, dir)),
                Err(error) => {
                    let result = TaskResult::failure(
                        TaskStatus::Failed,
                        TaskErrorKind::Storage,
                        format!("the task could not be set up: {}", error.message),
                    )
                    .with_error(TaskError::new(TaskErrorKind::Storage, error.message.as_str()));
                    let _ = self.records.end(&id, &result).await;
                    Err(error)
                }
            },
            None => {
                self.executor.take_rate(&origin.principal).map_err(|f| f.error)?;
                let slot = self
                    .task_slots
                    .admit(&origin.principal, cancel)
                    .await
                    .map_err(|f| f.error)?;
                let (id, dir) = self.store.create_task(&origin.principal)?;
                Ok((slot, id, dir))
            }
        }
    }

    /// The one shape of every task: begin it (a slot, its directory and
    /// record), run `body`, and end it — finished, or waiting for the
    /// person when the body paused on a question. A body that fails
    /// before it ran anything (`Err`: a file it could not write) abandons
    /// the task, recorded `failed`.
    pub async fn run(
        &self,
        origin: &mut Origin,
        timeout: Duration,
        cancel: &CancellationToken,
        claim: Option<&Claim>,
        body: impl AsyncFnOnce(&mut Task, &Origin) -> Result<Ending, GuardError>,
    ) -> Result<TaskResult, GuardError> {
        let mut task = self.begin(origin, timeout, cancel, claim).await?;
        let origin: &Origin = origin;
        match body(&mut task, origin).await {
            Err(error) => {
                task.abandon(&error).await;
                Err(error)
            }
            Ok(Ending::Finished(result, facts)) => Ok(task.finish(origin, *result, *facts).await),
            Ok(Ending::Paused { journal, book, facts }) => match task.pause(origin, &book, journal).await {
                Ok(waiting) => Err(waiting),
                Err(reason) => {
                    let reason = reason.to_string();
                    let result = TaskResult::failure(TaskStatus::Failed, TaskErrorKind::Worker, reason);
                    Ok(task.finish(origin, result, *facts).await)
                }
            },
        }
    }
}

/// Names, modes and descriptions of the guards a task could call: those
/// its caller may call (the file is the caller's to read; a guard the
/// policy denies it is not named there either).
fn registry_snapshot(executor: &Executor, origin: &Origin) -> Value {
    let registry = executor.visible_to(origin);
    let guards = registry
        .iter()
        .map(|g| json!({"name": g.tool_name(), "mode": g.mode().as_str(), "description": g.description()}));
    let script_only = registry.script_functions().map(|f| {
        json!({"name": f.name, "mode": "script_only", "signature": f.signature, "description": f.description})
    });
    Value::Array(guards.chain(script_only).collect())
}
