//! Confirmation before a side effect: a guard annotated `destructive`
//! runs from a script, a coding task or a batch only once the person
//! behind the client has confirmed that one call — a form naming the guard and its
//! arguments — and is refused with the reason where nobody can be asked
//! (a detached MCP task, a client without elicitation, the CLI). Direct
//! calls are the person's own deliberate act and are not asked again.
//! Every answer is recorded as a `destructive_call_confirmed` event
//! (`approved`, the answer's `action`, the arguments' receipt hash).

use serde_json::{Value, json};

use crate::ask::{Asker, Question};
use crate::error::{GuardError, codes};
use crate::events::{Events, Origin};
use crate::guard::Guard;

/// Characters of the arguments' JSON the form shows at most: 2,000.
const SHOWN_ARGUMENTS: usize = 2_000;

/// `Ok` when `guard` may run with `arguments` from a script: it is not
/// destructive, or the person confirmed this call through `asker` before
/// `deadline`. Blocks while the person decides (call it off the async
/// runtime's workers).
pub fn destructive_call(
    guard: &Guard,
    arguments: &Value,
    origin: &Origin,
    events: &Events,
    asker: Option<&Asker>,
    deadline: std::time::Instant,
) -> Result<(), GuardError> {
    if !guard.hints.destructive {
        return Ok(());
    }
    let name = &guard.name;
    let Some(asker) = asker else {
        return Err(GuardError::new(
            codes::FORBIDDEN,
            format!(
                "'{name}' is annotated destructive: from a script it runs only when the person confirms the call, and nobody can be asked here (a detached task, or a client without elicitation); call it directly instead"
            ),
        ));
    };
    let mut shown = arguments.to_string();
    if shown.len() > SHOWN_ARGUMENTS {
        let cut = (0..=SHOWN_ARGUMENTS)
            .rev()
            .find(|&i| shown.is_char_boundary(i))
            .unwrap_or(0);
        shown.truncate(cut);
        shown.push('…');
    }
    let question = Question::Elicit {
        message: format!(
            "A {} wants to call '{name}', which is annotated destructive (it changes something outside Warden), with these arguments: {shown}. Run it?",
            if origin.mode == "coding_agent" {
                "coding task"
            } else {
                "script"
            }
        ),
        requested_schema: json!({
            "type": "object",
            "properties": {"confirm": {"type": "boolean", "title": format!("Run {name}"), "default": false}},
            "required": ["confirm"]
        }),
    };
    let answer = asker(question, Some(deadline));
    let (approved, action) = match &answer {
        Ok(answer) => (
            answer["action"] == "accept" && answer["content"]["confirm"] == true,
            answer["action"].clone(),
        ),
        Err(error) => (false, json!(error.code)),
    };
    events.emit(
        origin,
        "destructive_call_confirmed",
        json!({"function": name, "approved": approved, "action": action,
               "arguments_sha256": crate::receipt::digest(arguments)}),
    );
    match answer {
        Ok(_) if approved => Ok(()),
        Ok(_) => Err(GuardError::new(
            codes::FORBIDDEN,
            format!("the person did not confirm the destructive call '{name}'; it did not run"),
        )),
        Err(error) => Err(GuardError::new(
            codes::FORBIDDEN,
            format!(
                "the destructive call '{name}' could not be confirmed, so it did not run: {}",
                error.message
            ),
        )),
    }
}

/// [`destructive_call`] from async code: the question waits on a blocking
/// thread, never on a runtime worker. `Ok` at once for a guard that is not
/// destructive.
pub async fn destructive_call_async(
    guard: &Guard,
    arguments: &Value,
    origin: &Origin,
    events: &Events,
    asker: Option<Asker>,
    deadline: std::time::Instant,
) -> Result<(), GuardError> {
    if !guard.hints.destructive {
        return Ok(());
    }
    let (guard, arguments, origin, events) =
        (guard.clone(), arguments.clone(), origin.clone(), events.clone());
    tokio::task::spawn_blocking(move || {
        destructive_call(&guard, &arguments, &origin, &events, asker.as_ref(), deadline)
    })
    .await
    .unwrap_or_else(|e| {
        Err(GuardError::failed(format!(
            "the confirmation ended abnormally: {e}"
        )))
    })
}
