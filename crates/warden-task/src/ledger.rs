//! A task's ledger on the shared task store (see
//! `warden_calls::events::ledger`): the start of each destructive call is
//! recorded there before it runs, so that whichever node ends the task when
//! its own node dies names the side effect (`records`). Attached only when
//! the store is shared (`WARDEN_DATABASE_URL`): on one machine, the node
//! that ends a dead server's task reads its directory.

use std::sync::Arc;

use warden_calls::events::ledger::Ledger;
use warden_calls::events::recovered::SideEffect;
use warden_core::future::BoxFuture;

use crate::records::Records;

/// Task `task_id`'s side effects, put on the store `records` opens.
pub(crate) struct StoreLedger {
    records: Arc<Records>,
    task_id: String,
    /// Where a settlement's write runs: [`Ledger::settled`] is called
    /// wherever a call settles, the script door's own thread included.
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for StoreLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreLedger")
            .field("task_id", &self.task_id)
            .finish()
    }
}

impl StoreLedger {
    /// The ledger of task `task_id` when the store is shared; `None` on
    /// the embedded store (see the module docs). Call on the runtime.
    pub(crate) fn for_task(records: &Arc<Records>, task_id: &str) -> Option<Arc<dyn Ledger>> {
        crate::records::database_url()?;
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        Some(Arc::new(Self {
            records: records.clone(),
            task_id: task_id.to_string(),
            runtime,
        }))
    }
}

impl Ledger for StoreLedger {
    fn started(&self, call_id: &str, side_effect: &SideEffect) -> BoxFuture<'static, Result<(), String>> {
        let (records, id, call_id, side_effect) = (
            self.records.clone(),
            self.task_id.clone(),
            call_id.to_string(),
            side_effect.clone(),
        );
        Box::pin(async move {
            let store = records.open().await.map_err(|e| e.to_string())?;
            store
                .put_side_effect(&id, &call_id, &side_effect)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn settled(&self, call_id: &str, side_effect: &SideEffect) {
        let recorded = self.started(call_id, side_effect);
        self.runtime.spawn(async move {
            if let Err(reason) = recorded.await {
                tracing::warn!("a side effect's end was not recorded in the task store (it stays unknown there): {reason}");
            }
        });
    }
}
