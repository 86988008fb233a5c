//! Point-in-time universe membership: the `check_pit_universe` guard. Every
//! trade's symbol must have been a member of the universe on the trade's
//! date; trading a name before it joined (or after it left) is look-ahead.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::DomainError;
use super::payload::{Date, Evidence, Frame, Table, frame, name_list};
use super::report::{Finding, GuardReport};

/// Check that every trade's symbol was in the universe on the trade date (point-in-time membership, no look-ahead).
///
/// `trades` has one record per trade with columns `date` (ISO-8601
/// 'YYYY-MM-DD') and `symbol`; other columns are ignored. `universe` has one
/// record per membership interval with `symbol`, `start` (first date as a
/// member, inclusive) and `end` (last date as a member, inclusive; null =
/// still a member). A symbol may have several intervals. Fails when any trade
/// falls outside its symbol's intervals; violations are listed (first 50).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PitUniverseInput {
    /// Trades: records with `date` ('YYYY-MM-DD') and `symbol`.
    #[schemars(with = "Frame")]
    pub trades: Value,
    /// Membership intervals: records with `symbol`, `start` and `end` (inclusive dates; end null = still a member).
    #[schemars(with = "Frame")]
    pub universe: Value,
}

type Intervals = HashMap<String, Vec<(Date, Option<Date>)>>;

fn intervals(u: &Frame, findings: &mut Vec<Finding>) -> Result<Intervals, DomainError> {
    let field = "universe";
    let syms = u.strings("symbol", field)?;
    let starts = u.dates("start", field)?;
    let ends = u.dates("end", field)?;
    let mut map: Intervals = HashMap::new();
    for i in 0..u.len() {
        let sym = syms[i]
            .clone()
            .ok_or_else(|| DomainError::field(field, format!("records[{i}].symbol is null")))?;
        let start = starts[i].ok_or_else(|| {
            DomainError::field(
                field,
                format!("records[{i}].start is null; give the first date {sym} was a member"),
            )
        })?;
        if let Some(end) = ends[i]
            && end < start
        {
            findings.push(Finding::error(
                format!("universe.records[{i}]"),
                format!("{sym}: end {end} is before start {start}; the interval is empty"),
            ));
        }
        map.entry(sym).or_default().push((start, ends[i]));
    }
    Ok(map)
}

/// Why `date` is outside `ivs` (which is non-empty); `None` for a member.
fn reason(date: Date, ivs: &[(Date, Option<Date>)]) -> Option<String> {
    if ivs.iter().any(|(s, e)| *s <= date && e.is_none_or(|e| date <= e)) {
        return None;
    }
    let first = ivs.iter().map(|(s, _)| *s).min()?;
    let ends: Option<Vec<Date>> = ivs.iter().map(|(_, e)| *e).collect();
    let last = ends.and_then(|e| e.into_iter().max());
    Some(match last {
        _ if date < first => format!("before membership (first member {first})"),
        Some(end) if date > end => format!("after membership (left {end})"),
        _ => "between membership intervals".to_owned(),
    })
}

/// The evidence of `check_pit_universe` (schema only; see `report`).
/// `Serialize` only so the schema can say `table` may be absent.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PitUniverseEvidence {
    /// Trades checked.
    pub n_trades: usize,
    /// Trades outside their symbol's membership.
    pub n_violations: usize,
    /// Symbols in the universe.
    pub n_universe_symbols: usize,
    /// Symbols with at least one violation.
    pub symbols_with_violations: Vec<String>,
    /// The violations (first 50).
    pub violations: Vec<PitViolation>,
    /// Paste-ready text table; absent without violations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
}

/// One trade outside its symbol's membership.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PitViolation {
    /// Record number in `trades`.
    pub trade: usize,
    /// Trade date, YYYY-MM-DD.
    pub date: String,
    /// Symbol.
    pub symbol: String,
    /// Why, e.g. "after membership (left 2020-06-30)".
    pub problem: String,
}

