//! Who may call what (issue 29, part 1; issue 38): `WARDEN_POLICY_FILE`
//! denies a guard on every path — tools/list, a direct call (over stdio,
//! and over HTTP's direct path), run_batch, a script's door call (isolated
//! guard) and its inline call (pure guard) — where, for the denied caller,
//! it is a guard that does not exist (the operator's log keeps the rule);
//! other principals are unaffected; a policy naming what does not exist
//! stops the server at start with the rule and field.

use std::collections::BTreeSet;

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};

use crate::common::http::{HttpServer, PRINCIPALS, tokens_file};
use crate::common::*;

const POLICY: &str = r#"
# Everything, except:
default = "allow"

[[rules]]
name = "no pricing for bob"
principals = ["bob"]
deny = ["category:pricing", "run_coding_task"]

[[rules]]
name = "local prices no options"
principals = ["local"]
deny = ["price_option_t", "implied_volatility"]
"#;

/// A policy file in a temporary directory, and the env naming it.
fn policy_file(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, text).expect("policy file");
    let path = path.to_string_lossy().to_string();
    (dir, path)
}

async fn tool_names(client: &RunningService<RoleClient, ()>) -> BTreeSet<String> {
    client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

fn option_args() -> Value {
    json!({"option_type": "call", "spot": 100.0, "strike": 100.0, "time_to_expiry": 0.5,
           "volatility": 0.2, "rate": 0.03})
}

#[tokio::test]
async fn a_denied_guard_is_hidden_and_unknown_on_every_path() {
    let (_dir, path) = policy_file(POLICY);
    let server = Server::start_with_env(FINANCE, &[("WARDEN_POLICY_FILE", &path)]).await;
    let names = tool_names(&server.client).await;
    assert!(
        !names.contains("price_option_t") && !names.contains("implied_volatility"),
        "{names:?}"
    );
    assert!(
        names.contains("calc_greeks_t") && names.contains("run_script"),
        "{names:?}"
    );

    // A direct call: the unknown-tool protocol error; nothing ran.
    let direct = server
        .try_call("price_option_t", option_args())
        .await
        .expect_err("an unknown tool for this caller");
    let rmcp::ServiceError::McpError(direct) = direct else {
        panic!("a protocol error: {direct:?}")
    };
    assert!(
        direct.message.starts_with("unknown tool 'price_option_t'")
            && !direct.message.contains("implied_volatility"),
        "{}",
        direct.message
    );

    // A batch: refused before anything runs, naming the call as unknown.
    let batch = structured(
        &server
            .call(
                "run_batch",
                json!({"calls": [{"name": "calc_greeks_t", "arguments": option_args()},
                                 {"name": "price_option_t", "arguments": option_args()}]}),
            )
            .await,
    );
    assert_eq!(batch["error"]["field"], "calls[1].name", "{batch}");
    let message = batch["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("no guard named 'price_option_t'"), "{batch}");

    // A script: the isolated guard (a door call) and the pure guard (inline
    // in the worker) are functions that do not exist; an allowed guard still runs.
    let script = r#"
let a = #{option_type: "call", spot: 100.0, strike: 100.0, time_to_expiry: 0.5, volatility: 0.2, rate: 0.03};
let door = "ran";
try { price_option_t(a); } catch (e) { door = `${e}`; }
let inline = "ran";
try { implied_volatility(#{option_type: "call", price: 4.0, spot: 100.0, strike: 105, time_to_expiry: 0.5, rate: 0.03}); } catch (e) { inline = `${e}`; }
let greeks = calc_greeks_t(a);
[door, inline, greeks.delta > 0.0]
"#;
    let result = structured(
        &server
            .call("run_script", json!({"script": script, "timeout_seconds": 30}))
            .await,
    );
    assert_eq!(result["status"], "success", "{result}");
    let door = result["value"][0].as_str().unwrap_or_default();
    assert!(door.contains("Function not found: price_option_t"), "{result}");
    let inline = result["value"][1].as_str().unwrap_or_default();
    assert!(
        inline.contains("Function not found: implied_volatility"),
        "{result}"
    );
    assert_eq!(result["value"][2], true, "{result}");
    // The operator's log keeps the refusal.
    let events = server
        .events_until(|records| records.iter().any(|r| r["event"] == "request_rejected"))
        .await;
    assert!(
        events.iter().any(|r| r["event"] == "request_rejected"
            && r["reason"] == "forbidden"
            && r["tool"] == "price_option_t"),
        "the refusal is in the events"
    );
}

#[tokio::test]
async fn over_http_the_policy_binds_one_principal_and_not_another() {
    let (_dir, path) = policy_file(POLICY);
    let tokens = tempfile::tempdir().expect("temp dir");
    let file = tokens_file(tokens.path());
    let server = HttpServer::start(
        FINANCE,
        &[("WARDEN_API_TOKENS_FILE", &file), ("WARDEN_POLICY_FILE", &path)],
    )
    .await;
    let token = |who: &str| {
        PRINCIPALS
            .iter()
            .find(|(name, _, _)| *name == who)
            .map(|(_, token, _)| *token)
            .expect("a principal")
    };
    // Bob on stateless requests (the HTTP transport's direct path), alice on a session.
    let bob = server.stateless_client(Some(token("bob"))).await;
    let alice = server.session_client(Some(token("alice"))).await;
    let bobs = tool_names(&bob).await;
    for hidden in [
        "price_option_t",
        "calc_greeks_t",
        "implied_volatility",
        "run_coding_task",
    ] {
        assert!(!bobs.contains(hidden), "{hidden} shown to bob: {bobs:?}");
    }
    assert!(
        bobs.contains("get_quote") && bobs.contains("run_script"),
        "{bobs:?}"
    );
    assert!(tool_names(&alice).await.contains("price_option_t"));

    let Value::Object(arguments) = option_args() else {
        unreachable!()
    };
    // Over the direct path too, a denied guard is an unknown tool.
    let refused = bob
        .call_tool(CallToolRequestParams::new("price_option_t").with_arguments(arguments.clone()))
        .await
        .expect_err("an unknown tool for bob");
    let rmcp::ServiceError::McpError(refused) = refused else {
        panic!("a protocol error: {refused:?}")
    };
    assert!(
        refused.message.starts_with("unknown tool 'price_option_t'")
            && !refused.message.contains("calc_greeks_t"),
        "{}",
        refused.message
    );
    let priced = alice
        .call_tool(CallToolRequestParams::new("price_option_t").with_arguments(arguments))
        .await
        .expect("answered");
    assert_eq!(priced.is_error, Some(false), "{priced:?}");
}

#[tokio::test]
async fn a_policy_naming_what_does_not_exist_stops_the_server_at_start() {
    for (policy, expected) in [
        (
            "[[rules]]\nprincipals = [\"alice\"]\nallow = [\"price_optoin_t\"]\n",
            "rules[0].allow",
        ),
        (
            "[[rules]]\nprincipals = [\"*\"]\ndeny = [\"category:nope\"]\n",
            "no guard has the category 'nope'",
        ),
        ("default = \"maybe\"\n", "default"),
        (
            "[[rules]]\nprincipals = []\ndeny = [\"*\"]\n",
            "rules[0].principals",
        ),
        // Scopes as subjects: a rule must name whom it is for, and a scope
        // must be one (no empty list, no spaces, no wildcard).
        ("[[rules]]\ndeny = [\"*\"]\n", "rules[0].scopes"),
        ("[[rules]]\nscopes = []\ndeny = [\"*\"]\n", "rules[0].scopes"),
        (
            "[[rules]]\nscopes = [\"quant read\"]\nallow = [\"*\"]\n",
            "rules[0].scopes",
        ),
        (
            "[[rules]]\nscopes = [\"*\"]\nallow = [\"*\"]\n",
            "rules[0].scopes",
        ),
    ] {
        let (_dir, path) = policy_file(policy);
        let output = std::process::Command::new(FINANCE)
            .args(["call", "get_quote", "{\"symbol\": \"AAPL\"}"])
            .env("WARDEN_POLICY_FILE", &path)
            .env("WARDEN_ARTIFACTS_DIR", _dir.path())
            .output()
            .expect("run the CLI");
        assert!(!output.status.success(), "{policy}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(expected) && stderr.contains("WARDEN_POLICY_FILE"),
            "{policy}: {stderr}"
        );
    }
}

#[tokio::test]
async fn a_coding_task_is_never_offered_a_denied_guard_and_cannot_call_it() {
    use crate::fake_model::{FakeModel, Reply};
    // The model tries the denied guard anyway; for the task's script it does not exist.
    let model = FakeModel::start(vec![Reply::Content(
        "```rhai\nlet e = \"\";\ntry { price_option_t(#{option_type: \"call\", spot: 100.0, strike: 100.0, time_to_expiry: 0.5, volatility: 0.2, rate: 0.03}); } catch (err) { e = err.message; }\nlet g = calc_greeks_t(#{option_type: \"call\", spot: 100.0, strike: 100.0, time_to_expiry: 0.5, volatility: 0.2, rate: 0.03});\nfinal_answer(#{task_type: \"analysis\", summary: `refused: ${e}`, metrics: #{delta: g.delta}})\n```"
            .to_string(),
    )])
    .await;
    let (_dir, path) = policy_file(POLICY);
    let env = model.env();
    let mut pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    pairs.push(("WARDEN_POLICY_FILE", &path));
    let server = Server::start_with_env(FINANCE, &pairs).await;
    let result = structured(
        &server
            .call(
                "run_coding_task",
                json!({"prompt": "greeks at the money", "timeout_seconds": 60}),
            )
            .await,
    );
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(
        result["summary"], "refused: Function not found: price_option_t (map)",
        "{result}"
    );
    let system = model.requests()[0]["messages"][0]["content"]
        .as_str()
        .expect("system prompt")
        .to_string();
    assert!(system.contains("calc_greeks_t"), "allowed guards are offered");
    assert!(
        !system.contains("price_option_t") && !system.contains("implied_volatility"),
        "denied guards are not offered: {system}"
    );
}
