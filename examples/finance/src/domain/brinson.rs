//! Return attribution by segment: the `check_brinson` guard, Brinson–Fachler
//! (default) or Brinson–Hood–Beebower allocation, selection and interaction
//! effects, checked to reconcile to the active return R_p − R_b.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::DomainError;
use super::payload::{Evidence, F64OrInf, Frame, Table, fmt_pct, frame, num};
use super::report::{Finding, GuardReport};

/// Tolerance on weight sums and on the reconciliation residual.
pub const ATTRIBUTION_TOLERANCE: f64 = 1e-6;

/// Which Brinson decomposition to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BrinsonMethod {
    /// Allocation = (w_p − w_b)(r_b,i − R_b): rewards overweighting segments that beat the whole benchmark.
    #[default]
    BrinsonFachler,
    /// Allocation = (w_p − w_b)·r_b,i: rewards overweighting segments with positive returns.
    BrinsonHoodBeebower,
}

/// Attribute active return to allocation, selection and interaction by segment (Brinson–Fachler, or Brinson–Hood–Beebower), and check that the effects reconcile.
///
/// `segments` has one record per segment (sector, country, ...) with columns
/// `segment`, `portfolio_weight`, `benchmark_weight` (fractions, each set
/// summing to 1), `portfolio_return`, `benchmark_return` (decimals, same
/// period). R_p = Σ w_p·r_p, R_b = Σ w_b·r_b. Selection = w_b(r_p − r_b);
/// interaction = (w_p − w_b)(r_p − r_b); allocation as per `method`. A
/// segment's return may be null where its weight is 0. Fails when weights do
/// not sum to 1, segments repeat, or the effects do not add up to R_p − R_b.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BrinsonInput {
    /// One record per segment: segment, portfolio_weight, benchmark_weight, portfolio_return, benchmark_return.
    #[schemars(with = "Frame")]
    pub segments: Value,
    /// "brinson_fachler" (default) or "brinson_hood_beebower".
    #[serde(default)]
    pub method: BrinsonMethod,
}

struct Seg {
    name: String,
    wp: f64,
    wb: f64,
    rp: f64,
    rb: f64,
}

/// Reads the segment table; a null return is allowed only at zero weight and
/// is then filled (r_p := r_b, r_b := R_b) so its effects are neutral.
fn read(f: &Frame, notes: &mut Vec<Finding>) -> Result<Vec<Seg>, DomainError> {
    let field = "segments";
    let names = f.strings("segment", field)?;
    let [wp, wb, rp, rb] = [
        "portfolio_weight",
        "benchmark_weight",
        "portfolio_return",
        "benchmark_return",
    ]
    .map(|c| f.numbers(c, field));
    let (wp, wb, mut rp, mut rb) = (wp?, wb?, rp?, rb?);
    for i in 0..f.len() {
        for (w, r, wn, rn) in [
            (wp[i], rp[i], "portfolio_weight", "portfolio_return"),
            (wb[i], rb[i], "benchmark_weight", "benchmark_return"),
        ] {
            if !w.is_finite() {
                return Err(DomainError::field(
                    field,
                    format!("records[{i}].{wn} must be a finite number, got {}", num(w)),
                ));
            }
            if r.is_infinite() || (r.is_nan() && w != 0.0) {
                return Err(DomainError::field(
                    field,
                    format!(
                        "records[{i}].{rn} is {} but {wn} is {w}; a return is needed wherever the weight is not 0",
                        num(r)
                    ),
                ));
            }
        }
    }
    let rb_total: f64 = (0..f.len())
        .filter(|&i| wb[i] != 0.0)
        .map(|i| wb[i] * rb[i])
        .sum();
    let mut out = Vec::with_capacity(f.len());
    for i in 0..f.len() {
        let name = names[i]
            .clone()
            .ok_or_else(|| DomainError::field(field, format!("records[{i}].segment is null")))?;
        if rb[i].is_nan() {
            rb[i] = rb_total;
            notes.push(Finding::info(
                format!("segments.{name}"),
                "not in the benchmark: benchmark_return taken as R_b, so its allocation is neutral",
            ));
        }
        if rp[i].is_nan() {
            rp[i] = rb[i];
            notes.push(Finding::info(
                format!("segments.{name}"),
                "not held: portfolio_return taken as benchmark_return, so selection is 0",
            ));
        }
        out.push(Seg {
            name,
            wp: wp[i],
            wb: wb[i],
            rp: rp[i],
            rb: rb[i],
        });
    }
    Ok(out)
}

/// The evidence of `check_brinson` (schema only; see `report`). Returns and effects are decimals.
#[derive(Debug, Clone, JsonSchema)]
pub struct BrinsonEvidence {
    /// The allocation formula used.
    pub method: BrinsonMethod,
    /// R_p = Σ w_p·r_p.
    pub portfolio_return: F64OrInf,
    /// R_b = Σ w_b·r_b.
    pub benchmark_return: F64OrInf,
    /// R_p − R_b.
    pub active_return: F64OrInf,
    /// Total allocation effect.
    pub allocation: F64OrInf,
    /// Total selection effect.
    pub selection: F64OrInf,
    /// Total interaction effect.
    pub interaction: F64OrInf,
    /// R_p − R_b minus the three effects (≈ 0 when they reconcile).
    pub residual: F64OrInf,
    /// Σ w_p.
    pub portfolio_weight_sum: F64OrInf,
    /// Σ w_b.
    pub benchmark_weight_sum: F64OrInf,
    /// Per segment: segment, allocation, selection, interaction, total.
    pub segments: Vec<BrinsonSegmentRow>,
    /// Paste-ready text table.
    pub table: String,
}

