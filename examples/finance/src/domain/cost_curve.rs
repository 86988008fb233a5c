//! Does the edge survive trading costs? The `check_cost_curve` guard: net
//! returns across a grid of per-side costs, the breakeven cost, and a
//! verdict per cost level.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::DomainError;
use super::metrics::{cagr, max_drawdown, mean, sharpe, total_return};
use super::payload::{Evidence, F64OrInf, Series, Table, fmt_num, fmt_pct, num, series};
use super::report::{Finding, GuardReport};
use super::rf_convention::{check_periods_per_year, check_rf, default_periods_per_year, diagnose_rf};

/// Most cost levels in the grid (one table row each).
pub const MAX_GRID: usize = 50;

/// Check whether a strategy's edge survives trading costs: the net Sharpe ratio across a grid of per-side costs, and the breakeven cost.
///
/// Conventions: `returns` are gross (before costs) simple returns per period
/// as decimals (0.01 = 1%); `turnover` is Σ|Δw| per period as a fraction of
/// capital, buys and sells both counted (a full rotation is 2.0); costs are
/// basis points per side (1 bp = 0.01%) charged on turnover:
/// net = gross − turnover·bps/10,000. `rf` is the risk-free return per
/// period. Sharpe = √P·mean(x − rf)/std(x − rf, ddof=1). Annual returns are
/// given both ways: arithmetic P·mean(net) (`annual_return_arithmetic`) and
/// geometric (1 + total)^(P/n) − 1, the CAGR (`annual_return_geometric`; also
/// under its older name `annualised_return`). Breakeven cost per
/// side = 10,000·(mean(gross) − rf)/mean(turnover) ("Infinity" when turnover
/// is zero). Fails when the breakeven is at or below `cost_bps`. Series are
/// {"index": [...], "values": [...]} objects or bare lists of numbers.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CostCurveInput {
    /// Gross simple returns per period, decimals (0.01 = 1%), before trading costs.
    #[schemars(with = "Series")]
    pub returns: Value,
    /// Turnover per period, Σ|Δw| as a fraction of capital (buys and sells both counted: a full rotation is 2.0); aligned with returns.
    #[schemars(with = "Series")]
    pub turnover: Value,
    /// Your trading cost in basis points per side (1 bp = 0.01%), charged on turnover.
    pub cost_bps: f64,
    /// Periods per year for annualising (252 trading days, 52 weeks, 12 months; at most 31,536,000, one a second). Default 252.
    #[serde(default = "default_periods_per_year")]
    pub periods_per_year: f64,
    /// Risk-free return per period as a decimal (not annual: 0.0002 per day ≈ 5% a year). Default 0.
    #[serde(default)]
    pub rf: f64,
    /// Cost levels to tabulate, basis points per side (at most 50). Default [0, 5, 10, 20, 50]; cost_bps is added.
    #[serde(default = "default_grid")]
    pub grid: Vec<f64>,
}

fn default_grid() -> Vec<f64> {
    vec![0.0, 5.0, 10.0, 20.0, 50.0]
}

fn nonneg(field: &str, x: f64, unit: &str) -> Result<f64, DomainError> {
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err(DomainError::field(
            field,
            format!("must be a finite number >= 0 ({unit}), got {x}"),
        ))
    }
}

/// The evidence of `check_cost_curve` (schema only; see `report`).
#[derive(Debug, Clone, JsonSchema)]
pub struct CostCurveEvidence {
    /// 10,000·(mean(gross) − rf)/mean(turnover), bps per side.
    pub breakeven_bps: F64OrInf,
    /// Your cost, bps per side.
    pub cost_bps: f64,
    /// Annualised Sharpe ratio before costs.
    pub sharpe_gross: F64OrInf,
    /// Annualised Sharpe ratio net of your cost.
    pub sharpe_at_cost: F64OrInf,
    /// Mean turnover per period.
    pub avg_turnover: f64,
    /// Arithmetic annual return net of your cost, P·mean(net).
    pub annual_return_arithmetic_at_cost: F64OrInf,
    /// Geometric annual return (CAGR) net of your cost, (1 + total)^(P/n) − 1.
    pub annual_return_geometric_at_cost: F64OrInf,
    /// Periods in the sample.
    pub n_periods: usize,
    /// Periods per year used to annualise.
    pub periods_per_year: f64,
    /// One row per cost level (bps per side), ascending.
    pub curve: Vec<CostCurveRow>,
    /// Paste-ready text table of the curve.
    pub table: String,
}

/// One cost level of the curve.
#[derive(Debug, Clone, JsonSchema)]
pub struct CostCurveRow {
    /// Cost level, bps per side.
    pub cost_bps: f64,
    /// Compounded net total return.
    pub total_return: F64OrInf,
    /// Same as `annual_return_geometric` (older name).
    pub annualised_return: F64OrInf,
    /// P·mean(net).
    pub annual_return_arithmetic: F64OrInf,
    /// (1 + total)^(P/n) − 1, the CAGR.
    pub annual_return_geometric: F64OrInf,
    /// Net annualised Sharpe ratio.
    pub sharpe: F64OrInf,
    /// Net maximum drawdown (<= 0).
    pub max_drawdown: F64OrInf,
    /// "edge survives" or "edge gone".
    pub verdict: String,
}

