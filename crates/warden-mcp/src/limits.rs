//! The limits the MCP layer enforces (both transports, the HTTP server's
//! connections and sessions, authentication, the answer bound, stateless
//! questions, tasks per principal on submission, draining), and the whole
//! [`Limits`] of a server, which gathers every crate's part.
//!
//! [`ServingLimits`] is the MCP layer's part: the server and the
//! transports are handed it (`WardenServer::new`, `serve::stdio_exit_code`,
//! `serve::http_exit_code`). [`Limits`] is what an application sets
//! (`warden::Limits`, through `App::limits`) and what `from_env` reads the
//! operator's `WARDEN_*` overrides into; each layer then receives only its
//! own part. The rule of every crate's `limits` module is in
//! [`warden_core::limits`].

use std::time::Duration;

use warden_calls::limits::{CallLimits, DEFAULT_MAX_ARGUMENT_BYTES};
use warden_core::limits::{LimitError, env_number};
use warden_task::limits::TaskLimits;

/// The values a running server enforces, one part per layer that enforces
/// them. Defaults are each part's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Limits {
    /// The executor's: every guard call, the workers (with the sandbox's
    /// rlimits), the artifact store and the event log.
    pub calls: CallLimits,
    /// The task runner's: task slots, the queue, leases, token budgets.
    pub tasks: TaskLimits,
    /// The MCP layer's: transports, HTTP sessions, the answer bound.
    pub serving: ServingLimits,
}

impl Limits {
    /// Applies the operator overrides on top of `self`: each part's
    /// `from_env`, one `WARDEN_*` variable per tunable limit, each with the
    /// range given in its crate's `limits` module and in the limits table
    /// of `docs/operating.md`, read through `warden_core::config` (the
    /// environment, then `.env`). A value out of range is an error naming
    /// the variable and the range, never silently clamped.
    pub fn from_env(self) -> Result<Self, LimitError> {
        Ok(Self {
            calls: self.calls.from_env()?,
            tasks: self.tasks.from_env()?,
            serving: self.serving.from_env()?,
        })
    }
}

/// The values the MCP layer enforces. Defaults are the `DEFAULT_*`
/// constants of this module.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServingLimits {
    /// See [`DEFAULT_MAX_MESSAGE_BYTES`].
    pub max_message_bytes: usize,
    /// See [`DEFAULT_MAX_PENDING_RESPONSES`].
    pub max_pending_responses: usize,
    /// See [`DEFAULT_TASKS_QUEUED_PER_PRINCIPAL`].
    pub tasks_queued_per_principal: usize,
    /// See [`DEFAULT_HTTP_MAX_CONNECTIONS`].
    pub http_max_connections: usize,
    /// See [`DEFAULT_HTTP_MAX_SESSIONS`].
    pub http_max_sessions: usize,
    /// See [`DEFAULT_HTTP_SESSION_IDLE`].
    pub http_session_idle: Duration,
    /// See [`DEFAULT_DRAIN_GRACE`].
    pub drain_grace: Duration,
    /// See [`DEFAULT_HTTP_IDLE`].
    pub http_idle: Duration,
    /// See [`DEFAULT_HTTP_SESSIONS_PER_PRINCIPAL`].
    pub http_sessions_per_principal: usize,
    /// See [`DEFAULT_HTTP_REQUESTS_PER_PRINCIPAL`].
    pub http_requests_per_principal: usize,
    /// See [`DEFAULT_HTTP_HEADER_TIMEOUT`].
    pub http_header_timeout: Duration,
    /// See [`DEFAULT_HTTP_UNPROVEN_CONNECTIONS`].
    pub http_unproven_connections: usize,
    /// See [`DEFAULT_HTTP_BODY_MIN_RATE`].
    pub http_body_min_rate: u64,
    /// See [`DEFAULT_MAX_ANSWER_BYTES`].
    pub max_answer_bytes: usize,
}

impl Default for ServingLimits {
    fn default() -> Self {
        Self {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_pending_responses: DEFAULT_MAX_PENDING_RESPONSES,
            tasks_queued_per_principal: DEFAULT_TASKS_QUEUED_PER_PRINCIPAL,
            http_max_connections: DEFAULT_HTTP_MAX_CONNECTIONS,
            http_max_sessions: DEFAULT_HTTP_MAX_SESSIONS,
            http_session_idle: DEFAULT_HTTP_SESSION_IDLE,
            drain_grace: DEFAULT_DRAIN_GRACE,
            http_idle: DEFAULT_HTTP_IDLE,
            http_sessions_per_principal: DEFAULT_HTTP_SESSIONS_PER_PRINCIPAL,
            http_requests_per_principal: DEFAULT_HTTP_REQUESTS_PER_PRINCIPAL,
            http_header_timeout: DEFAULT_HTTP_HEADER_TIMEOUT,
            http_unproven_connections: DEFAULT_HTTP_UNPROVEN_CONNECTIONS,
            http_body_min_rate: DEFAULT_HTTP_BODY_MIN_RATE,
            max_answer_bytes: DEFAULT_MAX_ANSWER_BYTES,
        }
    }
}

