//! Registration: which domain functions are guards, and how they run.
//!
//! Pricing is `isolated` (the default) to show the worker path; the quote
//! book is a managed resource, so `get_quote` runs `in_process`, and
//! `get_quote_isolated` re-reads the CSV inside a worker for comparison.

mod quotes;

use warden::{App, guard};

use crate::domain;

/// The example application with every guard registered.
pub fn app() -> App {
    App::new("warden-finance")
        .version(env!("CARGO_PKG_VERSION"))
        .resource(quotes::load_quote_book)
        .guard(guard(domain::options::price_option).name("price_option_t"))
        .guard(guard(domain::greeks::calc_greeks).name("calc_greeks_t"))
        .guard(guard(quotes::get_quote).in_process())
        .guard(guard(quotes::get_quote_isolated))
        // Research-integrity checks: pure computations, inline in scripts.
        .guard(guard(domain::check_cost_curve).pure())
        .guard(guard(domain::check_rf_convention).pure())
        .guard(guard(domain::check_performance).pure())
        .guard(guard(domain::check_deflated_sharpe).pure())
        .guard(guard(domain::check_spa).pure())
        .guard(guard(domain::check_brinson).pure())
        .guard(guard(domain::check_pit_universe).pure())
        .guard(guard(domain::check_survivorship).pure())
}
