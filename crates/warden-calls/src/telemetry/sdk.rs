//! The recording side of tracing (cargo feature `telemetry`).
//!
//! `WARDEN_TRACE_EXPORTER` picks where finished spans go:
//! - `console`: one JSON object per span on stderr (stdout is the protocol);
//! - `file`: the same lines appended to `WARDEN_TRACE_FILE`;
//! - `otlp`: OTLP/HTTP per the standard `OTEL_EXPORTER_OTLP_*` variables
//!   (needs the `otel-otlp` feature);
//! - unset or `none`: no provider.
//!
//! The server installs a `Relay` processor and keeps a handle to it, so
//! spans recorded inside worker processes (returned in their responses as
//! portable JSON) are exported by the server too: one writer, one trace.
//! A worker installs a collecting provider only when its request carries a
//! traceparent, and drains it into its response.

use std::borrow::Cow;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{Context, InstrumentationScope, KeyValue, Value as OtelValue, global};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, Span, SpanData, SpanProcessor};
use serde_json::{Map, Value, json};

/// The server's processor, kept so worker spans can be injected.
static RELAY: OnceLock<Arc<dyn SpanProcessor>> = OnceLock::new();
/// Spans a worker recorded, waiting to be returned in its response.
static COLLECTED: Mutex<Vec<SpanData>> = Mutex::new(Vec::new());

/// Whether a provider is installed in this process.
pub fn installed() -> bool {
    RELAY.get().is_some() || WORKER_COLLECTING.get().is_some()
}
static WORKER_COLLECTING: OnceLock<()> = OnceLock::new();

/// Why the exporter `WARDEN_TRACE_EXPORTER` names cannot be installed;
/// the server warns with this and runs without recording spans.
#[derive(Debug, thiserror::Error)]
pub enum ExporterError {
    #[error("WARDEN_TRACE_EXPORTER: expected none, console, file or otlp, got '{0}'")]
    Unknown(String),
    #[error("WARDEN_TRACE_EXPORTER=file needs WARDEN_TRACE_FILE (a path to append spans to)")]
    NoTraceFile,
    #[error("WARDEN_TRACE_FILE {path}: {error}")]
    TraceFile { path: String, error: std::io::Error },
    #[cfg(feature = "otel-otlp")]
    #[error("otlp exporter: {0}")]
    Otlp(#[source] opentelemetry_otlp::ExporterBuildError),
    #[cfg(not(feature = "otel-otlp"))]
    #[error("WARDEN_TRACE_EXPORTER=otlp needs a build with the `otel-otlp` cargo feature")]
    OtlpNotBuilt,
}

/// Installs the server's provider per `WARDEN_TRACE_EXPORTER`.
pub fn install_server() -> Result<Option<SdkTracerProvider>, ExporterError> {
    let choice = warden_core::config::var("WARDEN_TRACE_EXPORTER").unwrap_or_default();
    let processor: Arc<dyn SpanProcessor> = match choice.trim() {
        "" | "none" => return Ok(None),
        "console" => Arc::new(JsonLines::new(Box::new(std::io::stderr()))),
        "file" => {
            let path = warden_core::config::var("WARDEN_TRACE_FILE").ok_or(ExporterError::NoTraceFile)?;
            let file = match std::fs::OpenOptions::new().create(true).append(true).open(&path) {
                Ok(file) => file,
                Err(error) => return Err(ExporterError::TraceFile { path, error }),
            };
            Arc::new(JsonLines::new(Box::new(file)))
        }
        "otlp" => otlp()?,
        other => return Err(ExporterError::Unknown(other.to_string())),
    };
    let _ = RELAY.set(processor.clone());
    let provider = SdkTracerProvider::builder()
        .with_span_processor(Relay(processor))
        .with_resource(Resource::builder().with_service_name("warden").build())
        .build();
    global::set_tracer_provider(provider.clone());
    Ok(Some(provider))
}

#[cfg(feature = "otel-otlp")]
fn otlp() -> Result<Arc<dyn SpanProcessor>, ExporterError> {
    use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
    // The exporter reads OTEL_EXPORTER_OTLP_* from the process environment
    // itself; values that only a .env file set are handed over here.
    let from_dotenv = |name: &str| {
        std::env::var_os(name)
            .is_none()
            .then(|| warden_core::config::var(name))
            .flatten()
    };
    let mut builder = opentelemetry_otlp::SpanExporter::builder().with_http();
    if let Some(endpoint) = from_dotenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        builder = builder.with_endpoint(endpoint);
    } else if std::env::var_os("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none()
        && let Some(base) = from_dotenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    {
        builder = builder.with_endpoint(format!("{}/v1/traces", base.trim_end_matches('/')));
    }
    let headers = from_dotenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
        .or_else(|| from_dotenv("OTEL_EXPORTER_OTLP_HEADERS"));
    if let Some(headers) = headers {
        let pairs = headers
            .split(',')
            .filter_map(|pair| pair.split_once('='))
            .map(|(key, value)| (key.trim().to_string(), value.trim().to_string()))
            .collect();
        builder = builder.with_headers(pairs);
    }
    let exporter = builder.build().map_err(ExporterError::Otlp)?;
    Ok(Arc::new(
        opentelemetry_sdk::trace::BatchSpanProcessor::builder(exporter).build(),
    ))
}

#[cfg(not(feature = "otel-otlp"))]
fn otlp() -> Result<Arc<dyn SpanProcessor>, ExporterError> {
    Err(ExporterError::OtlpNotBuilt)
}

/// In a worker: records spans in memory for [`drain`].
pub fn install_worker_collector() {
    if WORKER_COLLECTING.set(()).is_err() {
        return;
    }
    let provider = SdkTracerProvider::builder().with_span_processor(Collect).build();
    global::set_tracer_provider(provider);
}

/// The spans recorded so far in this worker, as portable JSON.
pub fn drain() -> Vec<Value> {
    let spans = COLLECTED
        .lock()
        .map(|mut c| std::mem::take(&mut *c))
        .unwrap_or_default();
    spans.iter().map(|s| portable(s, None)).collect()
}

/// Exports spans a worker returned, through the server's processor.
pub fn inject(spans: &[Value]) {
    let Some(relay) = RELAY.get() else { return };
    for span in spans {
        if let Some(data) = from_portable(span) {
            relay.on_end(data);
        }
    }
}

/// Forwards to the shared processor (the provider wants ownership).
#[derive(Debug)]
struct Relay(Arc<dyn SpanProcessor>);

impl SpanProcessor for Relay {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.0.on_start(span, cx);
    }
    fn on_end(&self, span: SpanData) {
        self.0.on_end(span);
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
}

/// Writes each finished span as one JSON line.
struct JsonLines {
    out: Mutex<Box<dyn Write + Send>>,
}

impl std::fmt::Debug for JsonLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JsonLines")
    }
}

