//! App-registered MCP prompts: `prompts/list`, `prompts/get`, and the
//! argument completions `completion/complete` offers.
//!
//! A prompt is a message template a client shows its user ("review this
//! report", "explain this error"): the app that owns the guards knows which
//! requests are worth packaging. A prompt is rendered in the server
//! process from its string arguments, with no I/O of its own, so it needs
//! none of the executor's machinery (workers, deadlines, call slots). The
//! server checks required arguments before the render function runs, so
//! the function only sees complete input.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptResult, Reference, Role};

use crate::content::Content;
use crate::error::GuardError;

/// A prompt's arguments, by name (MCP prompt arguments are strings).
pub type PromptArguments = BTreeMap<String, String>;

type Render = Arc<dyn Fn(&PromptArguments) -> Result<Vec<PromptMessage>, GuardError> + Send + Sync>;

/// A prompt an app registers with `App::prompt`.
///
/// ```
/// # use warden_core as warden; // the `warden` facade re-exports these
/// use warden::{Content, Prompt, PromptArgument, PromptMessage};
///
/// let prompt = Prompt::new("review_trade", "Ask for a review of one trade.", |args| {
///     Ok(vec![PromptMessage::user(Content::text(format!(
///         "Review trade {} against the risk limits.",
///         args["trade_id"]
///     )))])
/// })
/// .argument(PromptArgument::new("trade_id", "The trade to review.").required());
/// assert_eq!(prompt.name(), "review_trade");
/// ```
#[derive(Clone)]
#[must_use = "a prompt does nothing until it is registered with App::prompt"]
pub struct Prompt {
    name: String,
    description: String,
    arguments: Vec<PromptArgument>,
    render: Render,
}

impl std::fmt::Debug for Prompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prompt")
            .field("name", &self.name)
            .field("arguments", &self.arguments)
            .finish_non_exhaustive()
    }
}

/// One argument of a [`Prompt`].
#[derive(Debug, Clone)]
pub struct PromptArgument {
    name: String,
    description: String,
    required: bool,
    /// Values `completion/complete` offers, filtered by the typed prefix.
    suggestions: Vec<String>,
}

/// One message of a rendered prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptMessage {
    assistant: bool,
    content: Content,
}

impl PromptMessage {
    /// A message from the user.
    pub fn user(content: Content) -> Self {
        Self {
            assistant: false,
            content,
        }
    }

    /// A message from the assistant (e.g. a worked example).
    pub fn assistant(content: Content) -> Self {
        Self {
            assistant: true,
            content,
        }
    }
}

impl PromptArgument {
    /// An optional argument.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            required: false,
            suggestions: Vec::new(),
        }
    }

    /// Makes the argument required: `prompts/get` without it is refused,
    /// naming it, before the render function runs.
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// Values a client may offer while the user types (`completion/complete`
    /// answers those starting with the typed text).
    pub fn suggest<S: Into<String>>(mut self, values: impl IntoIterator<Item = S>) -> Self {
        self.suggestions = values.into_iter().map(Into::into).collect();
        self
    }
}

impl Prompt {
    /// A prompt called `name`, described by `description`, rendered by
    /// `render` from its arguments.
    pub fn new<F>(name: impl Into<String>, description: impl Into<String>, render: F) -> Self
    where
        F: Fn(&PromptArguments) -> Result<Vec<PromptMessage>, GuardError> + Send + Sync + 'static,
    {
        Self {
            name: name.into(),
            description: description.into(),
            arguments: Vec::new(),
            render: Arc::new(render),
        }
    }

    /// Declares one argument (in the order clients show them).
    pub fn argument(mut self, argument: PromptArgument) -> Self {
        self.arguments.push(argument);
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `prompts/list` entry.
    fn listing(&self) -> rmcp::model::Prompt {
        let arguments = self
            .arguments
            .iter()
            .map(|a| {
                rmcp::model::PromptArgument::new(&a.name)
                    .with_description(&a.description)
                    .with_required(a.required)
            })
            .collect::<Vec<_>>();
        let arguments = (!arguments.is_empty()).then_some(arguments);
        rmcp::model::Prompt::new(&self.name, Some(&self.description), arguments)
    }

    /// Renders the prompt, refusing a missing required argument or an
    /// undeclared one by name.
    fn get(&self, arguments: PromptArguments) -> Result<GetPromptResult, ErrorData> {
        if let Some(missing) = self
            .arguments
            .iter()
            .find(|a| a.required && !arguments.contains_key(&a.name))
        {
            return Err(ErrorData::invalid_params(
                format!(
                    "prompt '{}' needs the argument '{}': {}",
                    self.name, missing.name, missing.description
                ),
                None,
            ));
        }
        if let Some(unknown) = arguments
            .keys()
            .find(|k| !self.arguments.iter().any(|a| &a.name == *k))
        {
            return Err(ErrorData::invalid_params(
                format!(
                    "prompt '{}' has no argument '{unknown}'; its arguments: {}",
                    self.name,
                    self.argument_names()
                ),
                None,
            ));
        }
        let messages = (self.render)(&arguments)
            .map_err(|e| ErrorData::invalid_params(format!("prompt '{}': {}", self.name, e.message), None))?;
        let messages = messages
            .into_iter()
            .map(|m| {
                let role = if m.assistant { Role::Assistant } else { Role::User };
                rmcp::model::PromptMessage::new(role, m.content.into_block())
            })
            .collect();
        Ok(GetPromptResult::new(messages).with_description(&self.description))
    }

    fn argument_names(&self) -> String {
        let names: Vec<&str> = self.arguments.iter().map(|a| a.name.as_str()).collect();
        if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        }
    }
}

