//! MCP over Streamable HTTP: rmcp's service at `/mcp` inside an axum
//! router, for remote clients and teams.
//!
//! ```text
//!  request ─► connection caps (listener) ─► busy mark, Origin check (edge) ─► CORS ─┬─► /healthz, /readyz, /.well-known/…  (no auth)
//!                                                                                  └─► /mcp (endpoint): Host ─► authentication ─► principal's requests
//!                                                                                      ─► body pace ─► drain ─► in-flight count ─► session bounds ─► direct path ─► rmcp ─► WardenServer
//! ```
//!
//! What one principal or one anonymous client can hold, and the numbers,
//! are in `docs/security.md` ("What a principal can exhaust").
//!
//! Both protocol revisions are served by the same endpoint: 2025-11-25
//! (sessions, SSE streams carrying progress) and 2026-07-28 (stateless
//! requests, `server/discover`); rmcp routes each request by the revision
//! it names. The caller's [`warden_calls::tenant::Principal`] travels in the
//! request's extensions to the handler (`mcp::server::principal_of`).
//!
//! Without authentication the server only binds a loopback address: on any
//! other address it refuses to start, before binding, naming the variables
//! to set.
//!
//! SIGTERM (or SIGINT) drains: the listener stays open so `/readyz` can
//! answer 503 `draining` (a load balancer takes the node out) and new work
//! (a request without a session) is answered 503 `draining`; calls and
//! tasks running then, and requests on open sessions, get
//! `ServingLimits::drain_grace` to finish; after that the listener closes, rmcp's
//! sessions are closed, running tasks are cancelled and recorded
//! `cancelled`, and the process returns (its workers die with it).

pub(crate) mod auth;
mod body;
mod direct;
mod drain;
mod edge;
mod endpoint;
mod health;
mod host;
mod listener;
mod malformed;
mod mcp_first;
mod origin;
mod refusal;
mod requests;
mod sessions;
mod shared;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::routing::get;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use warden_task::TaskRunner;

use crate::limits::ServingLimits;
use crate::server::WardenServer;
use crate::serving::Serving;

/// The period of keep-alive comments on quiet SSE streams (rmcp's default,
/// stated once so the direct path uses the same).
const SSE_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// The `retry` hint of each SSE stream's priming event (SEP-1699; rmcp's
/// default, stated once for the session manager and the service).
const SSE_RETRY: std::time::Duration = std::time::Duration::from_secs(3);

/// The MCP endpoint's path.
pub(crate) const MCP_PATH: &str = "/mcp";

