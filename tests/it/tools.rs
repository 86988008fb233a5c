//! tools/list and direct calls: schemas, published prices, bad input.

use serde_json::{Value, json};

use crate::common::*;

#[tokio::test]
async fn tools_list_has_schemas_enums_and_hints() {
    // Every guard is listed in name order with derived schemas and annotations.
    let server = Server::start(FINANCE).await;
    let tools = server.client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "deterministic name order");
    for wanted in [
        "price_option_t",
        "calc_greeks_t",
        "get_quote",
        "get_quote_isolated",
    ] {
        assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
    }
    let price = tools.iter().find(|t| t.name == "price_option_t").unwrap();
    let schema = Value::Object(price.input_schema.as_ref().clone());
    assert_eq!(schema["type"], "object");
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    for field in [
        "option_type",
        "spot",
        "strike",
        "time_to_expiry",
        "volatility",
        "rate",
    ] {
        assert!(
            required.contains(&field),
            "{field} should be required: {required:?}"
        );
    }
    assert!(
        !required.contains(&"dividend_yield"),
        "dividend_yield has a default"
    );
    let text = schema.to_string();
    assert!(
        text.contains("\"call\"") && text.contains("\"put\""),
        "option_type enum: {text}"
    );
    assert!(
        price.description.as_deref().unwrap_or("").contains("Black"),
        "description from doc comment"
    );
    let annotations = price.annotations.as_ref().unwrap();
    assert_eq!(annotations.read_only_hint, Some(true));
    assert_eq!(annotations.destructive_hint, Some(false));
    let output = Value::Object(price.output_schema.as_ref().unwrap().as_ref().clone());
    assert_eq!(
        output["properties"]["result"]["type"], "number",
        "scalar output wrapped: {output}"
    );
}

#[tokio::test]
async fn published_prices_come_back_as_structured_content() {
    // Hull's textbook values through MCP: 10.4506 / 5.5735 and 4.7594 / 0.8086.
    let server = Server::start(FINANCE).await;
    let cases = [
        (
            json!({"option_type": "call", "spot": 100, "strike": 100, "time_to_expiry": 1, "volatility": 0.2, "rate": 0.05}),
            10.4506,
        ),
        (
            json!({"option_type": "put", "spot": 100, "strike": 100, "time_to_expiry": 1, "volatility": 0.2, "rate": 0.05}),
            5.5735,
        ),
        (
            json!({"option_type": "call", "spot": 42, "strike": 40, "time_to_expiry": 0.5, "volatility": 0.2, "rate": 0.1}),
            4.7594,
        ),
        (
            json!({"option_type": "put", "spot": 42, "strike": 40, "time_to_expiry": 0.5, "volatility": 0.2, "rate": 0.1}),
            0.8086,
        ),
    ];
    for (arguments, expected) in cases {
        let result = server.call("price_option_t", arguments.clone()).await;
        assert!(!is_error(&result), "{result:?}");
        let price = structured(&result)["result"].as_f64().unwrap();
        assert!(
            (price - expected).abs() < 5e-5,
            "{arguments} → {price}, expected {expected}"
        );
        let text = result.content[0].as_text().unwrap().text.clone();
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            structured(&result),
            "text mirrors structuredContent"
        );
    }
    let greeks = server.call("calc_greeks_t", call_args()).await;
    let delta = structured(&greeks)["delta"].as_f64().unwrap();
    assert!((delta - 0.6368).abs() < 1e-3, "delta {delta}");
}

#[tokio::test]
async fn quotes_in_process_and_isolated_agree() {
    // The managed resource and the fresh read in a worker give the same quote.
    let server = Server::start(FINANCE).await;
    let a = server.call("get_quote", json!({"symbol": "msft"})).await;
    let b = server.call("get_quote_isolated", json!({"symbol": "MSFT"})).await;
    assert!(!is_error(&a) && !is_error(&b));
    assert_eq!(structured(&a), structured(&b));
    let unknown = server.call("get_quote", json!({"symbol": "NOPE"})).await;
    assert!(is_error(&unknown));
    let message = structured(&unknown)["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("known symbols") && message.contains("AAPL"),
        "{message}"
    );
}

