//! A guard's schemas rendered as the compact Rhai signature the coding-task
//! prompt shows, and `search_guards` answers with ([`crate::search`]). It
//! reads schemas, never edits them.
//!
//! - Arguments: `name: type`, `name?: type` when optional, `= default` when
//!   the schema has a `default` (serde defaults carry one).
//! - Conditionally required arguments: a property may carry
//!   [`REQUIRED_WHEN`] (a condition in words) and [`HINT`] (how to choose a
//!   value); they are listed under the signature. Guards declare them on the
//!   input type, e.g. `#[schemars(extend("x-required-when" = "n_trials > 1",
//!   "x-hint" = "..."))]`, so the framework never names a guard's fields.
//! - Outputs: fields with their types two levels down (a report's evidence
//!   is typed); deeper objects show their field names only.
//! - A number that may also be `null` or a string constant (the ±∞ wire
//!   convention) is `number*`; the constants seen are collected so the prompt
//!   can explain the star once.
//! - An output object type defined (`$defs`) by several guards, such as a
//!   report's finding, is shown by name and spelled out once (`shared_types`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::guard::Guard;

/// Schema keyword: when an optional argument is in fact required, in words
/// the model can check ("n_trials > 1").
pub const REQUIRED_WHEN: &str = "x-required-when";

/// Schema keyword: how to choose a value for an argument (shown with
/// [`REQUIRED_WHEN`]).
pub const HINT: &str = "x-hint";

/// Object levels of an output shown with field types; the next level shows
/// field names only, deeper ones `map`.
const TYPED_DEPTH: usize = 2;

/// Renders signatures, remembering what `number*` and shared names stood for.
#[derive(Debug, Clone, Default)]
pub struct Renderer {
    /// Non-number alternatives seen in `number*` unions (`null`, `"Infinity"`, …).
    pub specials: BTreeSet<String>,
    /// Output `$defs` names shown by name ([`shared_types`]).
    shared: BTreeSet<String>,
    /// Shared names used so far → their rendered type.
    pub used: BTreeMap<String, String>,
}

/// The output object types (`$defs` names) that at least two guards define:
/// the prompt names them instead of repeating them.
pub fn shared_types<'a>(guards: impl Iterator<Item = &'a Guard>) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for guard in guards {
        for (name, def) in defs_of(guard.output_schema()) {
            if def.get("properties").is_some() {
                *seen.entry(name).or_default() += 1;
            }
        }
    }
    seen.into_iter()
        .filter(|(_, n)| *n >= 2)
        .map(|(name, _)| name)
        .collect()
}

impl Renderer {
    /// A renderer that shows the `shared` output types by name.
    pub fn new(shared: BTreeSet<String>) -> Self {
        Self {
            shared,
            ..Self::default()
        }
    }

    /// `- name(#{args}) -> #{outputs}`, the conditional requirements, then the doc text.
    pub fn describe(&mut self, guard: &Guard) -> String {
        let head = self.head(guard);
        format!("{head}{}", indent(guard.description()))
    }

    /// [`Renderer::describe`] with the doc text cut to its first sentence
    /// (`crate::catalogue::summary`): the signature and its conditions
    /// whole, for a guard worth listing but not worth its whole doc.
    pub fn describe_brief(&mut self, guard: &Guard) -> String {
        let head = self.head(guard);
        format!("{head}  {}\n", crate::catalogue::summary(guard.description()))
    }

    /// The signature line and the conditional requirements under it.
    fn head(&mut self, guard: &Guard) -> String {
        let input = guard.input_schema();
        let defs = defs_of(input);
        let required = required_of(input);
        let mut arguments = Vec::new();
        let mut conditions = String::new();
        for (name, schema) in properties_of(input) {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            let mut argument = format!("{name}{optional}: {}", self.input_type(schema, &defs));
            if let Some(default) = schema.get("default").filter(|d| !d.is_null()) {
                argument.push_str(&format!(" = {default}"));
            }
            arguments.push(argument);
            if let Some(when) = schema.get(REQUIRED_WHEN).and_then(Value::as_str) {
                conditions.push_str(&format!("  {name} is required when {when}"));
                if let Some(hint) = schema.get(HINT).and_then(Value::as_str) {
                    conditions.push_str(&format!(": {hint}"));
                }
                conditions.push('\n');
            }
        }
        let output = guard.output_schema();
        let returns = self.output_type(&Value::Object(output.clone()), &defs_of(output), 0);
        format!(
            "- {}(#{{{}}}) -> {returns}\n{conditions}",
            guard.tool_name(),
            arguments.join(", ")
        )
    }

