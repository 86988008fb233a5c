//! The pre-run check on a small registry: every problem at once, with its
//! place and fix; nothing said where the check cannot know.

use rhai::{AST, Engine, Map, Scope};

use super::*;
use warden_core::error::GuardError;
use warden_core::guard::guard;
use warden_core::registry::Registry;

/// Prices an option.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct PriceInput {
    spot: f64,
    strike: f64,
    volatility: f64,
    #[serde(default)]
    rate: f64,
}

fn price(input: PriceInput) -> Result<f64, GuardError> {
    Ok(input.spot)
}

fn setup() -> (Engine, Known, Registry) {
    let registry = Registry::new(vec![guard(price).pure()]).expect("registry");
    let mut engine = crate::worker::engine::build(&Default::default());
    engine.register_fn("price", |_: Map| 1.0_f64);
    engine.register_fn("map_call", |_: &str, _: rhai::Array| 1.0_f64);
    engine.register_fn("to_csv", |_: rhai::Array| String::new());
    engine.register_fn("to_csv", |_: rhai::Array, _: rhai::Array| String::new());
    crate::worker::prelude::register(&mut engine);
    let known = Known::of(&engine);
    (engine, known, registry)
}

fn problems(code: &str) -> Vec<Problem> {
    problems_hiding(code, &[])
}

/// The problems of `code` for a caller from whom `hidden` guards are hidden.
fn problems_hiding(code: &str, hidden: &[&str]) -> Vec<Problem> {
    let (engine, known, registry) = setup();
    let visible = registry.visible(hidden.iter().map(|h| h.to_string()).collect());
    match check(&engine, &known, &visible, &Scope::new(), &AST::empty(), code) {
        Ok(_) => Vec::new(),
        Err(problems) => problems,
    }
}

#[test]
fn a_hidden_guard_is_an_unknown_function_and_never_suggested() {
    // The engine has `price`; for a caller it is hidden from, it does not exist.
    let hidden = problems_hiding(
        "price(#{spot: 1.0});\nprise(#{});\nmap_call(\"price\", []);",
        &["price"],
    );
    let absent = problems_hiding("nope(#{spot: 1.0});\nprise(#{});\nmap_call(\"nope\", []);", &[]);
    assert_eq!(hidden.len(), 3, "{hidden:#?}");
    assert_eq!(
        hidden[0].message.replace("'price'", "'nope'"),
        absent[0].message,
        "{hidden:#?}"
    );
    for problem in &hidden {
        assert!(!problem.message.contains("did you mean 'price'"), "{hidden:#?}");
    }
    assert!(
        hidden[2].message.starts_with("map_call: no guard named 'price'"),
        "{hidden:#?}"
    );
}

#[test]
fn a_hidden_guard_throws_what_rhai_throws_for_a_missing_function() {
    // The worker's error for a hidden guard is the engine's own for a name never registered.
    let engine = Engine::new();
    let error = engine
        .eval::<rhai::Dynamic>("let a = 1;\nnope(#{x: 1})")
        .expect_err("no such function");
    let ours = crate::worker::bindings::not_found("nope", error.position());
    assert_eq!(ours.to_string(), error.to_string());
}

#[test]
fn every_problem_of_a_block_is_reported_at_once_with_its_line() {
    // An unknown function, a misspelled and a missing argument, and a helper's arity: four problems, one answer.
    let found = problems(
        "let p = norm_cfd(1.0);\nlet q = price(#{spot: 1.0, strike: 1.0, volatilty: 0.2});\nlet c = to_csv([], [], []);",
    );
    let text: Vec<String> = found
        .iter()
        .map(|p| format!("{:?}: {}", p.line, p.message))
        .collect();
    assert_eq!(found.len(), 4, "{text:#?}");
    assert!(
        text[0].contains("Some(1)") && text[0].contains("did you mean 'norm_cdf'"),
        "{text:#?}"
    );
    assert!(
        text.iter().any(|t| t.contains("Some(2)")
            && t.contains("no argument 'volatilty'")
            && t.contains("'volatility'")),
        "{text:#?}"
    );
    assert!(
        text.iter()
            .any(|t| t.contains("Some(2)") && t.contains("missing required argument(s) volatility")),
        "{text:#?}"
    );
    assert!(
        text.iter()
            .any(|t| t.contains("Some(3)") && t.contains("to_csv takes 1 or 2 argument(s), got 3")),
        "{text:#?}"
    );
}

