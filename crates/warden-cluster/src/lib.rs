//! Warden's cluster backends: what several nodes share, behind the small
//! traits of the layers below, so that a build without them compiles no
//! database driver and no object-store client.
//!
//! - [`postgres`] (feature `postgres`): the PostgreSQL task store
//!   ([`postgres::PgStore`]), opened through [`postgres::Opener`], the
//!   `warden_task::store::StoreOpener` the runner holds;
//! - [`s3`] (feature `s3`): the S3 copy of task files ([`s3::Remote`]), the
//!   `warden_calls::artifacts::RemoteCopy` the artifact store holds.
//!
//! Apps use the `warden` facade, whose `postgres` and `s3` features pull
//! this crate in and attach the backends at startup. This crate sits beside
//! the agent, below the facade: it depends on the core, the executor and
//! the task crate, never on the facade or the MCP layer.
//!
//! ```
//! // Every S3 request is bounded: a connect timeout, a request timeout,
//! // and a few retries.
//! assert!(warden_cluster::limits::OBJECT_STORE_CONNECT_TIMEOUT < warden_cluster::limits::OBJECT_STORE_REQUEST_TIMEOUT);
//! assert_eq!(warden_cluster::limits::OBJECT_STORE_RETRIES, 2);
//! ```

#![warn(unreachable_pub)]

pub mod limits;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "s3")]
pub mod s3;
