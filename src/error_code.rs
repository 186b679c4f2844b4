//! Every Kafka error code the broker answers with, by Kafka's names, in one
//! table that the handlers and the coordinators share, so that the engines can
//! build a response without the protocol crate. Values are from Apache Kafka's
//! `Errors` enum and must never change.

/// The request succeeded.
pub const NONE: i16 = 0;
/// An error the broker has no better code for.
pub const UNKNOWN_SERVER_ERROR: i16 = -1;
/// The requested offset is outside the partition's range.
pub const OFFSET_OUT_OF_RANGE: i16 = 1;
/// A record batch failed its CRC or is malformed.
pub const CORRUPT_MESSAGE: i16 = 2;
/// This broker has no such topic or partition.
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// The partition has no leader right now.
pub const LEADER_NOT_AVAILABLE: i16 = 5;
/// This broker is not the partition's leader (or no broker is).
pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
/// The request did not complete within its timeout.
pub const REQUEST_TIMED_OUT: i16 = 7;
/// acks=all refused before the append: the ISR is smaller than min.insync.replicas.
pub const NOT_ENOUGH_REPLICAS: i16 = 19;
/// acks=all: the records were written, but the ISR shrank below
/// min.insync.replicas before they were committed.
pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;
/// A record batch is larger than the topic allows.
pub const MESSAGE_TOO_LARGE: i16 = 10;
/// A request the broker's policy refuses (more partitions than a broker has
/// room for).
pub const POLICY_VIOLATION: i16 = 44;
/// The caller may not act on this topic (the authorizer denies it, or a
/// follower's fetch where replica fetches are not served).
pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
/// The caller may not take this cluster action (inter-broker requests where
/// they are not served, or an operation on the cluster the authorizer denies).
pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
/// The authorizer denies the caller this operation on the group.
pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
/// The authorizer denies the caller this operation on the transactional id.
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
/// An ACL API on a broker without an authorizer.
pub const SECURITY_DISABLED: i16 = 54;
/// The committed offset's metadata is longer than allowed.
pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
/// The coordinator is still loading its state.
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
/// The coordinator cannot answer right now.
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
/// This broker is not the coordinator of the group or transactional id.
pub const NOT_COORDINATOR: i16 = 16;
/// The topic name is invalid or the topic is internal.
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
/// The produce request's records are larger than allowed.
pub const RECORD_LIST_TOO_LARGE: i16 = 18;
/// An offset commit is larger than the offsets topic takes in one batch.
pub const INVALID_COMMIT_OFFSET_SIZE: i16 = 28;
/// The produce request's acks is not -1, 0 or 1.
pub const INVALID_REQUIRED_ACKS: i16 = 21;
/// The member's generation is not the group's.
pub const ILLEGAL_GENERATION: i16 = 22;
/// The member's protocols share none with the group's.
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
/// The group id is empty or invalid.
pub const INVALID_GROUP_ID: i16 = 24;
/// The group has no such member.
pub const UNKNOWN_MEMBER_ID: i16 = 25;
/// The session timeout is outside the broker's bounds.
pub const INVALID_SESSION_TIMEOUT: i16 = 26;
/// The group is rebalancing.
pub const REBALANCE_IN_PROGRESS: i16 = 27;
/// A record's timestamp is out of range.
pub const INVALID_TIMESTAMP: i16 = 32;
/// The broker does not support this version of the API.
pub const UNSUPPORTED_VERSION: i16 = 35;
/// A topic of that name exists already.
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
/// The number of partitions is invalid.
pub const INVALID_PARTITIONS: i16 = 37;
/// The replication factor is invalid.
pub const INVALID_REPLICATION_FACTOR: i16 = 38;
/// The replica assignment is invalid.
pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
/// A config name or value is invalid.
pub const INVALID_CONFIG: i16 = 40;
/// This broker is not the controller.
pub const NOT_CONTROLLER: i16 = 41;
/// The request is malformed or inconsistent.
pub const INVALID_REQUEST: i16 = 42;
/// The producer's sequence number is not the next one.
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
/// The producer's epoch is older than the current one.
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
/// The operation is not valid in the transaction's state.
pub const INVALID_TXN_STATE: i16 = 48;
/// The producer id does not belong to the transactional id.
pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
/// The transaction timeout is larger than the broker allows.
pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
/// Another operation on the transaction is still in progress.
pub const CONCURRENT_TRANSACTIONS: i16 = 51;
/// A newer transaction coordinator has taken over.
pub const TRANSACTION_COORDINATOR_FENCED: i16 = 52;
/// The operation was not attempted because another one in the batch failed.
pub const OPERATION_NOT_ATTEMPTED: i16 = 55;
/// The broker's storage failed.
pub const KAFKA_STORAGE_ERROR: i16 = 56;
/// The group is not empty.
pub const NON_EMPTY_GROUP: i16 = 68;
/// The group does not exist.
pub const GROUP_ID_NOT_FOUND: i16 = 69;
/// The fetch session does not exist.
pub const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
/// The fetch session's epoch is not the expected one.
pub const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
/// The request's leader epoch is older than the partition's.
pub const FENCED_LEADER_EPOCH: i16 = 74;
/// The request's leader epoch is newer than the partition's.
pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
/// A new leader's high watermark has not reached the start of its epoch yet
/// (KIP-207): ListOffsets for the latest offset must wait.
pub const OFFSET_NOT_AVAILABLE: i16 = 78;
/// The broker epoch is not the broker's current registration's.
pub const STALE_BROKER_EPOCH: i16 = 77;
/// The member must join again with the member id it was given.
pub const MEMBER_ID_REQUIRED: i16 = 79;
/// The group has as many members as it may.
pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
/// A newer member with the same group instance id has joined.
pub const FENCED_INSTANCE_ID: i16 = 82;
/// A member of the group is subscribed to the topic.
pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
/// A record in the batch is invalid.
pub const INVALID_RECORD: i16 = 87;
/// The partition holds an offset commit whose transaction is still open.
pub const UNSTABLE_OFFSET_COMMIT: i16 = 88;
/// A newer producer with the same transactional id has started.
pub const PRODUCER_FENCED: i16 = 90;
/// This broker has no topic with that id.
pub const UNKNOWN_TOPIC_ID: i16 = 100;
/// ElectLeaders: the preferred replica is not a live member of the ISR.
pub const PREFERRED_LEADER_NOT_AVAILABLE: i16 = 80;
/// ElectLeaders (unclean): no live replica can lead.
pub const ELIGIBLE_LEADERS_NOT_AVAILABLE: i16 = 83;
/// ElectLeaders: the partition already has the leader the election would give it.
pub const ELECTION_NOT_NEEDED: i16 = 84;
/// AlterPartitionReassignments: a cancellation of a partition that is not moving.
pub const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;
/// AlterPartition at a partition epoch the controller no longer has; an
/// UpdateFeatures the cluster cannot take.
pub const INVALID_UPDATE_VERSION: i16 = 95;
/// AlterPartition naming a member that may not join the ISR (KIP-903).
pub const INELIGIBLE_REPLICA: i16 = 107;
/// The transactional id does not exist.
pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;
/// A SaslHandshake named a mechanism the listener does not enable.
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
/// A SASL request out of turn (a SaslAuthenticate outside an exchange).
pub const ILLEGAL_SASL_STATE: i16 = 34;
/// A SASL exchange failed: a wrong password or an unknown user alike.
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
/// A user credential to describe or delete does not exist.
pub const RESOURCE_NOT_FOUND: i16 = 91;
/// A user named twice in one credential request.
pub const DUPLICATE_RESOURCE: i16 = 92;
/// A credential refused: too few or too many iterations, an empty name.
pub const UNACCEPTABLE_CREDENTIAL: i16 = 93;
