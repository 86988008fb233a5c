//! OpenTelemetry spans: what ran, in one trace across processes.
//!
//! The span tree: `mcp.tool.call` (SERVER) → `task.worker` → `agent.run` →
//! `model.generate` / `function.call` → `library.function`; a direct call
//! is `mcp.tool.call` → `function.call` → `library.function`. Attributes
//! name tools, functions, the model and the execution mode, plus
//! `warden.outcome`; never argument, result or prompt values. Failures,
//! timeouts, cancellations and rejections also set the error status.
//!
//! This module uses the OpenTelemetry API only. With the `telemetry` cargo
//! feature, [`init`] installs a recording provider chosen by
//! `WARDEN_TRACE_EXPORTER` (see `sdk`); without it every span is a no-op.
//! W3C trace context travels to workers as a `traceparent` string; an
//! isolated worker records its own spans and returns them in its response,
//! and the server (the single exporter) re-emits them in the same trace.

#[cfg(feature = "telemetry")]
pub mod sdk;

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer,
};
use opentelemetry::{Context, KeyValue, global};

/// Keeps the provider alive; dropping it flushes and shuts exporters down.
pub struct TelemetryGuard {
    #[cfg(feature = "telemetry")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        #[cfg(feature = "telemetry")]
        if let Some(provider) = self.provider.take() {
            let _ = provider.force_flush();
            let _ = provider.shutdown();
        }
    }
}

/// Installs the binary's own diagnostics log: `tracing` events on stderr
/// (never stdout, which belongs to MCP), filtered by `RUST_LOG` in the
/// `target=level,level` form (e.g. `warden=debug`), `warn` when unset or
/// unreadable. An app embedding Warden through `App::serve` brings its own
/// subscriber; this one is then not installed.
pub fn init_stderr_log() {
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|spec| spec.parse::<tracing_subscriber::filter::Targets>().ok())
        .unwrap_or_else(|| tracing_subscriber::filter::Targets::new().with_default(tracing::Level::WARN));
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal()),
        )
        .with(filter)
        .try_init();
}

/// Installs the exporter named by `WARDEN_TRACE_EXPORTER` (none, console,
/// file, otlp) in the server process. Problems are reported as `tracing`
/// warnings (the binary shows them on stderr) and leave tracing off; they
/// never stop the server.
pub fn init() -> TelemetryGuard {
    #[cfg(feature = "telemetry")]
    {
        match sdk::install_server() {
            Ok(provider) => TelemetryGuard { provider },
            Err(reason) => {
                tracing::warn!("tracing disabled: {reason}");
                TelemetryGuard { provider: None }
            }
        }
    }
    #[cfg(not(feature = "telemetry"))]
    {
        if warden_core::config::var("WARDEN_TRACE_EXPORTER").is_some_and(|v| !v.is_empty() && v != "none") {
            tracing::warn!(
                "WARDEN_TRACE_EXPORTER is set but this binary was built without the `telemetry` feature; spans are not recorded"
            );
        }
        TelemetryGuard {}
    }
}

/// Whether spans are being recorded (a provider is installed).
pub fn recording() -> bool {
    #[cfg(feature = "telemetry")]
    {
        sdk::installed()
    }
    #[cfg(not(feature = "telemetry"))]
    {
        false
    }
}

/// Exports spans an isolated worker recorded and returned (no-op without
/// the `telemetry` feature or a provider).
pub fn import_worker_spans(spans: &[serde_json::Value]) {
    #[cfg(feature = "telemetry")]
    sdk::inject(spans);
    #[cfg(not(feature = "telemetry"))]
    let _ = spans;
}

/// In an isolated worker: starts recording when the request carried a
/// trace context, returning the parent context to use.
pub fn worker_parent(traceparent: Option<&str>) -> Context {
    let Some(traceparent) = traceparent else {
        return Context::new();
    };
    #[cfg(feature = "telemetry")]
    sdk::install_worker_collector();
    from_traceparent(traceparent)
}

