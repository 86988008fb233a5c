//! One principal's view of the store: its own tasks, and nothing else.
//!
//! Every client-facing lookup — `list_tasks`, `get_task_result`,
//! `list_artifacts`, `read_artifact`, `resources/read` and `run_batch`'s
//! `$artifact` references — goes through a [`View`]. A task another
//! principal owns answers exactly as a task that does not exist (same
//! code, same message), whichever lookup asks and whichever file it names,
//! so no answer tells whether someone else's task exists. The owner is
//! read from the task directory's own descriptor, the one the lookup then
//! reads through, so a check and a read cannot see different directories.
//!
//! With a remote copy attached, a task whose local directory does not
//! exist (another node ran it) is looked up in its copy instead
//! ([`super::RemoteCopy`]): the owner from the copy's `owner.json`, the
//! same rule, the same "no task" answer for another principal's task.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;

use super::{ArtifactStore, ChunkAnswer, Encoding, RemoteCopy, no_task, owner, read_at, walk};
use crate::tenant::Principal;
use warden_core::error::GuardError;

/// Where a task of this principal was found.
enum Place {
    /// Its local directory, held open.
    Local(OwnedFd),
    /// Its remote copy (no local directory).
    Remote(Arc<dyn RemoteCopy>),
}

/// The tasks of one principal. Cheap: borrows the store and the principal.
#[derive(Clone, Copy)]
pub struct View<'a> {
    store: &'a ArtifactStore,
    principal: &'a Principal,
}

impl ArtifactStore {
    /// The store as `principal` sees it.
    pub fn view<'a>(&'a self, principal: &'a Principal) -> View<'a> {
        View {
            store: self,
            principal,
        }
    }
}

