//! MCP sessions (protocol revisions before 2026-07-28) held in a few KiB
//! each: Warden's implementation of rmcp's [`SessionManager`].
//!
//! rmcp's own `LocalSessionManager` gives every session a worker task and
//! five tokio channels between it, the HTTP side and the service. A tokio
//! channel allocates its first block of 32 slots when it is made, and a
//! JSON-RPC message is 360–376 bytes, so an idle session held about 95 KB
//! (heaptrack), 55 KiB of it resident (`http_bench`, 1,000 sessions). Here
//! a session is its routing table behind a lock, the channel that feeds
//! its service carries boxed messages (a 256-byte block), and SSE streams
//! get their channels only when a client opens them. rmcp's service loop
//! (its peer and its own channel) is the rest of what a session costs.
//!
//! What the routing keeps from rmcp's manager, because clients and the
//! conformance suite rely on it:
//! - a request's answer, and progress for its progress token, go to the
//!   SSE stream of the POST that carried it; everything else (log
//!   messages, list changes, resource updates) goes to the session's GET
//!   stream, or is kept for it until one is open;
//! - every stream starts with a priming event (SEP-1699: an id and a
//!   `retry` hint) and numbers its events, caching the last
//!   `channel_capacity` of them, so a client that lost a stream resumes
//!   with `Last-Event-ID` and gets what followed; a request answered while
//!   its client was away keeps its stream (and answer) for `completed_ttl`,
//!   one answered to a listening client is forgotten at once;
//! - a second GET stream while one is open is a quiet "shadow" stream
//!   (kept alive by SSE keep-alives), so competing reconnects do not take
//!   the notifications from each other;
//! - `notifications/cancelled` from the client ends the request's stream;
//! - a session with no message either way for `keep_alive` is closed (one
//!   sweeper task for all sessions, not a timer per session).
//!
//! Every session rmcp opens is opened here, whatever protocol revision the
//! request's headers named, so this is where the session caps are counted:
//! the server-wide `max_sessions` and each principal's
//! `sessions_per_principal` (the opener arrives through
//! [`super::OPENER`], set by the endpoint's session step around the request).

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, GetExtensions, GetMeta, JsonRpcMessage, JsonRpcNotification,
    ProgressNotificationParam, ProgressToken, RequestId, ServerJsonRpcMessage, ServerNotification,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager};
use tokio::sync::{mpsc, oneshot};

use warden_calls::tenant::Principal;

/// Where a session's streams stand; see the module docs.
#[derive(Debug, Clone)]
pub(crate) struct SessionConfig {
    /// Events a stream buffers for a slow client and caches for a resume.
    pub(crate) channel_capacity: usize,
    /// A session with no message either way for this long is closed.
    pub(crate) keep_alive: Duration,
    /// The `retry` hint of each stream's priming event.
    pub(crate) sse_retry: Duration,
    /// How long a finished request's stream stays resumable.
    pub(crate) completed_ttl: Duration,
    /// Sessions open at once, whoever opened them.
    pub(crate) max_sessions: usize,
    /// Sessions one bound principal ([`warden_calls::tenant::limits::bound`]) may
    /// hold at once.
    pub(crate) sessions_per_principal: usize,
}

/// Why a session operation failed (rmcp answers 500, or an empty stream
/// for a failed resume).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    #[error("session {0} not found")]
    NotFound(SessionId),
    #[error("session {0} is closed")]
    Closed(SessionId),
    #[error("initialize did not answer")]
    NoInitializeAnswer,
    #[error("Last-Event-ID '{0}' names no event this session still has")]
    UnknownEvent(String),
    #[error(transparent)]
    Refused(#[from] super::Refusal),
}

/// The sessions of one server.
pub(crate) struct Manager {
    inner: Arc<Inner>,
}

struct Inner {
    sessions: RwLock<HashMap<SessionId, Entry>>,
    config: SessionConfig,
    /// Whether the sweeper runs (started with the first session).
    sweeping: std::sync::Once,
}

/// The HTTP side's handle on a session. Dropping it (close, expiry)
/// drops the only sender of the service's inbound channel, which ends
/// the service and with it the session's streams.
struct Entry {
    session: Arc<Session>,
    inbound: mpsc::Sender<Box<ClientJsonRpcMessage>>,
    /// Who opened the session: the only principal it answers.
    owner: Principal,
}

