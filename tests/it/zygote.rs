//! The worker zygote (issue 27): guard workers are forked by one zygote
//! per server, which is replaced after its child budget, replaced when it
//! dies, and never the reason a call hangs or the server stops serving.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Server, TESTBED, eventually, is_error, is_zygote, live_children, structured};

/// The server's live zygotes.
fn zygotes(server: &Server) -> Vec<u32> {
    live_children(server.pid)
        .into_iter()
        .filter(|p| is_zygote(*p))
        .collect()
}

async fn add(server: &Server, a: f64) -> Value {
    let result = server.call("add_isolated", json!({"a": a, "b": 1.0})).await;
    assert!(!is_error(&result), "{result:?}");
    structured(&result)
}

#[tokio::test]
async fn the_zygote_is_replaced_after_its_child_budget_and_the_old_one_ends() {
    // ZYGOTE_MAX_CHILDREN (256) calls fork from one zygote; the 257th comes
    // from a new one, and the old one is gone once its children are reaped.
    let server = Server::start(TESTBED).await;
    add(&server, 0.0).await;
    let first = zygotes(&server);
    assert_eq!(first.len(), 1, "one zygote after the first call: {first:?}");
    for n in 1..256 {
        add(&server, f64::from(n)).await;
    }
    assert_eq!(zygotes(&server), first, "256 calls come from the first zygote");
    let value = add(&server, 41.0).await;
    assert_eq!(value["result"], json!(42.0), "{value}");
    let now = zygotes(&server);
    assert_eq!(now.len(), 1, "exactly one zygote: {now:?}");
    assert_ne!(now, first, "the 257th call came from a new zygote");
    assert!(
        !std::path::Path::new(&format!("/proc/{}", first[0])).exists(),
        "the replaced zygote {} was reaped",
        first[0]
    );
}

#[tokio::test]
async fn a_killed_zygote_fails_only_its_running_call_and_is_replaced() {
    // SIGKILL the zygote while a 3 s call runs in its child: that call
    // fails (its worker dies with the zygote), at once, not at its
    // timeout; the next call starts a new zygote and succeeds.
    let server = Server::start(TESTBED).await;
    add(&server, 1.0).await;
    let zygote = zygotes(&server)[0];
    let client = server.client.peer().clone();
    let started = std::time::Instant::now();
    let slow = tokio::spawn(async move {
        let Value::Object(arguments) = json!({"millis": 3000, "tag": "orphan"}) else {
            unreachable!()
        };
        client
            .call_tool(rmcp::model::CallToolRequestParams::new("slow_echo").with_arguments(arguments))
            .await
    });
    assert!(
        eventually(Duration::from_secs(5), || !live_children(zygote).is_empty()).await,
        "the slow call's worker never started"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(zygote as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the zygote");
    let result = slow.await.expect("join").expect("answered");
    assert!(is_error(&result), "{result:?}");
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "the orphaned call ended only at {:?}",
        started.elapsed()
    );
    let value = add(&server, 2.0).await;
    assert_eq!(value["result"], json!(3.0), "{value}");
    let now = zygotes(&server);
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now[0], zygote);
}
