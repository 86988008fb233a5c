//! Worker environment and sandbox depth (issue 10, class 8, plus the guard
//! worker's request cap of class 3): `.env` takes only WARDEN_*/OTEL_* and
//! never reaches the process environment; workers start from an allowlisted
//! environment, inherit no descriptor, hold no privilege; the script worker
//! runs under seccomp; WARDEN_SANDBOX=strict refuses a degraded sandbox; an
//! isolated guard reads arguments up to the configured cap.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{
    Server, TESTBED, children_of, eventually, is_error, is_zygote, live_children, run_cli, script_workers,
    structured,
};

/// A descriptor number the server is started with, open and not
/// close-on-exec; no worker may inherit it.
const LEAKED_FD: u32 = 7;

/// Starts the testbed in `cwd` through `sh`, which opens [`LEAKED_FD`]
/// (without close-on-exec) and then becomes the server.
async fn start_in(cwd: &Path, env: &[(&str, &str)]) -> Server {
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(format!("exec {LEAKED_FD}</dev/null; exec \"$0\""))
        .arg(TESTBED)
        .current_dir(cwd);
    Server::start_command(command, env).await
}

/// `KEY=VALUE` entries of /proc/<pid>/environ.
fn environ(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter(|entry| !entry.is_empty())
        .map(|entry| String::from_utf8_lossy(entry).into_owned())
        .collect()
}

fn status(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default()
}

fn status_field(status: &str, field: &str) -> String {
    status
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn open_fds(pid: u32) -> Vec<u32> {
    let mut fds: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
                .collect()
        })
        .unwrap_or_default();
    fds.sort_unstable();
    fds
}

/// Asserts `pid` holds no privilege: no-new-privs, every capability set
/// empty (the bounding set only when the tests run with capabilities: an
/// unprivileged process cannot drop it, and cannot use it either).
fn assert_unprivileged(pid: u32, what: &str) {
    let own = status(std::process::id());
    let privileged = status_field(&own, "CapEff") != "0000000000000000";
    let status = status(pid);
    assert_eq!(status_field(&status, "NoNewPrivs"), "1", "{what}: {status}");
    let bounding = privileged.then_some("CapBnd");
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"]
        .into_iter()
        .chain(bounding)
    {
        assert_eq!(
            status_field(&status, set),
            "0000000000000000",
            "{what} {set}: {status}"
        );
    }
}

/// Waits for the server's one worker and returns its pid.
async fn the_worker(server: &Server) -> u32 {
    let pid = server.pid;
    assert!(
        eventually(Duration::from_secs(10), || !children_of(pid).is_empty()).await,
        "no worker started"
    );
    children_of(pid)[0]
}

#[tokio::test]
async fn dotenv_applies_only_warden_and_otel_variables_and_names_the_rest() {
    // A .env's WARDEN_* line applies (timeouts clamp to 7 s); PATH and
    // LD_PRELOAD are ignored and named in one stderr warning, values never.
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join(".env"),
        "WARDEN_MAX_TIMEOUT_SECONDS=7\nLD_PRELOAD=/nonexistent/evil.so\nPATH=/nonexistent/bin\n",
    )
    .expect("write .env");
    let run = run_cli(TESTBED, &["--list-tools"], &[], dir.path());
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("    7s"),
        "WARDEN_* from .env not applied: {}",
        run.stdout
    );
    let warnings: Vec<&str> = run.stderr.lines().filter(|l| l.contains(".env")).collect();
    assert_eq!(warnings.len(), 1, "{}", run.stderr);
    assert!(
        warnings[0].contains("LD_PRELOAD") && warnings[0].contains("PATH"),
        "{}",
        warnings[0]
    );
    assert!(
        !run.stderr.contains("/nonexistent"),
        "a value was printed: {}",
        run.stderr
    );
}

