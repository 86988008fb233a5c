//! A script's plan: its destructive guard calls, found in the parsed script
//! before it runs, so that a detached task asks the person once for a loop
//! of orders instead of once per order.
//!
//! Every call of a destructive guard is found in the AST (a direct call,
//! or `map_call("guard", items)`) and bounded by what encloses it: a `for`
//! over a literal array (its length), over a range with literal bounds
//! (`0..5`, `1..=5`) or over anything else (unbounded), a `while`, `do` or
//! `loop` (unbounded), a function or closure body (unbounded: it may be
//! called any number of times). A `map_call` counts its literal item
//! list's length. A guard all of whose calls are bounded, and that can be
//! called more than once, goes into the plan with its maximum count and
//! the argument names its calls write; the person approves the plan once,
//! and the run may make at most that many calls of it (one more is
//! refused). A guard called at most once, or from anywhere the scan cannot
//! bound, stays out of the plan: each of its calls is asked with its exact
//! arguments when the script reaches it. A call the scan cannot see (a
//! function pointer) is asked one by one too, and counts against the plan
//! when its guard is in it.
//!
//! The scan only parses (with the script engine's depth limits); it never
//! runs anything. A script that does not parse has no plan: the worker
//! reports its error as usual.

use std::collections::BTreeMap;

use rhai::{ASTNode, Engine, Expr, OptimizationLevel, Stmt};

use crate::limits::SCRIPT_MAX_EXPR_DEPTHS;
use warden_core::approval::PlanItem;
use warden_core::registry::Registry;

/// A loop count the scan treats as unbounded: 1,000,000 (no person
/// approves "at most 10^9 orders" knowingly).
const MAX_PLANNED_CALLS: u64 = 1_000_000;

/// What the scan found of one guard.
#[derive(Default)]
struct Found {
    /// Sum of every call site's bound; `None` once a site is unbounded.
    max_calls: Option<u64>,
    arguments: Vec<String>,
}

/// The plan of `code`: the destructive guards it calls more than once,
/// each with its static maximum; empty when there is none (or the script
/// does not parse).
pub fn scan(code: &str, registry: &Registry) -> Vec<PlanItem> {
    let mut engine = Engine::new_raw();
    engine.set_optimization_level(OptimizationLevel::None);
    engine.set_max_expr_depths(SCRIPT_MAX_EXPR_DEPTHS.0, SCRIPT_MAX_EXPR_DEPTHS.1);
    let Ok(ast) = engine.compile(code) else {
        return Vec::new();
    };
    let destructive = |name: &str| registry.get(name).is_some_and(|g| g.hints.destructive);
    let mut found: BTreeMap<String, Found> = BTreeMap::new();
    let mut note = |guard: &str, bound: Option<u64>, keys: Vec<String>| {
        let entry = found.entry(guard.to_string()).or_insert_with(|| Found {
            max_calls: Some(0),
            arguments: Vec::new(),
        });
        entry.max_calls = match (entry.max_calls, bound) {
            (Some(sum), Some(more)) => Some(sum.saturating_add(more)),
            _ => None,
        };
        for key in keys {
            if !entry.arguments.contains(&key) {
                entry.arguments.push(key);
            }
        }
    };
    ast.clone_statements_only().walk(&mut |path: &[ASTNode]| {
        if let Some((guard, items, keys)) = path.last().and_then(|node| destructive_call(node, &destructive))
        {
            let bound = enclosing_bound(path).and_then(|outer| items.map(|n| outer.saturating_mul(n)));
            note(&guard, bound, keys);
        }
        true
    });
    // Function and closure bodies run as often as they are called.
    ast.clone_functions_only().walk(&mut |path: &[ASTNode]| {
        if let Some((guard, _, keys)) = path.last().and_then(|node| destructive_call(node, &destructive)) {
            note(&guard, None, keys);
        }
        true
    });
    found
        .into_iter()
        .filter_map(|(guard, found)| {
            let max_calls = found.max_calls.filter(|n| (2..=MAX_PLANNED_CALLS).contains(n))?;
            Some(PlanItem {
                guard,
                max_calls,
                arguments: found.arguments,
            })
        })
        .collect()
}

/// A destructive guard's call at `node`: the guard, how many calls it
/// makes (1, a `map_call`'s literal item count, or `None`), and the
/// argument names it writes.
fn destructive_call(
    node: &ASTNode,
    destructive: &dyn Fn(&str) -> bool,
) -> Option<(String, Option<u64>, Vec<String>)> {
    let ASTNode::Expr(Expr::FnCall(call, _)) = node else {
        return None;
    };
    let name = call.name.as_str();
    if destructive(name) {
        return Some((
            name.to_string(),
            Some(1),
            call.args.first().map(map_keys).unwrap_or_default(),
        ));
    }
    if name == "map_call"
        && let Some(Expr::StringConstant(guard, _)) = call.args.first()
        && destructive(guard)
    {
        let items = call.args.get(1).and_then(literal_len);
        let keys = match call.args.get(1) {
            Some(Expr::Array(items, _)) => items.first().map(map_keys).unwrap_or_default(),
            _ => Vec::new(),
        };
        return Some((guard.to_string(), items, keys));
    }
    None
}

