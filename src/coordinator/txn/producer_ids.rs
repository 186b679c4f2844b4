//! Producer ids, handed out from blocks the controller reserves (Kafka's
//! RPCProducerIdManager). The controller's state machine never hands out a block
//! twice, and a block is durable in the raft log before it is used, so ids never
//! repeat, across restarts too (ids of a block not used up before a restart are
//! skipped, as in Kafka).
//!
//! Pure bookkeeping: the owner asks for the next block when `wants_block` says
//! so and reports it with `block_arrived`.

use crate::error_code;

/// Kafka fetches the next block once this share of the current one is used
/// (RPCProducerIdManager's PERCENTAGE_FULL, 90 %), in percent.
pub const PRODUCER_ID_PREFETCH_PERCENT: i64 = 90;

/// One reserved range of producer ids, `first .. first + count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdBlock {
    pub first: i64,
    pub count: i64,
}

impl ProducerIdBlock {
    fn end(&self) -> i64 {
        self.first + self.count
    }
}

#[derive(Debug)]
pub struct ProducerIdManager {
    block_size: i64,
    current: Option<ProducerIdBlock>,
    next_id: i64,
    prefetched: Option<ProducerIdBlock>,
    fetching: bool,
}

impl ProducerIdManager {
    pub fn new(block_size: i64) -> ProducerIdManager {
        assert!(block_size > 0);
        ProducerIdManager {
            block_size,
            current: None,
            next_id: 0,
            prefetched: None,
            fetching: false,
        }
    }

    pub fn block_size(&self) -> i64 {
        self.block_size
    }

    /// The next id, or COORDINATOR_LOAD_IN_PROGRESS (retriable) while no block
    /// is at hand, as Kafka answers.
    pub fn generate(&mut self) -> Result<i64, i16> {
        if self.current.is_none_or(|block| self.next_id >= block.end()) {
            let Some(next) = self.prefetched.take() else {
                self.current = None;
                return Err(error_code::COORDINATOR_LOAD_IN_PROGRESS);
            };
            self.current = Some(next);
            self.next_id = next.first;
        }
        let id = self.next_id;
        self.next_id += 1;
        Ok(id)
    }

    /// True when a block should be requested now: none is being fetched or
    /// waiting, and the current one is missing or mostly used.
    pub fn wants_block(&self) -> bool {
        if self.fetching || self.prefetched.is_some() {
            return false;
        }
        match self.current {
            None => true,
            Some(block) => {
                let used = self.next_id - block.first;
                used * 100 >= block.count * PRODUCER_ID_PREFETCH_PERCENT
            }
        }
    }

    pub fn fetch_started(&mut self) {
        assert!(!self.fetching);
        self.fetching = true;
    }

    /// The fetch ended: with a block, or with nothing (it is asked again later).
    pub fn block_arrived(&mut self, block: Option<ProducerIdBlock>) {
        assert!(self.fetching);
        self.fetching = false;
        if let Some(block) = block {
            assert!(block.count > 0 && block.first >= 0);
            if let Some(current) = self.current {
                assert!(block.first >= current.end(), "producer id blocks overlap");
            }
            self.prefetched = Some(block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_out_ids_in_order_and_prefetches_at_ninety_percent() {
        let mut ids = ProducerIdManager::new(10);
        assert!(ids.wants_block());
        assert_eq!(
            ids.generate(),
            Err(error_code::COORDINATOR_LOAD_IN_PROGRESS)
        );
        ids.fetch_started();
        assert!(!ids.wants_block());
        ids.block_arrived(Some(ProducerIdBlock {
            first: 0,
            count: 10,
        }));
        for expected in 0..9 {
            assert_eq!(ids.generate(), Ok(expected));
        }
        assert!(ids.wants_block());
        ids.fetch_started();
        assert_eq!(ids.generate(), Ok(9));
        // The next block has not arrived: retriable.
        assert_eq!(
            ids.generate(),
            Err(error_code::COORDINATOR_LOAD_IN_PROGRESS)
        );
        ids.block_arrived(Some(ProducerIdBlock {
            first: 10,
            count: 10,
        }));
        assert_eq!(ids.generate(), Ok(10));
    }

    #[test]
    fn a_failed_fetch_is_asked_again() {
        let mut ids = ProducerIdManager::new(10);
        ids.fetch_started();
        ids.block_arrived(None);
        assert!(ids.wants_block());
    }
}
