//! The deployment backends this build carries, attached at startup: the
//! only place the facade's `postgres` and `s3` features switch code.
//!
//! The layers below hold a seam each and no backend: the runner opens
//! `WARDEN_DATABASE_URL` through a [`StoreOpener`], the artifact store
//! copies finished tasks to a [`RemoteCopy`]. The implementations live in
//! `warden-cluster`; a build without a feature hands no opener (a
//! `postgres://` URL is then refused naming the feature, see
//! `task::records::open_database`) or refuses `WARDEN_ARTIFACT_STORE` here
//! with the fix. The server (`app`), `/readyz` and `preflight` all go
//! through these functions, so they agree.

use std::sync::Arc;

use warden_calls::artifacts::RemoteCopy;
use warden_core::error::GuardError;
use warden_task::store::StoreOpener;

/// The opener of the shared task store: PostgreSQL with the `postgres`
/// feature, else none.
pub(crate) fn store_opener() -> Option<Arc<dyn StoreOpener>> {
    #[cfg(feature = "postgres")]
    {
        Some(Arc::new(warden_cluster::postgres::Opener))
    }
    #[cfg(not(feature = "postgres"))]
    {
        None
    }
}

/// The remote copy of task files `WARDEN_ARTIFACT_STORE` names, `None`
/// when it is unset or empty. An error (a malformed value; a set value in
/// a build without `s3`) names the variable and the fix, for the server to
/// refuse to start with.
pub(crate) fn artifact_remote() -> Result<Option<Arc<dyn RemoteCopy>>, GuardError> {
    #[cfg(feature = "s3")]
    {
        Ok(warden_cluster::s3::Remote::from_env()?.map(|remote| Arc::new(remote) as Arc<dyn RemoteCopy>))
    }
    #[cfg(not(feature = "s3"))]
    match warden_core::config::var_os("WARDEN_ARTIFACT_STORE").filter(|v| !v.is_empty()) {
        Some(_) => Err(GuardError::failed(
            "WARDEN_ARTIFACT_STORE is set but this build has no object-store support; \
             build Warden with the `s3` feature, or unset it to keep task files in WARDEN_ARTIFACTS_DIR only",
        )),
        None => Ok(None),
    }
}