/// The product of the bounds of the loops around the last node of `path`
/// (1 outside any loop); `None` when one of them is unbounded.
fn enclosing_bound(path: &[ASTNode]) -> Option<u64> {
    let mut bound: u64 = 1;
    for (i, node) in path.iter().enumerate() {
        let ASTNode::Stmt(stmt) = node else { continue };
        let loop_bound = match stmt {
            Stmt::For(parts, _) => {
                let flow = &parts.2;
                // The iterable runs once; only the body repeats.
                let in_iterable =
                    matches!(path.get(i + 1), Some(ASTNode::Expr(e)) if std::ptr::eq(*e, &flow.expr));
                if in_iterable {
                    continue;
                }
                iterations(&flow.expr)?
            }
            Stmt::While(..) | Stmt::Do(..) => return None,
            _ => continue,
        };
        bound = bound.saturating_mul(loop_bound);
    }
    (bound <= MAX_PLANNED_CALLS).then_some(bound)
}

/// How many times a `for` over `expr` runs, when the script says so
/// literally.
fn iterations(expr: &Expr) -> Option<u64> {
    if let Some(len) = literal_len(expr) {
        return Some(len);
    }
    let Expr::FnCall(call, _) = expr else { return None };
    let inclusive = match call.name.as_str() {
        ".." => false,
        "..=" => true,
        _ => return None,
    };
    let [Expr::IntegerConstant(from, _), Expr::IntegerConstant(to, _)] = call.args.as_slice() else {
        return None;
    };
    let span = i128::from(*to) - i128::from(*from) + i128::from(inclusive);
    u64::try_from(span.max(0)).ok()
}

/// The length of a literal array.
fn literal_len(expr: &Expr) -> Option<u64> {
    match expr {
        Expr::Array(items, _) => u64::try_from(items.len()).ok(),
        Expr::DynamicConstant(value, _) => value
            .read_lock::<rhai::Array>()
            .and_then(|array| u64::try_from(array.len()).ok()),
        _ => None,
    }
}

/// The keys of a map literal argument.
fn map_keys(expr: &Expr) -> Vec<String> {
    match expr {
        Expr::Map(map, _) => map.0.iter().map(|(key, _)| key.name.to_string()).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_core::error::GuardError;
    use warden_core::guard::guard;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Order {
        #[allow(dead_code)]
        symbol: String,
    }

    fn order(_: Order) -> Result<f64, GuardError> {
        Ok(1.0)
    }

    fn registry() -> Registry {
        Registry::new(vec![
            guard(order).name("place").destructive(),
            guard(order).name("quote"),
        ])
        .expect("registered")
    }

    #[test]
    fn bounded_loops_are_planned_and_the_rest_asked_one_by_one() {
        let registry = registry();
        let five = scan(
            r#"for s in ["A","B","C","D","E"] { place(#{symbol: s}); quote(#{symbol: s}); }"#,
            &registry,
        );
        assert_eq!(five.len(), 1);
        assert_eq!((five[0].guard.as_str(), five[0].max_calls), ("place", 5));
        assert_eq!(five[0].arguments, vec!["symbol".to_string()]);
        let nested = scan(
            "for i in 0..3 { for j in 1..=2 { place(#{symbol: `${i}${j}`}); } }",
            &registry,
        );
        assert_eq!(nested[0].max_calls, 6);
        let mapped = scan(
            r#"map_call("place", [#{symbol: "A"}, #{symbol: "B"}]); place(#{symbol: "C"});"#,
            &registry,
        );
        assert_eq!(mapped[0].max_calls, 3);
        // Once only: asked with its exact arguments instead.
        assert!(scan(r#"place(#{symbol: "A"})"#, &registry).is_empty());
        // Unbounded anywhere: asked one by one.
        assert!(
            scan(
                "let n = 3; for i in 0..n { place(#{symbol: `${i}`}); }",
                &registry
            )
            .is_empty()
        );
        assert!(scan(r#"while true { place(#{symbol: "A"}); }"#, &registry).is_empty());
        assert!(scan(r#"fn go() { place(#{symbol: "A"}) } go(); go();"#, &registry).is_empty());
        assert!(
            scan(r#"for s in ["A","B"] { place(#{symbol: s}); } let n = 2; for i in 0..n { place(#{symbol: "x"}); }"#, &registry)
                .is_empty()
        );
        // A call in the iterable runs once.
        let iterable = scan(
            r#"for x in [place(#{symbol: "A"}), 2] { place(#{symbol: "B"}); }"#,
            &registry,
        );
        assert_eq!(iterable[0].max_calls, 3);
    }
}
