//! Stateless guard calls answered without rmcp's per-request service.
//!
//! rmcp serves every stateless (2026-07-28) request by building a one-shot
//! transport, spawning a service loop with its own peer and channels, and
//! reading the answer back from it. For a plain guard call that machinery
//! costs more server CPU than the call itself (`http_bench`: about 0.3× of
//! a bare JSON endpoint for `ping` alone), so the one request shape remote
//! clients send most — `tools/call` of a registered guard, 2026-07-28, no
//! session, no progress token — is answered here, through the same
//! [`WardenServer::guard_call`] rmcp's handler uses (same events, span,
//! limits and result). A client that declared elicitation or sampling in
//! the request's `_meta` gets the first round of multi-round-trip input
//! here too ([`crate::rounds`]): its guard runs under a [`Round`], so a
//! question comes back `input_required` with its sealed `requestState`,
//! exactly as rmcp's handler would answer. Most clients declare those
//! capabilities, so sending their calls the long way would have made the
//! slow path the common one. The retry that answers a question
//! (`requestState`, `inputResponses`) goes to rmcp's handler.
//!
//! Everything else goes to rmcp untouched, and so does any request this
//! path is not sure about: the checks below only ever *accept*, so every
//! refusal (a bad header, a contradicting `Mcp-Name`, an unknown version, a
//! malformed body, an unknown tool) keeps rmcp's exact answer. A guard that
//! logs before it returns switches the answer to an SSE stream, as rmcp's
//! stateless path does; a client that disconnects cancels the call, which
//! still records its end.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body::Frame;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, JsonRpcRequest, JsonRpcResponse, JsonRpcVersion2_0,
    ProtocolVersion, RequestId, RequestMetaObject, ServerJsonRpcMessage, ServerResult,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::notices::SessionLevel;
use crate::rounds::{Binding, CanAnswer, Round};
use crate::server::WardenServer;
use warden_calls::tenant::{Principal, Scopes};
use warden_core::notify::Notice;

/// What the direct path needs: the handler and the checks rmcp's service
/// would make before routing a request.
pub(super) struct Direct {
    server: WardenServer,
    /// rmcp's request body cap; larger (or unsized) bodies go to rmcp.
    body_cap: usize,
    /// The SSE keep-alive period rmcp's service uses.
    keep_alive: Duration,
}

impl Direct {
    pub(super) fn new(server: WardenServer, body_cap: usize, keep_alive: Duration) -> Self {
        Self {
            server,
            body_cap,
            keep_alive,
        }
    }
}

impl Direct {
    /// The endpoint's last step before rmcp's service (inside
    /// authentication, session bounds and drain tracking): answers a plain
    /// stateless guard call, passes everything else to `next`.
    pub(super) async fn answer<F>(&self, request: Request, next: impl FnOnce(Request) -> F) -> Response
    where
        F: Future<Output = Response>,
    {
        if !self.headers_qualify(request.method(), request.headers()) {
            return next(request).await;
        }
        let (parts, body) = request.into_parts();
        // The length header was checked against the cap: this reads at most it.
        let bytes = match axum::body::to_bytes(body, self.body_cap).await {
            Ok(bytes) => bytes,
            Err(_) => return StatusCode::BAD_REQUEST.into_response(),
        };
        let Some(call) = self.call_in(&bytes, &parts.headers) else {
            return next(Request::from_parts(parts, Body::from(bytes))).await;
        };
        let principal = parts.extensions.get::<Principal>().cloned().unwrap_or_default();
        let scopes = parts.extensions.get::<Scopes>().cloned().unwrap_or_default();
        // A guard the policy denies this caller is unknown to it: rmcp's
        // handler gives that answer (the same as for a name never registered).
        if !self.server.may_call(&principal, &scopes, &call.params.name) {
            return next(Request::from_parts(parts, Body::from(bytes))).await;
        }
        self.run(call, principal, scopes).await
    }
}

/// A guard call this path answers.
struct Call {
    id: RequestId,
    params: CallToolRequestParams,
    traceparent: Option<String>,
    /// `_meta` asked for the call's receipt.
    receipt: bool,
    /// The questions the client declared it can answer.
    can: CanAnswer,
    /// The log threshold the request's `_meta` set (none: no log messages).
    level: SessionLevel,
}

impl Direct {
    /// The header checks, made before the body is read. Each is a
    /// condition under which rmcp's service would route the request to its
    /// stateless path and pass every check of its own (the `Host` was
    /// checked by [`super::host`], outside this layer).
    fn headers_qualify(&self, method: &Method, headers: &HeaderMap) -> bool {
        method == Method::POST
            && headers.get("mcp-session-id").is_none()
            && single(headers, "mcp-protocol-version") == Some(ProtocolVersion::V_2026_07_28.as_str())
            && single(headers, "mcp-method") == Some("tools/call")
            && single(headers, "mcp-name").is_some()
            && accepts_json_and_sse(headers)
            && single(headers, header::CONTENT_TYPE.as_str())
                .and_then(|v| v.split(';').next())
                .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
            && single(headers, header::CONTENT_LENGTH.as_str())
                .and_then(|v| v.parse::<usize>().ok())
                .is_some_and(|length| length <= self.body_cap)
    }

