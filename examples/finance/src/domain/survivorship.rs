//! Survivorship bias in a price panel: the `check_survivorship` guard. A
//! universe in which no symbol stops trading before the sample end was
//! probably built from today's survivors; the guard reports the delisted
//! names and the share of the universe they were.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::DomainError;
use super::payload::{Date, Evidence, F64OrInf, Frame, Table, fmt_pct, frame, name_list};
use super::report::{Finding, GuardReport};

/// Check a price panel for survivorship bias: flags a universe in which no symbol stops trading before the sample end, and reports the delisted names.
///
/// `prices` is a wide panel: one record per date (ascending), one column per
/// symbol, with null where the symbol has no price (not yet listed, or
/// delisted). Dates are ISO-8601 'YYYY-MM-DD' strings in the frame's
/// `index`, or in a `date` column. A symbol whose last price comes before
/// the panel's last date stopped trading (delisted, acquired, ...). Fails
/// when no symbol stops trading: survivors only.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SurvivorshipInput {
    /// Price panel: records per date, columns per symbol, null where there is no price; dates in `index` or a `date` column.
    #[schemars(with = "Frame")]
    pub prices: Value,
}

/// Dates of the panel (from the index, else the `date` column), strictly ascending.
fn panel_dates(f: &Frame) -> Result<Vec<Date>, DomainError> {
    let field = "prices";
    let dates: Vec<Date> = match &f.index {
        Some(ix) => ix
            .iter()
            .enumerate()
            .map(|(i, s)| Date::parse(s).map_err(|e| DomainError::field(field, format!("index[{i}]: {e}"))))
            .collect::<Result<_, _>>()?,
        None => f
            .dates("date", field)
            .map_err(|e| {
                DomainError::field(
                    field,
                    format!("{} (dates go in the frame's index or a 'date' column)", e.message),
                )
            })?
            .into_iter()
            .enumerate()
            .map(|(i, d)| d.ok_or_else(|| DomainError::field(field, format!("records[{i}].date is null"))))
            .collect::<Result<_, _>>()?,
    };
    if let Some(i) = (1..dates.len()).find(|&i| dates[i] <= dates[i - 1]) {
        return Err(DomainError::field(
            field,
            format!(
                "dates must be strictly ascending: record {i} ({}) follows {}",
                dates[i],
                dates[i - 1]
            ),
        ));
    }
    Ok(dates)
}

/// The evidence of `check_survivorship` (schema only; see `report`).
#[derive(Debug, Clone, JsonSchema)]
pub struct SurvivorshipEvidence {
    /// Dates in the panel.
    pub n_dates: usize,
    /// First date, YYYY-MM-DD.
    pub sample_start: String,
    /// Last date, YYYY-MM-DD.
    pub sample_end: String,
    /// Symbols with at least one price.
    pub n_symbols: usize,
    /// Symbols that stop trading before the last date.
    pub n_delisted: usize,
    /// n_delisted / n_symbols.
    pub delisted_share: F64OrInf,
    /// The delisted symbols with their first and last price dates.
    pub delisted: Vec<SurvivorshipRow>,
    /// Symbols whose first price comes after the first date.
    pub listed_during_sample: Vec<String>,
    /// Symbols without any price.
    pub without_prices: Vec<String>,
    /// Paste-ready text table.
    pub table: String,
}

/// One delisted symbol.
#[derive(Debug, Clone, JsonSchema)]
pub struct SurvivorshipRow {
    /// Symbol.
    pub symbol: String,
    /// Date of its first price.
    pub first_price: String,
    /// Date of its last price.
    pub last_price: String,
}

