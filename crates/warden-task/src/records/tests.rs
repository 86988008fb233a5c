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
