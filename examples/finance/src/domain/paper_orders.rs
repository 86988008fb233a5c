//! Paper orders: simulated orders recorded in a ledger file, never sent to a
//! market. The ledger is JSON Lines, one [`PaperOrder`] a line, appended in
//! the order the orders were placed.
//!
//! Placing is idempotent on `client_order_id`: the ledger is read under an
//! exclusive `flock` (so concurrent calls, in this process or another such
//! as the CLI's `call`, see each other's lines), an id already there
//! answers with its order and writes nothing, and a new order is written as
//! one whole line by a single `write` on an `O_APPEND` file, then
//! `fsync`ed. A short write is cut back off, so no line is ever torn by a
//! full disk. Listing reads under a shared lock and so never sees half a
//! line.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::error::DomainError;

/// The largest `quantity` of one order: more than a billion shares is a
/// typo, not a paper trade (above it: `invalid_input` on `quantity`).
pub const MAX_QUANTITY: u64 = 1_000_000_000;
/// The longest `client_order_id`, in characters (1 to this many of
/// `A-Z a-z 0-9 _ -`; outside: `invalid_input` on `client_order_id`).
pub const MAX_CLIENT_ORDER_ID_CHARS: usize = 64;
/// The longest `symbol`, in characters (1 to this many of `A-Z 0-9 . -`
/// once upper-cased; outside: `invalid_input` on `symbol`).
pub const MAX_SYMBOL_CHARS: usize = 12;
/// The most orders one `list_paper_orders` call returns (`limit` above it:
/// `invalid_input` on `limit`).
pub const MAX_LIST_LIMIT: u32 = 1000;
/// The number of orders `list_paper_orders` returns when `limit` is unset.
pub const DEFAULT_LIST_LIMIT: u32 = 100;

/// Buy or sell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// Buy `quantity` shares.
    Buy,
    /// Sell `quantity` shares.
    Sell,
}

/// Where an order stands. Paper orders are accepted and stay so: nothing
/// fills them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OrderStatus {
    /// Recorded in the paper ledger.
    Accepted,
}

/// Place a paper order (simulated: recorded in the paper ledger, never sent to a market).
///
/// Annotated destructive: from a script or a batch it runs only once the
/// person confirms the call. Idempotent on `client_order_id`: placing the
/// same id again with the same fields returns the recorded order with
/// `duplicate: true` and writes nothing; the same id with different fields
/// fails with code `invalid_input`, field `client_order_id`. Every input
/// error names its field.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlaceOrderInput {
    /// Ticker symbol, 1-12 characters of A-Z, 0-9, '.' or '-' (case-insensitive; recorded upper case), e.g. "AAPL" or "BRK.B".
    pub symbol: String,
    /// "buy" or "sell".
    pub side: Side,
    /// Number of shares, a whole number from 1 to 1,000,000,000.
    pub quantity: u64,
    /// Limit price per share (> 0); absent for a market order.
    #[serde(default)]
    pub limit_price: Option<f64>,
    /// Your id for this order, 1-64 characters of A-Z, a-z, 0-9, '_' or '-'; placing it again returns the recorded order.
    pub client_order_id: String,
}

/// One order as the paper ledger records it (one JSON line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PaperOrder {
    /// The caller's id for the order, unique in the ledger.
    pub client_order_id: String,
    /// Ticker symbol, upper case.
    pub symbol: String,
    /// "buy" or "sell".
    pub side: Side,
    /// Number of shares.
    pub quantity: u64,
    /// Limit price per share; null for a market order.
    pub limit_price: Option<f64>,
    /// When the order was placed, RFC 3339 in UTC.
    pub placed_at: String,
    /// Always "accepted": paper orders are recorded, not filled.
    pub status: OrderStatus,
}

/// The answer of `place_paper_order`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct PlacedOrder {
    /// The order as the ledger records it.
    pub order: PaperOrder,
    /// True when `client_order_id` was already in the ledger with these
    /// fields: `order` is the recorded one and nothing was written.
    pub duplicate: bool,
}

/// List the paper orders recorded in the paper ledger, oldest first and newest last.
///
/// Optionally only one symbol's orders. Returns the newest `limit` of them
/// (default 100, at most 1000) and `total`, the number of matching orders
/// in the ledger. An empty or absent ledger is an empty list.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListOrdersInput {
    /// Only this symbol's orders (case-insensitive), e.g. "AAPL"; absent for every order.
    #[serde(default)]
    pub symbol: Option<String>,
    /// How many of the newest matching orders to return, from 1 to 1000 (default 100).
    #[serde(default)]
    pub limit: Option<u32>,
}

/// The answer of `list_paper_orders`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct OrderList {
    /// The newest `limit` matching orders, in the order they were placed (newest last).
    pub orders: Vec<PaperOrder>,
    /// How many orders in the ledger match, `orders` included.
    pub total: usize,
}

