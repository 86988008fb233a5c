//! Writes to a `for` loop's variable, which Rhai loses without a word.
//!
//! `for c in cells { c.x = 1; }` changes a copy of each item: `cells` is
//! untouched, the script runs, and the model reads back numbers it never
//! changed. The write is flagged wherever it is (inside `try` too: a lost
//! write is never a probe), with the index loop that does what was meant.
//!
//! What is not a lost write is not flagged: a `let` of the same name
//! shadows the loop variable for the rest of its block, a method call on
//! it only reads, and a loop whose variable is used whole after all (pushed
//! to another list, stored, passed, returned) keeps what was written.

use rhai::{AST, ASTNode, Expr, Position, Stmt, StmtBlock};

use super::{Problem, offset, root};

/// Names tried, in order, for the index in the suggested loop.
const INDEX_NAMES: &[&str] = &["i", "j", "k", "idx"];

/// Every lost write to a loop variable in `ast` (its functions included).
/// `source` is the text `ast` was compiled from, to quote names and targets.
pub(super) fn lost_writes(ast: &AST, source: &str) -> Vec<Problem> {
    let mut found = Vec::new();
    ast.walk(&mut |path: &[ASTNode]| {
        if let Some(ASTNode::Stmt(Stmt::For(x, _))) = path.last() {
            let (var, _, flow) = &**x;
            let name = var.name.as_str();
            if !escapes(name, &flow.body) {
                let items = Items::of(&flow.expr, flow.body.position(), source);
                let mut writes = Vec::new();
                block_writes(flow.body.statements(), name, &mut writes);
                for (lhs, op) in writes {
                    let text = message(name, &items, lhs, op, source);
                    found.push(Problem::at(lhs.start_position(), text));
                }
            }
        }
        true
    });
    found
}

/// What a loop iterates over, as far as the fix needs to know.
enum Items {
    /// A list reachable by name (`cells`, `book.rows`): the fix indexes it.
    Named(String),
    /// A range of numbers: there is nothing to write back to.
    Range(String),
    /// Anything else (a call's result, a literal list).
    Other,
}

impl Items {
    fn of(expr: &Expr, body_start: Position, source: &str) -> Self {
        let text = between(source, expr.start_position(), body_start).map(str::trim);
        match expr {
            Expr::FnCall(call, _) if matches!(call.name.as_str(), ".." | "..=") => {
                Self::Range(text.unwrap_or("the range").to_string())
            }
            Expr::DynamicConstant(value, _)
                if value.is::<std::ops::Range<rhai::INT>>()
                    || value.is::<std::ops::RangeInclusive<rhai::INT>>() =>
            {
                Self::Range(text.unwrap_or("the range").to_string())
            }
            _ if is_path(expr) => match text {
                Some(text) if !text.is_empty() => Self::Named(text.to_string()),
                _ => Self::Other,
            },
            _ => Self::Other,
        }
    }
}

/// A variable, or a variable's properties (`book.rows`): a place the
/// suggested index loop can write through.
fn is_path(expr: &Expr) -> bool {
    match expr {
        Expr::Variable(..) => true,
        Expr::Dot(x, ..) => is_path(&x.lhs) && is_properties(&x.rhs),
        _ => false,
    }
}

fn is_properties(expr: &Expr) -> bool {
    match expr {
        Expr::Property(..) => true,
        Expr::Dot(x, ..) => is_properties(&x.lhs) && is_properties(&x.rhs),
        _ => false,
    }
}

/// The message for one lost write to `var`, whose target is `lhs` and
/// whose operator (`=`, `+=`, …) is at `at`.
fn message(var: &str, items: &Items, lhs: &Expr, at: Position, source: &str) -> String {
    let target = between(source, lhs.start_position(), at)
        .map(str::trim)
        .filter(|t| t.starts_with(var))
        .unwrap_or(var);
    let rest = &target[var.len()..];
    let op: String = offset(source, at)
        .map(|start| {
            source[start..]
                .chars()
                .take_while(|c| "+-*/%&|^<>=!".contains(*c))
                .collect()
        })
        .filter(|op: &String| op.ends_with('='))
        .unwrap_or_else(|| "=".to_string());
    match items {
        Items::Named(list) => {
            let i = index_name(&[var, list, target]);
            format!(
                "'{var}' is a copy of each item of '{list}': assigning to {target} changes the copy, \
not {list}; write: for {i} in 0..{list}.len() {{ {list}[{i}]{rest} {op} … }}"
            )
        }
        Items::Range(range) => format!(
            "'{var}' takes each value of {range} in turn: assigning to it is lost at the next turn \
and does not change the loop; keep the value in a new variable (let next = …) or count with a while loop"
        ),
        Items::Other => {
            let i = index_name(&[var, "items", target]);
            format!(
                "'{var}' is a copy of each item of the list it loops over: assigning to {target} \
changes the copy, not the list; keep the list in a variable and write: \
let items = …; for {i} in 0..items.len() {{ items[{i}]{rest} {op} … }}"
            )
        }
    }
}

/// The first of [`INDEX_NAMES`] that appears as a word in none of `texts`.
fn index_name(texts: &[&str]) -> &'static str {
    let used = |name: &str| {
        texts.iter().any(|text| {
            text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|word| word == name)
        })
    };
    INDEX_NAMES
        .iter()
        .copied()
        .find(|name| !used(name))
        .unwrap_or("index")
}

/// The source text from `start` up to (not including) `end`.
fn between(source: &str, start: Position, end: Position) -> Option<&str> {
    let (start, end) = (offset(source, start)?, offset(source, end)?);
    source.get(start..end)
}