struct Session {
    routes: tokio::sync::Mutex<Routes>,
    /// Milliseconds since `born` at the last message either way.
    last_active: AtomicU64,
    born: Instant,
}

impl Session {
    fn touch(&self) {
        let now = u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_active.store(now, Ordering::Relaxed);
    }

    fn idle(&self) -> Duration {
        let last = Duration::from_millis(self.last_active.load(Ordering::Relaxed));
        self.born.elapsed().saturating_sub(last)
    }
}

/// What a server message is routed by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Request(RequestId),
    Progress(ProgressToken),
    /// A request of the server's own (a form) sent on a request's stream:
    /// the server's cancellation of it goes the same way. Server and client
    /// number their requests apart, so it is not a [`Key::Request`].
    Asked(RequestId),
}

struct Routes {
    capacity: usize,
    sse_retry: Duration,
    completed_ttl: Duration,
    next_http_request: u64,
    /// The SSE stream of each POSTed request, by an HTTP request number
    /// (the second part of its event ids).
    requests: HashMap<u64, RequestStream>,
    keys: HashMap<Key, u64>,
    /// The GET stream; its events are numbered from 1 (the HTTP layer
    /// primes it with id 0).
    common: Stream,
    shadows: Vec<mpsc::Sender<ServerSseMessage>>,
    /// The answer `initialize_session` waits for.
    initialize: Option<(RequestId, oneshot::Sender<ServerJsonRpcMessage>)>,
}

struct RequestStream {
    keys: Vec<Key>,
    stream: Stream,
    completed_at: Option<Instant>,
}

/// One SSE stream's numbered events and its current client, if any.
struct Stream {
    sender: Option<mpsc::Sender<ServerSseMessage>>,
    cache: VecDeque<ServerSseMessage>,
    capacity: usize,
    /// `Some(n)`: a request's stream (ids `index/n`); `None`: the GET stream.
    http_request: Option<u64>,
    next_index: u64,
}

impl Stream {
    fn new(
        sender: Option<mpsc::Sender<ServerSseMessage>>,
        http_request: Option<u64>,
        capacity: usize,
    ) -> Self {
        Self {
            sender,
            cache: VecDeque::new(),
            capacity,
            http_request,
            next_index: if http_request.is_some() { 0 } else { 1 },
        }
    }

    fn event_id(&self, index: u64) -> String {
        match self.http_request {
            Some(request) => format!("{index}/{request}"),
            None => index.to_string(),
        }
    }

    /// Numbers `event`, caches it and sends it to the client if one
    /// listens (waiting while its buffer is full; a gone client is no
    /// error: the event stays cached for a resume). Whether a client took it.
    async fn send(&mut self, mut event: ServerSseMessage) -> bool {
        event.event_id = Some(self.event_id(self.next_index));
        self.next_index += 1;
        if self.cache.len() >= self.capacity {
            self.cache.pop_front();
        }
        self.cache.push_back(event.clone());
        let Some(sender) = &self.sender else {
            return false;
        };
        let delivered = sender.send(event).await.is_ok();
        if !delivered {
            self.sender = None;
        }
        delivered
    }

    /// A new client for this stream: it first gets the cached events
    /// after `after` (all of them for `None`).
    fn attach(&mut self, after: Option<u64>) -> Result<mpsc::Receiver<ServerSseMessage>, ()> {
        // The cache holds consecutive indices ending just before `next_index`.
        let first_cached = self.next_index - self.cache.len() as u64;
        if after.is_some_and(|after| after.saturating_add(1) < first_cached || after >= self.next_index) {
            return Err(());
        }
        let skip = after.map_or(0, |after| after + 1 - first_cached) as usize;
        let (sender, receiver) = mpsc::channel(self.capacity.max(self.cache.len() + 1));
        for event in self.cache.iter().skip(skip) {
            let _ = sender.try_send(event.clone());
        }
        self.sender = Some(sender);
        Ok(receiver)
    }

    fn listening(&self) -> bool {
        self.sender.as_ref().is_some_and(|sender| !sender.is_closed())
    }
}

impl Routes {
    fn new(config: &SessionConfig) -> Self {
        Self {
            capacity: config.channel_capacity.max(1),
            sse_retry: config.sse_retry,
            completed_ttl: config.completed_ttl,
            next_http_request: 0,
            requests: HashMap::new(),
            keys: HashMap::new(),
            common: Stream::new(None, None, config.channel_capacity.max(1)),
            shadows: Vec::new(),
            initialize: None,
        }
    }

