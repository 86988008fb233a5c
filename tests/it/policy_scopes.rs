//! OAuth scopes as policy rule subjects (issue 29, part 1; issue 38): over
//! real HTTP with OAuth, one principal (`carol`) with two tokens — one
//! granting `quant:read`, one not — so only the scope decides. The token
//! with the scope sees and calls the pricing guards and check_backtest;
//! for the one without, the pricing guards do not exist (tools/list, a
//! direct call on the HTTP direct path, run_batch, run_script's door and
//! inline calls) and the built-in check_backtest is refused `forbidden`
//! naming the rules. A run_script queued as an MCP task runs later with
//! the scopes its request carried: its guards would be unknown if the task
//! lost them between the queue and the claim.

use std::collections::BTreeSet;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::{ClientLifecycleMode, RunningService};
use serde_json::{Value, json};

use crate::common::http::HttpServer;
use crate::common::oauth::{GOOD_KEY, ISSUER, jwks_file, jwt};
use crate::common::tasks::{client_config, poll_until_ended, start_task, wire};
use crate::common::{FINANCE, structured};

const POLICY: &str = r#"
default = "allow"

[[rules]]
name = "quants price"
scopes = ["quant:read"]
allow = ["category:pricing", "check_backtest"]

[[rules]]
name = "pricing needs quant:read"
principals = ["*"]
deny = ["category:pricing", "check_backtest"]
"#;

/// The finance server with OAuth (the test issuer) and [`POLICY`].
struct Scoped {
    server: HttpServer,
    _config: tempfile::TempDir,
}

impl Scoped {
    async fn start() -> Self {
        let config = tempfile::tempdir().expect("temp dir");
        let policy = config.path().join("policy.toml");
        std::fs::write(&policy, POLICY).expect("policy file");
        let policy = policy.display().to_string();
        let jwks = jwks_file(config.path());
        let server = HttpServer::start(
            FINANCE,
            &[
                ("WARDEN_OAUTH_ISSUER", ISSUER),
                ("WARDEN_OAUTH_JWKS", &jwks),
                ("WARDEN_POLICY_FILE", &policy),
            ],
        )
        .await;
        Self {
            server,
            _config: config,
        }
    }

    /// Carol's token granting `scope`.
    fn token(&self, scope: &str) -> String {
        jwt(
            &self.server.url,
            json!({"sub": "carol", "scope": scope}),
            GOOD_KEY,
        )
    }

    /// A session client declaring the tasks extension, with `token`.
    async fn session(&self, token: &str) -> RunningService<RoleClient, ClientConfig> {
        self.server
            .client_with(client_config(true), Some(token), ClientLifecycleMode::Initialize)
            .await
            .expect("initialize over HTTP")
    }
}

async fn tool_names<H: rmcp::ClientHandler>(client: &RunningService<RoleClient, H>) -> BTreeSet<String> {
    client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

async fn call<H: rmcp::ClientHandler>(
    client: &RunningService<RoleClient, H>,
    tool: &str,
    arguments: Value,
) -> Value {
    let Value::Object(arguments) = arguments else {
        panic!("object arguments")
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments))
        .await
        .expect("tools/call answered");
    structured(&result)
}

fn option_args() -> Value {
    json!({"option_type": "call", "spot": 100.0, "strike": 100.0, "time_to_expiry": 0.5,
           "volatility": 0.2, "rate": 0.03})
}

