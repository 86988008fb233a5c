//! App-registered MCP resources: fixed documents ([`StaticResource`]) and
//! URI templates read on demand ([`ResourceTemplate`]).
//!
//! Task artifacts (`warden://artifacts/…`, served by `mcp::resources`) are the
//! resources Warden makes itself; an app often has its own to offer next to
//! its guards: a methodology note, a schema, today's reference data by id.
//! Static resources are listed by `resources/list`; templates by
//! `resources/templates/list` and read by filling their `{variables}`
//! (RFC 6570 level 1: each variable matches one non-empty path segment,
//! percent-decoded). A template's read function runs in the server process
//! and should be quick: it has no deadline or worker of its own, like a
//! prompt's. Nothing here changes once the server runs, so a subscription
//! to one of these URIs is accepted and never fires.

use std::collections::BTreeMap;
use std::sync::Arc;

use percent_encoding::percent_decode_str;
use rmcp::ErrorData;
use rmcp::model::{ReadResourceResult, Resource};

use crate::content::{Body, Embedded};
use crate::error::GuardError;
use crate::registry::RegistryError;

/// The values of a template's variables, by name.
pub type TemplateVariables = BTreeMap<String, String>;

type Read = Arc<dyn Fn(&TemplateVariables) -> Result<Body, GuardError> + Send + Sync>;

/// A fixed resource an app registers with `App::static_resource`.
///
/// ```
/// # use warden_core as warden; // the `warden` facade re-exports these
/// use warden::{Body, StaticResource};
///
/// let note = StaticResource::new("docs://methodology", "methodology", "text/markdown",
///     Body::text("# How limits are set\n..."))
///     .description("How the risk limits are derived.");
/// assert_eq!(note.uri(), "docs://methodology");
/// ```
#[derive(Debug, Clone)]
#[must_use = "a resource does nothing until it is registered with App::static_resource"]
pub struct StaticResource {
    uri: String,
    name: String,
    description: Option<String>,
    mime_type: String,
    body: Body,
}

impl StaticResource {
    /// The resource at `uri`, shown as `name`, with its MIME type and body.
    pub fn new(
        uri: impl Into<String>,
        name: impl Into<String>,
        mime_type: impl Into<String>,
        body: Body,
    ) -> Self {
        Self {
            uri: uri.into(),
            name: name.into(),
            description: None,
            mime_type: mime_type.into(),
            body,
        }
    }

    /// A sentence clients may show next to the name.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    pub fn uri(&self) -> &str {
        &self.uri
    }
}

/// A URI template an app registers with `App::resource_template`;
/// `read` makes the body from the variables.
///
/// ```
/// # use warden_core as warden; // the `warden` facade re-exports these
/// use warden::{Body, ResourceTemplate};
///
/// let by_id = ResourceTemplate::new("data://trades/{id}", "trade", "application/json", |vars| {
///     Ok(Body::text(format!("{{\"id\":\"{}\"}}", vars["id"])))
/// });
/// assert_eq!(by_id.uri_template(), "data://trades/{id}");
/// ```
#[derive(Clone)]
#[must_use = "a template does nothing until it is registered with App::resource_template"]
pub struct ResourceTemplate {
    template: String,
    name: String,
    description: Option<String>,
    mime_type: String,
    read: Read,
}

impl std::fmt::Debug for ResourceTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceTemplate")
            .field("template", &self.template)
            .finish_non_exhaustive()
    }
}

impl ResourceTemplate {
    /// The template `uri_template` (e.g. `data://trades/{id}`), shown as
    /// `name`; `read` answers for one set of variable values.
    pub fn new<F>(
        uri_template: impl Into<String>,
        name: impl Into<String>,
        mime_type: impl Into<String>,
        read: F,
    ) -> Self
    where
        F: Fn(&TemplateVariables) -> Result<Body, GuardError> + Send + Sync + 'static,
    {
        Self {
            template: uri_template.into(),
            name: name.into(),
            description: None,
            mime_type: mime_type.into(),
            read: Arc::new(read),
        }
    }

    /// A sentence clients may show next to the name.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    pub fn uri_template(&self) -> &str {
        &self.template
    }
}

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Literal(String),
    Variable(String),
}

/// A registered template with its parsed parts.
#[derive(Debug)]
struct Parsed {
    template: ResourceTemplate,
    parts: Vec<Part>,
}

/// The app's static resources (by URI) and templates (in registration order).
#[derive(Debug, Default)]
pub struct AppResources {
    statics: BTreeMap<String, StaticResource>,
    templates: Vec<Parsed>,
}

