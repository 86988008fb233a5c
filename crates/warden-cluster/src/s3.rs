//! The object-store copy of task files: `WARDEN_ARTIFACT_STORE=s3://bucket/prefix`,
//! the S3 implementation of the artifact store's [`RemoteCopy`] (the facade
//! attaches it with `ArtifactStore::with_remote` when built with `s3`).
//!
//! A task runs on one node, in its local directory ([`ArtifactStore`]).
//! When it ends, [`RemoteCopy::upload_task`] copies every regular file of that
//! directory to `<prefix>/<task_id>/<relative path>` — the same walk as the
//! local listing (no links, the same depth), so any node can answer for the
//! task. The order decides what a reader can see: every other file first
//! (at most [`OBJECT_STORE_UPLOADS`] at once), then `owner.json`, then
//! `result.json`. A remote task exists for a lookup once its `owner.json`
//! is there, and by then every file but the result is too: a reader never
//! sees more of a half-uploaded task than of a task still running, and a
//! visible `result.json` means every file is there.
//!
//! Lookups keep the local rules exactly. Ownership comes from the uploaded
//! `owner.json` ([`owner::principal_of`]); a task with no owner record
//! (only legacy tasks, which are never uploaded) belongs to no one here.
//! Reads fetch exactly the bytes of the chunk's [`chunk::span`] with one
//! ranged GET (the object's size comes back in the same answer) and cut
//! them with the shared [`chunk::chunk_of`], so offsets, UTF-8 trimming,
//! the mid-character error and base64 are the local ones; the trimming
//! decision needs no byte past the span, so none is fetched. A missing
//! file answers as the local directory would, the listing telling which
//! name is missing.
//!
//! Errors: anything the store answers other than "not found" is
//! `GuardError::failed("object store s3://… unreachable: …; check
//! AWS_ENDPOINT_URL / credentials")`; a lookup never answers from part of
//! a read. Nothing here panics.
//!
//! Callers are synchronous ([`View`](warden_calls::artifacts::View), the runner, retention): every
//! request runs on one process-wide runtime of this module's own
//! (`warden-s3`, never dropped, holding the HTTP connection pool) and the
//! caller waits for its answer — inside `block_in_place` when it is on a
//! multi-thread runtime, so that runtime's other tasks keep moving.

mod connector;

use std::future::Future;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::sync::{Arc, OnceLock};

use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as Key;
use object_store::{
    Attribute, Attributes, BackoffConfig, ClientConfigKey, ClientOptions, GetOptions, ObjectStore,
    ObjectStoreExt, PutOptions, PutPayload, RetryConfig,
};

use crate::limits::{
    OBJECT_STORE_CONNECT_TIMEOUT, OBJECT_STORE_REQUEST_TIMEOUT, OBJECT_STORE_RETRIES, OBJECT_STORE_UPLOADS,
};
#[cfg(doc)]
use warden_calls::artifacts::ArtifactStore;
use warden_calls::artifacts::{
    ChunkAnswer, Encoding, OUTPUTS_DIR, RESULT_FILE, RemoteCopy, chunk, owner, safe_path,
};
use warden_calls::tenant::Principal;
use warden_core::error::GuardError;

/// The variable naming the object store; unset (or empty), task files stay
/// in the local artifacts directory only.
pub const STORE_VAR: &str = "WARDEN_ARTIFACT_STORE";

/// Task files in an object store: a bucket and a key prefix. Cheap to
/// clone (the client is shared).
#[derive(Clone)]
pub struct Remote {
    store: Arc<dyn ObjectStore>,
    /// Keys of task `t` start with `<prefix>/t/`.
    prefix: Key,
    /// `s3://bucket/prefix`, as error messages name the store.
    url: Arc<str>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("url", &self.url).finish()
    }
}

/// A file of a task fetched for a read: the object's size and the bytes
/// of the range asked for; `None` when the object does not exist.
type Fetched = Option<(u64, Vec<u8>)>;

impl Remote {
    /// The store [`STORE_VAR`] names (environment or `.env`), `None` when
    /// it is unset or empty. Credentials, region and endpoint come from
    /// the process's standard `AWS_*` variables (see [`Remote::from_url`]).
    /// A malformed value is an error naming the variable and the fix, for
    /// the server to refuse to start with.
    pub fn from_env() -> Result<Option<Self>, GuardError> {
        let Some(value) = warden_core::config::var_os(STORE_VAR) else {
            return Ok(None);
        };
        let value = value
            .into_string()
            .map_err(|_| GuardError::failed(format!("{STORE_VAR} is not UTF-8 text; {}", url_hint())))?;
        if value.is_empty() {
            return Ok(None);
        }
        Self::from_url(&value).map(Some)
    }

