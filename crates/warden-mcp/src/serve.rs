//! Serving MCP: on stdio (the transport with its limits, the handler, and a
//! clean shutdown on SIGTERM/SIGINT or the end of input, after which running
//! tasks are recorded `cancelled` — except the tasks the client asked for as
//! MCP tasks, which the process stays to finish), and, with the `http` feature, the
//! command-line face of `mcp::transport::http`. Used by the CLI's `serve`
//! and by `App::run` / `App::serve` built without the `cli` feature.

use std::io::IsTerminal;
use std::sync::Arc;

use warden_core::future::BoxFuture;
use warden_task::TaskRunner;

use crate::limits::{ServingLimits, TASK_SHUTDOWN_GRACE};
use crate::serving::Serving;

/// Why an MCP session on stdio ended badly.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("MCP initialization failed: {0}")]
    Initialize(String),
    #[error("MCP service ended abnormally: {0}")]
    Ended(String),
}

/// What to tell a person who started the server in a terminal, where it
/// waits for JSON-RPC they are not going to type; `None` when stdin is not
/// a terminal. The caller prints it (library code does not).
pub fn terminal_hint(name: &str) -> Option<String> {
    std::io::stdin().is_terminal().then(|| {
        format!(
            "{name} is an MCP server speaking JSON-RPC on stdin/stdout, not a chat. \
Connect it from an MCP client (see the README), or run `{name} --help` for the CLI. Press Ctrl-D to exit."
        )
    })
}

/// Serves MCP on stdin/stdout until the client goes away or `shutdown`
/// resolves (the command line passes [`shutdown_signal`]); running tasks
/// are then cancelled and recorded.
pub async fn stdio(
    tasks: Arc<TaskRunner>,
    limits: ServingLimits,
    name: &str,
    version: &str,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), ServeError> {
    use rmcp::ServiceExt;
    let mut shutdown = std::pin::pin!(shutdown);
    let transport_limits = crate::transport::TransportLimits {
        max_message_bytes: limits.message_cap(tasks.executor.limits().max_argument_bytes),
        max_pending_responses: limits.max_pending_responses,
    };
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    // Task records: the end of input (the client went away) cancels tasks.
    let stdin = tasks.cancel_on_eof(stdin);
    let transport = crate::transport::StdioTransport::new(stdin, stdout, transport_limits);
    let serving = Serving::new(tasks.clone(), limits, name, version);
    let service = match serving.server().clone().serve(transport).await {
        Ok(service) => {
            // Once the initialize answer is sent: start-up work never
            // competes with it for a core.
            serving.start();
            service
        }
        // A client that went away before initializing (e.g. one that only
        // sent stateless 2026-07-28 requests such as `server/discover`, all
        // answered) ended the session normally.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
            serving.stop(TASK_SHUTDOWN_GRACE).await;
            return Ok(());
        }
        Err(error) => return Err(ServeError::Initialize(error.to_string())),
    };
    let ended = tokio::select! {
        ended = service.waiting() => {
            // The client left. Tasks it asked for as MCP tasks go on: it
            // (or a new server on the same store) comes back for them; the
            // process stays until they end, or until a signal.
            tokio::select! {
                _ = tasks.detached_done() => {}
                _ = &mut shutdown => {}
            }
            ended.map(drop).map_err(|error| ServeError::Ended(error.to_string()))
        }
        _ = &mut shutdown => Ok(()),
    };
    // Running tasks are cancelled and recorded `cancelled` before the
    // process exits.
    serving.stop(TASK_SHUTDOWN_GRACE).await;
    ended
}

/// Serves stdio for a command line: prints the terminal hint and the error,
/// if any, and gives the exit code (0 a clean end, 1 the session failed).
/// Boxed: the serve loop is compiled here, not in every app
/// ([`warden_core::future`]).
pub fn stdio_exit_code<'a>(
    tasks: Arc<TaskRunner>,
    limits: ServingLimits,
    name: &'a str,
    version: &'a str,
) -> BoxFuture<'a, std::process::ExitCode> {
    Box::pin(async move {
        if let Some(hint) = terminal_hint(name) {
            eprintln!("{hint}");
        }
        match stdio(tasks, limits, name, version, shutdown_signal()).await {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error}");
                std::process::ExitCode::from(1)
            }
        }
    })
}

/// The HTTP settings that are set and the problems `serve --http` would
/// stop on, by variable (see `transport::http::check_settings`).
#[cfg(feature = "http")]
pub fn http_settings() -> (Vec<&'static str>, Vec<(&'static str, String)>) {
    crate::transport::http::check_settings()
}

/// Serves MCP over HTTP for a command line: prints where it listens and
/// how the drain ended (stderr), and gives the exit code (0 a clean drain,
/// 2 it could not start, 1 it failed while serving). Boxed, as
/// [`stdio_exit_code`] is.
#[cfg(feature = "http")]
pub fn http_exit_code<'a>(
    tasks: Arc<TaskRunner>,
    limits: ServingLimits,
    name: &'a str,
    version: &'a str,
    addr: std::net::SocketAddr,
) -> BoxFuture<'a, std::process::ExitCode> {
    Box::pin(async move {
        use crate::transport::http::{HttpError, serve};
        let on_listening = |listening: &crate::transport::http::Listening| {
            let auth = if listening.authenticated {
                "authenticated"
            } else {
                "no authentication (loopback only)"
            };
            let bound = format!("http://{}{}", listening.bound, crate::transport::http::MCP_PATH);
            if bound == listening.url {
                eprintln!("{name}: serving MCP at {} ({auth})", listening.url);
            } else {
                eprintln!(
                    "{name}: serving MCP at {} (public URL; bound to {bound}) ({auth})",
                    listening.url
                );
            }
        };
        let outcome = serve(
            tasks,
            limits,
            name,
            version,
            addr,
            on_listening,
            shutdown_signal(),
        )
        .await;
        match outcome {
            Ok(drained) => {
                eprintln!(
                    "{name}: drained ({} call(s) cut at the grace, {} task(s) unrecorded)",
                    drained.calls_cut, drained.tasks_left
                );
                std::process::ExitCode::SUCCESS
            }
            Err(error @ HttpError::Serve(_)) => {
                eprintln!("error: {error}");
                std::process::ExitCode::from(1)
            }
            Err(error) => {
                eprintln!("error: {error}");
                std::process::ExitCode::from(2)
            }
        }
    })
}

/// Resolves on SIGTERM or SIGINT, so a supervisor's stop is a clean shutdown.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