    /// A request's stream that ended (answered or cancelled): no new
    /// events, resumable for `completed_ttl`.
    fn finish(&mut self, http_request: u64) {
        if let Some(request) = self.requests.get_mut(&http_request) {
            for key in request.keys.drain(..) {
                self.keys.remove(&key);
            }
            request.completed_at = Some(Instant::now());
            request.stream.sender = None;
        }
    }

    /// A quiet extra GET stream while the session's GET stream is open: kept
    /// alive by SSE keep-alives, given no notifications, so competing
    /// reconnects do not take them from each other. At most
    /// `MAX_SESSION_SHADOW_STREAMS`; the oldest goes first.
    fn shadow(&mut self) -> mpsc::Receiver<ServerSseMessage> {
        self.shadows.retain(|shadow| !shadow.is_closed());
        if self.shadows.len() >= crate::limits::MAX_SESSION_SHADOW_STREAMS {
            self.shadows.remove(0);
        }
        let (sender, receiver) = mpsc::channel(1);
        self.shadows.push(sender);
        receiver
    }

    /// Drops finished streams past their resume window, and the oldest
    /// beyond `MAX_SESSION_RESUMABLE_STREAMS` (a client that asks and
    /// hangs up in a loop must not fill memory).
    /// A GET stream: the session's notifications with the cached ones
    /// after `after` first, or a quiet shadow while one is already open.
    fn open_common(&mut self, after: Option<u64>) -> Result<mpsc::Receiver<ServerSseMessage>, ()> {
        if self.common.listening() {
            return Ok(self.shadow());
        }
        self.common.attach(after)
    }

    fn evict_completed(&mut self) {
        let ttl = self.completed_ttl;
        self.requests
            .retain(|_, request| request.completed_at.is_none_or(|at| at.elapsed() < ttl));
        let mut completed: Vec<(Instant, u64)> = self
            .requests
            .iter()
            .filter_map(|(id, request)| request.completed_at.map(|at| (at, *id)))
            .collect();
        let excess = completed
            .len()
            .saturating_sub(crate::limits::MAX_SESSION_RESUMABLE_STREAMS);
        if excess > 0 {
            completed.sort_unstable();
            for (_, id) in completed.into_iter().take(excess) {
                self.requests.remove(&id);
            }
        }
    }

    /// Routes one message of the service (see the module docs).
    async fn route(&mut self, message: ServerJsonRpcMessage) {
        let message = crate::transport::outgoing(message);
        let asked = match &message {
            JsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        let answered = match &message {
            JsonRpcMessage::Response(response) => Some(response.id.clone()),
            JsonRpcMessage::Error(error) => error.id.clone(),
            _ => None,
        };
        if let Some(id) = &answered
            && self.initialize.as_ref().is_some_and(|(waiting, _)| waiting == id)
            && let Some((_, answer)) = self.initialize.take()
        {
            let _ = answer.send(message);
            return;
        }
        let key = match &message {
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => answered.map(Key::Request),
            JsonRpcMessage::Notification(JsonRpcNotification {
                notification:
                    ServerNotification::ProgressNotification(rmcp::model::Notification {
                        params: ProgressNotificationParam { progress_token, .. },
                        ..
                    }),
                ..
            }) => Some(Key::Progress(progress_token.clone())),
            JsonRpcMessage::Notification(JsonRpcNotification {
                notification: ServerNotification::CancelledNotification(cancelled),
                ..
            }) => cancelled.params.request_id.clone().map(Key::Asked),
            JsonRpcMessage::Request(request) => request
                .request
                .extensions()
                .get::<rmcp::service::OriginatingRequestId>()
                .map(|origin| Key::Request(origin.0.clone())),
            JsonRpcMessage::Notification(_) => None,
        };
        let ends = matches!(message, JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_));
        let event = ServerSseMessage::from_message(message);
        match key.and_then(|key| self.keys.get(&key).copied()) {
            Some(http_request) => {
                if let (Some(id), Some(request)) = (asked, self.requests.get_mut(&http_request)) {
                    request.keys.push(Key::Asked(id.clone()));
                    self.keys.insert(Key::Asked(id), http_request);
                }
                let delivered = match self.requests.get_mut(&http_request) {
                    Some(request) => request.stream.send(event).await,
                    None => false,
                };
                if ends && delivered {
                    // Answered to a listening client: nothing left to resume.
                    if let Some(request) = self.requests.remove(&http_request) {
                        for key in &request.keys {
                            self.keys.remove(key);
                        }
                    }
                } else if ends {
                    // Its client is away: the answer waits for a resume.
                    self.finish(http_request);
                    self.evict_completed();
                }
            }
            None => {
                self.common.send(event).await;
            }
        }
    }
}

