//! The sample quote book as a managed resource, and the two quote guards.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;
use warden::{GuardError, Resources};

use crate::domain::quotes::{Quote, QuoteBook, QuoteInput};

/// The CSV the quote guards read: `WARDEN_FINANCE_DATA` (environment or
/// `.env`, through Warden's configuration), else the file shipped next to
/// this package.
pub fn data_path() -> PathBuf {
    warden::config::var_os("WARDEN_FINANCE_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/sample_market_data.csv")))
}

/// Resource factory: runs once in the server process, never in a worker.
pub fn load_quote_book() -> Result<QuoteBook, String> {
    let path = data_path();
    QuoteBook::from_path(&path).map_err(|e| format!("{}: {e}", path.display()))
}

/// In-process: borrows the book loaded once at startup.
pub fn get_quote(resources: &Resources, input: QuoteInput) -> Result<Quote, GuardError> {
    Ok(resources.get::<QuoteBook>()?.quote(input)?)
}

/// Look up the latest sample quote for a symbol, reading the CSV afresh in an isolated worker.
///
/// Same answer as get_quote; exists to compare the isolated path with the
/// in-process one. Price is per share in the quote's currency.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuoteIsolatedInput {
    /// Ticker symbol, case-insensitive (e.g. "AAPL").
    pub symbol: String,
}

/// Isolated: loads the book inside the worker on every call.
pub fn get_quote_isolated(input: QuoteIsolatedInput) -> Result<Quote, GuardError> {
    let book = QuoteBook::from_path(&data_path())?;
    Ok(book.get(&input.symbol)?)
}
