//! The offset store against real sled directories: what a coordinator sees across commits,
//! deletes, expiry, failed fsyncs and restarts.

use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::Duration;

use super::*;
use crate::store::durable::wait_until_released;

/// Test-only controls of the flusher and of fsync.
#[derive(Default)]
pub(super) struct Hooks {
    /// Held by a test, a round cannot apply its first write: later commits pile up
    /// for the next round.
    pub(super) hold_flusher: Mutex<()>,
    /// Writes handed to the group commit so far.
    pub(super) submitted: std::sync::atomic::AtomicUsize,
    /// Set, the next fsync fails (and so poisons the store).
    pub(super) fail_fsync: AtomicBool,
}

/// How long a test waits for commits to reach the queue before it gives up.
const QUEUE_WAIT_MS_MAX: u64 = 10_000;

fn offset(offset: i64, commit_timestamp_ms: i64) -> CommittedOffset {
    CommittedOffset {
        offset,
        leader_epoch: 3,
        metadata: format!("m{offset}"),
        commit_timestamp_ms,
    }
}

fn one(topic: &str, partition: i32, value: CommittedOffset) -> Vec<(String, i32, CommittedOffset)> {
    vec![(topic.to_string(), partition, value)]
}

fn reopen(store: SledOffsetStore, dir: &Path) -> io::Result<SledOffsetStore> {
    // Dropped without close, as a crash would leave it; sled lets go a moment later.
    drop(store);
    wait_until_released(dir)?;
    SledOffsetStore::open(dir)
}

/// Block (this thread, not the runtime's workers) until `count` commits wait in the queue.
fn wait_until_queued(store: &SledOffsetStore, count: usize) {
    let queued = || store.shared.hooks.submitted.load(Ordering::SeqCst);
    let mut waited_ms = 0;
    while queued() < count {
        assert!(
            waited_ms < QUEUE_WAIT_MS_MAX,
            "commits never reached the queue"
        );
        std::thread::sleep(Duration::from_millis(1));
        waited_ms += 1;
    }
}

/// Start one commit per partition of `topic` from its own task, with the flusher held, so
/// that they all wait in the queue together; then let the flusher go.
async fn commit_concurrently(
    store: &Arc<SledOffsetStore>,
    topic: &str,
    partitions: i32,
) -> Vec<io::Result<()>> {
    let mut tasks = Vec::new();
    {
        let _held = store.shared.hooks.hold_flusher.lock();
        for partition in 0..partitions {
            let store = Arc::clone(store);
            let topic = topic.to_string();
            tasks.push(tokio::spawn(async move {
                let value = offset(i64::from(partition) * 10, 1_000);
                store.commit("g", one(&topic, partition, value)).await
            }));
        }
        // Every commit is queued; the first round is held applying the first of them.
        wait_until_queued(store, partitions as usize);
    }
    let mut results = Vec::new();
    for task in tasks {
        // A panicked task is reported as its commit's error.
        results.push(task.await.map_err(io::Error::other).and_then(|r| r));
    }
    results
}

#[tokio::test]
async fn commit_then_fetch_and_overwrite() -> io::Result<()> {
    let tmp = tempfile::tempdir()?;
    let store = SledOffsetStore::open(tmp.path())?;
    assert_eq!(store.fetch("g", "t", 0)?, None);
    store.commit("g", one("t", 0, offset(5, 100))).await?;
    assert_eq!(store.fetch("g", "t", 0)?, Some(offset(5, 100)));
    assert_eq!(store.fetch("g", "t", 1)?, None);
    assert_eq!(store.fetch("other", "t", 0)?, None);

    store.commit("g", one("t", 0, offset(9, 200))).await?;
    assert_eq!(store.fetch("g", "t", 0)?, Some(offset(9, 200)));
    assert_eq!(store.fetch_group("g")?.len(), 1);
    // An empty commit is answered without an fsync.
    let fsyncs = store.fsync_count();
    store.commit("g", Vec::new()).await?;
    assert_eq!(store.fsync_count(), fsyncs);
    store.close().await
}