    /// The body checks: one `tools/call` request of a registered guard
    /// whose `_meta` carries exactly the header's protocol revision and the
    /// client capabilities, whose name is the `Mcp-Name` header verbatim,
    /// with nothing that needs rmcp's machinery (a progress token, the
    /// answer to a question, parameter headers).
    fn call_in(&self, bytes: &[u8], headers: &HeaderMap) -> Option<Call> {
        // Parsed as the one request shape this path answers, not as any
        // client message: rmcp's message and request enums buffer the whole
        // body once per level before picking a variant (a third of this
        // path's parsing CPU). The request variant of a message is this
        // type, so whatever parses here parses there the same way; anything
        // else fails here and goes to rmcp.
        let Ok(request) = serde_json::from_slice::<JsonRpcRequest<CallToolRequest>>(bytes) else {
            return None;
        };
        let empty = RequestMetaObject::default();
        let meta = request
            .request
            .extensions
            .get::<RequestMetaObject>()
            .unwrap_or(&empty);
        let meta_qualifies = meta.protocol_version().as_ref() == Some(&ProtocolVersion::V_2026_07_28)
            && meta
                .missing_required_keys(&ProtocolVersion::V_2026_07_28)
                .is_empty()
            && meta.get_progress_token().is_none();
        let can = CanAnswer::of(meta);
        let traceparent = meta.get_traceparent().map(str::to_string);
        // A malformed receipt request goes the long way, which names it.
        let receipt = crate::receipts::asked(meta).ok()?;
        let level = SessionLevel::of_request(meta);
        let call = request.request;
        let qualifies = meta_qualifies
            && call.params.input_responses.is_none()
            && call.params.request_state.is_none()
            && single(headers, "mcp-name") == Some(call.params.name.as_ref())
            && !headers.keys().any(|name| name.as_str().starts_with("mcp-param-"))
            && self.server.answers_directly(&call.params.name);
        if !qualifies {
            return None;
        }
        Some(Call {
            id: request.id,
            params: call.params,
            traceparent,
            receipt,
            can,
            level,
        })
    }

    /// Runs the call: a JSON answer when the guard sends nothing before
    /// returning, else an SSE stream carrying its log messages and then the
    /// answer.
    async fn run(&self, call: Call, principal: Principal, scopes: Scopes) -> Response {
        let Call {
            id,
            params,
            traceparent,
            receipt,
            can,
            level,
        } = call;
        let name = params.name.to_string();
        let arguments = params
            .arguments
            .map(serde_json::Value::Object)
            .unwrap_or(serde_json::Value::Null);
        // A client that can answer gets the first round of multi-round-trip
        // input; one that cannot is told so when its guard asks (and a call
        // that needed it is answered -32021), without hashing arguments for
        // a state that is never sealed.
        let binding = if can.any() {
            Binding::new(&principal, &name, &arguments)
        } else {
            Binding::unused()
        };
        let round = Round::first(binding, can);
        let origin =
            crate::server::new_request_origin("direct", &name, traceparent.as_deref(), principal, scopes);
        // The request id names the call in the error answered when its
        // question cannot be sealed.
        let request_id = origin.request_id.clone();
        let cancel = CancellationToken::new();
        let (sink, mut notices) = crate::notices::queue();
        let server = self.server.clone();
        let call_cancel = cancel.clone();
        let guard = name.clone();
        let mut running = RunToEnd {
            call: Some(Box::pin(warden_core::notify::scope(sink, async move {
                let call = server.guard_call(&guard, arguments, origin, call_cancel, receipt);
                server.in_round(round, request_id, call).await.map(Into::into)
            }))),
            cancel,
        };
        let first = {
            let Some(call) = running.call.as_mut() else {
                return StatusCode::INTERNAL_SERVER_ERROR.into_response();
            };
            loop {
                tokio::select! {
                    biased;
                    result = &mut *call => break Err(result),
                    Some(notice) = notices.recv() => {
                        if let Some(frame) = notice_frame(notice, &name, &level) {
                            break Ok(frame);
                        }
                    }
                }
            }
        };
        match first {
            Err(result) => {
                running.call = None;
                // Messages the guard sent just before it returned go out
                // before the answer, as on the streaming path.
                let mut sent = Vec::new();
                while let Ok(notice) = notices.try_recv() {
                    sent.extend(notice_frame(notice, &name, &level));
                }
                let status = status_of(&result);
                let message = answer_message(id, result);
                if sent.is_empty() {
                    return (status, json_answer(message)).into_response();
                }
                let (sender, receiver) = mpsc::channel(sent.len() + 1);
                for frame in sent {
                    let _ = sender.try_send(frame);
                }
                if let Ok(json) = serde_json::to_vec(&message) {
                    let _ = sender.try_send(sse_frame(&json));
                }
                sse_answer(receiver)
            }
            Ok(frame) => {
                let (sender, receiver) = mpsc::channel(SSE_FRAMES);
                let _ = sender.try_send(frame);
                let keep_alive = self.keep_alive;
                tokio::spawn(async move {
                    stream_rest(running, notices, sender, id, name, level, keep_alive).await;
                });
                sse_answer(receiver)
            }
        }
    }
}

