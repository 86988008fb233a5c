//! The finance example's paper orders (issue 40, point 6) over the real
//! transport: `place_paper_order` appends one ledger line per new order,
//! is idempotent on `client_order_id`, names the field of every bad input,
//! and from a script runs only once the person confirms it;
//! `list_paper_orders` reads the ledger back.

use std::path::Path;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};

use crate::common::approver::Approver;
use serde_json::{Value, json};

use crate::common::*;

/// The finance server over stdio with an approving person as its client,
/// its artifacts under `dir` and its ledger at `ledger`.
async fn with_person(dir: &Path, ledger: &str) -> (RunningService<RoleClient, Approver>, Approver) {
    with(Approver::default(), dir, ledger).await
}

/// The finance server over stdio with `person` as its client.
async fn with(
    person: Approver,
    dir: &Path,
    ledger: &str,
) -> (RunningService<RoleClient, Approver>, Approver) {
    let mut command = tokio::process::Command::new(FINANCE);
    command
        .env("WARDEN_ARTIFACTS_DIR", dir.join("artifacts"))
        .env("WARDEN_FINANCE_LEDGER", ledger);
    let transport = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn")
        .0;
    let client = person.clone().serve(transport).await.expect("initialize");
    (client, person)
}

/// `run_script` of `script` through `client`; the structured result.
async fn run_script(client: &RunningService<RoleClient, Approver>, script: &str) -> Value {
    let Value::Object(arguments) = json!({"script": script, "timeout_seconds": 30}) else {
        panic!("object arguments")
    };
    let result = client
        .call_tool(CallToolRequestParams::new("run_script").with_arguments(arguments))
        .await
        .expect("answered");
    structured(&result)
}

