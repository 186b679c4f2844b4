//! How many error codes other than NONE a response carries, counted as Kafka's
//! `AbstractResponse.errorCounts` does: every top-level, group, topic and
//! partition error code. The per-API error counter adds these up.
//!
//! Every response type a handler returns implements it: dispatch calls
//! `error_count` on each, so a new API does not compile until its errors are
//! counted.

use kafka_protocol::messages::*;

/// Error codes other than NONE in a response.
pub trait ResponseErrors {
    fn error_count(&self) -> u64;
}

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
    ListPartitionReassignmentsResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    SyncGroupResponse,
    ListGroupsResponse,
    DescribeClusterResponse,
    InitProducerIdResponse,
    AddOffsetsToTxnResponse,
    EndTxnResponse,
    ListTransactionsResponse,
    // Every feature result repeats the top-level outcome.
    UpdateFeaturesResponse,
    SaslHandshakeResponse,
    SaslAuthenticateResponse,
);

impl ResponseErrors for DescribeUserScramCredentialsResponse {
    fn error_count(&self) -> u64 {
        code(self.error_code) + codes(self.results.iter().map(|result| &result.error_code))
    }
}

impl ResponseErrors for CreateAclsResponse {
    fn error_count(&self) -> u64 {
        codes(self.results.iter().map(|result| &result.error_code))
    }
}

impl ResponseErrors for DescribeAclsResponse {
    fn error_count(&self) -> u64 {
        code(self.error_code)
    }
}

impl ResponseErrors for DeleteAclsResponse {
    fn error_count(&self) -> u64 {
        codes(self.filter_results.iter().map(|result| &result.error_code))
    }
}

impl ResponseErrors for AlterUserScramCredentialsResponse {
    fn error_count(&self) -> u64 {
        codes(self.results.iter().map(|result| &result.error_code))
    }
}

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

impl ResponseErrors for AlterPartitionReassignmentsResponse {
    fn error_count(&self) -> u64 {
        let partitions = self
            .responses
            .iter()
            .flat_map(|topic| topic.partitions.iter().map(|p| &p.error_code));
        code(self.error_code) + codes(partitions)
    }
}

impl ResponseErrors for ElectLeadersResponse {
    fn error_count(&self) -> u64 {
        let partitions = self
            .replica_election_results
            .iter()
            .flat_map(|topic| topic.partition_result.iter().map(|p| &p.error_code));
        code(self.error_code) + codes(partitions)
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

impl ResponseErrors for WriteTxnMarkersResponse {
    fn error_count(&self) -> u64 {
        codes(
            self.markers
                .iter()
                .flat_map(|m| m.topics.iter())
                .flat_map(|t| t.partitions.iter().map(|p| &p.error_code)),
        )
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
        assert_eq!(response.error_count(), 2);
        assert_eq!(
            HeartbeatResponse::default()
                .with_error_code(25)
                .error_count(),
            1
        );
    }

    #[test]
    fn batched_add_partitions_counts_every_partition_result() {
        use kafka_protocol::messages::add_partitions_to_txn_response::{
            AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult,
            AddPartitionsToTxnTopicResult,
        };
        let topic = AddPartitionsToTxnTopicResult::default().with_results_by_partition(vec![
            AddPartitionsToTxnPartitionResult::default().with_partition_error_code(48),
            AddPartitionsToTxnPartitionResult::default(),
        ]);
        let response = AddPartitionsToTxnResponse::default().with_results_by_transaction(vec![
            AddPartitionsToTxnResult::default().with_topic_results(vec![topic]),
        ]);
        assert_eq!(response.error_count(), 1);
    }
}