impl ServingLimits {
    /// Applies the operator overrides of these fields on top of `self`
    /// (see [`warden_core::limits::env_number`]).
    pub fn from_env(mut self) -> Result<Self, LimitError> {
        if let Some(n) = env_number("WARDEN_MAX_MESSAGE_BYTES", 65_536, 1 << 30)? {
            self.max_message_bytes = n as usize;
        }
        if let Some(n) = env_number("WARDEN_MAX_PENDING_RESPONSES", 1, 1024)? {
            self.max_pending_responses = n as usize;
        }
        if let Some(n) = env_number("WARDEN_TASKS_QUEUED_PER_PRINCIPAL", 0, 100_000)? {
            self.tasks_queued_per_principal = n as usize;
        }
        if let Some(n) = env_number("WARDEN_HTTP_MAX_CONNECTIONS", 1, 65_536)? {
            self.http_max_connections = n as usize;
        }
        if let Some(n) = env_number("WARDEN_HTTP_MAX_SESSIONS", 1, 100_000)? {
            self.http_max_sessions = n as usize;
        }
        if let Some(n) = env_number("WARDEN_HTTP_SESSION_IDLE_SECONDS", 10, 86_400)? {
            self.http_session_idle = Duration::from_secs(n);
        }
        if let Some(n) = env_number("WARDEN_DRAIN_SECONDS", 0, 3600)? {
            self.drain_grace = Duration::from_secs(n);
        }
        if let Some(n) = env_number("WARDEN_HTTP_IDLE_SECONDS", 1, 3600)? {
            self.http_idle = Duration::from_secs(n);
        }
        if let Some(n) = env_number("WARDEN_HTTP_SESSIONS_PER_PRINCIPAL", 1, 100_000)? {
            self.http_sessions_per_principal = n as usize;
        }
        if let Some(n) = env_number("WARDEN_HTTP_REQUESTS_PER_PRINCIPAL", 1, 65_536)? {
            self.http_requests_per_principal = n as usize;
        }
        if let Some(n) = env_number("WARDEN_HTTP_HEADER_TIMEOUT_SECONDS", 1, 600)? {
            self.http_header_timeout = Duration::from_secs(n);
        }
        if let Some(n) = env_number("WARDEN_HTTP_UNPROVEN_CONNECTIONS", 1, 65_536)? {
            self.http_unproven_connections = n as usize;
        }
        if let Some(n) = env_number("WARDEN_HTTP_BODY_MIN_RATE", 1, 1 << 30)? {
            self.http_body_min_rate = n;
        }
        if let Some(n) = env_number(MAX_ANSWER_BYTES_ENV, MIN_ANSWER_BYTES, MAX_ANSWER_BYTES)? {
            self.max_answer_bytes = n as usize;
        }
        Ok(self)
    }

    /// The largest MCP message either transport reads (a stdio line, an
    /// HTTP request body): `max_message_bytes`, never below the argument
    /// cap (`max_argument_bytes`, the executor's
    /// [`CallLimits::max_argument_bytes`]) plus [`MESSAGE_ENVELOPE_BYTES`],
    /// so a call the executor accepts is never refused by the transport.
    pub fn message_cap(&self, max_argument_bytes: usize) -> usize {
        self.max_message_bytes
            .max(max_argument_bytes.saturating_add(MESSAGE_ENVELOPE_BYTES))
    }
}

/// The `pollIntervalMs` a task-augmented call suggests to its client: 500 ms.
/// `tasks/get` reads one record, so polling at this rate costs little.
pub const TASK_POLL_INTERVAL_MS: u64 = 500;

// ---- transport ----

