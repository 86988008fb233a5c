//! The warden-finance domain: pure Rust, no MCP or async. It owns option
//! pricing (`options`, `greeks`, `stats`), the sample quote book (`quotes`),
//! the paper-order ledger (`paper_orders`),
//! and the research-integrity guards with their payload conventions
//! (`payload`) and result shape (`report`). Each guard is a plain
//! `fn(Input) -> Result<Output, DomainError>`; the app's glue registers them
//! as tools. Intra-domain paths use `super::` only, so this folder compiles
//! both as `mod domain;` and as a crate root.

pub mod bootstrap;
pub mod brinson;
pub mod cost_curve;
pub mod deflated_sharpe;
pub mod error;
pub mod greeks;
pub mod implied_vol;
pub mod metrics;
pub mod options;
pub mod paper_orders;
pub mod payload;
pub mod performance;
pub mod pit_universe;
pub mod quotes;
pub mod report;
pub mod rf_convention;
pub mod spa;
pub mod stats;
pub mod survivorship;

pub use brinson::{BrinsonInput, BrinsonMethod, check_brinson};
pub use cost_curve::{CostCurveInput, check_cost_curve};
pub use deflated_sharpe::{DeflatedSharpeInput, check_deflated_sharpe};
pub use error::DomainError;
pub use greeks::{Greeks, GreeksInput, calc_greeks};
pub use implied_vol::{ImpliedVol, ImpliedVolInput, implied_volatility};
pub use options::{OptionType, PriceOptionInput, price_option};
pub use payload::{Frame, MAX_ARGUMENT_BYTES, MAX_CELLS, Series, check_argument_size, f64_inf};
pub use performance::{PerformanceInput, check_performance};
pub use pit_universe::{PitUniverseInput, check_pit_universe};
pub use quotes::{Quote, QuoteBook, QuoteInput};
pub use report::{Finding, GUARD_CATEGORIES, GuardReport, Severity};
pub use rf_convention::{RfConventionInput, check_rf_convention};
pub use spa::{SpaInput, check_spa};
pub use survivorship::{SurvivorshipInput, check_survivorship};

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use schemars::{JsonSchema, schema_for};
    use serde_json::Value;

    /// The input schema of `T` as JSON.
    fn schema<T: JsonSchema>() -> Value {
        serde_json::to_value(schema_for!(T)).unwrap()
    }

    fn all_input_schemas() -> Vec<(&'static str, Value)> {
        vec![
            ("price_option", schema::<PriceOptionInput>()),
            ("calc_greeks", schema::<GreeksInput>()),
            ("implied_volatility", schema::<ImpliedVolInput>()),
            ("get_quote", schema::<QuoteInput>()),
            ("check_cost_curve", schema::<CostCurveInput>()),
            ("check_rf_convention", schema::<RfConventionInput>()),
            ("check_performance", schema::<PerformanceInput>()),
            ("check_deflated_sharpe", schema::<DeflatedSharpeInput>()),
            ("check_spa", schema::<SpaInput>()),
            ("check_brinson", schema::<BrinsonInput>()),
            ("check_pit_universe", schema::<PitUniverseInput>()),
            ("check_survivorship", schema::<SurvivorshipInput>()),
            ("place_paper_order", schema::<paper_orders::PlaceOrderInput>()),
            ("list_paper_orders", schema::<paper_orders::ListOrdersInput>()),
        ]
    }

    #[test]
    fn every_input_type_and_field_is_described() {
        // Pins that each tool has a description and every field a schema description.
        for (name, s) in all_input_schemas() {
            let d = s["description"].as_str().unwrap_or_default();
            assert!(d.len() > 40, "{name}: type doc missing");
            assert_eq!(
                s["additionalProperties"],
                Value::Bool(false),
                "{name}: deny_unknown_fields"
            );
            for (field, prop) in s["properties"].as_object().unwrap() {
                let has = prop
                    .get("description")
                    .and_then(Value::as_str)
                    .is_some_and(|d| !d.is_empty());
                assert!(has, "{name}.{field} has no description: {prop}");
            }
        }
    }

    #[test]
    fn series_and_frame_fields_show_both_shapes() {
        // Pins that a Series/Frame field's schema is the oneOf of object and bare-list forms.
        let s = schema::<CostCurveInput>();
        let returns = &s["properties"]["returns"];
        assert_eq!(returns["oneOf"][0]["type"], "array");
        assert_eq!(returns["oneOf"][1]["required"], serde_json::json!(["values"]));
        let s = schema::<BrinsonInput>();
        assert_eq!(
            s["properties"]["segments"]["oneOf"][1]["required"],
            serde_json::json!(["records"])
        );
        let s = schema::<DeflatedSharpeInput>();
        assert!(s["properties"]["returns"].to_string().contains("oneOf"));
    }

    #[test]
    fn categories_name_real_guards() {
        // Pins that each catalogue entry is one of the guards re-exported here.
        let guards = [
            "check_cost_curve",
            "check_rf_convention",
            "check_performance",
            "check_deflated_sharpe",
            "check_spa",
            "check_brinson",
            "check_pit_universe",
            "check_survivorship",
        ];
        for (g, _) in GUARD_CATEGORIES {
            assert!(guards.contains(g));
        }
    }
}