/// The app's prompts, by name.
#[derive(Debug, Default)]
pub struct Prompts {
    by_name: BTreeMap<String, Prompt>,
}

impl Prompts {
    /// Registers `prompts`; a name may appear once.
    pub fn new(prompts: Vec<Prompt>) -> Result<Self, crate::registry::RegistryError> {
        let mut by_name = BTreeMap::new();
        for prompt in prompts {
            if prompt.name.is_empty() {
                return Err(crate::registry::RegistryError::UnnamedPrompt);
            }
            if by_name.contains_key(&prompt.name) {
                return Err(crate::registry::RegistryError::DuplicatePrompt(prompt.name));
            }
            by_name.insert(prompt.name.clone(), prompt);
        }
        Ok(Self { by_name })
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// `prompts/list`, in name order.
    pub fn list(&self) -> Vec<rmcp::model::Prompt> {
        self.by_name.values().map(Prompt::listing).collect()
    }

    /// `prompts/get`; an unknown name is refused naming the known ones.
    pub fn get(&self, name: &str, arguments: PromptArguments) -> Result<GetPromptResult, ErrorData> {
        let Some(prompt) = self.by_name.get(name) else {
            let known: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
            return Err(ErrorData::invalid_params(
                format!("unknown prompt '{name}'; available prompts: {}", known.join(", ")),
                None,
            ));
        };
        prompt.get(arguments)
    }

    /// The suggested values of `prompt`'s `argument` starting with `typed`
    /// (none for an unknown prompt or argument: completion is a hint).
    pub fn complete(&self, prompt: &str, argument: &str, typed: &str) -> Vec<String> {
        self.by_name
            .get(prompt)
            .and_then(|p| p.arguments.iter().find(|a| a.name == argument))
            .map(|a| {
                a.suggestions
                    .iter()
                    .filter(|s| s.starts_with(typed))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A `prompts/get` request's arguments as strings (MCP prompt arguments
/// are strings); another JSON type is refused naming the argument.
pub fn string_arguments(
    prompt: &str,
    arguments: Option<rmcp::model::JsonObject>,
) -> Result<PromptArguments, ErrorData> {
    arguments
        .unwrap_or_default()
        .into_iter()
        .map(|(name, value)| match value {
            serde_json::Value::String(text) => Ok((name, text)),
            _ => Err(ErrorData::invalid_params(
                format!("prompt '{prompt}': argument '{name}' must be a string"),
                None,
            )),
        })
        .collect()
}

/// `completion/complete`: a prompt argument's suggestions for the typed
/// prefix (at most MCP's 100, with the total); nothing for a resource
/// template, whose variables have no suggestions.
pub fn complete(prompts: &Prompts, request: &CompleteRequestParams) -> CompleteResult {
    let mut values = match &request.r#ref {
        Reference::Prompt(reference) => {
            prompts.complete(&reference.name, &request.argument.name, &request.argument.value)
        }
        _ => Vec::new(),
    };
    let total = u32::try_from(values.len()).unwrap_or(u32::MAX);
    let has_more = values.len() > CompletionInfo::MAX_VALUES;
    values.truncate(CompletionInfo::MAX_VALUES);
    let info = CompletionInfo::with_pagination(values, Some(total), has_more).unwrap_or_default();
    CompleteResult::new(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn greeting() -> Prompt {
        Prompt::new("greet", "Greets someone.", |args| {
            Ok(vec![PromptMessage::user(Content::text(format!(
                "Hello {}",
                args["who"]
            )))])
        })
        .argument(
            PromptArgument::new("who", "Who to greet.")
                .required()
                .suggest(["world", "warden", "team"]),
        )
    }

    fn args(pairs: &[(&str, &str)]) -> PromptArguments {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn get_checks_arguments_by_name_before_rendering() {
        // Missing required and undeclared arguments are refused naming them; good ones render.
        let prompts = Prompts::new(vec![greeting()]).expect("prompts");
        let missing = prompts.get("greet", args(&[])).unwrap_err();
        assert!(
            missing.message.contains("needs the argument 'who'"),
            "{missing:?}"
        );
        let unknown = prompts
            .get("greet", args(&[("who", "x"), ("extra", "y")]))
            .unwrap_err();
        assert!(unknown.message.contains("no argument 'extra'"), "{unknown:?}");
        let none = prompts.get("nope", args(&[])).unwrap_err();
        assert!(none.message.contains("available prompts: greet"), "{none:?}");
        let ok = prompts.get("greet", args(&[("who", "team")])).expect("renders");
        let json = serde_json::to_value(&ok.messages).expect("json");
        assert_eq!(json[0]["content"]["text"], "Hello team");
        assert_eq!(json[0]["role"], "user");
    }

    #[test]
    fn completion_offers_suggestions_by_prefix_and_names_are_unique() {
        // Only values starting with the typed text; a second prompt of the same name is refused.
        let prompts = Prompts::new(vec![greeting()]).expect("prompts");
        assert_eq!(prompts.complete("greet", "who", "w"), vec!["world", "warden"]);
        assert!(prompts.complete("greet", "other", "").is_empty());
        assert!(Prompts::new(vec![greeting(), greeting()]).is_err());
    }
}
