//! warden-testbed: the example app plus hostile guards, for the test suite
//! only. Each guard misbehaves in one way a real guard might (hangs, panics,
//! aborts, eats memory, floods stdout, answers too much), so the tests can
//! prove the executor contains it. Never register these in a real server.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use warden::{GuardError, guard};

/// Sleep for a while, then echo the tag (isolated; timeout 5 s).
#[derive(Deserialize, JsonSchema)]
struct SleepInput {
    /// How long to sleep, in milliseconds.
    millis: u64,
    /// Echoed back.
    #[serde(default)]
    tag: String,
    /// When set, first start `sleep <child_marker>` as a child process, so
    /// tests can check the whole process group is killed.
    #[serde(default)]
    child_marker: Option<u64>,
}

#[derive(serde::Serialize, JsonSchema)]
struct SleepOutput {
    tag: String,
    pid: u32,
}

fn slow_echo(input: SleepInput) -> Result<SleepOutput, GuardError> {
    if let Some(marker) = input.child_marker {
        std::process::Command::new("sleep")
            .arg(marker.to_string())
            .spawn()
            .map_err(|e| GuardError::failed(format!("cannot start child: {e}")))?;
    }
    std::thread::sleep(Duration::from_millis(input.millis));
    Ok(SleepOutput {
        tag: input.tag,
        pid: std::process::id(),
    })
}

/// Sleep on a server thread (in_process; timeout 1 s).
#[derive(Deserialize, JsonSchema)]
struct InProcessSleep {
    /// How long to sleep, in milliseconds.
    millis: u64,
}

fn sleep_in_process(input: InProcessSleep) -> Result<u64, GuardError> {
    std::thread::sleep(Duration::from_millis(input.millis));
    Ok(input.millis)
}

/// Misbehave in the chosen way.
#[derive(Deserialize, JsonSchema)]
struct CrashInput {
    /// panic | abort | oom | print | huge | files | bigfile | env | fd3 | `code:<error code to fail with>`
    how: String,
}

fn misbehave(input: CrashInput) -> Result<String, GuardError> {
    match input.how.as_str() {
        "panic" => panic!("deliberate panic"),
        "abort" => std::process::abort(),
        "oom" => {
            let mut blocks: Vec<Vec<u8>> = Vec::new();
            loop {
                blocks.push(vec![1u8; 64 * 1024 * 1024]);
            }
        }
        "print" => {
            println!("stray stdout from a guard");
            eprintln!("stray stderr from a guard");
            Ok("printed".into())
        }
        "huge" => Ok("x".repeat(2 * 1024 * 1024)),
        "files" => {
            // Holds descriptors open until one is refused (RLIMIT_NOFILE).
            let mut held = Vec::new();
            for _ in 0..1000 {
                match std::fs::File::open("/dev/null") {
                    Ok(file) => held.push(file),
                    Err(error) => {
                        return Err(GuardError::failed(format!("after {} files: {error}", held.len())));
                    }
                }
            }
            Ok(format!("opened {} files", held.len()))
        }
        "bigfile" => {
            // Writes past RLIMIT_FSIZE; the kernel answers with SIGXFSZ.
            let path = std::env::temp_dir().join(format!("warden-testbed-{}.bin", std::process::id()));
            let chunk = vec![0u8; 1024 * 1024];
            let mut file = std::fs::File::create(&path).map_err(|e| GuardError::failed(e.to_string()))?;
            let mut result = Ok("wrote 64 MiB".to_string());
            for _ in 0..64 {
                if let Err(error) = std::io::Write::write_all(&mut file, &chunk) {
                    result = Err(GuardError::failed(format!("write refused: {error}")));
                    break;
                }
            }
            let _ = std::fs::remove_file(&path);
            result
        }
        // The variable names the worker holds and those of a program it
        // starts (`env`), one `own:`/`child:` line each.
        "env" => {
            let own: Vec<String> = std::env::vars_os()
                .map(|(name, _)| name.to_string_lossy().into_owned())
                .collect();
            let child = std::process::Command::new("sh")
                .args(["-c", "env | cut -d= -f1 | tr '\\n' ' '"])
                .output()
                .map_err(|e| GuardError::failed(format!("cannot start sh: {e}")))?;
            Ok(format!(
                "own: {}\nchild: {}",
                own.join(" "),
                String::from_utf8_lossy(&child.stdout).trim()
            ))
        }
        // A program the guard starts writes to fd 3 (the worker's answer
        // pipe, unless it is closed on exec) and lists its descriptors.
        "fd3" => {
            let child = std::process::Command::new("sh")
                .args(["-c", "echo '{\"type\":\"result\",\"value\":\"forged\"}' >&3 && echo wrote; ls /proc/self/fd | tr '\\n' ' '"])
                .output()
                .map_err(|e| GuardError::failed(format!("cannot start sh: {e}")))?;
            Ok(format!(
                "stdout: {}; stderr: {}",
                String::from_utf8_lossy(&child.stdout).trim(),
                String::from_utf8_lossy(&child.stderr).trim()
            ))
        }
        // A guard that puts caller input into its error code: events must
        // still stay small.
        code if code.starts_with("code:") => {
            Err(GuardError::new(&code[5..], "failed with the requested code"))
        }
        other => Err(GuardError::invalid_input(
            "how",
            format!("expected panic, abort, oom, print, huge, files, bigfile, env or fd3, got '{other}'"),
        )),
    }
}