/// Largest JSON-RPC message (one stdin line) the server reads: 9,048,576
/// bytes, a megabyte above [`DEFAULT_MAX_ARGUMENT_BYTES`] for the envelope.
/// A longer line is streamed past without being buffered (only its first
/// 4 KiB are kept, to find its id) and answered with a `-32600` error;
/// the server keeps serving. The effective cap is never below the argument
/// cap plus that megabyte. Operators override it with
/// `WARDEN_MAX_MESSAGE_BYTES` (65,536 – 1,073,741,824). Does not bound
/// what the server writes.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = DEFAULT_MAX_ARGUMENT_BYTES + MESSAGE_ENVELOPE_BYTES;

/// Deepest nesting of one JSON-RPC message the server reads (a stdin line,
/// an HTTP POST body): 127 levels of objects and lists, the message's own
/// object included. This is serde_json's recursion limit (128, counted
/// down before each level; the level that reaches 0 is refused), not a
/// choice of Warden's: a deeper message is answered `-32700` naming its
/// depth and this limit (over HTTP with 400), never taken for broken JSON,
/// and the server keeps serving. A call's arguments are held to far less
/// ([`MAX_ARGUMENT_DEPTH`](warden_calls::limits::MAX_ARGUMENT_DEPTH)).
pub const PARSED_DEPTH: usize = 127;

/// Room for the JSON-RPC envelope above the argument cap: 1 MiB. The
/// effective message cap is at least `max_argument_bytes` plus this.
pub const MESSAGE_ENVELOPE_BYTES: usize = 1024 * 1024;

/// Requests read from the client and not yet answered: 32. With that many
/// answers unwritten (running, or waiting for a client that stopped
/// reading stdout), the server reads no further requests until one is
/// written or cancelled, so its memory holds at most this many requests
/// and answers. Progress notifications are bounded by it too: each running
/// request waits for its notification to be written before sending the
/// next. Operators override it with `WARDEN_MAX_PENDING_RESPONSES`
/// (1–1024). Does not bound the size of one answer (see
/// [`MAX_INLINE_RESULT_BYTES`](warden_calls::limits::MAX_INLINE_RESULT_BYTES) and [`DEFAULT_MAX_WORKER_RESPONSE`](warden_calls::limits::DEFAULT_MAX_WORKER_RESPONSE)).
pub const DEFAULT_MAX_PENDING_RESPONSES: usize = 32;

/// Progress and log messages ([`warden_core::notify`]) one direct guard call may
/// have waiting for the client: 64. A guard that sends faster than the
/// client reads loses the excess (messages are best effort; the call is
/// unaffected). Does not bound how many a call sends in all.
pub const MAX_QUEUED_NOTICES: usize = 64;

/// How long the stdio server, when its client goes away or it is stopped,
/// waits for running tasks to record themselves `cancelled`: 2 s. Tasks
/// not done by then are marked `interrupted` at the next start.
pub const TASK_SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

// ---- HTTP transport ----
// `serve --http`: the bounds that keep one client from filling the server
// through the transport itself (before any call is admitted).

/// HTTP connections open at once: 1,024. At the cap the server stops
/// accepting until one closes: new clients wait in the kernel's listen
/// backlog, connections already open keep being served. Each connection
/// costs a file descriptor and a few KiB. Operators override it with
/// `WARDEN_HTTP_MAX_CONNECTIONS` (1–65,536).
pub const DEFAULT_HTTP_MAX_CONNECTIONS: usize = 1024;

/// A connection without a request in progress for this long is closed:
/// 60 s, counted from its accept or its last answer, however many bytes
/// trickled in meanwhile (the next request's headers must arrive within
/// it). Without it, a client could hold every connection permit
/// ([`DEFAULT_HTTP_MAX_CONNECTIONS`]) with sockets that send nothing or
/// trickle headers. A request in progress (a long call, an SSE stream)
/// keeps its connection however quiet it is. A client between requests
/// reconnects. Operators override it with
/// `WARDEN_HTTP_IDLE_SECONDS` (1–3,600).
pub const DEFAULT_HTTP_IDLE: Duration = Duration::from_secs(60);

/// MCP sessions (protocol revisions before 2026-07-28) held at once:
/// 4,096. Every `initialize` opens one, whatever revision its headers
/// name; the one past the cap is answered 503 with `Retry-After`
/// (`too_many_sessions`). Stateless 2026-07-28 requests open none and are
/// not refused. Each principal holds at most
/// [`DEFAULT_HTTP_SESSIONS_PER_PRINCIPAL`] of them. An idle session costs about 28 KiB of server
/// memory (the `http_bench` figure). Operators override it with
/// `WARDEN_HTTP_MAX_SESSIONS` (1–100,000).
pub const DEFAULT_HTTP_MAX_SESSIONS: usize = 4096;