#[tokio::test]
async fn workers_start_scrubbed_unprivileged_and_without_inherited_descriptors() {
    // The server has LD_*, the model key, and a leaked fd 7; .env adds an
    // allowed variable the operator passes to workers (WARDEN_WORKER_ENV)
    // and a foreign one. Its guard worker sees only the
    // allowlist (plus the passed .env value, which reaches it through the
    // configuration, not the server's environment: that is pinned by the
    // unit test agent::dotenv::tests, since /proc/<pid>/environ shows only
    // the exec-time block), holds fds 0-3 only, no-new-privs and no
    // capability.
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join(".env"),
        "WARDEN_DOTENV_PROBE=from-dotenv\nWARDEN_WORKER_ENV=WARDEN_DOTENV_PROBE\nFOREIGN_DOTENV_PROBE=x\nLD_AUDIT=/nonexistent.so\n",
    )
    .expect("write .env");
    let server = start_in(
        dir.path(),
        &[
            ("LD_LIBRARY_PATH", "/nonexistent/lib"),
            ("WARDEN_MODEL_API_KEY", "secret-key-never-in-a-worker"),
            ("SOME_TOKEN", "not-for-workers"),
        ],
    )
    .await;
    let server_env = environ(server.pid);
    assert!(
        server_env.iter().any(|e| e.starts_with("LD_LIBRARY_PATH=")),
        "precondition: the server has LD_*"
    );
    assert!(
        open_fds(server.pid).contains(&LEAKED_FD),
        "precondition: the server holds fd {LEAKED_FD}"
    );

    let client = server.client.peer().clone();
    let call = tokio::spawn(async move {
        let arguments = json!({"millis": 3000, "tag": "env"});
        let Value::Object(arguments) = arguments else {
            unreachable!()
        };
        client
            .call_tool(rmcp::model::CallToolRequestParams::new("slow_echo").with_arguments(arguments))
            .await
    });
    let worker = the_worker(&server).await;
    // The worker was forked by the zygote: both are checked.
    let zygote = live_children(server.pid)
        .into_iter()
        .find(|pid| is_zygote(*pid))
        .expect("the guard worker's zygote");
    for pid in [worker, zygote] {
        let env = environ(pid);
        assert!(
            env.iter().any(|e| e == "WARDEN_DOTENV_PROBE=from-dotenv"),
            "{env:?}"
        );
        for entry in &env {
            let name = entry.split('=').next().unwrap_or_default();
            assert!(!name.starts_with("LD_"), "{entry}");
            assert!(!name.starts_with("WARDEN_MODEL_"), "{entry}");
            assert!(name != "SOME_TOKEN" && name != "FOREIGN_DOTENV_PROBE", "{entry}");
        }
    }
    // Right after the fork the child still holds the descriptors the
    // zygote received for it, until it has made them its stdio and closed
    // the rest: wait for that, then a leak would show for the whole call.
    let settled = eventually(Duration::from_secs(2), || {
        open_fds(worker).iter().all(|&fd| fd <= 3)
    })
    .await;
    let fds = open_fds(worker);
    assert!(
        settled,
        "the worker holds more than stdio and its protocol pipe: {fds:?}"
    );
    let fds = open_fds(zygote);
    assert!(
        fds.iter().all(|&fd| fd <= 2),
        "the zygote holds more than its control socket and stdio: {fds:?}"
    );
    // The zygote's control socket is its stdin; the worker's is a pipe.
    let stdin_of = |pid: u32| std::fs::read_link(format!("/proc/{pid}/fd/0")).unwrap_or_default();
    assert!(
        stdin_of(zygote).to_string_lossy().starts_with("socket:"),
        "{:?}",
        stdin_of(zygote)
    );
    assert!(
        stdin_of(worker).to_string_lossy().starts_with("pipe:"),
        "{:?}",
        stdin_of(worker)
    );
    assert_unprivileged(worker, "guard worker");
    assert_unprivileged(zygote, "worker zygote");
    let result = call.await.expect("join").expect("answered");
    assert!(!is_error(&result), "{result:?}");
}

#[tokio::test]
async fn the_script_worker_runs_under_seccomp_with_every_layer_reported() {
    // A running script worker shows Seccomp: 2 (filter), no-new-privs, no
    // capability, no LD_* or model key, RLIMIT_NPROC 0; the task result
    // reports every layer in force.
    let server = Server::start_with_env(
        TESTBED,
        &[
            ("LD_LIBRARY_PATH", "/nonexistent/lib"),
            ("WARDEN_MODEL_API_KEY", "secret-key-never-in-a-worker"),
        ],
    )
    .await;
    let client = server.client.peer().clone();
    let run = tokio::spawn(async move {
        let arguments = json!({"script": "let x = 0; loop { x += 1; }", "timeout_seconds": 3});
        let Value::Object(arguments) = arguments else {
            unreachable!()
        };
        client
            .call_tool(rmcp::model::CallToolRequestParams::new("run_script").with_arguments(arguments))
            .await
    });
    let worker = the_worker(&server).await;
    // The layers are applied right after the fork: wait for the filter.
    assert!(
        eventually(Duration::from_secs(5), || status_field(
            &status(worker),
            "Seccomp"
        ) == "2")
        .await,
        "script worker not under a seccomp filter: {}",
        status(worker)
    );
    assert_unprivileged(worker, "script worker");
    let env = environ(worker);
    assert!(
        !env.iter()
            .any(|e| e.starts_with("LD_") || e.starts_with("WARDEN_MODEL_")),
        "{env:?}"
    );
    let limits = std::fs::read_to_string(format!("/proc/{worker}/limits")).unwrap_or_default();
    let nproc = limits
        .lines()
        .find(|l| l.starts_with("Max processes"))
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        nproc.split_whitespace().nth(2),
        Some("0"),
        "RLIMIT_NPROC not 0: {nproc}"
    );
    let result = structured(&run.await.expect("join").expect("answered"));
    assert_eq!(result["status"], "timed_out", "{result}");
    let sandbox = &result["sandbox"];
    for layer in [
        "network_namespace",
        "rlimits",
        "no_new_privileges",
        "capabilities_dropped",
        "process_limit",
        "seccomp",
    ] {
        assert_eq!(sandbox[layer], true, "{layer}: {sandbox}");
    }
    assert_eq!(sandbox["landlock"], "full", "{sandbox}");
}

