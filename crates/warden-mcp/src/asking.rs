//! The server's side of `warden::ask`: a guard's question becomes an
//! `elicitation/create` or `sampling/createMessage` request to the client
//! of the call, on its session, and the guard's thread waits for the
//! answer (see `warden_core::ask`).
//!
//! The asker checks the capability the client declared before sending
//! anything, so a client that cannot answer gets a clear `cannot_ask`,
//! never a request it will refuse. A question waits until the call's
//! deadline at most (and never beyond the server's maximum call timeout):
//! the guard's thread is free again when its caller is answered. Stateless
//! (2026-07-28) requests have no peer to send requests to: their questions
//! go back in the answer instead ([`crate::rounds`], multi-round-trip
//! input); the request builders here are shared with it.

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
#[allow(deprecated)] // sampling: see `send`
use rmcp::model::CreateMessageRequestParams;
use rmcp::model::{ClientResult, ElicitRequest, ElicitRequestParams, ServerRequest};
use rmcp::service::Peer;
use serde_json::{Value, json};

use warden_core::ask::{Asker, Question};
use warden_core::error::{GuardError, codes};

/// An asker sending questions to `peer`.
pub(crate) fn asker(peer: Peer<RoleServer>, timeout: Duration) -> Asker {
    let handle = tokio::runtime::Handle::current();
    Arc::new(move |question, deadline| {
        declared(&peer, &question)?;
        // No longer than the call's own deadline: past it the caller has
        // been answered `timed_out`, and nobody waits for this answer.
        let timeout = deadline.map_or(timeout, |due| {
            timeout.min(due.saturating_duration_since(std::time::Instant::now()))
        });
        let (sender, receiver) = std::sync::mpsc::channel();
        let peer = peer.clone();
        handle.spawn(async move {
            let answer = match tokio::time::timeout(timeout, send(&peer, question)).await {
                Ok(answer) => answer,
                Err(_) => Err(GuardError::new(
                    codes::TIMED_OUT,
                    format!("the client did not answer within {} s", timeout.as_secs()),
                )),
            };
            let _ = sender.send(answer);
        });
        receiver
            .recv()
            .unwrap_or_else(|_| Err(GuardError::failed("the question's task ended without an answer")))
    })
}

/// Whether the client declared elicitation: a script or batch it starts
/// can then have a destructive call confirmed.
pub(crate) fn can_elicit(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info()
        .is_some_and(|info| info.capabilities.elicitation.is_some())
}

/// Refuses a question the client said it cannot answer.
fn declared(peer: &Peer<RoleServer>, question: &Question) -> Result<(), GuardError> {
    let info = peer.peer_info();
    let capabilities = info.as_ref().map(|i| &i.capabilities);
    let elicit = capabilities.is_some_and(|c| c.elicitation.is_some());
    let url = capabilities.is_some_and(|c| c.elicitation.as_ref().is_some_and(|e| e.url.is_some()));
    let sample = capabilities.is_some_and(|c| c.sampling.is_some());
    answerable(question, (elicit, url), sample, "")
}

/// `Ok` when the client declared the capability `question` needs
/// (`elicit`, `sample`), else `cannot_ask` saying which (`where_` says
/// where the client declares it, e.g. " in this request's _meta").
pub(crate) fn answerable(
    question: &Question,
    (elicit, url): (bool, bool),
    sample: bool,
    where_: &str,
) -> Result<(), GuardError> {
    let (declared, what) = match question {
        Question::Elicit { .. } => (elicit, "elicitation"),
        Question::Url { .. } => (url, "URL-mode elicitation (elicitation.url)"),
        Question::Sample { .. } => (sample, "sampling"),
        // A session's client answers roots/list without a capability of
        // its own to declare; a stateless request checks `roots` itself.
        Question::ListRoots => (true, "roots"),
        Question::Detach => return Ok(()),
        Question::Keyed { question, .. } => return answerable(question, (elicit, url), sample, where_),
        Question::All(questions) => {
            for question in questions {
                answerable(question, (elicit, url), sample, where_)?;
            }
            return Ok(());
        }
    };
    if declared {
        Ok(())
    } else {
        Err(GuardError::new(
            codes::CANNOT_ASK,
            format!("the client did not declare the {what} capability{where_}, so it cannot be asked"),
        ))
    }
}

/// A URL-mode question as `elicitation/create` params.
pub(crate) fn url_params(message: String, url: String, elicitation_id: String) -> ElicitRequestParams {
    ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message,
        url,
        elicitation_id,
    }
}

/// A form question as `elicitation/create` params (form mode).
pub(crate) fn elicit_params(
    message: String,
    requested_schema: Value,
) -> Result<ElicitRequestParams, GuardError> {
    serde_json::from_value(json!({"mode": "form", "message": message, "requestedSchema": requested_schema}))
        .map_err(|e| bad("requested_schema", e))
}

/// A completion question as `sampling/createMessage` params.
#[allow(deprecated)] // sampling: see `send`
pub(crate) fn sample_params(params: Value) -> Result<CreateMessageRequestParams, GuardError> {
    serde_json::from_value(params).map_err(|e| bad("params", e))
}

fn bad(what: &str, e: serde_json::Error) -> GuardError {
    GuardError::invalid_input(what, format!("not a valid request: {e}"))
}

async fn send(peer: &Peer<RoleServer>, question: Question) -> Result<Value, GuardError> {
    let refused = |e: rmcp::ServiceError| {
        GuardError::new(codes::CANNOT_ASK, format!("the client could not be asked: {e}"))
    };
    match question {
        Question::Elicit {
            message,
            requested_schema,
        } => {
            let params = elicit_params(message, requested_schema)?;
            // Sent as rmcp's `create_elicitation` does, without its
            // `elicitation` feature (URL mode, which guards do not use).
            let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
            match peer.send_request(request).await.map_err(refused)? {
                ClientResult::ElicitResult(result) => {
                    serde_json::to_value(result).map_err(|e| GuardError::failed(e.to_string()))
                }
                other => Err(GuardError::failed(format!(
                    "the client answered the form with {other:?}"
                ))),
            }
        }
        Question::Sample { params } => {
            let params = sample_params(params)?;
            // Deprecated by SEP-2577 for later protocols; the sessions
            // Warden serves (2025-11-25) still have it.
            #[allow(deprecated)]
            let result = peer.create_message(params).await.map_err(refused)?;
            serde_json::to_value(result).map_err(|e| GuardError::failed(e.to_string()))
        }
        Question::Url {
            message,
            url,
            elicitation_id,
        } => {
            let request =
                ServerRequest::ElicitRequest(ElicitRequest::new(url_params(message, url, elicitation_id)));
            match peer.send_request(request).await.map_err(refused)? {
                ClientResult::ElicitResult(result) => {
                    serde_json::to_value(result).map_err(|e| GuardError::failed(e.to_string()))
                }
                other => Err(GuardError::failed(format!(
                    "the client answered the URL request with {other:?}"
                ))),
            }
        }
        Question::ListRoots => {
            #[allow(deprecated)]
            let result = peer.list_roots().await.map_err(refused)?;
            serde_json::to_value(result).map_err(|e| GuardError::failed(e.to_string()))
        }
        // A session's call is a task already, or never one.
        Question::Detach => Ok(Value::Null),
        // On a session the key is not used, and questions go one by one.
        Question::Keyed { question, .. } => Box::pin(send(peer, *question)).await,
        Question::All(questions) => {
            let mut answers = Vec::with_capacity(questions.len());
            for question in questions {
                answers.push(Box::pin(send(peer, question)).await?);
            }
            Ok(Value::Array(answers))
        }
    }
}
