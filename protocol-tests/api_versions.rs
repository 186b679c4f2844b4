//! ApiVersions, byte for byte: what we advertise is exactly the dispatch table,
//! the response header is v0 at every version, and a too-new version gets the
//! KIP-511 answer.

use crate::harness::{hex, split_v0, TestBroker};

/// Our API table as ApiVersions v0 encodes it: (key, min, max) per entry.
const TABLE_V0: &str = concat!(
    "0000002d ",       // 45 entries
    "0000 0003 000d ", // Produce 3-13
    "0001 0004 0012 ", // Fetch 4-18
    "0002 0000 000a ", // ListOffsets 0-10
    "0003 0000 000d ", // Metadata 0-13
    "0008 0000 0009 ", // OffsetCommit 0-9
    "0009 0000 0009 ", // OffsetFetch 0-9
    "000a 0000 0006 ", // FindCoordinator 0-6
    "000b 0000 0009 ", // JoinGroup 0-9
    "000c 0000 0004 ", // Heartbeat 0-4
    "000d 0000 0005 ", // LeaveGroup 0-5
    "000e 0000 0005 ", // SyncGroup 0-5
    "000f 0000 0006 ", // DescribeGroups 0-6
    "0010 0000 0005 ", // ListGroups 0-5
    "0012 0000 0004 ", // ApiVersions 0-4
    "0013 0000 0007 ", // CreateTopics 0-7
    "0014 0000 0006 ", // DeleteTopics 0-6
    "0015 0000 0002 ", // DeleteRecords 0-2
    "0016 0000 0005 ", // InitProducerId 0-5
    "0017 0000 0004 ", // OffsetForLeaderEpoch 0-4
    "0018 0000 0005 ", // AddPartitionsToTxn 0-5
    "0019 0000 0004 ", // AddOffsetsToTxn 0-4
    "001a 0000 0004 ", // EndTxn 0-4
    "001b 0001 0001 ", // WriteTxnMarkers 1
    "001c 0000 0004 ", // TxnOffsetCommit 0-4
    "0020 0000 0004 ", // DescribeConfigs 0-4
    "0021 0000 0002 ", // AlterConfigs 0-2
    "0025 0000 0003 ", // CreatePartitions 0-3
    "002a 0000 0002 ", // DeleteGroups 0-2
    "002b 0000 0002 ", // ElectLeaders 0-2
    "002c 0000 0001 ", // IncrementalAlterConfigs 0-1
    "002d 0000 0001 ", // AlterPartitionReassignments 0-1
    "002e 0000 0000 ", // ListPartitionReassignments 0
    "002f 0000 0000 ", // OffsetDelete 0
    "0039 0000 0001 ", // UpdateFeatures 0-1
    "003c 0000 0002 ", // DescribeCluster 0-2
    "003d 0000 0000 ", // DescribeProducers 0
    "0041 0000 0000 ", // DescribeTransactions 0
    "0042 0000 0001 ", // ListTransactions 0-1
    "0011 0000 0001 ", // SaslHandshake 0-1
    "001e 0000 0003 ", // CreateAcls 0-3
    "001d 0000 0003 ", // DescribeAcls 0-3
    "001f 0000 0003 ", // DeleteAcls 0-3
    "0024 0000 0002 ", // SaslAuthenticate 0-2
    "0032 0000 0000 ", // DescribeUserScramCredentials 0
    "0033 0000 0000 ", // AlterUserScramCredentials 0
);

#[test]
fn v0_lists_exactly_the_dispatch_table() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    let frame = wire.request(18, 0, 7, false, &[]);
    // correlation id, error, table
    let expected = hex(&format!("00000007 0000 {TABLE_V0}"));
    assert_eq!(frame, expected);
}

#[test]
fn v3_is_flexible_with_a_v0_header() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    // client_software_name "librdkafka", client_software_version "2.12.1", no tags
    let body = hex("0b6c696272646b61666b6107322e31322e3100");
    let frame = wire.request(18, 3, 9, true, &body);
    let (correlation_id, body) = split_v0(&frame);
    assert_eq!(correlation_id, 9);
    // error 0, compact array of 43-1 = 42 entries of key, min, max, tags
    let mut expected = hex("0000 2e");
    for entry in hex(TABLE_V0)[4..].chunks(6) {
        expected.extend_from_slice(entry);
        expected.push(0);
    }
    expected.extend_from_slice(&hex("00000000")); // throttle_time_ms
                                                  // Three tagged fields (KIP-584): SupportedFeatures (tag 0) and
                                                  // FinalizedFeatures (tag 2), each metadata.version, and the finalized
                                                  // features' epoch (tag 1): the log index of the record that set them,
                                                  // the cluster's first (2: raft's first entry is its membership).
    let metadata_version = hex("11 6d657461646174612e76657273696f6e");
    let mut tags = hex("03 00 17 02");
    tags.extend_from_slice(&metadata_version);
    tags.extend_from_slice(&hex("0007 001b 00")); // supported 7 (3.3-IV3) to 27 (4.1-IV1)
    tags.extend_from_slice(&hex("01 08 0000000000000002"));
    tags.extend_from_slice(&hex("02 17 02"));
    tags.extend_from_slice(&metadata_version);
    tags.extend_from_slice(&hex("001b 001b 00")); // finalized at 27, a new cluster's
    expected.extend_from_slice(&tags);
    assert_eq!(hex_of(body), hex_of(&expected));
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn too_new_version_gets_kip_511_fallback_in_v0() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    let frame = wire.request(18, 127, 3, true, &[]);
    // correlation 3, UNSUPPORTED_VERSION (35), one entry: ApiVersions 0-4
    assert_eq!(frame, hex("00000003 0023 00000001 0012 0000 0004"));
    // The connection stays usable: the client retries with a version we know.
    let retry = wire.request(18, 0, 4, false, &[]);
    assert_eq!(&retry[..6], &hex("00000004 0000")[..]);
}

#[test]
fn malformed_v3_body_gets_invalid_request() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    // A compact string length claiming 200 bytes with none following.
    let frame = wire.request(18, 3, 5, true, &hex("c901"));
    let (correlation_id, body) = split_v0(&frame);
    assert_eq!(correlation_id, 5);
    assert_eq!(&body[..2], &hex("002a")[..], "INVALID_REQUEST (42)");
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    let mut burst = Vec::new();
    for correlation_id in 0..50 {
        let frame = crate::harness::request_frame(18, 0, correlation_id, false, &[]);
        burst.extend_from_slice(&(frame.len() as i32).to_be_bytes());
        burst.extend_from_slice(&frame);
    }
    wire.send_raw(&burst);
    for correlation_id in 0..50 {
        let (answered, _) = split_v0(&wire.recv_frame()).to_owned();
        assert_eq!(answered, correlation_id);
    }
}