/// Why the HTTP server did not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "refusing to serve {addr} without authentication: anyone who can reach it could run guards and read \
artifacts. Set WARDEN_API_TOKENS_FILE (lines `PRINCIPAL SHA256_HEX_OF_TOKEN`) or WARDEN_OAUTH_ISSUER with \
WARDEN_OAUTH_JWKS, or bind a loopback address such as 127.0.0.1:{port}",
        port = addr.port()
    )]
    Unauthenticated { addr: SocketAddr },
    #[error(
        "WARDEN_PUBLIC_URL: '{0}' is not an http(s) URL; write the MCP endpoint as clients reach it, e.g. https://warden.example.com/mcp"
    )]
    PublicUrl(String),
    #[error(transparent)]
    Origins(#[from] origin::OriginError),
    #[error(transparent)]
    Auth(#[from] auth::AuthConfigError),
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
    /// `WARDEN_INPUT_STATE_KEY` is malformed (the message names the fix).
    #[error(transparent)]
    InputStateKey(#[from] crate::rounds::KeyError),
}

/// What a started server tells its caller (the CLI prints it).
#[derive(Debug, Clone)]
pub(crate) struct Listening {
    /// The MCP endpoint as clients reach it (with the real port when `:0`
    /// was asked for).
    pub(crate) url: String,
    /// The socket address actually bound: behind a proxy the URL is the
    /// public one, and an operator still needs to know where the node is.
    pub(crate) bound: SocketAddr,
    /// Whether requests are authenticated.
    pub(crate) authenticated: bool,
}

/// How a drained server ended.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Drained {
    /// Calls still running when the grace ran out (then cancelled).
    pub(crate) calls_cut: usize,
    /// Tasks that had not recorded themselves when the process returned
    /// (marked `interrupted` at the next start).
    pub(crate) tasks_left: usize,
}

/// Serves MCP on `addr` until `shutdown` resolves (the command line
/// passes SIGTERM/SIGINT), then drains. `on_listening` runs once the
/// socket is bound.
pub(crate) async fn serve(
    tasks: Arc<TaskRunner>,
    limits: ServingLimits,
    name: &str,
    version: &str,
    addr: SocketAddr,
    on_listening: impl FnOnce(&Listening),
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<Drained, HttpError> {
    let (listener, front) = Front::bind(addr, name).await?;
    // The largest body read: see `ServingLimits::message_cap`.
    let message_cap = limits.message_cap(tasks.executor.limits().max_argument_bytes);
    let serving = Serving::new(tasks, limits.clone(), name, version);
    serving.start();
    let node = Node::new(&serving, &limits);
    let app = application(serving.server(), &front, &node, &limits, message_cap);
    let stop_accepting = CancellationToken::new();
    let server = axum::serve(
        listener::LimitedListener::new(
            listener,
            listener::ConnectionBounds {
                max: limits.http_max_connections,
                unproven_max: limits.http_unproven_connections,
                idle: limits.http_idle,
                header_timeout: limits.http_header_timeout,
            },
        ),
        axum::ServiceExt::<axum::extract::Request>::into_make_service_with_connect_info::<listener::Busy>(
            app,
        ),
    )
    .with_graceful_shutdown(stop_accepting.clone().cancelled_owned());
    let mut accepting = tokio::spawn(server.into_future());
    on_listening(&Listening {
        url: front.url.clone(),
        bound: front.local,
        authenticated: front.auth.is_some(),
    });
    tokio::select! {
        ended = &mut accepting => {
            // The server stopped by itself: an accept-loop failure.
            node.close_sessions.cancel();
            serving.stop(crate::limits::TASK_SHUTDOWN_GRACE).await;
            return match ended {
                Ok(Err(error)) => Err(HttpError::Serve(error)),
                _ => Err(HttpError::Serve(std::io::Error::other("the server task ended"))),
            };
        }
        _ = shutdown => {}
    }
    // Drain: refuse new work (the listener stays open, so `/readyz` tells
    // the load balancer), let running work finish within the grace.
    node.health.draining.store(true, Ordering::SeqCst);
    let grace_end = tokio::time::Instant::now() + limits.drain_grace;
    let calls_cut = node.in_flight.wait_idle(grace_end).await;
    // Tasks (MCP tasks too) get the same grace; queued ones stay queued
    // for another server or this one's restart.
    serving.tasks().drain(grace_end).await;
    // Then cut: cancel tasks (they record `cancelled`; MCP tasks
    // `interrupted`), close sessions.
    let tasks_left = serving.stop(crate::limits::TASK_SHUTDOWN_GRACE).await;
    stop_accepting.cancel();
    node.close_sessions.cancel();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), accepting).await;
    Ok(Drained {
        calls_cut,
        tasks_left,
    })
}

/// The bound socket's side facing clients: where it listens, the URL
/// clients reach, who may call and from which origins and hosts.
struct Front {
    local: SocketAddr,
    url: String,
    auth: Option<Arc<auth::Auth>>,
    allowlist: Arc<origin::Allowlist>,
    hosts: Vec<String>,
}

