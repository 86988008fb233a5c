use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use warden::{App, GuardError, guard};

/// Add two numbers. (This doc comment is the tool description.)
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddInput {
    /// Left operand.
    a: f64,
    /// Right operand.
    b: f64,
}

#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: f64,
}

fn add(input: AddInput) -> Result<Sum, GuardError> {
    // 1e308 + 1e308 overflows to infinity: the framework then fails the call
    // with `non_finite_output` on `sum` rather than answer {"sum": null}.
    Ok(Sum {
        sum: input.a + input.b,
    })
}

fn main() -> std::process::ExitCode {
    App::new("hello")
        .guard(guard(add).pure()) // tool "add"; rename with .name("...")
        .run()
}