/// In an isolated worker: the spans recorded so far, as portable JSON.
pub fn worker_spans() -> Vec<serde_json::Value> {
    #[cfg(feature = "telemetry")]
    {
        sdk::drain()
    }
    #[cfg(not(feature = "telemetry"))]
    {
        Vec::new()
    }
}

/// Starts a span as a child of `parent` and returns a context holding it.
pub fn start(name: &'static str, kind: SpanKind, parent: &Context, attributes: Vec<KeyValue>) -> Context {
    let tracer = global::tracer("warden");
    let span = tracer
        .span_builder(name)
        .with_kind(kind)
        .with_attributes(attributes)
        .start_with_context(&tracer, parent);
    parent.with_span(span)
}

/// Records a finished span with explicit times (for calls that ran inline
/// in a script worker and were reported afterwards).
pub fn record_finished(
    name: &'static str,
    parent: &Context,
    start: std::time::SystemTime,
    end_time: std::time::SystemTime,
    attributes: Vec<KeyValue>,
    error_type: Option<&str>,
) {
    use opentelemetry::trace::Span as _;
    let tracer = global::tracer("warden");
    let mut span = tracer
        .span_builder(name)
        .with_start_time(start)
        .with_attributes(attributes)
        .start_with_context(&tracer, parent);
    match error_type {
        Some(error) => {
            span.set_attribute(KeyValue::new("warden.outcome", "failed"));
            span.set_status(Status::error(error.to_string()));
        }
        None => {
            span.set_attribute(KeyValue::new("warden.outcome", "success"));
            span.set_status(Status::Ok);
        }
    }
    span.end_with_timestamp(end_time);
}

/// Adds `attributes` to the span in `cx` (facts known only once it ran,
/// such as a model call's token usage).
pub fn set_attributes(cx: &Context, attributes: Vec<KeyValue>) {
    let span = cx.span();
    for attribute in attributes {
        span.set_attribute(attribute);
    }
}

/// Ends the span in `cx` with `warden.outcome` = `outcome`; anything but
/// success also sets the error status with `error_type` as description.
pub fn end(cx: &Context, outcome: &str, error_type: Option<&str>) {
    let span = cx.span();
    span.set_attribute(KeyValue::new("warden.outcome", outcome.to_string()));
    if outcome != "success" {
        let description = error_type.unwrap_or(outcome).to_string();
        span.set_status(Status::error(description));
    } else {
        span.set_status(Status::Ok);
    }
    span.end();
}

/// The trace and span ids of `cx` (lowercase hex), or nulls when it holds
/// no recording span.
pub fn ids(cx: &Context) -> (Option<String>, Option<String>) {
    let span = cx.span();
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

/// The W3C `traceparent` of `cx`, when it holds a valid span.
pub fn traceparent(cx: &Context) -> Option<String> {
    let span = cx.span();
    let sc = span.span_context();
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

/// A context whose remote parent is the W3C `traceparent` given, or the
/// empty context when it does not parse.
pub fn from_traceparent(traceparent: &str) -> Context {
    let parts: Vec<&str> = traceparent.trim().split('-').collect();
    let [version, trace, span, flags] = parts.as_slice() else {
        return Context::new();
    };
    if *version != "00" {
        return Context::new();
    }
    let (Ok(trace_id), Ok(span_id), Ok(flags)) = (
        TraceId::from_hex(trace),
        SpanId::from_hex(span),
        u8::from_str_radix(flags, 16),
    ) else {
        return Context::new();
    };
    let sc = SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    );
    if !sc.is_valid() {
        return Context::new();
    }
    Context::new().with_remote_span_context(sc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_round_trip_and_garbage_is_ignored() {
        // A parsed traceparent is a remote parent with the same ids.
        let cx = from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let span = cx.span();
        assert_eq!(
            span.span_context().trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(span.span_context().is_remote());
        assert!(!from_traceparent("garbage").span().span_context().is_valid());
        assert!(
            !from_traceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01")
                .span()
                .span_context()
                .is_valid()
        );
    }
}
