//! The example server. With no arguments it speaks MCP over stdio.
fn main() -> std::process::ExitCode {
    warden_finance::app().run()
}
