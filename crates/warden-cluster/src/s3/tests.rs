//! The object-store copy against a real S3-compatible server (moto, started
//! by `scripts/with-s3`): a task uploaded by one store is read, listed and
//! removed through another store that has no local copy, and every answer
//! is compared with the local one.

use std::path::PathBuf;
use std::sync::{Mutex, RwLock};

use futures_util::stream::BoxStream;
use object_store::{
    CopyOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, PutMultipartOptions, PutResult,
};

use serde_json::Value;

use super::*;
use warden_calls::artifacts::{ArtifactStore, View, no_task};
use warden_core::error::codes;

/// Held for reading by every test that talks to the server, for writing by
/// the one that stops it.
static SERVER: RwLock<()> = RwLock::new(());

fn server() -> std::sync::RwLockReadGuard<'static, ()> {
    SERVER.read().unwrap_or_else(|p| p.into_inner())
}

/// The store scripts/with-s3 started; fails (never skips) without it.
fn remote() -> Remote {
    let url = std::env::var("WARDEN_TEST_S3_URL").unwrap_or_else(|_| {
        panic!(
            "WARDEN_TEST_S3_URL is unset: these tests need an S3-compatible server; run them through \
             scripts/with-s3 (e.g. `scripts/with-s3 cargo test -p warden-cluster --features s3 s3`) or scripts/test"
        )
    });
    Remote::from_url(&url).expect("the store of WARDEN_TEST_S3_URL")
}

fn principal(name: &str) -> Principal {
    Principal::new(name).expect("principal name")
}

/// Text with 1-, 2-, 3- and 4-byte characters, 550 bytes.
fn utf8_text() -> String {
    "aé€😀\n".repeat(50)
}

fn binary() -> Vec<u8> {
    (0..=255u8).cycle().take(700).collect()
}