    /// An argument's type; objects stay `map` (their shapes are in the doc text).
    fn input_type(&mut self, schema: &Value, defs: &Map<String, Value>) -> String {
        self.type_of(schema, defs, usize::MAX)
    }

    /// An output's type, objects expanded down to [`TYPED_DEPTH`].
    fn output_type(&mut self, schema: &Value, defs: &Map<String, Value>, depth: usize) -> String {
        self.type_of(schema, defs, depth)
    }

    /// A short type for a schema: `number`, `"call"|"put"`, `array of number*`,
    /// `#{a: number, b?: string}`…
    fn type_of(&mut self, schema: &Value, defs: &Map<String, Value>, depth: usize) -> String {
        let name = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.rsplit('/').next())
            .filter(|name| depth != usize::MAX && self.shared.contains(*name));
        if let (Some(name), Some(def)) = (name, name.and_then(|n| defs.get(n))) {
            if !self.used.contains_key(name) {
                self.used.insert(name.to_string(), String::new());
                let spelled = self.type_of(def, defs, 1);
                self.used.insert(name.to_string(), spelled);
            }
            return name.to_string();
        }
        let schema = resolve(schema, defs);
        if let Some(constant) = schema.get("const") {
            return constant.to_string();
        }
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            return values.iter().map(Value::to_string).collect::<Vec<_>>().join("|");
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(options) = schema.get(key).and_then(Value::as_array) {
                return self.union(options, defs, depth);
            }
        }
        match schema.get("type") {
            Some(Value::String(kind)) if kind == "array" => {
                let item = match schema.get("items") {
                    Some(items) => self.type_of(items, defs, depth),
                    None => "any".into(),
                };
                format!("array of {item}")
            }
            Some(Value::String(kind)) if kind == "object" => self.object(schema, defs, depth),
            Some(Value::String(kind)) => kind.clone(),
            Some(Value::Array(kinds)) => {
                let kinds: Vec<&str> = kinds.iter().filter_map(Value::as_str).collect();
                match kinds.iter().find(|k| **k != "null") {
                    // ["object", "null"] and the like: the non-null type, rendered in full.
                    Some(kind) if kinds.len() == 2 => {
                        let mut single = schema.clone();
                        single["type"] = Value::String((*kind).to_string());
                        self.type_of(&single, defs, depth)
                    }
                    _ => kinds
                        .into_iter()
                        .filter(|k| *k != "null")
                        .collect::<Vec<_>>()
                        .join(" or "),
                }
            }
            _ => "any".into(),
        }
    }

    /// `number*` for a number that may be null or a constant; otherwise the
    /// alternatives without `null` (optionality is shown by `?`).
    fn union(&mut self, options: &[Value], defs: &Map<String, Value>, depth: usize) -> String {
        let options: Vec<Value> = options.iter().map(|o| resolve(o, defs).clone()).collect();
        let numeric = |o: &Value| matches!(o.get("type").and_then(Value::as_str), Some("number" | "integer"));
        let special =
            |o: &Value| o.get("type").and_then(Value::as_str) == Some("null") || constants(o).is_some();
        if options.iter().any(numeric) && options.iter().all(|o| numeric(o) || special(o)) {
            for option in options.iter().filter(|o| !numeric(o)) {
                match constants(option) {
                    Some(values) => self.specials.extend(values),
                    None => {
                        self.specials.insert("null".into());
                    }
                }
            }
            let number = options.iter().find(|o| numeric(o)).and_then(|o| o.get("type"));
            return format!("{}*", number.and_then(Value::as_str).unwrap_or("number"));
        }
        let kept: Vec<&Value> = options
            .iter()
            .filter(|o| o.get("type").and_then(Value::as_str) != Some("null"))
            .collect();
        let mut kinds: Vec<String> = kept.iter().map(|o| self.type_of(o, defs, depth)).collect();
        kinds.dedup();
        let all_constants = kept.iter().all(|o| constants(o).is_some());
        kinds.join(if all_constants { "|" } else { " or " })
    }

    /// `#{name: type, optional?: type}` within [`TYPED_DEPTH`], `#{names}`
    /// one level below, `map` beyond or without properties.
    fn object(&mut self, schema: &Value, defs: &Map<String, Value>, depth: usize) -> String {
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return "map".into();
        };
        if depth > TYPED_DEPTH {
            return "map".into();
        }
        let required = required_of(schema.as_object().unwrap_or(&Map::new()))
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>();
        let fields: Vec<String> = properties
            .iter()
            .map(|(name, field)| {
                let optional = if required.contains(name) { "" } else { "?" };
                if depth == TYPED_DEPTH {
                    format!("{name}{optional}")
                } else {
                    format!("{name}{optional}: {}", self.type_of(field, defs, depth + 1))
                }
            })
            .collect();
        format!("#{{{}}}", fields.join(", "))
    }
}

