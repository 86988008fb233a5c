//! The system prompt, generated from the registry and the limits.
//!
//! The rules (how to reply, the budgets from `limits`, the final-answer
//! contract and how its `task_type` maps to the task's status), then each
//! guard as [`super::signature`] renders it (arguments with defaults and
//! conditional requirements, typed outputs, doc text), then the script-only
//! functions. Nothing here is written by hand per guard.

use serde_json::json;

use crate::limits::{
    AGENT_MAX_MODEL_CALLS, AGENT_MAX_OBSERVATION_BYTES, AGENT_MAX_PROMPT_BYTES, AGENT_MAX_STEPS,
    AGENT_PLANNING_INTERVAL,
};
use warden_core::guard::Mode;
use warden_core::registry::Registry;
use warden_core::signature::{Renderer, shared_types};
use warden_script::limits::MAX_MAP_CALL_ITEMS;
use warden_task::contract::{self, TASK_TYPES};
use warden_task::limits::AGENT_MAX_GUARD_CALLS;

const RULES: &str = r#"You are a careful quantitative analyst. You answer by writing Rhai scripts that call the
functions below, which run in a sandbox. Reply with exactly ONE fenced code block per message:

```rhai
// your code
```

Rules:
- Each function takes ONE object map of named arguments, f(#{name: value, ...}), and returns a map.
  Use floats for numbers (100.0, not 100) where the type is number. `name?` is optional; `= v` is
  its default. [inline] functions run in the sandbox; the others are calls to the server.
- Variables and functions persist between your messages; the last value, printed output
  (print(...)) and any error come back to you.
- Each block is checked before it runs (syntax, unknown functions, argument names, arity): a block
  with problems does not run and uses no step; you get every problem with its line.
- Errors are catchable: try { ... } catch (e) { print(e.code + ": " + e.message); } (a statement).
- Helpers:
  map_call("name", [#{...}, ...])  // guard `name` once per map, at most {MAP_ITEMS} maps, in ONE server
                                   // call; returns [#{ok: output} or #{error: #{code, message}}, ...] in order
  write_artifact(filename, content[, "base64"])  // outputs/<filename>, 1 MiB max; returns #{path, bytes}
  read_written_artifact(filename)  // a file you wrote, as a string
  to_csv(rows, ["col1", "col2"])   // rows: array of maps -> CSV text
  line_chart(rows, #{x: "col", y: "col" or ["a", "b"], series?: "col", title?, x_label?, y_label?,
    width?, height?})  // returns a chart; scatter_chart(rows, #{...}) takes the same options
  bar_chart(rows, #{x: "label_col", y: "col", title: "..."})  // one bar (group) per row
  heatmap(rows, #{x: "spot", y: "vol", z: "price", title?, z_label?})  // one row per (x, y)
  write_artifact("surface.png", chart)  // draws a chart, .png or .svg
  report(#{title: "...", answer: #{summary, metrics, assumptions}, sections: [#{heading, text},
    #{heading, table: rows, columns?: ["a"]}, #{heading, chart}]})  // writes report.html, returns its path
- Math prelude (exact to ~1e-15, no budget): erf(x) erfc(x) norm_pdf(x) norm_cdf(x) norm_inv(p).
- Numbers for people: fmt(x, digits) -> "55.00", fmt_pct(x, digits) -> "55.0%" (x = 0.55). Use them
  in summaries and printed text, never raw floats like 55.00000000000001.
- for x in arr { x.k = ... } changes a COPY of each item: write for i in 0..arr.len() { arr[i].k = ... }.
- There is no file system, network, eval or import.
"#;

/// Built-in functions of the engine a model may rely on, by group, with a
/// note on syntax: the names come from Rhai's standard package (a test
/// checks each exists in the worker's engine).
pub(crate) const BUILTINS: &[(&str, &[&str], &str)] = &[
    (
        "math",
        &[
            "abs",
            "sign",
            "sqrt",
            "exp",
            "ln",
            "log",
            "floor",
            "ceiling",
            "round",
            "int",
            "fraction",
            "sin",
            "cos",
            "tan",
            "asin",
            "acos",
            "atan",
            "sinh",
            "cosh",
            "tanh",
            "min",
            "max",
            "to_float",
            "to_int",
            "is_nan",
            "is_finite",
            "PI",
            "E",
        ],
        "log(x) is base 10, log(x, base); PI(), E(); x ** y",
    ),
    (
        "arrays",
        &[
            "len", "push", "pop", "shift", "insert", "remove", "clear", "contains", "index_of", "sort",
            "reverse", "map", "filter", "reduce", "some", "all", "extract", "dedup", "zip", "range",
        ],
        "a + b joins; for x in a {...}; 0..n, 0..=n; reduce(|s, x| s + x, 0.0)",
    ),
    (
        "strings",
        &[
            "len",
            "trim",
            "to_upper",
            "to_lower",
            "contains",
            "starts_with",
            "ends_with",
            "split",
            "sub_string",
            "replace",
            "index_of",
            "to_string",
            "parse_float",
            "parse_int",
        ],
        "`text ${x}` interpolates",
    ),
    (
        "maps",
        &["keys", "values", "len", "contains", "remove"],
        "m.key or m[\"key\"]; \"key\" in m",
    ),
];

/// Words Rhai reserves: never variable names or bare map keys.
pub(crate) const RESERVED_WORDS: &[&str] = &[
    "Fn",
    "as",
    "async",
    "await",
    "break",
    "call",
    "case",
    "catch",
    "const",
    "continue",
    "curry",
    "debug",
    "default",
    "do",
    "else",
    "eval",
    "export",
    "false",
    "fn",
    "for",
    "go",
    "goto",
    "if",
    "import",
    "in",
    "is",
    "is_def_fn",
    "is_def_var",
    "is_shared",
    "let",
    "loop",
    "match",
    "module",
    "new",
    "nil",
    "null",
    "package",
    "print",
    "private",
    "protected",
    "public",
    "return",
    "shared",
    "spawn",
    "static",
    "super",
    "switch",
    "sync",
    "this",
    "thread",
    "throw",
    "true",
    "try",
    "type_of",
    "until",
    "use",
    "var",
    "void",
    "while",
    "with",
    "yield",
];

/// The whole system prompt for `registry`, within
/// [`AGENT_MAX_PROMPT_BYTES`]; `inline_calls` is the inline budget the
/// task enforces, `request` the task's own prompt (its words choose which
/// guards are shown with their full signatures: see the limit's docs).
/// `denied` are the guards the caller's policy refuses: left out, so the
/// model never plans with a function it cannot call.
pub(crate) fn system_prompt(
    registry: &Registry,
    denied: &std::collections::BTreeMap<String, String>,
    inline_calls: u64,
    timeout: std::time::Duration,
    request: &str,
) -> String {
    let mut text = RULES.replace("{MAP_ITEMS}", &MAX_MAP_CALL_ITEMS.to_string());
    text.push_str(&format!("- {}\n", builtins_line()));
    text.push_str(&format!("- {}\n", reserved_line()));
    text.push_str(&format!("- {}\n", answer_rule()));
    text.push_str(&format!("- {}\n", budget_line(inline_calls, timeout)));
    let offered: Vec<&warden_core::guard::Guard> = registry
        .for_model()
        .filter(|g| !denied.contains_key(g.tool_name()))
        .collect();
    let index = guard_index(&offered);
    let mut script_only = String::new();
    for function in registry.script_functions() {
        let doc = warden_core::signature::indent(function.description);
        script_only.push_str(&format!("- {}\n{doc}\n", function.signature));
    }
    if !script_only.is_empty() {
        script_only.insert_str(0, "\nScript-only functions [inline] (call them directly):\n");
    }
    // What the signatures may take: the bound less everything else, and
    // the headings and notes the signatures bring with them.
    const HEADING: &str = "\nFunctions for this task (search_guards finds the others):\n";
    let fixed = text.len() + index.len() + script_only.len() + HEADING.len();
    let mut room = AGENT_MAX_PROMPT_BYTES.saturating_sub(fixed);
    let mut renderer = Renderer::new(shared_types(offered.iter().copied()));
    // Each shown guard's brief and whole form, and whether it is whole.
    let mut shown: Vec<(String, String, bool)> = Vec::new();
    let ranked = by_relevance(&offered, request);
    let mut show_brief =
        |guard: &warden_core::guard::Guard, room: &mut usize, shown: &mut Vec<(String, String, bool)>| {
            let mut trial = renderer.clone();
            let whole = with_mode(guard, renderer.clone().describe(guard));
            let brief = with_mode(guard, trial.describe_brief(guard));
            let cost = brief.len() + notes(&trial).len() - notes(&renderer).len();
            if cost <= *room {
                *room -= cost;
                renderer = trial;
                shown.push((brief, whole, false));
            }
        };
    // The guards the request's words match, briefly, best first; then as
    // many of them whole as fit; then the others briefly while they fit;
    // the rest are in the index alone.
    for (guard, _) in ranked.iter().filter(|(_, relevant)| *relevant) {
        show_brief(guard, &mut room, &mut shown);
    }
    for (brief, whole, is_whole) in &mut shown {
        let extra = whole.len().saturating_sub(brief.len());
        if extra <= room {
            room -= extra;
            *is_whole = true;
        }
    }
    for (guard, _) in ranked.iter().filter(|(_, relevant)| !*relevant) {
        show_brief(guard, &mut room, &mut shown);
    }
    let functions: String = shown
        .into_iter()
        .map(|(brief, whole, is_whole)| if is_whole { whole } else { brief })
        .collect();
    text.push_str(&notes(&renderer));
    text.push_str(&index);
    if !functions.is_empty() {
        text.push_str(HEADING);
        text.push_str(&functions);
    }
    text.push_str(&script_only);
    text
}

/// A rendered guard marked `[inline]` when it is pure, ending in a blank line.
fn with_mode(guard: &warden_core::guard::Guard, mut described: String) -> String {
    if guard.mode() == Mode::Pure
        && let Some(end) = described.find('\n')
    {
        described.insert_str(end, " [inline]");
    }
    described.push('\n');
    described
}

/// The lines that explain what the shown signatures use: `number*`, and
/// each shared output type by name.
fn notes(renderer: &Renderer) -> String {
    let mut text = String::new();
    if !renderer.specials.is_empty() {
        let specials: Vec<&str> = renderer.specials.iter().map(String::as_str).collect();
        text.push_str(&format!(
            "- number* is a number or one of {} (JSON has no NaN or infinity).\n",
            specials.join(", ")
        ));
    }
    for (name, spelled) in &renderer.used {
        text.push_str(&format!("- {name} = {spelled}\n"));
    }
    text
}

/// Every guard the model may call, by category, and how to see one's
/// signature.
fn guard_index(offered: &[&warden_core::guard::Guard]) -> String {
    let mut by_category: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for guard in offered {
        by_category
            .entry(guard.category.as_str())
            .or_default()
            .push(guard.tool_name());
    }
    let mut text = String::from(
        "\nGuards by category. Not all are shown in full below: search_guards(\"a few words\") returns \
matching guards with their signatures, e.g. for g in search_guards(\"implied volatility\") { print(g.signature) }; \
search before you guess a name or its arguments.\n",
    );
    for (category, names) in by_category {
        text.push_str(&format!("  {category}: {}\n", names.join(", ")));
    }
    text
}

/// A guard is the request's when its score is at least this share of the
/// best guard's: a word most guards share ("check") makes the others
/// match a little, not relevant.
const RELEVANT_SHARE: f64 = 0.25;

/// `offered` in the order their signatures are worth showing, each with
/// whether it is the request's: by score (`warden_core::search::rank`),
/// then as registered.
fn by_relevance<'a>(
    offered: &[&'a warden_core::guard::Guard],
    request: &str,
) -> Vec<(&'a warden_core::guard::Guard, bool)> {
    let ranked = warden_core::search::rank(offered, request);
    let best = ranked.first().map_or(0.0, |(score, _)| *score);
    ranked
        .into_iter()
        .map(|(score, guard)| (guard, score > 0.0 && score >= best * RELEVANT_SHARE))
        .collect()
}

/// The built-ins, one group per line.
fn builtins_line() -> String {
    let mut line = String::from("Built-ins (nothing else exists):");
    for (group, names, note) in BUILTINS {
        line.push_str(&format!("\n  {group}: {}; {note}", names.join(" ")));
    }
    line
}

/// The reserved words, and what to do about a map key that is one.
fn reserved_line() -> String {
    format!(
        "Reserved words (not variable names or bare map keys: quote them, #{{\"call\": 1}}, m[\"call\"]): {}.",
        RESERVED_WORDS.join(" ")
    )
}

/// What is left of the budgets after a step, for the step's observation.
pub(crate) fn budget_left(
    steps_used: usize,
    model_calls_used: usize,
    calls_used: u64,
    inline_left: u64,
) -> String {
    format!(
        "Left: {} steps, {} replies, {} server calls, {} inline calls.",
        AGENT_MAX_STEPS.saturating_sub(steps_used),
        AGENT_MAX_MODEL_CALLS.saturating_sub(model_calls_used),
        AGENT_MAX_GUARD_CALLS.saturating_sub(calls_used),
        inline_left
    )
}

/// The budgets, from `limits` (and the inline budget the task enforces):
/// what a task may spend before it ends.
pub(crate) fn budget_line(inline_calls: u64, timeout: std::time::Duration) -> String {
    format!(
        "Budgets: {AGENT_MAX_STEPS} steps (a step is a code block that ran), {AGENT_MAX_MODEL_CALLS} \
replies, {AGENT_MAX_GUARD_CALLS} server calls (failed ones count; a map_call is 1), {inline_calls} \
inline calls, {} s for the whole task; each observation is cut at {} KiB. Past a call budget a call \
throws budget_exhausted; out of steps, replies or time the task fails. Every {AGENT_PLANNING_INTERVAL} \
steps you are told how many are used.",
        timeout.as_secs(),
        AGENT_MAX_OBSERVATION_BYTES / 1024
    )
}

/// How to finish, and which keys each `task_type` takes, asked of the
/// contract itself so the prompt cannot drift from it.
pub(crate) fn answer_rule() -> String {
    let mut with_metrics = Vec::new();
    for task_type in TASK_TYPES {
        let probe = json!({"task_type": task_type, "summary": "-", "metrics": {"m": 1}, "assumptions": []});
        if contract::check(&probe, 0, 1).is_ok() {
            with_metrics.push(*task_type);
        }
    }
    format!(
        "Finish with final_answer(#{{task_type, summary, metrics?, assumptions?}}): metrics (a map) only with \
{}; assumptions is an array of strings; no other keys; summary non-blank; numbers finite. task_type: \
analysis (needs a call of a function above, guard or script-only, that returned without error), \
no_action (only if you made no calls), needs_input (say what is missing, typed as \
missing: #{{field: #{{type: \"number\", description: \"…\"}}}} (string, number, integer or boolean; \
optional: true; or: [\"field\"] for alternatives): the person may be asked and you continue), unsupported (the functions cannot do it), failed; {} \
Output printed before final_answer is kept.",
        with_metrics.join(", "),
        status_rule()
    )
}
/// How `task_type` maps to the task's status, asked of the contract itself
/// so the prompt cannot drift from it.
pub(crate) fn status_rule() -> String {
    let (mut success, mut failed) = (Vec::new(), Vec::new());
    for task_type in TASK_TYPES {
        // One successful call and none made: every type's own preconditions hold.
        let probe = json!({"task_type": task_type, "summary": "-"});
        match contract::check(&probe, 0, 1).map(|answer| answer.status) {
            Ok(warden_task::TaskStatus::Success) => success.push(*task_type),
            Ok(_) => failed.push(*task_type),
            Err(_) => {}
        }
    }
    format!(
        "{} end success; {} end failed.",
        success.join(", "),
        failed.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_list_the_chart_helpers() {
        // Pins the prompt to the chart helpers a script really has.
        for name in warden_script::worker::charts::HELPERS {
            assert!(
                RULES.contains(&format!("{name}(")),
                "{name} missing from the prompt"
            );
        }
    }

    #[test]
    fn the_analysis_rule_says_what_counts_as_a_call() {
        // The analysis gate counts guards and script-only functions; the prompt says so.
        assert!(
            answer_rule().contains("guard or script-only"),
            "{}",
            answer_rule()
        );
    }

    #[test]
    fn the_answer_rule_says_which_keys_each_task_type_takes() {
        // Pins the keys per task_type to the contract: only analysis carries metrics.
        let rule = answer_rule();
        assert!(
            rule.contains("final_answer(#{task_type, summary, metrics?, assumptions?}): metrics (a map) only with analysis;"),
            "{rule}"
        );
    }

    #[test]
    fn the_status_rule_names_each_task_type_once() {
        // Pins the mapping the prompt states against the contract: unsupported and failed end failed.
        let rule = status_rule();
        assert!(
            rule.contains("analysis, no_action, needs_input end success; unsupported, failed end failed"),
            "{rule}"
        );
    }

    #[test]
    fn what_is_left_counts_down_from_the_limits() {
        // Pins the remaining-budget line: 12 − 2 steps, 16 − 3 replies, 100 − 40 calls, floored at 0.
        assert_eq!(
            budget_left(2, 3, 40, 500),
            "Left: 10 steps, 13 replies, 60 server calls, 500 inline calls."
        );
        assert_eq!(
            budget_left(99, 99, 999, 0),
            "Left: 0 steps, 0 replies, 0 server calls, 0 inline calls."
        );
    }

    #[test]
    fn the_budget_line_quotes_the_limits() {
        // Pins the numbers in the budget line to the limits module and the inline budget given.
        let line = budget_line(
            warden_task::limits::AGENT_MAX_INLINE_CALLS,
            std::time::Duration::from_secs(77),
        );
        for n in [
            AGENT_MAX_STEPS as u64,
            AGENT_MAX_MODEL_CALLS as u64,
            AGENT_MAX_GUARD_CALLS,
            warden_task::limits::AGENT_MAX_INLINE_CALLS,
            77,
            (AGENT_MAX_OBSERVATION_BYTES / 1024) as u64,
        ] {
            assert!(line.contains(&n.to_string()), "{line}");
        }
        assert!(line.contains("a step is a code block that ran"), "{line}");
        assert!(RULES.contains(&MAX_MAP_CALL_ITEMS.to_string()) || RULES.contains("{MAP_ITEMS}"));
    }

    #[test]
    fn every_builtin_the_prompt_names_exists_in_the_script_engine() {
        // Pins the built-ins list to the worker's real engine: a name the engine lacks fails here.
        let engine = warden_script::worker::engine::build(&Default::default());
        let signatures = engine.gen_fn_signatures(true).join("\n");
        for (group, names, _) in BUILTINS {
            for name in *names {
                assert!(
                    signatures.lines().any(|l| l.starts_with(&format!("{name}("))),
                    "{group}: {name} is not a function of the script engine"
                );
            }
        }
    }

    #[test]
    fn every_reserved_word_fails_as_a_bare_map_key_and_works_quoted() {
        // Pins the reserved list: each word really breaks `#{word: 1}`, and quoting fixes it.
        let engine = warden_script::worker::engine::build(&Default::default());
        let bare_ok: Vec<&str> = RESERVED_WORDS
            .iter()
            .copied()
            .filter(|word| engine.compile(format!("let m = #{{{word}: 1}};")).is_ok())
            .collect();
        let quoted_broken: Vec<&str> = RESERVED_WORDS
            .iter()
            .copied()
            .filter(|word| {
                engine
                    .compile(format!("let m = #{{\"{word}\": 1}}; m[\"{word}\"]"))
                    .is_err()
            })
            .collect();
        assert!(bare_ok.is_empty(), "these work as bare keys: {bare_ok:?}");
        assert!(quoted_broken.is_empty(), "these fail quoted: {quoted_broken:?}");
    }
}