/// MCP sessions one authenticated principal may hold at once: 256
/// (`WARDEN_HTTP_SESSIONS_PER_PRINCIPAL`, 1–100,000). Every `initialize`
/// opens a session whatever protocol revision its headers name, and each
/// counts here and against [`DEFAULT_HTTP_MAX_SESSIONS`]. Past it the
/// `initialize` is answered 503 `too_many_sessions` with `Retry-After`,
/// naming the variable; the principal's other sessions keep working. So one
/// token cannot fill the server-wide cap (256 idle sessions are about
/// 7 MiB), while a team that shares one token still gets a session per
/// client. `local` (the operator of an unauthenticated loopback server) is
/// bound by the server-wide cap alone.
pub const DEFAULT_HTTP_SESSIONS_PER_PRINCIPAL: usize = 256;

/// HTTP requests one authenticated principal may have in progress at once,
/// open SSE streams (a session's GET stream, a resumed stream, a call's
/// answer stream) included: 64 (`WARDEN_HTTP_REQUESTS_PER_PRINCIPAL`,
/// 1–65,536). A request in progress holds its connection, so this is also
/// the connections one principal can keep busy: 64 of the default 1,024.
/// The request past it is answered 429 `too_many_requests` with
/// `Retry-After`, naming the variable; it holds nothing. `local` is bound
/// by the connection cap alone.
pub const DEFAULT_HTTP_REQUESTS_PER_PRINCIPAL: usize = 64;

/// How long a connection that has not yet carried an authenticated request
/// may take to deliver a request's headers: 10 s, from its accept or its
/// last answer (`WARDEN_HTTP_HEADER_TIMEOUT_SECONDS`, 1–600). Then it is
/// closed. A connection whose request reached `/mcp` through
/// authentication gets [`DEFAULT_HTTP_IDLE`] instead. It is also the grace
/// a request body gets before [`DEFAULT_HTTP_BODY_MIN_RATE`] applies.
pub const DEFAULT_HTTP_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections open at once that have not yet carried an authenticated
/// request: 256 (`WARDEN_HTTP_UNPROVEN_CONNECTIONS`, 1–65,536, at most
/// [`DEFAULT_HTTP_MAX_CONNECTIONS`]). Past it the server accepts nothing
/// until one is proven or closed (each lasts at most
/// [`DEFAULT_HTTP_HEADER_TIMEOUT`] between requests), so silent or
/// unauthenticated sockets never hold more than a quarter of the
/// connection permits, and the rest stay with authenticated clients.
pub const DEFAULT_HTTP_UNPROVEN_CONNECTIONS: usize = 256;

/// The slowest request body the server reads: 16 KiB/s on average after a
/// grace of [`DEFAULT_HTTP_HEADER_TIMEOUT`] (`WARDEN_HTTP_BODY_MIN_RATE`,
/// bytes per second, 1–1 GiB). A body of `n` bytes must be complete within
/// grace + `n` / rate from the request's start (10.5 s for an 8 KiB
/// call, about 9 min for the largest message); a body that falls behind is
/// answered 408 `body_too_slow` and its connection closed, so a client
/// trickling bytes cannot hold a connection and its request for long.
pub const DEFAULT_HTTP_BODY_MIN_RATE: u64 = 16 * 1024;

/// Questions one guard may ask in one stateless call (multi-round-trip
/// input, SEP-2322): 8, one round trip each. The ninth question fails in
/// the guard with `cannot_ask` naming this limit, so a guard that asks in
/// a loop cannot keep a client retrying forever (rmcp's client gives up
/// after 10 rounds). Does not bound questions on a session.
pub const MAX_INPUT_QUESTIONS: usize = 8;

/// The largest `requestState` the server issues or accepts: 65,536 bytes
/// (64 KiB). It carries the answers given so far (signed, not encrypted),
/// so answers larger than this together end the call with `cannot_ask`
/// naming this limit instead of another round; a longer `requestState`
/// from a client is refused before it is verified.
pub const MAX_INPUT_STATE_BYTES: usize = 64 * 1024;

/// A session with no request for this long is closed: 300 s (rmcp's own
/// default). Its client must initialize again. Operators override it with
/// `WARDEN_HTTP_SESSION_IDLE_SECONDS` (10–86,400).
pub const DEFAULT_HTTP_SESSION_IDLE: Duration = Duration::from_secs(300);

