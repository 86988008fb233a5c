//! The check a block passes before it runs: every problem at once, with
//! its line, column and fix, and nothing executed.
//!
//! A model that misspells one argument used to spend a whole step (and its
//! guard calls) to learn of it, then a second step for the next typo. Here
//! the block is compiled and its AST walked against what the engine really
//! has: functions the engine knows (guards, helpers, the prelude, Rhai's
//! standard library, the script's own `fn`s), their arities, and each
//! guard's named arguments. A bare reserved word used as a map key (a parse
//! error) is reported with the quoting that fixes it, and the check then
//! goes on past it so the other problems show too.
//!
//! What the check cannot know it does not judge: a call through a variable
//! (a function pointer), a map built at run time, a guard whose schema
//! composes other schemas. Nor does it judge calls inside `try` / `catch`:
//! a script may call a guard wrongly on purpose there, to see its error.
//! It never runs code and never touches the door.
//!
//! Two mistakes that do not fail at all are caught too: a write to a `for`
//! loop's variable, which changes a copy and is lost (`copies`), and a
//! map held in a variable and passed to a guard, whose keys are followed
//! through straight-line code (`held`). A name the model reaches for by
//! meaning (`norm_ppf`, `vol`) is answered from `ALIASES` before spelling.

use std::collections::{BTreeMap, BTreeSet};

use rhai::{AST, ASTNode, Engine, Expr, Position, Scope, Stmt};
use serde_json::Value;

use warden_core::registry::Visible;

/// Reserved-word keys quoted, at most, while looking for more problems.
const MAX_REPAIRS: usize = 32;

/// Problems listed in one answer; the rest are counted.
const MAX_PROBLEMS: usize = 20;

/// Names the engine handles itself (not in its function list).
const ENGINE_KEYWORDS: &[&str] = &[
    "print",
    "debug",
    "type_of",
    "eval",
    "Fn",
    "call",
    "curry",
    "is_shared",
    "is_def_var",
    "is_def_fn",
];

/// Names a model reaches for by meaning → the name it means, looked up
/// (lower-cased) before spelling, which would turn `norm_ppf` into
/// `norm_pdf`, the density, where the quantile was meant. One table for
/// both unknown functions and a guard's unknown argument names; a meant
/// name is suggested only where it exists (a function this caller can
/// call, an argument the guard takes), so an entry for a helper an app
/// does not register (`mean`, `stdev`) says nothing there.
const ALIASES: &[(&str, &str)] = &[
    ("ppf", "norm_inv"),
    ("norm_ppf", "norm_inv"),
    ("quantile", "norm_inv"),
    ("norm_quantile", "norm_inv"),
    ("inverse_cdf", "norm_inv"),
    ("inv_cdf", "norm_inv"),
    ("norm_inv_cdf", "norm_inv"),
    ("qnorm", "norm_inv"),
    ("norminv", "norm_inv"),
    ("normsinv", "norm_inv"),
    ("cdf", "norm_cdf"),
    ("pnorm", "norm_cdf"),
    ("normsdist", "norm_cdf"),
    ("pdf", "norm_pdf"),
    ("dnorm", "norm_pdf"),
    ("avg", "mean"),
    ("average", "mean"),
    ("std", "stdev"),
    ("stddev", "stdev"),
    ("standard_deviation", "stdev"),
    ("vol", "volatility"),
    ("sigma", "volatility"),
    ("iv", "volatility"),
    ("r", "rate"),
    ("risk_free_rate", "rate"),
    ("interest_rate", "rate"),
    ("k", "strike"),
    ("expiry", "time_to_expiry"),
    ("maturity", "time_to_expiry"),
    ("ticker", "symbol"),
];

/// One problem: where, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

impl Problem {
    fn at(position: Position, message: String) -> Self {
        Self {
            line: position.line(),
            column: position.position(),
            message,
        }
    }
}

/// What the engine can call, by name → the argument counts it accepts.
/// Built once per worker, after every guard and helper is registered.
pub struct Known {
    functions: BTreeMap<String, BTreeSet<usize>>,
}

impl Known {
    pub fn of(engine: &Engine) -> Self {
        let mut functions: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
        for signature in engine.gen_fn_signatures(true) {
            let Some((name, rest)) = signature.split_once('(') else {
                continue;
            };
            if !is_identifier(name) {
                continue;
            }
            let params = rest.split(')').next().unwrap_or_default().trim();
            let arity = if params.is_empty() {
                0
            } else {
                params.split(',').count()
            };
            functions.entry(name.to_string()).or_default().insert(arity);
        }
        Self { functions }
    }
}

