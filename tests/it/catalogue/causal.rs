//! assert_causal, the example's script-only function, through run_script:
//! a look-ahead signal is caught (catchable, or failing the script), causal
//! ones pass.

use serde_json::json;

use super::ok;
use crate::common::*;

const CAUSAL: &str = r#"
fn peek(bars) {
  let out = [];
  let n = bars.len();
  for i in 0..n { out.push(if i + 1 < n { bars[i + 1] } else { bars[i] }); }
  out
}
fn moving_average(bars) {
  let out = [];
  let sum = 0.0;
  for i in 0..bars.len() { sum += bars[i]; out.push(sum / (i + 1).to_float()); }
  out
}
fn close_change(bars) {
  let out = [];
  let first = bars[0].close;
  for b in bars { out.push(b.close - first); }
  out
}
let bars = [];
for i in 0..60 { bars.push(100.0 + (i % 7).to_float() - 0.5 * (i % 3).to_float()); }
let caught = #{caught: false};
try { assert_causal(Fn("peek"), bars, 30); } catch (e) {
  caught = #{caught: true, code: e.code, at: e["where"], message: e.message};
}
let bad_k = "";
try { assert_causal(Fn("moving_average"), bars, 60); } catch (e) { bad_k = e.field; }
let maps = bars.map(|x| #{date: "2024-01-02", close: x});
#{
  lookahead: caught,
  bad_k: bad_k,
  causal: assert_causal(Fn("moving_average"), bars, 30),
  maps: assert_causal(Fn("close_change"), maps, 59),
  closure: assert_causal(|b| b.map(|x| x * 2.0), bars, 1),
}
"#;

#[tokio::test]
async fn assert_causal_catches_look_ahead_and_passes_a_causal_signal() {
    // output[i] = bars[i+1] is caught at output[29] for k = 30; a moving average of bars[..=i] passes.
    let server = Server::start(FINANCE).await;
    let result = ok(
        &server,
        "run_script",
        json!({"script": CAUSAL, "timeout_seconds": 30}),
    )
    .await;
    assert!(result["error"].is_null(), "{result}");
    let v = &result["value"];
    assert_eq!(v["lookahead"]["caught"], true, "{v}");
    assert_eq!(v["lookahead"]["code"], "lookahead_detected");
    assert_eq!(v["lookahead"]["at"], "output[29]");
    assert!(v["lookahead"]["message"].as_str().unwrap().contains("bars[30..]"));
    assert_eq!(v["bad_k"], "k");
    let passed = json!({"guard": "assert_causal", "passed": true, "checked": 30, "perturbations": 4});
    assert_eq!(v["causal"], passed);
    assert_eq!(v["maps"]["checked"], 59);
    assert_eq!(v["closure"]["passed"], true);
}

#[tokio::test]
async fn an_uncaught_look_ahead_fails_the_script_with_its_code() {
    // Not catching the error ends the script with a guard error naming lookahead_detected.
    let server = Server::start(FINANCE).await;
    let script = "fn next(b) { let out = []; for i in 0..b.len() { out.push(b[(i + 1).min(b.len() - 1)]); } out }\n\
                  assert_causal(Fn(\"next\"), [1.0, 2.0, 3.0, 4.0], 2)";
    let result = structured(
        &server
            .call("run_script", json!({"script": script, "timeout_seconds": 30}))
            .await,
    );
    assert_eq!(result["error"]["kind"], "guard", "{result}");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("lookahead_detected")
    );
}
