//! The example server, built as this package's own binary so the tests get
//! its path from `CARGO_BIN_EXE_warden-it-finance`.
fn main() -> std::process::ExitCode {
    warden_finance::app().run()
}
