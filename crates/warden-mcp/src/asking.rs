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
use rmcp::model::CreateMessageRequest;
#[allow(deprecated)] // sampling: see `send`
use rmcp::model::CreateMessageRequestParams;
use rmcp::model::{ClientResult, ElicitRequest, ElicitRequestParams, ElicitationCapability, ServerRequest};
use rmcp::service::{Peer, PeerRequestOptions};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use warden_core::ask::{Asker, Question};
use warden_core::error::{GuardError, codes};

/// An asker sending questions to `peer` for the request that `cancel`
/// belongs to.
///
/// A question ends with its request: when the request is cancelled, or
/// at its deadline, the asker stops waiting and withdraws the question
/// from the client (`notifications/cancelled` naming it), so the form
/// leaves the person's screen and an answer given later counts for
/// nothing. (The executor refuses to start any call of a cancelled
/// request as well, so even an answer that outruns the cancellation runs
/// nothing: `warden_calls::executor`.)
pub(crate) fn asker(peer: Peer<RoleServer>, timeout: Duration, cancel: CancellationToken) -> Asker {
    let handle = tokio::runtime::Handle::current();
    Arc::new(move |question, deadline| {
        declared(&peer, &question)?;
        // No longer than the call's own deadline: past it the caller has
        // been answered `timed_out`, and nobody waits for this answer.
        let timeout = deadline.map_or(timeout, |due| {
            timeout.min(due.saturating_duration_since(std::time::Instant::now()))
        });
        let until = Until {
            due: tokio::time::Instant::now() + timeout,
            timeout,
            cancel: cancel.clone(),
        };
        let (sender, receiver) = std::sync::mpsc::channel();
        let peer = peer.clone();
        handle.spawn(async move {
            let _ = sender.send(send(&peer, question, &until).await);
        });
        receiver
            .recv()
            .unwrap_or_else(|_| Err(GuardError::failed("the question's task ended without an answer")))
    })
}

/// How long a question may wait: until `due` (the call's deadline or the
/// server's longest timeout, `timeout` from when it was asked) or until
/// its request is cancelled.
struct Until {
    due: tokio::time::Instant,
    timeout: Duration,
    cancel: CancellationToken,
}

/// Whether the client declared form-mode elicitation: a script or batch
/// it starts can then have a destructive call confirmed.
pub(crate) fn can_elicit(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info()
        .is_some_and(|info| takes_forms(info.capabilities.elicitation.as_ref()))
}

