//! The suite's resources and prompts, and the media bytes its tools send.

use warden::{App, Body, Content, GuardError, Prompt, PromptArgument, PromptMessage};
use warden::{ResourceTemplate, StaticResource};

/// A 1x1 red PNG (69 bytes).
pub const RED_PIXEL_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00,
    0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53, 0xde, 0x00,
    0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01,
    0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60,
    0x82,
];

/// A WAV file of 8 silent samples: 8 kHz, 8-bit, mono.
pub fn silent_wav() -> Vec<u8> {
    const SAMPLES: u32 = 8;
    const RATE: u32 = 8_000;
    let mut wav = Vec::with_capacity(44 + SAMPLES as usize);
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + SAMPLES).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // mono
    wav.extend_from_slice(&RATE.to_le_bytes());
    wav.extend_from_slice(&RATE.to_le_bytes()); // bytes per second
    wav.extend_from_slice(&1u16.to_le_bytes()); // block align
    wav.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&SAMPLES.to_le_bytes());
    wav.extend(std::iter::repeat_n(0x80u8, SAMPLES as usize)); // 8-bit silence
    wav
}

/// Registers the suite's resources and prompts on `app`.
pub fn resources_and_prompts(app: App) -> App {
    app.static_resource(
        StaticResource::new(
            "test://static-text",
            "static-text",
            "text/plain",
            Body::text("This is the content of the static text resource."),
        )
        .description("A fixed text resource."),
    )
    .static_resource(
        StaticResource::new(
            "test://static-binary",
            "static-binary",
            "image/png",
            Body::bytes(RED_PIXEL_PNG),
        )
        .description("A fixed binary resource (a PNG)."),
    )
    .static_resource(
        StaticResource::new(
            "test://watched-resource",
            "watched-resource",
            "text/plain",
            Body::text("A resource clients may subscribe to."),
        )
        .description("A resource to subscribe to (it never changes)."),
    )
    .resource_template(
        ResourceTemplate::new(
            "test://template/{id}/data",
            "template-data",
            "application/json",
            |vars| {
                let id = &vars["id"];
                Ok(Body::text(format!(
                    r#"{{"id":"{id}","templateTest":true,"data":"Data for ID: {id}"}}"#
                )))
            },
        )
        .description("JSON data for one id."),
    )
    // Asks the person for the context first: on a stateless request the
    // question comes back input_required, and the retry renders it.
    .prompt(Prompt::new(
        "test_input_required_result_prompt",
        "A prompt that asks the person for its context.",
        |_| {
            let schema = serde_json::json!({"type": "object",
                "properties": {"context": {"type": "string"}}, "required": ["context"]});
            let answer =
                warden::ask::elicit_as("user_context", "What context should the prompt use?", schema)?;
            let context = answer
                .content
                .get("context")
                .and_then(|c| c.as_str())
                .unwrap_or_default();
            Ok(vec![PromptMessage::user(Content::text(format!(
                "Use this context: {context}"
            )))])
        },
    ))
    .prompt(Prompt::new(
        "test_simple_prompt",
        "A prompt without arguments.",
        |_| {
            Ok(vec![PromptMessage::user(Content::text(
                "This is a simple prompt for testing.",
            ))])
        },
    ))
    .prompt(
        Prompt::new(
            "test_prompt_with_arguments",
            "A prompt with two arguments.",
            |args| {
                Ok(vec![PromptMessage::user(Content::text(format!(
                    "Prompt with arguments: arg1='{}', arg2='{}'",
                    arg(args, "arg1")?,
                    arg(args, "arg2")?
                )))])
            },
        )
        .argument(
            PromptArgument::new("arg1", "First test argument")
                .required()
                .suggest(["test", "testing", "other"]),
        )
        .argument(PromptArgument::new("arg2", "Second test argument").required()),
    )
    .prompt(
        Prompt::new(
            "test_prompt_with_embedded_resource",
            "A prompt embedding a resource.",
            |args| {
                Ok(vec![
                    PromptMessage::user(Content::resource(
                        arg(args, "resourceUri")?,
                        "text/plain",
                        Body::text("Embedded resource content for testing."),
                    )),
                    PromptMessage::user(Content::text("Please process the embedded resource above.")),
                ])
            },
        )
        .argument(PromptArgument::new("resourceUri", "URI of the resource to embed").required()),
    )
    .prompt(Prompt::new(
        "test_prompt_with_image",
        "A prompt with an image.",
        |_| {
            Ok(vec![
                PromptMessage::user(Content::image(RED_PIXEL_PNG, "image/png")),
                PromptMessage::user(Content::text("Please analyze the image above.")),
            ])
        },
    ))
}

/// A required argument (the server checked it is there).
fn arg<'a>(args: &'a warden::PromptArguments, name: &str) -> Result<&'a str, GuardError> {
    args.get(name)
        .map(String::as_str)
        .ok_or_else(|| GuardError::invalid_input(name, "is required"))
}
