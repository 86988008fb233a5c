//! The fixtures of the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, server scenarios), as a Warden app.
//!
//! Every fixture is an ordinary registration: tools are guards (content
//! blocks, progress and log messages through `warden::Content` and
//! `warden::notify`), resources and prompts go through `App`. Nothing in
//! the library knows these names. The tools that ask the client mid-call
//! (sampling, elicitation) are `in_process` guards using `warden::ask`
//! (`asking.rs`).
//! `scripts/conformance` builds this app, serves it over HTTP and runs the
//! suite against it.

mod asking;
mod fixtures;
mod rounds;
mod tasks;

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use warden::notify::{self, Level};
use warden::{App, Body, Content, GuardError, guard};

use fixtures::{RED_PIXEL_PNG, silent_wav};

// An input type's doc comment is the tool's description.
/// Returns one text block.
#[derive(Deserialize, JsonSchema)]
struct SimpleText {}

fn test_simple_text(_: SimpleText) -> Result<Vec<Content>, GuardError> {
    Ok(vec![Content::text("This is a simple text response for testing.")])
}

/// Returns a 1x1 PNG image.
#[derive(Deserialize, JsonSchema)]
struct ImageContent {}

fn test_image_content(_: ImageContent) -> Result<Vec<Content>, GuardError> {
    Ok(vec![Content::image(RED_PIXEL_PNG, "image/png")])
}

/// Returns a short silent WAV clip.
#[derive(Deserialize, JsonSchema)]
struct AudioContent {}

fn test_audio_content(_: AudioContent) -> Result<Vec<Content>, GuardError> {
    Ok(vec![Content::audio(silent_wav(), "audio/wav")])
}

/// Returns an embedded text resource.
#[derive(Deserialize, JsonSchema)]
struct EmbeddedResource {}

fn test_embedded_resource(_: EmbeddedResource) -> Result<Vec<Content>, GuardError> {
    Ok(vec![Content::resource(
        "test://embedded-resource",
        "text/plain",
        Body::text("This is an embedded resource content."),
    )])
}

/// Returns text, an image and an embedded JSON resource.
#[derive(Deserialize, JsonSchema)]
struct MultipleContentTypes {}

fn test_multiple_content_types(_: MultipleContentTypes) -> Result<Vec<Content>, GuardError> {
    Ok(vec![
        Content::text("Multiple content types test:"),
        Content::image(RED_PIXEL_PNG, "image/png"),
        Content::resource(
            "test://mixed-content-resource",
            "application/json",
            Body::text(r#"{"test":"data","value":123}"#),
        ),
    ])
}

/// Sends three info log messages about 50 ms apart, then answers.
#[derive(Deserialize, JsonSchema)]
struct ToolWithLogging {}

fn test_tool_with_logging(_: ToolWithLogging) -> Result<Vec<Content>, GuardError> {
    notify::log(Level::Info, "Tool execution started");
    std::thread::sleep(Duration::from_millis(50));
    notify::log(Level::Info, "Tool processing data");
    std::thread::sleep(Duration::from_millis(50));
    notify::log(Level::Info, "Tool execution completed");
    Ok(vec![Content::text("Tool with logging executed successfully")])
}

/// Logs one info message, then answers (SEP-2575: a stateless request
/// gets the message only when its `_meta` sets a log level).
#[derive(Deserialize, JsonSchema)]
struct LoggingTool {}

fn test_logging_tool(_: LoggingTool) -> Result<Vec<Content>, GuardError> {
    notify::log(Level::Info, "Logging tool ran");
    Ok(vec![Content::text("Logging tool executed")])
}

/// Reports progress 0, 50 and 100 of 100, about 50 ms apart.
#[derive(Deserialize, JsonSchema)]
struct ToolWithProgress {}

fn test_tool_with_progress(_: ToolWithProgress) -> Result<Vec<Content>, GuardError> {
    for (step, done) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if step > 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
        notify::progress(done, Some(100.0), None);
    }
    Ok(vec![Content::text("Tool with progress executed successfully")])
}

/// Always fails, to show how a guard error reaches the client.
#[derive(Deserialize, JsonSchema)]
struct ErrorHandling {}

fn test_error_handling(_: ErrorHandling) -> Result<Vec<Content>, GuardError> {
    Err(GuardError::failed(
        "This tool intentionally returns an error for testing",
    ))
}

fn main() -> std::process::ExitCode {
    let app = App::new("warden-conformance")
        .guard(guard(test_simple_text).pure())
        .guard(guard(test_image_content).pure())
        .guard(guard(test_audio_content).pure())
        .guard(guard(test_embedded_resource).pure())
        .guard(guard(test_multiple_content_types).pure())
        .guard(guard(test_error_handling).pure())
        // One notice path each: a server thread, and a worker process.
        .guard(guard(test_tool_with_logging).in_process())
        .guard(guard(test_logging_tool).in_process())
        .guard(guard(test_tool_with_progress).isolated());
    fixtures::resources_and_prompts(tasks::register(rounds::register(asking::register(app)))).run()
}
