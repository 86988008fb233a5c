//! Registration: which domain functions are guards, and how they run.
//!
//! Pricing is `isolated` (the default) to show the worker path; the quote
//! book is a managed resource, so `get_quote` runs `in_process`, and
//! `get_quote_isolated` re-reads the CSV inside a worker for comparison.
//! Research guards take their catalogue category from
//! `domain::GUARD_CATEGORIES`; `assert_causal` is script-only (`causal`).

mod causal;
mod quotes;

use warden::{App, Guard, guard};

use crate::domain;

/// The example application with every guard registered.
pub fn app() -> App {
    App::new("warden-finance")
        .version(env!("CARGO_PKG_VERSION"))
        .resource(quotes::load_quote_book)
        .guard(
            guard(domain::options::price_option)
                .name("price_option_t")
                .category("pricing"),
        )
        .guard(
            guard(domain::greeks::calc_greeks)
                .name("calc_greeks_t")
                .category("pricing"),
        )
        .guard(guard(quotes::get_quote).in_process().category("market-data"))
        .guard(guard(quotes::get_quote_isolated).category("market-data"))
        // Research-integrity checks: pure computations, inline in scripts.
        .guard(research(guard(domain::check_cost_curve)))
        .guard(research(guard(domain::check_rf_convention)))
        .guard(research(guard(domain::check_performance)))
        .guard(research(guard(domain::check_deflated_sharpe)))
        .guard(research(guard(domain::check_spa)))
        .guard(research(guard(domain::check_brinson)))
        .guard(research(guard(domain::check_pit_universe)))
        .guard(research(guard(domain::check_survivorship)))
        .script_function(causal::ASSERT_CAUSAL)
}

/// A research guard: pure, with its category from the domain's catalogue
/// (a guard missing there keeps the default category).
fn research(guard: Guard) -> Guard {
    let category = domain::GUARD_CATEGORIES
        .iter()
        .find(|(name, _)| *name == guard.tool_name())
        .map(|(_, category)| *category);
    match category {
        Some(category) => guard.pure().category(category),
        None => guard.pure(),
    }
}
