//! `GET /healthz` and `GET /readyz`: unauthenticated and cheap.
//!
//! `/healthz` says the process is serving HTTP. `/readyz` says it can do
//! work: the artifacts directory takes a write, the task store answers (and
//! the object store takes a write, when there is one), a worker process
//! starts and answers, and every managed resource loaded at startup (a
//! guard that borrows one that failed answers every call with the failure,
//! so such a node is not ready: the check names the resource and why). That probe spawns a process, so its answer is cached for
//! [`READY_CACHE`] and concurrent probes share one run: a load balancer (or
//! a flood) polling `/readyz` costs at most one worker start per period.
//! While the server drains, `/readyz` answers 503 so traffic moves away.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::limits::READY_CACHE;
use warden_task::TaskRunner;

/// What `/readyz` needs.
pub(super) struct Health {
    pub(crate) tasks: Arc<TaskRunner>,
    pub(crate) draining: AtomicBool,
    /// The last probe: when, and its answer.
    last: tokio::sync::Mutex<Option<(Instant, StatusCode, Value)>>,
}

impl Health {
    pub(super) fn new(tasks: Arc<TaskRunner>) -> Self {
        Self {
            tasks,
            draining: AtomicBool::new(false),
            last: tokio::sync::Mutex::new(None),
        }
    }

    async fn probe(&self) -> (StatusCode, Value) {
        let artifacts = self.tasks.store.probe_writable();
        let worker = self.tasks.executor.ping_worker().await;
        let store = match self.tasks.records.open().await {
            Ok(store) => store.ping().await,
            Err(error) => Err(error),
        };
        let mut checks = serde_json::Map::new();
        checks.insert(
            "artifacts".into(),
            match &artifacts {
                Ok(()) => json!("ok"),
                Err(error) => json!(format!("not writable: {error}")),
            },
        );
        checks.insert(
            "worker".into(),
            match &worker {
                Ok(_) => json!("ok"),
                Err(failure) => json!(format!("did not start: {}", failure.error.message)),
            },
        );
        checks.insert(
            "task_store".into(),
            match &store {
                Ok(()) => json!("ok"),
                Err(error) => json!(format!("unavailable: {error}")),
            },
        );
        // Resources load once, at startup: a failed one stays failed until
        // the process restarts with the cause fixed.
        let failed = self.tasks.executor.resources().failures();
        checks.insert(
            "resources".into(),
            if failed.is_empty() {
                json!("ok")
            } else {
                json!(
                    failed
                        .iter()
                        .map(|(name, reason)| format!("{name} failed to load: {reason}"))
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            },
        );
        let objects = self.tasks.store.remote().map(|remote| remote.probe());
        if let Some(objects) = &objects {
            checks.insert(
                "object_store".into(),
                match objects {
                    Ok(()) => json!("ok"),
                    Err(error) => json!(format!("unavailable: {}", error.message)),
                },
            );
        }
        let ready = artifacts.is_ok()
            && worker.is_ok()
            && store.is_ok()
            && failed.is_empty()
            && objects.is_none_or(|o| o.is_ok());
        let status = if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        (
            status,
            json!({"status": if ready { "ready" } else { "not_ready" }, "checks": checks}),
        )
    }
}

pub(super) async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

pub(super) async fn readyz(State(health): State<Arc<Health>>) -> (StatusCode, Json<Value>) {
    if health.draining.load(Ordering::Relaxed) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "draining"})),
        );
    }
    let mut last = health.last.lock().await;
    if let Some((at, status, body)) = last.as_ref()
        && at.elapsed() < READY_CACHE
    {
        return (*status, Json(body.clone()));
    }
    let (status, body) = health.probe().await;
    *last = Some((Instant::now(), status, body.clone()));
    (status, Json(body))
}

/// Any other path: 404 naming where the MCP endpoint is, instead of an
/// empty answer (a client configured with the bare host name shows this).
pub(super) async fn elsewhere(uri: axum::http::Uri) -> axum::response::Response {
    not_served(uri.path())
}

/// The 404 of a path nothing is served at.
pub(super) fn not_served(path: &str) -> axum::response::Response {
    super::refusal::refuse(
        StatusCode::NOT_FOUND,
        warden_core::error::codes::NOT_FOUND,
        &format!(
            "nothing is served at {path}; the MCP endpoint is {}",
            super::MCP_PATH
        ),
        None,
    )
}
