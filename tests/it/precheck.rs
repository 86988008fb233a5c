//! run_script refuses, before anything runs, the two mistakes that do not
//! fail by themselves: a write to a `for` loop's copy, and a wrong argument
//! name in a map held in a variable.

use serde_json::{Value, json};

use crate::common::*;

/// The refused run's result, after checking it ran nothing: no guard call
/// recorded, no artifact written.
async fn refused(server: &Server, script: &str) -> String {
    let result = server
        .call("run_script", json!({"script": script, "timeout_seconds": 30}))
        .await;
    let result: Value = structured(&result);
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["error"]["kind"], "parse", "{result}");
    let task_id = result["task_id"].as_str().unwrap_or_default();
    let task = server.artifacts.path().join(task_id);
    assert!(!task.join("outputs/a.txt").exists(), "the script ran: {result}");
    let calls = std::fs::read_to_string(task.join("function_calls.json")).unwrap_or_default();
    assert!(!calls.contains("price_option_t"), "a guard was called: {calls}");
    result["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn a_write_to_a_loop_copy_is_refused_with_the_index_loop() {
    // The model meant to update each leg; the check says the write is lost and how to write it.
    let server = Server::start(FINANCE).await;
    let message = refused(
        &server,
        r#"write_artifact("a.txt", "x");
let legs = [#{spot: 100.0}, #{spot: 110.0}];
for leg in legs {
  leg.price = price_option_t(#{option_type: "call", spot: leg.spot, strike: 100.0, time_to_expiry: 1.0, volatility: 0.2, rate: 0.0}).result;
}
legs"#,
    )
    .await;
    assert!(
        message.starts_with("the script did not run")
            && message.contains("line 4, column 3: 'leg' is a copy of each item of 'legs'")
            && message.contains("write: for i in 0..legs.len() { legs[i].price = … }"),
        "{message}"
    );
}

#[tokio::test]
async fn a_wrong_argument_in_a_map_held_in_a_variable_is_refused_with_the_fix() {
    // The map is built first, completed by m.k = …, then passed: its wrong key is found where it was written.
    let server = Server::start(FINANCE).await;
    let message = refused(
        &server,
        r#"write_artifact("a.txt", "x");
let m = #{option_type: "call", spot: 100.0, strike: 100.0, time_to_expiry: 1.0, vol: 0.2};
m.rate = 0.01;
price_option_t(m)"#,
    )
    .await;
    assert!(
        message.starts_with("the script did not run")
            && message.contains(
                "line 2, column 9: map 'm' (passed at line 4): price_option_t has no argument 'vol': \
did you mean 'volatility'?"
            )
            && message.contains("missing required argument(s) volatility"),
        "{message}"
    );
    assert!(!message.contains("'rate'"), "{message}");
}