/// Runs the point-in-time universe check.
pub fn check_pit_universe(input: PitUniverseInput) -> Result<GuardReport<PitUniverseEvidence>, DomainError> {
    let trades = frame(&input.trades, "trades")?;
    let universe = frame(&input.universe, "universe")?;
    let (dates, syms) = if trades.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        (
            trades.dates("date", "trades")?,
            trades.strings("symbol", "trades")?,
        )
    };
    let mut findings = Vec::new();
    let members = if universe.is_empty() {
        Intervals::new()
    } else {
        intervals(&universe, &mut findings)?
    };
    let upper: HashMap<String, &String> = members.keys().map(|k| (k.to_uppercase(), k)).collect();

    let mut table = Table::new(&["trade", "date", "symbol", "problem"]);
    let mut rows = Vec::new();
    let mut bad_syms: Vec<String> = Vec::new();
    for i in 0..trades.len() {
        let (Some(date), Some(sym)) = (dates[i], syms[i].as_ref()) else {
            return Err(DomainError::field(
                "trades",
                format!("records[{i}] needs both date and symbol (got null)"),
            ));
        };
        let problem = match members.get(sym) {
            Some(ivs) => reason(date, ivs),
            None => Some(match upper.get(&sym.to_uppercase()) {
                Some(k) => format!("not in the universe (it has '{k}': symbols are case-sensitive)"),
                None => "not in the universe at all".to_owned(),
            }),
        };
        if let Some(p) = problem {
            table.row(vec![i.to_string(), date.to_string(), sym.clone(), p.clone()]);
            rows.push(json!({"trade": i, "date": date.to_string(), "symbol": sym, "problem": p}));
            if !bad_syms.contains(sym) {
                bad_syms.push(sym.clone());
            }
        }
    }
    if rows.is_empty() {
        let msg = if trades.is_empty() {
            "no trades to check".to_owned()
        } else {
            format!("all {} trades are point-in-time members", trades.len())
        };
        findings.push(Finding::info("trades", msg));
    } else {
        findings.push(Finding::error(
            "trades",
            format!(
                "{} of {} trades are in symbols that were not universe members on the trade date ({}): look-ahead in universe selection",
                rows.len(),
                trades.len(),
                name_list(&bad_syms, 10)
            ),
        ));
    }
    let mut ev = Evidence::new();
    ev.put("n_trades", json!(trades.len()));
    ev.put("n_violations", json!(rows.len()));
    ev.put("n_universe_symbols", json!(members.len()));
    ev.list(
        "symbols_with_violations",
        bad_syms.iter().map(|s| json!(s)).collect(),
    );
    ev.rows("violations", rows);
    if !table.is_empty() {
        ev.table(&table);
    }
    Ok(GuardReport::new("check_pit_universe", findings, ev.into_value()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn run(trades: Value, universe: Value) -> GuardReport<PitUniverseEvidence> {
        let r = check_pit_universe(
            serde_json::from_value(json!({"trades": trades, "universe": universe})).unwrap(),
        )
        .unwrap();
        super::super::report::assert_evidence_matches(&r);
        r
    }

    fn universe() -> Value {
        json!([
            {"symbol": "AAA", "start": "2020-01-01", "end": null},
            {"symbol": "BBB", "start": "2020-01-01", "end": "2020-06-30"},
            {"symbol": "BBB", "start": "2021-01-01", "end": "2021-12-31"},
            {"symbol": "CCC", "start": "2020-07-01", "end": null}
        ])
    }

    #[test]
    fn members_pass_with_inclusive_ends() {
        // Pins inclusive start and end dates and open-ended membership.
        let t = json!([
            {"date": "2020-01-01", "symbol": "AAA"}, {"date": "2020-06-30", "symbol": "BBB"},
            {"date": "2021-01-01", "symbol": "BBB"}, {"date": "2030-01-01", "symbol": "CCC", "qty": 5}
        ]);
        let r = run(t, universe());
        assert!(r.passed, "{:?}", r.findings);
        assert_eq!(r.evidence["n_violations"], 0);
    }

    #[test]
    fn each_kind_of_violation_is_listed() {
        // Pins the four reasons, classified by hand from the intervals above.
        let t = json!([
            {"date": "2020-06-30", "symbol": "CCC"},
            {"date": "2020-09-01", "symbol": "BBB"},
            {"date": "2022-01-01", "symbol": "BBB"},
            {"date": "2020-03-01", "symbol": "ZZZ"},
            {"date": "2020-03-01", "symbol": "aaa"}
        ]);
        let r = run(t, universe());
        assert!(!r.passed);
        let p: Vec<&str> = r.evidence["violations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["problem"].as_str().unwrap())
            .collect();
        assert_eq!(p[0], "before membership (first member 2020-07-01)");
        assert_eq!(p[1], "between membership intervals");
        assert_eq!(p[2], "after membership (left 2021-12-31)");
        assert_eq!(p[3], "not in the universe at all");
        assert!(p[4].contains("case-sensitive"));
        assert!(r.findings[0].message.starts_with("5 of 5 trades"));
    }

    #[test]
    fn many_violations_are_truncated() {
        // Pins the 50-row cap on listed violations with a `truncated` note.
        let t: Vec<Value> = (0..120)
            .map(|_| json!({"date": "2019-01-01", "symbol": "AAA"}))
            .collect();
        let r = run(json!(t), universe());
        assert_eq!(r.evidence["violations"].as_array().unwrap().len(), 50);
        assert_eq!(r.evidence["truncated"]["violations"], "showing 50 of 120 rows");
        assert_eq!(r.evidence["n_violations"], 120);
    }

    #[test]
    fn bad_dates_and_intervals() {
        // Pins a malformed trade date refused by field, and an end-before-start interval flagged.
        let e = check_pit_universe(
            serde_json::from_value(
                json!({"trades": [{"date": "03/01/2020", "symbol": "AAA"}], "universe": universe()}),
            )
            .unwrap(),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("trades: records[0].date: expected an ISO-8601 date"),
            "{e}"
        );
        let u = json!([{"symbol": "AAA", "start": "2020-02-01", "end": "2020-01-01"}]);
        let r = run(json!([]), u);
        assert!(r.findings.iter().any(|f| f.message.contains("before start")));
    }
}
