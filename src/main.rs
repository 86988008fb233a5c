//! The `warden` command: client-side tools that work on any Warden server.
//!
//! `warden preflight -- <command> [args…]` checks a server command the way a
//! client would start it; `warden test --config … --suite …` runs MCP
//! scenario suites against one. Both are library code shared with every
//! app's own CLI. Exit codes: 0 success, 1 a failed check or case, 2 a usage
//! or setup error.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "warden", about = "Check and test Warden MCP servers.", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check any Warden server command: `warden preflight -- <command> [args…]`.
    Preflight(warden::preflight::PreflightArgs),
    /// Run MCP scenario suites: `warden test --config server.json --suite suite.json`.
    #[cfg(feature = "testing")]
    Test(warden::testing::TestArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return if error.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.command {
        Command::Preflight(args) => warden::preflight::main(args),
        #[cfg(feature = "testing")]
        Command::Test(args) => warden::testing::main(args),
    }
}
