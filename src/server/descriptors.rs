//! The process's open file limit, and the partition replicas it leaves room
//! for. At start the soft limit is raised to the hard one, as databases do
//! (a shell's common `ulimit -n 1024` is far below what a broker needs), and
//! the limit is turned into a budget of partition replicas (each holds
//! `LOG_DESCRIPTORS_PER_PARTITION` files open, and `reserved` are left for
//! connections and the stores), which the broker registers with the
//! controller: a CreateTopics or CreatePartitions that would take it past
//! its budget is refused up front with POLICY_VIOLATION, instead of running
//! the broker out of descriptors later.

use crate::limits::{DESCRIPTORS_RESERVED_MIN, LOG_DESCRIPTORS_PER_PARTITION};

/// Raises the soft open file limit to the hard one and returns the partition
/// replicas it has room for; None when the limit is unlimited or unknown.
pub fn partition_budget() -> Option<u32> {
    let limit = match rlimit::increase_nofile_limit(rlimit::INFINITY) {
        Ok(limit) => limit,
        Err(error) => {
            tracing::warn!(%error, "could not raise the open file limit");
            rlimit::Resource::NOFILE.get().ok()?.0
        }
    };
    if limit == rlimit::INFINITY {
        return None;
    }
    let budget = budget_of(limit);
    tracing::info!(
        open_file_limit = limit,
        partition_budget = budget,
        "open file limit: room for this many partition replicas on this broker"
    );
    Some(budget)
}

/// The partition replicas `limit` open files leave room for, with a quarter
/// of them (at least `DESCRIPTORS_RESERVED_MIN`) kept for everything else.
fn budget_of(limit: u64) -> u32 {
    let reserved = (limit / 4).max(DESCRIPTORS_RESERVED_MIN);
    let budget = limit.saturating_sub(reserved) / LOG_DESCRIPTORS_PER_PARTITION;
    u32::try_from(budget).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quarter_of_the_limit_and_at_least_the_minimum_is_kept_for_the_rest() {
        assert_eq!(budget_of(1024), 384);
        assert_eq!(budget_of(20_000), 7_500);
        assert_eq!(budget_of(200), 0);
    }
}
