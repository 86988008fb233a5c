//! Maps held in variables, followed to the guard call they reach.
//!
//! `let m = #{spot: 100.0, vol: 0.3}; price_option_t(m)` fails as surely
//! as the literal written at the call, so its keys are checked the same
//! way. The walk follows the block in order: `let` (or `=`) of a map
//! literal starts a map, `m.k = …` and `m["k"] = …` add a key, and a guard
//! taking the variable as its one argument is judged with the keys known
//! at that point.
//!
//! Anything it cannot follow ends the judging of that variable, never
//! guesses: another value assigned to it, a computed key, a write deeper
//! in (`m.a.b = …`), a method called on it (`m.remove("k")`), the variable
//! passed to any other function (which may take it by reference), a
//! closure capturing it. A nested block (a branch, a loop body) starts from
//! what was known before it, and afterwards only what it left unchanged is
//! still known. Calls inside `try` are not judged, as everywhere in the
//! check; the bodies of `fn`s and closures are not followed.

use std::collections::BTreeMap;

use rhai::{Expr, FnCallExpr, Position, Stmt};

use super::{ENGINE_KEYWORDS, Problem, Walk, is_identifier, root};

/// Variable → the keys of the map it holds, each where it was written.
type Held = BTreeMap<String, Vec<(String, Position)>>;