impl Front {
    /// Binds `addr`, refusing an unauthenticated public address before
    /// binding (never reachable, even for a moment) and after (`:0` or a
    /// name that resolved elsewhere), with every setting read and checked.
    async fn bind(addr: SocketAddr, name: &str) -> Result<(tokio::net::TcpListener, Self), HttpError> {
        if !addr.ip().is_loopback() && !auth::configured() {
            return Err(HttpError::Unauthenticated { addr });
        }
        crate::rounds::configure_key()?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| HttpError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| HttpError::Bind { addr, source })?;
        let url = public_url(local)?;
        let auth = auth::Auth::from_env(&url)?.map(|auth| Arc::new(auth.with_resource_name(name)));
        if auth.is_none() && !local.ip().is_loopback() {
            return Err(HttpError::Unauthenticated { addr: local });
        }
        let allowlist = Arc::new(origin::Allowlist::new(
            &url,
            warden_core::config::var("WARDEN_ALLOWED_ORIGINS").as_deref(),
        )?);
        let hosts = allowed_hosts(local, &url);
        let front = Self {
            local,
            url,
            auth,
            allowlist,
            hosts,
        };
        Ok((listener, front))
    }
}

/// What this node tracks while it serves and drains: requests in flight,
/// the sessions (closed as the drain's last step), its health.
struct Node {
    in_flight: Arc<drain::InFlight>,
    sessions: Arc<sessions::Sessions>,
    close_sessions: CancellationToken,
    health: Arc<health::Health>,
}

impl Node {
    fn new(serving: &Serving, limits: &ServingLimits) -> Self {
        let manager = sessions::manager::Manager::new(sessions::manager::SessionConfig {
            channel_capacity: crate::limits::SESSION_STREAM_EVENTS,
            keep_alive: limits.http_session_idle,
            sse_retry: SSE_RETRY,
            completed_ttl: crate::limits::SESSION_RESUME_WINDOW,
            max_sessions: limits.http_max_sessions.max(1),
            sessions_per_principal: limits.http_sessions_per_principal.max(1),
        });
        Self {
            in_flight: Arc::new(drain::InFlight::default()),
            sessions: Arc::new(sessions::Sessions::new(Arc::new(manager))),
            close_sessions: CancellationToken::new(),
            health: Arc::new(health::Health::new(serving.tasks().clone())),
        }
    }
}

/// The whole HTTP application: `/mcp` behind its steps, the public
/// routes (health, OAuth metadata), CORS and the Origin check. Builds and
/// starts nothing.
fn application(
    server: &WardenServer,
    front: &Front,
    node: &Node,
    limits: &ServingLimits,
    message_cap: usize,
) -> impl tower_service::Service<
    axum::extract::Request,
    Response = axum::response::Response,
    Error = std::convert::Infallible,
    Future: Send,
> + Clone
+ Send
+ 'static {
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(node.close_sessions.child_token())
        .with_allowed_hosts(front.hosts.clone())
        .with_sse_keep_alive(Some(SSE_KEEP_ALIVE))
        .with_sse_retry(Some(SSE_RETRY))
        .with_max_request_body_bytes(message_cap)
        // A plain JSON body for a call that sends nothing before its answer;
        // rmcp switches to SSE when the call notifies (progress).
        .with_json_response(true);
    let mcp = {
        let server = server.clone();
        shared::Shared::new(StreamableHttpService::new(
            move || Ok(server.clone()),
            node.sessions.manager.clone(),
            config,
        ))
    };
    // The endpoint's steps in one service (see `endpoint`), not as router
    // or `from_fn` layers: those boxed and cloned the chain per request.
    let endpoint = endpoint::Endpoint::new(endpoint::Steps {
        hosts: host::Hosts::new(&front.hosts),
        auth: front.auth.clone(),
        requests: Arc::new(requests::PrincipalRequests::new(
            limits.http_requests_per_principal,
        )),
        pace: body::BodyPace {
            grace: limits.http_header_timeout,
            rate: limits.http_body_min_rate,
            cap: message_cap,
        },
        health: node.health.clone(),
        in_flight: node.in_flight.clone(),
        sessions: node.sessions.clone(),
        // Plain stateless guard calls skip rmcp's per-request service.
        direct: direct::Direct::new(server.clone(), message_cap, SSE_KEEP_ALIVE),
        mcp,
    });
    let protected = Router::new().nest_service(MCP_PATH, endpoint.clone());
    let mut public = Router::new();
    if let Some(auth) = &front.auth {
        public = public.merge(auth.public_routes());
    }
    let rest = Router::new()
        .merge(protected)
        .merge(public)
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz).with_state(node.health.clone()))
        .fallback(health::elsewhere);
    // Around every path; the MCP path itself skips the router (see
    // `mcp_first`). CORS sits inside the Origin check, outside
    // authentication: a browser's preflight carries no token.
    let cors = tower::Layer::layer(
        &origin::cors(front.allowlist.clone()),
        mcp_first::McpFirst { endpoint, rest },
    );
    edge::Edge {
        allowlist: front.allowlist.clone(),
        inner: cors,
    }
}