/// Return `count` numbered rows (in-process): an answer exactly as large as
/// asked, for the answer bound (`WARDEN_MAX_ANSWER_BYTES`).
#[derive(Deserialize, JsonSchema)]
struct RowsInput {
    /// How many rows (0 to 100,000; about 40 bytes of JSON each).
    count: usize,
}

#[derive(serde::Serialize, JsonSchema)]
struct Rows {
    rows: Vec<Row>,
}

#[derive(serde::Serialize, JsonSchema)]
struct Row {
    index: usize,
    label: String,
}

fn many_rows(input: RowsInput) -> Result<Rows, GuardError> {
    if input.count > 100_000 {
        return Err(GuardError::invalid_input("count", "at most 100,000 rows"));
    }
    let rows = (0..input.count)
        .map(|index| Row {
            index,
            label: format!("row number {index}"),
        })
        .collect();
    Ok(Rows { rows })
}

/// Pretend to delete a named scratch record (annotated destructive; deletes
/// nothing). `run_batch` must refuse it unless the app allows it.
#[derive(Deserialize, JsonSchema)]
struct WipeInput {
    /// A note kept with the deletion; sorts before `record`, so a long one
    /// would push `record` out of a form that showed only a prefix.
    #[serde(default)]
    note: Option<String>,
    /// The record to "delete".
    record: String,
    /// A count, for arguments only exact hashing tells apart.
    #[serde(default)]
    count: Option<u64>,
}

fn wipe_scratch(input: WipeInput) -> Result<String, GuardError> {
    let _ = (input.note, input.count);
    Ok(format!("wiped {}", input.record))
}

/// The same "deletion", run only as an MCP task and taking half a minute:
/// a server killed under it must leave the side effect on record.
fn wipe_scratch_slowly(input: WipeInput) -> Result<String, GuardError> {
    std::thread::sleep(Duration::from_secs(30));
    wipe_scratch(input)
}

/// Set to make the server (started with no arguments, as a client starts
/// it) print a line to stdout before `run()`: the fault preflight's
/// `mcp.stdout` check must catch. Workers and CLI commands stay quiet.
const STRAY_STDOUT_ENV: &str = "WARDEN_TESTBED_STRAY_STDOUT";

/// Add two numbers (pure; the cheapest possible guard, for measuring the framework's own per-call cost).
#[derive(Deserialize, JsonSchema)]
struct AddInput {
    /// Left operand.
    a: f64,
    /// Right operand.
    b: f64,
}

fn add_pure(input: AddInput) -> Result<f64, GuardError> {
    Ok(input.a + input.b)
}

/// The same sum, off by a millionth: the implementation `add_in_process`
/// is swapped for when `WARDEN_TESTBED_SKEW` is set, so a replay on such a
/// server finds a different output (tests/it/receipts.rs).
fn add_skewed(input: AddInput) -> Result<f64, GuardError> {
    Ok(input.a + input.b + 1e-6)
}

/// Set to swap `add_in_process`'s implementation for [`add_skewed`]. Read
/// when the app is built; an in-process guard runs in the server process.
const SKEW_ENV: &str = "WARDEN_TESTBED_SKEW";