/// At most 40 characters of a caller's value, for an error message.
fn shown(value: &str) -> String {
    let mut text: String = value.chars().take(40).collect();
    if value.chars().count() > 40 {
        text.push('…');
    }
    text
}

/// The symbol upper-cased, or the error naming `symbol`.
pub fn normalise_symbol(symbol: &str) -> Result<String, DomainError> {
    let upper = symbol.to_ascii_uppercase();
    let count = upper.chars().count();
    let allowed = upper
        .chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '.' || c == '-');
    if count == 0 || count > MAX_SYMBOL_CHARS || !allowed {
        return Err(DomainError::field(
            "symbol",
            format!(
                "must be 1-{MAX_SYMBOL_CHARS} characters of A-Z, 0-9, '.' or '-' (case-insensitive), e.g. \"AAPL\" or \"BRK.B\"; got \"{}\"",
                shown(symbol)
            ),
        ));
    }
    Ok(upper)
}

fn check_client_order_id(id: &str) -> Result<(), DomainError> {
    let count = id.chars().count();
    let allowed = id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if count == 0 || count > MAX_CLIENT_ORDER_ID_CHARS || !allowed {
        return Err(DomainError::field(
            "client_order_id",
            format!(
                "must be 1-{MAX_CLIENT_ORDER_ID_CHARS} characters of A-Z, a-z, 0-9, '_' or '-', e.g. \"rebalance-2024-06-01-aapl\"; got \"{}\" ({count} characters)",
                shown(id)
            ),
        ));
    }
    Ok(())
}

/// The order `input` asks for, validated and normalised, stamped
/// `placed_at`. Every error names its field.
pub fn new_order(input: PlaceOrderInput, placed_at: String) -> Result<PaperOrder, DomainError> {
    check_client_order_id(&input.client_order_id)?;
    let symbol = normalise_symbol(&input.symbol)?;
    if input.quantity == 0 || input.quantity > MAX_QUANTITY {
        return Err(DomainError::field(
            "quantity",
            format!(
                "must be a whole number of shares from 1 to {MAX_QUANTITY}, got {}",
                input.quantity
            ),
        ));
    }
    if let Some(price) = input.limit_price
        && !(price.is_finite() && price > 0.0)
    {
        return Err(DomainError::field(
            "limit_price",
            format!("must be a finite price per share > 0, or absent for a market order; got {price}"),
        ));
    }
    Ok(PaperOrder {
        client_order_id: input.client_order_id,
        symbol,
        side: input.side,
        quantity: input.quantity,
        limit_price: input.limit_price,
        placed_at,
        status: OrderStatus::Accepted,
    })
}

/// Whether two orders ask for the same thing (all but `placed_at` and
/// `status`).
fn same_fields(a: &PaperOrder, b: &PaperOrder) -> bool {
    a.client_order_id == b.client_order_id
        && a.symbol == b.symbol
        && a.side == b.side
        && a.quantity == b.quantity
        && a.limit_price == b.limit_price
}

/// An order in one line, for messages: `buy 10 AAPL limit 190.5`.
fn describe(order: &PaperOrder) -> String {
    let side = match order.side {
        Side::Buy => "buy",
        Side::Sell => "sell",
    };
    let price = match order.limit_price {
        Some(price) => format!("limit {price}"),
        None => "market".to_string(),
    };
    format!("{side} {} {} {price}", order.quantity, order.symbol)
}

/// The paper ledger file.
#[derive(Debug, Clone)]
pub struct Ledger {
    path: PathBuf,
}

impl Ledger {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn failed(&self, what: &str, error: impl std::fmt::Display) -> DomainError {
        DomainError::new(format!(
            "paper ledger '{}': {what}: {error}; point WARDEN_FINANCE_LEDGER at a file this server can read and write",
            self.path.display()
        ))
    }