/// The ledger's lines, parsed (none when the file is absent).
fn ledger(path: &Path) -> Vec<Value> {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .lines()
            .map(|line| serde_json::from_str(line).expect("a whole JSON line"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// A temporary directory and the ledger path inside it.
fn temp_ledger() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ledger.jsonl").display().to_string();
    (dir, path)
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]Z`.
fn rfc3339_utc(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits =
        |range: std::ops::Range<usize>| bytes.get(range).is_some_and(|b| b.iter().all(u8::is_ascii_digit));
    bytes.len() >= 20
        && digits(0..4)
        && bytes[4] == b'-'
        && digits(5..7)
        && bytes[7] == b'-'
        && digits(8..10)
        && bytes[10] == b'T'
        && digits(11..13)
        && bytes[13] == b':'
        && digits(14..16)
        && bytes[16] == b':'
        && digits(17..19)
        && text.ends_with('Z')
}

fn order(id: &str) -> Value {
    json!({"symbol": "aapl", "side": "buy", "quantity": 10, "limit_price": 190.5, "client_order_id": id})
}

#[tokio::test]
async fn a_direct_order_is_one_ledger_line_and_a_repeat_writes_nothing() {
    let (_dir, path) = temp_ledger();
    let server = Server::start_with_env(FINANCE, &[("WARDEN_FINANCE_LEDGER", &path)]).await;
    let placed = server.call("place_paper_order", order("ord-1")).await;
    assert!(!is_error(&placed), "{placed:?}");
    let placed = structured(&placed);
    assert_eq!(placed["duplicate"], false, "{placed}");
    let lines = ledger(Path::new(&path));
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert_eq!(line, &placed["order"]);
    assert_eq!(line["client_order_id"], "ord-1");
    assert_eq!(line["symbol"], "AAPL", "upper-cased");
    assert_eq!(line["side"], "buy");
    assert_eq!(line["quantity"], 10);
    assert_eq!(line["limit_price"], 190.5);
    assert_eq!(line["status"], "accepted");
    let placed_at = line["placed_at"].as_str().expect("placed_at");
    assert!(rfc3339_utc(placed_at), "RFC 3339 UTC: {placed_at}");

    // The same id and fields: the recorded order, nothing written.
    let again = structured(&server.call("place_paper_order", order("ord-1")).await);
    assert_eq!(again["duplicate"], true, "{again}");
    assert_eq!(again["order"], placed["order"]);
    assert_eq!(ledger(Path::new(&path)).len(), 1);

    // The same id, other fields: refused naming client_order_id, nothing written.
    let mut other = order("ord-1");
    other["quantity"] = json!(11);
    let refused = server.call("place_paper_order", other).await;
    assert!(is_error(&refused));
    assert_eq!(error_code(&refused), "invalid_input");
    let error = &structured(&refused)["error"];
    assert_eq!(error["field"], "client_order_id", "{error}");
    assert_eq!(ledger(Path::new(&path)).len(), 1);

    // A market order (no limit price) for another symbol.
    let market = json!({"symbol": "MSFT", "side": "sell", "quantity": 3, "client_order_id": "ord-2"});
    let placed = structured(&server.call("place_paper_order", market).await);
    assert_eq!(placed["order"]["limit_price"], Value::Null, "{placed}");

    // Read back: newest last, filtered, limited.
    let all = structured(&server.call("list_paper_orders", json!({})).await);
    assert_eq!(all["total"], 2, "{all}");
    let ids: Vec<&str> = all["orders"]
        .as_array()
        .expect("orders")
        .iter()
        .filter_map(|o| o["client_order_id"].as_str())
        .collect();
    assert_eq!(ids, ["ord-1", "ord-2"]);
    let aapl = structured(&server.call("list_paper_orders", json!({"symbol": "aapl"})).await);
    assert_eq!(aapl["total"], 1, "{aapl}");
    assert_eq!(aapl["orders"][0]["client_order_id"], "ord-1");
    let newest = structured(&server.call("list_paper_orders", json!({"limit": 1})).await);
    assert_eq!(newest["total"], 2, "{newest}");
    assert_eq!(newest["orders"].as_array().map(Vec::len), Some(1));
    assert_eq!(newest["orders"][0]["client_order_id"], "ord-2");
    assert_eq!(ledger(Path::new(&path)).len(), 2);
}

#[tokio::test]
async fn every_bad_input_names_its_field_and_writes_nothing() {
    let (_dir, path) = temp_ledger();
    let server = Server::start_with_env(FINANCE, &[("WARDEN_FINANCE_LEDGER", &path)]).await;
    let with = |field: &str, value: Value| {
        let mut arguments = order("ord-bad");
        arguments[field] = value;
        arguments
    };
    let mut missing = order("ord-bad");
    missing.as_object_mut().expect("object").remove("side");
    let cases = [
        (with("symbol", json!("")), "symbol"),
        (with("symbol", json!("NOT A SYMBOL")), "symbol"),
        (with("symbol", json!("ABCDEFGHIJKLM")), "symbol"),
        (with("side", json!("short")), "side"),
        (missing, "side"),
        (with("quantity", json!(0)), "quantity"),
        (with("quantity", json!(-5)), "quantity"),
        (with("quantity", json!(2.5)), "quantity"),
        (with("limit_price", json!(0)), "limit_price"),
        (with("limit_price", json!(-1.5)), "limit_price"),
        (with("client_order_id", json!("")), "client_order_id"),
        (with("client_order_id", json!("has space")), "client_order_id"),
        (with("client_order_id", json!("x".repeat(65))), "client_order_id"),
    ];
    for (arguments, field) in cases {
        let result = server.call("place_paper_order", arguments.clone()).await;
        assert!(is_error(&result), "{arguments}");
        let code = error_code(&result);
        assert!(
            code == "invalid_input" || code == "invalid_arguments",
            "{arguments}: {code}"
        );
        let error = &structured(&result)["error"];
        assert_eq!(error["field"], field, "{arguments}: {error}");
        assert!(
            error["message"].as_str().unwrap_or_default().contains(field),
            "{error}"
        );
    }
    for (arguments, field) in [
        (json!({"limit": 0}), "limit"),
        (json!({"limit": 1001}), "limit"),
        (json!({"symbol": "a b"}), "symbol"),
    ] {
        let result = server.call("list_paper_orders", arguments.clone()).await;
        assert!(is_error(&result), "{arguments}");
        assert_eq!(structured(&result)["error"]["field"], field, "{arguments}");
    }
    assert!(!Path::new(&path).exists(), "no ledger written");
    // An absent ledger lists as empty.
    let empty = structured(&server.call("list_paper_orders", json!({})).await);
    assert_eq!(empty, json!({"orders": [], "total": 0}));
}

#[tokio::test]
async fn the_default_ledger_is_in_the_artifacts_directory() {
    let server = Server::start(FINANCE).await;
    let placed = server.call("place_paper_order", order("ord-default")).await;
    assert!(!is_error(&placed), "{placed:?}");
    let lines = ledger(&server.artifacts.path().join("paper-orders.jsonl"));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["client_order_id"], "ord-default");
}

#[tokio::test]
async fn concurrent_orders_write_each_id_once_in_whole_lines() {
    // 12 calls at once, 4 ids placed 3 times each: 4 whole lines, 8 duplicates.
    let (_dir, path) = temp_ledger();
    let server = Server::start_with_env(FINANCE, &[("WARDEN_FINANCE_LEDGER", &path)]).await;
    let mut calls = Vec::new();
    for i in 0..12 {
        let peer = server.client.peer().clone();
        let Value::Object(arguments) = order(&format!("ord-c{}", i % 4)) else {
            panic!("object arguments")
        };
        calls.push(tokio::spawn(async move {
            peer.call_tool(CallToolRequestParams::new("place_paper_order").with_arguments(arguments))
                .await
                .expect("answered")
        }));
    }
    let mut duplicates = 0;
    for call in calls {
        let answer = structured(&call.await.expect("joined"));
        assert!(answer["order"].is_object(), "{answer}");
        if answer["duplicate"] == true {
            duplicates += 1;
        }
    }
    assert_eq!(duplicates, 8);
    let lines = ledger(Path::new(&path));
    assert_eq!(lines.len(), 4, "{lines:?}");
}

#[tokio::test]
async fn a_script_without_anyone_to_confirm_is_refused_and_writes_nothing() {
    let (_dir, path) = temp_ledger();
    let server = Server::start_with_env(FINANCE, &[("WARDEN_FINANCE_LEDGER", &path)]).await;
    let script = r#"let out = "";
        try { out = place_paper_order(#{symbol: "AAPL", side: "buy", quantity: 1, client_order_id: "ord-s1"}).order.client_order_id; }
        catch (e) { out = e.code + ": " + e.message; }
        out"#;
    let ran = structured(
        &server
            .call("run_script", json!({"script": script, "timeout_seconds": 20}))
            .await,
    );
    let said = ran["value"].as_str().unwrap_or_default();
    assert!(
        said.starts_with("forbidden:") && said.contains("place_paper_order"),
        "{ran}"
    );
    assert!(!Path::new(&path).exists(), "nothing written");
}

#[tokio::test]
async fn a_declined_order_is_refused_and_writes_nothing() {
    let (dir, path) = temp_ledger();
    let person = Approver::declining();
    let (client, person) = with(person, dir.path(), &path).await;
    let script = r#"let out = "";
        try { out = place_paper_order(#{symbol: "AAPL", side: "sell", quantity: 2, client_order_id: "ord-no"}).order.client_order_id; }
        catch (e) { out = e.code; }
        out"#;
    let ran = run_script(&client, script).await;
    assert_eq!(ran["value"], "forbidden", "{ran}");
    assert_eq!(person.forms().len(), 1);
    assert!(!Path::new(&path).exists(), "nothing written");
}

#[tokio::test]
async fn a_script_placing_orders_the_scan_cannot_bound_asks_each_one() {
    // The loop's bound is a variable, so there is no plan: each call is asked with its
    // exact arguments (a literal bound is one plan question: tests/it/approvals.rs).
    let (dir, path) = temp_ledger();
    let (client, person) = with_person(dir.path(), &path).await;
    let script = r#"let placed = [];
        let n = 5;
        for i in 0..n {
            let o = place_paper_order(#{symbol: "AAPL", side: "buy", quantity: 10 + i, limit_price: 190.5, client_order_id: `loop-${i}`});
            placed.push(o.order.client_order_id);
        }
        placed"#;
    let ran = run_script(&client, script).await;
    assert_eq!(
        ran["value"],
        json!(["loop-0", "loop-1", "loop-2", "loop-3", "loop-4"]),
        "{ran}"
    );
    let lines = ledger(Path::new(&path));
    assert_eq!(lines.len(), 5, "{lines:?}");
    let forms = person.forms();
    assert_eq!(forms.len(), 5, "{forms:?}");
    for (i, form) in forms.iter().enumerate() {
        assert!(form.contains("'place_paper_order'"), "{form}");
        assert!(
            form.contains(&format!("\"client_order_id\": \"loop-{i}\"")),
            "{form}"
        );
        assert!(form.contains(&format!("\"quantity\": {}", 10 + i)), "{form}");
        assert!(form.contains("arguments_sha256: sha256:"), "{form}");
    }
    assert_eq!(lines[4]["client_order_id"], "loop-4");
}

/// The body of the first fenced block tagged `tag` in `text`, whose fence
/// may be longer than three backticks (a block that shows a fence).
fn fenced<'a>(text: &'a str, tag: &str) -> &'a str {
    let open = format!("```{tag}\n");
    let at = text.find(&open).unwrap_or_else(|| panic!("a ```{tag} block"));
    let ticks = 3 + text[..at].chars().rev().take_while(|c| *c == '`').count();
    let start = at + open.len();
    let close = format!("\n{}\n", "`".repeat(ticks));
    let end = text[start..].find(&close).expect("a closing fence");
    &text[start..start + end]
}

#[tokio::test]
async fn the_readme_approval_is_what_runs() {
    // README.md's "An approval, end to end": its script, the form the person sees, and the ledger line.
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).expect("README.md");
    let start = readme.find("## An approval, end to end").expect("the section");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let (dir, path) = temp_ledger();
    let (client, person) = with_person(dir.path(), &path).await;
    let ran = run_script(&client, fenced(section, "rhai")).await;
    assert_eq!(ran["value"]["duplicate"], false, "{ran}");
    let forms = person.forms();
    assert_eq!(forms.len(), 1, "{forms:?}");
    assert_eq!(
        forms[0],
        fenced(section, "text"),
        "the form as the README shows it"
    );
    let lines = ledger(Path::new(&path));
    assert_eq!(lines.len(), 1, "{lines:?}");
    let mut shown: Value = serde_json::from_str(fenced(section, "json")).expect("the README's ledger line");
    let mut written = lines[0].clone();
    assert!(
        rfc3339_utc(written["placed_at"].as_str().unwrap_or_default()),
        "{written}"
    );
    shown["placed_at"] = Value::Null;
    written["placed_at"] = Value::Null;
    assert_eq!(
        written, shown,
        "the ledger line as the README shows it (but its time)"
    );
}