    /// The store at `url` (`s3://bucket` or `s3://bucket/prefix`), with
    /// every `AWS_*` setting of the process environment the object_store
    /// crate knows: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_SESSION_TOKEN`, `AWS_REGION` / `AWS_DEFAULT_REGION` (else
    /// us-east-1), `AWS_ENDPOINT_URL` (an S3-compatible server),
    /// `AWS_ALLOW_HTTP=true` (an `http://` endpoint), and the rest of its
    /// list. Requests are path-style (`<endpoint>/<bucket>/<key>`), which
    /// every S3-compatible server accepts, unless
    /// `AWS_VIRTUAL_HOSTED_STYLE_REQUEST=true`. Timeouts and retries are
    /// the `OBJECT_STORE_*` limits. Nothing is sent until the first request
    /// ([`RemoteCopy::probe`] checks the store answers).
    pub fn from_url(url: &str) -> Result<Self, GuardError> {
        let settings = std::env::vars_os()
            .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
            .filter(|(name, _)| name.starts_with("AWS_"))
            .collect();
        Self::with_settings(url, settings)
    }

    /// [`Remote::from_url`] with these `AWS_*` settings instead of the
    /// process environment's (names object_store does not know are ignored).
    fn with_settings(url: &str, settings: Vec<(String, String)>) -> Result<Self, GuardError> {
        let (bucket, prefix) = parse_url(url)?;
        let client = ClientOptions::new()
            .with_connect_timeout(OBJECT_STORE_CONNECT_TIMEOUT)
            .with_timeout(OBJECT_STORE_REQUEST_TIMEOUT);
        // After the client options, which setting them would replace.
        let connector = connector::RingConnector {
            connect_timeout: OBJECT_STORE_CONNECT_TIMEOUT,
            request_timeout: OBJECT_STORE_REQUEST_TIMEOUT,
        };
        let builder = settings.iter().fold(
            AmazonS3Builder::new()
                .with_client_options(client)
                .with_http_connector(connector),
            |builder, (name, value)| match name.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
                Ok(key) => builder.with_config(key, value),
                Err(_) => builder,
            },
        );
        // Plain HTTP is refused at the first request without this; say so now.
        let endpoint = builder
            .get_config_value(&AmazonS3ConfigKey::Endpoint)
            .unwrap_or_default();
        let allow_http = builder
            .get_config_value(&AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp))
            .is_some_and(|v| connector::flag(&v) == Some(true));
        if endpoint.starts_with("http://") && !allow_http {
            return Err(GuardError::failed(format!(
                "{STORE_VAR}={url}: AWS_ENDPOINT_URL={endpoint} is plain http; set AWS_ALLOW_HTTP=true to allow it, \
                 or use an https:// endpoint"
            )));
        }
        let retry = RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: OBJECT_STORE_RETRIES,
            retry_timeout: OBJECT_STORE_REQUEST_TIMEOUT,
        };
        let store = builder
            .with_bucket_name(bucket)
            .with_retry(retry)
            .build()
            .map_err(|e| {
                GuardError::failed(format!(
                    "{STORE_VAR}={url}: cannot set up the object store: {e}; check the AWS_* variables \
                 (AWS_ENDPOINT_URL, AWS_REGION, AWS_ALLOW_HTTP, credentials)"
                ))
            })?;
        let url = match prefix.as_ref() {
            "" => format!("s3://{bucket}"),
            prefix => format!("s3://{bucket}/{prefix}"),
        };
        Ok(Self::new(Arc::new(store), prefix, url))
    }

    /// A store from its parts: `url` only names it in messages.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: Key, url: impl Into<String>) -> Self {
        Self {
            store,
            prefix,
            url: Arc::from(url.into()),
        }
    }

    fn task_key(&self, task_id: &str) -> Key {
        self.prefix.clone().join(task_id)
    }

    /// The key of a file; each component is encoded by object_store where
    /// S3 advises against a character (and decoded back by [`RemoteCopy::files`]).
    fn file_key(&self, task_id: &str, parts: &[&str]) -> Key {
        parts
            .iter()
            .fold(self.task_key(task_id), |key, part| key.join(*part))
    }

    /// The error for anything the store answered other than "not found".
    fn unreachable(&self, error: impl std::fmt::Display) -> GuardError {
        GuardError::failed(format!(
            "object store {} unreachable: {error}; check AWS_ENDPOINT_URL / credentials",
            self.url
        ))
    }

    /// The answer for a file that is not in the copy, as the local
    /// directory gives it: the first missing component, a file where a
    /// directory was expected, or a directory where a file was. `outputs/`
    /// always exists (every task directory has it, even empty).
    fn missing(&self, task_id: &str, parts: &[&str]) -> GuardError {
        let listing = match self.files(task_id) {
            Ok(listing) => listing,
            Err(error) => return error,
        };
        let mut path = String::new();
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                path.push('/');
            }
            path.push_str(part);
            let below = format!("{path}/");
            let is_dir =
                (i == 0 && *part == OUTPUTS_DIR) || listing.iter().any(|(n, _)| n.starts_with(&below));
            let is_file = listing.iter().any(|(n, _)| *n == path);
            if i + 1 == parts.len() {
                if is_dir {
                    return safe_path::not_regular("filename", part);
                }
            } else if is_file {
                return safe_path::io_error("filename", part, nix::Error::ENOTDIR);
            } else if is_dir {
                continue;
            }
            return safe_path::io_error("filename", part, nix::Error::ENOENT);
        }
        safe_path::io_error(
            "filename",
            parts.last().copied().unwrap_or(""),
            nix::Error::ENOENT,
        )
    }

    /// Runs `work` on this module's runtime and waits for its answer (see
    /// the module docs).
    fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, GuardError>> + Send + 'static,
    ) -> Result<T, GuardError> {
        let runtime = runtime().map_err(|e| {
            GuardError::failed(format!(
                "object store {}: cannot start its runtime: {e}",
                self.url
            ))
        })?;
        let (done, answer) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let _ = done.send(work.await);
        });
        let wait = move || answer.recv();
        let answer = match tokio::runtime::Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(wait)
            }
            _ => wait(),
        };
        answer.unwrap_or_else(|_| {
            Err(GuardError::failed(format!(
                "object store {}: the request stopped before it answered",
                self.url
            )))
        })
    }
}

