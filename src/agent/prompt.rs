//! The system prompt, generated from the registry and the limits.
//!
//! The rules (how to reply, the budgets from `limits`, the final-answer
//! contract and how its `task_type` maps to the task's status), then each
//! guard as [`super::signature`] renders it (arguments with defaults and
//! conditional requirements, typed outputs, doc text), then the script-only
//! functions. Nothing here is written by hand per guard.

use serde_json::json;

use super::signature::{Renderer, shared_types};
use crate::limits::{AGENT_MAX_GUARD_CALLS, AGENT_MAX_MODEL_CALLS, AGENT_MAX_STEPS, AGENT_PLANNING_INTERVAL};
use crate::registry::Registry;
use crate::task::contract::{self, TASK_TYPES};

const RULES: &str = r#"You are a careful quantitative analyst. You answer by writing Rhai scripts that call the
functions below, which run in a sandbox. Reply with exactly ONE fenced code block per message:

```rhai
// your code
```

Rules:
- Each function takes ONE object map of named arguments: f(#{name: value, ...}) and returns a map.
  Use floats for numbers (100.0, not 100) where the type is number. `name?` is optional; `= v` is
  its default.
- Variables and functions you define persist between your messages; the last expression's value,
  printed output (print(...)) and any error come back to you as the observation.
- Errors are catchable: try { ... } catch (e) { print(e.code + ": " + e.message); }
  (try is a statement, not an expression). A failed call still counts against the call budget.
- Helpers:
  write_artifact(filename, content)          // writes outputs/<filename>, 1 MiB max; content is a string
  write_artifact(filename, content, "base64")
  read_written_artifact(filename)            // reads back a file you wrote
  to_csv(rows, ["col1", "col2"])             // rows: array of maps -> CSV text
  line_chart(rows, #{x: "col", y: "col", title: "..."})  // returns a chart; y may be ["a", "b"];
                                             // series: "col" makes one line per value; x_label,
                                             // y_label, width, height (px) are optional
  scatter_chart(rows, #{...})                // same options as line_chart
  bar_chart(rows, #{x: "label_col", y: "col", title: "..."})  // one bar (group) per row
  heatmap(rows, #{x: "spot", y: "vol", z: "price", title: "..."})  // one row per (x, y)
  write_artifact("surface.png", chart)       // draws a chart as .png or .svg (by the extension)
  report(#{title: "...", answer: #{summary, metrics, assumptions}, sections: [#{heading: "...",
    text: "..."}, #{heading: "...", table: rows}, #{heading: "...", chart: chart}]})  // report.html
  print(value)
- There is no file system, network, eval or import.
- Finish by calling final_answer(#{task_type: ..., summary: "...", metrics: #{...}, assumptions: [...]}):
  task_type "analysis" (needs at least one call of a function above, guard or script-only, that returned
  without error in this task; only analysis carries metrics),
  "no_action" (nothing needed calling: only valid if you made no calls), "needs_input" (the request
  lacks something: say what in summary), "unsupported" (the functions cannot do it), or "failed".
  summary must be non-blank; no other keys are allowed; numbers must be finite.
"#;

/// The whole system prompt for `registry`.
pub fn system_prompt(registry: &Registry) -> String {
    let mut text = String::from(RULES);
    text.push_str(&format!("- {}\n", status_rule()));
    text.push_str(&format!("- {}\n", budget_line()));
    let mut renderer = Renderer::new(shared_types(registry.iter()));
    let mut functions = String::new();
    for guard in registry.iter() {
        functions.push_str(&renderer.describe(guard));
        functions.push('\n');
    }
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
    text.push_str("\nFunctions:\n");
    text.push_str(&functions);
    let mut script_only = registry.script_functions().peekable();
    if script_only.peek().is_some() {
        text.push_str("\nScript-only functions (not guards over JSON; call them directly):\n");
        for function in script_only {
            let doc: String = function
                .description
                .lines()
                .map(|l| format!("    {l}\n"))
                .collect();
            text.push_str(&format!("- {}\n{doc}\n", function.signature));
        }
    }
    text
}

/// What is left of the budgets after a step, for the step's observation.
pub fn budget_left(steps_used: usize, model_calls_used: usize, calls_used: u64) -> String {
    format!(
        "Left: {} steps, {} replies, {} function calls.",
        AGENT_MAX_STEPS.saturating_sub(steps_used),
        AGENT_MAX_MODEL_CALLS.saturating_sub(model_calls_used),
        AGENT_MAX_GUARD_CALLS.saturating_sub(calls_used)
    )
}

/// The budgets, from `limits`: what a task may spend before it ends.
pub fn budget_line() -> String {
    format!(
        "Budgets: {AGENT_MAX_STEPS} steps (code blocks run), {AGENT_MAX_MODEL_CALLS} replies from you, \
         {AGENT_MAX_GUARD_CALLS} function calls (failed and inline ones count; beyond that a call throws \
         budget_exhausted). Out of steps or replies, the task ends failed. Every \
         {AGENT_PLANNING_INTERVAL} steps you are told how many are used."
    )
}

/// How `task_type` maps to the task's status, asked of the contract itself
/// so the prompt cannot drift from it.
pub fn status_rule() -> String {
    let (mut success, mut failed) = (Vec::new(), Vec::new());
    for task_type in TASK_TYPES {
        // One successful call and none made: every type's own preconditions hold.
        let probe = json!({"task_type": task_type, "summary": "-"});
        match contract::check(&probe, 0, 1).map(|answer| answer.status) {
            Ok(crate::task::TaskStatus::Success) => success.push(*task_type),
            Ok(_) => failed.push(*task_type),
            Err(_) => {}
        }
    }
    format!(
        "The task's status follows task_type: {} end success; {} end failed (so use them only when \
         you cannot answer).",
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
        for name in crate::script::worker::charts::HELPERS {
            assert!(
                RULES.contains(&format!("{name}(")),
                "{name} missing from the prompt"
            );
        }
    }

    #[test]
    fn the_analysis_rule_says_what_counts_as_a_call() {
        // The analysis gate counts guards and script-only functions; the prompt says so.
        assert!(RULES.contains("guard or script-only"), "{RULES}");
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
            budget_left(2, 3, 40),
            "Left: 10 steps, 13 replies, 60 function calls."
        );
        assert_eq!(
            budget_left(99, 99, 999),
            "Left: 0 steps, 0 replies, 0 function calls."
        );
    }

    #[test]
    fn the_budget_line_quotes_the_limits() {
        // Pins the numbers in the budget line to the limits module.
        let line = budget_line();
        for n in [
            AGENT_MAX_STEPS,
            AGENT_MAX_MODEL_CALLS,
            AGENT_MAX_GUARD_CALLS as usize,
        ] {
            assert!(line.contains(&n.to_string()), "{line}");
        }
    }
}