#[tokio::test]
async fn the_two_guards_are_listed_with_their_hints_category_and_summary() {
    // tools/list: placing is destructive and not read-only, listing is read-only; list_guards: category "orders".
    let server = Server::start(FINANCE).await;
    let tools = server.client.list_all_tools().await.expect("tools/list");
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name} listed"))
            .clone()
    };
    let place = tool("place_paper_order");
    let hints = place.annotations.as_ref().expect("annotations");
    assert_eq!(hints.destructive_hint, Some(true));
    assert_eq!(hints.read_only_hint, Some(false));
    let schema = Value::Object(place.input_schema.as_ref().clone());
    assert_eq!(
        schema["required"],
        json!(["symbol", "side", "quantity", "client_order_id"]),
        "{schema}"
    );
    let list = tool("list_paper_orders");
    let hints = list.annotations.as_ref().expect("annotations");
    assert_eq!(hints.read_only_hint, Some(true));
    assert_eq!(hints.destructive_hint, Some(false));

    let listed = structured(&server.call("list_guards", json!({})).await);
    let rows = listed["guards"].as_array().expect("rows");
    for (name, summary) in [
        (
            "place_paper_order",
            "Place a paper order (simulated: recorded in the paper ledger, never sent to a market).",
        ),
        (
            "list_paper_orders",
            "List the paper orders recorded in the paper ledger, oldest first and newest last.",
        ),
    ] {
        let row = rows
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} in list_guards"));
        assert_eq!(row["category"], "orders", "{row}");
        assert_eq!(row["mode"], "in_process", "{row}");
        assert_eq!(row["summary"], summary, "{row}");
    }
}
