//! The one error type of the finance domain: a message about the caller's
//! input, optionally tied to the input field it is about. Every guard returns
//! it for input it cannot work with; findings about the *content* of valid
//! input go into a `GuardReport` instead.

use std::fmt;

use serde::Serialize;

/// An input problem, phrased for the caller: lowercase, naming what was
/// expected and what was got. `Display` renders `field: message`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainError {
    /// The input field the problem is about (`None` for whole-input problems).
    pub field: Option<String>,
    /// What was expected and what was got, without the field prefix.
    pub message: String,
}

impl DomainError {
    /// An error about one named input field.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: Some(field.into()),
            message: message.into(),
        }
    }

    /// An error about the input as a whole.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            field: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for DomainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{field}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for DomainError {}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn display_prefixes_the_field() {
        // Pins the rendered form `field: message` used in tool error text.
        let e = DomainError::field("volatility", "must be >= 0, got -0.2");
        assert_eq!(e.to_string(), "volatility: must be >= 0, got -0.2");
        assert_eq!(e.field.as_deref(), Some("volatility"));
    }

    #[test]
    fn display_without_field_is_the_message() {
        // Pins that whole-input errors render without a prefix.
        assert_eq!(DomainError::new("empty input").to_string(), "empty input");
    }
}