/// A doc text indented two spaces under its signature; blank lines stay
/// empty (indenting them costs every prompt bytes and says nothing).
pub fn indent(doc: &str) -> String {
    doc.lines()
        .map(|l| {
            if l.trim().is_empty() {
                "\n".to_string()
            } else {
                format!("  {l}\n")
            }
        })
        .collect()
}

/// Follows a local `$ref` into `defs` (the schema itself otherwise).
fn resolve<'a>(schema: &'a Value, defs: &'a Map<String, Value>) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let name = reference.rsplit('/').next().unwrap_or_default();
            defs.get(name).map_or(schema, |def| resolve(def, defs))
        }
        None => schema,
    }
}

/// The string constants a schema allows, when it is only constants.
fn constants(schema: &Value) -> Option<Vec<String>> {
    if let Some(constant) = schema.get("const") {
        return Some(vec![constant.to_string()]);
    }
    let values = schema.get("enum")?.as_array()?;
    Some(values.iter().map(Value::to_string).collect())
}

fn defs_of(schema: &Map<String, Value>) -> Map<String, Value> {
    schema
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn required_of(schema: &Map<String, Value>) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn properties_of(schema: &Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::GuardError;
    use crate::guard::guard;

    /// Fits a model to data.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct FitInput {
        /// Trials tried.
        trials: u64,
        /// Level.
        #[serde(default = "level")]
        level: f64,
        /// Spread of the trials.
        #[serde(default)]
        #[schemars(extend("x-required-when" = "trials > 1", "x-hint" = "their variance"))]
        spread: Option<f64>,
    }

    fn level() -> f64 {
        0.95
    }

    /// A fitted value, maybe infinite.
    #[derive(serde::Serialize, schemars::JsonSchema)]
    struct FitOutput {
        /// Value or a special.
        #[schemars(with = "Special")]
        value: f64,
        /// Nested rows.
        rows: Vec<Row>,
    }

    #[derive(serde::Serialize, schemars::JsonSchema)]
    struct Row {
        a: f64,
        b: String,
    }

    /// Schema-only: a number, "Infinity" or null.
    struct Special;

    impl schemars::JsonSchema for Special {
        fn schema_name() -> std::borrow::Cow<'static, str> {
            "Special".into()
        }
        fn inline_schema() -> bool {
            true
        }
        fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
            schemars::json_schema!({"anyOf": [{"type": "number"}, {"enum": ["Infinity"]}, {"type": "null"}]})
        }
    }

    fn fit(input: FitInput) -> Result<FitOutput, GuardError> {
        Ok(FitOutput {
            value: input.level,
            rows: Vec::new(),
        })
    }

    #[test]
    fn defaults_conditions_and_typed_outputs_are_rendered() {
        // Pins `= default`, the x-required-when line with its hint, number* and row field names.
        let mut renderer = Renderer::default();
        let text = renderer.describe(&guard(fit));
        assert!(
            text.starts_with(
                "- fit(#{level?: number = 0.95, spread?: number, trials: integer}) -> #{rows: array of #{a: number, b: string}, value: number*}\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("  spread is required when trials > 1: their variance\n"),
            "{text}"
        );
        assert!(text.ends_with("  Fits a model to data.\n"), "{text}");
        let specials: Vec<&str> = renderer.specials.iter().map(String::as_str).collect();
        assert_eq!(specials, ["\"Infinity\"", "null"]);
    }
}
