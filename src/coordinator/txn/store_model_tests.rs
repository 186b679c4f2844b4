//! The transaction store, with the coordinator's record encoding, against a model: the
//! latest record of each transactional id. Beside `txn::record` because the store speaks
//! bytes; the harness (seeded generator, restarts) is the store's.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use super::record;
use crate::coordinator::txn::{TxnMetadata, TxnState, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};
use crate::store::model_tests::{
    check_model, join_in_order, landed, same, shown, Harness, ModelRun, OpLog, Restart, Rng,
};
use crate::store::SledTxnStore;
use crate::types::{ProducerEpoch, TopicPartition};

/// "" is a legal transactional id, and "a" is a prefix of the others.
const IDS: [&str; 5] = ["", "a", "a\0", "ab", "トランザクション"];
const TOPICS: [&str; 3] = ["orders", "__consumer_offsets", "t\0"];
/// A record this large is written by sled to a blob file of its own, which it never syncs
/// itself; a transaction over this many partitions is rare but legal.
const HUGE_TXN_PARTITIONS: i32 = 10_000;
/// A few seconds on a slow two-core machine, with some sixty restarts.
const DEFAULT_OPS: usize = 500;

type Model = BTreeMap<String, TxnMetadata>;

fn apply(model: &mut Model, metadata: &TxnMetadata) {
    if metadata.state == TxnState::Dead {
        model.remove(&metadata.transactional_id);
    } else {
        model.insert(metadata.transactional_id.clone(), metadata.clone());
    }
}

fn records(model: &Model) -> Vec<TxnMetadata> {
    model.values().cloned().collect()
}

/// Every state a record is saved in, in `TxnState::ALL`'s order. PrepareEpochFence is
/// left out: it is never persisted (the fence goes straight to PrepareAbort), and the
/// store refuses to load it.
fn saved_states() -> Vec<TxnState> {
    TxnState::ALL
        .into_iter()
        .filter(|state| *state != TxnState::PrepareEpochFence)
        .collect()
}

fn metadata(rng: &mut Rng, transactional_id: &str) -> TxnMetadata {
    // Dead is one state in seven: records come and go, but most are kept.
    let state = *rng.pick(&saved_states());
    let producer_id = match rng.below(10) {
        0 => i64::MAX,
        _ => rng.between(0, 100),
    };
    let previous_producer_id = if rng.one_in(2) {
        NO_PRODUCER_ID
    } else {
        rng.between(0, 100)
    };
    let epoch = |rng: &mut Rng| match rng.below(10) {
        0 => NO_PRODUCER_EPOCH,
        1 => i16::MAX,
        _ => rng.between(0, 20) as i16,
    };
    let producer_epoch = epoch(rng);
    let last_producer_epoch = epoch(rng);
    let mut partitions = BTreeSet::new();
    if rng.one_in(150) {
        for partition in 0..HUGE_TXN_PARTITIONS {
            partitions.insert(TopicPartition::new("a-topic-of-many-partitions", partition));
        }
    } else {
        for _ in 0..rng.below(6) {
            let topic = rng.pick(&TOPICS).to_string();
            partitions.insert(TopicPartition::new(topic, rng.between(0, 50) as i32));
        }
    }
    let timestamp = |rng: &mut Rng| match rng.below(20) {
        0 => -1,
        1 => i64::MAX,
        _ => rng.between(0, 1_000_000),
    };
    TxnMetadata {
        transactional_id: transactional_id.to_string(),
        producer_id,
        previous_producer_id,
        producer_epoch: ProducerEpoch::new(producer_epoch),
        last_producer_epoch: ProducerEpoch::new(last_producer_epoch),
        timeout_ms: if rng.one_in(10) {
            i32::MAX
        } else {
            rng.between(1, 900_000) as i32
        },
        state,
        partitions,
        start_timestamp_ms: timestamp(rng),
        last_update_timestamp_ms: timestamp(rng),
    }
}

#[derive(Debug)]
pub(crate) enum Op {
    Save(TxnMetadata),
    /// Saves of distinct transactional ids queued together, so that one flush may take them
    /// all (the coordinator never has two saves of one id in flight).
    Together(Vec<TxnMetadata>),
    Restart {
        how: Restart,
        /// Only with a crash image: started, not awaited, when the copy is taken.
        in_flight: Option<TxnMetadata>,
    },
}