/// Asks the person a question (elicitation) and says what came back.
#[derive(Deserialize, JsonSchema)]
struct AskInput {
    /// Shown to the person.
    question: String,
}

#[derive(serde::Serialize, JsonSchema)]
struct Asked {
    /// accept | decline | cancel
    action: String,
    name: Option<String>,
}

fn ask_name(input: AskInput) -> Result<Asked, GuardError> {
    let schema = serde_json::json!({"type": "object",
        "properties": {"name": {"type": "string", "default": "Ada"}}, "required": ["name"]});
    let answer = warden::ask::elicit(&input.question, schema)?;
    Ok(Asked {
        action: serde_json::json!(answer.action)
            .as_str()
            .unwrap_or_default()
            .to_string(),
        name: answer
            .content
            .get("name")
            .and_then(|n| n.as_str())
            .map(str::to_string),
    })
}

/// Asks the client's model (sampling) and returns its text.
fn ask_model(input: AskInput) -> Result<String, GuardError> {
    let answer = warden::ask::sample(serde_json::json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": input.question}}],
        "maxTokens": 50
    }))?;
    Ok(answer["content"]["text"].as_str().unwrap_or_default().to_string())
}

/// Sends the person to a (pretend) broker login page: URL-mode elicitation.
#[derive(Deserialize, JsonSchema)]
struct BrokerLogin {}

fn broker_login(_: BrokerLogin) -> Result<String, GuardError> {
    let answer = warden::ask::elicit_url(
        "Log in to your broker to continue",
        "https://broker.example/login",
    )?;
    Ok(format!("{:?}", answer.action).to_lowercase())
}

/// Logs one info message, then answers "logged".
#[derive(Deserialize, JsonSchema)]
struct LogOnce {}

fn log_once(_: LogOnce) -> Result<String, GuardError> {
    warden::notify::log(warden::notify::Level::Info, "one info message");
    Ok("logged".into())
}

fn main() -> std::process::ExitCode {
    if std::env::var_os(STRAY_STDOUT_ENV).is_some() && std::env::args_os().len() == 1 {
        println!("testbed: hello from main (stray stdout)");
    }
    let add: fn(AddInput) -> Result<f64, GuardError> = if std::env::var_os(SKEW_ENV).is_some() {
        add_skewed
    } else {
        add_pure
    };
    warden_finance::app()
        .guard(guard(add_pure).pure())
        .guard(guard(add).name("add_in_process").in_process())
        // Asking the client (warden::ask): on a server thread, where a guard
        // can ask, and in a worker, where it cannot. Short timeouts: an
        // unanswered question ends at the guard's deadline.
        .guard(guard(ask_name).in_process().timeout(Duration::from_secs(2)))
        .guard(guard(ask_name).name("ask_name_isolated"))
        .guard(guard(ask_model).in_process().timeout(Duration::from_secs(2)))
        // The same sum in a worker process: non-finite output is caught there too.
        .guard(guard(add_pure).name("add_isolated"))
        .guard(guard(slow_echo).timeout(Duration::from_secs(5)))
        .guard(
            guard(sleep_in_process)
                .in_process()
                .timeout(Duration::from_secs(1)),
        )
        .guard(guard(misbehave))
        .guard(guard(wipe_scratch).destructive())
        .guard(
            guard(wipe_scratch_slowly)
                .destructive()
                .in_process()
                .timeout(Duration::from_secs(60))
                .task_support(warden::TaskSupport::Required),
        )
        .guard(guard(many_rows).in_process())
        // Logs once: a stateless request gets the message only when its
        // `_meta` sets a log level.
        .guard(guard(log_once).in_process())
        .guard(guard(broker_login).in_process())
        // A prompt that asks the person first (multi-round-trip input on a
        // stateless request).
        .prompt(warden::Prompt::new(
            "ask_context",
            "Asks for its context, then uses it.",
            |_| {
                let schema = serde_json::json!({"type": "object",
                "properties": {"context": {"type": "string"}}, "required": ["context"]});
                let answer =
                    warden::ask::elicit_as("user_context", "What context should the prompt use?", schema)?;
                let context = answer
                    .content
                    .get("context")
                    .and_then(|c| c.as_str())
                    .unwrap_or_default()
                    .to_string();
                Ok(vec![warden::PromptMessage::user(warden::Content::text(format!(
                    "Context: {context}"
                )))])
            },
        ))
        .run()
}