/// One segment's effects.
#[derive(Debug, Clone, JsonSchema)]
pub struct BrinsonSegmentRow {
    /// Segment name.
    pub segment: String,
    /// Allocation effect.
    pub allocation: F64OrInf,
    /// Selection effect.
    pub selection: F64OrInf,
    /// Interaction effect.
    pub interaction: F64OrInf,
    /// Sum of the three.
    pub total: F64OrInf,
}

/// Runs the attribution check.
pub fn check_brinson(input: BrinsonInput) -> Result<GuardReport<BrinsonEvidence>, DomainError> {
    let f = frame(&input.segments, "segments")?;
    if f.is_empty() {
        return Err(DomainError::field(
            "segments",
            "has no records; give one record per segment",
        ));
    }
    let mut findings = Vec::new();
    let segs = read(&f, &mut findings)?;
    for (i, s) in segs.iter().enumerate() {
        if segs[..i].iter().any(|t| t.name == s.name) {
            findings.push(Finding::error(
                format!("segments.{}", s.name),
                "segment appears more than once; merge its rows",
            ));
        }
    }
    let sum_wp: f64 = segs.iter().map(|s| s.wp).sum();
    let sum_wb: f64 = segs.iter().map(|s| s.wb).sum();
    for (what, sum) in [("portfolio_weight", sum_wp), ("benchmark_weight", sum_wb)] {
        if (sum - 1.0).abs() > ATTRIBUTION_TOLERANCE {
            findings.push(Finding::error(
                format!("segments.{what}"),
                format!("sums to {sum}, expected 1 (±{ATTRIBUTION_TOLERANCE}); add a cash or other segment so effects reconcile"),
            ));
        }
    }
    let r_p: f64 = segs.iter().map(|s| s.wp * s.rp).sum();
    let r_b: f64 = segs.iter().map(|s| s.wb * s.rb).sum();
    let mut table = Table::new(&[
        "segment",
        "w_p",
        "w_b",
        "r_p",
        "r_b",
        "allocation",
        "selection",
        "interaction",
        "total",
    ]);
    let mut rows = Vec::new();
    let mut tot = [0.0f64; 3];
    for s in &segs {
        let alloc = match input.method {
            BrinsonMethod::BrinsonFachler => (s.wp - s.wb) * (s.rb - r_b),
            BrinsonMethod::BrinsonHoodBeebower => (s.wp - s.wb) * s.rb,
        };
        let sel = s.wb * (s.rp - s.rb);
        let inter = (s.wp - s.wb) * (s.rp - s.rb);
        for (t, x) in tot.iter_mut().zip([alloc, sel, inter]) {
            *t += x;
        }
        let pct = |x: f64| fmt_pct(x, 2);
        table.row(vec![
            s.name.clone(),
            pct(s.wp),
            pct(s.wb),
            pct(s.rp),
            pct(s.rb),
            pct(alloc),
            pct(sel),
            pct(inter),
            pct(alloc + sel + inter),
        ]);
        rows.push(json!({"segment": s.name, "allocation": num(alloc), "selection": num(sel), "interaction": num(inter), "total": num(alloc + sel + inter)}));
    }
    let active = r_p - r_b;
    let residual = active - tot.iter().sum::<f64>();
    table.row(vec![
        "TOTAL".into(),
        fmt_pct(sum_wp, 2),
        fmt_pct(sum_wb, 2),
        fmt_pct(r_p, 2),
        fmt_pct(r_b, 2),
        fmt_pct(tot[0], 2),
        fmt_pct(tot[1], 2),
        fmt_pct(tot[2], 2),
        fmt_pct(tot.iter().sum(), 2),
    ]);
    if residual.abs() > ATTRIBUTION_TOLERANCE {
        findings.push(Finding::error(
            "segments",
            format!(
                "effects sum to {} but R_p − R_b = {}: residual {residual:e} does not reconcile",
                tot.iter().sum::<f64>(),
                active
            ),
        ));
    }
    let mut ev = Evidence::new();
    ev.put(
        "method",
        json!(match input.method {
            BrinsonMethod::BrinsonFachler => "brinson_fachler",
            BrinsonMethod::BrinsonHoodBeebower => "brinson_hood_beebower",
        }),
    );
    for (k, x) in [
        ("portfolio_return", r_p),
        ("benchmark_return", r_b),
        ("active_return", active),
        ("allocation", tot[0]),
        ("selection", tot[1]),
        ("interaction", tot[2]),
        ("residual", residual),
        ("portfolio_weight_sum", sum_wp),
        ("benchmark_weight_sum", sum_wb),
    ] {
        ev.number(k, x);
    }
    ev.rows("segments", rows);
    ev.table(&table);
    Ok(GuardReport::new("check_brinson", findings, ev.into_value()))
}

#[cfg(test)]
mod tests;
