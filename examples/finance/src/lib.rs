//! warden-finance: the example Warden application.
//!
//! [`domain`] is plain Rust (no MCP, no async); [`guards`] turns its functions
//! into registered guards. `main.rs` is one line: `app().run()`.

pub mod domain;
pub mod guards;

pub use guards::app;

impl From<domain::error::DomainError> for warden::GuardError {
    fn from(error: domain::error::DomainError) -> Self {
        match error.field {
            Some(field) => warden::GuardError::invalid_input(field, &error.message),
            None => warden::GuardError::failed(error.message),
        }
    }
}