impl RemoteCopy for Remote {
    /// `s3://bucket/prefix`.
    fn url(&self) -> &str {
        &self.url
    }

    /// Where a task's copy lives, `s3://bucket/prefix/task_…`, shown as
    /// its directory by lookups that answer from the copy.
    fn task_url(&self, task_id: &str) -> String {
        format!("{}/{task_id}", self.url)
    }

    /// Copies the task directory `dir` (held open by the caller) to the
    /// store: every regular file the local listing shows and a read can
    /// name, `owner.json` second to last and `result.json` last (see the
    /// module docs). Returns the number of files sent. On an error some
    /// files may be there, but not the ones that make the task visible
    /// unless they were all sent; uploading again repeats every put.
    fn upload_task(&self, task_id: &str, dir: OwnedFd) -> Result<usize, GuardError> {
        let listing = dir
            .try_clone()
            .map_err(|e| GuardError::failed(format!("cannot list task '{task_id}' for its upload: {e}")))?;
        let mut found = Vec::new();
        warden_calls::artifacts::walk(listing, "", 0, &mut found);
        // A name a read refuses (the server's temporary files) is not sent.
        let mut names: Vec<String> = found
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| safe_path::components("filename", name).is_ok())
            .collect();
        names.sort();
        let mut last = Vec::new();
        for name in [owner::OWNER_FILE, RESULT_FILE] {
            if let Some(at) = names.iter().position(|n| n == name) {
                last.push(names.remove(at));
            }
        }
        let sent = names.len() + last.len();
        let (this, dir, task_id) = (self.clone(), Arc::new(dir), task_id.to_string());
        self.run(async move {
            let put = |name: String| {
                let key = this.file_key(&task_id, &name.split('/').collect::<Vec<_>>());
                let (this, dir) = (this.clone(), dir.clone());
                async move {
                    let bytes = read_local(&dir, &name)?;
                    let options = PutOptions {
                        attributes: Attributes::from_iter([(
                            Attribute::ContentType,
                            warden_calls::artifacts::mime_type(&name),
                        )]),
                        ..PutOptions::default()
                    };
                    this.store
                        .put_opts(&key, PutPayload::from(bytes), options)
                        .await
                        .map_err(|e| this.unreachable(e))?;
                    Ok::<(), GuardError>(())
                }
            };
            futures_util::stream::iter(names)
                .map(&put)
                .buffer_unordered(OBJECT_STORE_UPLOADS.max(1))
                .try_collect::<Vec<()>>()
                .await?;
            for name in last {
                put(name).await?;
            }
            Ok(())
        })?;
        Ok(sent)
    }

    /// The principal owning the copy of `task_id`, from its `owner.json`:
    /// `None` when there is no copy, or its record names no one (not JSON,
    /// larger than an owner record, a bad name). A record without a
    /// principal is `local`'s, as in the local directory.
    fn owner(&self, task_id: &str) -> Result<Option<Principal>, GuardError> {
        let (this, key) = (self.clone(), self.file_key(task_id, &[owner::OWNER_FILE]));
        let record = self.run(async move {
            let got = match this.store.get(&key).await {
                Ok(got) => got,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(this.unreachable(e)),
            };
            if got.meta.size > owner::OWNER_READ_BYTES {
                // Too large for an owner record: no one's (empty is not JSON).
                return Ok(Some(Vec::new()));
            }
            let bytes = got.bytes().await.map_err(|e| this.unreachable(e))?;
            Ok(Some(Vec::from(bytes)))
        })?;
        let Some(record) = record else {
            return Ok(None);
        };
        Ok(owner::OwnerRecord::parse(&record).and_then(|record| owner::principal_of(Some(&record))))
    }

    /// One chunk of a file of the copy of `task_id`: the answer, and the
    /// errors, the local `read_at` gives for the same file.
    fn read(
        &self,
        task_id: &str,
        filename: &str,
        offset: u64,
        max_bytes: usize,
        encoding: Encoding,
    ) -> Result<ChunkAnswer, GuardError> {
        let parts = safe_path::components("filename", filename)?;
        let (this, key) = (self.clone(), self.file_key(task_id, &parts));
        let fetched = self.run(async move {
            fetch_span(this.store.as_ref(), &key, offset, max_bytes)
                .await
                .map_err(|e| this.unreachable(e))
        })?;
        let Some((size, bytes)) = fetched else {
            return Err(self.missing(task_id, &parts));
        };
        let span = chunk::span(size, offset, max_bytes)?;
        if bytes.len() as u64 != span.end - span.start {
            return Err(GuardError::failed(format!(
                "object store {}: '{filename}' of task '{task_id}' changed while it was read; read it again",
                self.url
            )));
        }
        let chunk = chunk::chunk_of(bytes, size, offset, encoding)?;
        Ok(warden_calls::artifacts::chunk_answer(
            task_id, filename, offset, encoding, chunk,
        ))
    }

    /// The files of the copy of `task_id` (relative names, sorted, with
    /// sizes); empty when there is no copy.
    fn files(&self, task_id: &str) -> Result<Vec<(String, u64)>, GuardError> {
        let (this, task) = (self.clone(), self.task_key(task_id));
        let objects = self.run(async move {
            this.store
                .list(Some(&task))
                .try_collect::<Vec<_>>()
                .await
                .map_err(|e| this.unreachable(e))
        })?;
        let task = self.task_key(task_id);
        let mut found: Vec<(String, u64)> = objects
            .iter()
            .filter_map(|object| {
                let parts = object.location.prefix_match(&task)?;
                let decoded: Option<Vec<String>> = parts
                    .map(|part| {
                        percent_encoding::percent_decode_str(part.as_ref())
                            .decode_utf8()
                            .ok()
                            .map(|p| p.into_owned())
                    })
                    .collect();
                Some((decoded?.join("/"), object.size))
            })
            .collect();
        found.sort();
        Ok(found)
    }

    /// Deletes the copy of `task_id`: `owner.json` first, so lookups stop
    /// seeing the task at once, then every other object under its prefix.
    /// Returns the number of objects deleted; no copy is not an error.
    fn remove_task(&self, task_id: &str) -> Result<usize, GuardError> {
        let (this, task) = (self.clone(), self.task_key(task_id));
        let owner = self.file_key(task_id, &[owner::OWNER_FILE]);
        self.run(async move {
            let fail = |e| this.unreachable(e);
            match this.store.delete(&owner).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(fail(e)),
            }
            let keys: Vec<Key> = this
                .store
                .list(Some(&task))
                .map_ok(|object| object.location)
                .try_collect()
                .await
                .map_err(fail)?;
            let mut deleted = this
                .store
                .delete_stream(futures_util::stream::iter(keys.into_iter().map(Ok)).boxed());
            let mut count = 0;
            while let Some(result) = deleted.next().await {
                match result {
                    Ok(_) => count += 1,
                    Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(fail(e)),
                }
            }
            Ok(count)
        })
    }

    /// Whether the store takes a write now (`/readyz`): puts, reads back
    /// and deletes a small object beside the task prefixes.
    fn probe(&self) -> Result<(), GuardError> {
        let this = self.clone();
        let key = self
            .prefix
            .clone()
            .join(format!(".warden-probe-{}", uuid::Uuid::new_v4().simple()));
        self.run(async move {
            let fail = |e| this.unreachable(e);
            this.store
                .put(&key, PutPayload::from_static(b"ok"))
                .await
                .map_err(fail)?;
            let read = this
                .store
                .get(&key)
                .await
                .map_err(fail)?
                .bytes()
                .await
                .map_err(fail);
            let deleted = this.store.delete(&key).await.map_err(fail);
            if read?.as_ref() != b"ok" {
                return Err(this.unreachable("a probe object read back different bytes"));
            }
            deleted
        })
    }
}