/// Form mode: declared as `form`, or as an empty `elicitation` (the shape
/// before URL mode existed). A client declaring only `url` takes no forms,
/// and a form sent to it would be refused.
fn takes_forms(elicitation: Option<&ElicitationCapability>) -> bool {
    elicitation.is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// Refuses a question the client said it cannot answer.
fn declared(peer: &Peer<RoleServer>, question: &Question) -> Result<(), GuardError> {
    let info = peer.peer_info();
    let capabilities = info.as_ref().map(|i| &i.capabilities);
    let elicitation = capabilities.and_then(|c| c.elicitation.as_ref());
    let url = elicitation.is_some_and(|e| e.url.is_some());
    let sample = capabilities.is_some_and(|c| c.sampling.is_some());
    answerable(question, (takes_forms(elicitation), url), sample, "")
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
        Question::Elicit { .. } => (
            elicit,
            "elicitation capability for forms (`elicitation: {}` or `elicitation.form`)",
        ),
        Question::Url { .. } => (url, "URL-mode elicitation (elicitation.url) capability"),
        Question::Sample { .. } => (sample, "sampling capability"),
        // A session's client answers roots/list without a capability of
        // its own to declare; a stateless request checks `roots` itself.
        Question::ListRoots => (true, "roots capability"),
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
            format!("the client did not declare the {what}{where_}, so it cannot be asked"),
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

/// Sends `request` and waits for its answer until `until`; past it, or
/// once the request that asked is cancelled, the question is withdrawn
/// from the client and the wait ends `timed_out` / `cancelled`.
async fn ask(
    peer: &Peer<RoleServer>,
    request: ServerRequest,
    until: &Until,
) -> Result<ClientResult, GuardError> {
    let refused = |e: rmcp::ServiceError| {
        GuardError::new(codes::CANNOT_ASK, format!("the client could not be asked: {e}"))
    };
    let mut pending = peer
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .map_err(refused)?;
    let ended = tokio::select! {
        answer = &mut pending.rx => {
            return answer.map_err(|_| refused(rmcp::ServiceError::TransportClosed))?.map_err(refused);
        }
        () = tokio::time::sleep_until(until.due) => GuardError::new(
            codes::TIMED_OUT,
            format!("the client did not answer within {:.1} s", until.timeout.as_secs_f64()),
        ),
        () = until.cancel.cancelled() => GuardError::new(
            codes::CANCELLED,
            "the request that asked was cancelled before the client answered",
        ),
    };
    // Withdrawn: a form still on the person's screen would invite an
    // answer that no longer counts.
    let _ = pending.cancel(Some(ended.message.clone())).await;
    Err(ended)
}

fn to_value(result: impl serde::Serialize) -> Result<Value, GuardError> {
    serde_json::to_value(result).map_err(|e| GuardError::failed(e.to_string()))
}

#[allow(deprecated)] // sampling and roots: see their arms
async fn send(peer: &Peer<RoleServer>, question: Question, until: &Until) -> Result<Value, GuardError> {
    match question {
        Question::Elicit {
            message,
            requested_schema,
        } => {
            let params = elicit_params(message, requested_schema)?;
            // Sent as rmcp's `create_elicitation` does, without its
            // `elicitation` feature (URL mode, which guards do not use).
            let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
            match ask(peer, request, until).await? {
                ClientResult::ElicitResult(result) => to_value(result),
                other => Err(GuardError::failed(format!(
                    "the client answered the form with {other:?}"
                ))),
            }
        }
        Question::Sample { params } => {
            let params = sample_params(params)?;
            // What rmcp's `create_message` checks before it sends.
            if (params.tools.is_some() || params.tool_choice.is_some()) && !peer.supports_sampling_tools() {
                return Err(GuardError::new(
                    codes::CANNOT_ASK,
                    "the completion request offers tools, and the client did not declare sampling.tools",
                ));
            }
            params
                .validate()
                .map_err(|e| GuardError::invalid_input("params", e))?;
            // Deprecated by SEP-2577 for later protocols; the sessions
            // Warden serves (2025-11-25) still have it.
            #[allow(deprecated)]
            let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
            match ask(peer, request, until).await? {
                #[allow(deprecated)]
                ClientResult::CreateMessageResult(result) => to_value(result),
                other => Err(GuardError::failed(format!(
                    "the client answered the completion request with {other:?}"
                ))),
            }
        }
        Question::Url {
            message,
            url,
            elicitation_id,
        } => {
            let request =
                ServerRequest::ElicitRequest(ElicitRequest::new(url_params(message, url, elicitation_id)));
            match ask(peer, request, until).await? {
                ClientResult::ElicitResult(result) => to_value(result),
                other => Err(GuardError::failed(format!(
                    "the client answered the URL request with {other:?}"
                ))),
            }
        }
        Question::ListRoots => {
            #[allow(deprecated)]
            let request = ServerRequest::ListRootsRequest(Default::default());
            match ask(peer, request, until).await? {
                #[allow(deprecated)]
                ClientResult::ListRootsResult(result) => to_value(result),
                other => Err(GuardError::failed(format!(
                    "the client answered the roots request with {other:?}"
                ))),
            }
        }
        // A session's call is a task already, or never one.
        Question::Detach => Ok(Value::Null),
        // On a session the key is not used, and questions go one by one.
        Question::Keyed { question, .. } => Box::pin(send(peer, *question, until)).await,
        Question::All(questions) => {
            let mut answers = Vec::with_capacity(questions.len());
            for question in questions {
                answers.push(Box::pin(send(peer, question, until)).await?);
            }
            Ok(Value::Array(answers))
        }
    }
}