/// Assignments to `var` (or through it) in a block, in order, up to a
/// `let` or `const` of the same name, which shadows it from there on.
fn block_writes<'a>(stmts: &'a [Stmt], var: &str, writes: &mut Vec<(&'a Expr, Position)>) {
    for stmt in stmts {
        if let Stmt::Var(x, ..) = stmt {
            expr_writes(&x.1, var, writes);
            if x.0.name == var {
                return;
            }
            continue;
        }
        stmt_writes(stmt, var, writes);
    }
}

fn stmt_writes<'a>(stmt: &'a Stmt, var: &str, writes: &mut Vec<(&'a Expr, Position)>) {
    match stmt {
        Stmt::Assignment(x) => {
            let (op, binary) = &**x;
            expr_writes(&binary.rhs, var, writes);
            expr_writes(&binary.lhs, var, writes);
            if root(&binary.lhs) == Some(var) {
                writes.push((&binary.lhs, op.position()));
            }
        }
        Stmt::If(x, _) | Stmt::TryCatch(x, _) => {
            expr_writes(&x.expr, var, writes);
            block_writes(x.body.statements(), var, writes);
            block_writes(x.branch.statements(), var, writes);
        }
        Stmt::While(x, _) | Stmt::Do(x, ..) => {
            expr_writes(&x.expr, var, writes);
            block_writes(x.body.statements(), var, writes);
        }
        Stmt::For(x, _) => {
            let (inner, counter, flow) = &**x;
            expr_writes(&flow.expr, var, writes);
            let shadowed = inner.name == var || counter.as_ref().is_some_and(|c| c.name == var);
            if !shadowed {
                block_writes(flow.body.statements(), var, writes);
            }
        }
        Stmt::Block(block) => block_writes(block.statements(), var, writes),
        Stmt::FnCall(call, _) => {
            for arg in call.args.iter() {
                expr_writes(arg, var, writes);
            }
        }
        Stmt::Expr(expr) => expr_writes(expr, var, writes),
        Stmt::BreakLoop(Some(expr), ..) | Stmt::Return(Some(expr), ..) => {
            expr_writes(expr, var, writes);
        }
        Stmt::Var(x, ..) => expr_writes(&x.1, var, writes),
        // A switch's arms, and anything newer, are not looked into.
        _ => {}
    }
}

/// Assignments inside an expression: in its statement blocks only.
fn expr_writes<'a>(expr: &'a Expr, var: &str, writes: &mut Vec<(&'a Expr, Position)>) {
    match expr {
        Expr::Stmt(block) => block_writes(block.statements(), var, writes),
        Expr::Array(items, _) | Expr::InterpolatedString(items, _) => {
            for item in items.iter() {
                expr_writes(item, var, writes);
            }
        }
        Expr::Map(x, _) => {
            for (_, value) in x.0.iter() {
                expr_writes(value, var, writes);
            }
        }
        Expr::FnCall(call, _) | Expr::MethodCall(call, _) => {
            for arg in call.args.iter() {
                expr_writes(arg, var, writes);
            }
        }
        Expr::Dot(x, ..) | Expr::Index(x, ..) => {
            expr_writes(&x.lhs, var, writes);
            expr_writes(&x.rhs, var, writes);
        }
        Expr::And(list, _) | Expr::Or(list, _) | Expr::Coalesce(list, _) => {
            for item in list.iter() {
                expr_writes(item, var, writes);
            }
        }
        _ => {}
    }
}

/// Whether the loop body uses `var` whole, so what was written to it may
/// be kept: anywhere but as the target of a write, as the start of a
/// property or index read (`c.x`, `c[0]`), or on the right of a write to
/// itself (`c = c * 2`). A method call on it counts as a use (`c.clone()`).
fn escapes(var: &str, body: &StmtBlock) -> bool {
    let mut used = false;
    let mut path = Vec::new();
    for stmt in body.statements() {
        stmt.walk(&mut path, &mut |path: &[ASTNode]| {
            let Some((ASTNode::Expr(node @ Expr::Variable(x, ..)), ancestors)) = path.split_last() else {
                return true;
            };
            if x.1 != var {
                return true;
            }
            let read_through = match ancestors.last() {
                Some(ASTNode::Expr(Expr::Dot(parent, ..))) => {
                    std::ptr::eq(&parent.lhs, *node) && !starts_with_method(&parent.rhs)
                }
                Some(ASTNode::Expr(Expr::Index(parent, ..))) => std::ptr::eq(&parent.lhs, *node),
                _ => false,
            };
            let written = ancestors.iter().enumerate().any(|(at, ancestor)| {
                let ASTNode::Stmt(Stmt::Assignment(x)) = ancestor else {
                    return false;
                };
                let below = path.get(at + 1);
                let in_rhs = matches!(below, Some(ASTNode::Expr(e)) if std::ptr::eq(*e, &x.1.rhs));
                let is_lhs = std::ptr::eq(&x.1.lhs, *node);
                is_lhs || (in_rhs && root(&x.1.lhs) == Some(var))
            });
            if !read_through && !written {
                used = true;
            }
            !used
        });
        path.clear();
        if used {
            return true;
        }
    }
    false
}

/// Whether a chain continues with a method call (`c.len()`, `c.f().x`).
fn starts_with_method(expr: &Expr) -> bool {
    match expr {
        Expr::MethodCall(..) => true,
        Expr::Dot(x, ..) | Expr::Index(x, ..) => starts_with_method(&x.lhs),
        _ => false,
    }
}