#[test]
fn a_reserved_word_as_a_bare_key_is_answered_with_the_quoting_and_the_check_goes_on() {
    // `#{call: 1}` is a parse error; the answer says how to quote it, and still finds the typo after it.
    let found = problems("let m = #{call: 1.0, put: 2.0};\nlet x = norm_pfd(0.0);");
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].message.contains("'call' is a reserved word")
            && found[0].message.contains("#{\"call\": ...}"),
        "{found:#?}"
    );
    assert_eq!((found[0].line, found[0].column), (Some(1), Some(11)));
    assert!(found[1].message.contains("did you mean 'norm_pdf'"), "{found:#?}");
}

#[test]
fn a_plain_syntax_error_is_reported_as_such() {
    // Not a key problem: the parse error itself, with its position; errors at the end of input too.
    let found = problems("let x = (1 + ;");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].message.starts_with("syntax error"), "{found:#?}");
    assert_eq!(found[0].line, Some(1));
    for broken in ["let m = #{", "#{a: 1,", "fn f(", "\n\n", "let x = \"", "#{call:"] {
        let found = problems(broken);
        assert!(!found.is_empty() || broken.trim().is_empty(), "{broken:?}");
    }
}

#[test]
fn map_call_items_are_checked_like_calls() {
    // A literal map_call names a real guard, and each literal item's keys are checked.
    let found = problems(
        "map_call(\"price\", [#{spot: 1.0, strike: 1.0, volatility: 0.2}, #{spot: 1.0, strike: 1.0, vol: 0.2}]);\nmap_call(\"prise\", []);",
    );
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(
        found[0]
            .message
            .starts_with("map_call item 1: price has no argument 'vol'"),
        "{found:#?}"
    );
    assert!(
        found[1]
            .message
            .contains("missing required argument(s) volatility"),
        "{found:#?}"
    );
    assert!(
        found[2]
            .message
            .contains("no guard named 'prise': did you mean 'price'?"),
        "{found:#?}"
    );
}

