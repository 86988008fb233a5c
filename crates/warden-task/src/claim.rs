//! A queued task this server claimed ([`Claim`]): its id and the task slot
//! reserved for it, handed to the task explicitly (not through its notes
//! sink) and taken exactly once, by the task when it begins. A claim still
//! there when the call returns means the task never began: the claimer
//! ends its record.

use std::sync::Mutex;

use warden_calls::executor::Admitted;

/// See the module docs.
pub struct Claim {
    id: String,
    slot: Mutex<Option<Admitted>>,
}

impl Claim {
    /// The claim of queued task `id`, holding `slot`.
    pub fn new(id: String, slot: Admitted) -> Self {
        Self {
            id,
            slot: Mutex::new(Some(slot)),
        }
    }

    /// The claimed task's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The id and the reserved slot, once: `None` after the first take.
    pub fn take(&self) -> Option<(String, Admitted)> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.take().map(|slot| (self.id.clone(), slot))
    }
}