async fn run_script(server: &Server, script: &str) -> Value {
    structured(
        &server
            .call("run_script", json!({"script": script, "timeout_seconds": 20}))
            .await,
    )
}

#[tokio::test]
async fn a_degraded_sandbox_warns_at_every_task_start_and_strict_refuses() {
    // With the seccomp layer skipped, each task start records
    // sandbox_degraded naming it; under WARDEN_SANDBOX=strict the script
    // fails at start naming the layer and the variable; with every layer
    // in force strict runs it.
    let skip = ("WARDEN_SANDBOX_SKIP", "seccomp");
    let warn = Server::start_with_env(TESTBED, &[skip]).await;
    for _ in 0..2 {
        let result = run_script(&warn, "40 + 2").await;
        assert_eq!(result["status"], "success", "{result}");
        assert_eq!(result["sandbox"]["seccomp"], false, "{result}");
    }
    let events = warn
        .events_until(|r| r.iter().filter(|e| e["event"] == "sandbox_degraded").count() >= 2)
        .await;
    let degraded: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "sandbox_degraded")
        .collect();
    assert_eq!(degraded.len(), 2, "one warning per task start: {events:?}");
    assert_eq!(degraded[0]["missing"], json!(["seccomp"]), "{}", degraded[0]);

    let strict = Server::start_with_env(TESTBED, &[skip, ("WARDEN_SANDBOX", "strict")]).await;
    let result = run_script(&strict, "40 + 2").await;
    assert_ne!(result["status"], "success", "{result}");
    let text = result.to_string();
    assert!(
        text.contains("seccomp") && text.contains("WARDEN_SANDBOX=strict"),
        "{result}"
    );
    assert_ne!(result["value"], 42, "the script ran: {result}");

    let whole = Server::start_with_env(TESTBED, &[("WARDEN_SANDBOX", "strict")]).await;
    let result = run_script(&whole, "40 + 2").await;
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["value"], 42, "{result}");
}

#[tokio::test]
async fn an_isolated_guard_reads_arguments_up_to_a_raised_cap() {
    // With WARDEN_MAX_ARGUMENT_BYTES=20 MB, a 9 MB argument (over the old
    // fixed 8 MiB worker read) reaches the isolated guard and is answered.
    let server = Server::start_with_env(TESTBED, &[("WARDEN_MAX_ARGUMENT_BYTES", "20000000")]).await;
    let padding = "x".repeat(9_000_000);
    let result = server
        .call(
            "slow_echo",
            json!({"millis": 1, "tag": "big", "padding": padding}),
        )
        .await;
    assert!(!is_error(&result), "{:?}", structured(&result));
    assert_eq!(structured(&result)["tag"], "big");
}

/// The names on one `own:` or `child:` line of `misbehave {how: "env"}`.
fn env_names<'a>(report: &'a str, line: &str) -> Vec<&'a str> {
    report
        .lines()
        .find_map(|l| l.strip_prefix(line))
        .unwrap_or_else(|| panic!("no '{line}' line in {report}"))
        .split_whitespace()
        .collect()
}