    /// The orders in `text`, in file order. A line that is not an order
    /// is an error naming the file and the line: the ledger is the record,
    /// so a damaged one is repaired by a person, not skipped.
    fn parse(&self, text: &str) -> Result<Vec<PaperOrder>, DomainError> {
        let mut orders = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let order: PaperOrder = serde_json::from_str(line).map_err(|e| {
                DomainError::new(format!(
                    "paper ledger '{}' line {} is not a paper order ({e}); repair or remove that line, or move the file aside",
                    self.path.display(),
                    i + 1
                ))
            })?;
            orders.push(order);
        }
        Ok(orders)
    }

    /// Places `order` unless its `client_order_id` is recorded already:
    /// then the recorded order comes back with `duplicate: true` when the
    /// fields agree, and an error naming `client_order_id` when not.
    pub fn place(&self, order: PaperOrder) -> Result<PlacedOrder, DomainError> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.path)
            .map_err(|e| self.failed("cannot open it", e))?;
        let file =
            Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| self.failed("cannot lock it", e))?;
        let mut text = String::new();
        (&*file)
            .read_to_string(&mut text)
            .map_err(|e| self.failed("cannot read it", e))?;
        let recorded = self.parse(&text)?;
        if let Some(existing) = recorded
            .into_iter()
            .find(|o| o.client_order_id == order.client_order_id)
        {
            if same_fields(&existing, &order) {
                return Ok(PlacedOrder {
                    order: existing,
                    duplicate: true,
                });
            }
            return Err(DomainError::field(
                "client_order_id",
                format!(
                    "\"{}\" already names another order in the paper ledger ({}, placed {}), not {}; use a new client_order_id, or repeat that order's fields to get it back",
                    order.client_order_id,
                    describe(&existing),
                    existing.placed_at,
                    describe(&order)
                ),
            ));
        }
        let mut line =
            serde_json::to_string(&order).map_err(|e| self.failed("cannot encode the order", e))?;
        line.push('\n');
        // A last line without its newline (a hand edit) must not swallow this one.
        if !text.is_empty() && !text.ends_with('\n') {
            line.insert(0, '\n');
        }
        let before = text.len() as u64;
        match (&*file).write(line.as_bytes()) {
            Ok(written) if written == line.len() => {}
            outcome => {
                // Cut a partial line back off so the ledger holds whole lines only.
                let _ = file.set_len(before);
                let reason = match outcome {
                    Ok(written) => format!("only {written} of {} bytes written (disk full?)", line.len()),
                    Err(e) => e.to_string(),
                };
                return Err(self.failed("the order was not recorded", reason));
            }
        }
        file.sync_all().map_err(|e| {
            self.failed(
                "the order line was written but fsync failed, so it may not survive a crash (place it again with the same client_order_id to see whether it was kept)",
                e,
            )
        })?;
        Ok(PlacedOrder {
            order,
            duplicate: false,
        })
    }

    /// The newest `limit` orders (of `symbol`, when given), newest last,
    /// and how many match. An absent ledger has none.
    pub fn list(&self, input: ListOrdersInput) -> Result<OrderList, DomainError> {
        let limit = input.limit.unwrap_or(DEFAULT_LIST_LIMIT);
        if limit == 0 || limit > MAX_LIST_LIMIT {
            return Err(DomainError::field(
                "limit",
                format!("must be from 1 to {MAX_LIST_LIMIT}, got {limit}"),
            ));
        }
        let symbol = input.symbol.as_deref().map(normalise_symbol).transpose()?;
        let file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(OrderList {
                    orders: Vec::new(),
                    total: 0,
                });
            }
            Err(e) => return Err(self.failed("cannot open it", e)),
        };
        let file =
            Flock::lock(file, FlockArg::LockShared).map_err(|(_, e)| self.failed("cannot lock it", e))?;
        let mut text = String::new();
        (&*file)
            .read_to_string(&mut text)
            .map_err(|e| self.failed("cannot read it", e))?;
        drop(file);
        let mut orders: Vec<PaperOrder> = self
            .parse(&text)?
            .into_iter()
            .filter(|o| symbol.as_ref().is_none_or(|s| &o.symbol == s))
            .collect();
        let total = orders.len();
        let keep = (limit as usize).min(total);
        orders.drain(..total - keep);
        Ok(OrderList { orders, total })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn input(id: &str, quantity: u64) -> PlaceOrderInput {
        PlaceOrderInput {
            symbol: "aapl".into(),
            side: Side::Buy,
            quantity,
            limit_price: Some(190.5),
            client_order_id: id.into(),
        }
    }

    fn order(id: &str, quantity: u64) -> PaperOrder {
        new_order(input(id, quantity), "2026-01-02T03:04:05.000Z".into()).unwrap()
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn an_order_is_one_line_and_a_repeat_writes_nothing() {
        // Placing twice with the same fields: one line, the second answer is the recorded order.
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path().join("orders.jsonl"));
        let first = ledger.place(order("a-1", 10)).unwrap();
        assert!(!first.duplicate);
        assert_eq!(first.order.symbol, "AAPL");
        let again = new_order(input("a-1", 10), "2030-01-01T00:00:00.000Z".into()).unwrap();
        let second = ledger.place(again).unwrap();
        assert!(second.duplicate);
        assert_eq!(second.order, first.order, "the recorded order, its time included");
        let written = lines(ledger.path());
        assert_eq!(written.len(), 1);
        let line: serde_json::Value = serde_json::from_str(&written[0]).unwrap();
        assert_eq!(
            line,
            serde_json::json!({"client_order_id": "a-1", "symbol": "AAPL", "side": "buy", "quantity": 10,
                               "limit_price": 190.5, "placed_at": "2026-01-02T03:04:05.000Z", "status": "accepted"})
        );
    }

    #[test]
    fn the_same_id_with_other_fields_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path().join("orders.jsonl"));
        ledger.place(order("a-1", 10)).unwrap();
        let error = ledger.place(order("a-1", 11)).unwrap_err();
        assert_eq!(error.field.as_deref(), Some("client_order_id"));
        assert!(error.message.contains("buy 10 AAPL limit 190.5"), "{error}");
        assert_eq!(lines(ledger.path()).len(), 1);
    }

    #[test]
    fn every_bad_field_is_named() {
        let stamp = || "2026-01-02T03:04:05.000Z".to_string();
        let cases: [(PlaceOrderInput, &str); 7] = [
            (
                PlaceOrderInput {
                    symbol: String::new(),
                    ..input("a", 1)
                },
                "symbol",
            ),
            (
                PlaceOrderInput {
                    symbol: "TOOLONGSYMBOL1".into(),
                    ..input("a", 1)
                },
                "symbol",
            ),
            (
                PlaceOrderInput {
                    symbol: "AA PL".into(),
                    ..input("a", 1)
                },
                "symbol",
            ),
            (input("a", 0), "quantity"),
            (
                PlaceOrderInput {
                    limit_price: Some(-1.0),
                    ..input("a", 1)
                },
                "limit_price",
            ),
            (input("has space", 1), "client_order_id"),
            (input(&"x".repeat(65), 1), "client_order_id"),
        ];
        for (bad, field) in cases {
            let error = new_order(bad, stamp()).unwrap_err();
            assert_eq!(error.field.as_deref(), Some(field), "{error}");
        }
        assert_eq!(
            new_order(
                PlaceOrderInput {
                    symbol: "brk.b".into(),
                    ..input(&"x".repeat(64), 1)
                },
                stamp()
            )
            .unwrap()
            .symbol,
            "BRK.B"
        );
    }

    #[test]
    fn listing_filters_limits_and_keeps_the_newest_last() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path().join("orders.jsonl"));
        let absent = ledger.list(ListOrdersInput::default()).unwrap();
        assert_eq!((absent.orders.len(), absent.total), (0, 0));
        for i in 1..=5 {
            ledger.place(order(&format!("o-{i}"), i)).unwrap();
        }
        ledger
            .place(
                new_order(
                    PlaceOrderInput {
                        symbol: "msft".into(),
                        ..input("m-1", 3)
                    },
                    "t".into(),
                )
                .unwrap(),
            )
            .unwrap();
        let newest = ledger
            .list(ListOrdersInput {
                symbol: Some("aapl".into()),
                limit: Some(2),
            })
            .unwrap();
        assert_eq!(newest.total, 5);
        let ids: Vec<&str> = newest.orders.iter().map(|o| o.client_order_id.as_str()).collect();
        assert_eq!(ids, ["o-4", "o-5"]);
        assert_eq!(ledger.list(ListOrdersInput::default()).unwrap().total, 6);
        let error = ledger
            .list(ListOrdersInput {
                symbol: None,
                limit: Some(1001),
            })
            .unwrap_err();
        assert_eq!(error.field.as_deref(), Some("limit"));
    }

    #[test]
    fn a_damaged_line_is_named_and_a_missing_newline_swallows_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("orders.jsonl");
        let ledger = Ledger::new(&path);
        ledger.place(order("a-1", 1)).unwrap();
        // A hand edit that dropped the final newline: the next order still gets a line of its own.
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.trim_end()).unwrap();
        ledger.place(order("a-2", 2)).unwrap();
        assert_eq!(lines(&path).len(), 2);
        std::fs::write(
            &path,
            format!("{}not json\n", std::fs::read_to_string(&path).unwrap()),
        )
        .unwrap();
        let error = ledger.place(order("a-3", 3)).unwrap_err();
        assert!(error.field.is_none());
        assert!(error.message.contains("line 3"), "{error}");
        assert!(ledger.list(ListOrdersInput::default()).is_err());
    }

    #[test]
    fn concurrent_places_write_each_id_once() {
        // 8 threads, 4 ids placed twice each: 4 whole lines.
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path().join("orders.jsonl"));
        std::thread::scope(|scope| {
            for i in 0..8 {
                let ledger = &ledger;
                scope.spawn(move || ledger.place(order(&format!("c-{}", i % 4), 7)).unwrap());
            }
        });
        let written = lines(ledger.path());
        assert_eq!(written.len(), 4, "{written:?}");
        for line in written {
            serde_json::from_str::<PaperOrder>(&line).unwrap();
        }
    }
}