#[test]
fn what_the_check_cannot_know_it_does_not_judge() {
    // Maps built at run time (computed keys), function pointers, closures, script fns, calls inside try and the prelude pass.
    let found = problems(
        r#"
fn double(x) { x * 2.0 }
let args = #{spot: 1.0};
for k in ["strike", "volatility"] { args[k] = 1.0; }
let p = price(args);
let f = Fn("double");
let g = |x| x + 1.0;
let y = f(2.0) + g.call(1.0) + double(3.0) + norm_cdf(0.5) + erf(1) + norm_inv(0.9) + max(1.0, 2.0);
let r = [3.0, 1.0].map(|v| v * 2.0).filter(|v| v > 1.0).reduce(|s, v| s + v, 0.0);
try { price(#{spto: 1.0}); no_such_function(1); } catch (e) { print(e.code); }
print(`${y} ${r} ${type_of(r)}`);
"#,
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn variables_of_earlier_blocks_and_their_functions_count_as_known() {
    // A function defined in an earlier block, and a function pointer kept in the scope, are callable.
    let (engine, known, registry) = setup();
    let earlier = engine.compile("fn helper(a, b) { a + b }").expect("compiles");
    let mut scope = Scope::new();
    scope.push("pricer", rhai::FnPtr::new("helper").expect("fn ptr"));
    let visible = registry.visible(Default::default());
    let checked = check(
        &engine,
        &known,
        &visible,
        &scope,
        &earlier,
        "helper(1, 2) + pricer(1, 2)",
    );
    assert!(checked.is_ok(), "{:?}", checked.err());
    let wrong = check(&engine, &known, &visible, &scope, &earlier, "helper(1)");
    let problems = wrong.expect_err("wrong arity");
    assert!(
        problems[0].message.contains("helper takes 2 argument(s), got 1"),
        "{problems:#?}"
    );
}

#[test]
fn a_write_to_a_loop_variable_is_flagged_with_the_index_loop_that_keeps_it() {
    // Field, index, compound, plain and deep writes to a copy, inside try too: each flagged at its line.
    let found = problems(
        r#"let cells = [#{x: 1, a: #{b: 2}}];
for c in cells {
    c.x = 1;
    c["x"] = 2;
    c.x += 3;
    c.a.b = 4;
    try { c = #{x: 5}; } catch { }
}
let rows = [[1, 2]];
for r in rows { r[0] = 9; }"#,
    );
    let text: Vec<String> = found
        .iter()
        .map(|p| format!("{:?}: {}", p.line, p.message))
        .collect();
    assert_eq!(found.len(), 6, "{text:#?}");
    // Each at the start of what was written to.
    assert_eq!(found[0].column, Some(5), "{text:#?}");
    for (problem, (line, target, fix)) in found.iter().zip([
        (3, "c.x", "cells[i].x = …"),
        (4, "c[\"x\"]", "cells[i][\"x\"] = …"),
        (5, "c.x", "cells[i].x += …"),
        (6, "c.a.b", "cells[i].a.b = …"),
        (7, "c", "cells[i] = …"),
        (10, "r[0]", "rows[i][0] = …"),
    ]) {
        assert_eq!(problem.line, Some(line), "{text:#?}");
        let list = if line == 10 { "rows" } else { "cells" };
        let var = if line == 10 { "r" } else { "c" };
        assert!(
            problem.message.starts_with(&format!(
                "'{var}' is a copy of each item of '{list}': assigning to {target} changes the copy, not {list}"
            )) && problem
                .message
                .contains(&format!("write: for i in 0..{list}.len() {{ {fix} }}")),
            "{text:#?}"
        );
    }
}

#[test]
fn loop_copies_are_found_in_nested_loops_and_functions_and_name_a_free_index() {
    // The inner loop's variable against its own list; a loop in a fn; the index avoids the loop's names.
    let found = problems(
        r#"fn bump(book) {
    for i in book.rows { i.n += 1; }
    book
}
let grid = [[#{v: 1}]];
for row in grid {
    for cell in row { cell.v = 0; }
}"#,
    );
    let text: Vec<String> = found
        .iter()
        .map(|p| format!("{:?}: {}", p.line, p.message))
        .collect();
    assert_eq!(found.len(), 2, "{text:#?}");
    assert!(
        found[0].line == Some(2)
            && found[0]
                .message
                .starts_with("'i' is a copy of each item of 'book.rows'")
            && found[0]
                .message
                .contains("write: for j in 0..book.rows.len() { book.rows[j].n += … }"),
        "{text:#?}"
    );
    assert!(
        found[1].line == Some(7)
            && found[1]
                .message
                .starts_with("'cell' is a copy of each item of 'row'")
            && found[1]
                .message
                .contains("for i in 0..row.len() { row[i].v = … }"),
        "{text:#?}"
    );
}

#[test]
fn what_is_not_a_lost_write_to_a_loop_variable_is_not_flagged() {
    // A shadowing let, other variables, method calls, an index loop, and a copy that is kept (pushed).
    let found = problems(
        r#"let cells = [#{x: 1}];
let out = [];
let total = 0;
for c in cells { let c = c; c.x = 1; out.push(c); }
for c in cells { total += c.x; let n = c.keys().len(); print(n); }
for i in 0..cells.len() { cells[i].x = 2; }
for c in cells { c.x = 3; out.push(c); }
for (c, i) in cells { c.x = 4; cells[i] = c; }
for c in cells { let d = c; d.x = 5; out.push(d); }"#,
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn a_map_held_in_a_variable_is_checked_at_the_guard_it_reaches() {
    // A wrong key is reported where it was written; a key added by m.k = … or m["k"] = … counts.
    let found = problems(
        r#"let m = #{spot: 1.0, strike: 1.0, vol: 0.2};
m["volatility"] = 0.2;
let p = price(m);
let n = #{spot: 1.0};
n.strike = 1.0;
n.volatility = 0.2;
let q = price(n);
let o = #{spot: 1.0};
price(o);
let s = p + q;
let w = #{spot: s, strike: 1.0,
          volatilty: 0.2};
price(w);"#,
    );
    let text: Vec<String> = found
        .iter()
        .map(|p| format!("{:?}: {}", p.line, p.message))
        .collect();
    assert_eq!(found.len(), 4, "{text:#?}");
    assert_eq!(
        text[0],
        "Some(1): map 'm' (passed at line 3): price has no argument 'vol': did you mean 'volatility'? \
its arguments are rate, spot, strike, volatility"
    );
    assert!(
        text[1].starts_with(
            "Some(9): map 'o' (passed at line 9): price is missing required argument(s) strike, volatility"
        ),
        "{text:#?}"
    );
    // A map with a computed value is kept as written: the wrong key is reported on its own line.
    assert!(
        text[2].starts_with("Some(12): map 'w' (passed at line 13): price has no argument 'volatilty'"),
        "{text:#?}"
    );
    assert!(
        text[3].starts_with(
            "Some(13): map 'w' (passed at line 13): price is missing required argument(s) volatility"
        ),
        "{text:#?}"
    );
}

#[test]
fn a_held_map_changed_in_ways_the_check_cannot_follow_is_not_judged() {
    // Reassigned, passed to a function, a method called on it, a computed key, a branch, a loop, a try.
    let found = problems(
        r#"let a = #{spot: 1.0, vol: 0.2};
a = price_inputs();
price(a);
let b = #{spot: 1.0};
fill(b);
price(b);
let c = #{spot: 1.0};
c.mixin(#{strike: 1.0, volatility: 0.2});
price(c);
let d = #{spot: 1.0};
let key = "strike";
d[key] = 1.0;
price(d);
let e = #{spot: 1.0};
if key == "strike" { e.strike = 1.0; e.volatility = 0.2; }
price(e);
let f = #{spot: 1.0};
for k in ["strike", "volatility"] { f[k] = 1.0; }
price(f);
let g = #{spot: 1.0, vol: 0.2};
try { price(g); } catch (err) { print(err); }
let h = #{spot: 1.0};
h.extra.x = 1.0;
price(h);"#,
    );
    // Only the unknown helpers are reported, not the maps.
    let text: Vec<&str> = found.iter().map(|p| p.message.as_str()).collect();
    assert!(
        text.iter().all(|t| t.starts_with("no function named")),
        "{text:#?}"
    );
}

#[test]
fn a_name_meant_by_meaning_is_suggested_before_one_close_in_spelling() {
    // norm_ppf is the quantile (norm_inv), not the density (norm_pdf); vol is volatility; aliases absent from the engine say nothing.
    let found = problems(
        "let z = norm_ppf(0.95);\nlet q = quantile(0.5);\nlet p = price(#{spot: 1.0, strike: 1.0, sigma: 0.2});\nlet a = avg([1]);",
    );
    let text: Vec<&str> = found.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(
        text[0], "no function named 'norm_ppf': did you mean 'norm_inv'?",
        "{text:#?}"
    );
    assert_eq!(
        text[1], "no function named 'quantile': did you mean 'norm_inv'?",
        "{text:#?}"
    );
    assert!(
        text[2].starts_with("price has no argument 'sigma': did you mean 'volatility'?"),
        "{text:#?}"
    );
    assert!(
        text.iter()
            .all(|t| !t.contains("'mean'") && !t.contains("norm_pdf")),
        "{text:#?}"
    );
}

#[test]
fn the_alias_table_is_short_and_each_alias_appears_once() {
    // One place, at most 30 entries, no alias meaning two things, none meaning itself.
    assert!(ALIASES.len() <= 30);
    let mut seen = std::collections::BTreeSet::new();
    for (alias, meant) in ALIASES {
        assert!(seen.insert(*alias), "{alias} twice");
        assert_ne!(alias, meant);
        assert_eq!(alias.to_lowercase(), *alias);
    }
}
