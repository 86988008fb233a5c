//! tmp
pub mod bootstrap;
pub mod cost_curve;
pub mod deflated_sharpe;
pub mod error;
pub mod greeks;
pub mod metrics;
pub mod options;
pub mod payload;
pub mod performance;
pub mod quotes;
pub mod report;
pub mod rf_convention;
pub mod spa;
pub mod stats;
