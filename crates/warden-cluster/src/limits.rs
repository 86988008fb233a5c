//! The limits the cluster backends enforce: the S3 object store's
//! timeouts, retries and upload width. None is an operator setting. The
//! rule of every crate's `limits` module is in [`warden_core::limits`].

use std::time::Duration;

// ---- object store ----
// The S3 copy of task files (`WARDEN_ARTIFACT_STORE`, see
// `warden_cluster::s3`). A request that runs out of these fails the
// lookup or the upload with "object store s3://… unreachable"; nothing is
// answered from a partial read.

/// Connecting to the object store: 5 s per attempt. Does not bound the
/// request once connected (see [`OBJECT_STORE_REQUEST_TIMEOUT`]).
pub const OBJECT_STORE_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One object-store request, body included: 30 s; also the longest time
/// spent retrying it ([`OBJECT_STORE_RETRIES`]). Does not bound a whole
/// upload or listing, which are many requests.
pub const OBJECT_STORE_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Retries of a failed object-store request (a refused or dropped
/// connection, a 5xx answer): 2, after 100 ms then 200 ms. Kept small so
/// that a store that is down answers a client in well under a second
/// instead of the object_store crate's default of ten retries over minutes.
pub const OBJECT_STORE_RETRIES: usize = 2;

/// Files one task upload sends at once: 8. Bounds the memory an upload
/// holds (at most this many files in memory) and its connections; does not
/// bound how many tasks upload at once (one per finishing task).
pub const OBJECT_STORE_UPLOADS: usize = 8;
