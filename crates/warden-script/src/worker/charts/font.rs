//! The one font charts use, compiled into the binary.
//!
//! DejaVu Sans, cut to the characters charts are likely to hold (the ranges
//! and the command that cut it are in assets/fonts/README.md; a character
//! outside them draws as an empty box), is registered with plotters
//! under the family `sans-serif`, once per process, from bytes embedded by
//! `include_bytes!`: rendering never opens a file, so it works inside the
//! script worker's Landlock and seccomp sandbox, and looks the same on every
//! machine. SVG output names the family `sans-serif` for the viewer.

use std::sync::OnceLock;

use plotters::style::{FontStyle, register_font};

use warden_core::error::GuardError;

/// The family every chart text uses.
pub(super) const FAMILY: &str = "sans-serif";

static DEJAVU_SANS: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans-charts.ttf");

/// Registers the font on first use; the outcome is remembered.
pub(super) fn ensure() -> Result<(), GuardError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| register_font(FAMILY, FontStyle::Normal, DEJAVU_SANS).is_ok());
    if ok {
        Ok(())
    } else {
        Err(GuardError::failed(
            "chart: the bundled font did not load; this is a build problem, not your script",
        ))
    }
}