/// Compiles `code` as the worker will run it and checks it. `Ok` is the
/// AST to run; `Err` every problem found (the first parse error stops the
/// AST checks unless it is a repairable reserved-word key).
/// `registry` is the run's caller's view: a guard the policy denies it is
/// judged an unknown function, and never suggested.
pub fn check(
    engine: &Engine,
    known: &Known,
    registry: &Visible<'_>,
    scope: &Scope,
    earlier: &AST,
    code: &str,
) -> Result<AST, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut source = code.to_string();
    let ast = loop {
        match engine.compile_with_scope(scope, &source) {
            Ok(ast) => break Some(ast),
            Err(error) => {
                let position = error.1;
                match quote_bare_key(&source, position) {
                    Some((word, repaired)) if problems.len() < MAX_REPAIRS => {
                        problems.push(Problem::at(
                            position,
                            format!(
                                "'{word}' is a reserved word and cannot be a bare map key: quote it, \
#{{\"{word}\": ...}}, and read it as m[\"{word}\"]"
                            ),
                        ));
                        source = repaired;
                    }
                    _ => {
                        problems.push(Problem::at(position, format!("syntax error: {}", error.0)));
                        break None;
                    }
                }
            }
        }
    };
    if let Some(ast) = &ast {
        Walk::new(known, registry, scope, earlier, ast).run(&source, &mut problems);
    }
    match ast {
        Some(ast) if problems.is_empty() => Ok(ast),
        _ => Err(problems),
    }
}

/// When the parse error at `position` sits on `word:` right after `#{`
/// or `,`, the source with that key quoted.
fn quote_bare_key(source: &str, position: Position) -> Option<(String, String)> {
    let start = offset(source, position)?;
    let rest = &source[start..];
    let word: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if word.is_empty() || !rest[word.len()..].trim_start().starts_with(':') {
        return None;
    }
    let before = source[..start].trim_end();
    if !(before.ends_with("#{") || before.ends_with(',')) {
        return None;
    }
    let mut repaired = String::with_capacity(source.len() + 2);
    repaired.push_str(&source[..start]);
    repaired.push('"');
    repaired.push_str(&word);
    repaired.push('"');
    repaired.push_str(&source[start + word.len()..]);
    Some((word, repaired))
}

/// The byte offset in `source` of `position`; `None` for an
/// end-of-input or missing position.
fn offset(source: &str, position: Position) -> Option<usize> {
    // Rhai counts both from 1; a 0 (an end-of-input position) is no place.
    let line = position.line()?.checked_sub(1)?;
    let column = position.position()?.checked_sub(1)?;
    Some(
        source
            .split_inclusive('\n')
            .take(line)
            .map(str::len)
            .sum::<usize>()
            + source.lines().nth(line)?.char_indices().nth(column)?.0,
    )
}

/// One pass over a compiled block.
struct Walk<'a> {
    known: &'a Known,
    registry: &'a Visible<'a>,
    /// Functions the script defined (this block and earlier ones) → arities.
    script_fns: BTreeMap<String, BTreeSet<usize>>,
    /// Names that may hold a function pointer: variables and parameters.
    variables: BTreeSet<String>,
    ast: &'a AST,
}

impl<'a> Walk<'a> {
    fn new(known: &'a Known, registry: &'a Visible<'a>, scope: &Scope, earlier: &AST, ast: &'a AST) -> Self {
        let mut script_fns: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
        let mut variables: BTreeSet<String> = scope.iter_raw().map(|(name, ..)| name.to_string()).collect();
        for function in ast.iter_functions().chain(earlier.iter_functions()) {
            script_fns
                .entry(function.name.to_string())
                .or_default()
                .insert(function.params.len());
            variables.extend(function.params.iter().map(|p| p.to_string()));
        }
        ast.walk(&mut |path: &[ASTNode]| {
            if let Some(ASTNode::Stmt(Stmt::Var(var, ..))) = path.last() {
                variables.insert(var.0.name.to_string());
            }
            true
        });
        Self {
            known,
            registry,
            script_fns,
            variables,
            ast,
        }
    }

