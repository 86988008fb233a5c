//! PgStore against a real PostgreSQL server (`WARDEN_TEST_DATABASE_URL`,
//! set by scripts/with-postgres): each test works in a fresh database.

use std::time::Instant;

use serde_json::json;
use tokio::task::JoinSet;

use super::*;
use warden_task::TaskStatus;

/// The tests share one server; the restart test takes it alone.
static SERVER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

fn server_url() -> String {
    std::env::var("WARDEN_TEST_DATABASE_URL").unwrap_or_else(|_| {
        panic!(
            "WARDEN_TEST_DATABASE_URL is unset: these tests need a real PostgreSQL server; run them \
             under scripts/with-postgres (`scripts/with-postgres cargo test -p warden-cluster --features postgres postgres`) \
             or scripts/test"
        )
    })
}

/// A fresh database `warden_t_<uuid>` on the test server.
struct Db {
    admin: PgPool,
    name: String,
    url: String,
}

impl Db {
    async fn new() -> Self {
        let server = server_url();
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(&server)
            .await
            .expect("connect to WARDEN_TEST_DATABASE_URL");
        let name = format!("warden_t_{}", uuid::Uuid::new_v4().simple());
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&admin)
            .await
            .expect("create database");
        let base = server.split_once('?').map_or(server.as_str(), |(base, _)| base);
        let (root, _) = base.rsplit_once('/').expect("the URL names a database");
        let url = format!("{root}/{name}");
        Self { admin, name, url }
    }

    async fn open(&self) -> PgStore {
        PgStore::open(&self.url).await.expect("open").0
    }

    async fn drop(self) {
        sqlx::query(&format!("DROP DATABASE {} WITH (FORCE)", self.name))
            .execute(&self.admin)
            .await
            .expect("drop database");
    }
}

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
        node: "here/1/1".into(),
        lease_until_ms: created_ms + 60_000,
    }
}

fn queued(id: &str, owner: &str, created_ms: i64) -> TaskRecord {
    TaskRecord {
        state: State::Queued,
        status_message: Some("queued".into()),
        node: String::new(),
        lease_until_ms: 0,
        ..sample(id, owner, created_ms)
    }
}

fn request(id: &str) -> Value {
    json!({"tool": "run_script", "arguments": {"script": id}, "traceparent": null})
}

fn ending(status: TaskStatus, at_ms: i64) -> Ending {
    Ending {
        status,
        summary: "done".into(),
        error: Some(json!({"kind": "interrupted", "message": "nul \u{0} kept"})),
        at_ms,
    }
}

