//! `deploy/nginx.conf` as shipped, in front of three `serve --http` nodes
//! (issue 39): 2025-11-25 sessions reach the node that holds them (each
//! node names itself in its session ids, the balancer maps the name to the
//! node) and stateless clients go to any node. Runs nginx from
//! `WARDEN_TEST_NGINX` (`scripts/with-nginx`, which `scripts/test` runs),
//! else `nginx` on PATH or /usr/sbin/nginx, on loopback ports; needs no
//! PostgreSQL or S3, so it also runs alone:
//! `scripts/with-nginx cargo test -p warden-it --test cluster balancer`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::common::http::{HttpServer, PRINCIPALS, post};
use crate::common::{FINANCE, structured};

/// The shipped configuration, read as the balancer container reads it.
const NGINX_CONF: &str = include_str!("../../deploy/nginx.conf");

/// The node names the configuration and `compose.yaml` use.
const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];

/// The nginx binary: `WARDEN_TEST_NGINX`, else on PATH, else Debian's path.
fn nginx_binary() -> String {
    if let Ok(bin) = std::env::var("WARDEN_TEST_NGINX") {
        return bin;
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("nginx"))
            .find(|candidate| candidate.is_file())
    });
    match on_path {
        Some(bin) => bin.to_string_lossy().into_owned(),
        None if std::path::Path::new("/usr/sbin/nginx").is_file() => "/usr/sbin/nginx".into(),
        None => panic!(
            "nginx not found: run the tests with scripts/test, or this one with \
             `scripts/with-nginx cargo test -p warden-it --test cluster balancer` (it installs nginx as root)"
        ),
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free loopback port")
}

/// `deploy/nginx.conf` with each `node-X:8080` replaced by that node's
/// loopback address and `listen 8080` by `listen 127.0.0.1:PORT`; fails if
/// the file no longer has those lines (then this test no longer tests it).
fn substituted(nodes: &[(String, u16)], port: u16) -> String {
    let mut conf = NGINX_CONF.to_string();
    assert!(conf.contains("listen 8080;"), "deploy/nginx.conf listens on 8080");
    conf = conf.replace("listen 8080;", &format!("listen 127.0.0.1:{port};"));
    for (name, node_port) in nodes {
        let server = format!("server {name}:8080");
        assert_eq!(
            conf.matches(&server).count(),
            2,
            "deploy/nginx.conf names {name} in the pool and in its own upstream"
        );
        conf = conf.replace(&server, &format!("server 127.0.0.1:{node_port}"));
    }
    assert!(!conf.contains(":8080"), "every node substituted:\n{conf}");
    conf
}

/// nginx running `conf` in the foreground from `dir`; killed when dropped.
struct Nginx {
    child: tokio::process::Child,
    dir: tempfile::TempDir,
}