/// Frames an SSE answer buffers before the guard's notices wait (they are
/// dropped when the notice queue itself is full, never block the guard).
const SSE_FRAMES: usize = 16;

/// After the first notice: forwards the guard's further notices, then the
/// answer, with keep-alive comments while it is quiet. A client that goes
/// away cancels the call.
async fn stream_rest(
    mut running: RunToEnd,
    mut notices: mpsc::Receiver<Notice>,
    frames: mpsc::Sender<Bytes>,
    id: RequestId,
    name: String,
    level: SessionLevel,
    keep_alive: Duration,
) {
    let Some(mut call) = running.call.take() else {
        return;
    };
    let mut quiet = tokio::time::interval_at(tokio::time::Instant::now() + keep_alive, keep_alive);
    let result = loop {
        tokio::select! {
            biased;
            result = &mut call => break result,
            Some(notice) = notices.recv() => {
                if let Some(frame) = notice_frame(notice, &name, &level)
                    && frames.send(frame).await.is_err()
                {
                    running.cancel.cancel();
                }
            }
            _ = quiet.tick() => {
                if frames.send(Bytes::from_static(b":\n\n")).await.is_err() {
                    running.cancel.cancel();
                }
            }
            _ = frames.closed(), if !running.cancel.is_cancelled() => running.cancel.cancel(),
        }
    };
    while let Ok(notice) = notices.try_recv() {
        if let Some(frame) = notice_frame(notice, &name, &level) {
            let _ = frames.send(frame).await;
        }
    }
    if let Ok(json) = serde_json::to_vec(&answer_message(id, result)) {
        let _ = frames.send(sse_frame(&json)).await;
    }
}

/// The call's future, driven to its end even when the client goes away:
/// dropping it (the HTTP handler dropped on a disconnect) cancels the call
/// and finishes it in the background, so its request events record the
/// cancellation instead of stopping half-way.
struct RunToEnd {
    call: Option<Pin<Box<dyn Future<Output = Answered> + Send>>>,
    cancel: CancellationToken,
}

impl Drop for RunToEnd {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            self.cancel.cancel();
            // Outside a runtime (the process is ending) there is nothing
            // left to record it with.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(call);
            }
        }
    }
}

/// What a call ends with: its result, or a JSON-RPC error (a capability
/// the client did not declare, see `crate::rounds`).
type Answered = Result<ServerResult, rmcp::ErrorData>;

fn answer_message(id: RequestId, answered: Answered) -> ServerJsonRpcMessage {
    match answered {
        Ok(result) => ServerJsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: JsonRpcVersion2_0,
            id,
            result,
        }),
        Err(error) => crate::transport::bounded(ServerJsonRpcMessage::error(error, Some(id))),
    }
}

/// The HTTP status of an answer: 400 for a capability the client did
/// not declare (SEP-2575), 200 otherwise.
fn status_of(answered: &Answered) -> StatusCode {
    match answered {
        Err(error) if error.code == rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY => {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::OK,
    }
}

fn json_answer(message: ServerJsonRpcMessage) -> Response {
    match serde_json::to_vec(&message) {
        Ok(body) => (
            [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            body,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// A notice as an SSE `data:` frame, if the client takes it (see
/// [`crate::notices::notification`]; no progress token here).
fn notice_frame(notice: Notice, logger: &str, level: &SessionLevel) -> Option<Bytes> {
    let notification = crate::notices::notification(notice, None, logger, level)?;
    let json = serde_json::to_vec(&ServerJsonRpcMessage::notification(notification)).ok()?;
    Some(sse_frame(&json))
}

/// One SSE event carrying `json` (serialised JSON has no raw newlines).
fn sse_frame(json: &[u8]) -> Bytes {
    let mut frame = Vec::with_capacity(json.len() + 8);
    frame.extend_from_slice(b"data: ");
    frame.extend_from_slice(json);
    frame.extend_from_slice(b"\n\n");
    Bytes::from(frame)
}

fn sse_answer(frames: mpsc::Receiver<Bytes>) -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        Body::new(SseBody(frames)),
    )
        .into_response()
}

/// An SSE response body fed by the call's forwarding task.
struct SseBody(mpsc::Receiver<Bytes>);

impl http_body::Body for SseBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0
            .poll_recv(context)
            .map(|frame| frame.map(|bytes| Ok(Frame::data(bytes))))
    }
}

/// The header's value when it appears exactly once and is text.
fn single<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

/// Whether the client accepts both JSON and SSE (rmcp answers 406
/// otherwise). Conservative: any quality parameter sends the request to
/// rmcp, which weighs them.
fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let mut json = false;
    let mut sse = false;
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        for range in value.split(',') {
            let mut parts = range.split(';');
            let essence = parts.next().unwrap_or_default().trim();
            if parts.next().is_some() {
                return false;
            }
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}
