//! The `warden` command: tools that work on any Warden server.
fn main() -> std::process::ExitCode {
    eprintln!("warden: preflight and the scenario runner are not built yet");
    std::process::ExitCode::from(2)
}