#[tokio::test]
async fn guards_the_programs_they_start_and_script_workers_get_only_the_allow_list() {
    // Issue 38, point 14: the input-state key, OAuth settings and any other
    // WARDEN_* setting (environment or .env) reach no worker and no program
    // a guard starts; PATH, RUST_BACKTRACE, the app's declared
    // WARDEN_FINANCE_DATA and the operator's WARDEN_WORKER_ENV names do.
    const KEY: &str = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9";
    let data = crate::common::workspace_root().join("examples/finance/sample_market_data.csv");
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join(".env"),
        format!(
            "WARDEN_INPUT_STATE_KEY={KEY}\nWARDEN_FINANCE_DATA={}\nWARDEN_UNLISTED_SETTING=x\nWARDEN_WORKER_ENV=GUARD_PROXY\n",
            data.display()
        ),
    )
    .expect("write .env");
    let server = start_in(
        dir.path(),
        &[
            ("WARDEN_OAUTH_ISSUER", "https://issuer.invalid"),
            ("WARDEN_ALSO_UNLISTED", "y"),
            ("RUST_BACKTRACE", "1"),
            ("GUARD_PROXY", "http://proxy.invalid"),
        ],
    )
    .await;
    let passed = ["PATH", "RUST_BACKTRACE", "WARDEN_FINANCE_DATA", "GUARD_PROXY"];
    let kept = [
        "WARDEN_INPUT_STATE_KEY",
        "WARDEN_OAUTH_ISSUER",
        "WARDEN_UNLISTED_SETTING",
        "WARDEN_ALSO_UNLISTED",
        "WARDEN_WORKER_ENV",
        "WARDEN_ARTIFACTS_DIR",
    ];
    let result = server.call("misbehave", json!({"how": "env"})).await;
    assert!(!is_error(&result), "{result:?}");
    let report = structured(&result)["result"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for line in ["own:", "child:"] {
        let names = env_names(&report, line);
        for name in passed {
            assert!(names.contains(&name), "{line} {name} missing: {report}");
        }
        for name in kept {
            assert!(
                !names.contains(&name),
                "{line} {name} reached the guard: {report}"
            );
        }
    }
    // The isolated quote guard reads its data path in the worker.
    let quote = server.call("get_quote_isolated", json!({"symbol": "AAPL"})).await;
    assert!(!is_error(&quote), "{quote:?}");

    // A script worker, by its /proc environ while it runs.
    let client = server.client.peer().clone();
    let run = tokio::spawn(async move {
        let arguments = json!({"script": crate::common::ENDLESS, "timeout_seconds": 2});
        let Value::Object(arguments) = arguments else {
            unreachable!()
        };
        client
            .call_tool(rmcp::model::CallToolRequestParams::new("run_script").with_arguments(arguments))
            .await
    });
    // Forked by the script zygote, which was started with the allow-list.
    let script_worker = || script_workers(server.pid).into_iter().next();
    assert!(
        eventually(Duration::from_secs(10), || script_worker().is_some()).await,
        "no script worker started"
    );
    let worker = script_worker().expect("the script worker");
    let env = environ(worker);
    let names: Vec<&str> = env.iter().filter_map(|e| e.split('=').next()).collect();
    assert!(names.contains(&"PATH"), "{env:?}");
    assert!(names.contains(&"WARDEN_FINANCE_DATA"), "{env:?}");
    for name in kept {
        assert!(
            !names.contains(&name),
            "{name} reached the script worker: {env:?}"
        );
    }
    let result = structured(&run.await.expect("join").expect("answered"));
    assert_eq!(result["status"], "timed_out", "{result}");
}

#[tokio::test]
async fn a_secret_named_for_workers_stops_the_start_naming_it() {
    // Issue 38, point 14: WARDEN_WORKER_ENV may not pass Warden's secrets.
    let dir = tempfile::tempdir().expect("temp dir");
    let run = run_cli(
        TESTBED,
        &["call", "add_pure", r#"{"a": 1, "b": 2}"#],
        &[("WARDEN_WORKER_ENV", "HTTPS_PROXY,WARDEN_INPUT_STATE_KEY")],
        dir.path(),
    );
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.stderr
            .contains("WARDEN_WORKER_ENV: 'WARDEN_INPUT_STATE_KEY' never reaches a worker"),
        "{run:?}"
    );
}

#[tokio::test]
async fn a_program_a_guard_starts_cannot_write_to_the_answer_pipe() {
    // Issue 38, point 15: the worker's answer pipe (fd 3) is close-on-exec,
    // so `sh -c 'echo … >&3'` started by a guard fails and cannot forge the
    // guard's answer; the guard's own answer arrives.
    let server = Server::start(TESTBED).await;
    let result = server.call("misbehave", json!({"how": "fd3"})).await;
    assert!(!is_error(&result), "{result:?}");
    let report = structured(&result)["result"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        report.starts_with("stdout: "),
        "the answer was forged: {result:?}"
    );
    assert!(!report.contains("wrote"), "the child wrote to fd 3: {report}");
    let stdout = report
        .strip_prefix("stdout: ")
        .and_then(|r| r.split(';').next())
        .unwrap_or_default();
    let fds: Vec<u32> = stdout.split_whitespace().filter_map(|f| f.parse().ok()).collect();
    // `ls` holds its directory as fd 3 itself; the pipe would be another.
    assert!(
        fds.iter().all(|&fd| fd <= 3),
        "the child inherited {fds:?}: {report}"
    );
}
