//! Serving MCP on stdio: the transport with its limits, the handler, and a
//! clean shutdown (SIGTERM/SIGINT or the end of input), after which running
//! tasks are recorded `cancelled`. Used by the CLI's default command and by
//! `App::run` / `App::serve` built without the `cli` feature.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;

use crate::task::TaskRunner;

/// Serves MCP on stdin/stdout until the client goes away or a signal
/// arrives. Exit codes: 0 a clean end, 1 the MCP session failed.
pub(crate) async fn stdio(tasks: Arc<TaskRunner>, name: &str, version: &str) -> ExitCode {
    use rmcp::ServiceExt;
    if std::io::stdin().is_terminal() {
        eprintln!(
            "{name} is an MCP server speaking JSON-RPC on stdin/stdout, not a chat. \
Connect it from an MCP client (see the README), or run `{name} --help` for the CLI. Press Ctrl-D to exit."
        );
    }
    // Task records: tasks a dead server left running become `interrupted`.
    tasks.store.mark_interrupted();
    let limits = tasks.executor.limits();
    let transport_limits = crate::mcp::transport::TransportLimits {
        // Never below the argument cap plus room for the envelope, so a
        // call the executor accepts is never refused by the transport.
        max_message_bytes: limits.max_message_bytes.max(
            limits
                .max_argument_bytes
                .saturating_add(crate::limits::MESSAGE_ENVELOPE_BYTES),
        ),
        max_pending_responses: limits.max_pending_responses,
    };
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    // Task records: the end of input (the client went away) cancels tasks.
    let stdin = tasks.cancel_on_eof(stdin);
    let transport = crate::mcp::transport::StdioTransport::new(stdin, stdout, transport_limits);
    let server = crate::mcp::server::WardenServer::new(tasks.clone(), name, version);
    let service = match server.serve(transport).await {
        Ok(service) => service,
        Err(error) => {
            eprintln!("error: MCP initialization failed: {error}");
            return ExitCode::from(1);
        }
    };
    let code = tokio::select! {
        ended = service.waiting() => match ended {
            Ok(_) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: MCP service ended abnormally: {error}");
                ExitCode::from(1)
            }
        },
        _ = shutdown_signal() => ExitCode::SUCCESS,
    };
    // Task records: running tasks are cancelled and recorded `cancelled`
    // before the process exits.
    tasks.shutdown(crate::limits::TASK_SHUTDOWN_GRACE).await;
    code
}

/// Resolves on SIGTERM or SIGINT, so a supervisor's stop is a clean shutdown.
pub(crate) async fn shutdown_signal() {
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