#[tokio::test]
async fn fetch_group_is_sorted_by_topic_then_partition() -> io::Result<()> {
    let tmp = tempfile::tempdir()?;
    let store = SledOffsetStore::open(tmp.path())?;
    // "b" is shorter than "aa", so it comes first in key order but last in name order.
    let offsets = vec![
        ("b".to_string(), 0, offset(1, 1)),
        ("aa".to_string(), 2, offset(2, 1)),
        ("aa".to_string(), 0, offset(3, 1)),
        ("a".to_string(), 1, offset(4, 1)),
    ];
    store.commit("g", offsets).await?;
    let order: Vec<(String, i32)> = store
        .fetch_group("g")?
        .into_iter()
        .map(|(topic, partition, _)| (topic, partition))
        .collect();
    let expected = [("a", 1), ("aa", 0), ("aa", 2), ("b", 0)];
    let expected: Vec<(String, i32)> = expected.iter().map(|(t, p)| (t.to_string(), *p)).collect();
    assert_eq!(order, expected);
    store.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_commits_share_one_fsync_and_survive_a_crash() -> io::Result<()> {
    const PARTITIONS: i32 = 40;
    let tmp = tempfile::tempdir()?;
    let store = Arc::new(SledOffsetStore::open(tmp.path())?);
    let fsyncs_before = store.fsync_count();
    for result in commit_concurrently(&store, "t", PARTITIONS).await {
        result?;
    }
    // The first round (which may already hold several commits: however many reached
    // the group commit together), then one round for the rest, which queued while the
    // first was held: never a round per commit.
    let rounds = store.fsync_count() - fsyncs_before;
    assert!(
        (1..=2).contains(&rounds),
        "{rounds} fsyncs for {PARTITIONS} queued commits"
    );
    assert_eq!(store.fetch_group("g")?.len(), PARTITIONS as usize);

    let store = Arc::into_inner(store).ok_or_else(|| io::Error::other("store still shared"))?;
    let store = reopen(store, tmp.path())?;
    let stored = store.fetch_group("g")?;
    assert_eq!(stored.len(), PARTITIONS as usize);
    for (topic, partition, value) in stored {
        assert_eq!(topic, "t");
        assert_eq!(value, offset(i64::from(partition) * 10, 1_000));
    }
    store.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ok_commit_survives_drop_without_close() -> io::Result<()> {
    const TASKS: i32 = 8;
    const COMMITS_PER_TASK: i64 = 25;
    let tmp = tempfile::tempdir()?;
    let store = Arc::new(SledOffsetStore::open(tmp.path())?);
    let mut tasks = Vec::new();
    for partition in 0..TASKS {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            for i in 0..COMMITS_PER_TASK {
                store.commit("g", one("t", partition, offset(i, i))).await?;
            }
            io::Result::Ok(())
        }));
    }
    for task in tasks {
        task.await.map_err(io::Error::other)??;
    }
    let commits = (i64::from(TASKS) * COMMITS_PER_TASK) as u64;
    assert!(store.fsync_count() <= commits);

    let store = Arc::into_inner(store).ok_or_else(|| io::Error::other("store still shared"))?;
    let store = reopen(store, tmp.path())?;
    for partition in 0..TASKS {
        let last = COMMITS_PER_TASK - 1;
        assert_eq!(store.fetch("g", "t", partition)?, Some(offset(last, last)));
    }
    store.close().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_fsync_fails_every_waiter_and_later_writes() -> io::Result<()> {
    let tmp = tempfile::tempdir()?;
    let store = Arc::new(SledOffsetStore::open(tmp.path())?);
    store.shared.hooks.fail_fsync.store(true, Ordering::Relaxed);
    let results = commit_concurrently(&store, "t", 5).await;
    assert_eq!(results.len(), 5);
    assert!(results.iter().all(|r| r.is_err()), "{results:?}");

    // Never retried: the store refuses durable writes from now on.
    store
        .shared
        .hooks
        .fail_fsync
        .store(false, Ordering::Relaxed);
    assert!(store.commit("g", one("t", 9, offset(1, 1))).await.is_err());
    let record = GroupRecord {
        protocol_type: None,
        generation_id: 0,
        ..GroupRecord::default()
    };
    assert!(store.save_group("g", &record).is_err());
    assert!(store.delete_group("g").is_err());
    Ok(())
}

#[tokio::test]
async fn delete_offsets_and_delete_group() -> io::Result<()> {
    let tmp = tempfile::tempdir()?;
    let store = SledOffsetStore::open(tmp.path())?;
    let offsets = vec![
        ("t".to_string(), 0, offset(1, 1)),
        ("t".to_string(), 1, offset(2, 1)),
        ("u".to_string(), 0, offset(3, 1)),
    ];
    store.commit("g", offsets.clone()).await?;
    store.commit("h", offsets).await?;
    let record = GroupRecord {
        protocol_type: Some("consumer".to_string()),
        generation_id: 4,
        ..GroupRecord::default()
    };
    store.save_group("g", &record)?;
    store.save_group("h", &record)?;

    // Deleting a partition that has no offset is not an error.
    store.delete_offsets("g", &[("t".to_string(), 1), ("v".to_string(), 0)])?;
    let left: Vec<(String, i32)> = store
        .fetch_group("g")?
        .into_iter()
        .map(|(t, p, _)| (t, p))
        .collect();
    assert_eq!(left, vec![("t".to_string(), 0), ("u".to_string(), 0)]);

    store.delete_group("g")?;
    assert!(store.fetch_group("g")?.is_empty());
    assert_eq!(store.groups_with_offsets()?, vec!["h".to_string()]);
    assert_eq!(store.load_groups()?, vec![("h".to_string(), record)]);
    assert_eq!(store.fetch_group("h")?.len(), 3);

    let store = reopen(store, tmp.path())?;
    assert!(store.fetch_group("g")?.is_empty());
    assert_eq!(store.fetch_group("h")?.len(), 3);
    store.close().await
}