impl AppResources {
    /// Validates and registers; URIs are unique and may not use Warden's
    /// artifact scheme.
    pub fn new(
        statics: Vec<StaticResource>,
        templates: Vec<ResourceTemplate>,
    ) -> Result<Self, RegistryError> {
        let mut by_uri = BTreeMap::new();
        for resource in statics {
            reserved(&resource.uri)?;
            if by_uri.contains_key(&resource.uri) {
                return Err(RegistryError::DuplicateResource(resource.uri));
            }
            by_uri.insert(resource.uri.clone(), resource);
        }
        let mut parsed = Vec::new();
        for template in templates {
            reserved(&template.template)?;
            if parsed
                .iter()
                .any(|p: &Parsed| p.template.template == template.template)
            {
                return Err(RegistryError::DuplicateResource(template.template));
            }
            let parts = parse(&template.template)
                .map_err(|reason| RegistryError::BadTemplate(template.template.clone(), reason))?;
            parsed.push(Parsed { template, parts });
        }
        Ok(Self {
            statics: by_uri,
            templates: parsed,
        })
    }

    /// `resources/list`: the static resources, by URI.
    pub fn list(&self) -> Vec<Resource> {
        self.statics
            .values()
            .map(|r| {
                let mut resource = Resource::new(&r.uri, &r.name).with_mime_type(&r.mime_type);
                resource.description = r.description.clone();
                resource
            })
            .collect()
    }

    /// The templates `resources/templates/list` adds to the artifact one.
    pub fn templates(&self) -> Vec<rmcp::model::ResourceTemplate> {
        self.templates
            .iter()
            .map(|p| {
                let t = &p.template;
                let mut template =
                    rmcp::model::ResourceTemplate::new(&t.template, &t.name).with_mime_type(&t.mime_type);
                template.description = t.description.clone();
                template
            })
            .collect()
    }

    /// Whether `uri` names one of these resources (static, or matching a
    /// template).
    pub fn knows(&self, uri: &str) -> bool {
        self.statics.contains_key(uri) || self.templates.iter().any(|p| matches(&p.parts, uri).is_some())
    }

    /// `resources/read` for an app URI; `None` when it is not one of them.
    pub fn read(&self, uri: &str) -> Option<Result<ReadResourceResult, ErrorData>> {
        if let Some(resource) = self.statics.get(uri) {
            return Some(Ok(one(uri, &resource.mime_type, resource.body.clone())));
        }
        self.templates.iter().find_map(|parsed| {
            let variables = matches(&parsed.parts, uri)?;
            let t = &parsed.template;
            Some(
                (t.read)(&variables)
                    .map(|body| one(uri, &t.mime_type, body))
                    .map_err(|e| ErrorData::invalid_params(format!("resource '{uri}': {}", e.message), None)),
            )
        })
    }
}

fn one(uri: &str, mime_type: &str, body: Body) -> ReadResourceResult {
    let contents = Embedded {
        uri: uri.into(),
        mime_type: mime_type.into(),
        body,
    };
    ReadResourceResult::new(vec![contents.into_contents()])
}

/// Refuses URIs under Warden's own artifact scheme.
fn reserved(uri: &str) -> Result<(), RegistryError> {
    if uri.starts_with(crate::registry::ARTIFACT_URI_SCHEME)
        || uri.starts_with(crate::registry::VIEW_URI_PREFIX)
    {
        return Err(RegistryError::ReservedResourceUri(uri.into()));
    }
    Ok(())
}

/// What is wrong with a resource template (the detail of
/// [`RegistryError::BadTemplate`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("two variables need a literal between them")]
    AdjacentVariables,
    #[error("a '{{' has no closing '}}'")]
    Unclosed,
    #[error("variable '{{{0}}}' must be a non-empty name of letters, digits and '_'")]
    BadName(String),
    #[error("a '}}' has no opening '{{'")]
    Unopened,
    #[error("it has no {{variable}}: register it with App::static_resource")]
    NoVariable,
}

/// Splits a level-1 template into literals and variables. Two variables
/// must be separated by a literal, or a URI could split between them in
/// more than one way.
fn parse(template: &str) -> Result<Vec<Part>, TemplateError> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            parts.push(Part::Literal(rest[..open].to_string()));
        } else if matches!(parts.last(), Some(Part::Variable(_))) {
            return Err(TemplateError::AdjacentVariables);
        }
        let close = rest[open..].find('}').ok_or(TemplateError::Unclosed)?;
        let name = &rest[open + 1..open + close];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(TemplateError::BadName(name.to_string()));
        }
        parts.push(Part::Variable(name.to_string()));
        rest = &rest[open + close + 1..];
    }
    if rest.contains('}') {
        return Err(TemplateError::Unopened);
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest.to_string()));
    }
    if !parts.iter().any(|p| matches!(p, Part::Variable(_))) {
        return Err(TemplateError::NoVariable);
    }
    Ok(parts)
}

