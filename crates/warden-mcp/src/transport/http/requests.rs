//! Requests in progress per principal: what keeps one tenant from holding
//! every connection with open SSE streams or slow calls.
//!
//! A request in progress holds its connection (HTTP/1.1 has one exchange
//! at a time), and an SSE stream is a request that never ends by itself,
//! so counting a principal's requests from the moment they pass
//! authentication until their response body is delivered (or dropped)
//! bounds both its open streams and the connections it keeps busy. The
//! request past `per_principal` is answered 429 at once and holds nothing.
//! `local`, the operator, is not counted (the connection cap bounds it).
//!
//! Passing through here is also what *proves* a connection
//! ([`super::listener::Busy::prove`]): it carried a request that got
//! through authentication, so it leaves the unproven pool and gets the full
//! idle period between requests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{ConnectInfo, Request};
use axum::http::StatusCode;

use super::listener::Busy;
use warden_calls::tenant::Principal;

/// How long a refused client is told to wait: streams and calls end at
/// their own pace, so a short hint.
const RETRY_AFTER_SECONDS: &str = "1";

/// Each bound principal's requests in progress.
pub(super) struct PrincipalRequests {
    per_principal: usize,
    /// Only principals with a request in progress have an entry.
    counts: Mutex<HashMap<Principal, usize>>,
}

/// One counted request; dropping it ends the request.
pub(super) struct Counted {
    owner: Arc<PrincipalRequests>,
    principal: Principal,
}

impl PrincipalRequests {
    pub(super) fn new(per_principal: usize) -> Self {
        Self {
            per_principal: per_principal.max(1),
            counts: Mutex::default(),
        }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<Principal, usize>> {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts one more request of `principal`, or `None` at its limit.
    fn enter(self: &Arc<Self>, principal: &Principal) -> Option<Counted> {
        let mut counts = self.counts();
        let count = counts.entry(principal.clone()).or_insert(0);
        if *count >= self.per_principal {
            return None;
        }
        *count += 1;
        Some(Counted {
            owner: self.clone(),
            principal: principal.clone(),
        })
    }

    #[cfg(test)]
    fn held(&self, principal: &Principal) -> usize {
        self.counts().get(principal).copied().unwrap_or(0)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut counts = self.owner.counts();
        if let Some(count) = counts.get_mut(&self.principal) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.principal);
            }
        }
    }
}

impl PrincipalRequests {
    /// The endpoint's step inside authentication: proves the connection,
    /// then counts the request against its principal (`None`: a principal
    /// not counted) until the caller drops the count with its delivered
    /// response, or answers 429.
    pub(super) fn admit(
        self: &Arc<Self>,
        request: &Request,
    ) -> Result<Option<Counted>, super::refusal::Refused> {
        if let Some(ConnectInfo(busy)) = request.extensions().get::<ConnectInfo<Busy>>() {
            busy.prove();
        }
        let principal = request
            .extensions()
            .get::<Principal>()
            .cloned()
            .unwrap_or_default();
        if !warden_calls::tenant::limits::bound(&principal) {
            return Ok(None);
        }
        match self.enter(&principal) {
            Some(counted) => Ok(Some(counted)),
            None => Err(Box::new(super::refusal::refuse(
                StatusCode::TOO_MANY_REQUESTS,
                warden_core::error::codes::TOO_MANY_REQUESTS,
                &format!(
                    "this principal has {} requests in progress, open SSE streams included \
                     (WARDEN_HTTP_REQUESTS_PER_PRINCIPAL); close a stream or wait for a call to end, then retry",
                    self.per_principal
                ),
                Some(RETRY_AFTER_SECONDS),
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_holds_at_most_its_share_and_gets_it_back() {
        let requests = Arc::new(PrincipalRequests::new(2));
        let alice = Principal::new("alice").expect("name");
        let bob = Principal::new("bob").expect("name");
        let first = requests.enter(&alice).expect("first");
        let _second = requests.enter(&alice).expect("second");
        assert!(requests.enter(&alice).is_none(), "past the share");
        assert!(requests.enter(&bob).is_some(), "others are not affected");
        drop(first);
        assert_eq!(requests.held(&alice), 1);
        assert!(
            requests.enter(&alice).is_some(),
            "a delivered response frees its count"
        );
    }
}