#[tokio::test]
async fn group_records_survive_reopen() -> io::Result<()> {
    let tmp = tempfile::tempdir()?;
    let consumer = GroupRecord {
        protocol_type: Some("consumer".to_string()),
        generation_id: 12,
        ..GroupRecord::default()
    };
    let bare = GroupRecord {
        protocol_type: None,
        generation_id: 0,
        ..GroupRecord::default()
    };
    let store = SledOffsetStore::open(tmp.path())?;
    store.save_group("b", &bare)?;
    store.save_group("a", &bare)?;
    // Saving again replaces the record.
    store.save_group("a", &consumer)?;
    store.close().await?;

    let store = SledOffsetStore::open(tmp.path())?;
    assert_eq!(
        store.load_groups()?,
        vec![("a".to_string(), consumer), ("b".to_string(), bare)]
    );
    store.close().await
}

#[tokio::test]
async fn expire_removes_only_old_offsets_of_empty_groups() -> io::Result<()> {
    const RETENTION_MS: i64 = 1_000;
    const NOW_MS: i64 = 10_000;
    let tmp = tempfile::tempdir()?;
    let store = SledOffsetStore::open(tmp.path())?;
    let old = NOW_MS - RETENTION_MS - 1;
    let recent = NOW_MS - RETENTION_MS;
    // Empty and old: expired, both offsets.
    let two_old = vec![
        ("t".to_string(), 0, offset(1, old)),
        ("t".to_string(), 1, offset(1, old - 5)),
    ];
    store.commit("empty-old", two_old).await?;
    // Empty, but its newest commit is within retention: kept whole, old partition included.
    let mixed = vec![
        ("t".to_string(), 0, offset(1, old)),
        ("t".to_string(), 1, offset(1, recent)),
    ];
    store.commit("empty-recent", mixed).await?;
    // Old, but not empty: kept.
    store
        .commit("active-old", one("t", 0, offset(1, old)))
        .await?;

    let is_empty = |group: &str| group.starts_with("empty");
    assert_eq!(store.expire(NOW_MS, RETENTION_MS, &is_empty)?, 2);
    assert_eq!(
        store.groups_with_offsets()?,
        vec!["active-old".to_string(), "empty-recent".to_string()]
    );
    assert_eq!(store.fetch_group("empty-recent")?.len(), 2);
    // Nothing left to expire: no fsync either.
    let fsyncs = store.fsync_count();
    assert_eq!(store.expire(NOW_MS, RETENTION_MS, &is_empty)?, 0);
    assert_eq!(store.fsync_count(), fsyncs);

    let store = reopen(store, tmp.path())?;
    assert!(store.fetch_group("empty-old")?.is_empty());
    store.close().await
}

#[tokio::test]
async fn odd_group_ids_do_not_collide() -> io::Result<()> {
    let tmp = tempfile::tempdir()?;
    let store = SledOffsetStore::open(tmp.path())?;
    // Each pair would collide under a plain `group \0 topic` key.
    let groups = ["", "a", "a\0", "a\0t", "\0", "グループ", "a\u{FFFF}"];
    let mut expected: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
    expected.sort();
    for (i, group) in groups.iter().enumerate() {
        let topic = if group.is_empty() { "\0t" } else { "t" };
        store
            .commit(group, one(topic, 0, offset(i as i64, 1)))
            .await?;
        store.save_group(
            group,
            &GroupRecord {
                protocol_type: None,
                generation_id: i as i32,
                ..GroupRecord::default()
            },
        )?;
    }
    assert_eq!(store.groups_with_offsets()?, expected);
    for (i, group) in groups.iter().enumerate() {
        let stored = store.fetch_group(group)?;
        assert_eq!(stored.len(), 1, "group {group:?}");
        assert_eq!(stored[0].2, offset(i as i64, 1), "group {group:?}");
    }
    assert_eq!(store.load_groups()?.len(), groups.len());

    store.delete_group("a")?;
    store.delete_group("")?;
    assert_eq!(store.fetch_group("a\0")?.len(), 1);
    assert_eq!(store.fetch_group("a\0t")?.len(), 1);
    assert_eq!(store.fetch_group("\0")?.len(), 1);
    assert_eq!(store.groups_with_offsets()?.len(), groups.len() - 2);
    assert_eq!(store.load_groups()?.len(), groups.len() - 2);
    store.close().await
}

#[tokio::test]
async fn close_releases_the_directory_and_later_commits_fail() -> io::Result<()> {
    let tmp = tempfile::tempdir()?;
    let store = SledOffsetStore::open(tmp.path())?;
    store.commit("g", one("t", 0, offset(1, 1))).await?;
    // Created before close, polled after: the flusher is gone by then.
    let late = store.commit("g", one("t", 0, offset(2, 1)));
    store.close().await?;
    assert!(late.await.is_err());
    // Released: it opens again at once, with the first commit.
    let store = SledOffsetStore::open(tmp.path())?;
    assert_eq!(store.fetch("g", "t", 0)?, Some(offset(1, 1)));
    store.close().await
}
