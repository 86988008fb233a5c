//! Sample market data: the `QuoteBook` read from a CSV file with the header
//! `symbol,price,currency`, the `QuoteInput` of the quote-lookup tool and the
//! `Quote` it returns. Symbols are matched case-insensitively.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::error::DomainError;

/// Look up the latest sample quote for a symbol (price per share in its currency).
///
/// The quotes are a fixed sample shipped with the server, not live prices.
/// Symbols are matched case-insensitively ("aapl" finds AAPL). An unknown
/// symbol fails with code `invalid_input`, field `symbol`, and a message
/// listing the known symbols (catch it: `e.code == "invalid_input"`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuoteInput {
    /// Ticker symbol, e.g. "AAPL" (case-insensitive).
    pub symbol: String,
}

/// One quote: the last sample price per share.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Quote {
    /// Ticker symbol, upper case.
    pub symbol: String,
    /// Price per share, in `currency`.
    pub price: f64,
    /// ISO 4217 currency code of the price, e.g. "USD".
    pub currency: String,
}

/// Quotes keyed by upper-case symbol.
#[derive(Debug, Clone, Default)]
pub struct QuoteBook {
    quotes: BTreeMap<String, Quote>,
}

const HEADER: [&str; 3] = ["symbol", "price", "currency"];

impl QuoteBook {
    /// Reads a quote file; errors name the file and the offending line.
    pub fn from_path(path: &Path) -> Result<Self, DomainError> {
        let file = std::fs::File::open(path).map_err(|e| {
            DomainError::new(format!("cannot read market data file '{}': {e}", path.display()))
        })?;
        Self::from_reader(file)
            .map_err(|e| DomainError::new(format!("market data file '{}': {e}", path.display())))
    }

    /// Reads CSV text with the header `symbol,price,currency`.
    pub fn from_reader<R: Read>(reader: R) -> Result<Self, DomainError> {
        let mut rdr = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(reader);
        let header = rdr
            .headers()
            .map_err(|e| DomainError::new(format!("cannot read the csv header: {e}")))?;
        let got: Vec<String> = header.iter().map(str::to_ascii_lowercase).collect();
        if got != HEADER {
            return Err(DomainError::new(format!(
                "header must be 'symbol,price,currency', got '{}'",
                header.iter().collect::<Vec<_>>().join(",")
            )));
        }
        let mut quotes = BTreeMap::new();
        for (i, rec) in rdr.records().enumerate() {
            let line = i + 2;
            let rec = rec.map_err(|e| DomainError::new(format!("line {line}: {e}")))?;
            let symbol = rec.get(0).unwrap_or("").to_ascii_uppercase();
            if symbol.is_empty() {
                return Err(DomainError::new(format!("line {line}: empty symbol")));
            }
            let raw = rec.get(1).unwrap_or("");
            let price: f64 = raw
                .parse()
                .map_err(|_| DomainError::new(format!("line {line}: price must be a number, got '{raw}'")))?;
            if !price.is_finite() || price <= 0.0 {
                return Err(DomainError::new(format!(
                    "line {line}: price must be a finite number > 0, got {price}"
                )));
            }
            let currency = rec.get(2).unwrap_or("").to_ascii_uppercase();
            if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_alphabetic()) {
                return Err(DomainError::new(format!(
                    "line {line}: currency must be a 3-letter code like USD, got '{currency}'"
                )));
            }
            let q = Quote {
                symbol: symbol.clone(),
                price,
                currency,
            };
            if quotes.insert(symbol.clone(), q).is_some() {
                return Err(DomainError::new(format!(
                    "line {line}: duplicate symbol '{symbol}'"
                )));
            }
        }
        Ok(Self { quotes })
    }

    /// The quote for `symbol` (case-insensitive, surrounding spaces ignored).
    pub fn get(&self, symbol: &str) -> Result<Quote, DomainError> {
        let key = symbol.trim().to_ascii_uppercase();
        self.quotes.get(&key).cloned().ok_or_else(|| {
            DomainError::field(
                "symbol",
                format!(
                    "unknown symbol '{}'; known symbols: {}",
                    symbol.trim(),
                    self.symbols().join(", ")
                ),
            )
        })
    }

    /// The quote-lookup tool: `get` on the input's symbol.
    pub fn quote(&self, input: QuoteInput) -> Result<Quote, DomainError> {
        self.get(&input.symbol)
    }

    /// Known symbols, sorted.
    pub fn symbols(&self) -> Vec<String> {
        self.quotes.keys().cloned().collect()
    }

    /// Number of quotes.
    pub fn len(&self) -> usize {
        self.quotes.len()
    }

    /// True when the book holds no quotes.
    pub fn is_empty(&self) -> bool {
        self.quotes.is_empty()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const CSV: &str = "symbol,price,currency\nMSFT,415.10,USD\naapl,227.52,usd\nSAP,195.40,EUR\n";

    #[test]
    fn lookup_is_case_insensitive() {
        // Pins that "aapl", "AAPL" and " Aapl " find the same upper-cased quote.
        let book = QuoteBook::from_reader(CSV.as_bytes()).unwrap();
        let q = book.get(" Aapl ").unwrap();
        assert_eq!(
            q,
            Quote {
                symbol: "AAPL".into(),
                price: 227.52,
                currency: "USD".into()
            }
        );
        assert_eq!(
            book.quote(QuoteInput { symbol: "sap".into() }).unwrap().currency,
            "EUR"
        );
    }

    #[test]
    fn unknown_symbol_lists_known_ones() {
        // Pins the unknown-symbol message and its field.
        let book = QuoteBook::from_reader(CSV.as_bytes()).unwrap();
        let e = book.get("XYZ").unwrap_err();
        assert_eq!(
            e.to_string(),
            "symbol: unknown symbol 'XYZ'; known symbols: AAPL, MSFT, SAP"
        );
    }

    #[test]
    fn bad_files_are_rejected_with_the_line() {
        // Pins header, price, currency and duplicate checks.
        let bad = |s: &str| QuoteBook::from_reader(s.as_bytes()).unwrap_err().to_string();
        assert!(bad("sym,price,currency\n").starts_with("header must be"));
        assert_eq!(
            bad("symbol,price,currency\nA,abc,USD\n"),
            "line 2: price must be a number, got 'abc'"
        );
        assert!(bad("symbol,price,currency\nA,-1,USD\n").contains("> 0, got -1"));
        assert!(bad("symbol,price,currency\nA,1,DOLLARS\n").contains("3-letter"));
        assert_eq!(
            bad("symbol,price,currency\nA,1,USD\na,2,USD\n"),
            "line 3: duplicate symbol 'A'"
        );
    }

    #[test]
    fn shipped_sample_file_loads() {
        // Pins that the repository's sample_market_data.csv parses and has AAPL.
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_market_data.csv");
        let book = QuoteBook::from_path(&file).unwrap();
        assert!(book.len() >= 8);
        assert_eq!(book.get("aapl").unwrap().currency, "USD");
    }

    #[test]
    fn missing_file_names_the_path() {
        // Pins the error for an unreadable file.
        let e = QuoteBook::from_path(Path::new("/nonexistent/q.csv")).unwrap_err();
        assert!(e.message.contains("'/nonexistent/q.csv'"), "{e}");
    }
}