#[tokio::test]
async fn every_bad_input_class_is_answered_and_the_server_keeps_serving() {
    // Missing field, wrong type, out of range, unknown enum value, unknown tool.
    let server = Server::start(FINANCE).await;
    let mut missing = call_args();
    missing.as_object_mut().unwrap().remove("strike");
    let cases = [
        (missing, "invalid_arguments", "strike"),
        (
            json!({"option_type": "call", "spot": "abc", "strike": 100, "time_to_expiry": 1, "volatility": 0.2, "rate": 0.05}),
            "invalid_arguments",
            "spot",
        ),
        (
            json!({"option_type": "call", "spot": 100, "strike": 100, "time_to_expiry": 1, "volatility": -0.2, "rate": 0.05}),
            "invalid_input",
            "volatility",
        ),
        (
            json!({"option_type": "straddle", "spot": 100, "strike": 100, "time_to_expiry": 1, "volatility": 0.2, "rate": 0.05}),
            "invalid_arguments",
            "option_type",
        ),
    ];
    for (arguments, code, field) in cases {
        let result = server.call("price_option_t", arguments).await;
        assert!(is_error(&result));
        assert_eq!(error_code(&result), code);
        let error = &structured(&result)["error"];
        assert_eq!(error["field"], field, "{error}");
        assert!(error["message"].as_str().unwrap().contains(field), "{error}");
    }
    let unknown = server.try_call("no_such_tool", json!({})).await;
    let message = format!("{:?}", unknown.expect_err("unknown tool is a protocol error"));
    assert!(
        message.contains("-32602") || message.contains("unknown tool"),
        "{message}"
    );
    // Still serving.
    let result = server.call("price_option_t", call_args()).await;
    assert!(!is_error(&result));
}

/// The finance server on pipes, spoken to in raw JSON-RPC lines (what
/// rmcp's client would not send, and the bytes it would hide): initialized
/// as a `version` client; killed when dropped.
async fn raw_server(artifacts: &std::path::Path, version: &str) -> RawServer {
    use tokio::io::AsyncWriteExt;
    let (child, mut stdin, mut lines) = spawn_raw(artifacts);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    let reply = exchange(&mut stdin, &mut lines, &init).await;
    assert_eq!(reply["id"], 0, "{reply}");
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .expect("write initialized");
    (child, stdin, lines)
}

/// A [`raw_server`]'s process and pipes.
type RawServer = (
    tokio::process::Child,
    tokio::process::ChildStdin,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
);

/// The example server on `artifacts`, spoken to as a [`raw_server`] but
/// not yet initialized; killed when dropped.
fn spawn_raw(artifacts: &std::path::Path) -> RawServer {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let mut child = tokio::process::Command::new(FINANCE)
        .env("WARDEN_ARTIFACTS_DIR", artifacts)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the server");
    let stdin = child.stdin.take().expect("piped stdin");
    let lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    (child, stdin, lines)
}

#[tokio::test]
async fn a_malformed_json_rpc_line_gets_a_parse_error_and_serving_continues() {
    // A raw garbage line on stdin must not kill the server.
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut stdin, mut lines) = raw_server(dir.path(), "2025-06-18").await;
    stdin.write_all(b"this is not json\n").await.unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    stdin.write_all(format!("{list}\n").as_bytes()).await.unwrap();
    let mut saw_list = false;
    for _ in 0..3 {
        let Ok(Some(line)) = lines.next_line().await else {
            break;
        };
        let value: Value = serde_json::from_str(&line).unwrap();
        if value["id"] == 2 {
            assert!(value["result"]["tools"].as_array().unwrap().len() >= 4);
            saw_list = true;
            break;
        }
    }
    assert!(saw_list, "server answered tools/list after a garbage line");
    drop(stdin);
    let status = tokio::time::timeout(std::time::Duration::from_secs(5), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "clean exit on EOF: {status}");
}

