//! The seam to the shared store: `WARDEN_DATABASE_URL` goes to the opener
//! the app handed in, and without one is refused with the text a build
//! without the `postgres` feature has always given.

use std::sync::Mutex;

use super::*;
use crate::store::sqlite::SqliteStore;

/// An opener that records the URLs it is asked for and answers with an
/// embedded store in a temporary directory.
#[derive(Debug)]
struct Recording {
    dir: tempfile::TempDir,
    asked: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl StoreOpener for Recording {
    async fn open(&self, url: &str) -> Result<Arc<dyn TaskStore>, StoreError> {
        lock(&self.asked).push(url.to_string());
        let (store, _) = SqliteStore::open(&self.dir.path().join("tasks.db")).await?;
        Ok(Arc::new(store))
    }
}

#[tokio::test]
async fn a_postgres_url_goes_to_the_opener_and_without_one_names_the_feature() {
    // No opener: the error users of a build without `postgres` see, word for word.
    let url = "postgres://warden:s3cret@db/tasks";
    let error = open_database(url, None).await.expect_err("no opener");
    assert_eq!(
        error.to_string(),
        "task store WARDEN_DATABASE_URL: this build has no PostgreSQL support (cargo feature `postgres`)"
    );
    // An opener gets postgres:// and postgresql:// URLs, and nothing else.
    let opener = Recording {
        dir: tempfile::tempdir().expect("temp dir"),
        asked: Mutex::default(),
    };
    let store = open_database(url, Some(&opener)).await.expect("opened");
    assert_eq!(store.count().await.expect("count"), 0);
    open_database("postgresql://db/tasks", Some(&opener))
        .await
        .expect("postgresql://");
    let error = open_database("mysql://db/tasks", Some(&opener))
        .await
        .expect_err("not postgres");
    assert!(
        error
            .to_string()
            .contains("not a postgres:// URL; write postgres://"),
        "{error}"
    );
    assert_eq!(
        *lock(&opener.asked),
        vec![url.to_string(), "postgresql://db/tasks".to_string()]
    );
}

#[test]
fn a_dead_task_lists_its_last_side_effects_and_counts_every_one() {
    // A plan can approve a loop of orders: the result lists the last MAX_RESULT_SIDE_EFFECTS (the
    // one the server died in last), the summary counts all of them, function_calls.json lists all.
    let dir = tempfile::tempdir().expect("temp dir");
    let artifacts = ArtifactStore::new(dir.path(), 10);
    let (id, task_dir) = artifacts
        .create_task(&warden_calls::tenant::Principal::local())
        .expect("a task directory");
    let total = MAX_RESULT_SIDE_EFFECTS + 20;
    let mut log = String::new();
    for n in 0..total {
        let call = format!("c{n}");
        log += &serde_json::json!({"event": "function_call_started", "function": "place_paper_order",
            "call_id": call, "destructive": true, "arguments_sha256": format!("sha256:{n}")})
        .to_string();
        log.push('\n');
        if n + 1 < total {
            log += &serde_json::json!({"event": "function_call_finished", "function": "place_paper_order",
                "call_id": call, "destructive": true, "status": "success"})
            .to_string();
            log.push('\n');
        }
    }
    std::fs::write(task_dir.join("events.jsonl"), log).expect("log");
    let records = Records::new(
        artifacts,
        Duration::from_secs(3600),
        &crate::limits::TaskLimits::default(),
    );

    let result = records.end_dead(&id);
    let listed = result.side_effects.clone().unwrap_or_default();
    assert_eq!(listed.len(), MAX_RESULT_SIDE_EFFECTS);
    assert_eq!(listed.last().map(|s| s.status.as_str()), Some(recovered::UNKNOWN));
    assert_eq!(listed[0].arguments_sha256.as_deref(), Some("sha256:20"));
    let summary = result.summary.clone().unwrap_or_default();
    assert!(summary.contains(&format!("{total} call(s)")), "{summary}");
    assert!(
        summary.contains(&format!("{} success, 1 unknown", total - 1)),
        "{summary}"
    );
    assert!(summary.contains(&format!("… {} more", total - 5)), "{summary}");
    assert!(summary.len() < 600, "the summary is bounded: {summary}");
    let calls: Vec<Value> =
        serde_json::from_slice(&std::fs::read(task_dir.join("function_calls.json")).expect("calls"))
            .expect("JSON");
    assert_eq!(calls.len(), total + 1, "every one, then the note");
    let saved: Value =
        serde_json::from_slice(&std::fs::read(task_dir.join("result.json")).expect("result")).expect("JSON");
    assert_eq!(saved["error"]["kind"], "interrupted");
    assert_eq!(
        saved["side_effects"].as_array().map(Vec::len),
        Some(MAX_RESULT_SIDE_EFFECTS)
    );
}

#[test]
fn a_dead_tasks_list_too_large_to_read_whole_is_left_as_it_is() {
    // Its records are never replaced by fewer: the result alone names the side effect.
    let dir = tempfile::tempdir().expect("temp dir");
    let artifacts = ArtifactStore::new(dir.path(), 10);
    let (id, task_dir) = artifacts
        .create_task(&warden_calls::tenant::Principal::local())
        .expect("a task directory");
    let log = serde_json::json!({"event": "function_call_started", "function": "place_paper_order",
        "call_id": "c0", "destructive": true, "arguments_sha256": "sha256:0"});
    std::fs::write(task_dir.join("events.jsonl"), format!("{log}\n")).expect("log");
    let large = vec![b' '; usize::try_from(MAX_RECOVERED_CALLS_BYTES).expect("fits") + 1];
    std::fs::write(task_dir.join("function_calls.json"), &large).expect("calls");
    let records = Records::new(
        artifacts,
        Duration::from_secs(3600),
        &crate::limits::TaskLimits::default(),
    );

    let result = records.end_dead(&id);
    assert_eq!(result.side_effects.map(|s| s.len()), Some(1));
    let kept = std::fs::metadata(task_dir.join("function_calls.json")).expect("still there");
    assert_eq!(kept.len(), large.len() as u64, "left as it was");
}
