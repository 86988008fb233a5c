//! One test per limit not pinned elsewhere: each would fail if the limit
//! were removed.

use serde_json::{Value, json};

use crate::common::*;

async fn script(server: &Server, code: &str) -> Value {
    structured(
        &server
            .call("run_script", json!({"script": code, "timeout_seconds": 30}))
            .await,
    )
}

#[tokio::test]
async fn arguments_over_8_mb_are_refused_before_a_worker_starts() {
    // 9,000,000 bytes of arguments → arguments_too_large naming the limit.
    let server = Server::start(FINANCE).await;
    let mut arguments = call_args();
    arguments["padding"] = json!("x".repeat(9_000_000));
    let result = server.call("price_option_t", arguments).await;
    assert_eq!(error_code(&result), "arguments_too_large");
    assert!(
        structured(&result)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("8000000")
    );
}

#[tokio::test]
async fn worker_rlimits_bound_open_files_and_file_size() {
    // RLIMIT_NOFILE 64 refuses the 60-somethingth file; RLIMIT_FSIZE 16 MiB kills a big writer.
    let server = Server::start(TESTBED).await;
    let files = server.call("misbehave", json!({"how": "files"})).await;
    let message = structured(&files)["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(message.contains("Too many open files"), "{message}");
    let opened: usize = message
        .trim_start_matches("after ")
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(opened < 64, "{message}");
    let big = server.call("misbehave", json!({"how": "bigfile"})).await;
    let text = structured(&big)["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        text.contains("SIGXFSZ") || text.contains("File too large"),
        "{text}"
    );
    // A worker killed mid-write leaves its partial file behind: remove it.
    for entry in std::fs::read_dir(std::env::temp_dir())
        .into_iter()
        .flatten()
        .flatten()
    {
        if entry.file_name().to_string_lossy().starts_with("warden-testbed-") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[tokio::test]
async fn script_output_is_capped_at_64_kib() {
    // 200 KB of prints → output cut at 64 KiB and marked truncated.
    let server = Server::start(FINANCE).await;
    let result = script(
        &server,
        r#"let s = "y"; s.pad(1000, "y"); for i in 0..200 { print(s); } 1"#,
    )
    .await;
    assert_eq!(result["output_truncated"], true, "{result}");
    assert!(result["output"].as_str().unwrap().len() <= 64 * 1024);
}

#[tokio::test]
async fn artifacts_over_1_mib_are_refused_with_a_catchable_error() {
    // write_artifact of 2 MB → artifact_too_large, and nothing is written.
    let server = Server::start(FINANCE).await;
    let code = r#"let s = "z"; s.pad(2000000, "z"); let r = ""; try { write_artifact("big.txt", s); } catch (e) { r = e.code; } r"#;
    let result = script(&server, code).await;
    assert_eq!(result["value"], "artifact_too_large", "{result}");
    assert_eq!(result["artifacts"], json!([]));
}

#[tokio::test]
async fn deep_expressions_and_too_many_variables_are_limit_errors() {
    // 100 nested parentheses exceed the expression depth; 10,001 variables exceed the scope limit.
    let server = Server::start(FINANCE).await;
    let nested = format!("{}1{}", "(".repeat(100), ")".repeat(100));
    let result = script(&server, &nested).await;
    assert_eq!(result["error"]["kind"], "parse", "{result}");
    let variables: String = (0..10_001).map(|i| format!("let v{i} = {i};\n")).collect();
    let result = script(&server, &variables).await;
    assert_eq!(result["error"]["kind"], "limit", "{result}");
    assert!(
        result["error"]["message"].as_str().unwrap().contains("variables"),
        "{result}"
    );
}