impl JsonLines {
    fn new(out: Box<dyn Write + Send>) -> Self {
        Self { out: Mutex::new(out) }
    }
}

impl SpanProcessor for JsonLines {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}
    fn on_end(&self, span: SpanData) {
        let mut line = portable(&span, Some(std::process::id())).to_string();
        line.push('\n');
        if let Ok(mut out) = self.out.lock() {
            let _ = out.write_all(line.as_bytes());
            let _ = out.flush();
        }
    }
    fn force_flush(&self) -> OTelSdkResult {
        if let Ok(mut out) = self.out.lock() {
            let _ = out.flush();
        }
        Ok(())
    }
    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        self.force_flush()
    }
}

/// Keeps spans in memory (worker side).
#[derive(Debug)]
struct Collect;

impl SpanProcessor for Collect {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}
    fn on_end(&self, span: SpanData) {
        if let Ok(mut collected) = COLLECTED.lock() {
            collected.push(span);
        }
    }
    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }
    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

fn unix_ns(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn kind_name(kind: &SpanKind) -> &'static str {
    match kind {
        SpanKind::Server => "server",
        SpanKind::Client => "client",
        SpanKind::Producer => "producer",
        SpanKind::Consumer => "consumer",
        SpanKind::Internal => "internal",
    }
}

/// A span as JSON: the line format of the console/file exporters and the
/// form workers return spans in.
fn portable(span: &SpanData, pid: Option<u32>) -> Value {
    let mut attributes = Map::new();
    for kv in &span.attributes {
        let value = match &kv.value {
            OtelValue::Bool(b) => json!(b),
            OtelValue::I64(i) => json!(i),
            OtelValue::F64(f) => json!(f),
            other => json!(other.to_string()),
        };
        attributes.insert(kv.key.to_string(), value);
    }
    let (status, description) = match &span.status {
        Status::Unset => ("unset", String::new()),
        Status::Ok => ("ok", String::new()),
        Status::Error { description } => ("error", description.to_string()),
    };
    let mut value = json!({
        "name": span.name,
        "trace_id": span.span_context.trace_id().to_string(),
        "span_id": span.span_context.span_id().to_string(),
        "parent_span_id": span.parent_span_id.to_string(),
        "kind": kind_name(&span.span_kind),
        "start_unix_ns": unix_ns(span.start_time),
        "end_unix_ns": unix_ns(span.end_time),
        "status": status,
        "status_description": description,
        "attributes": attributes,
    });
    if let Some(pid) = pid {
        value["pid"] = json!(pid);
    }
    value
}

fn from_portable(value: &Value) -> Option<SpanData> {
    let text = |k: &str| value.get(k).and_then(Value::as_str);
    let trace_id = TraceId::from_hex(text("trace_id")?).ok()?;
    let span_id = SpanId::from_hex(text("span_id")?).ok()?;
    let parent_span_id = SpanId::from_hex(text("parent_span_id")?).unwrap_or(SpanId::INVALID);
    let time = |k: &str| UNIX_EPOCH + Duration::from_nanos(value.get(k).and_then(Value::as_u64).unwrap_or(0));
    let kind = match text("kind")? {
        "server" => SpanKind::Server,
        "client" => SpanKind::Client,
        _ => SpanKind::Internal,
    };
    let status = match text("status")? {
        "ok" => Status::Ok,
        "error" => Status::error(text("status_description").unwrap_or("error").to_string()),
        _ => Status::Unset,
    };
    let mut attributes: Vec<KeyValue> = value
        .get("attributes")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| match v {
                    Value::Bool(b) => KeyValue::new(k.clone(), *b),
                    Value::Number(n) if n.is_i64() => KeyValue::new(k.clone(), n.as_i64().unwrap_or(0)),
                    Value::Number(n) => KeyValue::new(k.clone(), n.as_f64().unwrap_or(0.0)),
                    Value::String(s) => KeyValue::new(k.clone(), s.clone()),
                    other => KeyValue::new(k.clone(), other.to_string()),
                })
                .collect()
        })
        .unwrap_or_default();
    attributes.push(KeyValue::new("warden.recorded_in", "worker"));
    Some(SpanData {
        span_context: SpanContext::new(
            trace_id,
            span_id,
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id,
        parent_span_is_remote: true,
        span_kind: kind,
        name: Cow::Owned(text("name")?.to_string()),
        start_time: time("start_unix_ns"),
        end_time: time("end_unix_ns"),
        attributes,
        dropped_attributes_count: 0,
        events: Default::default(),
        links: Default::default(),
        status,
        instrumentation_scope: InstrumentationScope::builder("warden-worker").build(),
    })
}
