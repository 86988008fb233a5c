//! The request events and span around every call, written once for
//! built-ins and guards alike: `request_started` when a request opens;
//! `request_rejected` (when refused) and `request_finished` with its
//! status, task type, error type and duration when it closes; the span
//! ended with the same status.

use std::time::Instant;

use serde_json::json;

use crate::status::RequestStatus;
use warden_calls::events::{Events, Origin};

/// An open request: closed exactly once, by value.
pub(super) struct RequestScope<'a> {
    events: &'a Events,
    started: Instant,
}

impl<'a> RequestScope<'a> {
    /// Opens the request: its `request_started` event.
    pub(super) fn open(events: &'a Events, origin: &Origin) -> Self {
        events.emit(origin, "request_started", json!({}));
        Self {
            events,
            started: Instant::now(),
        }
    }

    /// Closes the request as it ended.
    pub(super) fn close(
        self,
        origin: &Origin,
        status: RequestStatus,
        task_type: Option<&str>,
        error_type: Option<&str>,
    ) {
        if status.is_rejected() {
            self.events
                .emit(origin, "request_rejected", json!({"reason": error_type}));
        }
        self.events.emit(
            origin,
            "request_finished",
            json!({"status": status.as_str(), "task_type": task_type, "error_type": error_type,
                   "duration_ms": self.started.elapsed().as_secs_f64() * 1000.0}),
        );
        warden_calls::telemetry::end(&origin.trace, status.as_str(), error_type);
    }
}
