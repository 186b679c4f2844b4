//! The process's open file limit, and what it leaves room for. At start the
//! soft limit is raised to the hard one, as databases do (a shell's common
//! `ulimit -n 1024` is far below what a broker needs), and the limit is
//! split three ways: a reserve for connections and the stores, the cache of
//! idle segment files (`IDLE_SEGMENT_FILES_*`), and a budget of partition
//! replicas (each holds `LOG_DESCRIPTORS_PER_PARTITION` files open), which the
//! broker registers with the controller: a CreateTopics or CreatePartitions
//! that would take it past its budget is refused up front with
//! POLICY_VIOLATION, instead of running the broker out of descriptors later.

use crate::limits::{
    DESCRIPTORS_RESERVED_MIN, IDLE_SEGMENT_FILES_LIMIT_DIVISOR, IDLE_SEGMENT_FILES_MAX,
    IDLE_SEGMENT_FILES_MIN, LOG_DESCRIPTORS_PER_PARTITION,
};

/// How the open file limit is shared out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DescriptorBudget {
    /// Partition replicas this broker has room for; None when the limit is
    /// unlimited or unknown.
    pub partitions: Option<u32>,
    /// Files of idle segments the log dir keeps open at most.
    pub idle_segment_files: usize,
}

/// Raises the soft open file limit to the hard one and shares it out.
pub fn budget() -> DescriptorBudget {
    let limit = match rlimit::increase_nofile_limit(rlimit::INFINITY) {
        Ok(limit) => limit,
        Err(error) => {
            tracing::warn!(%error, "could not raise the open file limit");
            match rlimit::Resource::NOFILE.get() {
                Ok((soft, _)) => soft,
                Err(_) => rlimit::INFINITY,
            }
        }
    };
    if limit == rlimit::INFINITY {
        return DescriptorBudget {
            partitions: None,
            idle_segment_files: IDLE_SEGMENT_FILES_MAX,
        };
    }
    let budget = budget_of(limit);
    tracing::info!(
        open_file_limit = limit,
        partition_budget = budget.partitions,
        idle_segment_files = budget.idle_segment_files,
        "open file limit: room for this many partition replicas on this broker"
    );
    budget
}

/// The share-out of `limit` open files: a quarter of them (at least
/// `DESCRIPTORS_RESERVED_MIN`) kept for everything else, an eighth (within
/// bounds) for idle segment files, and the rest for partition replicas.
fn budget_of(limit: u64) -> DescriptorBudget {
    let reserved = (limit / 4).max(DESCRIPTORS_RESERVED_MIN);
    let idle_segment_files = usize::try_from(limit / IDLE_SEGMENT_FILES_LIMIT_DIVISOR)
        .unwrap_or(usize::MAX)
        .clamp(IDLE_SEGMENT_FILES_MIN, IDLE_SEGMENT_FILES_MAX);
    let partitions = limit
        .saturating_sub(reserved)
        .saturating_sub(idle_segment_files as u64)
        / LOG_DESCRIPTORS_PER_PARTITION;
    DescriptorBudget {
        partitions: Some(u32::try_from(partitions).unwrap_or(u32::MAX)),
        idle_segment_files,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quarter_is_reserved_an_eighth_cached_and_the_rest_is_for_partitions() {
        let budget = |limit| {
            let b = budget_of(limit);
            (b.partitions.expect("a finite limit"), b.idle_segment_files)
        };
        assert_eq!(budget(1024), (320, 128));
        assert_eq!(budget(20_000), (6_250, 2_500));
        assert_eq!(budget(1_048_576), (391_168, 4_096));
        assert_eq!(budget(200), (0, 64));
    }
}
