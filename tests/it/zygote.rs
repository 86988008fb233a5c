//! The worker zygote (issue 27): guard workers are forked by one zygote
//! per server, which is replaced after its child budget, replaced when it
//! dies, and never the reason a call hangs or the server stops serving.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{
    Server, TESTBED, eventually, is_error, is_script_zygote, is_zygote, live_children, structured, workers_of,
};

/// The server's live zygotes.
fn zygotes(server: &Server) -> Vec<u32> {
    live_children(server.pid)
        .into_iter()
        .filter(|p| is_zygote(*p) && !is_script_zygote(*p))
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
        eventually(Duration::from_secs(5), || !workers_of(zygote).is_empty()).await,
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

fn kill(pid: u32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill");
}

#[tokio::test]
async fn a_zygote_killed_while_idle_is_replaced_before_the_next_call_whoever_makes_it() {
    // Issue 38, point 16: SIGKILL the idle zygote, then call at once: a
    // direct call is served by a new zygote (not worker_spawn_failed), and
    // so is a script's call after the next zygote is killed the same way.
    let server = Server::start(TESTBED).await;
    add(&server, 0.0).await;
    let first = zygotes(&server)[0];
    kill(first);
    let value = add(&server, 1.0).await;
    assert_eq!(value["result"], json!(2.0), "{value}");
    let second = zygotes(&server);
    assert_eq!(second.len(), 1, "{second:?}");
    assert_ne!(second[0], first, "a new zygote served the call");

    kill(second[0]);
    let result = server
        .call(
            "run_script",
            json!({"script": "add_isolated(#{a: 2.0, b: 3.0}).result", "timeout_seconds": 20}),
        )
        .await;
    let result = structured(&result);
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["value"], json!(5.0), "{result}");
}

