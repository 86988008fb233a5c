//! A person behind an MCP client who answers destructive-call
//! confirmation forms: the client declares elicitation, accepts (or
//! declines) every form and keeps each form's message for the test.

use std::sync::{Arc, Mutex};

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
}

impl Approver {
    /// A person who declines every form.
    pub fn declining() -> Self {
        Self {
            declines: true,
            ..Self::default()
        }
    }

    pub fn forms(&self) -> Vec<String> {
        self.forms.lock().expect("forms").clone()
    }
}

impl ClientHandler for Approver {
    fn get_info(&self) -> ClientConfig {
        let capabilities = serde_json::from_value(json!({"elicitation": {}})).expect("capabilities");
        ClientConfig::new(capabilities, rmcp::model::Implementation::new("approver", "1.0"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.forms.lock().expect("forms").push(message);
        }
        if self.declines {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        }
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"confirm": true})))
    }
}
