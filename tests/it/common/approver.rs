//! A person behind an MCP client who answers destructive-call
//! confirmation forms: the client declares elicitation, accepts (or
//! declines) every form and keeps each form's message for the test.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::{ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData};
use rmcp::service::{RequestContext, RoleClient};
use serde_json::json;

/// A person who approves every form (or, with `declines`, none) and keeps
/// each form's message.
#[derive(Clone, Default)]
pub struct Approver {
    forms: Arc<Mutex<Vec<String>>>,
    declines: bool,
    /// How long the person looks at a form before answering.
    thinks: Option<Duration>,
    /// Forms the server withdrew (`notifications/cancelled`) while the
    /// person was still looking at them.
    withdrawn: Arc<AtomicUsize>,
    /// Declares URL-mode elicitation only: it takes no forms.
    url_only: bool,
    /// Run while the form is on screen, before the answer (the world
    /// changing while the person decides).
    meanwhile: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl Approver {
    /// A person who declines every form.
    pub fn declining() -> Self {
        Self {
            declines: true,
            ..Self::default()
        }
    }

    /// A person who approves every form after `thinks`, or at once when
    /// the server withdraws it: the answer that arrives too late.
    pub fn slow(thinks: Duration) -> Self {
        Self {
            thinks: Some(thinks),
            ..Self::default()
        }
    }

    /// A client declaring only URL-mode elicitation (`{"url": {}}`).
    pub fn url_only() -> Self {
        Self {
            url_only: true,
            ..Self::default()
        }
    }

    /// A person who approves every form once `meanwhile` has run.
    pub fn approving_after(meanwhile: impl Fn() + Send + Sync + 'static) -> Self {
        Self {
            meanwhile: Some(Arc::new(meanwhile)),
            ..Self::default()
        }
    }

    /// How many forms the server withdrew while they were on screen.
    pub fn withdrawn(&self) -> usize {
        self.withdrawn.load(Ordering::SeqCst)
    }

    pub fn forms(&self) -> Vec<String> {
        self.forms.lock().expect("forms").clone()
    }
}

impl ClientHandler for Approver {
    fn get_info(&self) -> ClientConfig {
        let elicitation = if self.url_only {
            json!({"url": {}})
        } else {
            json!({})
        };
        let capabilities = serde_json::from_value(json!({"elicitation": elicitation})).expect("capabilities");
        ClientConfig::new(capabilities, rmcp::model::Implementation::new("approver", "1.0"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.forms.lock().expect("forms").push(message);
        }
        if let Some(thinks) = self.thinks {
            tokio::select! {
                () = tokio::time::sleep(thinks) => {}
                () = context.ct.cancelled() => {
                    self.withdrawn.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        if let Some(meanwhile) = self.meanwhile.clone() {
            tokio::task::spawn_blocking(move || meanwhile())
                .await
                .expect("meanwhile");
        }
        if self.declines {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        }
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"confirm": true})))
    }
}
