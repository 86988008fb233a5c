//! Registration: which domain functions are guards, and how they run.
//!
//! Pricing is `isolated` (the default) to show the worker path; the quote
//! book is a managed resource, so `get_quote` runs `in_process`, and
//! `get_quote_isolated` re-reads the CSV inside a worker for comparison
//! (hidden from the coding agent's prompt: it is the same answer).
//! Research guards take their catalogue category from
//! `domain::GUARD_CATEGORIES`; `assert_causal` is script-only (`causal`).
//! The paper-order guards (`orders`) write and read the paper ledger
//! in-process; placing one is destructive, so a script or batch places an
//! order only once the person confirms it. Both are hidden from the coding
//! agent's prompt, like `get_quote_isolated`, to keep it within budget.

mod causal;
mod orders;
mod quotes;

use warden::{App, Guard, guard};

use crate::domain;

/// The example application with every guard registered.
pub fn app() -> App {
    App::new("warden-finance")
        .version(env!("CARGO_PKG_VERSION"))
        .resource(quotes::load_quote_book)
        // get_quote_isolated reads the CSV's path in its worker.
        .worker_variable("WARDEN_FINANCE_DATA")
        .guard(
            guard(domain::options::price_option)
                .name("price_option_t")
                .title("Black–Scholes option price")
                .category("pricing"),
        )
        .guard(
            guard(domain::greeks::calc_greeks)
                .name("calc_greeks_t")
                .title("Option Greeks (Black–Scholes)")
                .category("pricing"),
        )
        // Pure: a root-finder a script may call thousands of times, inline.
        .guard(
            guard(domain::implied_volatility)
                .title("Implied volatility (Black–Scholes)")
                .category("pricing")
                .pure(),
        )
        .guard(
            guard(quotes::get_quote)
                .title("Market quote")
                .in_process()
                .category("market-data"),
        )
        .guard(
            guard(quotes::get_quote_isolated)
                .title("Market quote (isolated worker)")
                .category("market-data")
                // The same answer as get_quote by another path: for
                // operators comparing modes, not for the model's prompt.
                .hidden_from_model(),
        )
        // Appends to the paper ledger: the person confirms each call made
        // from a script or batch. In-process: the ledger's lock and path
        // live in the server, not in a worker. Both are left out of the
        // coding agent's prompt, which the example keeps under 20 KB for
        // small local models (they would add 1.2 KB); clients and scripts
        // call them as any guard.
        .guard(
            guard(orders::place_paper_order)
                .title("Place a paper order")
                .in_process()
                .destructive()
                // The same client order id places nothing twice.
                .idempotent()
                .category("orders")
                .hidden_from_model(),
        )
        .guard(
            guard(orders::list_paper_orders)
                .title("List paper orders")
                .in_process()
                .category("orders")
                .hidden_from_model(),
        )
        // Research-integrity checks: pure computations, inline in scripts.
        .guard(research(
            guard(domain::check_cost_curve).title("Returns net of trading costs"),
        ))
        .guard(research(
            guard(domain::check_rf_convention).title("Risk-free rate convention check"),
        ))
        .guard(research(
            guard(domain::check_performance).title("Performance statistics"),
        ))
        .guard(research(
            guard(domain::check_deflated_sharpe).title("Deflated Sharpe ratio"),
        ))
        .guard(research(
            guard(domain::check_spa).title("Superior predictive ability (SPA) test"),
        ))
        .guard(research(
            guard(domain::check_brinson).title("Brinson performance attribution"),
        ))
        .guard(research(
            guard(domain::check_pit_universe).title("Point-in-time universe check"),
        ))
        .guard(research(
            guard(domain::check_survivorship).title("Survivorship bias check"),
        ))
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
