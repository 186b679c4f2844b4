//! The raft state machine: applies committed commands to the metadata image and publishes
//! each new image on a watch channel.
//!
//! Owned by raft's state machine task; snapshot builders get a cheap copy (the image is an
//! `Arc`). Persistence is by snapshot only: `apply` changes memory, and the whole state
//! (image, last applied log id, membership) is written and fsynced when raft builds a
//! snapshot (every `RAFT_SNAPSHOT_INTERVAL_ENTRIES`) or installs one. A restart loads the last
//! snapshot and raft replays the durable log after it, so the state machine never has to be
//! durable between snapshots. Invariant: raft purges only log entries covered by a snapshot
//! that is already fsynced, so the replay never finds a hole.

use std::io::{self, Cursor};
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot as RaftSnapshot};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder, StorageIOError};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::command::CommandOutcome;
use super::command::MetadataRecord;
use super::image::MetadataImage;
use super::kv::{self, decode, encode, KvHandle};
use super::raft_types::{
    broker_id_of, Entry, LogId, Snapshot, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};
use crate::store::SnapshotBlobs;

/// What the state machine has applied. Cheap to clone: the image is shared.
#[derive(Clone, Debug, Default)]
struct AppliedState {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    image: Arc<MetadataImage>,
}

/// The snapshot payload. A struct rather than a bare image so fields can be added later
/// (with `#[serde(default)]`) without breaking snapshots already on disk.
#[derive(Serialize)]
struct SnapshotBodyRef<'a> {
    image: &'a MetadataImage,
}

#[derive(Deserialize)]
struct SnapshotBody {
    image: MetadataImage,
}

pub struct StateMachineStore {
    kv: Arc<KvHandle>,
    state: AppliedState,
    image_tx: watch::Sender<Arc<MetadataImage>>,
}

impl StateMachineStore {
    /// The state machine as of the last snapshot in `kv` (empty if none), and a receiver of
    /// its images. Blocking; it runs once, at startup.
    pub fn open(
        kv: Arc<KvHandle>,
    ) -> io::Result<(StateMachineStore, watch::Receiver<Arc<MetadataImage>>)> {
        let state = match kv.read_snapshot()? {
            None => AppliedState::default(),
            Some(blobs) => {
                let meta: SnapshotMeta = decode(&blobs.meta)?;
                restore(&meta, &blobs.data)?
            }
        };
        let (image_tx, image_rx) = watch::channel(Arc::clone(&state.image));
        Ok((
            StateMachineStore {
                kv,
                state,
                image_tx,
            },
            image_rx,
        ))
    }

    fn publish(&mut self, image: Arc<MetadataImage>) {
        self.state.image = Arc::clone(&image);
        // `send_replace` succeeds with no receiver; the broker may not subscribe at all.
        self.image_tx.send_replace(image);
    }
}

/// The applied state a snapshot describes; checks that its meta and its image agree.
fn restore(meta: &SnapshotMeta, data: &[u8]) -> io::Result<AppliedState> {
    let body: SnapshotBody = decode(data)?;
    let expected_index = meta.last_log_id.map_or(0, |id| id.index);
    if body.image.last_applied_index != expected_index {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "snapshot {} holds an image at index {}",
                meta.snapshot_id, body.image.last_applied_index
            ),
        ));
    }
    Ok(AppliedState {
        last_applied: meta.last_log_id,
        membership: meta.last_membership.clone(),
        image: Arc::new(body.image),
    })
}

/// Builds a snapshot of the state as it was when the builder was made.
pub struct SnapshotBuilder {
    kv: Arc<KvHandle>,
    state: AppliedState,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let meta = SnapshotMeta {
            last_log_id: self.state.last_applied,
            last_membership: self.state.membership.clone(),
            snapshot_id: format!(
                "{}-{}",
                self.state.last_applied.map_or(0, |id| id.index),
                uuid::Uuid::new_v4().simple()
            ),
        };
        let write_err = |e: io::Error| StorageIOError::write_snapshot(Some(meta.signature()), &e);
        let meta_bytes = encode(&meta).map_err(write_err)?;
        let kv = Arc::clone(&self.kv);
        let image = Arc::clone(&self.state.image);
        // Serializing a large image and the fsync are both blocking work.
        let data = super::kv::off_worker(&self.kv, move || -> io::Result<Vec<u8>> {
            let data = encode(&SnapshotBodyRef { image: &image })?;
            let blobs = SnapshotBlobs {
                meta: meta_bytes,
                data,
            };
            kv.save_snapshot(&blobs)?;
            // Raft purges the log up to this snapshot as soon as we return.
            kv.sync()?;
            Ok(blobs.data)
        })
        .await
        .map_err(write_err)?;
        Ok(RaftSnapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok((self.state.last_applied, self.state.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<CommandOutcome>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut image = MetadataImage::clone(&self.state.image);
        let mut outcomes = Vec::new();
        for entry in entries {
            // A record this node cannot apply stops it here, with what is
            // applied before it published: applying on would leave its image
            // wrong, and skipping it would too (the node needs an upgrade).
            if let EntryPayload::Normal(record) = &entry.payload {
                if let Some(why) = record.unsupported() {
                    tracing::error!(index = entry.log_id.index, "{why}");
                    if !outcomes.is_empty() {
                        self.publish(Arc::new(image));
                    }
                    let error = io::Error::new(io::ErrorKind::Unsupported, why);
                    return Err(StorageIOError::apply(entry.log_id, &error).into());
                }
            }
            image.note_applied(
                entry.log_id.index,
                broker_id_of(entry.log_id.leader_id.node_id),
            );
            self.state.last_applied = Some(entry.log_id);
            let outcome = match entry.payload {
                EntryPayload::Blank => CommandOutcome::Done,
                EntryPayload::Normal(MetadataRecord::Command(command)) => image.apply(&command),
                // Never reached: `unsupported` stops at every such record above.
                EntryPayload::Normal(MetadataRecord::Newer(_)) => CommandOutcome::Done,
                EntryPayload::Membership(membership) => {
                    self.state.membership = StoredMembership::new(Some(entry.log_id), membership);
                    CommandOutcome::Done
                }
            };
            outcomes.push(outcome);
        }
        if !outcomes.is_empty() {
            // Published before raft answers the proposer, so a caller of `propose` sees its
            // change in `image()` as soon as `propose` returns.
            self.publish(Arc::new(image));
        }
        Ok(outcomes)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        SnapshotBuilder {
            kv: Arc::clone(&self.kv),
            state: self.state.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let write_err = |e: io::Error| StorageIOError::write_snapshot(Some(meta.signature()), &e);
        let data = snapshot.into_inner();
        let state = restore(meta, &data).map_err(write_err)?;
        let blobs = SnapshotBlobs {
            meta: encode(meta).map_err(write_err)?,
            data,
        };
        self.kv.save_snapshot(&blobs).map_err(write_err)?;
        // Raft may purge the whole log once the snapshot is installed: durable first.
        kv::sync(&self.kv).await.map_err(write_err)?;
        let image = Arc::clone(&state.image);
        self.state = state;
        self.publish(image);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let read_err = |e: io::Error| StorageIOError::read_snapshot(None, &e);
        let Some(blobs) = self.kv.read_snapshot().map_err(read_err)? else {
            return Ok(None);
        };
        let meta: SnapshotMeta = decode(&blobs.meta).map_err(read_err)?;
        Ok(Some(RaftSnapshot {
            meta,
            snapshot: Box::new(Cursor::new(blobs.data)),
        }))
    }
}