/// The runtime every request runs on: one worker thread (requests wait on
/// the network, not the CPU), built once, never dropped. A failure to
/// build it is kept too, and every request reports it.
fn runtime() -> Result<&'static tokio::runtime::Runtime, &'static std::io::Error> {
    static RUNTIME: OnceLock<std::io::Result<tokio::runtime::Runtime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("warden-s3")
                .enable_all()
                .build()
        })
        .as_ref()
}

/// The bytes of `[offset, offset + max_bytes)` clipped to the object, and
/// its size, in one ranged GET. A range the store cannot serve (at or past
/// the end, an empty object) is settled by the object's size alone.
async fn fetch_span(
    store: &dyn ObjectStore,
    key: &Key,
    offset: u64,
    max_bytes: usize,
) -> Result<Fetched, object_store::Error> {
    if max_bytes > 0 {
        let range = offset..offset.saturating_add(max_bytes as u64);
        match store
            .get_opts(key, GetOptions::new().with_range(Some(range)))
            .await
        {
            Ok(got) => {
                let size = got.meta.size;
                return Ok(Some((size, Vec::from(got.bytes().await?))));
            }
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(error) => {
                return match store.head(key).await {
                    Ok(meta) if offset >= meta.size => Ok(Some((meta.size, Vec::new()))),
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    _ => Err(error),
                };
            }
        }
    }
    match store.head(key).await {
        Ok(meta) => Ok(Some((meta.size, Vec::new()))),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(error) => Err(error),
    }
}