/// Runs the cost-curve check.
pub fn check_cost_curve(input: CostCurveInput) -> Result<GuardReport<CostCurveEvidence>, DomainError> {
    let p = check_periods_per_year(input.periods_per_year)?;
    let rf = check_rf("rf", input.rf)?;
    let cost = nonneg("cost_bps", input.cost_bps, "basis points per side")?;
    if input.grid.len() > MAX_GRID {
        return Err(DomainError::field(
            "grid",
            format!(
                "has {} cost levels, at most {MAX_GRID} are tabulated",
                input.grid.len()
            ),
        ));
    }
    let mut grid = input
        .grid
        .iter()
        .enumerate()
        .map(|(i, &b)| nonneg(&format!("grid[{i}]"), b, "basis points per side"))
        .collect::<Result<Vec<f64>, _>>()?;
    grid.push(cost);
    grid.sort_by(f64::total_cmp);
    grid.dedup();

    let rs = series(&input.returns, "returns")?;
    let ts = series(&input.turnover, "turnover")?;
    rs.check_aligned("returns", &ts, "turnover")?;
    let gross = rs.finite("returns")?;
    let turn = ts.finite("turnover")?;
    if gross.len() < 2 {
        return Err(DomainError::field(
            "returns",
            format!("needs at least 2 periods for a Sharpe ratio, got {}", gross.len()),
        ));
    }
    if let Some(i) = turn.iter().position(|t| *t < 0.0) {
        return Err(DomainError::field(
            "turnover",
            format!(
                "value at {} is {}; turnover Σ|Δw| cannot be negative",
                ts.label(i),
                turn[i]
            ),
        ));
    }

    let mut findings = diagnose_rf("rf", rf, p).errors;
    let avg_turn = mean(turn);
    let edge = mean(gross) - rf;
    let breakeven = if avg_turn > 0.0 {
        1e4 * edge / avg_turn
    } else if edge > 0.0 {
        f64::INFINITY
    } else if edge < 0.0 {
        f64::NEG_INFINITY
    } else {
        0.0
    };
    let net_at = |bps: f64| -> Vec<f64> { gross.iter().zip(turn).map(|(g, t)| g - t * bps / 1e4).collect() };

    let mut rows = Vec::new();
    let mut table = Table::new(&[
        "cost_bps",
        "total",
        "annual arithmetic P·mean",
        "annual geometric (CAGR)",
        "sharpe",
        "max_drawdown",
        "verdict",
    ]);
    for &bps in &grid {
        let net = net_at(bps);
        let ok = mean(&net) - rf > 0.0;
        let verdict = if ok { "edge survives" } else { "edge gone" };
        let arith = p * mean(&net);
        let (tot, ann, sr, dd) = (
            total_return(&net),
            cagr(&net, p),
            sharpe(&net, rf, p),
            max_drawdown(&net).max_drawdown,
        );
        let mark = if bps == cost { " (your cost)" } else { "" };
        table.row(vec![
            format!("{}{mark}", fmt_num(bps, 1)),
            fmt_pct(tot, 2),
            fmt_pct(arith, 2),
            fmt_pct(ann, 2),
            fmt_num(sr, 2),
            fmt_pct(dd, 2),
            verdict.to_owned(),
        ]);
        rows.push(json!({
            "cost_bps": num(bps), "total_return": num(tot), "annualised_return": num(ann),
            "annual_return_arithmetic": num(arith), "annual_return_geometric": num(ann),
            "sharpe": num(sr), "max_drawdown": num(dd), "verdict": verdict,
        }));
    }

    let sr_gross = sharpe(gross, rf, p);
    let sr_cost = sharpe(&net_at(cost), rf, p);
    if breakeven <= cost {
        findings.push(Finding::error(
            "cost_bps",
            format!(
                "breakeven cost is {} bps per side, at or below your cost of {} bps: net of costs the strategy earns no more than rf (Sharpe {} gross, {} at your cost)",
                fmt_num(breakeven, 2), fmt_num(cost, 2), fmt_num(sr_gross, 2), fmt_num(sr_cost, 2)
            ),
        ));
    } else if breakeven < 2.0 * cost {
        findings.push(Finding::warning(
            "cost_bps",
            format!(
                "thin margin: breakeven {} bps per side is less than twice your cost of {} bps",
                fmt_num(breakeven, 2),
                fmt_num(cost, 2)
            ),
        ));
    } else {
        findings.push(Finding::info(
            "cost_bps",
            format!(
                "breakeven {} bps per side vs your cost {} bps",
                fmt_num(breakeven, 2),
                fmt_num(cost, 2)
            ),
        ));
    }
    if let Some(i) = gross.iter().position(|r| r.abs() > 1.0) {
        findings.push(Finding::warning(
            "returns",
            format!(
                "value at {} is {}, a move over 100% in one period; are returns in percent?",
                rs.label(i),
                gross[i]
            ),
        ));
    }
    if let Some(i) = turn.iter().position(|t| *t > 10.0) {
        findings.push(Finding::warning(
            "turnover",
            format!(
                "value at {} is {} (over 1000% of capital in one period); is turnover in percent?",
                ts.label(i),
                turn[i]
            ),
        ));
    }

    let mut ev = Evidence::new();
    ev.number("breakeven_bps", breakeven);
    ev.number("cost_bps", cost);
    ev.number("sharpe_gross", sr_gross);
    ev.number("sharpe_at_cost", sr_cost);
    ev.number("avg_turnover", avg_turn);
    let at_cost = net_at(cost);
    ev.number("annual_return_arithmetic_at_cost", p * mean(&at_cost));
    ev.number("annual_return_geometric_at_cost", cagr(&at_cost, p));
    ev.put("n_periods", json!(gross.len()));
    ev.number("periods_per_year", p);
    ev.rows("curve", rows);
    ev.table(&table);
    Ok(GuardReport::new("check_cost_curve", findings, ev.into_value()))
}

#[cfg(test)]
mod tests;