impl Manager {
    pub(crate) fn new(config: SessionConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                sessions: RwLock::default(),
                config,
                sweeping: std::sync::Once::new(),
            }),
        }
    }

    /// Sessions open now.
    pub(crate) fn len(&self) -> usize {
        self.inner.read().len()
    }

    /// Whether `id` names an open session (sync, for the endpoint's session step).
    pub(crate) fn contains(&self, id: &str) -> bool {
        self.inner.read().contains_key(id)
    }

    /// Who opened session `id`, while it is open.
    pub(crate) fn owner(&self, id: &str) -> Option<Principal> {
        self.inner.read().get(id).map(|entry| entry.owner.clone())
    }

    /// Why `owner` could not open one more session now, if it could not:
    /// the endpoint's session step asks before rmcp tries (rmcp logs every failed
    /// session opening at ERROR, which a refused client in a loop would
    /// turn into a log flood). [`SessionManager::create_session`] decides
    /// again under the write lock, for requests that raced past this.
    pub(crate) fn would_refuse(&self, owner: &Principal) -> Option<super::Refusal> {
        self.refusal(&self.inner.read(), owner)
    }

    /// Why `owner` may not open one more session now, if it may not.
    /// Counts the open sessions (at most `max_sessions`, a few µs).
    fn refusal(&self, sessions: &HashMap<SessionId, Entry>, owner: &Principal) -> Option<super::Refusal> {
        let config = &self.inner.config;
        if sessions.len() >= config.max_sessions {
            return Some(super::Refusal::Server(config.max_sessions));
        }
        let held = || sessions.values().filter(|entry| &entry.owner == owner).count();
        if warden_calls::tenant::limits::bound(owner) && held() >= config.sessions_per_principal {
            return Some(super::Refusal::Principal(config.sessions_per_principal));
        }
        None
    }

    fn entry(
        &self,
        id: &SessionId,
    ) -> Result<(Arc<Session>, mpsc::Sender<Box<ClientJsonRpcMessage>>), SessionError> {
        self.inner
            .read()
            .get(id)
            .map(|entry| (entry.session.clone(), entry.inbound.clone()))
            .ok_or_else(|| SessionError::NotFound(id.clone()))
    }

    async fn push(
        id: &SessionId,
        session: &Session,
        inbound: &mpsc::Sender<Box<ClientJsonRpcMessage>>,
        message: ClientJsonRpcMessage,
    ) -> Result<(), SessionError> {
        session.touch();
        inbound
            .send(Box::new(message))
            .await
            .map_err(|_| SessionError::Closed(id.clone()))
    }

    /// Starts the one task that closes idle sessions.
    fn sweep(&self) {
        let inner = Arc::downgrade(&self.inner);
        let period =
            (self.inner.config.keep_alive / 4).clamp(Duration::from_millis(250), Duration::from_secs(15));
        self.inner.sweeping.call_once(|| {
            tokio::spawn(sweeper(inner, period));
        });
    }
}