/// SSE events one MCP session stream buffers for a client and keeps for a
/// `Last-Event-ID` resume: 16 (rmcp's own default). A client that stops
/// reading a stream holds its session's messages until it reads again or
/// goes away; one that resumes after more than this many events were sent
/// gets an empty stream (the events are gone).
pub const SESSION_STREAM_EVENTS: usize = 16;

/// Quiet extra GET streams one MCP session keeps (a client's competing
/// reconnects, kept alive but given no notifications): 32; the oldest is
/// closed first.
pub const MAX_SESSION_SHADOW_STREAMS: usize = 32;

/// How long a session request's SSE stream stays resumable when its
/// answer found no client listening: 60 s (rmcp's own default), so a
/// client that lost the stream mid-call gets the answer with
/// `Last-Event-ID`. An answer delivered to a listening client is dropped
/// at once.
pub const SESSION_RESUME_WINDOW: Duration = Duration::from_secs(60);

/// Answered-while-away streams one MCP session keeps for a resume: 64. A
/// client that sends requests and hangs up in a loop would otherwise make
/// the session hold every answer for [`SESSION_RESUME_WINDOW`]; past this
/// many, the oldest is dropped (its resume gets an empty stream).
pub const MAX_SESSION_RESUMABLE_STREAMS: usize = 64;

/// How long SIGTERM waits for running calls and tasks to finish before it
/// cancels them: 30 s. The listener stays open for it: `/readyz`
/// answers 503; after the grace, running tasks are cancelled and recorded
/// `cancelled` (waiting up to [`TASK_SHUTDOWN_GRACE`] for their records)
/// and workers are killed. Operators override it with
/// `WARDEN_DRAIN_SECONDS` (0–3,600).
pub const DEFAULT_DRAIN_GRACE: Duration = Duration::from_secs(30);

/// How long a `/readyz` answer is reused: 5 s. The probe starts a worker
/// process, so a client polling `/readyz` in a loop costs at most one
/// worker start per period.
pub const READY_CACHE: Duration = Duration::from_secs(5);

// ---- the answer bound (issue 38) ----
// What one `tools/call` (or `tasks/get`) answer may weigh on the wire. The
// MCP layer bounds every answer in one place (`warden_mcp::bound`); the
// typed builders cut their own long parts first (a task's receipt hashes,
// a page of files, a chunk of a file).

/// The largest answer a client receives for one tool call or `tasks/get`:
/// 100,000 bytes of JSON-RPC response on the wire, structuredContent, text
/// content and `_meta` together (`WARDEN_MAX_ANSWER_BYTES`, bytes,
/// 8,192–67,108,864). Why: clients refuse large tool results (Claude Code
/// refuses one over 25,000 tokens by default), and an answer listing a
/// thousand artifacts or six thousand metrics is read by nobody whole.
/// At the limit the answer is cut, never refused: its text stops repeating
/// structuredContent (it becomes a short JSON summary), images and links
/// beyond a share are dropped, then the value itself keeps its leading
/// items within the budget; the cut answer says `truncated: true` with a
/// `truncation` object (the limit, the whole answer's size, each cut with
/// its kept and total counts) and points at the whole value, kept as an
/// artifact: a task's `result.json`, or for any other tool a new task
/// directory of the caller holding `value.json` (a task record of its own,
/// kept like any task), with a `resource_link` to it. A guard whose output
/// schema leaves no room for the marker answers `isError` with
/// `answer_too_large`, its status `success`, and the same pointer. Does
/// not bound `resources/read`, `read_artifact`'s own chunk limit, or
/// protocol errors.
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 100_000;

/// The variable that overrides [`DEFAULT_MAX_ANSWER_BYTES`].
pub const MAX_ANSWER_BYTES_ENV: &str = "WARDEN_MAX_ANSWER_BYTES";

/// Smallest answer bound an operator may set: 8,192 bytes, room for the
/// JSON-RPC envelope, the `truncation` marker with its pointer and a few
/// KiB of the value. A smaller `WARDEN_MAX_ANSWER_BYTES` is a start-up error.
pub const MIN_ANSWER_BYTES: u64 = 8_192;

/// Largest answer bound an operator may set: 64 MiB (67,108,864 bytes). A
/// larger `WARDEN_MAX_ANSWER_BYTES` is a start-up error.
pub const MAX_ANSWER_BYTES: u64 = 64 * 1024 * 1024;

/// Bytes of the answer bound kept for the JSON-RPC envelope around the
/// result (`jsonrpc`, the request id, a task's fields in `tasks/get`): 1,024.
/// The result itself is cut to the bound minus this; a client-chosen request
/// id longer than this can take the response past the bound.
pub const ANSWER_ENVELOPE_BYTES: usize = 1_024;

