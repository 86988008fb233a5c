//! The SQLite store against real files in a temporary directory: records,
//! the queue under concurrent claimers, damage, privacy and read-only
//! directories.

use super::*;
use crate::TaskStatus;

fn sample(id: &str, owner: &str, created_ms: i64) -> TaskRecord {
    TaskRecord {
        id: id.into(),
        owner: Principal::new(owner).expect("principal"),
        tool: "run_script".into(),
        state: State::Running,
        summary: None,
        status_message: None,
        error: None,
        created_ms,
        updated_ms: created_ms,
        ttl_ms: 1_000,
        location: format!("/tmp/{id}"),
        detached: true,
        node: warden_calls::node::name(),
        lease_until_ms: created_ms + 60_000,
    }
}

#[tokio::test]
async fn records_round_trip_end_once_and_expire_after_their_ttl() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, created) = SqliteStore::open(&dir.path().join(FILE_NAME))
        .await
        .expect("open");
    assert!(created);
    let a = sample("task_a", "alice", 1_000);
    store.create(&a).await.expect("create");
    store
        .create(&sample("task_b", "bob", 2_000))
        .await
        .expect("create");
    assert!(store.create(&a).await.is_err(), "ids are unique");
    store.note("task_a", "step 1 ok", 1_500).await.expect("note");
    let ending = Ending {
        status: TaskStatus::Success,
        summary: "done".into(),
        error: None,
        at_ms: 1_600,
    };
    assert!(store.end("task_a", &ending).await.expect("end"));
    let cancelled = Ending {
        status: TaskStatus::Cancelled,
        ..ending.clone()
    };
    assert!(
        !store.end("task_a", &cancelled).await.expect("end"),
        "the first ending stands"
    );
    let got = store.get("task_a").await.expect("get").expect("present");
    assert_eq!(got.state, State::Ended(TaskStatus::Success));
    assert_eq!(got.status_message.as_deref(), Some("step 1 ok"));
    assert_eq!(got.summary.as_deref(), Some("done"));
    let alice = Principal::new("alice").expect("principal");
    assert_eq!(store.list(&alice, 10).await.expect("list").len(), 1);
    assert_eq!(
        store.running().await.expect("running").len(),
        1,
        "bob's still runs"
    );
    // a ended at 1_000 + 1_000 ttl; bob's is running, so it stays.
    assert!(store.take_expired(1_999).await.expect("expire").is_empty());
    let gone = store.take_expired(2_000).await.expect("expire");
    assert_eq!(gone, vec![("task_a".to_string(), "/tmp/task_a".to_string())]);
    assert!(store.get("task_a").await.expect("get").is_none());
    assert_eq!(store.count().await.expect("count"), 1);
    // Reopening applies nothing new and keeps the records.
    drop(store);
    let (again, created) = SqliteStore::open(&dir.path().join(FILE_NAME))
        .await
        .expect("reopen");
    assert!(!created);
    assert_eq!(again.count().await.expect("count"), 1);
}