impl Nginx {
    async fn start(conf: &str, port: u16) -> Nginx {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path();
        std::fs::write(path.join("default.conf"), conf).expect("write default.conf");
        // One process, in the foreground, everything under `dir`: it needs
        // no root, no /var/log, and never outlives the test.
        let main = format!(
            "daemon off;\nmaster_process off;\npid {p}/nginx.pid;\nerror_log {p}/error.log warn;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {p}/body;\n  proxy_temp_path {p}/proxy;\n  \
             fastcgi_temp_path {p}/fastcgi;\n  uwsgi_temp_path {p}/uwsgi;\n  scgi_temp_path {p}/scgi;\n  \
             include {p}/default.conf;\n}}\n",
            p = path.display()
        );
        std::fs::write(path.join("nginx.conf"), main).expect("write nginx.conf");
        let mut child = tokio::process::Command::new(nginx_binary())
            .arg("-p")
            .arg(path)
            .arg("-c")
            .arg(path.join("nginx.conf"))
            .arg("-e")
            .arg(path.join("error.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn nginx");
        let start = Instant::now();
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                break;
            }
            let log = || std::fs::read_to_string(path.join("error.log")).unwrap_or_default();
            if let Ok(Some(status)) = child.try_wait() {
                panic!("nginx exited ({status}) at start:\n{}", log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "nginx did not listen on {port} within 10 s:\n{}",
                log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Nginx { child, dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// An rmcp client through the balancer at `url`.
async fn client(url: &str, token: &str, lifecycle: ClientLifecycleMode) -> RunningService<RoleClient, ()> {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let transport = StreamableHttpClientTransport::from_config(config);
    tokio::time::timeout(
        Duration::from_secs(20),
        ().serve_with_lifecycle(transport, lifecycle),
    )
    .await
    .expect("lifecycle in time")
    .expect("the lifecycle through the balancer")
}

/// tools/list and a tools/call of `get_quote` on `client`; the quoted price.
async fn list_and_call(client: &RunningService<RoleClient, ()>) -> Value {
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|tool| tool.name == "get_quote"));
    let arguments = json!({"symbol": "AAPL"}).as_object().cloned().unwrap_or_default();
    let result = client
        .call_tool(CallToolRequestParams::new("get_quote").with_arguments(arguments))
        .await
        .expect("tools/call");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    structured(&result)["price"].clone()
}

/// The node a session id names (before its last `.`).
fn node_of(session: &str) -> &str {
    session.rsplit_once('.').map_or("", |(node, _)| node)
}

#[tokio::test]
async fn sessions_and_stateless_clients_through_the_shipped_nginx_conf_all_succeed() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let tokens = tempfile::tempdir().expect("temp dir");
    let tokens_file = crate::common::http::tokens_file(tokens.path());
    let key = "ab".repeat(32);
    let mut nodes = Vec::new();
    for name in NODES {
        nodes.push(
            HttpServer::start(
                FINANCE,
                &[
                    ("WARDEN_NODE_ID", name),
                    ("WARDEN_API_TOKENS_FILE", &tokens_file),
                    ("WARDEN_INPUT_STATE_KEY", &key),
                    ("WARDEN_CALLS_PER_MINUTE", "1000000"),
                ],
            )
            .await,
        );
    }
    let ports: Vec<(String, u16)> = NODES
        .iter()
        .zip(&nodes)
        .map(|(name, node)| {
            let port = node
                .base
                .rsplit_once(':')
                .and_then(|(_, port)| port.parse().ok())
                .expect("the node's port");
            (name.to_string(), port)
        })
        .collect();
    let port = free_port();
    let nginx = Nginx::start(&substituted(&ports, port), port).await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let token = PRINCIPALS[0].1;
    let bearer = format!("Bearer {token}");

    // initialize goes round-robin: the session ids name every node.
    let mut opened = Vec::new();
    for _ in 0..6 {
        let answer = post(
            &url,
            &crate::common::http::initialize(),
            &[("authorization", &bearer)],
        )
        .send()
        .await
        .expect("initialize through the balancer");
        assert_eq!(answer.status(), 200, "{}", nginx.log());
        let id = answer.headers()["mcp-session-id"]
            .to_str()
            .expect("ascii")
            .to_string();
        opened.push(id);
    }
    let mut named: Vec<&str> = opened.iter().map(|id| node_of(id)).collect();
    named.sort_unstable();
    named.dedup();
    assert_eq!(named, NODES, "session ids {opened:?}");

    // 12 sessions, side by side: initialize, tools/list and tools/call each
    // (every request after initialize names the session, which lives on one
    // node; without the pinning two in three of them got 404).
    let mut sessions = tokio::task::JoinSet::new();
    for _ in 0..12 {
        let url = url.clone();
        sessions.spawn(async move {
            let client = client(&url, token, ClientLifecycleMode::Initialize).await;
            let price = list_and_call(&client).await;
            let again = list_and_call(&client).await;
            let _ = client.cancel().await;
            (price, again)
        });
    }
    // 12 stateless (2026-07-28) clients: discover, tools/list, tools/call.
    let mut stateless = tokio::task::JoinSet::new();
    for _ in 0..12 {
        let url = url.clone();
        stateless.spawn(async move {
            let lifecycle = ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            };
            let client = client(&url, token, lifecycle).await;
            let price = list_and_call(&client).await;
            let _ = client.cancel().await;
            price
        });
    }
    let mut served = 0;
    while let Some(done) = sessions.join_next().await {
        let (price, again) = done.expect("a session client panicked");
        assert!(price.is_number() && price == again, "{price} {again}");
        served += 1;
    }
    assert_eq!(served, 12);
    served = 0;
    while let Some(done) = stateless.join_next().await {
        assert!(done.expect("a stateless client panicked").is_number());
        served += 1;
    }
    assert_eq!(served, 12);

    // A session whose node is gone gets 404 from the balancer (the client
    // starts over), and new sessions go to the nodes that are left.
    let on_b = opened
        .iter()
        .find(|id| node_of(id) == "node-b")
        .expect("a session on node-b")
        .clone();
    let (code, _) = nodes[1].stop().await;
    assert_eq!(code, Some(0));
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let answer = post(
        &url,
        &ping,
        &[
            ("authorization", &bearer),
            ("mcp-session-id", &on_b),
            ("mcp-protocol-version", "2025-11-25"),
        ],
    )
    .send()
    .await
    .expect("ping through the balancer");
    assert_eq!(answer.status(), 404, "{}", nginx.log());
    for _ in 0..3 {
        let client = client(&url, token, ClientLifecycleMode::Initialize).await;
        assert!(list_and_call(&client).await.is_number());
        let _ = client.cancel().await;
    }
}
