//! `warden-test`: runs MCP scenario suites against a server command, the
//! same as `warden test` and `<app> test`. Exit codes: 0 every case passed,
//! 1 a case failed, 2 a usage or setup error.

use std::process::ExitCode;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(
    name = "warden-test",
    about = "Run MCP scenario suites against a server.",
    version
)]
struct Cli {
    #[command(flatten)]
    args: warden_testing::TestArgs,
}

fn main() -> ExitCode {
    match Cli::try_parse() {
        Ok(cli) => warden_testing::main(cli.args),
        Err(error) => {
            let _ = error.print();
            if error.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}