/// A finished task of `owner` in a fresh local store (nested outputs, a
/// multi-byte UTF-8 file, a binary file, an empty file, a result).
fn finished_task(owner: &Principal) -> (tempfile::TempDir, ArtifactStore, String) {
    let root = tempfile::tempdir().expect("temp dir");
    let store = ArtifactStore::new(root.path(), 10);
    let (task, _) = store.create_task(owner).expect("task");
    let cap = 1024 * 1024;
    store
        .write_output(&task, "a.csv", b"x,y\n1,2\n", cap)
        .expect("csv");
    store
        .write_output(&task, "nested/deep/text.txt", utf8_text().as_bytes(), cap)
        .expect("text");
    store
        .write_output(&task, "bin.dat", &binary(), cap)
        .expect("binary");
    store.write_output(&task, "empty.txt", b"", cap).expect("empty");
    store
        .write_task_file(&task, "agent_actions/step_1.json", br#"{"step": 1}"#)
        .expect("task file");
    store
        .write_result(
            &task,
            br#"{"status": "completed", "summary": "d\u00e9j\u00e0 vu"}"#,
        )
        .expect("result");
    store.end_task(&task);
    (root, store, task)
}

/// A store on another node: an empty artifacts directory and the remote.
fn other_node(remote: Remote) -> (tempfile::TempDir, ArtifactStore) {
    let root = tempfile::tempdir().expect("temp dir");
    let store = ArtifactStore::new(root.path().join("artifacts"), 10).with_remote(Arc::new(remote));
    (root, store)
}

fn show<T: serde::Serialize>(answer: Result<T, GuardError>) -> String {
    match answer {
        Ok(value) => format!("ok {}", serde_json::to_string(&value).unwrap_or_default()),
        Err(error) => format!("err {}", serde_json::to_string(&error).unwrap_or_default()),
    }
}

/// Every lookup's answer for a task id, as text.
fn answers(view: View<'_>, task_id: &str) -> Vec<String> {
    let text = |r: Result<String, GuardError>| show(r.map(Value::String));
    vec![
        text(view.task_dir(task_id).map(|p| p.display().to_string())),
        show(view.read(task_id, "outputs/a.csv", 0, 100, Encoding::Utf8)),
        show(view.read(task_id, "result.json", 0, 100, Encoding::Base64)),
        text(view.files(task_id).map(|f| format!("{f:?}"))),
    ]
}

#[test]
fn remote_chunks_equal_local_chunks_byte_for_byte() {
    // Every file, utf-8 and base64, many offsets and sizes (mid-character starts,
    // trimmed ends, the end, past the end): the copy answers exactly as the local directory.
    let _server = server();
    let alice = principal("alice");
    let (_a, local, task) = finished_task(&alice);
    let started = std::time::Instant::now();
    local
        .clone()
        .with_remote(Arc::new(remote()))
        .upload_task(&task)
        .expect("upload");
    let upload = started.elapsed();
    let mut took = Vec::new();
    let (_b, node) = other_node(remote());
    assert!(
        !node.root().join(&task).exists(),
        "the other node has no local copy"
    );
    let (here, there) = (local.view(&alice), node.view(&alice));
    let files = here.files(&task).expect("local listing");
    assert!(files.len() >= 8, "{files:?}");
    let mut compared = 0;
    for (name, size) in &files {
        for encoding in [Encoding::Utf8, Encoding::Base64] {
            for max in [0, 1, 3, 4, 5, 64, 65536] {
                let mut offsets: Vec<u64> = (0..(*size).min(8)).collect();
                offsets.extend([*size, size + 1, size.saturating_sub(1), size / 2]);
                // And (the start of) the chain a client follows through next_offset.
                let mut next = Some(0).filter(|_| max == 5 || max == 64);
                while let Some(offset) = next.take().filter(|_| offsets.len() < 40) {
                    offsets.push(offset);
                    next = here
                        .read(&task, name, offset, max, encoding)
                        .ok()
                        .and_then(|c| c.next_offset);
                }
                for offset in offsets {
                    let want = show(here.read(&task, name, offset, max, encoding));
                    let started = std::time::Instant::now();
                    let got = show(there.read(&task, name, offset, max, encoding));
                    took.push(started.elapsed());
                    assert_eq!(got, want, "{name} at {offset}, {max} bytes, {encoding:?}");
                    compared += 1;
                }
            }
        }
    }
    // The mid-character start is among them; pin it explicitly too.
    let name = "outputs/nested/deep/text.txt";
    let mid = there
        .read(&task, name, 2, 16, Encoding::Utf8)
        .expect_err("mid-character");
    assert_eq!(
        mid,
        here.read(&task, name, 2, 16, Encoding::Utf8).expect_err("local")
    );
    assert_eq!(mid.field.as_deref(), Some("offset"));
    let whole = there
        .read(&task, name, 0, 65536, Encoding::Utf8)
        .expect("whole file");
    assert_eq!(whole.content, utf8_text());
    took.sort();
    let at = |q: usize| took[(took.len() - 1) * q / 100];
    eprintln!(
        "{compared} chunk answers compared; upload of {} files {upload:?}; remote read p50 {:?}, p99 {:?}",
        files.len(),
        at(50),
        at(99)
    );
}

#[test]
fn a_missing_file_answers_as_the_local_directory_does() {
    // A missing file, a missing directory, a file used as a directory, a
    // directory read as a file: the same errors as the local directory.
    let _server = server();
    let alice = principal("alice");
    let (_a, local, task) = finished_task(&alice);
    local
        .clone()
        .with_remote(Arc::new(remote()))
        .upload_task(&task)
        .expect("upload");
    let (_b, node) = other_node(remote());
    for name in [
        "outputs/none.csv",
        "outputs/nested/none/x.txt",
        "outputs/a.csv/x",
        "outputs/nested",
        "outputs",
        "nothing/x",
        "../owner.json",
        "outputs/.warden-tmp-1",
    ] {
        let want = show(local.view(&alice).read(&task, name, 0, 10, Encoding::Utf8));
        let got = show(node.view(&alice).read(&task, name, 0, 10, Encoding::Utf8));
        assert!(want.starts_with("err"), "{name}: {want}");
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn the_remote_listing_equals_the_local_listing_and_task_dir_names_the_copy() {
    // list_artifacts on another node shows the same names and sizes.
    let _server = server();
    let alice = principal("alice");
    let (_a, local, task) = finished_task(&alice);
    local
        .clone()
        .with_remote(Arc::new(remote()))
        .upload_task(&task)
        .expect("upload");
    let (_b, node) = other_node(remote());
    assert_eq!(
        node.view(&alice).files(&task).expect("remote listing"),
        local.view(&alice).files(&task).expect("local listing")
    );
    let shown = node.view(&alice).task_dir(&task).expect("task dir");
    assert_eq!(shown, PathBuf::from(format!("{}/{task}", remote().url())));
}

#[test]
fn another_principals_remote_task_answers_exactly_as_an_unknown_one() {
    // Bob, on a node without the task, gets for every lookup what an id that never existed gets.
    let _server = server();
    let (alice, bob) = (principal("alice"), principal("bob"));
    let (_a, local, task) = finished_task(&alice);
    local
        .clone()
        .with_remote(Arc::new(remote()))
        .upload_task(&task)
        .expect("upload");
    let (_b, node) = other_node(remote());
    assert!(
        answers(node.view(&alice), &task)
            .iter()
            .all(|a| a.starts_with("ok"))
    );
    let unknown = warden_calls::artifacts::new_task_id();
    let foreign = answers(node.view(&bob), &task);
    let missing: Vec<String> = answers(node.view(&bob), &unknown)
        .iter()
        .map(|a| a.replace(&unknown, &task))
        .collect();
    assert_eq!(foreign, missing);
    assert!(foreign[0].contains(codes::NOT_FOUND), "{}", foreign[0]);
    assert!(node.view(&Principal::local()).files(&task).is_err());
}

#[test]
fn remove_task_deletes_every_object_of_the_copy() {
    // TTL expiry on a node that never had the task still deletes its copy.
    let _server = server();
    let alice = principal("alice");
    let (_a, local, task) = finished_task(&alice);
    let remote = remote();
    local
        .clone()
        .with_remote(Arc::new(remote.clone()))
        .upload_task(&task)
        .expect("upload");
    assert!(remote.files(&task).expect("listing").len() >= 8);
    let (_b, node) = other_node(remote.clone());
    node.remove_task(&task);
    assert_eq!(remote.files(&task).expect("listing"), Vec::new());
    assert_eq!(node.view(&alice).files(&task).expect_err("gone"), no_task(&task));
    assert_eq!(remote.remove_task(&task).expect("removing nothing"), 0);
    // The local directory of the node that ran it is untouched by the other node.
    assert!(local.view(&alice).files(&task).is_ok());
}

#[test]
fn upload_sends_owner_then_result_last() {
    // A reader sees the task (owner.json) only after every other file, and result.json after that.
    let _server = server();
    let alice = principal("alice");
    let (_a, local, task) = finished_task(&alice);
    let real = remote();
    let recorder = Arc::new(Recording {
        inner: real.store.clone(),
        puts: Mutex::default(),
    });
    let recording = Remote::new(recorder.clone(), real.prefix.clone(), real.url());
    local
        .clone()
        .with_remote(Arc::new(recording))
        .upload_task(&task)
        .expect("upload");
    let puts = recorder.puts.lock().expect("puts").clone();
    let names: Vec<&str> = puts.iter().map(|p| p.rsplit('/').next().unwrap_or("")).collect();
    let n = names.len();
    assert!(n >= 8, "{names:?}");
    assert_eq!(&names[n - 2..], ["owner.json", "result.json"]);
    assert_eq!(real.files(&task).expect("listing").len(), n);
}

#[test]
fn a_store_that_is_down_gives_a_clear_error_and_works_again_after_a_restart() {
    // Stopped: every lookup, the upload and the probe fail naming the store,
    // quickly, without a panic; restarted: the same calls work again.
    let _exclusive = SERVER.write().unwrap_or_else(|p| p.into_inner());
    let stop =
        std::env::var("WARDEN_TEST_S3_STOP").expect("WARDEN_TEST_S3_STOP: run through scripts/with-s3");
    let restart =
        std::env::var("WARDEN_TEST_S3_RESTART").expect("WARDEN_TEST_S3_RESTART: run through scripts/with-s3");
    let alice = principal("alice");
    let (_a, local, task) = finished_task(&alice);
    let local = local.with_remote(Arc::new(remote()));
    local.upload_task(&task).expect("upload");
    let (_b, node) = other_node(remote());
    node.remote().expect("remote").probe().expect("probe while up");
    let run = |script: &str| {
        let status = std::process::Command::new(script)
            .status()
            .expect("run the script");
        assert!(status.success(), "{script}: {status}");
    };
    run(&stop);
    let started = std::time::Instant::now();
    let read = node
        .view(&alice)
        .read(&task, "outputs/a.csv", 0, 10, Encoding::Utf8);
    let took = started.elapsed();
    let errors = [
        read.expect_err("read while down"),
        node.view(&alice).files(&task).expect_err("listing while down"),
        node.view(&alice)
            .task_dir(&task)
            .expect_err("task_dir while down"),
        local.upload_task(&task).expect_err("upload while down"),
        node.remote()
            .expect("remote")
            .probe()
            .expect_err("probe while down"),
    ];
    for error in &errors {
        assert_eq!(error.code, codes::GUARD_FAILED, "{error:?}");
        assert!(
            error
                .message
                .starts_with(&format!("object store {} unreachable: ", remote().url())),
            "{}",
            error.message
        );
        assert!(
            error.message.ends_with("check AWS_ENDPOINT_URL / credentials"),
            "{}",
            error.message
        );
    }
    eprintln!(
        "a read against the stopped store failed in {took:?}: {}",
        errors[0].message
    );
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    run(&restart);
    // moto keeps nothing across a restart: upload again, then read as before.
    local.upload_task(&task).expect("upload after the restart");
    node.remote()
        .expect("remote")
        .probe()
        .expect("probe after the restart");
    assert_eq!(
        show(
            node.view(&alice)
                .read(&task, "outputs/a.csv", 0, 10, Encoding::Utf8)
        ),
        show(
            local
                .view(&alice)
                .read(&task, "outputs/a.csv", 0, 10, Encoding::Utf8)
        )
    );
}

#[test]
fn lookups_work_from_inside_both_kinds_of_tokio_runtime() {
    // Callers are sync code on the server's runtime: neither flavour panics or deadlocks.
    let _server = server();
    let alice = principal("alice");
    let (_a, local, task) = finished_task(&alice);
    local
        .clone()
        .with_remote(Arc::new(remote()))
        .upload_task(&task)
        .expect("upload");
    let (_b, node) = other_node(remote());
    let want = show(
        node.view(&alice)
            .read(&task, "result.json", 0, 4096, Encoding::Utf8),
    );
    assert!(want.starts_with("ok"), "{want}");
    for multi in [true, false] {
        let runtime = if multi {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
        } else {
            tokio::runtime::Builder::new_current_thread().enable_all().build()
        }
        .expect("runtime");
        let got = runtime.block_on(async {
            let node = node.clone();
            let (alice, task) = (alice.clone(), task.clone());
            tokio::spawn(async move {
                show(
                    node.view(&alice)
                        .read(&task, "result.json", 0, 4096, Encoding::Utf8),
                )
            })
            .await
            .expect("task")
        });
        assert_eq!(got, want, "multi-thread: {multi}");
    }
}

#[test]
fn upload_without_a_store_is_a_no_op_and_probe_answers() {
    // No WARDEN_ARTIFACT_STORE: upload_task does nothing; with one, the probe passes.
    let root = tempfile::tempdir().expect("temp dir");
    let store = ArtifactStore::new(root.path(), 10);
    let (task, _) = store.create_task(&principal("alice")).expect("task");
    assert_eq!(store.upload_task(&task), Ok(()));
    assert_eq!(store.remote_url(), None);
    let _server = server();
    remote().probe().expect("probe");
}

#[test]
fn store_urls_are_checked_and_errors_name_the_variable_and_the_fix() {
    // Malformed WARDEN_ARTIFACT_STORE values are refused with the fix; good ones name the store.
    for bad in [
        "warden-test/ci",
        "http://warden-test/ci",
        "s3://",
        "s3://ab",
        "s3://Upper/ci",
        "s3://-bucket/ci",
        "s3://bucket//ci",
        "s3://bucket/a//b",
        "s3://bucket/a/../b",
        "s3://bucket/a?b",
    ] {
        let error = Remote::from_url(bad).expect_err(bad);
        assert!(
            error
                .message
                .starts_with(&format!("WARDEN_ARTIFACT_STORE='{bad}' ")),
            "{}",
            error.message
        );
        assert!(
            error.message.contains("set WARDEN_ARTIFACT_STORE to s3://bucket"),
            "{}",
            error.message
        );
    }
    for (good, url, prefix) in [
        ("s3://warden-test", "s3://warden-test", ""),
        ("s3://warden-test/", "s3://warden-test", ""),
        (
            "s3://warden.test-1/ci/nodes/",
            "s3://warden.test-1/ci/nodes",
            "ci/nodes",
        ),
    ] {
        let remote = Remote::from_url(good).expect(good);
        assert_eq!((remote.url(), remote.prefix.as_ref()), (url, prefix));
    }
    let remote = Remote::from_url("s3://warden-test/p").expect("url");
    let settings = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let plain = [("AWS_ENDPOINT_URL", "http://127.0.0.1:1")];
    let error = Remote::with_settings("s3://warden-test", settings(&plain)).expect_err("plain http");
    assert!(
        error.message.contains("set AWS_ALLOW_HTTP=true"),
        "{}",
        error.message
    );
    let allowed = [
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
        ("AWS_ALLOW_HTTP", "true"),
    ];
    Remote::with_settings("s3://warden-test", settings(&allowed)).expect("plain http allowed");
    let error =
        Remote::with_settings("s3://warden-test", settings(&[("AWS_ALLOW_HTTP", "maybe")])).expect_err("bad");
    assert!(
        error.message.contains("check the AWS_* variables"),
        "{}",
        error.message
    );
    let task = "task_0123456789abcdef0123456789abcdef";
    assert_eq!(remote.task_url(task), format!("s3://warden-test/p/{task}"));
    assert_eq!(
        remote.file_key(task, &["outputs", "a b#[1].csv"]).as_ref(),
        format!("p/{task}/outputs/a b%23%5B1%5D.csv")
    );
}

/// The store underneath, recording the order of puts.
#[derive(Debug)]
struct Recording {
    inner: Arc<dyn ObjectStore>,
    puts: Mutex<Vec<String>>,
}

impl std::fmt::Display for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Recording({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for Recording {
    async fn put_opts(
        &self,
        location: &Key,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let put = self.inner.put_opts(location, payload, opts).await;
        self.puts.lock().expect("puts").push(location.to_string());
        put
    }
    async fn put_multipart_opts(
        &self,
        location: &Key,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(&self, location: &Key, options: GetOptions) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Key>>,
    ) -> BoxStream<'static, object_store::Result<Key>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Key>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Key>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(&self, from: &Key, to: &Key, options: CopyOptions) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