/// The HTTP settings an operator has set, each read as `serve --http`
/// reads it at start, without binding a socket: `(variable, problem)` for
/// every one that would stop the start (`WARDEN_PUBLIC_URL`,
/// `WARDEN_API_TOKENS_FILE` / `WARDEN_OAUTH_*` — which loads the JWKS, as
/// the start does —, `WARDEN_INPUT_STATE_KEY`), and the variables checked.
/// For `--check`: a deployment that `serve --http` would refuse fails there
/// first, naming the variable.
pub(crate) fn check_settings() -> (Vec<&'static str>, Vec<(&'static str, String)>) {
    let mut checked = Vec::new();
    let mut problems = Vec::new();
    let unspecified = SocketAddr::from(([127, 0, 0, 1], 8080));
    let mut url = format!("http://{unspecified}{MCP_PATH}");
    if warden_core::config::var("WARDEN_PUBLIC_URL").is_some() {
        checked.push("WARDEN_PUBLIC_URL");
        match public_url(unspecified) {
            Ok(public) => url = public,
            Err(error) => problems.push(("WARDEN_PUBLIC_URL", error.to_string())),
        }
    }
    const AUTH: &str = "WARDEN_API_TOKENS_FILE / WARDEN_OAUTH_*";
    match auth::Auth::from_env(&url) {
        Ok(None) => {}
        Ok(Some(_)) => checked.push(AUTH),
        Err(error) => {
            checked.push(AUTH);
            problems.push((AUTH, error.to_string()));
        }
    }
    if warden_core::config::var(crate::rounds::KEY_VARIABLE).is_some() {
        checked.push(crate::rounds::KEY_VARIABLE);
        if let Err(error) = crate::rounds::check_key() {
            problems.push((crate::rounds::KEY_VARIABLE, error.to_string()));
        }
    }
    (checked, problems)
}

/// The MCP endpoint as clients reach it: `WARDEN_PUBLIC_URL` (behind a
/// proxy), else `http://<bound address>/mcp`.
fn public_url(local: SocketAddr) -> Result<String, HttpError> {
    match warden_core::config::var("WARDEN_PUBLIC_URL").filter(|url| !url.trim().is_empty()) {
        Some(url) => {
            let url = url.trim().trim_end_matches('/').to_string();
            let valid = url
                .parse::<axum::http::Uri>()
                .is_ok_and(|uri| matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some());
            if valid {
                Ok(url)
            } else {
                Err(HttpError::PublicUrl(url))
            }
        }
        None => Ok(format!("http://{local}{MCP_PATH}")),
    }
}

/// `Host` values accepted (DNS-rebinding protection for loopback servers):
/// the loopback names, the bound address and the public URL's host.
fn allowed_hosts(local: SocketAddr, url: &str) -> Vec<String> {
    let mut hosts = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    if !local.ip().is_unspecified() {
        hosts.push(local.ip().to_string());
    }
    if let Some(host) = url
        .parse::<axum::http::Uri>()
        .ok()
        .and_then(|uri| uri.host().map(str::to_string))
    {
        hosts.push(host.trim_start_matches('[').trim_end_matches(']').to_string());
    }
    hosts.sort_unstable();
    hosts.dedup();
    hosts
}