#[tokio::test]
async fn killed_workers_and_zygotes_cost_a_task_only_their_own_calls() {
    // Issue 38, point 16: while a script makes isolated calls, its first
    // call's worker and then the zygote of its second are SIGKILLed from
    // outside: each is a catchable worker_crashed, the third call and the
    // task succeed, and the next direct call is served.
    let server = Server::start(TESTBED).await;
    let script = r#"
        let codes = [];
        for i in 0..3 {
            try { slow_echo(#{millis: 1500, tag: "t"}); codes.push("ok"); } catch (e) { codes.push(e.code); }
        }
        codes
    "#;
    let client = server.client.peer().clone();
    let task = tokio::spawn(async move {
        let Value::Object(arguments) = json!({"script": script, "timeout_seconds": 30}) else {
            unreachable!()
        };
        client
            .call_tool(rmcp::model::CallToolRequestParams::new("run_script").with_arguments(arguments))
            .await
    });
    // The worker of a zygote other than `not`, once one runs.
    let worker_other_than = |not: Option<u32>| {
        zygotes(&server)
            .into_iter()
            .flat_map(live_children)
            .find(|pid| Some(*pid) != not)
    };
    assert!(
        eventually(Duration::from_secs(10), || worker_other_than(None).is_some()).await,
        "the first call's worker never started"
    );
    let first = worker_other_than(None).expect("first worker");
    kill(first);
    assert!(
        eventually(Duration::from_secs(10), || worker_other_than(Some(first))
            .is_some())
        .await,
        "the second call's worker never started"
    );
    let zygote = zygotes(&server)[0];
    kill(zygote);

    let result = structured(&task.await.expect("join").expect("answered"));
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(
        result["value"],
        json!(["worker_crashed", "worker_crashed", "ok"]),
        "{result}"
    );
    let value = add(&server, 4.0).await;
    assert_eq!(value["result"], json!(5.0), "{value}");
}

/// The server's script zygotes (see `warden_script::workers`).
fn script_zygotes(server: &Server) -> Vec<u32> {
    live_children(server.pid)
        .into_iter()
        .filter(|p| is_script_zygote(*p))
        .collect()
}

#[tokio::test]
async fn script_workers_are_forked_one_per_task_and_a_killed_script_zygote_costs_only_its_task() {
    // Issue 44, point 2: two tasks' workers are two children of one script
    // zygote, each its own process group and session, under every layer;
    // SIGKILL that zygote while a task runs: the task fails at once, not at
    // its timeout, and the next task gets a new zygote and succeeds.
    let server = Server::start(TESTBED).await;
    let mut pids = Vec::new();
    for _ in 0..2 {
        let result = structured(&server.call("run_script", json!({"script": "1"})).await);
        assert_eq!(result["status"], "success", "{result}");
        let sandbox = &result["sandbox"];
        for layer in [
            "network_namespace",
            "seccomp",
            "no_new_privileges",
            "capabilities_dropped",
            "process_limit",
        ] {
            assert_eq!(sandbox[layer], json!(true), "{layer}: {result}");
        }
        assert_eq!(sandbox["landlock"], "full", "{result}");
        pids.push(worker_pid(&server, &result));
    }
    assert_ne!(pids[0], pids[1], "one worker per task");
    let zygotes = script_zygotes(&server);
    assert_eq!(zygotes.len(), 1, "one script zygote: {zygotes:?}");
    let zygote = zygotes[0];

    let started = std::time::Instant::now();
    let task = endless_task(&server, 20);
    // The endless task's worker, as the server names it once the worker
    // said hello (confined, in its own session): a child of the zygote
    // picked from /proc could be a process between its fork and its first
    // steps, or one that vanished a moment later (test runs caught both).
    let found = std::cell::Cell::new(None);
    assert!(
        eventually(Duration::from_secs(10), || {
            found.set(started_worker(&server, &pids));
            found.get().is_some()
        })
        .await,
        "the task's worker never started"
    );
    let worker = found.get().expect("found above");
    assert!(
        workers_of(zygote).contains(&worker),
        "the task's worker {worker} is a child of the script zygote {zygote}: {:?}",
        live_children(zygote)
    );
    // The worker leads its own group and session.
    assert_eq!(
        group_and_session(worker),
        Some((worker, worker)),
        "{:?}",
        std::fs::read_to_string(format!("/proc/{worker}/stat"))
    );
    // Out of the server's network namespace; in the zygote's when the
    // kernel's Landlock scopes keep workers apart there (ABI 6).
    assert_ne!(net_namespace(worker), net_namespace(server.pid));
    if landlock_abi() >= 6 {
        assert_eq!(
            net_namespace(worker),
            net_namespace(zygote),
            "the zygote's namespace"
        );
    }
    kill(zygote);
    let result = structured(&task.await.expect("join").expect("answered"));
    assert_eq!(result["status"], "failed", "{result}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the orphaned task ended only at {:?}",
        started.elapsed()
    );
    let next = structured(&server.call("run_script", json!({"script": "40 + 2"})).await);
    assert_eq!(next["status"], "success", "{next}");
    assert_eq!(next["value"], json!(42), "{next}");
    let now = script_zygotes(&server);
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now[0], zygote, "a new script zygote");
}

/// The pid of a script worker the server reported started
/// (`task_worker_started` in its events.jsonl) other than `known`.
fn started_worker(server: &Server, known: &[u32]) -> Option<u32> {
    crate::common::read_jsonl(&server.artifacts.path().join("events.jsonl"))
        .iter()
        .filter(|event| event["event"] == "task_worker_started")
        .filter_map(|event| event["pid"].as_u64().and_then(|pid| u32::try_from(pid).ok()))
        .find(|pid| !known.contains(pid))
}

/// The process group and session of `pid`, from `/proc/<pid>/stat`.
fn group_and_session(pid: u32) -> Option<(u32, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's closing parenthesis: state, ppid, pgrp, session.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(2);
    let group = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some((group, session))
}

/// The network namespace `pid` is in.
fn net_namespace(pid: u32) -> std::path::PathBuf {
    std::fs::read_link(format!("/proc/{pid}/ns/net")).expect("ns/net")
}

/// The kernel's Landlock ABI (0 without Landlock).
#[allow(unsafe_code)]
fn landlock_abi() -> i64 {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: landlock_create_ruleset with a null attribute and the version
    // flag only returns a number.
    let abi = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    abi.max(0)
}

#[tokio::test]
async fn with_seccomp_skipped_each_script_worker_enters_a_network_namespace_of_its_own() {
    // Workers share their zygote's namespace only while seccomp (no socket
    // of any kind) keeps them apart in it: skip it, and each task's worker
    // enters its own, still out of the server's.
    let server = Server::start_with_env(TESTBED, &[("WARDEN_SANDBOX_SKIP", "seccomp")]).await;
    let task = endless_task(&server, 2);
    let worker_of = || script_zygotes(&server).into_iter().flat_map(workers_of).next();
    assert!(
        eventually(Duration::from_secs(10), || worker_of().is_some()).await,
        "the task's worker never started"
    );
    let worker = worker_of().expect("worker");
    let zygote = script_zygotes(&server)[0];
    // The namespace is entered right after the fork: wait for it.
    assert!(
        eventually(Duration::from_secs(5), || net_namespace(worker)
            != net_namespace(zygote))
        .await,
        "the worker stayed in its zygote's namespace"
    );
    assert_ne!(net_namespace(worker), net_namespace(server.pid));
    let result = structured(&task.await.expect("join").expect("answered"));
    assert_eq!(result["sandbox"]["network_namespace"], json!(true), "{result}");
    assert_eq!(result["sandbox"]["seccomp"], json!(false), "{result}");
}

/// Starts a `run_script` task of `ENDLESS` with `timeout_seconds`; its answer.
fn endless_task(
    server: &Server,
    timeout_seconds: u64,
) -> tokio::task::JoinHandle<Result<rmcp::model::CallToolResult, rmcp::ServiceError>> {
    let client = server.client.peer().clone();
    tokio::spawn(async move {
        let Value::Object(arguments) =
            json!({"script": crate::common::ENDLESS, "timeout_seconds": timeout_seconds})
        else {
            unreachable!()
        };
        client
            .call_tool(rmcp::model::CallToolRequestParams::new("run_script").with_arguments(arguments))
            .await
    })
}

/// The pid of the worker that ran task `result` (its `task_worker_started`).
fn worker_pid(server: &Server, result: &Value) -> u32 {
    let events = crate::common::read_jsonl(
        &server
            .artifacts
            .path()
            .join(result["task_id"].as_str().expect("task id"))
            .join("events.jsonl"),
    );
    let started = events
        .iter()
        .find(|e| e["event"] == "task_worker_started")
        .unwrap_or_else(|| panic!("no task_worker_started: {events:?}"));
    started["pid"]
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
        .expect("pid")
}

/// `RLIMIT_CPU` of `pid`, soft, in seconds (`/proc/<pid>/limits`).
fn cpu_limit(pid: u32) -> Option<u64> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max cpu time"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

async fn script_spare_of(server: &Server) -> u32 {
    assert!(
        eventually(Duration::from_secs(10), || crate::common::script_spare(
            server.pid
        )
        .is_some())
        .await,
        "no spare worker was forked"
    );
    crate::common::script_spare(server.pid).expect("spare")
}

#[tokio::test]
async fn a_task_takes_the_spare_forked_ahead_of_it_only_under_its_own_rlimits() {
    // Issue 44, point 2: after a task, the script zygote forks the next
    // task's worker ahead of it, confined and named `warden-spare`; the next
    // task under the same rlimits runs in it (named as any worker again
    // while it runs) with every layer; a task under another timeout (so
    // another RLIMIT_CPU) never gets it, and the spare that follows has
    // that task's limit.
    let server = Server::start(TESTBED).await;
    let first = structured(
        &server
            .call("run_script", json!({"script": "1", "timeout_seconds": 20}))
            .await,
    );
    assert_eq!(first["status"], "success", "{first}");
    let spare = script_spare_of(&server).await;
    assert_ne!(spare, worker_pid(&server, &first));
    assert_eq!(cpu_limit(spare), Some(21), "timeout + 1 s of CPU");

    // Same rlimits: the task runs in the spare, which is no spare meanwhile.
    let task = endless_task(&server, 20);
    assert!(
        eventually(Duration::from_secs(10), || crate::common::script_workers(
            server.pid
        )
        .contains(&spare))
        .await,
        "the task did not take the spare {spare} (workers {:?})",
        crate::common::script_workers(server.pid)
    );
    assert!(
        !crate::common::is_spare(spare),
        "named back once its task arrived"
    );
    kill(spare);
    let killed = structured(&task.await.expect("join").expect("answered"));
    assert_eq!(killed["status"], "failed", "{killed}");
    assert_eq!(worker_pid(&server, &killed), spare);
    for layer in ["network_namespace", "seccomp", "process_limit"] {
        assert_eq!(killed["sandbox"][layer], json!(true), "{layer}: {killed}");
    }
    assert_eq!(killed["sandbox"]["landlock"], "full", "{killed}");

    // Another timeout: a worker of its own, not the spare; the next spare
    // is forked under the new limit and the old one is gone.
    let spare = script_spare_of(&server).await;
    let other = structured(
        &server
            .call("run_script", json!({"script": "2", "timeout_seconds": 7}))
            .await,
    );
    assert_eq!(other["status"], "success", "{other}");
    assert_ne!(
        worker_pid(&server, &other),
        spare,
        "a spare under other rlimits is not handed out"
    );
    assert!(
        eventually(Duration::from_secs(10), || crate::common::script_spare(
            server.pid
        )
        .is_some_and(|next| next != spare && cpu_limit(next) == Some(8)))
        .await,
        "no spare under the new limit"
    );
    assert!(
        eventually(Duration::from_secs(5), || !live_children(
            script_zygotes(&server)[0]
        )
        .contains(&spare))
        .await,
        "the spare under the old limit was not reaped"
    );
}

#[tokio::test]
async fn a_spare_that_died_while_it_waited_is_never_handed_to_a_task() {
    // A spare killed from outside before its task: the task does not run
    // in it (it would fail at once) but in a worker forked for it.
    let server = Server::start(TESTBED).await;
    let first = structured(&server.call("run_script", json!({"script": "1"})).await);
    assert_eq!(first["status"], "success", "{first}");
    let spare = script_spare_of(&server).await;
    kill(spare);
    let dead = || {
        std::fs::read_to_string(format!("/proc/{spare}/stat")).map_or(true, |stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
    };
    assert!(
        eventually(Duration::from_secs(5), dead).await,
        "the spare did not die"
    );
    let next = structured(&server.call("run_script", json!({"script": "40 + 2"})).await);
    assert_eq!(next["status"], "success", "{next}");
    assert_eq!(next["value"], json!(42), "{next}");
    assert_ne!(worker_pid(&server, &next), spare);
}

#[tokio::test]
async fn a_task_in_a_spare_sees_nothing_of_what_the_spare_ran_while_it_waited() {
    // A spare runs a throwaway script while it waits (`warm_up`, binding
    // `warm`); the task it then serves starts from an empty scope.
    let server = Server::start(TESTBED).await;
    let first = structured(&server.call("run_script", json!({"script": "1"})).await);
    assert_eq!(first["status"], "success", "{first}");
    let spare = script_spare_of(&server).await;
    let next = structured(&server.call("run_script", json!({"script": "warm"})).await);
    assert_eq!(worker_pid(&server, &next), spare, "the task ran in the spare");
    assert_ne!(next["status"], "success", "{next}");
    assert!(
        next["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("warm")),
        "{next}"
    );
}

#[tokio::test]
async fn the_script_zygote_is_replaced_after_its_child_budget_spares_included() {
    // ZYGOTE_MAX_CHILDREN (256) counts every worker a script zygote forks,
    // spares too: within 260 tasks a new zygote forks the rest, the old one
    // is gone once its last worker is reaped, and every task succeeds.
    let server = Server::start(TESTBED).await;
    let first = structured(&server.call("run_script", json!({"script": "1"})).await);
    assert_eq!(first["status"], "success", "{first}");
    let zygote = script_zygotes(&server);
    assert_eq!(zygote.len(), 1, "{zygote:?}");
    for n in 0..259 {
        let result = structured(&server.call("run_script", json!({"script": "40 + 2"})).await);
        assert_eq!(result["status"], "success", "task {n}: {result}");
    }
    assert!(
        eventually(Duration::from_secs(10), || {
            let now = script_zygotes(&server);
            now.len() == 1 && now[0] != zygote[0]
        })
        .await,
        "still {:?} after 260 tasks (first {zygote:?})",
        script_zygotes(&server)
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{}", zygote[0])).exists(),
        "the replaced script zygote {} was reaped",
        zygote[0]
    );
}