impl Walk<'_> {
    /// Problems of guard calls that take a map held in a variable.
    pub(super) fn held_maps(&self, found: &mut Vec<Problem>) {
        let mut held = Held::new();
        self.flow_block(self.ast.statements(), &mut held, false, found);
    }

    fn flow_block(&self, stmts: &[Stmt], held: &mut Held, in_try: bool, found: &mut Vec<Problem>) {
        for stmt in stmts {
            self.flow_stmt(stmt, held, in_try, found);
        }
    }

    /// A block that may run or not, once or many times, and whose `let`s
    /// end with it: followed from what is known before it; afterwards only
    /// what it left unchanged is known.
    fn flow_branch(
        &self,
        stmts: &[Stmt],
        held: &mut Held,
        shadowed: &[&str],
        in_try: bool,
        found: &mut Vec<Problem>,
    ) {
        let mut inner = held.clone();
        for name in shadowed {
            inner.remove(*name);
        }
        self.flow_block(stmts, &mut inner, in_try, found);
        held.retain(|name, keys| inner.get(name) == Some(keys));
    }

    fn flow_stmt(&self, stmt: &Stmt, held: &mut Held, in_try: bool, found: &mut Vec<Problem>) {
        match stmt {
            Stmt::Var(x, ..) => {
                self.flow_expr(&x.1, held, in_try, found);
                bind(held, x.0.name.as_str(), &x.1);
            }
            Stmt::Assignment(x) => {
                let (op, binary) = &**x;
                self.flow_expr(&binary.rhs, held, in_try, found);
                self.flow_expr(&binary.lhs, held, in_try, found);
                match &binary.lhs {
                    Expr::Variable(v, ..) if !op.is_op_assignment() => bind(held, v.1.as_str(), &binary.rhs),
                    lhs => match added_key(lhs) {
                        Some((name, key)) => {
                            if let Some(keys) = held.get_mut(name)
                                && !keys.iter().any(|(k, _)| k == key)
                            {
                                keys.push((key.to_string(), lhs.start_position()));
                            }
                        }
                        None => {
                            if let Some(name) = root(lhs) {
                                held.remove(name);
                            }
                        }
                    },
                }
            }
            Stmt::If(x, _) => {
                self.flow_expr(&x.expr, held, in_try, found);
                self.flow_branch(x.body.statements(), held, &[], in_try, found);
                self.flow_branch(x.branch.statements(), held, &[], in_try, found);
            }
            Stmt::While(x, _) => {
                self.flow_expr(&x.expr, held, in_try, found);
                self.flow_branch(x.body.statements(), held, &[], in_try, found);
            }
            Stmt::Do(x, ..) => {
                self.flow_branch(x.body.statements(), held, &[], in_try, found);
                self.flow_expr(&x.expr, held, in_try, found);
            }
            Stmt::For(x, _) => {
                let (var, counter, flow) = &**x;
                self.flow_expr(&flow.expr, held, in_try, found);
                let mut shadowed = vec![var.name.as_str()];
                shadowed.extend(counter.as_ref().map(|c| c.name.as_str()));
                self.flow_branch(flow.body.statements(), held, &shadowed, in_try, found);
            }
            Stmt::TryCatch(x, _) => {
                self.flow_branch(x.body.statements(), held, &[], true, found);
                let caught: Vec<&str> = match &x.expr {
                    Expr::Variable(v, ..) => vec![v.1.as_str()],
                    _ => Vec::new(),
                };
                self.flow_branch(x.branch.statements(), held, &caught, true, found);
            }
            Stmt::Block(block) => self.flow_branch(block.statements(), held, &[], in_try, found),
            Stmt::FnCall(call, position) => self.flow_call(call, *position, held, in_try, found),
            Stmt::Expr(expr) => self.flow_expr(expr, held, in_try, found),
            Stmt::BreakLoop(Some(expr), ..) | Stmt::Return(Some(expr), ..) => {
                self.flow_expr(expr, held, in_try, found);
            }
            Stmt::Noop(..) | Stmt::BreakLoop(None, ..) | Stmt::Return(None, ..) => {}
            // Captured by a closure: the closure may change it later.
            Stmt::Share(names) => {
                for (name, _) in names.iter() {
                    held.remove(name.name.as_str());
                }
            }
            // A switch, or anything newer: nothing known survives it.
            _ => held.clear(),
        }
    }

    fn flow_expr(&self, expr: &Expr, held: &mut Held, in_try: bool, found: &mut Vec<Problem>) {
        match expr {
            Expr::FnCall(call, position) => self.flow_call(call, *position, held, in_try, found),
            Expr::MethodCall(call, _) => {
                for arg in call.args.iter() {
                    self.flow_expr(arg, held, in_try, found);
                }
            }
            Expr::Dot(x, ..) => {
                self.flow_expr(&x.lhs, held, in_try, found);
                self.flow_expr(&x.rhs, held, in_try, found);
                // `m.f()` may change m: it is `this` there.
                if let Expr::Variable(v, ..) = &x.lhs
                    && !matches!(first_link(&x.rhs), Expr::Property(..))
                {
                    held.remove(v.1.as_str());
                }
            }
            Expr::Index(x, ..) => {
                self.flow_expr(&x.lhs, held, in_try, found);
                self.flow_expr(&x.rhs, held, in_try, found);
            }
            Expr::Stmt(block) => self.flow_branch(block.statements(), held, &[], in_try, found),
            Expr::Array(items, _) | Expr::InterpolatedString(items, _) => {
                for item in items.iter() {
                    self.flow_expr(item, held, in_try, found);
                }
            }
            Expr::Map(x, _) => {
                for (_, value) in x.0.iter() {
                    self.flow_expr(value, held, in_try, found);
                }
            }
            Expr::And(list, _) | Expr::Or(list, _) | Expr::Coalesce(list, _) => {
                for item in list.iter() {
                    self.flow_expr(item, held, in_try, found);
                }
            }
            // A variable read, a constant, a property: nothing changes.
            _ => {}
        }
    }

    /// A guard given a followed variable is judged; any other call may
    /// change the variables it is given (Rhai passes the first by
    /// reference), so they are no longer followed.
    fn flow_call(
        &self,
        call: &FnCallExpr,
        position: Position,
        held: &mut Held,
        in_try: bool,
        found: &mut Vec<Problem>,
    ) {
        let name = call.name.as_str();
        let is_guard = call.op_token.is_none()
            && is_identifier(name)
            && !ENGINE_KEYWORDS.contains(&name)
            && !self.variables.contains(name)
            && !self.script_fns.contains_key(name)
            && self.registry.get(name).is_some();
        if is_guard && let [Expr::Variable(v, ..)] = call.args.as_slice() {
            // A guard takes its map by value: the variable is unchanged.
            if !in_try && let Some(keys) = held.get(v.1.as_str()) {
                let keys: Vec<(&str, Position)> = keys.iter().map(|(k, at)| (k.as_str(), *at)).collect();
                let prefix = match position.line() {
                    Some(line) => format!("map '{}' (passed at line {line}): ", v.1),
                    None => format!("map '{}': ", v.1),
                };
                found.extend(self.arguments(name, &keys, position, &prefix));
            }
            return;
        }
        for arg in call.args.iter() {
            self.flow_expr(arg, held, in_try, found);
        }
        for arg in call.args.iter() {
            if let Expr::Variable(v, ..) = arg {
                held.remove(v.1.as_str());
            }
        }
    }
}

/// `name = value` (or `let name = value`): followed from here when the
/// value is a map literal, otherwise no longer.
fn bind(held: &mut Held, name: &str, value: &Expr) {
    match super::literal_key_places(value) {
        Some(keys) => {
            held.insert(name.to_string(), keys);
        }
        None => {
            held.remove(name);
        }
    }
}

/// `m.k` or `m["k"]` as a target: the variable and the key it adds.
fn added_key(lhs: &Expr) -> Option<(&str, &str)> {
    let (Expr::Dot(x, ..) | Expr::Index(x, ..)) = lhs else {
        return None;
    };
    let Expr::Variable(v, ..) = &x.lhs else {
        return None;
    };
    let key = match (lhs, &x.rhs) {
        (Expr::Dot(..), Expr::Property(p, _)) => p.2.as_str(),
        (Expr::Index(..), Expr::StringConstant(s, _)) => s.as_str(),
        _ => return None,
    };
    Some((v.1.as_str(), key))
}

/// The first link of a chain's rest: `a` of `a.b`, `f()` of `f().x`.
fn first_link(expr: &Expr) -> &Expr {
    match expr {
        Expr::Dot(x, ..) | Expr::Index(x, ..) => first_link(&x.lhs),
        other => other,
    }
}
