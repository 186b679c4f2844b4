//! How many error codes other than NONE a response carries, counted as Kafka's
//! `AbstractResponse.errorCounts` does: every top-level, group, topic and
//! partition error code. The per-API error counter adds these up.
//!
//! A response type without an impl counts zero errors rather than failing to
//! compile, so a new handler needs no change here to be wired into dispatch:
//! `(&ErrorProbe(&response)).error_count()` picks `Counted` when the type
//! implements `ResponseErrors` and falls back to `Uncounted` through one more
//! auto-reference otherwise (method resolution tries `&ErrorProbe` before
//! `&&ErrorProbe`).

use kafka_protocol::messages::*;

/// Error codes other than NONE in a response.
pub trait ResponseErrors {
    fn error_count(&self) -> u64;
}

/// The wrapper the two lookups below dispatch on.
pub struct ErrorProbe<'a, T>(pub &'a T);

/// Chosen for responses that implement `ResponseErrors`.
pub trait Counted {
    fn error_count(&self) -> u64;
}

impl<T: ResponseErrors> Counted for ErrorProbe<'_, T> {
    fn error_count(&self) -> u64 {
        self.0.error_count()
    }
}

/// Chosen for every other response: no errors counted.
pub trait Uncounted {
    fn error_count(&self) -> u64 {
        0
    }
}

impl<T> Uncounted for &ErrorProbe<'_, T> {}

fn codes<'a>(codes: impl IntoIterator<Item = &'a i16>) -> u64 {
    codes.into_iter().filter(|code| **code != 0).count() as u64
}

fn code(code: i16) -> u64 {
    u64::from(code != 0)
}

macro_rules! top_level_only {
    ($($response:ty),* $(,)?) => {$(
        impl ResponseErrors for $response {
            fn error_count(&self) -> u64 {
                code(self.error_code)
            }
        }
    )*};
}

top_level_only!(
    ApiVersionsResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    SyncGroupResponse,
    ListGroupsResponse,
    DescribeClusterResponse,
    InitProducerIdResponse,
    AddOffsetsToTxnResponse,
    EndTxnResponse,
    ListTransactionsResponse,
);

macro_rules! per_entry {
    ($($response:ty => $list:ident),* $(,)?) => {$(
        impl ResponseErrors for $response {
            fn error_count(&self) -> u64 {
                codes(self.$list.iter().map(|entry| &entry.error_code))
            }
        }
    )*};
}

per_entry!(
    DescribeGroupsResponse => groups,
    CreateTopicsResponse => topics,
    DeleteTopicsResponse => responses,
    DescribeConfigsResponse => results,
    AlterConfigsResponse => responses,
    IncrementalAlterConfigsResponse => responses,
    CreatePartitionsResponse => results,
    DeleteGroupsResponse => results,
    DescribeTransactionsResponse => transaction_states,
);

macro_rules! per_partition {
    ($($response:ty => $topics:ident . $partitions:ident),* $(,)?) => {$(
        impl ResponseErrors for $response {
            fn error_count(&self) -> u64 {
                codes(
                    self.$topics
                        .iter()
                        .flat_map(|topic| topic.$partitions.iter().map(|p| &p.error_code)),
                )
            }
        }
    )*};
}

per_partition!(
    ProduceResponse => responses.partition_responses,
    ListOffsetsResponse => topics.partitions,
    OffsetCommitResponse => topics.partitions,
    DeleteRecordsResponse => topics.partitions,
    OffsetForLeaderEpochResponse => topics.partitions,
    TxnOffsetCommitResponse => topics.partitions,
    DescribeProducersResponse => topics.partitions,
);

impl ResponseErrors for AddPartitionsToTxnResponse {
    fn error_count(&self) -> u64 {
        let v3_and_below = self
            .results_by_topic_v3_and_below
            .iter()
            .flat_map(|topic| topic.results_by_partition.iter())
            .map(|partition| &partition.partition_error_code);
        let batched = self
            .results_by_transaction
            .iter()
            .flat_map(|transaction| transaction.topic_results.iter())
            .flat_map(|topic| topic.results_by_partition.iter())
            .map(|partition| &partition.partition_error_code);
        code(self.error_code) + codes(v3_and_below) + codes(batched)
    }
}

impl ResponseErrors for FetchResponse {
    fn error_count(&self) -> u64 {
        code(self.error_code)
            + codes(
                self.responses
                    .iter()
                    .flat_map(|topic| topic.partitions.iter().map(|p| &p.error_code)),
            )
    }
}

impl ResponseErrors for MetadataResponse {
    fn error_count(&self) -> u64 {
        code(self.error_code)
            + self
                .topics
                .iter()
                .map(|topic| {
                    code(topic.error_code) + codes(topic.partitions.iter().map(|p| &p.error_code))
                })
                .sum::<u64>()
    }
}

impl ResponseErrors for OffsetFetchResponse {
    fn error_count(&self) -> u64 {
        let v1_to_v7 = code(self.error_code)
            + codes(
                self.topics
                    .iter()
                    .flat_map(|topic| topic.partitions.iter().map(|p| &p.error_code)),
            );
        let v8_on: u64 = self
            .groups
            .iter()
            .map(|group| {
                code(group.error_code)
                    + codes(
                        group
                            .topics
                            .iter()
                            .flat_map(|topic| topic.partitions.iter().map(|p| &p.error_code)),
                    )
            })
            .sum();
        v1_to_v7 + v8_on
    }
}

impl ResponseErrors for FindCoordinatorResponse {
    fn error_count(&self) -> u64 {
        code(self.error_code) + codes(self.coordinators.iter().map(|c| &c.error_code))
    }
}

impl ResponseErrors for LeaveGroupResponse {
    fn error_count(&self) -> u64 {
        code(self.error_code) + codes(self.members.iter().map(|m| &m.error_code))
    }
}

impl ResponseErrors for OffsetDeleteResponse {
    fn error_count(&self) -> u64 {
        code(self.error_code)
            + codes(
                self.topics
                    .iter()
                    .flat_map(|topic| topic.partitions.iter().map(|p| &p.error_code)),
            )
    }
}

// The leading `&` of `(&ErrorProbe(..))` is what lets the fallback apply, as in
// dispatch, even where clippy sees it as needless for a counted type.
#[allow(clippy::needless_borrow)]
#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };

    #[test]
    fn every_partition_error_is_counted_and_none_is_not() {
        let response =
            ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
                .with_partition_responses(vec![
                    PartitionProduceResponse::default().with_error_code(3),
                    PartitionProduceResponse::default(),
                    PartitionProduceResponse::default().with_error_code(10),
                ])]);
        assert_eq!((&ErrorProbe(&response)).error_count(), 2);
        assert_eq!(
            (&ErrorProbe(&HeartbeatResponse::default().with_error_code(25))).error_count(),
            1
        );
    }

    #[test]
    fn a_response_without_an_impl_counts_no_errors() {
        let response = SaslHandshakeResponse::default().with_error_code(33);
        assert_eq!((&ErrorProbe(&response)).error_count(), 0);
    }
}