    /// Every problem of the block; `source` is the text it was compiled from.
    fn run(&self, source: &str, problems: &mut Vec<Problem>) {
        let mut found = Vec::new();
        self.ast.walk(&mut |path: &[ASTNode]| {
            let call = match path.last() {
                Some(ASTNode::Expr(Expr::FnCall(call, position))) => Some((call, position)),
                Some(ASTNode::Stmt(Stmt::FnCall(call, position))) => Some((call, position)),
                _ => None,
            };
            // A call inside try/catch may be meant to fail (a script
            // probing a guard's errors): it is not judged.
            let in_try = path
                .iter()
                .any(|node| matches!(node, ASTNode::Stmt(Stmt::TryCatch(..))));
            if let Some((call, position)) = call
                && call.op_token.is_none()
                && !in_try
            {
                self.call(&call.name, &call.args, *position, &mut found);
            }
            true
        });
        self.held_maps(&mut found);
        found.extend(copies::lost_writes(self.ast, source));
        // In reading order; problems without a place last.
        found.sort_by_key(|p| (p.line.is_none(), p.line, p.column));
        let extra = found.len().saturating_sub(MAX_PROBLEMS);
        found.truncate(MAX_PROBLEMS);
        problems.extend(found);
        if extra > 0 {
            problems.push(Problem {
                line: None,
                column: None,
                message: format!("{extra} more problem(s) of the same kinds"),
            });
        }
    }

    fn call(&self, name: &str, args: &[Expr], position: Position, found: &mut Vec<Problem>) {
        if !is_identifier(name) || ENGINE_KEYWORDS.contains(&name) || self.variables.contains(name) {
            return;
        }
        if let Some(arities) = self.script_fns.get(name) {
            if !arities.contains(&args.len()) {
                found.push(Problem::at(position, arity_message(name, arities, args.len())));
            }
            return;
        }
        if self.registry.get(name).is_some() {
            self.guard_call(name, args, position, found);
            return;
        }
        // The engine has every guard; a hidden one is, for this caller, unknown.
        let known = self
            .known
            .functions
            .get(name)
            .filter(|_| !self.registry.hides(name));
        match known {
            Some(arities) if !arities.contains(&args.len()) => {
                found.push(Problem::at(position, arity_message(name, arities, args.len())));
            }
            Some(_) => {
                if name == "map_call" {
                    self.map_call(args, found);
                }
            }
            None => found.push(Problem::at(position, self.unknown(name))),
        }
    }

    /// A guard takes one map; a literal map's keys are checked by name.
    fn guard_call(&self, name: &str, args: &[Expr], position: Position, found: &mut Vec<Problem>) {
        if args.len() != 1 {
            found.push(Problem::at(
                position,
                format!(
                    "{name} takes one map of named arguments, got {} argument(s): call {name}(#{{name: value, ...}})",
                    args.len()
                ),
            ));
            return;
        }
        if let Some((keys, position)) = literal_keys(&args[0]) {
            let keys: Vec<(&str, Position)> = keys.iter().map(|k| (k.as_str(), position)).collect();
            found.extend(self.arguments(name, &keys, position, ""));
        }
    }

    /// `map_call("guard", [#{...}, ...])` with a literal name and list.
    fn map_call(&self, args: &[Expr], found: &mut Vec<Problem>) {
        let Some(Expr::StringConstant(name, position)) = args.first() else {
            return;
        };
        if self.registry.get(name).is_none() {
            found.push(Problem::at(
                *position,
                format!("map_call: {}", self.unknown_guard(name)),
            ));
            return;
        }
        let items: Vec<Option<(Vec<String>, Position)>> = match args.get(1) {
            Some(Expr::Array(items, _)) => items.iter().map(literal_keys).collect(),
            // A list of constant maps is folded into one constant.
            Some(Expr::DynamicConstant(value, position)) => match value.read_lock::<rhai::Array>() {
                Some(items) => items.iter().map(|item| constant_keys(item, *position)).collect(),
                None => Vec::new(),
            },
            _ => Vec::new(),
        };
        for (index, item) in items.into_iter().enumerate() {
            if let Some((keys, position)) = item {
                let keys: Vec<(&str, Position)> = keys.iter().map(|k| (k.as_str(), position)).collect();
                found.extend(self.arguments(name, &keys, position, &format!("map_call item {index}: ")));
            }
        }
    }

