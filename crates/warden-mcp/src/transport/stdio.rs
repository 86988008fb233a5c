//! JSON-RPC over stdin/stdout, one message per line, with two bounds.
//!
//! * **Message size.** A line longer than `max_message_bytes` is never
//!   buffered whole: its first [`ID_SCAN_BYTES`] are kept to recover the
//!   request id, the rest is streamed past, and the client gets a `-32600`
//!   reply naming the cap.
//! * **Unwritten answers.** Each request the service receives takes one of
//!   `max_pending_responses` permits; the permit is returned once the
//!   request's answer has been written to stdout (or the client cancelled
//!   the request). With every permit taken, `receive` reads nothing more:
//!   a client that stops reading answers fills the stdout pipe, writes
//!   block, permits stay taken, and the server stops reading requests — so
//!   its memory holds at most that many requests and answers, not every
//!   request the client manages to send. Notifications need no permit: a
//!   handler waits for each progress notification it sends to be written,
//!   so there are never more in flight than running requests.
//!
//! Unparseable JSON gets `-32700` and well-formed JSON that is not a valid
//! message gets `-32600`, both with the id recovered by a tolerant scan
//! (`id: null` when none can be read, as JSON-RPC 2.0 specifies) and the
//! words the HTTP transport uses too ([`super::unreadable`]), and the
//! server keeps serving. Replies the transport writes itself go through the
//! same writer as the service's, one whole line at a time.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex as SyncMutex};

use rmcp::RoleServer;
use rmcp::model::{ClientNotification, ErrorCode, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};

use super::unreadable::{Framing, Unreadable};

/// Bytes kept from the start of an oversized line to find its request id:
/// 4 KiB. Clients put `id` before `params`, so it is within the first few
/// dozen bytes; a line whose id comes later is answered with `id: null`.
pub(crate) const ID_SCAN_BYTES: usize = 4096;

/// Read-buffer capacity kept between messages: 64 KiB. A larger message
/// grows the buffer for itself; it is released after that message.
const KEPT_LINE_CAPACITY: usize = 64 * 1024;

/// The two bounds of the transport (see the module docs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TransportLimits {
    /// See [`crate::limits::DEFAULT_MAX_MESSAGE_BYTES`].
    pub max_message_bytes: usize,
    /// See [`crate::limits::DEFAULT_MAX_PENDING_RESPONSES`].
    pub max_pending_responses: usize,
}

/// Requests received and not yet answered, each holding one permit.
struct Pending {
    /// `max_pending_responses` permits; `receive` takes one per request,
    /// dropping the entry in `by_id` gives it back.
    permits: Arc<Semaphore>,
    /// Who holds the permits: filled by `receive`, emptied by `send` after a
    /// response or error with that id is written, or by `receive` when the
    /// client cancels that request (rmcp then drops its response unsent).
    by_id: SyncMutex<HashMap<RequestId, OwnedSemaphorePermit>>,
}

impl Pending {
    fn contains(&self, id: &RequestId) -> bool {
        self.by_id.lock().is_ok_and(|map| map.contains_key(id))
    }
    fn insert(&self, id: RequestId, permit: OwnedSemaphorePermit) {
        if let Ok(mut map) = self.by_id.lock() {
            map.insert(id, permit);
        }
    }
    fn release(&self, id: &RequestId) {
        let permit = self.by_id.lock().ok().and_then(|mut map| map.remove(id));
        drop(permit);
    }
}

/// What reading one line produced.
enum Line {
    /// A whole line is in `line`.
    Whole,
    /// The line was longer than the cap: `total` bytes, of which the first
    /// [`ID_SCAN_BYTES`] are in `line`.
    Oversized {
        total: usize,
    },
    Eof,
}

/// Why a line gets an error reply instead of reaching the service.
enum Rejected {
    /// Longer than `max_message_bytes` (`total` bytes).
    TooLarge { total: usize },
    /// Not JSON, or JSON but not a JSON-RPC message the server understands
    /// (see [`super::unreadable`]).
    Unreadable(Unreadable),
}

type Writer<W> = Arc<Mutex<Option<W>>>;

