//! OpenTelemetry: span ids for event records.
//!
//! Warden depends on the OpenTelemetry API only; with no provider installed
//! the global tracer is a no-op and ids are null.

use opentelemetry::trace::TraceContextExt;

/// The current span's trace and span ids (lowercase hex), or nulls when no
/// recording provider is installed.
pub fn current_ids() -> (Option<String>, Option<String>) {
    let context = opentelemetry::Context::current();
    let span = context.span();
    let span_context = span.span_context();
    if span_context.is_valid() {
        (
            Some(span_context.trace_id().to_string()),
            Some(span_context.span_id().to_string()),
        )
    } else {
        (None, None)
    }
}