#[tokio::test]
async fn every_tool_schema_passes_every_target_checker() {
    // tools/list and each `tools --format` export (guards and built-ins) satisfy their target's documented schema subset.
    use warden::testing::schema_targets::{SchemaTarget, check_schema};
    let server = Server::start(FINANCE).await;
    let tools = server.client.list_all_tools().await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "run_script"),
        "built-ins are listed too"
    );
    let mut problems = Vec::new();
    for tool in &tools {
        let input = Value::Object(tool.input_schema.as_ref().clone());
        let output = tool
            .output_schema
            .as_ref()
            .map(|o| Value::Object(o.as_ref().clone()));
        for (which, schema) in [("input", Some(input)), ("output", output)] {
            for violation in schema
                .map(|s| check_schema(SchemaTarget::Mcp, &s))
                .unwrap_or_default()
            {
                problems.push(format!("mcp {} {which} {violation}", tool.name));
            }
        }
    }
    let cwd = workspace_root();
    for (format, target, pointer) in [
        ("mcp", SchemaTarget::Mcp, "/inputSchema"),
        ("anthropic", SchemaTarget::Anthropic, "/input_schema"),
        ("openai", SchemaTarget::OpenaiStrict, "/parameters"),
        ("openai-chat", SchemaTarget::OpenaiChat, "/function/parameters"),
        ("gemini", SchemaTarget::Gemini, "/parameters"),
    ] {
        let run = run_cli(FINANCE, &["tools", "--format", format], &[], &cwd);
        assert_eq!(run.code, 0, "{format}: {}", run.stderr);
        let exported: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(exported.len(), tools.len(), "{format} exports every listed tool");
        let mut fallbacks = Vec::new();
        for entry in &exported {
            let name = entry
                .pointer("/function/name")
                .or(entry.get("name"))
                .cloned()
                .unwrap_or_default();
            // Tools with {column: value} records or free-form arguments cannot be strict or
            // Gemini-typed: their entries carry JSON Schema, checked as such.
            let (target, schema) = if entry["strict"] == false {
                (SchemaTarget::OpenaiChat, &entry["parameters"])
            } else if let Some(schema) = entry.get("parametersJsonSchema") {
                (SchemaTarget::OpenaiChat, schema)
            } else {
                (target, entry.pointer(pointer).unwrap_or(&Value::Null))
            };
            if target == SchemaTarget::OpenaiChat && format != "openai-chat" {
                fallbacks.push(name.as_str().unwrap_or_default().to_string());
            }
            for violation in check_schema(target, schema) {
                problems.push(format!("{format} {name} {violation}"));
            }
        }
        if format == "openai" || format == "gemini" {
            assert_eq!(
                fallbacks,
                [
                    "check_backtest",
                    "check_brinson",
                    "check_pit_universe",
                    "check_spa",
                    "check_survivorship",
                    "run_batch",
                    "verify_receipt"
                ],
                "{format}: only tools taking records or free-form arguments fall back"
            );
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn built_in_tools_describe_themselves_without_the_example_apps_names() {
    // A model connected to any app sees built-in tool descriptions that name no guard or slot of one app.
    let dir = tempfile::tempdir().expect("temp dir");
    let run = run_cli(FINANCE, &["tools", "--format", "mcp"], &[], dir.path());
    assert_eq!(run.code, 0, "{run:?}");
    let tools: Vec<Value> = serde_json::from_str(&run.stdout).expect("tools JSON");
    let (builtins, guards): (Vec<&Value>, Vec<&Value>) = tools.iter().partition(|t| {
        t["_meta"]["warden/builtin"] == true
            || [
                "run_script",
                "run_coding_task",
                "run_batch",
                "list_guards",
                "describe_guard",
                "bundle_coverage",
                "check_backtest",
                "verify_receipt",
                "replay_task",
                "read_artifact",
                "get_task_result",
                "list_tasks",
                "list_artifacts",
            ]
            .contains(&t["name"].as_str().unwrap_or_default())
    });
    assert!(builtins.len() >= 10, "{}", builtins.len());
    let mut app_words: Vec<String> = guards
        .iter()
        .filter_map(|g| g["name"].as_str().map(String::from))
        .collect();
    app_words.extend(["sharpe", "turnover", "cost_bps", "spot", "strike"].map(String::from));
    for tool in builtins {
        let text = tool.to_string();
        for word in &app_words {
            assert!(
                !text.contains(word.as_str()),
                "{} mentions {word}: {text}",
                tool["name"]
            );
        }
    }
    assert!(
        !dir.path().join("artifacts").exists(),
        "listing tools creates no artifacts directory"
    );
}

#[test]
fn list_tools_shows_each_guards_first_sentence_whole() {
    // --list-tools gives the first sentence of each description, never a line cut mid-sentence.
    let dir = tempfile::tempdir().expect("temp dir");
    let run = run_cli(FINANCE, &["--list-tools"], &[], dir.path());
    assert_eq!(run.code, 0, "{run:?}");
    for line in run.stdout.lines() {
        let summary = line.split("s  ").nth(1).unwrap_or_default().trim();
        assert!(
            summary.is_empty() || summary.ends_with(['.', '!', '?', ')']) || !summary.contains(' '),
            "cut mid-sentence: {line}"
        );
    }
    assert!(
        !dir.path().join("artifacts").exists(),
        "--list-tools creates no artifacts directory"
    );
}

/// The longest error line a hostile value may cost on the wire: a
/// protocol error's 2,048-byte message with its envelope, or a tool error
/// whose message appears in its text and its structuredContent (JSON
/// escaping included) — a few KiB, not the value's size.
const MAX_ERROR_LINE_BYTES: usize = 8 * 1024;

#[tokio::test]
async fn a_hostile_value_quoted_in_an_error_comes_back_bounded_and_keeps_nothing() {
    // Every error quotes what it refuses; a 200 KB name, symbol or URI
    // comes back elided to warden_core's MAX_ERROR_MESSAGE_BYTES, head and
    // fix kept, and no task is made to hold an oversized error.
    use tokio::io::AsyncWriteExt;
    use warden::limits::{MAX_ERROR_FIELD_BYTES, MAX_ERROR_MESSAGE_BYTES};
    let dir = tempfile::tempdir().unwrap();
    let (_child, mut stdin, mut lines) = raw_server(dir.path(), "2025-11-25").await;
    let hostile = "k".repeat(200_000);
    let requests = [
        (
            "tools/call",
            json!({"name": "get_quote", "arguments": {"symbol": hostile}}),
        ),
        (
            "tools/call",
            json!({"name": "price_option_t", "arguments": {"option_type": hostile}}),
        ),
        (
            "tools/call",
            json!({"name": "get_quote", "arguments": {"symbol": "AAPL", hostile.as_str(): 1}}),
        ),
        ("tools/call", json!({"name": hostile, "arguments": {}})),
        (
            "resources/read",
            json!({"uri": format!("warden://artifacts/{hostile}")}),
        ),
        ("prompts/get", json!({"name": hostile})),
        (hostile.as_str(), json!({})),
    ];
    for (id, (method, params)) in requests.iter().enumerate() {
        let request = json!({"jsonrpc": "2.0", "id": id + 1, "method": method, "params": params});
        stdin.write_all(format!("{request}\n").as_bytes()).await.unwrap();
        let line = lines.next_line().await.unwrap().expect("an answer");
        assert!(
            line.len() <= MAX_ERROR_LINE_BYTES,
            "{} bytes for {:.40}: {:.300}",
            line.len(),
            method,
            line
        );
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(answer["id"], id + 1);
        let message = match answer["error"]["message"].as_str() {
            Some(protocol) => protocol.to_string(),
            None => {
                assert_eq!(answer["result"]["isError"], true, "{line:.300}");
                let text = answer["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default();
                let text: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {line:.300}"));
                let error = &text["error"];
                let field = error["field"].as_str().unwrap_or_default();
                assert!(field.len() <= MAX_ERROR_FIELD_BYTES, "{error:.300}");
                error["message"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{line:.600}"))
                    .to_string()
            }
        };
        assert!(message.len() <= MAX_ERROR_MESSAGE_BYTES, "{}", message.len());
        assert!(message.contains(" bytes elided]…"), "{message:.300}");
    }
    // The symbol's error keeps its field first and its fix last.
    stdin
        .write_all(format!("{}\n", json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "get_quote", "arguments": {"symbol": "z".repeat(100_000)}}})).as_bytes())
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    let text: Value = serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    let message = text["error"]["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with("symbol: unknown symbol 'zzz"),
        "{message:.100}"
    );
    assert!(message.contains("known symbols: AAPL"), "{message}");
    // None of them was big enough to be kept as a task.
    let list = json!({"jsonrpc": "2.0", "id": 100, "method": "tools/call", "params": {"name": "list_tasks", "arguments": {}}});
    stdin.write_all(format!("{list}\n").as_bytes()).await.unwrap();
    let answer: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(
        answer["result"]["structuredContent"]["tasks"],
        json!([]),
        "{answer}"
    );
}

/// Sends `request` to a [`raw_server`] and reads the one line that answers it.
async fn exchange(
    stdin: &mut tokio::process::ChildStdin,
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    request: &Value,
) -> Value {
    use tokio::io::AsyncWriteExt;
    stdin
        .write_all(format!("{request}\n").as_bytes())
        .await
        .expect("write");
    let line = lines.next_line().await.expect("read").expect("an answer");
    serde_json::from_str(&line).expect("JSON")
}

#[tokio::test]
async fn a_known_method_with_params_it_cannot_read_is_invalid_params_not_method_not_found() {
    // rmcp reads such a request as a custom one and would answer -32601
    // "tools/call": the client is told what did not parse, and where.
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().unwrap();
    let (_child, mut stdin, mut lines) = raw_server(dir.path(), "2025-11-25").await;
    let cases = [
        (
            json!({"name": "get_quote", "arguments": [1, 2]}),
            "tools/call",
            -32602,
            "arguments",
        ),
        (json!({"arguments": {}}), "tools/call", -32602, "name"),
        (json!({"uri": 7}), "resources/read", -32602, "uri"),
        (json!({}), "tools/frobnicate", -32601, "'tools/frobnicate'"),
        (
            json!({"protocolVersion": 5, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}),
            "initialize",
            -32602,
            "protocolVersion",
        ),
    ];
    for (id, (params, method, code, named)) in cases.into_iter().enumerate() {
        let request = json!({"jsonrpc": "2.0", "id": id + 1, "method": method, "params": params});
        stdin.write_all(format!("{request}\n").as_bytes()).await.unwrap();
        let answer: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(answer["id"], id + 1, "{answer}");
        assert_eq!(answer["error"]["code"], code, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(method) && message.contains(named), "{message}");
    }
    let ping = json!({"jsonrpc": "2.0", "id": 99, "method": "ping"});
    stdin.write_all(format!("{ping}\n").as_bytes()).await.unwrap();
    let answer: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(answer["result"], json!({}), "still serving: {answer}");
}

#[tokio::test]
async fn a_first_initialize_whose_params_cannot_be_read_is_told_so_and_a_readable_one_still_opens() {
    // rmcp reads it as no initialize and answered it as a stateless request missing its `_meta`.
    let dir = tempfile::tempdir().expect("temp dir");
    let (_child, mut stdin, mut lines) = spawn_raw(dir.path());
    // A request before any initialize, without the stateless revision's `_meta`: told what a
    // client of either revision does.
    let early = json!({"jsonrpc": "2.0", "id": 0, "method": "tools/list"});
    let answer = exchange(&mut stdin, &mut lines, &early).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("sends initialize first"), "{message}");
    let client = json!({"name": "raw", "version": "0"});
    let unreadable = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": [], "clientInfo": client}});
    let answer = exchange(&mut stdin, &mut lines, &unreadable).await;
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("invalid params for initialize: capabilities: "),
        "{message}"
    );
    let readable = json!({"jsonrpc": "2.0", "id": 2, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}});
    let answer = exchange(&mut stdin, &mut lines, &readable).await;
    assert_eq!(answer["result"]["protocolVersion"], "2025-11-25", "{answer}");
}