/// A script calling the isolated pricing guard (a door call) and the pure
/// one (inline in the worker): each a value, or the error's message.
const SCRIPT: &str = r#"
let a = #{option_type: "call", spot: 100.0, strike: 100.0, time_to_expiry: 0.5, volatility: 0.2, rate: 0.03};
let door = "";
try { door = price_option_t(a).result > 0.0; } catch (e) { door = e.message; }
let inline = "";
try { inline = implied_volatility(#{option_type: "call", price: 4.0, spot: 100.0, strike: 105, time_to_expiry: 0.5, rate: 0.03}).volatility > 0.0; } catch (e) { inline = e.message; }
[door, inline]
"#;

/// What the script gets without the scope: neither guard exists for it.
fn unknown_to_the_script(value: &Value) {
    assert_eq!(
        value,
        &json!([
            "Function not found: price_option_t (map)",
            "Function not found: implied_volatility (map)"
        ])
    );
}

/// The two rules every refusal here names: the one that denied, and the
/// one that would have allowed a token with the scope.
fn names_the_rules(message: &str) {
    assert!(
        message.contains("rule 2 (\"pricing needs quant:read\") of the policy denies it")
            && message.contains(
                "rule 1 (\"quants price\") would allow it to a token holding the scope(s) quant:read"
            ),
        "{message}"
    );
}

#[tokio::test]
async fn a_scope_rule_admits_the_token_with_the_scope_and_refuses_the_same_principal_without_it() {
    let scoped = Scoped::start().await;
    let (quant, plain) = (scoped.token("quant:read openid"), scoped.token("openid"));

    // Stateless requests (the HTTP direct path): tools/list and a direct call.
    let with = scoped.server.stateless_client(Some(&quant)).await;
    let without = scoped.server.stateless_client(Some(&plain)).await;
    let shown = tool_names(&with).await;
    assert!(
        shown.contains("price_option_t") && shown.contains("implied_volatility"),
        "{shown:?}"
    );
    let hidden = tool_names(&without).await;
    for name in ["price_option_t", "calc_greeks_t", "implied_volatility"] {
        assert!(
            !hidden.contains(name),
            "{name} shown without the scope: {hidden:?}"
        );
    }
    assert!(
        hidden.contains("get_quote") && hidden.contains("run_script"),
        "{hidden:?}"
    );
    let priced = call(&with, "price_option_t", option_args()).await;
    assert!(priced["result"].as_f64().is_some_and(|p| p > 0.0), "{priced}");
    let Value::Object(arguments) = option_args() else {
        unreachable!()
    };
    let unknown = without
        .call_tool(CallToolRequestParams::new("price_option_t").with_arguments(arguments))
        .await
        .expect_err("an unknown tool without the scope");
    let rmcp::ServiceError::McpError(unknown) = unknown else {
        panic!("a protocol error: {unknown:?}")
    };
    assert!(
        unknown.message.starts_with("unknown tool 'price_option_t'"),
        "{}",
        unknown.message
    );
    // A built-in's refusal names the rules.
    let refused = call(&without, "check_backtest", json!({"slots": {"spot": 100.0}})).await;
    assert_eq!(refused["error"]["code"], "forbidden", "{refused}");
    names_the_rules(refused["error"]["message"].as_str().unwrap_or_default());

    // A session: run_batch and run_script.
    let without = scoped.session(&plain).await;
    let batch = call(
        &without,
        "run_batch",
        json!({"calls": [{"name": "get_quote", "arguments": {"symbol": "AAPL"}},
                         {"name": "price_option_t", "arguments": option_args()}]}),
    )
    .await;
    assert_eq!(batch["error"]["field"], "calls[1].name", "{batch}");
    let message = batch["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("no guard named 'price_option_t'"), "{batch}");
    let script = call(
        &without,
        "run_script",
        json!({"script": SCRIPT, "timeout_seconds": 30}),
    )
    .await;
    assert_eq!(script["status"], "success", "{script}");
    unknown_to_the_script(&script["value"]);

    let with = scoped.session(&quant).await;
    let script = call(
        &with,
        "run_script",
        json!({"script": SCRIPT, "timeout_seconds": 30}),
    )
    .await;
    assert_eq!(script["value"], json!([true, true]), "{script}");
}

#[tokio::test]
async fn a_queued_task_runs_with_the_scopes_its_request_carried() {
    // The task is queued, then claimed and run apart from its request: the
    // scopes travel in the stored request, so the scoped token's task may
    // price and the unscoped one's may not.
    let scoped = Scoped::start().await;
    for (token, expected) in [
        (scoped.token("quant:read"), Some(json!([true, true]))),
        (scoped.token("openid"), None),
    ] {
        let client = scoped.session(&token).await;
        let created = start_task(
            client.peer(),
            "run_script",
            json!({"script": SCRIPT, "timeout_seconds": 30}),
            None,
        )
        .await;
        let answers = poll_until_ended(client.peer(), &created.task.task_id, Duration::from_secs(60)).await;
        let last = wire(answers.last().expect("an answer"));
        let result = &last["result"]["structuredContent"];
        assert_eq!(result["status"], "success", "{last}");
        match expected {
            Some(value) => assert_eq!(result["value"], value, "{last}"),
            None => unknown_to_the_script(&result["value"]),
        }
    }
}
