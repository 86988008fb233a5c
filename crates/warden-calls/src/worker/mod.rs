//! The worker side of isolation: the hidden entry point a worker process runs.
//!
//! The server re-executes the application binary with [`WORKER_ARG`]; `run()`
//! takes this branch before it builds any managed resource. The worker keeps
//! the original stdout descriptor for protocol lines only and points fd 1 at
//! its stderr (the per-call diagnostics log), so a guard that prints cannot
//! corrupt the protocol. It answers exactly one request (after any progress
//! or log lines the guard sends, see [`protocol::Interim`]) and exits.

pub mod protocol;

use std::io::{BufRead, Read, Write};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

pub use protocol::{MAX_REQUEST_ARG, Request, Response, WORKER_ARG};

use warden_core::guard::Resources;
use warden_core::registry::Registry;

/// Largest request line a worker reads when the server does not say
/// ([`MAX_REQUEST_ARG`]): the default argument cap plus the envelope.
const DEFAULT_MAX_REQUEST_LINE: usize =
    crate::limits::DEFAULT_MAX_ARGUMENT_BYTES + crate::limits::WORKER_REQUEST_ENVELOPE_BYTES;

/// The largest request line a guard worker must read: this many bytes
/// after `max_request_line(args)`, from the worker's arguments.
pub fn max_request_line(args: impl IntoIterator<Item = std::ffi::OsString>) -> usize {
    args.into_iter()
        .filter_map(|arg| {
            arg.to_str()
                .and_then(|a| a.strip_prefix(MAX_REQUEST_ARG))
                .and_then(|n| n.parse().ok())
        })
        .next()
        .unwrap_or(DEFAULT_MAX_REQUEST_LINE)
}

/// Entry point of a guard worker process, reading a request of at most
/// `max_request` bytes (the server's argument cap plus the envelope; see
/// [`max_request_line`]). Exit code 0 after answering; 3 when the protocol
/// itself failed (the server then reports the diagnostics log).
pub fn main(registry: &Registry, max_request: usize) -> ExitCode {
    kill_group_on_parent_death();
    // One descriptor for every protocol line: the guard's notices (from
    // its thread) and then the response.
    let protocol_out = match warden_sandbox::process::redirect_stdout() {
        Ok(file) => Arc::new(Mutex::new(file)),
        Err(error) => {
            eprintln!("warden worker: cannot set up the protocol descriptor: {error}");
            return ExitCode::from(3);
        }
    };
    let mut line = Vec::new();
    let stdin = std::io::stdin();
    let read = stdin.lock().take(max_request as u64).read_until(b'\n', &mut line);
    if let Err(error) = read {
        eprintln!("warden worker: cannot read request: {error}");
        return ExitCode::from(3);
    }
    let response = match serde_json::from_slice::<Request>(&line) {
        Ok(Request::Ping) => Response::Pong {
            pid: std::process::id(),
            guards: registry.len(),
        },
        Ok(Request::Call {
            guard,
            arguments,
            traceparent,
        }) => warden_core::notify::with_sink(Some(notice_sink(protocol_out.clone())), || {
            traced_guard(registry, &guard, arguments, traceparent.as_deref())
        }),
        Err(error) => {
            eprintln!("warden worker: malformed request: {error}");
            return ExitCode::from(3);
        }
    };
    match write_response(&protocol_out, &response) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("warden worker: cannot write response: {error}");
            ExitCode::from(3)
        }
    }
}

/// Makes the parent-death signal kill this worker's whole process group,
/// and with it anything a guard started (the worker is its group's leader).
/// A handler rather than a `sigwait` thread: a worker stays
/// single-threaded (a second thread costs its creation, and makes every
/// copy-on-write fault of a forked worker a cross-CPU TLB shootdown).
/// Called first thing in a guard worker.
#[allow(unsafe_code)]
pub(crate) fn kill_group_on_parent_death() {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, sigaction};
    extern "C" fn kill_own_group(_: nix::libc::c_int) {
        // SAFETY: kill(2) is async-signal-safe; pid 0 is this process's
        // own group.
        unsafe {
            nix::libc::kill(0, nix::libc::SIGKILL);
        }
    }
    let action = SigAction::new(
        SigHandler::Handler(kill_own_group),
        SaFlags::empty(),
        SigSet::empty(),
    );
    // SAFETY: the handler makes one async-signal-safe call and touches no
    // state. Without it the signal's default action still ends the worker.
    let _ = unsafe { sigaction(protocol::PARENT_DEATH_SIGNAL, &action) };
}

/// Runs one guard inside a `library.function` span that is a child of the
/// server's `function.call` (when it sent a trace context), and returns the
/// recorded spans with the response.
fn traced_guard(
    registry: &Registry,
    name: &str,
    arguments: serde_json::Value,
    traceparent: Option<&str>,
) -> Response {
    let parent = crate::telemetry::worker_parent(traceparent);
    let span = crate::telemetry::start(
        "library.function",
        opentelemetry::trace::SpanKind::Internal,
        &parent,
        vec![
            opentelemetry::KeyValue::new("warden.function", name.to_string()),
            opentelemetry::KeyValue::new("process.pid", i64::from(std::process::id())),
        ],
    );
    let mut response = run_guard(registry, name, arguments);
    let (outcome, error_type) = match &response {
        Response::Error { error, .. } => ("failed", Some(error.code.clone())),
        _ => ("success", None),
    };
    crate::telemetry::end(&span, outcome, error_type.as_deref());
    if let Response::Result { spans, .. } | Response::Error { spans, .. } = &mut response {
        *spans = crate::telemetry::worker_spans();
    }
    response
}

/// Runs one guard in this process, turning a panic into an error result.
pub(crate) fn run_guard(registry: &Registry, name: &str, arguments: serde_json::Value) -> Response {
    let Some(guard) = registry.get(name) else {
        return Response::Error {
            error: registry.unknown_guard(name),
            spans: Vec::new(),
        };
    };
    let resources = Resources::default();
    match warden_core::error::catch_guard_panic(name, || guard.invoke(&resources, arguments)) {
        Ok(value) => Response::Result {
            value,
            spans: Vec::new(),
        },
        Err(error) => Response::Error {
            error,
            spans: Vec::new(),
        },
    }
}

fn write_response(out: &Mutex<std::fs::File>, response: &Response) -> std::io::Result<()> {
    let mut out = out
        .lock()
        .map_err(|_| std::io::Error::other("the protocol descriptor's lock is poisoned"))?;
    write_line(&mut out, response)
}

fn write_line(out: &mut std::fs::File, message: &impl serde::Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    out.write_all(&line)?;
    out.flush()
}

/// The guard's progress and log messages as [`protocol::Interim`] lines on
/// the protocol descriptor, ahead of the response (best effort, like every
/// notice: a failed write loses the message, not the call). No second
/// descriptor: the worker holds only stdio and its protocol pipe.
fn notice_sink(protocol_out: Arc<Mutex<std::fs::File>>) -> warden_core::notify::Sink {
    Arc::new(move |notice| {
        if let Ok(mut out) = protocol_out.lock() {
            let _ = write_line(&mut out, &protocol::Interim::Notice { notice });
        }
    })
}