fn next_op(rng: &mut Rng) -> Op {
    // In the order of the arms below: save, saves together, clean or drop restart, crash
    // image.
    const WEIGHTS: [u64; 4] = [70, 15, 6, 9];
    match rng.weighted(&WEIGHTS) {
        0 => {
            let id = rng_id(rng);
            Op::Save(metadata(rng, id))
        }
        1 => {
            let mut ids = BTreeSet::new();
            for _ in 0..2 + rng.index(4) {
                ids.insert(rng_id(rng));
            }
            Op::Together(ids.into_iter().map(|id| metadata(rng, id)).collect())
        }
        2 => Op::Restart {
            how: Restart::clean_or_drop(rng),
            in_flight: None,
        },
        _ => Op::Restart {
            how: Restart::CrashImage,
            in_flight: rng.one_in(2).then(|| {
                let id = rng_id(rng);
                metadata(rng, id)
            }),
        },
    }
}

fn rng_id(rng: &mut Rng) -> &'static str {
    IDS[rng.index(IDS.len())]
}

type Run = Harness<SledTxnStore, Model>;

impl ModelRun for Run {
    type Op = Op;
    type Write = TxnMetadata;

    fn next_op(&self, rng: &mut Rng) -> Op {
        next_op(rng)
    }

    async fn apply(&mut self, op: &Op, log: &mut OpLog) -> io::Result<()> {
        match op {
            Op::Save(metadata) => {
                record::save(self.store()?, metadata).await?;
                apply(&mut self.model, metadata);
            }
            Op::Together(saves) => {
                let store = self.store()?;
                let futures = saves
                    .iter()
                    .map(|metadata| record::save(store, metadata))
                    .collect();
                for (metadata, result) in saves.iter().zip(join_in_order(futures).await) {
                    result.map_err(|e| {
                        let id = &metadata.transactional_id;
                        io::Error::new(e.kind(), format!("save of {id:?}: {e}"))
                    })?;
                    apply(&mut self.model, metadata);
                }
            }
            Op::Restart { how, in_flight } => {
                self.restart(
                    *how,
                    in_flight.as_ref(),
                    |store, metadata| record::save(store, metadata),
                    log,
                )
                .await?;
            }
        }
        Ok(())
    }

    /// The copy holds the save or does not (a record is never torn); then it is saved again,
    /// so that the store and the model agree whichever it was.
    async fn settle_in_flight(
        &mut self,
        metadata: &TxnMetadata,
        log: &mut OpLog,
    ) -> io::Result<()> {
        let mut after = self.model.clone();
        apply(&mut after, metadata);
        let store = self.store()?;
        // The other records are compared by the check that follows.
        let id = &metadata.transactional_id;
        let loaded = record::load_all(store)?;
        let stored = loaded.iter().find(|record| &record.transactional_id == id);
        let Some(landed) = landed(&stored, &self.model.get(id), &after.get(id)) else {
            return Err(io::Error::other(format!(
                "a save in flight at the crash left neither the record before it nor the one \
                 after it: {id:?} is {}, before it {}, after it {}",
                shown(&stored),
                shown(&self.model.get(id)),
                shown(&after.get(id))
            )));
        };
        let again = record::save(store, metadata);
        self.settled("save", landed, again, after, log).await?;
        Ok(())
    }

    fn check(&self) -> io::Result<()> {
        same(
            || "load_all()".to_string(),
            record::load_all(self.store()?)?,
            records(&self.model),
        )
    }

    /// A last clean restart, counted as one more step, so that even a run without one ends
    /// with a reopen.
    async fn finish(&mut self, log: &mut OpLog) -> io::Result<()> {
        let op = Op::Restart {
            how: Restart::Clean,
            in_flight: None,
        };
        self.step(op, log).await?;
        self.stats.ops += 1;
        Ok(())
    }
}

/// Pins, for any seed: after any sequence of saves (Dead ones included, which remove the
/// record) of a few transactional ids, alone or queued together so that one flush takes
/// several, `load_all` returns exactly the latest record of each live id, sorted by id, and
/// still does after a clean restart, a drop without close, or a crash image; a save in flight
/// at a crash image is there whole or not at all. Now and then a record is large enough for
/// sled to keep it in a blob file.
#[tokio::test]
async fn txn_store_matches_its_model_across_restarts() {
    check_model::<SledTxnStore, Model>(DEFAULT_OPS).await;
}