impl Inner {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<SessionId, Entry>> {
        self.sessions
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<SessionId, Entry>> {
        self.sessions
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

async fn sweeper(inner: Weak<Inner>, period: Duration) {
    loop {
        tokio::time::sleep(period).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let keep_alive = inner.config.keep_alive;
        // Dropped outside the lock: closing a session ends its service.
        let expired: Vec<Entry> = {
            let mut sessions = inner.write();
            let idle: Vec<SessionId> = sessions
                .iter()
                .filter(|(_, entry)| entry.session.idle() >= keep_alive)
                .map(|(id, _)| id.clone())
                .collect();
            idle.iter().filter_map(|id| sessions.remove(id)).collect()
        };
        drop(expired);
    }
}

/// The service's side of a session.
pub(crate) struct SessionTransport {
    session: Arc<Session>,
    inbound: mpsc::Receiver<Box<ClientJsonRpcMessage>>,
}

impl rmcp::transport::Transport<RoleServer> for SessionTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        message: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let session = self.session.clone();
        async move {
            session.touch();
            session.routes.lock().await.route(message).await;
            Ok(())
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ClientJsonRpcMessage>> + Send {
        let inbound = &mut self.inbound;
        async move {
            inbound
                .recv()
                .await
                .map(|message| crate::transport::incoming(*message))
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inbound.close();
        std::future::ready(Ok(()))
    }
}

/// This node's part of every session id it mints: `WARDEN_NODE_ID` (else
/// the host name, as in task records), in the characters a session id may
/// hold and a balancer's pattern can name without escaping: letters,
/// digits, `-`, `_` and `.`; any other character becomes `_`.
fn node_prefix() -> &'static str {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PREFIX.get_or_init(|| {
        warden_calls::node::Node::this()
            .host
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    })
}

/// A session id: `NODE.UUID`. A 2025-11-25 session lives on the node that
/// opened it, and a load balancer sees nothing else that names it on the
/// requests that follow `initialize`: with the node in the id, a stock
/// balancer maps the `Mcp-Session-Id` header to the node that holds the
/// session (`deploy/nginx.conf`; the rule is in docs/operating.md, "Several
/// nodes"). The node is everything before the last `.` (a UUID has none);
/// the UUID is random, so the id stays unguessable.
fn session_id(node: &str, random: uuid::Uuid) -> String {
    format!("{node}.{random}")
}

/// An SSE stream's events as rmcp's service reads them.
pub(crate) struct Events(mpsc::Receiver<ServerSseMessage>);

impl futures_util::Stream for Events {
    type Item = ServerSseMessage;

    fn poll_next(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<ServerSseMessage>> {
        self.0.poll_recv(context)
    }
}

impl SessionManager for Manager {
    type Error = SessionError;
    type Transport = SessionTransport;