#[tokio::test]
async fn the_queue_hands_each_task_to_one_claimer_within_its_limits_and_leases_run_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) = SqliteStore::open(&dir.path().join(FILE_NAME))
        .await
        .expect("open");
    let queued = |id: &str, owner: &str, at: i64| TaskRecord {
        state: State::Queued,
        node: String::new(),
        lease_until_ms: 0,
        ..sample(id, owner, at)
    };
    let request = serde_json::json!({"tool": "run_script", "arguments": {"script": "1"}});
    let accepted = store
        .enqueue(&queued("task_q1", "alice", 1), &request, Some(2), 10)
        .await;
    assert_eq!(accepted.expect("enqueue"), Enqueued::Accepted);
    store
        .enqueue(&queued("task_q2", "alice", 2), &request, Some(2), 10)
        .await
        .expect("enqueue");
    let third = store
        .enqueue(&queued("task_q3", "alice", 3), &request, Some(2), 10)
        .await;
    assert_eq!(third.expect("enqueue"), Enqueued::OwnerAtLimit);
    let full = store
        .enqueue(&queued("task_q4", "bob", 4), &request, None, 2)
        .await;
    assert_eq!(full.expect("enqueue"), Enqueued::QueueFull);
    // 16 concurrent claimers take the two tasks once each, oldest first.
    let claims = futures_claims(&store, 16).await;
    assert_eq!(claims, vec!["task_q1".to_string(), "task_q2".to_string()]);
    let one = store.get("task_q1").await.expect("get").expect("present");
    assert_eq!(one.state, State::Running);
    // q1's server renews; a task held by any other server lapses and is
    // interrupted, once.
    let holder = one.node.clone();
    let ids = ["task_q1".to_string(), "task_q2".to_string()];
    let held = store.renew(&holder, &ids, 10_000).await.expect("renew");
    assert!(held.contains(&"task_q1".to_string()), "{held:?}");
    let q2 = store.get("task_q2").await.expect("get").expect("present");
    let lapsing: Vec<String> = if q2.node == holder {
        vec![]
    } else {
        vec!["task_q2".into()]
    };
    let ending = Ending {
        status: TaskStatus::Failed,
        summary: "interrupted".into(),
        error: Some(serde_json::json!({"kind": "interrupted"})),
        at_ms: 5_000,
    };
    let expired = store.expire_leases(5_000, &ending).await.expect("expire");
    assert_eq!(expired, lapsing);
    assert!(
        store
            .expire_leases(5_000, &ending)
            .await
            .expect("expire")
            .is_empty()
    );
    assert!(
        !store.cancel_queued("task_q1", &ending).await.expect("cancel"),
        "running, not queued"
    );
    // The embedded store keeps no side effects (whoever ends a task reads its directory), and
    // a held lease is not ended as a lapsed one; a lapsed one is, once.
    assert!(
        store
            .lapsed_with_side_effects(20_000, 10)
            .await
            .expect("lapsed")
            .is_empty()
    );
    assert!(!store.end_lapsed("task_q1", 5_000, &ending).await.expect("end"));
    assert!(store.end_lapsed("task_q1", 20_000, &ending).await.expect("end"));
    assert!(!store.end_lapsed("task_q1", 20_000, &ending).await.expect("end"));
}

/// Claims with `n` concurrent claimers until the queue is empty; the
/// claimed ids, sorted.
async fn futures_claims(store: &SqliteStore, n: usize) -> Vec<String> {
    let mut claimers = tokio::task::JoinSet::new();
    for i in 0..n {
        let store = store.clone();
        claimers.spawn(async move {
            let mut mine = Vec::new();
            while let Some(claimed) = store
                .claim(&format!("n{i}/1/1"), 1_000, 2_000)
                .await
                .expect("claim")
            {
                mine.push(claimed.record.id);
            }
            mine
        });
    }
    let mut all = Vec::new();
    while let Some(mine) = claimers.join_next().await {
        all.extend(mine.expect("claimer"));
    }
    all.sort();
    all
}

#[tokio::test]
async fn a_damaged_or_newer_store_is_refused_with_its_path_and_the_fix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(FILE_NAME);
    {
        let (store, _) = SqliteStore::open(&path).await.expect("open");
        for i in 0..200 {
            store
                .create(&sample(&format!("task_{i}"), "alice", i))
                .await
                .expect("create");
        }
        store.close().await;
    }
    let bytes = std::fs::read(&path).expect("read");
    std::fs::write(&path, &bytes[..bytes.len() / 3]).expect("truncate");
    let _ = std::fs::remove_file(dir.path().join("tasks.db-wal"));
    let error = SqliteStore::open(&path).await.expect_err("damaged");
    let text = error.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains("Move it aside"), "{text}");

    let newer = dir.path().join("newer.db");
    {
        let (store, _) = SqliteStore::open(&newer).await.expect("open");
        store
            .pool
            .run(|c| c.execute("INSERT INTO warden_schema VALUES (99, 'future', 0)", []))
            .await
            .expect("insert");
        store.close().await;
    }
    let error = SqliteStore::open(&newer).await.expect_err("newer");
    assert!(error.to_string().contains("schema version 99"), "{error}");
}

