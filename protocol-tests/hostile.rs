//! Malformed and hostile frames: each closes the offending connection (as Kafka
//! does) and the broker keeps serving everyone else.

use crate::harness::{BinaryBroker, TestBroker, Wire};

/// ApiVersions v0 on a fresh connection answers: the broker is fine.
fn still_serves(addr: std::net::SocketAddr) {
    let mut wire = Wire::connect(addr);
    let frame = wire.request(18, 0, 42, false, &[]);
    assert_eq!(&frame[..6], &[0, 0, 0, 42, 0, 0]);
    // And a Metadata v1 for all topics.
    let frame = wire.request(3, 1, 43, false, &[0xff, 0xff, 0xff, 0xff]);
    assert_eq!(&frame[..4], &[0, 0, 0, 43]);
}

/// Regression: kafka-protocol 0.18 sizes a Vec from the array length before
/// decoding; these 18 bytes (Metadata v1, null client id, 2^31-1 topics) used to
/// abort the process with an allocation failure.
const HOSTILE_METADATA_V1: [u8; 18] = [
    0x00, 0x00, 0x00, 0x0e, // frame length 14
    0x00, 0x03, 0x00, 0x01, // Metadata v1
    0x00, 0x00, 0x00, 0x01, // correlation id
    0xff, 0xff, // null client id
    0x7f, 0xff, 0xff, 0xff, // topics: 2147483647 entries
];

#[test]
fn huge_array_length_does_not_take_the_process_down() {
    let mut broker = BinaryBroker::spawn();
    let mut wire = Wire::connect(broker.addr);
    wire.send_raw(&HOSTILE_METADATA_V1);
    assert!(wire.is_closed_by_broker());
    assert!(broker.is_alive(), "the broker process died");
    still_serves(broker.addr);
    assert!(broker.is_alive());
}

#[test]
fn huge_compact_array_length_does_not_take_the_process_down() {
    let mut broker = BinaryBroker::spawn();
    let mut wire = Wire::connect(broker.addr);
    // Metadata v12 (flexible): client id "t", no header tags, then a compact
    // topics array whose varint length is 2^32-1.
    let frame = crate::harness::request_frame(3, 12, 1, true, &[0xff, 0xff, 0xff, 0xff, 0x0f]);
    wire.send_frame(&frame);
    assert!(wire.is_closed_by_broker());
    assert!(broker.is_alive(), "the broker process died");
    still_serves(broker.addr);
}

#[test]
fn negative_and_oversized_lengths_close_the_connection() {
    let broker = TestBroker::start();
    for prefix in [
        [0xff, 0xff, 0xff, 0xff],
        [0x7f, 0xff, 0xff, 0xff],
        [0x10, 0x00, 0x00, 0x00],
    ] {
        let mut wire = broker.wire();
        wire.send_raw(&prefix);
        assert!(wire.is_closed_by_broker(), "prefix {prefix:?}");
    }
    still_serves(broker.addr);
}

#[test]
fn frames_shorter_than_a_header_close_the_connection() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    wire.send_frame(&[0x00, 0x12, 0x00]);
    assert!(wire.is_closed_by_broker());
    still_serves(broker.addr);
}

#[test]
fn unknown_api_key_closes_the_connection() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    wire.send_frame(&crate::harness::request_frame(9999, 0, 1, false, &[]));
    assert!(wire.is_closed_by_broker());
    // A known API we do not implement (e.g. 57, UpdateFeatures) is treated alike.
    let mut wire = broker.wire();
    wire.send_frame(&crate::harness::request_frame(57, 0, 1, true, &[]));
    assert!(wire.is_closed_by_broker());
    still_serves(broker.addr);
}

#[test]
fn unsupported_version_of_another_api_closes_the_connection() {
    let broker = TestBroker::start();
    let mut wire = broker.wire();
    wire.send_frame(&crate::harness::request_frame(3, 99, 1, true, &[]));
    assert!(wire.is_closed_by_broker());
    // Produce v2 is below our range (Kafka 4 removed it).
    let mut wire = broker.wire();
    wire.send_frame(&crate::harness::request_frame(0, 2, 1, false, &[]));
    assert!(wire.is_closed_by_broker());
    still_serves(broker.addr);
}

#[test]
fn truncated_body_and_garbage_close_the_connection() {
    let broker = TestBroker::start();
    // A length promising 100 bytes, then 10 bytes, then the client goes away.
    {
        let mut wire = broker.wire();
        let mut partial = vec![0, 0, 0, 100];
        partial.extend_from_slice(&[0x00, 0x03, 0x00, 0x01, 0, 0, 0, 1, 0xff, 0xff]);
        wire.send_raw(&partial);
    }
    // A Metadata v1 whose body is cut short.
    let mut wire = broker.wire();
    wire.send_frame(&crate::harness::request_frame(
        3,
        1,
        1,
        false,
        &[0x00, 0x00, 0x00, 0x02, 0x00],
    ));
    assert!(wire.is_closed_by_broker());
    // Random bytes.
    let mut wire = broker.wire();
    let mut garbage = vec![0x40, 0x00, 0x00, 0x00];
    garbage.extend((0..200u32).map(|i| (i.wrapping_mul(2654435761) >> 7) as u8));
    wire.send_frame(&crate::harness::request_frame(3, 1, 1, false, &garbage));
    assert!(wire.is_closed_by_broker());
    still_serves(broker.addr);
}