    async fn create_session(&self) -> Result<(SessionId, SessionTransport), SessionError> {
        self.sweep();
        // Outside the endpoint (tests) the opener is the operator.
        let owner = super::OPENER
            .try_with(|opener| opener.principal.clone())
            .unwrap_or_default();
        let id: SessionId = session_id(node_prefix(), uuid::Uuid::new_v4()).into();
        let (sender, receiver) = mpsc::channel(self.inner.config.channel_capacity.max(1));
        let session = Arc::new(Session {
            routes: tokio::sync::Mutex::new(Routes::new(&self.inner.config)),
            last_active: AtomicU64::new(0),
            born: Instant::now(),
        });
        {
            let mut sessions = self.inner.write();
            if let Some(refusal) = self.refusal(&sessions, &owner) {
                let _ = super::OPENER.try_with(|opener| opener.refuse(refusal));
                return Err(refusal.into());
            }
            sessions.insert(
                id.clone(),
                Entry {
                    session: session.clone(),
                    inbound: sender,
                    owner,
                },
            );
        }
        Ok((
            id,
            SessionTransport {
                session,
                inbound: receiver,
            },
        ))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, SessionError> {
        let (session, inbound) = self.entry(id)?;
        let (answer, answered) = oneshot::channel();
        if let JsonRpcMessage::Request(request) = &message {
            session.routes.lock().await.initialize = Some((request.id.clone(), answer));
        }
        Self::push(id, &session, &inbound, message).await?;
        // A service that never answers is given the session's idle time.
        match tokio::time::timeout(self.inner.config.keep_alive, answered).await {
            Ok(Ok(answer)) => Ok(answer),
            _ => Err(SessionError::NoInitializeAnswer),
        }
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, SessionError> {
        Ok(self.contains(id))
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), SessionError> {
        let closed = self.inner.write().remove(id);
        drop(closed);
        Ok(())
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl futures_util::Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError>
    {
        let (session, inbound) = self.entry(id)?;
        let receiver = {
            let mut routes = session.routes.lock().await;
            routes.evict_completed();
            let http_request = routes.next_http_request;
            routes.next_http_request = routes.next_http_request.wrapping_add(1);
            let (sender, receiver) = mpsc::channel(routes.capacity);
            let mut stream = Stream::new(Some(sender), Some(http_request), routes.capacity);
            let _ = stream.send(ServerSseMessage::retry(routes.sse_retry)).await;
            let mut keys = Vec::new();
            if let JsonRpcMessage::Request(request) = &message {
                keys.push(Key::Request(request.id.clone()));
                if let Some(token) = request.request.get_meta().get_progress_token() {
                    keys.push(Key::Progress(token));
                }
            }
            for key in &keys {
                routes.keys.insert(key.clone(), http_request);
            }
            routes.requests.insert(
                http_request,
                RequestStream {
                    keys,
                    stream,
                    completed_at: None,
                },
            );
            receiver
        };
        Self::push(id, &session, &inbound, message).await?;
        Ok(Events(receiver))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), SessionError> {
        let (session, inbound) = self.entry(id)?;
        if let JsonRpcMessage::Notification(JsonRpcNotification {
            notification: ClientNotification::CancelledNotification(cancelled),
            ..
        }) = &message
            && let Some(request_id) = cancelled.params.request_id.clone()
        {
            let mut routes = session.routes.lock().await;
            if let Some(http_request) = routes.keys.get(&Key::Request(request_id)).copied() {
                routes.finish(http_request);
            }
        }
        Self::push(id, &session, &inbound, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl futures_util::Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError>
    {
        let (session, _) = self.entry(id)?;
        session.touch();
        let mut routes = session.routes.lock().await;
        let receiver = routes
            .open_common(None)
            .map_err(|()| SessionError::UnknownEvent(String::new()))?;
        Ok(Events(receiver))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl futures_util::Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError>
    {
        let (session, _) = self.entry(id)?;
        session.touch();
        let unknown = || SessionError::UnknownEvent(last_event_id.clone());
        let (index, http_request) = match last_event_id.split_once('/') {
            Some((index, request)) => (
                index.parse::<u64>(),
                Some(request.parse::<u64>().map_err(|_| unknown())?),
            ),
            None => (last_event_id.parse::<u64>(), None),
        };
        let index = index.map_err(|_| unknown())?;
        let mut routes = session.routes.lock().await;
        let Some(http_request) = http_request else {
            // Id 0 is the priming event the HTTP layer sends on a GET stream.
            let after = (index > 0).then_some(index);
            return routes.open_common(after).map(Events).map_err(|()| unknown());
        };
        let Some(request) = routes.requests.get_mut(&http_request) else {
            return Err(unknown());
        };
        let receiver = request.stream.attach(Some(index)).map_err(|()| unknown())?;
        if request.completed_at.is_some() {
            // Replayed; the answer was among it, so the stream ends here.
            request.stream.sender = None;
        }
        Ok(Events(receiver))
    }
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager").field("open", &self.len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{JsonRpcResponse, JsonRpcVersion2_0, NumberOrString, ServerResult};

    use super::*;

    fn config() -> SessionConfig {
        SessionConfig {
            channel_capacity: 16,
            keep_alive: Duration::from_secs(300),
            sse_retry: Duration::from_secs(3),
            completed_ttl: Duration::from_secs(60),
            max_sessions: 5,
            sessions_per_principal: 2,
        }
    }

    /// Opens a session as `who` would through the endpoint's session step.
    async fn open_as(manager: &Manager, who: &str) -> Result<SessionId, SessionError> {
        let principal = if who == warden_calls::tenant::LOCAL {
            Principal::local()
        } else {
            Principal::new(who).expect("principal")
        };
        let opener = super::super::Opener::new(principal);
        super::super::OPENER
            .scope(opener, async { manager.create_session().await.map(|(id, _)| id) })
            .await
    }

    #[test]
    fn a_session_id_names_its_node_before_the_last_dot() {
        // What a balancer's rule relies on: NODE.UUID, the node recoverable
        // whatever dots it holds, and only characters a session id may hold.
        let random = uuid::Uuid::new_v4();
        let id = session_id("node-a.example", random);
        let (node, rest) = id.rsplit_once('.').expect("a dot");
        assert_eq!((node, rest), ("node-a.example", random.to_string().as_str()));
        let prefix = node_prefix();
        assert!(!prefix.is_empty());
        assert!(
            prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')),
            "{prefix}"
        );
    }

    #[tokio::test]
    async fn sessions_are_capped_per_principal_and_in_all() {
        // A principal past its share is refused while others still open
        // theirs; the operator is held only by the server-wide cap.
        let manager = Manager::new(config());
        let alice = [open_as(&manager, "alice").await, open_as(&manager, "alice").await];
        assert!(alice.iter().all(Result::is_ok));
        assert!(matches!(
            open_as(&manager, "alice").await,
            Err(SessionError::Refused(super::super::Refusal::Principal(2)))
        ));
        assert!(open_as(&manager, "bob").await.is_ok());
        assert!(open_as(&manager, warden_calls::tenant::LOCAL).await.is_ok());
        assert!(open_as(&manager, warden_calls::tenant::LOCAL).await.is_ok());
        assert!(matches!(
            open_as(&manager, warden_calls::tenant::LOCAL).await,
            Err(SessionError::Refused(super::super::Refusal::Server(5)))
        ));
        // Closing one of alice's gives her (and the server) room again.
        let first = alice[0].as_ref().expect("opened").clone();
        assert_eq!(
            manager.owner(&first).map(|p| p.to_string()),
            Some("alice".to_string())
        );
        manager.close_session(&first).await.expect("closes");
        assert!(open_as(&manager, "alice").await.is_ok());
    }

    fn answer(id: i64) -> ServerJsonRpcMessage {
        JsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: JsonRpcVersion2_0,
            id: NumberOrString::Number(id),
            result: ServerResult::empty(()),
        })
    }

    /// A request stream as `create_stream` makes it, with no client (the
    /// one that asked hung up before its answer).
    fn asked_and_gone(routes: &mut Routes, id: i64) {
        let key = Key::Request(NumberOrString::Number(id));
        let http_request = routes.next_http_request;
        routes.next_http_request += 1;
        routes.keys.insert(key.clone(), http_request);
        routes.requests.insert(
            http_request,
            RequestStream {
                keys: vec![key],
                stream: Stream::new(None, Some(http_request), routes.capacity),
                completed_at: None,
            },
        );
    }

    #[tokio::test]
    async fn answers_that_find_no_client_are_kept_for_a_resume_up_to_the_cap() {
        // MAX_SESSION_RESUMABLE_STREAMS bounds what a client that asks and hangs up in a loop
        // makes the session hold; the newest answers stay resumable.
        let mut routes = Routes::new(&config());
        let asked = crate::limits::MAX_SESSION_RESUMABLE_STREAMS as i64 + 6;
        for id in 0..asked {
            asked_and_gone(&mut routes, id);
            routes.route(answer(id)).await;
        }
        assert_eq!(
            routes.requests.len(),
            crate::limits::MAX_SESSION_RESUMABLE_STREAMS
        );
        assert!(!routes.requests.contains_key(&0), "the oldest went first");
        let newest = (asked - 1) as u64;
        let kept = routes.requests.get_mut(&newest).expect("the newest is kept");
        let mut resumed = kept.stream.attach(None).expect("resumable");
        let event = resumed.recv().await.expect("the answer");
        assert_eq!(event.event_id.as_deref(), Some(format!("0/{newest}").as_str()));
    }

    #[tokio::test]
    async fn an_answer_taken_by_its_client_is_forgotten() {
        // A delivered answer leaves nothing behind: a busy session does not grow.
        let mut routes = Routes::new(&config());
        asked_and_gone(&mut routes, 1);
        let (sender, mut receiver) = mpsc::channel(4);
        if let Some(request) = routes.requests.get_mut(&0) {
            request.stream.sender = Some(sender);
        }
        routes.route(answer(1)).await;
        assert!(receiver.recv().await.is_some());
        assert!(routes.requests.is_empty() && routes.keys.is_empty());
    }

    #[tokio::test]
    async fn a_resume_gets_only_the_events_after_its_id() {
        // Last-Event-ID n replays n+1 onwards; an id the cache no longer holds is refused.
        let mut stream = Stream::new(None, Some(7), 2);
        for _ in 0..4 {
            let _ = stream.send(ServerSseMessage::retry(Duration::from_secs(1))).await;
        }
        let mut resumed = stream.attach(Some(2)).expect("3 is cached");
        assert_eq!(
            resumed.recv().await.and_then(|e| e.event_id).as_deref(),
            Some("3/7")
        );
        assert!(resumed.try_recv().is_err(), "nothing else");
        assert!(stream.attach(Some(0)).is_err(), "1 is gone");
        assert!(stream.attach(Some(u64::MAX)).is_err(), "a hostile id is refused");
    }
}