/// The variables when `uri` matches `parts`: literals exactly, each
/// variable one non-empty segment (up to the next literal, no `/`).
fn matches(parts: &[Part], uri: &str) -> Option<TemplateVariables> {
    let mut variables = TemplateVariables::new();
    let mut rest = uri;
    for (i, part) in parts.iter().enumerate() {
        match part {
            Part::Literal(literal) => rest = rest.strip_prefix(literal.as_str())?,
            Part::Variable(name) => {
                let end = match parts.get(i + 1) {
                    Some(Part::Literal(next)) => rest.find(next.as_str())?,
                    _ => rest.len(),
                };
                let raw = &rest[..end];
                if raw.is_empty() || raw.contains('/') {
                    return None;
                }
                let value = percent_decode_str(raw).decode_utf8().ok()?;
                variables.insert(name.clone(), value.into_owned());
                rest = &rest[end..];
            }
        }
    }
    rest.is_empty().then_some(variables)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources() -> AppResources {
        let statics = vec![StaticResource::new(
            "test://a",
            "a",
            "text/plain",
            Body::text("A"),
        )];
        let templates = vec![ResourceTemplate::new(
            "test://item/{id}/part/{part}",
            "item",
            "application/json",
            |v| Ok(Body::text(format!("{}:{}", v["id"], v["part"]))),
        )];
        AppResources::new(statics, templates).expect("valid")
    }

    fn text(result: &ReadResourceResult) -> serde_json::Value {
        serde_json::to_value(&result.contents[0]).expect("json")
    }

    #[test]
    fn templates_match_one_segment_per_variable() {
        // Variables take one non-empty, percent-decoded segment; anything else is not ours.
        let resources = resources();
        let read = resources
            .read("test://item/4%202/part/x")
            .expect("ours")
            .expect("reads");
        assert_eq!(text(&read)["text"], "4 2:x");
        assert_eq!(text(&read)["uri"], "test://item/4%202/part/x");
        assert!(resources.read("test://item//part/x").is_none());
        assert!(resources.read("test://item/a/b/part/x").is_none());
        assert!(resources.read("test://item/1/part/x/more").is_none());
        assert_eq!(
            text(&resources.read("test://a").expect("ours").expect("reads"))["text"],
            "A"
        );
        assert!(resources.knows("test://item/1/part/2") && !resources.knows("test://b"));
    }

    #[test]
    fn bad_registrations_are_refused_with_the_reason() {
        // Ambiguous or malformed templates, duplicates and the artifact scheme are refused.
        let template = |t: &str| ResourceTemplate::new(t, "t", "text/plain", |_| Ok(Body::text("")));
        for (bad, reason) in [
            ("x://{a}{b}", "two variables need a literal between them"),
            ("x://{a", "a '{' has no closing '}'"),
            ("x://a}", "a '}' has no opening '{'"),
            (
                "x://{}",
                "variable '{}' must be a non-empty name of letters, digits and '_'",
            ),
            (
                "x://plain",
                "it has no {variable}: register it with App::static_resource",
            ),
        ] {
            let refused = AppResources::new(vec![], vec![template(bad)])
                .map(drop)
                .unwrap_err();
            assert!(
                matches!(refused, RegistryError::BadTemplate(..)),
                "{bad} should be refused"
            );
            assert_eq!(
                refused.to_string(),
                format!("resource template '{bad}' is invalid: {reason}")
            );
        }
        let artifact = StaticResource::new("warden://artifacts/x", "x", "text/plain", Body::text(""));
        assert_eq!(
            AppResources::new(vec![artifact], vec![]).unwrap_err(),
            RegistryError::ReservedResourceUri("warden://artifacts/x".into())
        );
        let view = StaticResource::new("ui://warden/task.html", "v", "text/html", Body::text(""));
        assert_eq!(
            AppResources::new(vec![view], vec![]).unwrap_err(),
            RegistryError::ReservedResourceUri("ui://warden/task.html".into())
        );
        let twice = vec![
            StaticResource::new("x://a", "a", "text/plain", Body::text("")),
            StaticResource::new("x://a", "b", "text/plain", Body::text("")),
        ];
        assert_eq!(
            AppResources::new(twice, vec![]).unwrap_err(),
            RegistryError::DuplicateResource("x://a".into())
        );
    }
}
