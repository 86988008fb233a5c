//! The warden-finance domain: pure Rust, no MCP or async. It owns option
//! pricing (`options`, `greeks`, `stats`), the sample quote book (`quotes`),
//! and the research-integrity guards with their payload conventions. Each
//! guard is a plain `fn(Input) -> Result<Output, DomainError>`; the app's
//! glue registers them as tools. Intra-domain paths use `super::` only, so
//! this folder compiles both as `mod domain;` and as a crate root.

pub mod error;
pub mod greeks;
pub mod options;
pub mod payload;
pub mod quotes;
pub mod stats;

pub use error::DomainError;
pub use greeks::{Greeks, GreeksInput, calc_greeks};
pub use options::{OptionType, PriceOptionInput, price_option};
pub use quotes::{Quote, QuoteBook, QuoteInput};