/// The whole local file `name` of the task directory `dir`, for the upload.
fn read_local(dir: &OwnedFd, name: &str) -> Result<Vec<u8>, GuardError> {
    let parts = safe_path::components("filename", name)?;
    let mut bytes = Vec::new();
    safe_path::open_read_at(dir, "filename", &parts)?
        .read_to_end(&mut bytes)
        .map_err(|e| GuardError::failed(format!("cannot read '{name}' for the upload: {e}")))?;
    Ok(bytes)
}

fn url_hint() -> String {
    format!(
        "set {STORE_VAR} to s3://bucket or s3://bucket/prefix (e.g. s3://warden-artifacts/tasks), \
         or unset it to keep task files in WARDEN_ARTIFACTS_DIR only"
    )
}

/// The bucket and the key prefix of an `s3://bucket[/prefix]` URL.
fn parse_url(url: &str) -> Result<(&str, Key), GuardError> {
    let bad = |why: String| GuardError::failed(format!("{STORE_VAR}='{url}' {why}; {}", url_hint()));
    let Some(rest) = url.strip_prefix("s3://") else {
        return Err(bad("is not an s3:// URL".into()));
    };
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let valid_bucket = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        && bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
        && bucket.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !valid_bucket {
        return Err(bad(format!(
            "names the bucket '{bucket}': a bucket name is 3 to 63 lowercase letters, digits, '.' and '-'"
        )));
    }
    let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
    if prefix.starts_with('/') || prefix.contains(['?', '#']) || prefix.chars().any(char::is_control) {
        return Err(bad(format!(
            "has the prefix '{prefix}': use letters, digits, '-', '_', '.' and '/'"
        )));
    }
    let key = Key::parse(prefix).map_err(|e| bad(format!("has a bad prefix: {e}")))?;
    Ok((bucket, key))
}

#[cfg(test)]
mod tests;