impl View<'_> {
    /// Opens a local task directory of this principal (see
    /// `ArtifactStore::open_task`); another's is "no task". Local only:
    /// [`View::read`], [`View::files`] and [`View::task_dir`] also find
    /// tasks in the object store.
    pub fn open_task(&self, task_id: &str) -> Result<OwnedFd, GuardError> {
        let dir = self.store.open_task(task_id)?;
        if owner::principal_at(&dir).as_ref() != Some(self.principal) {
            return Err(no_task(task_id));
        }
        Ok(dir)
    }

    /// Finds a task of this principal: its local directory, else (only
    /// when that directory does not exist, or no artifacts directory does)
    /// its object-store copy. Either way another principal's task is
    /// [`no_task`].
    fn locate(&self, task_id: &str) -> Result<Place, GuardError> {
        let dir = match self.store.open_task(task_id) {
            Ok(dir) => dir,
            Err(error) => return self.locate_remote(task_id, error),
        };
        if owner::principal_at(&dir).as_ref() != Some(self.principal) {
            return Err(no_task(task_id));
        }
        Ok(Place::Local(dir))
    }

    /// The object-store copy of a task whose local lookup failed with
    /// `error`, when that is because the directory (or the whole artifacts
    /// directory) does not exist and there is a store; else `error`.
    fn locate_remote(&self, task_id: &str, error: GuardError) -> Result<Place, GuardError> {
        let absent = error.code == warden_core::error::codes::NOT_FOUND || !self.store.root.exists();
        match &self.store.remote {
            Some(remote) if absent => {
                if remote.owner(task_id)?.as_ref() != Some(self.principal) {
                    return Err(no_task(task_id));
                }
                Ok(Place::Remote(remote.clone()))
            }
            _ => Err(error),
        }
    }

    /// Where a task of this principal lives, for display: its directory,
    /// or `s3://bucket/prefix/task_…` for an object-store copy.
    pub fn task_dir(&self, task_id: &str) -> Result<PathBuf, GuardError> {
        match self.locate(task_id)? {
            Place::Local(_) => Ok(self.store.root.join(task_id)),
            Place::Remote(remote) => Ok(PathBuf::from(remote.task_url(task_id))),
        }
    }

    /// One chunk of a file of a task of this principal (`read_artifact`).
    pub fn read(
        &self,
        task_id: &str,
        filename: &str,
        offset: u64,
        max_bytes: usize,
        encoding: Encoding,
    ) -> Result<ChunkAnswer, GuardError> {
        match self.locate(task_id)? {
            Place::Local(dir) => read_at(&dir, task_id, filename, offset, max_bytes, encoding),
            Place::Remote(remote) => remote.read(task_id, filename, offset, max_bytes, encoding),
        }
    }

    /// Files of a task of this principal (relative names, sorted), skipping
    /// links and anything that is not a regular file, walked from held
    /// descriptors (or listed from its object-store copy).
    pub fn files(&self, task_id: &str) -> Result<Vec<(String, u64)>, GuardError> {
        match self.locate(task_id)? {
            Place::Local(dir) => {
                let mut found = Vec::new();
                walk(dir, "", 0, &mut found);
                found.sort_unstable();
                Ok(found)
            }
            Place::Remote(remote) => remote.files(task_id),
        }
    }

    /// This principal's task ids, newest first, found lazily: taking the
    /// first N reads the owners of only as many directories as it needs.
    /// (Clients list tasks from the task store; this checks the store's
    /// ownership rule against the directories.)
    #[cfg(test)]
    pub fn task_ids(&self) -> impl Iterator<Item = String> + '_ {
        self.store
            .task_ids()
            .into_iter()
            .filter(move |id| self.open_task(id).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_core::error::codes;

    fn principal(name: &str) -> Principal {
        Principal::new(name).expect("principal name")
    }

    /// Every lookup's answer for a task id, as text, for comparing answers.
    fn answers(view: View<'_>, task_id: &str) -> Vec<String> {
        let show = |r: Result<String, GuardError>| match r {
            Ok(ok) => format!("ok {ok}"),
            Err(e) => serde_json::to_string(&e).unwrap_or_default(),
        };
        vec![
            show(view.task_dir(task_id).map(|p| p.display().to_string())),
            show(
                view.read(task_id, "outputs/a.csv", 0, 100, Encoding::Utf8)
                    .map(|chunk| serde_json::to_string(&chunk).unwrap_or_default()),
            ),
            show(view.files(task_id).map(|f| format!("{f:?}"))),
        ]
    }

    #[test]
    fn another_principals_task_answers_exactly_as_an_unknown_one() {
        // Alice sees her task; Bob gets, for every lookup, the answer an id that never existed gets.
        let root = tempfile::tempdir().expect("temp dir");
        let store = ArtifactStore::new(root.path(), 10);
        let (alice, bob) = (principal("alice"), principal("bob"));
        let (task, _) = store.create_task(&alice).expect("task");
        store
            .write_output(&task, "a.csv", b"x,y\n1,2\n", 1024)
            .expect("write");
        assert!(
            answers(store.view(&alice), &task)
                .iter()
                .all(|a| a.starts_with("ok"))
        );
        let unknown = format!("task_{}", "0".repeat(32));
        let foreign = answers(store.view(&bob), &task);
        let missing = answers(store.view(&bob), &unknown);
        assert_eq!(
            foreign,
            missing
                .iter()
                .map(|a| a.replace(&unknown, &task))
                .collect::<Vec<_>>()
        );
        assert!(foreign[0].contains(codes::NOT_FOUND), "{}", foreign[0]);
        assert_eq!(
            store.view(&alice).task_ids().collect::<Vec<_>>(),
            vec![task.clone()]
        );
        assert_eq!(store.view(&bob).task_ids().count(), 0);
        assert_eq!(store.view(&Principal::local()).task_ids().count(), 0);
    }

    /// A remote copy holding one task of one owner, answering from memory.
    #[derive(Debug)]
    struct OneTask {
        task: String,
        owner: Principal,
    }

    impl RemoteCopy for OneTask {
        fn url(&self) -> &str {
            "mem://copy"
        }
        fn task_url(&self, task_id: &str) -> String {
            format!("mem://copy/{task_id}")
        }
        fn upload_task(&self, _task_id: &str, _dir: OwnedFd) -> Result<usize, GuardError> {
            Ok(0)
        }
        fn owner(&self, task_id: &str) -> Result<Option<Principal>, GuardError> {
            Ok((task_id == self.task).then(|| self.owner.clone()))
        }
        fn read(
            &self,
            task_id: &str,
            filename: &str,
            offset: u64,
            _: usize,
            encoding: Encoding,
        ) -> Result<ChunkAnswer, GuardError> {
            Ok(ChunkAnswer {
                task_id: task_id.into(),
                filename: filename.into(),
                encoding,
                mime_type: "application/json".into(),
                content: "from the copy".into(),
                size_bytes: 13,
                offset,
                next_offset: None,
            })
        }
        fn files(&self, _task_id: &str) -> Result<Vec<(String, u64)>, GuardError> {
            Ok(vec![("result.json".into(), 2)])
        }
        fn remove_task(&self, _task_id: &str) -> Result<usize, GuardError> {
            Ok(0)
        }
        fn probe(&self) -> Result<(), GuardError> {
            Ok(())
        }
    }

    #[test]
    fn a_task_without_a_local_directory_is_read_from_the_remote_copy_by_its_owner_only() {
        // Another node ran it: its owner reads it from the copy; anyone else gets "no task".
        let root = tempfile::tempdir().expect("temp dir");
        let (alice, bob) = (principal("alice"), principal("bob"));
        let task = super::super::new_task_id();
        let copy = Arc::new(OneTask {
            task: task.clone(),
            owner: alice.clone(),
        });
        let store = ArtifactStore::new(root.path().join("artifacts"), 10).with_remote(copy);
        assert_eq!(store.remote_url(), Some("mem://copy"));
        let view = store.view(&alice);
        assert_eq!(
            view.task_dir(&task).expect("dir"),
            PathBuf::from(format!("mem://copy/{task}"))
        );
        assert_eq!(
            view.read(&task, "result.json", 0, 10, Encoding::Utf8)
                .expect("read")
                .content,
            "from the copy"
        );
        assert_eq!(view.files(&task).expect("files"), vec![("result.json".into(), 2)]);
        let unknown = super::super::new_task_id();
        for (who, id) in [(&bob, &task), (&alice, &unknown)] {
            assert_eq!(store.view(who).files(id).expect_err("no task"), no_task(id));
        }
    }

    #[test]
    fn ownership_survives_a_new_store_and_legacy_tasks_belong_to_local() {
        // A restarted server (a new store on the same root) filters the same way; no principal field is local.
        let root = tempfile::tempdir().expect("temp dir");
        let alice = principal("alice");
        let (task, dir) = ArtifactStore::new(root.path(), 10)
            .create_task(&alice)
            .expect("task");
        let (legacy, legacy_dir) = ArtifactStore::new(root.path(), 10)
            .create_task(&alice)
            .expect("legacy task");
        std::fs::write(
            legacy_dir.join(owner::OWNER_FILE),
            r#"{"pid": 1, "start_time": 1}"#,
        )
        .expect("old-style owner record");
        let (no_record, no_record_dir) = ArtifactStore::new(root.path(), 10)
            .create_task(&alice)
            .expect("task without a record");
        std::fs::remove_file(no_record_dir.join(owner::OWNER_FILE)).expect("remove record");
        let (garbled, garbled_dir) = ArtifactStore::new(root.path(), 10)
            .create_task(&alice)
            .expect("task with a bad record");
        std::fs::write(garbled_dir.join(owner::OWNER_FILE), "{not json").expect("garble");

        let restarted = ArtifactStore::new(root.path(), 10);
        let mine: Vec<String> = restarted.view(&alice).task_ids().collect();
        assert_eq!(mine, vec![task.clone()]);
        let mut local: Vec<String> = restarted.view(&Principal::local()).task_ids().collect();
        local.sort();
        let mut expected = vec![legacy, no_record];
        expected.sort();
        assert_eq!(local, expected);
        for who in [&alice, &Principal::local()] {
            let error = restarted.view(who).open_task(&garbled).expect_err("nobody's");
            assert_eq!(error, no_task(&garbled));
        }
        assert!(dir.join(owner::OWNER_FILE).exists());
    }
}