    /// Unknown and missing required argument names of a map passed to
    /// guard `name`: each unknown key reported where it was written, the
    /// missing ones at `position`. Says nothing when the schema is
    /// composed (`allOf`/`anyOf`/`oneOf`) or accepts any key.
    fn arguments(
        &self,
        name: &str,
        keys: &[(&str, Position)],
        position: Position,
        prefix: &str,
    ) -> Vec<Problem> {
        let Some(guard) = self.registry.get(name) else {
            return Vec::new();
        };
        let schema = guard.input_schema();
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return Vec::new();
        };
        if ["allOf", "anyOf", "oneOf"]
            .iter()
            .any(|k| schema.contains_key(*k))
            || schema
                .get("additionalProperties")
                .is_some_and(|a| a != &Value::Bool(false))
        {
            return Vec::new();
        }
        let names: Vec<&str> = properties.keys().map(String::as_str).collect();
        let mut problems = Vec::new();
        for (key, at) in keys {
            if !properties.contains_key(*key) {
                let hint = match suggest(key, &names) {
                    Some(near) => format!("did you mean '{near}'? "),
                    None => String::new(),
                };
                problems.push(Problem::at(
                    *at,
                    format!(
                        "{prefix}{name} has no argument '{key}': {hint}its arguments are {}",
                        names.join(", ")
                    ),
                ));
            }
        }
        let missing: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|required| !keys.iter().any(|(key, _)| key == required))
            .collect();
        if !missing.is_empty() {
            problems.push(Problem::at(
                position,
                format!(
                    "{prefix}{name} is missing required argument(s) {}: add them to the map",
                    missing.join(", ")
                ),
            ));
        }
        problems
    }

    fn unknown(&self, name: &str) -> String {
        let candidates: Vec<&str> = self
            .known
            .functions
            .keys()
            .map(String::as_str)
            .filter(|candidate| !self.registry.hides(candidate))
            .chain(self.script_fns.keys().map(String::as_str))
            .collect();
        match suggest(name, &candidates) {
            Some(near) => format!("no function named '{name}': did you mean '{near}'?"),
            None => format!(
                "no function named '{name}': the functions that exist are listed in your instructions"
            ),
        }
    }

    fn unknown_guard(&self, name: &str) -> String {
        let names: Vec<&str> = self.registry.names().into_iter().collect();
        match suggest(name, &names) {
            Some(near) => format!("no guard named '{name}': did you mean '{near}'?"),
            None => format!("no guard named '{name}'"),
        }
    }
}

/// The keys of a map literal, whether kept as an expression or folded
/// into a constant by the optimizer; `None` for anything else.
fn literal_keys(expr: &Expr) -> Option<(Vec<String>, Position)> {
    match expr {
        Expr::Map(map, position) => Some((
            map.0.iter().map(|(key, _)| key.name.to_string()).collect(),
            *position,
        )),
        Expr::DynamicConstant(value, position) => constant_keys(value, *position),
        _ => None,
    }
}

/// The keys of a map literal, each where it was written (all at the
/// map when the optimizer folded it into a constant).
fn literal_key_places(expr: &Expr) -> Option<Vec<(String, Position)>> {
    match expr {
        Expr::Map(map, _) => Some(
            map.0
                .iter()
                .map(|(key, _)| (key.name.to_string(), key.pos))
                .collect(),
        ),
        _ => {
            let (keys, position) = literal_keys(expr)?;
            Some(keys.into_iter().map(|key| (key, position)).collect())
        }
    }
}

fn constant_keys(value: &rhai::Dynamic, position: Position) -> Option<(Vec<String>, Position)> {
    let map = value.read_lock::<rhai::Map>()?;
    Some((map.keys().map(|key| key.to_string()).collect(), position))
}

fn arity_message(name: &str, arities: &BTreeSet<usize>, got: usize) -> String {
    let takes: Vec<String> = arities.iter().map(usize::to_string).collect();
    format!("{name} takes {} argument(s), got {got}", takes.join(" or "))
}

/// What `word` most likely means among `candidates`: its alias in
/// [`ALIASES`] when that is a candidate, else the nearest by spelling.
fn suggest<'n>(word: &str, candidates: &[&'n str]) -> Option<&'n str> {
    let lower = word.to_lowercase();
    ALIASES
        .iter()
        .filter(|(alias, _)| *alias == lower)
        .find_map(|(_, meant)| candidates.iter().copied().find(|c| c == meant && *c != word))
        .or_else(|| nearest(word, candidates.iter().copied()))
}

/// The candidate closest to `word` by edit distance, if close enough to
/// be a likely typo (at most a third of the word, and at least 1).
fn nearest<'n>(word: &str, candidates: impl Iterator<Item = &'n str>) -> Option<&'n str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .filter(|c| *c != word)
        .map(|c| (edit_distance(word, c), c))
        .filter(|(distance, _)| *distance <= limit)
        .min()
        .map(|(_, c)| c)
}

/// Levenshtein distance, case-insensitive.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            current.push((previous[j] + cost).min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

fn is_identifier(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The variable a target or chain starts from: `c` of `c.a[0].b`.
fn root(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Variable(x, ..) => Some(x.1.as_str()),
        Expr::Dot(x, ..) | Expr::Index(x, ..) => root(&x.lhs),
        _ => None,
    }
}

mod copies;
mod held;

#[cfg(test)]
mod tests;