#[tokio::test]
async fn an_error_shows_what_it_echoes_escaped_on_every_path() {
    // A right-to-left override and a NUL in a tool name, a method, a resource URI, a prompt name,
    // a field name and a value: each error quotes it escaped, never raw, so it cannot reorder or
    // hide the words a person or a model reads around it.
    let dir = tempfile::tempdir().expect("temp dir");
    let (_child, mut stdin, mut lines) = raw_server(dir.path(), "2025-11-25").await;
    let hostile = "x\u{202e}y\u{0}";
    let requests = [
        json!({"method": "tools/call", "params": {"name": hostile, "arguments": {}}}),
        json!({"method": format!("foo/{hostile}"), "params": {}}),
        json!({"method": "resources/read", "params": {"uri": format!("warden://{hostile}")}}),
        json!({"method": "prompts/get", "params": {"name": hostile}}),
        json!({"method": "tools/call", "params": {"name": "get_quote", "arguments": {"symbol": hostile}}}),
        json!({"method": "tools/call", "params": {"name": "get_quote", "arguments": {hostile: "AAPL"}}}),
    ];
    for (id, mut request) in requests.into_iter().enumerate() {
        request["jsonrpc"] = json!("2.0");
        request["id"] = json!(id + 1);
        let answer = exchange(&mut stdin, &mut lines, &request).await;
        let shown = match answer.get("error") {
            Some(error) => error["message"].as_str().unwrap_or_default().to_string(),
            // A guard's error result: its JSON in the text.
            None => {
                let text = answer["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default();
                let error = serde_json::from_str::<Value>(text).expect("an error's JSON")["error"].clone();
                format!(
                    "{} {}",
                    error["message"].as_str().unwrap_or_default(),
                    error["field"]
                )
            }
        };
        assert!(shown.contains("x\\u{202e}y\\u{0}"), "{request}: {shown}");
        assert!(
            !shown.contains('\u{202e}') && !shown.contains('\u{0}'),
            "{request}: {shown}"
        );
    }
}

#[tokio::test]
async fn a_client_of_an_older_revision_gets_only_content_it_can_read() {
    // resource_link exists from 2025-06-18: a 2025-03-26 client's run_script result links its
    // output in a text block instead (its SDK refuses the whole result otherwise); 2025-06-18 gets
    // the link.
    let script =
        r#"write_artifact("a.csv", "x\n1\n"); final_answer(#{task_type: "analysis", summary: "one"})"#;
    for (version, link) in [("2025-03-26", false), ("2024-11-05", false), ("2025-06-18", true)] {
        let dir = tempfile::tempdir().expect("temp dir");
        let (_child, mut stdin, mut lines) = raw_server(dir.path(), version).await;
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                             "params": {"name": "run_script", "arguments": {"script": script}}});
        let answer = exchange(&mut stdin, &mut lines, &request).await;
        let content = answer["result"]["content"].as_array().expect("content").clone();
        let types: Vec<&str> = content.iter().filter_map(|b| b["type"].as_str()).collect();
        assert_eq!(types.contains(&"resource_link"), link, "{version}: {types:?}");
        if !link {
            assert!(types.iter().all(|t| *t == "text"), "{version}: {types:?}");
            assert!(
                content.iter().any(|b| b["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("/outputs/a.csv") && t.contains("read_artifact"))),
                "{version}: {content:?}"
            );
        }
    }
}