/// Waits until `n` listeners are on the channel in `store`'s database.
async fn listening(store: &PgStore, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let now: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND query LIKE 'LISTEN %'",
        )
        .fetch_one(&store.pool)
        .await
        .unwrap_or(0);
        if now >= n {
            return;
        }
        assert!(Instant::now() < deadline, "{now} of {n} listeners after 15 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn records_round_trip_end_once_list_newest_first_and_expire_once() {
    let _server = SERVER.read().await;
    let db = Db::new().await;
    let (store, created) = PgStore::open(&db.url).await.expect("open");
    assert!(created);
    store.ping().await.expect("ping");
    let a = sample("task_a", "alice", 1_000);
    store.create(&a).await.expect("create");
    assert!(store.create(&a).await.is_err(), "ids are unique");
    assert_eq!(store.get("task_a").await.expect("get"), Some(a));
    for (id, owner, at) in [("task_b", "bob", 2_000), ("task_c", "alice", 3_000)] {
        store.create(&sample(id, owner, at)).await.expect("create");
    }
    store
        .create(&sample("task_d", "alice", 3_000))
        .await
        .expect("create");
    store
        .create(&sample("task_e", "alice", 500))
        .await
        .expect("create");
    // PostgreSQL text cannot hold NUL: it is replaced, not refused.
    store.note("task_a", "step 1\0ok", 1_500).await.expect("note");

    // Twelve endings from three nodes at once: one wins.
    let nodes = [store.clone(), db.open().await, db.open().await];
    let mut enders = JoinSet::new();
    for i in 0..12 {
        let node = nodes[i % 3].clone();
        let status = [TaskStatus::Success, TaskStatus::Failed, TaskStatus::Cancelled][i % 3];
        enders.spawn(async move { (status, node.end("task_a", &ending(status, 1_600)).await) });
    }
    let mut won = Vec::new();
    while let Some(done) = enders.join_next().await {
        let (status, ended) = done.expect("ender");
        if ended.expect("end") {
            won.push(status);
        }
    }
    assert_eq!(won.len(), 1, "{won:?}");
    let got = store.get("task_a").await.expect("get").expect("present");
    assert_eq!(got.state, State::Ended(won[0]));
    assert_eq!(got.status_message.as_deref(), Some("step 1\u{FFFD}ok"));
    assert_eq!(got.summary.as_deref(), Some("done"));
    assert_eq!(got.error, ending(won[0], 0).error, "JSON kept exactly");
    assert_eq!(got.updated_ms, 1_600);
    store.note("task_a", "late", 1_700).await.expect("note");
    let after = store.get("task_a").await.expect("get").expect("present");
    assert_eq!(after, got, "an ended record does not change");

    let alice = Principal::new("alice").expect("principal");
    let ids: Vec<String> = store
        .list(&alice, 3)
        .await
        .expect("list")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, ["task_d", "task_c", "task_a"], "newest first, then id");
    assert_eq!(store.running().await.expect("running").len(), 4);

    // task_a ended and lives 1_000 ms from 1_000; the others run.
    assert!(store.take_expired(1_999).await.expect("expire").is_empty());
    let mut takers = JoinSet::new();
    for node in &nodes {
        let node = node.clone();
        takers.spawn(async move { node.take_expired(2_000).await.expect("expire") });
    }
    let mut taken = Vec::new();
    while let Some(done) = takers.join_next().await {
        taken.extend(done.expect("taker"));
    }
    assert_eq!(taken, vec![("task_a".to_string(), "/tmp/task_a".to_string())]);
    assert!(store.get("task_a").await.expect("get").is_none());
    store.delete("task_e").await.expect("delete");
    assert_eq!(store.count().await.expect("count"), 3);
    drop(nodes);
    drop(store);
    let (again, created) = PgStore::open(&db.url).await.expect("reopen");
    assert!(!created, "reopening applies nothing");
    assert_eq!(again.count().await.expect("count"), 3);
    again.close().await;
    assert!(again.count().await.is_err(), "closed");
    db.drop().await;
}