/// The stdio transport `serve` hands to rmcp. Build it with
/// [`StdioTransport::new`] over stdin/stdout (or any pair of streams).
pub(crate) struct StdioTransport<R, W> {
    read: BufReader<R>,
    /// The line being read. Kept across `receive` calls: rmcp polls
    /// `receive` inside a `select!` and drops it whenever another branch
    /// wins, so a partial line must survive cancellation.
    line: Vec<u8>,
    /// Bytes of the current line seen so far (more than `line.len()` once
    /// the line is known to be oversized).
    line_total: usize,
    /// A request parsed and waiting for a permit (kept here so a cancelled
    /// wait loses nothing).
    held: Option<(RequestId, RxJsonRpcMessage<RoleServer>)>,
    /// An error reply the transport is writing itself. `receive` reads
    /// nothing more until it is written (the same backpressure as answers),
    /// and it runs as its own task so a cancelled `receive` never leaves
    /// half a line on stdout.
    reply: Option<tokio::task::JoinHandle<()>>,
    pending: Arc<Pending>,
    limits: TransportLimits,
    write: Writer<W>,
}

impl<R, W> StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    pub(crate) fn new(read: R, write: W, limits: TransportLimits) -> Self {
        Self {
            read: BufReader::new(read),
            line: Vec::new(),
            line_total: 0,
            held: None,
            reply: None,
            pending: Arc::new(Pending {
                permits: Arc::new(Semaphore::new(limits.max_pending_responses.max(1))),
                by_id: SyncMutex::new(HashMap::new()),
            }),
            limits,
            write: Arc::new(Mutex::new(Some(write))),
        }
    }

    /// Reads up to the next newline into `line`, keeping only the first
    /// [`ID_SCAN_BYTES`] of a line past the cap. Cancel-safe: bytes are
    /// consumed from the reader only after they were copied or counted.
    async fn read_line(&mut self) -> std::io::Result<Line> {
        loop {
            let (consumed, done) = {
                let available = self.read.fill_buf().await?;
                if available.is_empty() {
                    return Ok(Line::Eof);
                }
                let newline = available.iter().position(|b| *b == b'\n');
                let take = newline.map_or(available.len(), |at| at + 1);
                self.line_total += take;
                if self.line_total > self.limits.max_message_bytes {
                    // Past the cap: keep only the start, for the id.
                    self.line.truncate(ID_SCAN_BYTES);
                    let room = ID_SCAN_BYTES.saturating_sub(self.line.len()).min(take);
                    self.line.extend_from_slice(&available[..room]);
                } else {
                    self.line.extend_from_slice(&available[..take]);
                }
                (take, newline.is_some())
            };
            self.read.consume(consumed);
            if done {
                let total = self.line_total;
                return Ok(if total > self.limits.max_message_bytes {
                    Line::Oversized { total }
                } else {
                    Line::Whole
                });
            }
        }
    }

    /// Forgets the line just handled, releasing a large buffer.
    fn clear_line(&mut self) {
        self.line_total = 0;
        if self.line.capacity() > KEPT_LINE_CAPACITY {
            self.line = Vec::new();
        } else {
            self.line.clear();
        }
    }

    /// Starts writing an error reply of the transport's own (bounded as
    /// every protocol error is: it may quote the request's id).
    fn reply_error(&mut self, id: Option<RequestId>, code: ErrorCode, message: String) {
        self.refuse(id, Unreadable { code, message });
    }

    /// Starts writing the answer to a message the service does not get,
    /// after the lines before it.
    fn refuse(&mut self, id: Option<RequestId>, refused: Unreadable) {
        tracing::warn!(code = refused.code.0, ?id, "{}", refused.message);
        let reply = refused.reply(id);
        let write = self.write.clone();
        self.reply = Some(tokio::spawn(async move {
            let mut bytes = reply.to_string().into_bytes();
            bytes.push(b'\n');
            let _ = write_line(&write, &bytes).await;
        }));
    }

    /// Answers the line in `line`, which the service cannot take.
    fn reject(&mut self, why: Rejected) {
        let id = super::recover::request_id(&self.line);
        let refused = match why {
            Rejected::TooLarge { total } => Unreadable {
                code: ErrorCode::INVALID_REQUEST,
                message: format!(
                    "message too large: {total} bytes, the limit is {} bytes (WARDEN_MAX_MESSAGE_BYTES); \
send large data as an artifact or in several calls",
                    self.limits.max_message_bytes
                ),
            },
            Rejected::Unreadable(unreadable) => unreadable,
        };
        self.refuse(id, refused);
    }

    /// Classifies the whole line in `line`: a message for the service, or
    /// nothing (after an error reply, or for an ignorable notification).
    fn parse_line(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let text = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        if text.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(text) {
            Ok(message) => Some(message),
            Err(error) => {
                let why = match serde_json::from_slice::<Value>(text) {
                    Ok(value) if ignorable_notification(&value) => return None,
                    Ok(value) => Unreadable::not_a_message(&value, &error, Framing::Line),
                    Err(error) => Unreadable::not_json(text, &error, Framing::Line),
                };
                let why = Rejected::Unreadable(why);
                self.reject(why);
                None
            }
        }
    }
}