/// Cuts a `truncation` marker lists one by one: 8 (`cut`); more are
/// counted in `cut_more`. Keeps the marker itself small however many
/// parts were cut.
pub const ANSWER_CUTS_LISTED: usize = 8;

/// PNG artifacts a `run_script`/`run_coding_task` result carries as MCP
/// image content, so a client shows them without another call: at most 8,
/// in the order of the result's artifact list, and only while the whole
/// tool result (its JSON twice — structuredContent and the text mirror —
/// plus the base64 of the images) stays within [`MAX_INLINE_RESULT_BYTES`](warden_calls::limits::MAX_INLINE_RESULT_BYTES)
/// and the answer bound ([`DEFAULT_MAX_ANSWER_BYTES`]), whichever is smaller.
/// A PNG that does not fit is still a `resource_link` (every artifact is),
/// to read with `resources/read` or `read_artifact`.
pub const MAX_RESULT_IMAGES: usize = 8;

// ---- http authentication ----
// The bearer-token checks of `serve --http`
// (`crate::transport::http::auth`). Contract bounds, not tunables: an
// operator who needs larger tokens or a slower issuer has a misconfigured
// issuer, not a capacity problem.

/// Longest `Authorization` header accepted: 8 KiB (8,192 bytes, scheme
/// included). A longer one is answered 400 `malformed_authorization`
/// before anything is hashed or decoded. Room for a JWT with many claims;
/// does not bound other headers (the HTTP server's own limits do).
pub const MAX_AUTHORIZATION_BYTES: usize = 8 * 1024;

/// How long one fetch of the issuer's JWKS (`WARDEN_OAUTH_JWKS` as a URL)
/// may take, connect to last byte: 5 s. At startup a slower issuer is a
/// startup error; later the server keeps the keys it has and a token
/// signed by an unknown key is answered 401 `invalid_token`.
pub const JWKS_FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest JWKS document read: 256 KiB (262,144 bytes), from a URL or a
/// file. A larger one is refused like an unreachable one (above). Real key
/// sets are a few KiB.
pub const JWKS_MAX_BYTES: usize = 256 * 1024;

/// Least time between two JWKS loads: 60 s. A token naming an unknown `kid`
/// triggers a reload only when the last one is older than this, and
/// concurrent requests share one reload, so a flood of made-up key ids
/// costs the issuer at most one request a minute. The cost: a key the
/// issuer publishes right after a reload is accepted up to 60 s later.
pub const JWKS_MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(60);

/// Age after which the JWKS is reloaded in the background even when every
/// token's `kid` is known: 15 min (900 s), so a key the issuer withdrew
/// stops being accepted within this long. Requests never wait for it.
pub const JWKS_MAX_AGE: Duration = Duration::from_secs(15 * 60);

/// Clock skew allowed on a JWT's `exp` and `nbf`: 30 s. A token expired
/// 31 s ago, or valid only 31 s from now, is answered 401 `invalid_token`.
pub const JWT_LEEWAY: Duration = Duration::from_secs(30);

// ---- tasks per principal (issue 24) ----
// How far one principal's MCP tasks may run ahead of its task slots. See
// `warden_task::service` (claims) and `crate::server` (submission).

/// MCP tasks one principal may have waiting beyond the tasks it runs: 4
/// (`WARDEN_TASKS_QUEUED_PER_PRINCIPAL`, 0–100,000). Waiting means queued
/// in the task store, or claimed by a server and waiting there for one of
/// its principal's running tasks to end (its task slot goes to other
/// principals' tasks meanwhile). A new MCP task is accepted while the
/// principal has fewer than [`DEFAULT_TASKS_PER_PRINCIPAL`](warden_task::limits::DEFAULT_TASKS_PER_PRINCIPAL) plus this many
/// tasks queued or running over all servers; beyond it, it is refused at
/// once `principal_busy`, naming both variables, with
/// `retry_after_seconds`: retry when one of them ends. So one principal
/// holds at most 5 (1 + 4, with the defaults) of the [`DEFAULT_TASK_QUEUE`](warden_task::limits::DEFAULT_TASK_QUEUE)
/// places of the queue, however many it sends; 0 makes queued tasks count
/// against its task limit alone (the behaviour before this limit). Never
/// binds `local` (the operator). Does not bound direct calls, which never
/// queue.
pub const DEFAULT_TASKS_QUEUED_PER_PRINCIPAL: usize = 4;