#[tokio::test]
async fn ended_tasks_forget_their_request_bodies_and_expired_ones_leave_no_trace_in_the_file() {
    // Ending a task (run, lapsed, or cancelled while queued) clears its stored request;
    // status and summary stay until the TTL; after expiry the file holds no byte of it.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(FILE_NAME);
    let (store, _) = SqliteStore::open(&path).await.expect("open");
    let marker = "SECRET-SCRIPT-BODY-7f3a9c";
    let queued = |id: &str| TaskRecord {
        state: State::Queued,
        node: String::new(),
        lease_until_ms: 0,
        ..sample(id, "alice", 1)
    };
    for id in ["task_r1", "task_r2", "task_r3"] {
        let request =
            serde_json::json!({"tool": "run_script", "arguments": {"script": format!("{marker} {id}")}});
        store
            .enqueue(&queued(id), &request, None, 10)
            .await
            .expect("enqueue");
    }
    let ending = |status| Ending {
        status,
        summary: "done".into(),
        error: None,
        at_ms: 50,
    };
    assert!(
        store
            .cancel_queued("task_r3", &ending(TaskStatus::Cancelled))
            .await
            .expect("cancel")
    );
    let first = store.claim("n/1/1", 10, 20).await.expect("claim").expect("task");
    assert!(
        first.request.to_string().contains(marker),
        "the claim gets the request"
    );
    store.claim("n/1/1", 10, 20).await.expect("claim").expect("task");
    assert!(
        store
            .end(&first.record.id, &ending(TaskStatus::Success))
            .await
            .expect("end")
    );
    store
        .expire_leases(1_000, &ending(TaskStatus::Failed))
        .await
        .expect("expire");
    for id in ["task_r1", "task_r2", "task_r3"] {
        let owned = id.to_string();
        let body: Option<String> = store
            .pool
            .run(move |c| {
                c.query_row("SELECT request FROM tasks WHERE id = ?", [owned], |row| {
                    row.get(0)
                })
            })
            .await
            .expect("select");
        assert_eq!(body, None, "{id} kept its request");
        let record = store.get(id).await.expect("get").expect("kept until its TTL");
        assert!(matches!(record.state, State::Ended(_)), "{id}: {record:?}");
        assert_eq!(record.summary.as_deref(), Some("done"), "{id}");
    }
    assert_eq!(store.take_expired(1_001).await.expect("expire").len(), 3);
    store.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let bytes = std::fs::read(journal_path(&path, suffix)).unwrap_or_default();
        let found = bytes.windows(marker.len()).any(|w| w == marker.as_bytes());
        assert!(!found, "{FILE_NAME}{suffix} still holds a request body");
    }
}

#[tokio::test]
async fn store_files_are_private_and_a_read_only_directory_is_not_called_damaged() {
    // tasks.db, -wal and -shm are 0600 whatever the umask; a store that cannot be written is
    // Unwritable naming the directory and WARDEN_ARTIFACTS_DIR, never "damaged".
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("store");
    let path = root.join(FILE_NAME);
    let (store, _) = SqliteStore::open(&path).await.expect("open");
    store.create(&sample("task_p", "alice", 1)).await.expect("create");
    let mode = |p: &std::path::Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode(&root), 0o700);
    for suffix in ["", "-wal", "-shm"] {
        assert_eq!(mode(&journal_path(&path, suffix)), 0o600, "{FILE_NAME}{suffix}");
    }
    store.close().await;
    // A path under a regular file can never be written, root or not.
    let blocked = dir.path().join("file");
    std::fs::write(&blocked, b"x").expect("file");
    let error = SqliteStore::open(&blocked.join("sub").join(FILE_NAME))
        .await
        .expect_err("not a dir");
    assert!(!error.to_string().contains("damaged"), "{error}");
    // A non-store file is damaged.
    let bogus = dir.path().join("bogus.db");
    std::fs::write(&bogus, vec![b'x'; 8192]).expect("bogus");
    let error = SqliteStore::open(&bogus).await.expect_err("not a store");
    assert!(error.to_string().contains("Move it aside"), "{error}");
    assert!(matches!(error, StoreError::Open { .. }), "{error:?}");
    // Permission: only meaningful when not root (root writes through 0500).
    if nix::unistd::geteuid().is_root() {
        return;
    }
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).expect("dir");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).expect("chmod");
    let error = SqliteStore::open(&locked.join(FILE_NAME))
        .await
        .expect_err("read-only");
    assert!(matches!(error, StoreError::Unwritable { .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.contains("WARDEN_ARTIFACTS_DIR") && text.contains(&locked.display().to_string()),
        "{text}"
    );
}

#[tokio::test]
async fn usage_adds_up_per_task_and_day_and_sums_per_principal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) = SqliteStore::open(&dir.path().join(FILE_NAME))
        .await
        .expect("open");
    crate::store::checks::usage_accounting(&store)
        .await
        .expect("usage accounting");
}

#[tokio::test]
async fn a_task_waits_for_the_person_and_the_first_answer_queues_it_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) = SqliteStore::open(&dir.path().join(FILE_NAME))
        .await
        .expect("open");
    crate::store::checks::waiting_for_the_person(&store)
        .await
        .expect("waiting for the person");
}