/// Runs the survivorship check.
pub fn check_survivorship(
    input: SurvivorshipInput,
) -> Result<GuardReport<SurvivorshipEvidence>, DomainError> {
    let f = frame(&input.prices, "prices")?;
    if f.is_empty() {
        return Err(DomainError::field(
            "prices",
            "has no records; give one record per date",
        ));
    }
    let dates = panel_dates(&f)?;
    let n = dates.len();
    let symbols: Vec<&String> = f
        .columns
        .iter()
        .filter(|c| f.index.is_some() || c.as_str() != "date")
        .collect();
    let mut findings = Vec::new();
    let mut table = Table::new(&["symbol", "first_price", "last_price", "status"]);
    let (mut delisted, mut late, mut empty) = (Vec::new(), Vec::new(), Vec::new());
    let mut rows = Vec::new();
    for sym in &symbols {
        let px = f.numbers(sym, "prices")?;
        if let Some(i) = px.iter().position(|p| p.is_infinite() || *p <= 0.0) {
            findings.push(Finding::error(
                format!("prices.{sym}"),
                format!(
                    "price on {} is {}; prices must be finite and > 0 (null for no price)",
                    dates[i], px[i]
                ),
            ));
        }
        let first = px.iter().position(|p| p.is_finite());
        let last = px.iter().rposition(|p| p.is_finite());
        let (Some(a), Some(b)) = (first, last) else {
            empty.push((*sym).clone());
            continue;
        };
        let status = if b < n - 1 {
            "stopped trading"
        } else {
            "trades to the end"
        };
        if b < n - 1 {
            delisted.push((*sym).clone());
            rows.push(json!({"symbol": sym, "first_price": dates[a].to_string(), "last_price": dates[b].to_string()}));
        }
        if a > 0 {
            late.push((*sym).clone());
        }
        table.row(vec![
            (*sym).clone(),
            dates[a].to_string(),
            dates[b].to_string(),
            status.to_owned(),
        ]);
    }
    let with_data = symbols.len() - empty.len();
    if with_data == 0 {
        return Err(DomainError::field(
            "prices",
            "no symbol has any price; give one column of prices per symbol",
        ));
    }
    let share = delisted.len() as f64 / with_data as f64;
    let (start, end) = (dates[0], dates[n - 1]);
    if delisted.is_empty() {
        findings.push(Finding::error(
            "prices",
            format!(
                "survivors only: all {with_data} symbols trade through the sample end {end}; a universe built from today's constituents leaves out names that were delisted between {start} and {end}, which inflates backtested returns"
            ),
        ));
    } else {
        findings.push(Finding::info(
            "prices",
            format!(
                "{} of {with_data} symbols ({}) stop trading before {end}: {}",
                delisted.len(),
                fmt_pct(share, 1),
                name_list(&delisted, 10)
            ),
        ));
    }
    if !empty.is_empty() {
        findings.push(Finding::warning(
            "prices",
            format!("no prices at all for {}", name_list(&empty, 10)),
        ));
    }
    if !late.is_empty() {
        findings.push(Finding::info(
            "prices",
            format!(
                "{} symbols start trading after {start} (listed during the sample)",
                late.len()
            ),
        ));
    }
    let mut ev = Evidence::new();
    ev.put("n_dates", json!(n));
    ev.text("sample_start", &start.to_string());
    ev.text("sample_end", &end.to_string());
    ev.put("n_symbols", json!(with_data));
    ev.put("n_delisted", json!(delisted.len()));
    ev.number("delisted_share", share);
    ev.rows("delisted", rows);
    ev.list("listed_during_sample", late.iter().map(|s| json!(s)).collect());
    ev.list("without_prices", empty.iter().map(|s| json!(s)).collect());
    ev.table(&table);
    Ok(GuardReport::new("check_survivorship", findings, ev.into_value()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn run(prices: Value) -> GuardReport<SurvivorshipEvidence> {
        let r = check_survivorship(serde_json::from_value(json!({"prices": prices})).unwrap()).unwrap();
        super::super::report::assert_evidence_matches(&r);
        r
    }

    #[test]
    fn survivors_only_fails() {
        // Pins the survivors-only error: both symbols have a price on the last date.
        let p = json!({"index": ["2020-01-01", "2020-01-02", "2020-01-03"], "records": [
            {"AAA": 10.0, "BBB": null}, {"AAA": 10.5, "BBB": 20.0}, {"AAA": 11.0, "BBB": 21.0}
        ]});
        let r = run(p);
        assert!(!r.passed);
        assert!(r.findings[0].message.starts_with("survivors only: all 2 symbols"));
        assert_eq!(r.evidence["listed_during_sample"], json!(["BBB"]));
    }

    #[test]
    fn delisted_names_and_share() {
        // Pins 1 of 4 symbols stopping early = 25%, with its last price date (counted by hand).
        let p = json!([
            {"date": "2020-01-01", "A": 1.0, "B": 2.0, "C": 3.0, "D": 4.0},
            {"date": "2020-01-02", "A": 1.1, "B": 2.1, "C": null, "D": 4.1},
            {"date": "2020-01-03", "A": 1.2, "B": 2.2, "C": null, "D": 4.2}
        ]);
        let r = run(p);
        assert!(r.passed, "{:?}", r.findings);
        assert_eq!(r.evidence["n_delisted"], 1);
        assert_eq!(r.evidence["delisted_share"].as_f64().unwrap(), 0.25);
        assert_eq!(
            r.evidence["delisted"][0],
            json!({"symbol": "C", "first_price": "2020-01-01", "last_price": "2020-01-01"})
        );
        assert_eq!(r.evidence["sample_end"], "2020-01-03");
    }

    #[test]
    fn bad_panels() {
        // Pins refusals: unsorted dates, no dates at all; and a non-positive price flagged.
        let bad = |v: Value| {
            check_survivorship(serde_json::from_value(json!({"prices": v})).unwrap())
                .unwrap_err()
                .to_string()
        };
        let e = bad(json!([{"date": "2020-01-02", "A": 1}, {"date": "2020-01-01", "A": 1}]));
        assert!(e.contains("strictly ascending"), "{e}");
        let e = bad(json!([{"A": 1}]));
        assert!(
            e.contains("missing column 'date'") && e.contains("frame's index"),
            "{e}"
        );
        let r =
            run(json!([{"date": "2020-01-01", "A": 1, "B": -1}, {"date": "2020-01-02", "A": null, "B": 1}]));
        assert!(
            r.findings
                .iter()
                .any(|f| f.location == "prices.B" && f.message.contains("> 0"))
        );
    }
}