/// Runs `n` enqueues at once over `nodes`; the outcomes, counted.
async fn enqueue_at_once(
    nodes: &[PgStore],
    n: usize,
    owner: impl Fn(usize) -> String,
    owner_limit: Option<u64>,
    queue_limit: u64,
) -> std::collections::BTreeMap<String, usize> {
    let mut set = JoinSet::new();
    for i in 0..n {
        let node = nodes[i % nodes.len()].clone();
        let record = queued(&format!("task_{}", uuid::Uuid::new_v4().simple()), &owner(i), 10);
        set.spawn(async move {
            let id = record.id.clone();
            node.enqueue(&record, &request(&id), owner_limit, queue_limit)
                .await
        });
    }
    let mut outcomes = std::collections::BTreeMap::new();
    while let Some(done) = set.join_next().await {
        let outcome = done.expect("enqueuer").expect("enqueue");
        *outcomes.entry(format!("{outcome:?}")).or_insert(0) += 1;
    }
    outcomes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn enqueue_keeps_the_owner_and_queue_limits_under_concurrency() {
    let _server = SERVER.read().await;
    let db = Db::new().await;
    let nodes = [db.open().await, db.open().await, db.open().await];
    let alice = enqueue_at_once(&nodes, 20, |_| "alice".into(), Some(3), 100).await;
    assert_eq!(alice.get("Accepted"), Some(&3), "{alice:?}");
    assert_eq!(alice.get("OwnerAtLimit"), Some(&17), "{alice:?}");
    let others = enqueue_at_once(&nodes, 20, |i| format!("user{i}"), None, 8).await;
    assert_eq!(others.get("Accepted"), Some(&5), "3 + 5 = 8 queued: {others:?}");
    assert_eq!(others.get("QueueFull"), Some(&15), "{others:?}");
    assert_eq!(nodes[0].queued().await.expect("queued"), 8);
    // A full queue is reported before the owner's limit.
    let full = nodes[1]
        .enqueue(&queued("task_x", "alice", 11), &request("x"), Some(3), 8)
        .await;
    assert_eq!(full.expect("enqueue"), Enqueued::QueueFull);
    // Running tasks count toward the owner's limit, queued or created.
    let claimed = nodes[2]
        .claim("n/1/1", 1, 2)
        .await
        .expect("claim")
        .expect("a task");
    let owner = claimed.record.owner.as_str().to_string();
    let limit = if owner == "alice" { 3 } else { 1 };
    let again = nodes[2]
        .enqueue(&queued("task_y", &owner, 12), &request("y"), Some(limit), 100)
        .await;
    assert_eq!(again.expect("enqueue"), Enqueued::OwnerAtLimit);
    nodes[0]
        .create(&sample("task_z", "carol", 13))
        .await
        .expect("create");
    let carol = nodes[1]
        .enqueue(&queued("task_w", "carol", 14), &request("w"), Some(1), 100)
        .await;
    assert_eq!(carol.expect("enqueue"), Enqueued::OwnerAtLimit);
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_tasks_are_claimed_once_by_eight_claimers_on_three_nodes() {
    let _server = SERVER.read().await;
    let db = Db::new().await;
    let nodes = [db.open().await, db.open().await, db.open().await];
    let mut all = Vec::new();
    let enqueueing = Instant::now();
    for i in 0..200 {
        let id = format!("task_{i:03}");
        let record = queued(&id, &format!("user{}", i % 10), i64::try_from(i).expect("i"));
        let outcome = nodes[i % 3].enqueue(&record, &request(&id), None, 1_000).await;
        assert_eq!(outcome.expect("enqueue"), Enqueued::Accepted);
        all.push(id);
    }
    let enqueued = enqueueing.elapsed();
    let started = Instant::now();
    let mut claimers = JoinSet::new();
    for k in 0..8 {
        let store = nodes[k % 3].clone();
        let node = format!("node{}/1/1", k % 3);
        claimers.spawn(async move {
            let mut mine = Vec::new();
            while let Some(claimed) = store.claim(&node, 1_000, 60_000).await.expect("claim") {
                assert_eq!(claimed.record.node, node);
                assert_eq!(claimed.request, request(&claimed.record.id));
                mine.push(claimed.record.id);
            }
            mine
        });
    }
    let mut claimed = Vec::new();
    while let Some(mine) = claimers.join_next().await {
        claimed.extend(mine.expect("claimer"));
    }
    let took = started.elapsed();
    claimed.sort();
    assert_eq!(claimed, all, "each task claimed exactly once");
    assert_eq!(nodes[0].queued().await.expect("queued"), 0);
    assert_eq!(nodes[1].running().await.expect("running").len(), 200);
    eprintln!("200 enqueues one after another: {enqueued:?}; 200 claims by 8 claimers on 3 nodes: {took:?}");
    db.drop().await;
}

#[tokio::test]
async fn claims_take_the_oldest_and_renewed_leases_hold_while_lapsed_ones_expire_once() {
    let _server = SERVER.read().await;
    let db = Db::new().await;
    let nodes = [db.open().await, db.open().await, db.open().await];
    let store = &nodes[0];
    for (id, at) in [("task_q30", 30), ("task_q10", 10), ("task_q20", 20)] {
        store
            .enqueue(&queued(id, "alice", at), &request(id), None, 10)
            .await
            .expect("enqueue");
    }
    let mut order = Vec::new();
    for node in ["a/1/1", "b/1/1", "a/1/1"] {
        let claimed = store
            .claim(node, 1_000, 2_000)
            .await
            .expect("claim")
            .expect("a task");
        assert_eq!(claimed.record.state, State::Running);
        assert_eq!(claimed.record.status_message.as_deref(), Some("started"));
        order.push(claimed.record.id);
    }
    assert_eq!(order, ["task_q10", "task_q20", "task_q30"], "oldest first");
    assert!(store.claim("a/1/1", 1_000, 2_000).await.expect("claim").is_none());
    // a renews what it runs, plus an id it does not hold: only its own come back.
    let mine = [
        "task_q10".to_string(),
        "task_q30".to_string(),
        "task_q20".to_string(),
    ];
    let mut held = store.renew("a/1/1", &mine, 10_000).await.expect("renew");
    held.sort();
    assert_eq!(held, ["task_q10", "task_q30"]);
    // Three nodes' heartbeats expire b's lapsed lease: once.
    let mut beats = JoinSet::new();
    for node in &nodes {
        let node = node.clone();
        beats.spawn(async move {
            node.expire_leases(5_000, &ending(TaskStatus::Failed, 5_000))
                .await
        });
    }
    let mut expired = Vec::new();
    while let Some(done) = beats.join_next().await {
        expired.extend(done.expect("beat").expect("expire"));
    }
    assert_eq!(expired, ["task_q20"]);
    let lapsed = store.get("task_q20").await.expect("get").expect("present");
    assert_eq!(lapsed.state, State::Ended(TaskStatus::Failed));
    assert!(
        store
            .renew("b/1/1", &["task_q20".to_string()], 10_000)
            .await
            .expect("renew")
            .is_empty(),
        "b lost it"
    );
    assert!(
        !store
            .end("task_q20", &ending(TaskStatus::Success, 6_000))
            .await
            .expect("end")
    );
    assert_eq!(
        store
            .renew("a/1/1", &mine[..2], 11_000)
            .await
            .expect("renew")
            .len(),
        2,
        "a keeps its own"
    );
    assert!(
        !store
            .cancel_queued("task_q10", &ending(TaskStatus::Cancelled, 6_000))
            .await
            .expect("cancel")
    );
    store
        .enqueue(&queued("task_q40", "alice", 40), &request("q40"), None, 10)
        .await
        .expect("enqueue");
    let cancelled = ending(TaskStatus::Cancelled, 6_000);
    assert!(store.cancel_queued("task_q40", &cancelled).await.expect("cancel"));
    assert!(
        !store.cancel_queued("task_q40", &cancelled).await.expect("cancel"),
        "once"
    );
    assert!(
        store
            .claim("a/1/1", 6_000, 20_000)
            .await
            .expect("claim")
            .is_none(),
        "not claimable"
    );
    let q40 = store.get("task_q40").await.expect("get").expect("present");
    assert_eq!(q40.state, State::Ended(TaskStatus::Cancelled));
    db.drop().await;
}

#[tokio::test]
async fn cancel_requests_reach_the_running_node_and_notifications_wake_other_nodes() {
    let _server = SERVER.read().await;
    let db = Db::new().await;
    let (a, b) = (db.open().await, db.open().await);
    listening(&a, 2).await;
    let wake = a.wake().expect("a PgStore has a wake-up");
    let woken = wake.notified();
    let sent = Instant::now();
    b.enqueue(&queued("task_x", "alice", 1), &request("x"), None, 10)
        .await
        .expect("enqueue");
    tokio::time::timeout(Duration::from_secs(5), woken)
        .await
        .expect("woken by 'queued'");
    let latency = sent.elapsed();
    assert!(
        !b.request_cancel("task_x").await.expect("cancel"),
        "queued, not running"
    );
    a.claim("a/1/1", 1_000, 60_000)
        .await
        .expect("claim")
        .expect("task_x");
    let woken = wake.notified();
    assert!(b.request_cancel("task_x").await.expect("cancel"));
    tokio::time::timeout(Duration::from_secs(5), woken)
        .await
        .expect("woken by 'cancel'");
    assert_eq!(a.cancels_for("a/1/1").await.expect("cancels"), ["task_x"]);
    assert!(b.cancels_for("b/1/1").await.expect("cancels").is_empty());
    assert!(!b.request_cancel("task_unknown").await.expect("cancel"));
    a.end("task_x", &ending(TaskStatus::Cancelled, 2_000))
        .await
        .expect("end");
    assert!(a.cancels_for("a/1/1").await.expect("cancels").is_empty(), "ended");
    eprintln!("enqueue on one node -> wake on another: {latency:?}");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn six_nodes_opening_at_once_apply_each_step_once_and_a_newer_schema_is_refused() {
    let _server = SERVER.read().await;
    let db = Db::new().await;
    let mut opening = JoinSet::new();
    for _ in 0..6 {
        let url = db.url.clone();
        opening.spawn(async move { PgStore::open(&url).await });
    }
    let mut created = 0;
    let mut stores = Vec::new();
    while let Some(done) = opening.join_next().await {
        let (store, new) = done.expect("opener").expect("open");
        created += usize::from(new);
        stores.push(store);
    }
    assert_eq!(created, 1, "one node found no schema");
    let steps: Vec<(i64, String)> =
        sqlx::query_as("SELECT version, description FROM warden_schema ORDER BY version")
            .fetch_all(&stores[0].pool)
            .await
            .expect("schema");
    let expected: Vec<(i64, String)> = steps::POSTGRES
        .iter()
        .map(|s| (s.version, s.description.to_string()))
        .collect();
    assert_eq!(steps, expected);
    sqlx::query("INSERT INTO warden_schema VALUES (99, 'future', 0)")
        .execute(&stores[0].pool)
        .await
        .expect("insert");
    let error = PgStore::open(&db.url).await.expect_err("newer");
    let text = error.to_string();
    assert!(text.contains("schema version 99"), "{text}");
    assert!(text.contains(&db.url), "{text}");
    drop(stores);
    db.drop().await;
}

#[tokio::test]
async fn open_errors_name_the_url_without_its_password() {
    assert_eq!(
        redact("postgres://warden:s3cret@db:5432/tasks?sslmode=disable&password=s3cret"),
        "postgres://warden:***@db:5432/tasks?sslmode=disable&password=***"
    );
    assert_eq!(redact("postgres://warden@db/tasks"), "postgres://warden@db/tasks");
    // Nothing listens on port 1: the pool gives up after ACQUIRE_TIMEOUT.
    let error = PgStore::open("postgres://warden:s3cret@127.0.0.1:1/tasks")
        .await
        .expect_err("nothing listens there");
    let text = error.to_string();
    assert!(matches!(error, StoreError::Open { .. }), "{text}");
    assert!(text.contains("postgres://warden:***@127.0.0.1:1/tasks"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
    assert!(text.contains("check that PostgreSQL runs"), "{text}");
    let error = PgStore::open("postgres://warden:s3cret@db/tasks?sslmode=require")
        .await
        .expect_err("no TLS");
    assert!(error.to_string().contains("plain TCP only"), "{error}");
    assert!(!error.to_string().contains("s3cret"), "{error}");
    let error = PgStore::open("mysql://warden:s3cret@db/tasks")
        .await
        .expect_err("not postgres");
    assert!(!error.to_string().contains("s3cret"), "{error}");
}

/// Runs `WARDEN_TEST_PG_RESTART` with `action` (`restart`, `stop`, `start`).
async fn server(action: &str) {
    let control = std::env::var("WARDEN_TEST_PG_RESTART")
        .unwrap_or_else(|_| panic!("WARDEN_TEST_PG_RESTART is unset: run under scripts/with-postgres"));
    let status = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{control} {action}"))
        .status()
        .await
        .expect("run WARDEN_TEST_PG_RESTART");
    assert!(status.success(), "{control} {action}: {status}");
}

/// Waits until both stores answer again; how long since `since`.
async fn back(a: &PgStore, b: &PgStore, since: Instant) -> Duration {
    loop {
        if a.count().await.is_ok() && b.ping().await.is_ok() {
            return since.elapsed();
        }
        assert!(since.elapsed() < Duration::from_secs(20), "not back after 20 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Checks that a notification from `b` wakes `a` (its listener is up).
async fn wakes(a: &PgStore, b: &PgStore, id: &str) {
    listening(a, 2).await;
    let wake = a.wake().expect("wake");
    let woken = wake.notified();
    b.enqueue(&queued(id, "bob", 500), &request(id), None, 100)
        .await
        .expect("enqueue");
    tokio::time::timeout(Duration::from_secs(5), woken)
        .await
        .expect("woken");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_store_works_again_after_the_database_restarts_or_stops_and_loses_no_record() {
    let _server = SERVER.write().await;
    let db = Db::new().await;
    let (a, b) = (db.open().await, db.open().await);
    for i in 0..50 {
        a.create(&sample(&format!("task_r{i:02}"), "alice", i))
            .await
            .expect("create");
    }
    for i in 0..10 {
        let id = format!("task_s{i:02}");
        b.enqueue(&queued(&id, "bob", 100 + i), &request(&id), None, 100)
            .await
            .expect("enqueue");
    }
    let before = a.count().await.expect("count");
    let boot = "SELECT pg_postmaster_start_time()::text";
    let booted: String = sqlx::query_scalar(boot).fetch_one(&a.pool).await.expect("boot");
    // Calls during a restart wait for the database (up to ACQUIRE_TIMEOUT)
    // or fail as queries.
    let probe = {
        let a = a.clone();
        tokio::spawn(async move {
            let (mut slowest, mut failures) = (Duration::ZERO, Vec::new());
            for _ in 0..40 {
                let at = Instant::now();
                if let Err(e) = a.count().await {
                    failures.push(e);
                }
                slowest = slowest.max(at.elapsed());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (slowest, failures)
        })
    };
    let restarted = Instant::now();
    server("restart").await;
    let restart_took = restarted.elapsed();
    let answering = back(&a, &b, restarted).await;
    let (slowest, failures) = probe.await.expect("probe");
    assert!(slowest <= ACQUIRE_TIMEOUT + Duration::from_secs(2), "{slowest:?}");
    for failure in &failures {
        assert!(matches!(failure, StoreError::Query(_)), "{failure}");
    }
    let rebooted: String = sqlx::query_scalar(boot).fetch_one(&a.pool).await.expect("boot");
    assert_ne!(booted, rebooted, "the server restarted");
    assert_eq!(a.count().await.expect("count"), before, "no record lost");
    assert_eq!(b.queued().await.expect("queued"), 10);
    let claimed = b
        .claim("b/1/1", 1_000, 60_000)
        .await
        .expect("claim")
        .expect("a task");
    assert_eq!(claimed.record.id, "task_s00");
    wakes(&a, &b, "task_t1").await;

    // Down for longer than ACQUIRE_TIMEOUT: calls fail as queries once
    // it has passed; the store works again when the database is back.
    server("stop").await;
    let at = Instant::now();
    let down = a.count().await.expect_err("the database is down");
    let failed_after = at.elapsed();
    assert!(matches!(down, StoreError::Query(_)), "{down}");
    assert!(
        failed_after <= ACQUIRE_TIMEOUT + Duration::from_secs(1),
        "{failed_after:?}"
    );
    let started = Instant::now();
    server("start").await;
    let answering_again = back(&a, &b, started).await;
    assert_eq!(a.count().await.expect("count"), before + 1, "no record lost");
    wakes(&a, &b, "task_t2").await;
    eprintln!(
        "restart: pg_ctl {restart_took:?}, store answering {answering:?} after it began; probe: slowest \
         call {slowest:?}, {} of 40 calls failed; stopped: a call failed after {failed_after:?} ({down}); \
         started: answering {answering_again:?} after pg_ctl start began; failures: {failures:?}",
        failures.len()
    );
    db.drop().await;
}

#[tokio::test]
async fn an_ended_task_forgets_its_request_body_and_keeps_its_outcome() {
    // Ending a task (run, lapsed or cancelled while queued) clears the stored request (script,
    // prompt, arguments); status and summary stay until the TTL removes the record.
    let _server = SERVER.read().await;
    let db = Db::new().await;
    let store = db.open().await;
    for id in ["task_r1", "task_r2", "task_r3"] {
        store
            .enqueue(&queued(id, "alice", 1), &request(id), None, 10)
            .await
            .expect("enqueue");
    }
    assert!(
        store
            .cancel_queued("task_r3", &ending(TaskStatus::Cancelled, 5))
            .await
            .expect("cancel")
    );
    let first = store.claim("a/1/1", 10, 20).await.expect("claim").expect("task");
    assert_eq!(first.request["arguments"]["script"], json!(first.record.id));
    store.claim("a/1/1", 10, 20).await.expect("claim").expect("task");
    assert!(
        store
            .end("task_r1", &ending(TaskStatus::Success, 30))
            .await
            .expect("end")
    );
    let lapsed = store
        .expire_leases(1_000, &ending(TaskStatus::Failed, 1_000))
        .await
        .expect("expire");
    assert_eq!(lapsed, vec!["task_r2".to_string()]);
    for id in ["task_r1", "task_r2", "task_r3"] {
        let body: Option<String> = sqlx::query_scalar("SELECT request FROM tasks WHERE id = $1")
            .bind(id)
            .fetch_one(&store.pool)
            .await
            .expect("select");
        assert_eq!(body, None, "{id} kept its request");
        let record = store.get(id).await.expect("get").expect("kept until its TTL");
        assert!(matches!(record.state, State::Ended(_)), "{id}: {record:?}");
        assert_eq!(record.summary.as_deref(), Some("done"), "{id}");
    }
    drop(store);
    db.drop().await;
}

#[tokio::test]
async fn usage_adds_up_per_task_and_day_and_sums_per_principal() {
    let _server = SERVER.read().await;
    let db = Db::new().await;
    let store = db.open().await;
    let checked = warden_task::store::checks::usage_accounting(&store).await;
    store.close().await;
    db.drop().await;
    checked.expect("usage accounting");
}

#[tokio::test]
async fn a_task_waits_for_the_person_and_the_first_answer_queues_it_again() {
    let _server = SERVER.read().await;
    let db = Db::new().await;
    let store = db.open().await;
    let checked = warden_task::store::checks::waiting_for_the_person(&store).await;
    store.close().await;
    db.drop().await;
    checked.expect("waiting for the person");
}

#[tokio::test]
async fn a_lapsed_task_is_ended_once_naming_the_side_effects_its_node_recorded() {
    // A node records each destructive call before it runs; when its lease lapses, the node
    // that ends the task reads them (the last `limit`, all counted) and nobody ends it twice.
    let _server = SERVER.read().await;
    let db = Db::new().await;
    let nodes = [db.open().await, db.open().await, db.open().await];
    let store = &nodes[0];
    store
        .create(&sample("task_plain", "alice", 10))
        .await
        .expect("create");
    store
        .create(&sample("task_wipes", "alice", 20))
        .await
        .expect("create");
    store
        .create(&sample("task_live", "alice", 30))
        .await
        .expect("create");
    for n in 0..4 {
        let call = format!("call_{n}");
        let started = SideEffect::started("wipe", &format!("sha256:{n:064x}"));
        store
            .put_side_effect("task_wipes", &call, &started)
            .await
            .expect("start");
        if n < 3 {
            let settled = started.settled("success", None, Some(format!("sha256:{:064x}", n + 100)));
            store
                .put_side_effect("task_wipes", &call, &settled)
                .await
                .expect("settle");
        }
    }
    let live = SideEffect::started("wipe", "sha256:ff");
    store
        .put_side_effect("task_live", "call_x", &live)
        .await
        .expect("start");
    // task_live renewed its lease; the others lapsed.
    store
        .renew("here/1/1", &["task_live".to_string()], 1_000_000)
        .await
        .expect("renew");
    let plain = store
        .expire_leases(100_000, &ending(TaskStatus::Failed, 100_000))
        .await
        .expect("expire");
    assert_eq!(
        plain,
        ["task_plain"],
        "a task with side effects is not ended blind"
    );
    let found = store.lapsed_with_side_effects(100_000, 2).await.expect("lapsed");
    assert_eq!(found.len(), 1, "{found:?}");
    // Three nodes' heartbeats end it: once.
    let mut beats = JoinSet::new();
    for node in &nodes {
        let (node, lapsed) = (node.clone(), found[0].clone());
        beats.spawn(async move {
            let ending = Ending {
                summary: format!("{} side effects", lapsed.by_status.values().sum::<u64>()),
                ..ending(TaskStatus::Failed, 100_000)
            };
            let ended = node.end_lapsed(&lapsed.id, 100_000, &ending).await;
            ended.map(|ended| ended.then_some(lapsed))
        });
    }
    let mut ended = Vec::new();
    while let Some(done) = beats.join_next().await {
        ended.extend(done.expect("beat").expect("end"));
    }
    assert_eq!(ended.len(), 1, "ended once: {ended:?}");
    let lapsed = &ended[0];
    assert_eq!(lapsed.id, "task_wipes");
    assert_eq!(lapsed.owner.as_str(), "alice");
    let shown: Vec<(&str, &str)> = lapsed
        .side_effects
        .iter()
        .map(|s| {
            (
                s.status.as_str(),
                s.arguments_sha256.as_deref().unwrap_or_default(),
            )
        })
        .collect();
    let (two, three) = (format!("sha256:{:064x}", 2), format!("sha256:{:064x}", 3));
    assert_eq!(
        shown,
        [("success", two.as_str()), ("unknown", three.as_str())],
        "the last two, oldest first"
    );
    assert_eq!(
        lapsed.by_status,
        [("success".to_string(), 3), ("unknown".to_string(), 1)].into(),
    );
    let record = store.get("task_wipes").await.expect("get").expect("present");
    assert_eq!(record.state, State::Ended(TaskStatus::Failed));
    assert_eq!(record.summary.as_deref(), Some("4 side effects"));
    assert_eq!(
        store.get("task_live").await.expect("get").expect("present").state,
        State::Running,
        "a held lease is not ended"
    );
    assert!(
        !store
            .end_lapsed("task_live", 100_000, &ending(TaskStatus::Failed, 100_000))
            .await
            .expect("end"),
        "nor ended by a late heartbeat"
    );
    assert!(
        store
            .lapsed_with_side_effects(100_000, 2)
            .await
            .expect("lapsed")
            .is_empty()
    );
    // The side effects go with the record.
    store.delete("task_wipes").await.expect("delete");
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM task_side_effects WHERE task_id = 'task_wipes'")
        .fetch_one(&store.pool)
        .await
        .expect("count");
    assert_eq!(left, 0);
    drop(nodes);
    db.drop().await;
}