/// A notification the server cannot take (a method from outside MCP, such
/// as an editor's LSP traffic, or bad params): ignored, since JSON-RPC never
/// answers a notification — rmcp's own transport ignores them too.
fn ignorable_notification(value: &Value) -> bool {
    value.get("id").is_none() && value.get("method").is_some_and(Value::is_string)
}

/// Writes one whole line and flushes it.
async fn write_line<W: AsyncWrite + Unpin>(write: &Mutex<Option<W>>, bytes: &[u8]) -> std::io::Result<()> {
    let mut guard = write.lock().await;
    let Some(writer) = guard.as_mut() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            "the transport is closed",
        ));
    };
    writer.write_all(bytes).await?;
    writer.flush().await
}

impl<R, W> Transport<RoleServer> for StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let item = super::outgoing(item);
        let answers = match &item {
            JsonRpcMessage::Response(response) => Some(response.id.clone()),
            JsonRpcMessage::Error(error) => error.id.clone(),
            _ => None,
        };
        let write = self.write.clone();
        let pending = self.pending.clone();
        async move {
            let written = match serde_json::to_vec(&item) {
                Ok(mut bytes) => {
                    bytes.push(b'\n');
                    write_line(&write, &bytes).await
                }
                Err(error) => Err(std::io::Error::other(error)),
            };
            // Written or failed, the request is answered as far as the
            // transport can: give its permit back.
            if let Some(id) = answers {
                pending.release(&id);
            }
            written
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(reply) = self.reply.as_mut() {
                let _ = reply.await;
                self.reply = None;
            }
            if let Some((id, _)) = &self.held {
                let id = id.clone();
                let permit = self.pending.permits.clone().acquire_owned().await.ok()?;
                self.pending.insert(id, permit);
                return self.held.take().map(|(_, message)| message);
            }
            let line = match self.read_line().await {
                Ok(line) => line,
                Err(error) => {
                    tracing::error!("cannot read stdin: {error}");
                    return None;
                }
            };
            let message = match line {
                Line::Eof => return None,
                Line::Oversized { total } => {
                    self.reject(Rejected::TooLarge { total });
                    None
                }
                Line::Whole => self.parse_line(),
            };
            self.clear_line();
            match message {
                None => continue,
                Some(JsonRpcMessage::Request(request)) => {
                    if let Some(refused) = Unreadable::unread_initialize(&request.request) {
                        self.refuse(Some(request.id), refused);
                        continue;
                    }
                    if self.pending.contains(&request.id) {
                        let id = request.id.clone();
                        self.reply_error(
                            Some(id.clone()),
                            ErrorCode::INVALID_REQUEST,
                            format!(
                                "invalid request: id {id} is already used by a request still running; give every request its own id"
                            ),
                        );
                        continue;
                    }
                    self.held = Some((request.id.clone(), JsonRpcMessage::Request(request)));
                }
                Some(JsonRpcMessage::Notification(notification)) => {
                    if let ClientNotification::CancelledNotification(cancelled) = &notification.notification
                        && let Some(id) = &cancelled.params.request_id
                    {
                        self.pending.release(id);
                    }
                    return Some(JsonRpcMessage::Notification(notification));
                }
                // A client's answer to one of the server's requests.
                Some(other) => return Some(super::incoming(other)),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        if let Some(mut writer) = self.write.lock().await.take() {
            writer.shutdown().await?;
        }
        Ok(())
    }
}
