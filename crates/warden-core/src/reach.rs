//! Who can answer a question for the current request: the client's live
//! asker (kept in a run's [`Book`] when a script records its answers), a
//! detached task's book that pauses to ask, or nobody (and why).
//!
//! Apart from [`crate::ask`] (the question and its answer) and
//! [`crate::approval`] (the book of answers) because it needs both, and
//! neither needs it.

use std::sync::Arc;

use crate::approval::Book;
use crate::ask::{Asker, for_this_task};

/// Who can answer a question for the current request: its client's
/// asker, or why nobody can — so a refusal names what is missing (the
/// command line, a client without elicitation, a detached task) instead
/// of guessing.
#[derive(Clone)]
pub enum Reach {
    Asker(Asker),
    /// A live asker whose answers a script run keeps in `book`, with the
    /// plan the person approved once for the run (see
    /// [`crate::approval`]): its planned calls are not asked again.
    Recorded {
        asker: Asker,
        book: Arc<Book>,
    },
    /// A detached task that pauses to ask and resumes with the answer
    /// (see [`crate::approval`]).
    Durable(Arc<Book>),
    Nobody(&'static str),
}

impl Reach {
    /// The current task's: its [`crate::ask::scope`]d asker, else the reason its caller
    /// set with [`nobody`], else [`COMMAND_LINE`] (no server set either).
    pub fn here() -> Self {
        if let Some(asker) = for_this_task() {
            return Self::Asker(asker);
        }
        if let Ok(book) = DURABLE.try_with(Clone::clone) {
            return Self::Durable(book);
        }
        Self::Nobody(NOBODY.try_with(|reason| *reason).unwrap_or(COMMAND_LINE))
    }

    pub fn asker(&self) -> Option<&Asker> {
        match self {
            Self::Asker(asker) | Self::Recorded { asker, .. } => Some(asker),
            Self::Durable(_) | Self::Nobody(_) => None,
        }
    }

    /// The book that keeps this run's answers, live or waiting.
    pub fn answers_book(&self) -> Option<&Arc<Book>> {
        match self {
            Self::Durable(book) | Self::Recorded { book, .. } => Some(book),
            _ => None,
        }
    }

    /// The book of a run that pauses to ask, if this is one.
    pub fn book(&self) -> Option<&Arc<Book>> {
        match self {
            Self::Durable(book) => Some(book),
            _ => None,
        }
    }
}

/// Why nobody can be asked outside any server request: the CLI.
pub const COMMAND_LINE: &str = "it was started from the command line, where nobody can answer a form";

tokio::task_local! {
    /// Why nobody can be asked in this request, set by the server where it
    /// sets no asker.
    static NOBODY: &'static str;
}

tokio::task_local! {
    /// The approvals of the detached task this request runs, which pauses
    /// to ask (set by the server around a claimed task).
    static DURABLE: Arc<Book>;
}

/// Runs `future` as a detached task that pauses to ask: its destructive
/// calls are answered from `book`, or stop the run on a question
/// ([`Reach::Durable`]).
pub async fn durable<F: std::future::Future>(book: Arc<Book>, future: F) -> F::Output {
    DURABLE.scope(book, future).await
}

/// Runs `future` stating why nobody can be asked in it (a client without
/// elicitation, a detached task); [`Reach::here`] reports it.
pub async fn nobody<F: std::future::Future>(reason: &'static str, future: F) -> F::Output {
    NOBODY.scope(reason, future).await
}
