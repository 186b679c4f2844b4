#!/usr/bin/env python3
"""Pure-Python Kafka clients (kafka-python and aiokafka) against the real
`sluice` binary: idempotent produce, committed and aborted transactions seen
through both isolation levels, a transactional consume-transform-produce
round whose offsets are committed through the transaction, and kafka-python
pinned to old brokers' protocol versions (`api_version=(1, 0, 0)` and
`(0, 10, 2)`), as applications written for those brokers still run it.

Then, on three nodes started as the Rust harness starts them
(compat/src/cluster.rs), the coordinators' failover: a kafka-python consumer
group resumes at its committed offsets, every record read exactly once, after
the node coordinating it (the leader of the group's `__consumer_offsets`
partition) is killed with SIGKILL; and an aiokafka transactional producer's
next transaction commits after its transaction coordinator's node is killed,
read_committed seeing each transaction's records exactly once.

And kafka-python over an SSL listener, with certificates the openssl command
line makes; confluent-kafka (librdkafka) and kafka-python over SASL_PLAINTEXT
and SASL_SSL with PLAIN and SCRAM, and users made with the admin API.

Usage: test_clients.py [PATH_TO_SLUICE]   (or SLUICE_BIN in the environment)

Standard library only, apart from the clients (installed by
scripts/install-test-deps.sh). Every wait has a deadline so that a broken broker
fails the run instead of hanging it; no assertion is about timing.
"""

import asyncio
import base64
import contextlib
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.protocol.metadata import CoordinatorType
import kafka
import kafka.errors

import aiokafka

# Generous: a deadline only turns a hang into a failure.
DEADLINE_S = 30.0
# Every request of every client gets an answer well within this on a healthy broker.
REQUEST_TIMEOUT_MS = 15_000


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(proc, port, deadline_s, what, output):
    """Waits until `proc` accepts connections on `port`; fails with its output
    if it exits first or `deadline_s` passes."""
    deadline = time.monotonic() + deadline_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{output()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port}:\n{output()}")
            time.sleep(0.02)


def read_log(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


class Broker:
    """One `sluice serve` process on a free port with its data in a temp dir."""

    def __init__(self, binary):
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="sluice-python-")
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log_path = os.path.join(self.dir, "broker.log")
        self.proc = None
        # What --listen gets, and any further flags.
        self.listen = self.bootstrap
        self.extra = []

    def start(self):
        env = dict(os.environ, SLUICE_LOG_LEVEL="warn")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [
                self.binary,
                "serve",
                "--listen",
                self.listen,
                "--data-dir",
                os.path.join(self.dir, "data"),
                # A new group rebalances at once instead of waiting 3 s for more members.
                "--profile",
                "dev",
                *self.extra,
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_listening(self.proc, self.port, DEADLINE_S, "broker", self.output)

    def output(self):
        return read_log(self.log_path)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log", None) is not None:
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def create_topics(broker, *names):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
    try:
        admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1) for name in names])
    finally:
        admin.close()


def describe_producers(broker, topic):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
    try:
        tp = TopicPartition(topic, 0)
        return admin.describe_producers([tp])[tp]
    finally:
        admin.close()


def read_to_end(broker, topic, isolation_level, partition=0):
    """Every record of `partition` from the start up to the partition's end
    (the high watermark, or the last stable offset under read_committed), as
    (offset, key, value) tuples in the order the consumer returned them."""
    tp = TopicPartition(topic, partition)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        isolation_level=isolation_level,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        records = []
        deadline = time.monotonic() + DEADLINE_S
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, (
                f"{topic} ({isolation_level}): stuck at {consumer.position(tp)} of {end}, got {records}"
            )
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend((r.offset, r.key, r.value) for r in batch)
        # Nothing past the end: the loop stopped at it, not after a lucky poll.
        assert consumer.position(tp) == end, (consumer.position(tp), end)
        return records
    finally:
        consumer.close()


def test_kafka_python_idempotent_producer(broker):
    topic = "py-idempotent"
    create_topics(broker, topic)
    n = 200
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        enable_idempotence=True,
        acks="all",
        linger_ms=5,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    try:
        futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0) for i in range(n)]
        producer.flush(timeout=DEADLINE_S)
        offsets = [f.get(timeout=DEADLINE_S).offset for f in futures]
    finally:
        producer.close(timeout=10)
    assert offsets == list(range(n)), offsets

    records = read_to_end(broker, topic, "read_uncommitted")
    assert records == [(i, b"k%d" % i, b"v%d" % i) for i in range(n)], records

    # The records carried a producer id and sequence numbers (the producer did
    # not quietly fall back to plain produce): DescribeProducers reports one
    # producer whose last sequence is that of record n-1, in no transaction.
    (state,) = describe_producers(broker, topic).active_producers
    assert state.producer_id >= 0 and state.producer_epoch >= 0, state
    assert state.last_sequence == n - 1, state
    assert state.current_transaction_start_offset == -1, state


def test_kafka_python_transactions(broker):
    topic = "py-txn"
    create_topics(broker, topic)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        transactional_id="py-txn-producer",
        enable_idempotence=True,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    try:
        producer.init_transactions()

        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, value=b"committed-%d" % i, partition=0)
        producer.commit_transaction()

        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, value=b"aborted-%d" % i, partition=0)
        # The aborted records must reach the log, so that read_committed has
        # something to filter out.
        producer.flush(timeout=DEADLINE_S)
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)

    # Offsets 0-2: the committed batch, 3: its COMMIT marker, 4-6: the aborted
    # batch, 7: its ABORT marker. Consumers never see the markers.
    committed = [(i, None, b"committed-%d" % i) for i in range(3)]
    aborted = [(4 + i, None, b"aborted-%d" % i) for i in range(3)]
    seen = read_to_end(broker, topic, "read_committed")
    assert seen == committed, seen
    seen = read_to_end(broker, topic, "read_uncommitted")
    assert seen == committed + aborted, seen
    # Both transactions are over: the partition has no open one.
    (state,) = describe_producers(broker, topic).active_producers
    assert state.current_transaction_start_offset == -1, state


async def consume_transform_produce(broker):
    source, sink, group = "py-ctp-in", "py-ctp-out", "py-ctp-group"
    tp_in = aiokafka.TopicPartition(source, 0)
    n = 10

    async with aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all") as plain:
        for i in range(n):
            await plain.send_and_wait(source, value=b"word-%d" % i, partition=0)

    consumer = aiokafka.AIOKafkaConsumer(
        source,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    producer = aiokafka.AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap,
        transactional_id="py-ctp-producer",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    await consumer.start()
    await producer.start()
    try:
        # Subscribed with a group: the getmany loop below also waits out the join.
        # The first few records only: the committed offset must be the one sent,
        # not the end of the partition.
        take = 6
        inputs = []
        while len(inputs) < take:
            got = await consumer.getmany(tp_in, timeout_ms=500, max_records=take - len(inputs))
            inputs.extend(got.get(tp_in, []))
        assert [(r.offset, r.value) for r in inputs] == [(i, b"word-%d" % i) for i in range(take)]

        async with producer.transaction():
            for r in inputs:
                await producer.send(sink, value=r.value.upper(), partition=0)
            await producer.send_offsets_to_transaction({tp_in: inputs[-1].offset + 1}, group)
    finally:
        await producer.stop()
        await consumer.stop()

    # The group's offset, read back by a new client of the group (OffsetFetch).
    checker = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    await checker.start()
    try:
        committed = await checker.committed(tp_in)
    finally:
        await checker.stop()
    return committed, take


def test_aiokafka_consume_transform_produce(broker):
    round_trip = asyncio.wait_for(consume_transform_produce(broker), timeout=2 * DEADLINE_S)
    committed, take = asyncio.run(round_trip)
    assert committed == take, (committed, take)
    # The output: exactly the transformed records, committed (markers not seen).
    out = read_to_end(broker, "py-ctp-out", "read_committed")
    assert out == [(i, None, b"WORD-%d" % i) for i in range(take)], out


# kafka-python pinned to an old broker's protocol: with `api_version` set it
# still asks ApiVersions, then clamps each API's version to its table of what
# that broker version served.
KAFKA_1_0 = (1, 0, 0)
KAFKA_0_10_2 = (0, 10, 2)


class RequestVersions(logging.Handler):
    """The (API, version) pairs kafka-python sends while installed, read from
    its connection's debug log, so that a test can say which versions it used."""

    PATTERN = re.compile(r"^(\w+?)Request\(version=(\d+)")

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.seen = set()
        self.logger = logging.getLogger("kafka.net.connection")

    def emit(self, record):
        if record.args and len(record.args) >= 3:
            match = self.PATTERN.match(str(record.args[2]))
            if match:
                self.seen.add((match.group(1), int(match.group(2))))

    def __enter__(self):
        self.before = (self.logger.level, self.logger.propagate)
        self.logger.setLevel(logging.DEBUG)
        # Only here: the client's debug lines are not the run's output.
        self.logger.propagate = False
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self)
        self.logger.setLevel(self.before[0])
        self.logger.propagate = self.before[1]

    def expect(self, *pairs):
        missing = [p for p in pairs if p not in self.seen]
        assert not missing, f"not sent: {missing}; sent: {sorted(self.seen)}"

    def summary(self):
        return ", ".join(f"{api} v{version}" for api, version in sorted(self.seen))


def pinned_admin(broker, api_version):
    return KafkaAdminClient(
        bootstrap_servers=broker.bootstrap,
        api_version=api_version,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )


def pinned_create_topic(broker, api_version, topic, configs=None):
    admin = pinned_admin(broker, api_version)
    try:
        admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1, "configs": configs or {}}})
    finally:
        admin.close()


def produce_timed(broker, topic, base_ms, n):
    """n records at base_ms, base_ms + 1000, ..., one request each, through a
    producer pinned to Kafka 1.0 (message format v2); returns their offsets."""
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        api_version=KAFKA_1_0,
        acks="all",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    try:
        offsets = []
        for i in range(n):
            future = producer.send(
                topic, key=b"k%d" % i, value=b"v%d" % i, partition=0, timestamp_ms=base_ms + 1000 * i
            )
            offsets.append(future.get(timeout=DEADLINE_S).offset)
        return offsets
    finally:
        producer.close(timeout=10)


def describe_topic_configs(admin, topic):
    result = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
    return result["topic"][topic]


def test_kafka_python_1_0_group_commit_and_resume(broker):
    topic, group = "py-1-0-group", "py-1-0-group"
    tp = TopicPartition(topic, 0)
    pinned_create_topic(broker, KAFKA_1_0, topic)
    base_ms = int(time.time() * 1000) - 3_600_000
    with RequestVersions() as sent:
        assert produce_timed(broker, topic, base_ms, 10) == list(range(10))

        def member():
            return KafkaConsumer(
                topic,
                bootstrap_servers=broker.bootstrap,
                api_version=KAFKA_1_0,
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                max_poll_records=4,
                request_timeout_ms=REQUEST_TIMEOUT_MS,
            )

        def take(consumer, count):
            records = []
            deadline = time.monotonic() + DEADLINE_S
            while len(records) < count:
                assert time.monotonic() < deadline, f"got {len(records)} of {count}: {records}"
                for batch in consumer.poll(timeout_ms=500, max_records=count - len(records)).values():
                    records.extend((r.offset, r.key, r.value) for r in batch)
            return records

        first = member()
        try:
            assert take(first, 4) == [(i, b"k%d" % i, b"v%d" % i) for i in range(4)]
            first.commit()  # the positions: offset 4
            assert first.committed(tp) == 4
        finally:
            first.close(autocommit=False)

        second = member()
        try:
            # Resumes where the first left off, with nothing consumed twice.
            assert take(second, 6) == [(i, b"k%d" % i, b"v%d" % i) for i in range(4, 10)]
            second.commit()
            assert second.committed(tp) == 10
        finally:
            second.close(autocommit=False)
    sent.expect(("Produce", 5), ("Fetch", 6), ("JoinGroup", 2), ("OffsetCommit", 3), ("OffsetFetch", 3))
    print(f"     kafka-python {kafka.__version__} at {KAFKA_1_0} sent {sent.summary()}")


def test_kafka_python_1_0_admin_and_offsets_for_times(broker):
    topic = "py-1-0-admin"
    tp = TopicPartition(topic, 0)
    with RequestVersions() as sent:
        pinned_create_topic(broker, KAFKA_1_0, topic, {"retention.ms": "3600000"})
        admin = pinned_admin(broker, KAFKA_1_0)
        try:
            configs = describe_topic_configs(admin, topic)
        finally:
            admin.close()
        # DescribeConfigs v0 says default or not with is_default.
        assert configs["cleanup.policy"]["value"] == "delete", configs["cleanup.policy"]
        assert configs["cleanup.policy"]["is_default"] is True, configs["cleanup.policy"]
        assert configs["retention.ms"]["value"] == "3600000", configs["retention.ms"]
        assert configs["retention.ms"]["is_default"] is False, configs["retention.ms"]

        base_ms = int(time.time() * 1000) - 3_600_000
        assert produce_timed(broker, topic, base_ms, 3) == [0, 1, 2]
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap, api_version=KAFKA_1_0, request_timeout_ms=REQUEST_TIMEOUT_MS
        )
        try:
            found = {}
            for label, ts in [
                ("before", base_ms - 60_000),
                ("first", base_ms),
                ("between", base_ms + 500),
                ("third", base_ms + 2000),
                ("after", base_ms + 60_000),
            ]:
                got = consumer.offsets_for_times({tp: ts})[tp]
                found[label] = None if got is None else (got.offset, got.timestamp)
            # Kafka's answer: the first record at or after the timestamp, with
            # that record's timestamp; none after the last.
            assert found == {
                "before": (0, base_ms),
                "first": (0, base_ms),
                "between": (1, base_ms + 1000),
                "third": (2, base_ms + 2000),
                "after": None,
            }, found
            assert consumer.beginning_offsets([tp]) == {tp: 0}
            assert consumer.end_offsets([tp]) == {tp: 3}
        finally:
            consumer.close()
    sent.expect(("CreateTopics", 2), ("DescribeConfigs", 0), ("ListOffsets", 2))
    print(f"     kafka-python {kafka.__version__} at {KAFKA_1_0} sent {sent.summary()}")


def test_kafka_python_0_10_2_admin_commits_offsets(broker):
    """At (0, 10, 2) kafka-python produces with Produce v2 and fetches with
    Fetch v3 (message format v1), which the broker does not serve: everything
    else it does here, with records written by a (1, 0, 0) producer."""
    topic, group = "py-0-10-2", "py-0-10-2-group"
    doomed = "py-0-10-2-deleted"
    tp = TopicPartition(topic, 0)
    with RequestVersions() as sent:
        admin = pinned_admin(broker, KAFKA_0_10_2)
        try:
            admin.create_topics({
                topic: {"num_partitions": 1, "replication_factor": 1},
                doomed: {"num_partitions": 2, "replication_factor": 1},
            })
            try:
                admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
            except kafka.errors.TopicAlreadyExistsError:
                pass
            else:
                raise AssertionError(f"creating {topic} twice succeeded")
            # Kafka 0.10.2 had no DescribeConfigs: the client refuses it itself.
            try:
                describe_topic_configs(admin, topic)
            except kafka.errors.IncompatibleBrokerVersion:
                pass
            else:
                raise AssertionError("DescribeConfigs was sent at (0, 10, 2)")
            admin.delete_topics([doomed])
            deadline = time.monotonic() + DEADLINE_S
            while doomed in admin.list_topics():
                assert time.monotonic() < deadline, f"{doomed} still listed after DeleteTopics"
                time.sleep(0.05)
        finally:
            admin.close()

        base_ms = int(time.time() * 1000) - 3_600_000
        assert produce_timed(broker, topic, base_ms, 3) == [0, 1, 2]

        def member():
            return KafkaConsumer(
                bootstrap_servers=broker.bootstrap,
                api_version=KAFKA_0_10_2,
                group_id=group,
                enable_auto_commit=False,
                request_timeout_ms=REQUEST_TIMEOUT_MS,
            )

        consumer = member()
        try:
            consumer.assign([tp])
            assert consumer.committed(tp) is None
            assert consumer.beginning_offsets([tp]) == {tp: 0}
            assert consumer.end_offsets([tp]) == {tp: 3}
            got = consumer.offsets_for_times({tp: base_ms + 500})[tp]
            assert (got.offset, got.timestamp) == (1, base_ms + 1000), got
            consumer.commit({tp: OffsetAndMetadata(2, "two", -1)})
            assert consumer.committed(tp, metadata=True).offset == 2
        finally:
            consumer.close(autocommit=False)
        # A new client of the group reads the commit back.
        consumer = member()
        try:
            consumer.assign([tp])
            committed = consumer.committed(tp, metadata=True)
            assert (committed.offset, committed.metadata) == (2, "two"), committed
        finally:
            consumer.close(autocommit=False)
    sent.expect(("CreateTopics", 1), ("DeleteTopics", 0), ("ListOffsets", 1), ("OffsetCommit", 2), ("OffsetFetch", 2))
    print(f"     kafka-python {kafka.__version__} at {KAFKA_0_10_2} sent {sent.summary()}")


def test_kafka_python_0_10_2_produce_fails_instead_of_hanging(broker):
    """Produce v2 (message format v1): the broker closes the connection, and
    the send fails once delivery_timeout_ms is spent, with nothing written."""
    topic = "py-0-10-2-produce"
    tp = TopicPartition(topic, 0)
    pinned_create_topic(broker, KAFKA_1_0, topic)
    delivery_timeout_ms = 3_000
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        api_version=KAFKA_0_10_2,
        acks="all",
        request_timeout_ms=delivery_timeout_ms - 1_000,
        delivery_timeout_ms=delivery_timeout_ms,
        max_block_ms=delivery_timeout_ms,
    )
    started = time.monotonic()
    with RequestVersions() as sent:
        try:
            future = producer.send(topic, value=b"refused", partition=0)
            try:
                metadata = future.get(timeout=DEADLINE_S)
            except kafka.errors.KafkaError as error:
                # The record's own failure, not get()'s wait running out.
                assert future.is_done and future.failed(), f"still pending at the deadline: {error!r}"
                print(f"     produce at {KAFKA_0_10_2} failed as expected after "
                      f"{time.monotonic() - started:.1f}s: {error!r}")
            else:
                raise AssertionError(f"Produce v2 was accepted: {metadata}")
        finally:
            producer.close(timeout=10)
    sent.expect(("Produce", 2))
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, api_version=KAFKA_1_0, request_timeout_ms=REQUEST_TIMEOUT_MS
    )
    try:
        assert consumer.end_offsets([tp]) == {tp: 0}
    finally:
        consumer.close()


TESTS = [
    test_kafka_python_idempotent_producer,
    test_kafka_python_transactions,
    test_aiokafka_consume_transform_produce,
    test_kafka_python_1_0_group_commit_and_resume,
    test_kafka_python_1_0_admin_and_offsets_for_times,
    test_kafka_python_0_10_2_admin_commits_offsets,
    test_kafka_python_0_10_2_produce_fails_instead_of_hanging,
]


# Three nodes: the same binary as three voters on loopback, started as the
# Rust harness (compat/src/cluster.rs) starts them, for a coordinator's
# failover: the node leading a group's or a transaction's partition of its
# internal topic is killed with SIGKILL, and the clients go on at the survivors.

# Short sessions and lag, so that a killed node is fenced and dropped from the
# ISR within the tests' patience (FAST_CLUSTER of compat/tests/compat/replication.rs).
FAST_CLUSTER = [
    "--broker-session-timeout-ms",
    "3000",
    "--broker-heartbeat-interval-ms",
    "500",
    "--replica-lag-time-max-ms",
    "4000",
    "--leader-imbalance-check-interval-seconds",
    "1",
]
# A voter waits for the quorum, a broker to be unfenced (NODE_START_WAIT_MS).
NODE_START_DEADLINE_S = 60.0

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
# offsets.topic.num.partitions and transaction.state.log.num.partitions.
INTERNAL_TOPIC_PARTITIONS = 50


def java_hash_code(text):
    """Java's String.hashCode: over UTF-16 code units, wrapping at 32 bits."""
    units = text.encode("utf-16-le")
    code = 0
    for i in range(0, len(units), 2):
        code = (code * 31 + int.from_bytes(units[i:i + 2], "little")) & 0xFFFFFFFF
    return code - (1 << 32) if code >= 1 << 31 else code


def internal_partition(key):
    """The partition of its internal topic that holds a group id or a
    transactional id: Kafka's `Utils.abs(key.hashCode) % 50` (group_partition
    and txn_partition of src/placement.rs), Utils.abs mapping i32::MIN to 0.
    Its leader is the key's coordinator."""
    code = java_hash_code(key)
    return (0 if code == -(1 << 31) else abs(code)) % INTERNAL_TOPIC_PARTITIONS


# The values src/placement.rs checks against Java's.
assert java_hash_code("hello") == 99_162_322
assert internal_partition("polygenelubricants") == 0


class ClusterNode:
    """One `sluice serve` voter: its own Kafka port, controller port, data dir
    and log file (its stdout and stderr)."""

    def __init__(self, binary, node_id, root):
        self.binary = binary
        self.node_id = node_id
        self.kafka_port = free_port()
        self.controller_port = free_port()
        self.bootstrap = f"127.0.0.1:{self.kafka_port}"
        self.data_dir = os.path.join(root, f"node-{node_id}")
        self.log_path = os.path.join(root, f"node-{node_id}.log")
        self.proc = None
        self.log = None
        # What --listen gets, and any further flags.
        self.listen = self.bootstrap
        self.extra = []

    def voter(self):
        return f"{self.node_id}@127.0.0.1:{self.controller_port}"

    def spawn(self, voters):
        assert self.proc is None, f"node {self.node_id} is running"
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [
                self.binary,
                "serve",
                "--node-id",
                str(self.node_id),
                "--listen",
                self.listen,
                "--data-dir",
                self.data_dir,
                "--controller-listen",
                f"127.0.0.1:{self.controller_port}",
                "--controller-voters",
                voters,
                *FAST_CLUSTER,
                *self.extra,
            ],
            env=dict(os.environ, SLUICE_LOG_LEVEL="warn"),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_listening(self):
        """Waits until the node accepts connections on its Kafka port, which it
        opens once it has registered and been unfenced (`ClusterNode::wait_serving`
        of compat/src/cluster.rs)."""
        wait_listening(self.proc, self.kafka_port, NODE_START_DEADLINE_S, f"node {self.node_id}", self.output)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        """SIGKILL: no flush, no shutdown."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        if self.log is not None:
            self.log.close()
            self.log = None

    def output(self):
        return read_log(self.log_path)


class Cluster:
    """Three voters (node ids 1..3) with their data in one temp dir."""

    def __init__(self, binary, configure=None):
        self.root = tempfile.mkdtemp(prefix="sluice-python-cluster-")
        self.nodes = [ClusterNode(binary, node_id, self.root) for node_id in (1, 2, 3)]
        self.voters = ",".join(node.voter() for node in self.nodes)
        # configure(node) may set a node's listeners and flags; brokers(node)
        # then says how many brokers the node's own metadata lists.
        self.brokers = lambda node: len(metadata(node.bootstrap, [])["brokers"])
        if configure is not None:
            for node in self.nodes:
                configure(node)

    def start(self):
        for node in self.nodes:
            node.spawn(self.voters)
        for node in self.nodes:
            node.wait_listening()
        # Each node's own metadata lists all three (the images agree).
        for node in self.nodes:
            eventually(lambda: self.brokers(node) == 3,
                       f"node {node.node_id} listing three brokers")

    def restart(self):
        """SIGKILL every node, then start them all again on their data."""
        for node in self.nodes:
            node.kill9()
        self.start()

    @property
    def bootstrap(self):
        """The running nodes' addresses, as a bootstrap list."""
        return ",".join(node.bootstrap for node in self.nodes if node.running())

    def node(self, node_id):
        (node,) = [n for n in self.nodes if n.node_id == node_id]
        return node

    def kill9(self, node_id):
        self.node(node_id).kill9()

    def output(self):
        return "\n".join(f"--- node {node.node_id} output ---\n{node.output()}" for node in self.nodes)

    def stop(self):
        for node in self.nodes:
            node.kill9()
        shutil.rmtree(self.root, ignore_errors=True)


def eventually(check, what, deadline_s=DEADLINE_S):
    """Waits until check() holds; returns its last value."""
    deadline = time.monotonic() + deadline_s
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.2)


def retrying(what, call, deadline_s=DEADLINE_S):
    """call(), again after each retriable error (NotCoordinator,
    CoordinatorLoadInProgress, CoordinatorNotAvailable, NodeNotReady, a
    client's own timeout...) until the deadline, as clients retry them."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return call()
        except kafka.errors.KafkaError as error:
            if not error.retriable:
                raise
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still {error!r} at the deadline") from error
        time.sleep(0.1)


def metadata(bootstrap, topics):
    """A Metadata request through `bootstrap` for `topics` (None: all), retried
    after retriable errors: {'brokers': [...], 'topics': [...]} as kafka-python
    decodes the answer."""

    def ask():
        # The admin client's own Metadata call: describe_topics leaves the brokers out.
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
        try:
            return admin._manager.run(admin._get_cluster_metadata, topics)
        finally:
            admin.close()

    return retrying(f"Metadata through {bootstrap}", ask)


def describe_partitions(bootstrap, topic):
    """(partition, leader, sorted ISR) of each partition of `topic`, by partition."""
    (described,) = [t for t in metadata(bootstrap, [topic])["topics"] if t["name"] == topic]
    return sorted(
        (p["partition_index"], p["leader_id"], sorted(p["isr_nodes"])) for p in described["partitions"]
    )


def wait_in_sync(bootstrap, topic, count):
    """Waits until `topic` has `count` partitions, each led and with all three
    replicas in sync."""

    def in_sync():
        described = describe_partitions(bootstrap, topic)
        return len(described) == count and all(leader >= 0 and len(isr) == 3 for _, leader, isr in described)

    eventually(in_sync, f"{count} partitions of {topic} with three replicas in sync", 2 * DEADLINE_S)


def leader_of(bootstrap, topic, partition):
    (leader,) = [leader for p, leader, _ in describe_partitions(bootstrap, topic) if p == partition]
    return leader


def find_coordinator(bootstrap, key, key_type):
    """The node FindCoordinator names for a group (key_type GROUP) or a
    transactional id (TRANSACTION), asked through `bootstrap`."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
    try:
        return admin._manager.run(admin._find_coordinator_ids, [key], key_type)[key]
    finally:
        admin.close()


def coordinator_of(cluster, topic, key, key_type):
    """The node that coordinates `key`: the leader of its partition of `topic`,
    which FindCoordinator names too (the offsets or the transaction state
    topic is created by the first FindCoordinator). Waits until all of the
    topic's replicas are in sync first, so that killing the coordinator loses
    nothing the cluster acknowledged."""
    bootstrap = cluster.bootstrap
    retrying(f"FindCoordinator for {key}", lambda: find_coordinator(bootstrap, key, key_type))
    wait_in_sync(bootstrap, topic, INTERNAL_TOPIC_PARTITIONS)
    partition = internal_partition(key)

    def agreed():
        leader = leader_of(bootstrap, topic, partition)
        named = retrying(f"FindCoordinator for {key}", lambda: find_coordinator(bootstrap, key, key_type))
        return leader if leader >= 0 and leader == named else None

    # Both settle on the same node once the partition's leadership does.
    return eventually(agreed, f"FindCoordinator for {key} naming the leader of {topic}-{partition}")


def kill_coordinator(cluster, topic, key, key_type):
    """Kills -9 the node that coordinates `key` and waits until the survivors
    name another leader of its partition; returns the survivors' bootstrap list."""
    victim = coordinator_of(cluster, topic, key, key_type)
    partition = internal_partition(key)
    print(f"     killing node {victim} (kill -9), the coordinator of {key} (leader of {topic}-{partition})")
    cluster.kill9(victim)
    survivors = cluster.bootstrap
    eventually(
        lambda: leader_of(survivors, topic, partition) not in (-1, victim),
        f"{topic}-{partition} led by a node other than {victim}",
        2 * DEADLINE_S,
    )
    return survivors


CLUSTER_PARTITIONS = 3


def create_replicated_topic(cluster, topic):
    """`topic` with three partitions on all three nodes, min.insync.replicas=2
    (so that acks=all goes on with one node down), every replica in sync."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
    try:
        admin.create_topics({
            topic: {
                "num_partitions": CLUSTER_PARTITIONS,
                "replication_factor": 3,
                "configs": {"min.insync.replicas": "2"},
            }
        })
    finally:
        admin.close()
    wait_in_sync(cluster.bootstrap, topic, CLUSTER_PARTITIONS)


def test_kafka_python_group_resumes_after_its_coordinator_is_killed(cluster):
    topic, group = "py-cluster-group-in", "py-cluster-group"
    create_replicated_topic(cluster, topic)
    per_partition = 20
    total = CLUSTER_PARTITIONS * per_partition
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap,
        enable_idempotence=True,
        acks="all",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    try:
        futures = [
            producer.send(topic, value=b"p%d-%d" % (p, n), partition=p)
            for p in range(CLUSTER_PARTITIONS)
            for n in range(per_partition)
        ]
        producer.flush(timeout=DEADLINE_S)
        written = sorted((m.partition, m.offset) for m in (f.get(timeout=DEADLINE_S) for f in futures))
    finally:
        producer.close(timeout=10)
    assert written == [(p, n) for p in range(CLUSTER_PARTITIONS) for n in range(per_partition)], written
    tps = [TopicPartition(topic, p) for p in range(CLUSTER_PARTITIONS)]

    def member(bootstrap):
        return KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        )

    def take(consumer, count):
        """Polls until `count` records came: (partition, offset, value) each."""
        records = []
        deadline = time.monotonic() + 2 * DEADLINE_S
        while len(records) < count:
            assert time.monotonic() < deadline, f"got {len(records)} of {count}: {records}"
            for batch in consumer.poll(timeout_ms=500, max_records=count - len(records)).values():
                records.extend((r.partition, r.offset, r.value) for r in batch)
        return records

    def committed(consumer):
        """The group's committed offset of each partition (None: never committed),
        asked of its coordinator wherever it is now."""
        return retrying(
            f"OffsetFetch of {group}",
            lambda: {tp.partition: consumer.committed(tp, timeout_ms=REQUEST_TIMEOUT_MS) for tp in tps},
        )

    # The first member's JoinGroup creates the offsets topic (FindCoordinator).
    first = member(cluster.bootstrap)
    try:
        before = take(first, total // 2)
        retrying(f"OffsetCommit of {group}", lambda: first.commit(timeout_ms=REQUEST_TIMEOUT_MS))
        kept = committed(first)
    finally:
        first.close(autocommit=False)
    # The commit is of the positions: each partition's next record to read.
    for p in range(CLUSTER_PARTITIONS):
        read = [offset for partition, offset, _ in before if partition == p]
        assert (kept[p] or 0) == len(read), (p, kept, read)

    survivors = kill_coordinator(cluster, OFFSETS_TOPIC, group, CoordinatorType.GROUP)

    second = member(survivors)
    try:
        assert committed(second) == kept, "the new coordinator has every committed offset"
        after = take(second, total - len(before))
        for partition, offset, _ in after:
            start = kept[partition] or 0
            assert offset >= start, f"partition {partition} read again from {offset}, below its committed {start}"
        # Read to the end of each partition, and no further.
        positions = {tp.partition: second.position(tp) for tp in tps}
        assert positions == {p: per_partition for p in range(CLUSTER_PARTITIONS)}, positions
        retrying(f"OffsetCommit of {group}", lambda: second.commit(timeout_ms=REQUEST_TIMEOUT_MS))
        assert committed(second) == {p: per_partition for p in range(CLUSTER_PARTITIONS)}
    finally:
        second.close(autocommit=False)
    # Every record read exactly once across both members.
    every = sorted(before + after)
    assert every == [(p, n, b"p%d-%d" % (p, n)) for p in range(CLUSTER_PARTITIONS) for n in range(per_partition)], every


async def one_transaction(bootstrap, transactional_id, topic, label):
    """A new producer of `transactional_id` (its InitProducerId fences any
    earlier instance) commits one transaction: three records "<label>-p<p>-<n>"
    on each partition of `topic`. aiokafka itself retries NotCoordinator,
    CoordinatorLoadInProgress and CoordinatorNotAvailable; a retriable error it
    raises all the same is retried here with a fresh producer until the
    deadline (what the failed attempt left open is aborted by the next one's
    InitProducerId, and read_committed never shows it)."""
    deadline = time.monotonic() + 2 * DEADLINE_S
    while True:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            transactional_id=transactional_id,
            acks="all",
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        )
        try:
            await producer.start()
            await producer.begin_transaction()
            sent = [
                await producer.send(topic, value=b"%s-p%d-%d" % (label, p, n), partition=p)
                for p in range(CLUSTER_PARTITIONS)
                for n in range(3)
            ]
            await producer.commit_transaction()
            # Every record of the transaction was written.
            for record in await asyncio.gather(*sent):
                assert record.topic == topic, record
            return
        except aiokafka.errors.KafkaError as error:
            if not error.retriable or time.monotonic() > deadline:
                raise
            print(f"     transaction {label.decode()}: retrying after {error!r}")
        finally:
            await producer.stop()
        await asyncio.sleep(0.1)


def test_aiokafka_transaction_commits_after_its_coordinator_is_killed(cluster):
    topic, transactional_id = "py-cluster-txn-out", "py-cluster-txn"
    create_replicated_topic(cluster, topic)

    def transaction(label):
        run = one_transaction(cluster.bootstrap, transactional_id, topic, label)
        asyncio.run(asyncio.wait_for(run, timeout=3 * DEADLINE_S))

    # The first producer's FindCoordinator creates the transaction state topic.
    transaction(b"first")
    kill_coordinator(cluster, TRANSACTION_STATE_TOPIC, transactional_id, CoordinatorType.TRANSACTION)
    # At the survivors: the next leader of the id's partition coordinates it.
    transaction(b"second")
    for p in range(CLUSTER_PARTITIONS):
        # Each transaction's records once, in order, and nothing else (the
        # COMMIT markers, and any marker the second producer's InitProducerId
        # wrote, are never seen).
        seen = read_to_end(cluster, topic, "read_committed", partition=p)
        values = [value for _, _, value in seen]
        wanted = [b"%s-p%d-%d" % (label, p, n) for label in (b"first", b"second") for n in range(3)]
        assert values == wanted, (p, seen)


CLUSTER_TESTS = [
    test_kafka_python_group_resumes_after_its_coordinator_is_killed,
    test_aiokafka_transaction_commits_after_its_coordinator_is_killed,
]


def make_tls_files(directory):
    """A CA and a broker certificate for localhost and 127.0.0.1 it signed,
    made with the openssl command line; returns (keystore, CA file): the
    broker's key and chain in one PEM file, as Kafka's PEM keystore."""
    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=directory)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=Sluice test CA", "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
            "-keyout", "broker.key", "-out", "broker.csr")
    with open(os.path.join(directory, "san.ext"), "w") as ext:
        ext.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "broker.crt")
    keystore = os.path.join(directory, "keystore.pem")
    with open(keystore, "w") as out:
        for part in ("broker.key", "broker.crt", "ca.pem"):
            with open(os.path.join(directory, part)) as f:
                out.write(f.read())
    return keystore, os.path.join(directory, "ca.pem")


def test_kafka_python_over_an_ssl_listener(binary):
    """kafka-python with security_protocol=SSL, checking the broker's
    certificate and host name against the CA, produces and consumes on an SSL
    listener; the same client without TLS gets no answer there."""
    directory = tempfile.mkdtemp(prefix="sluice-ssl-")
    keystore, ca = make_tls_files(directory)
    broker = Broker(binary)
    broker.listen = f"SSL://127.0.0.1:{broker.port}"
    broker.extra = ["--ssl-keystore-location", keystore]
    try:
        broker.start()
        bootstrap = f"localhost:{broker.port}"
        ssl = dict(security_protocol="SSL", ssl_cafile=ca, ssl_check_hostname=True)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS, **ssl)
        admin.create_topics([NewTopic("over-tls", 1, 1)])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **ssl)
        producer.send("over-tls", b"encrypted").get(timeout=DEADLINE_S)
        producer.close()
        consumer = KafkaConsumer(
            "over-tls", bootstrap_servers=bootstrap, auto_offset_reset="earliest",
            consumer_timeout_ms=int(DEADLINE_S * 1000), **ssl)
        first = next(iter(consumer), None)
        consumer.close()
        assert first is not None and first.value == b"encrypted", first
        # A plaintext ApiVersions on the SSL port: no Kafka answer (at most a
        # TLS alert), then the connection closes.
        with socket.create_connection(("127.0.0.1", broker.port), timeout=DEADLINE_S) as plain:
            plain.sendall(bytes([0, 0, 0, 11, 0, 18, 0, 0, 0, 0, 0, 1, 0, 1]) + b"t")
            answer = b""
            while chunk := plain.recv(4096):
                answer += chunk
        kafka_answer = len(answer) >= 8 and answer[4:8] == (1).to_bytes(4, "big")
        assert not kafka_answer, answer
    except Exception:
        print(broker.output())
        raise
    finally:
        broker.stop()
        shutil.rmtree(directory, ignore_errors=True)


USERS = [
    "SCRAM-SHA-256=[name=alice,password=alice-secret]",
    "SCRAM-SHA-512=[name=alice,password=alice-secret]",
]


@contextlib.contextmanager
def sasl_broker(binary):
    """A broker with a SASL_PLAINTEXT and a SASL_SSL listener and alice
    created at start, as (broker, {protocol: port}, CA file); its output is
    printed if the test fails, and it is stopped and removed after."""
    directory = tempfile.mkdtemp(prefix="sluice-sasl-")
    broker = Broker(binary)
    try:
        keystore, ca = make_tls_files(directory)
        ports = {"SASL_PLAINTEXT": broker.port, "SASL_SSL": free_port()}
        broker.listen = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
        broker.extra = ["--ssl-keystore-location", keystore]
        for user in USERS:
            broker.extra += ["--add-scram", user]
        broker.start()
        yield broker, ports, ca
    except Exception:
        print(broker.output())
        raise
    finally:
        broker.stop()
        shutil.rmtree(directory, ignore_errors=True)


def confluent_config(ports, ca, protocol, mechanism, user, password):
    config = {
        "bootstrap.servers": f"127.0.0.1:{ports[protocol]}",
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if protocol == "SASL_SSL":
        config["ssl.ca.location"] = ca
    return config


def confluent_round_trip(config, topic, count=10):
    """Produces `count` records to `topic` and reads them back in a group."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic as ConfluentNewTopic

    admin = AdminClient(config)
    for future in admin.create_topics([ConfluentNewTopic(topic, 1, 1)]).values():
        future.result(timeout=DEADLINE_S)
    failures = []
    producer = confluent_kafka.Producer(dict(config, acks="all"))
    for n in range(count):
        producer.produce(topic, f"{topic}-{n}".encode(),
                         on_delivery=lambda err, _msg: err and failures.append(err))
    assert producer.flush(DEADLINE_S) == 0, "records left unsent"
    assert not failures, failures
    consumer = confluent_kafka.Consumer(dict(
        config, **{"group.id": f"{topic}-group", "auto.offset.reset": "earliest",
                   "enable.auto.commit": False}))
    consumer.subscribe([topic])
    seen = []
    deadline = time.monotonic() + DEADLINE_S
    while len(seen) < count and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        assert message.error() is None, message.error()
        seen.append(message.value().decode())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert seen == [f"{topic}-{n}" for n in range(count)], seen


def authentication_error(config):
    """The error librdkafka reports for `config`'s login, within the deadline."""
    import confluent_kafka

    errors = []
    producer = confluent_kafka.Producer(dict(config, error_cb=errors.append))
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        producer.poll(0.2)
        failed = [e for e in errors if e.code() == confluent_kafka.KafkaError._AUTHENTICATION]
        if failed:
            return failed[0].str()
    raise AssertionError(f"no authentication error; errors: {errors}")


def test_confluent_kafka_sasl_plain_and_scram_over_plaintext_and_tls(binary):
    """librdkafka (confluent-kafka) logs in with PLAIN, SCRAM-SHA-256 and
    SCRAM-SHA-512 on SASL_PLAINTEXT and SASL_SSL, produces and consumes in a
    group; a wrong password gets Kafka's message; a user made with the
    AdminClient's AlterUserScramCredentials logs in, and is described."""
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)

    with sasl_broker(binary) as (_, ports, ca):
        for protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
                config = confluent_config(ports, ca, protocol, mechanism, "alice", "alice-secret")
                confluent_round_trip(config, f"{protocol}-{mechanism}".lower().replace("_", "-"))
        wrong = confluent_config(ports, ca, "SASL_SSL", "SCRAM-SHA-512", "alice", "wrong")
        message = authentication_error(wrong)
        assert ("Authentication failed during authentication due to invalid credentials "
                "with SASL mechanism SCRAM-SHA-512") in message, message

        admin = AdminClient(confluent_config(ports, ca, "SASL_SSL", "SCRAM-SHA-512",
                                             "alice", "alice-secret"))
        upsert = UserScramCredentialUpsertion(
            "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"dave-secret")
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=DEADLINE_S)
        described = admin.describe_user_scram_credentials(["dave"])["dave"].result(timeout=DEADLINE_S)
        infos = described.scram_credential_infos
        assert [(i.mechanism, i.iterations) for i in infos] == \
            [(ScramMechanism.SCRAM_SHA_256, 8192)], infos
        dave = confluent_config(ports, ca, "SASL_PLAINTEXT", "SCRAM-SHA-256", "dave", "dave-secret")
        confluent_round_trip(dave, "made-by-dave")


def test_kafka_python_scram_over_sasl_ssl(binary):
    """kafka-python logs in with SCRAM-SHA-512 over SASL_SSL and with PLAIN
    over SASL_PLAINTEXT, produces and consumes."""
    with sasl_broker(binary) as (_, ports, ca):
        for protocol, mechanism in (("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN")):
            login = dict(bootstrap_servers=f"127.0.0.1:{ports[protocol]}",
                         security_protocol=protocol, sasl_mechanism=mechanism,
                         sasl_plain_username="alice", sasl_plain_password="alice-secret")
            if protocol == "SASL_SSL":
                login["ssl_cafile"] = ca
            topic = f"kafka-python-{mechanism.lower()}"
            admin = KafkaAdminClient(request_timeout_ms=REQUEST_TIMEOUT_MS, **login)
            admin.create_topics([NewTopic(topic, 1, 1)])
            admin.close()
            producer = KafkaProducer(acks="all", **login)
            producer.send(topic, b"authenticated").get(timeout=DEADLINE_S)
            producer.close()
            consumer = KafkaConsumer(topic, auto_offset_reset="earliest",
                                     consumer_timeout_ms=int(DEADLINE_S * 1000), **login)
            first = next(iter(consumer), None)
            consumer.close()
            assert first is not None and first.value == b"authenticated", first


# Each on a broker of its own, started with its own listeners.
def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def es256_signer(directory):
    """An ES256 key made with openssl, as (JWKS text, sign(bytes) -> JWS
    signature bytes): the signature is openssl's DER turned into JWS's
    fixed-size R || S."""
    key = os.path.join(directory, "issuer.key")
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key],
                   check=True, capture_output=True)
    public = subprocess.run(["openssl", "ec", "-in", key, "-pubout", "-outform", "DER"],
                            check=True, capture_output=True).stdout
    point = public[-64:]
    jwks = json.dumps({"keys": [{"kty": "EC", "crv": "P-256", "kid": "issuer-1", "alg": "ES256",
                                 "use": "sig", "x": b64url(point[:32]), "y": b64url(point[32:])}]})

    def sign(data):
        der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=data,
                             check=True, capture_output=True).stdout
        # SEQUENCE { INTEGER r, INTEGER s }, short lengths for P-256.
        at, out = 2, b""
        for _ in range(2):
            assert der[at] == 0x02, der
            length = der[at + 1]
            out += der[at + 2:at + 2 + length].lstrip(b"\0").rjust(32, b"\0")
            at += 2 + length
        return out

    return jwks, sign


def signed_token(sign, claims):
    header = b64url(json.dumps({"alg": "ES256", "typ": "JWT", "kid": "issuer-1"}).encode())
    payload = b64url(json.dumps(claims).encode())
    signing_input = f"{header}.{payload}".encode()
    return f"{header}.{payload}.{b64url(sign(signing_input))}"


@contextlib.contextmanager
def https_server(keystore, body):
    """An identity provider's JWKS endpoint: Python's HTTP server over TLS
    with the test certificate, answering every GET with `body`; yields its
    URL."""
    import http.server
    import ssl
    import threading

    class Jwks(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *_args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Jwks)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(keystore)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://localhost:{server.server_address[1]}/.well-known/jwks.json"
    finally:
        server.shutdown()
        server.server_close()


def test_confluent_kafka_oauthbearer_with_signed_and_refused_tokens(binary):
    """librdkafka (confluent-kafka) logs in with OAUTHBEARER over SASL_SSL
    with an ES256 token its oauth_cb hands it, signed by a key in the JWKS
    the broker reads from an identity provider's https:// endpoint (its
    certificate checked against the truststore), and produces and consumes;
    a token for another audience and an expired one are refused with
    Kafka's message."""
    directory = tempfile.mkdtemp(prefix="sluice-oauth-")
    broker = Broker(binary)
    endpoint = contextlib.ExitStack()
    try:
        keystore, ca = make_tls_files(directory)
        jwks, sign = es256_signer(directory)
        jwks_url = endpoint.enter_context(https_server(keystore, jwks))
        broker.listen = f"SASL_SSL://127.0.0.1:{broker.port}"
        broker.extra = ["--ssl-keystore-location", keystore,
                        "--ssl-truststore-location", ca,
                        "--sasl-enabled-mechanisms", "OAUTHBEARER",
                        "--sasl-oauthbearer-jwks-endpoint-url", jwks_url,
                        "--sasl-oauthbearer-expected-audience", "kafka",
                        "--sasl-oauthbearer-expected-issuer", "https://issuer.test"]
        broker.start()

        def config(claims):
            token = signed_token(sign, claims)
            # librdkafka will not hand over a token it knows has expired, so
            # it is told a later expiry than the token's own.
            expiry = max(claims["exp"], int(time.time()) + 600)
            return {
                "bootstrap.servers": f"127.0.0.1:{broker.port}",
                "security.protocol": "SASL_SSL",
                "ssl.ca.location": ca,
                "sasl.mechanism": "OAUTHBEARER",
                "oauth_cb": lambda _config: (token, expiry),
            }

        now = int(time.time())
        good = {"sub": "svc-orders", "aud": "kafka", "iss": "https://issuer.test",
                "iat": now, "exp": now + 600}
        confluent_round_trip(config(good), "oauth-signed")
        for bad in (dict(good, aud="elsewhere"), dict(good, exp=now - 600)):
            message = authentication_error(config(bad))
            assert "Authentication failed" in message, message
    except Exception:
        print(broker.output())
        raise
    finally:
        broker.stop()
        endpoint.close()
        shutil.rmtree(directory, ignore_errors=True)


def test_confluent_kafka_oauthbearer_unsecured_tokens(binary):
    """With --sasl-oauthbearer-unsecured, librdkafka's own unsecured tokens
    (`enable.sasl.oauthbearer.unsecure.jwt`) log in over SASL_PLAINTEXT as
    their principal, beside SCRAM on the same listener."""
    broker = Broker(binary)
    try:
        broker.listen = f"SASL_PLAINTEXT://127.0.0.1:{broker.port}"
        broker.extra = ["--sasl-oauthbearer-unsecured", "true", "--add-scram", USERS[1]]
        broker.start()
        config = {
            "bootstrap.servers": f"127.0.0.1:{broker.port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=dev-user lifeSeconds=600",
        }
        confluent_round_trip(config, "oauth-unsecured")
        scram = {
            "bootstrap.servers": f"127.0.0.1:{broker.port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
        confluent_round_trip(scram, "oauth-beside-scram")
    except Exception:
        print(broker.output())
        raise
    finally:
        broker.stop()


def acl(resource_type, name, principal, operation, permission="ALLOW", pattern="LITERAL"):
    """A confluent-kafka AclBinding from names."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)

    return AclBinding(ResourceType[resource_type], name, ResourcePatternType[pattern], principal, "*",
                      AclOperation[operation], AclPermissionType[permission])


def acl_filter(resource_type="ANY", name=None, pattern="ANY", principal=None, operation="ANY"):
    from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)

    return AclBindingFilter(ResourceType[resource_type], name, ResourcePatternType[pattern], principal, None,
                            AclOperation[operation], AclPermissionType.ANY)


def test_confluent_kafka_acl_admin_as_librdkafkas_0081_runs_it(binary):
    """The ACL part of librdkafka's admin test (0081), against a broker run
    as librdkafka's own test cluster runs: the standard authorizer allowing
    everyone where no ACL matches. Two bindings are created, found by a
    MATCH filter and by a LITERAL one for WRITE, and deleted by filter; with
    no ACL on them, a topic reports its 8 operations and the cluster its 7."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient, NewTopic as ConfluentNewTopic

    broker = Broker(binary)
    broker.extra = ["--authorizer", "standard", "--allow-everyone-if-no-acl-found", "true"]
    try:
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = "rdkafkatest_0081_acls"
        created = admin.create_acls([
            acl("TOPIC", f"{topic}_1", "User:test1", "READ", pattern="PREFIXED"),
            acl("TOPIC", f"{topic}_2", "User:test2", "WRITE"),
        ])
        for future in created.values():
            assert future.result(timeout=DEADLINE_S) is None
        matched = admin.describe_acls(acl_filter("TOPIC", f"{topic}_1", "MATCH")).result(timeout=DEADLINE_S)
        assert [b.principal for b in matched] == ["User:test1"], matched
        both = admin.describe_acls(acl_filter("TOPIC", None, "MATCH")).result(timeout=DEADLINE_S)
        assert sorted(b.principal for b in both) == ["User:test1", "User:test2"], both
        literal = admin.describe_acls(
            acl_filter("TOPIC", f"{topic}_2", "LITERAL", operation="WRITE")).result(timeout=DEADLINE_S)
        assert len(literal) == 1 and literal[0].principal == "User:test2" and literal[0].host == "*", literal
        deletions = admin.delete_acls([acl_filter("TOPIC", f"{topic}_1", "MATCH"),
                                       acl_filter("TOPIC", f"{topic}_2", "LITERAL")])
        removed = [len(future.result(timeout=DEADLINE_S)) for future in deletions.values()]
        assert removed == [1, 1], removed
        left = admin.describe_acls(acl_filter()).result(timeout=DEADLINE_S)
        assert left == [], left

        for future in admin.create_topics([ConfluentNewTopic(topic, 1, 1)]).values():
            future.result(timeout=DEADLINE_S)
        described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)
        operations = described[topic].result(timeout=DEADLINE_S).authorized_operations
        assert len(operations) == 8, operations
        cluster = admin.describe_cluster(include_authorized_operations=True).result(timeout=DEADLINE_S)
        assert len(cluster.authorized_operations) == 7, cluster.authorized_operations
    except Exception:
        print(broker.output())
        raise
    finally:
        broker.stop()


SECURED_USERS = ["admin", "alice", "bob", "broker"]


def secured_node(node):
    """A cluster node whose one listener is SASL_PLAINTEXT, brokers logging
    in to one another as `broker`, and the standard authorizer with admin
    and the brokers as super users."""
    node.listen = f"SASL_PLAINTEXT://{node.bootstrap}"
    node.extra = ["--authorizer", "standard", "--super-users", "User:admin;User:broker",
                  "--inter-broker-sasl-mechanism", "SCRAM-SHA-512",
                  "--inter-broker-sasl-username", "broker", "--inter-broker-sasl-password", "broker-secret"]
    for user in SECURED_USERS:
        node.extra += ["--add-scram", f"SCRAM-SHA-512=[name={user},password={user}-secret]"]


def as_user(user, bootstrap, **more):
    return dict({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                 "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
                 "sasl.password": f"{user}-secret"}, **more)


def produce_error(config, topic):
    """Produces one record; None when it was acknowledged, else the error
    code librdkafka reports for it."""
    import confluent_kafka

    outcome = []
    producer = confluent_kafka.Producer(dict(config, acks="all", **{"message.timeout.ms": 10000}))
    producer.produce(topic, b"record", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(DEADLINE_S)
    assert outcome, "no delivery report"
    return None if outcome[0] is None else outcome[0].code()


def test_confluent_kafka_acls_created_through_one_node_bind_on_every_node(cluster_binary):
    """Three nodes on SASL_PLAINTEXT with the standard authorizer. ACLs
    created with confluent-kafka's AdminClient through node 1 are enforced
    for clients bootstrapped through nodes 2 and 3: alice's producer, her
    consumer group and her transactional producer are refused, then allowed;
    a DENY beats a wildcard ALLOW; every binding survives a SIGKILL of every
    node; a deleted binding refuses again."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic as ConfluentNewTopic

    cluster = Cluster(cluster_binary, configure=secured_node)

    def listed(node):
        admin = AdminClient(as_user("admin", node.bootstrap))
        return len(admin.list_topics(timeout=REQUEST_TIMEOUT_MS / 1000).brokers)

    cluster.brokers = listed
    try:
        cluster.start()
        one, two, three = (node.bootstrap for node in cluster.nodes)
        admin = AdminClient(as_user("admin", one))
        for future in admin.create_topics([ConfluentNewTopic("acl-orders", 1, 3),
                                           ConfluentNewTopic("acl-denied", 1, 3)]).values():
            future.result(timeout=DEADLINE_S)
        TAF = confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert produce_error(as_user("alice", two), "acl-orders") == TAF

        def txn_refused():
            producer = confluent_kafka.Producer(as_user("alice", three, **{"transactional.id": "acl-txn"}))
            try:
                producer.init_transactions(DEADLINE_S)
            except confluent_kafka.KafkaException as error:
                return error.args[0].code()
            return None

        assert txn_refused() == confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        for future in admin.create_acls([
            acl("TOPIC", "acl-orders", "User:alice", "WRITE"),
            acl("TOPIC", "acl-orders", "User:alice", "READ"),
            acl("GROUP", "acl-group", "User:alice", "READ"),
            acl("TRANSACTIONAL_ID", "acl-txn", "User:alice", "WRITE"),
            # Everyone may write every topic, but alice not acl-denied.
            acl("TOPIC", "*", "User:*", "WRITE"),
            acl("TOPIC", "acl-denied", "User:alice", "WRITE", permission="DENY"),
        ]).values():
            future.result(timeout=DEADLINE_S)

        def allowed_everywhere():
            # Every node applies the records on its own: each is asked.
            assert eventually(lambda: produce_error(as_user("alice", two), "acl-orders") is None,
                              "alice's produce allowed through node 2")
            assert produce_error(as_user("alice", three), "acl-denied") == TAF
            assert produce_error(as_user("bob", three), "acl-denied") is None
            assert txn_refused() is None

        allowed_everywhere()
        consumer = confluent_kafka.Consumer(as_user("alice", three, **{
            "group.id": "acl-group", "auto.offset.reset": "earliest"}))
        consumer.subscribe(["acl-orders"])
        deadline = time.monotonic() + DEADLINE_S
        read = None
        while read is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read = message.value()
        consumer.close()
        assert read == b"record", read

        cluster.restart()
        admin = AdminClient(as_user("admin", two))
        kept = admin.describe_acls(acl_filter()).result(timeout=DEADLINE_S)
        assert len(kept) == 6, kept
        allowed_everywhere()
        deleted = admin.delete_acls([acl_filter("TOPIC", "acl-orders", "LITERAL", "User:alice", "WRITE")])
        for future in deleted.values():
            assert len(future.result(timeout=DEADLINE_S)) == 1
        # The wildcard ALLOW still lets alice write acl-orders; take it too.
        for future in admin.delete_acls([acl_filter("TOPIC", "*", "LITERAL", "User:*")]).values():
            assert len(future.result(timeout=DEADLINE_S)) == 1
        assert eventually(lambda: produce_error(as_user("alice", one), "acl-orders") == TAF,
                          "alice refused again through node 1")
    except Exception:
        print(cluster.output())
        raise
    finally:
        cluster.stop()


OWN_BROKER_TESTS = [
    test_kafka_python_over_an_ssl_listener,
    test_confluent_kafka_sasl_plain_and_scram_over_plaintext_and_tls,
    test_kafka_python_scram_over_sasl_ssl,
    test_confluent_kafka_oauthbearer_with_signed_and_refused_tokens,
    test_confluent_kafka_oauthbearer_unsecured_tokens,
    test_confluent_kafka_acl_admin_as_librdkafkas_0081_runs_it,
    test_confluent_kafka_acls_created_through_one_node_bind_on_every_node,
]


def run(test, argument):
    """Runs one test, printing its outcome and time; whether it passed."""
    t0 = time.monotonic()
    try:
        test(argument)
    except Exception:
        print(f"FAIL {test.__name__} ({time.monotonic() - t0:.1f}s)")
        traceback.print_exc()
        return False
    print(f"ok   {test.__name__} ({time.monotonic() - t0:.1f}s)")
    return True


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SLUICE_BIN")
    if not binary:
        print("usage: test_clients.py PATH_TO_SLUICE (or set SLUICE_BIN)", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.CRITICAL)
    passed = failed = 0
    started = time.monotonic()
    broker = Broker(os.path.abspath(binary))
    try:
        broker.start()
        for test in TESTS:
            if run(test, broker):
                passed += 1
            else:
                failed += 1
        if failed:
            print("--- broker output ---")
            print(broker.output())
    finally:
        broker.stop()
    # Each three-node test on a cluster of its own: it kills one of its nodes.
    for test in CLUSTER_TESTS:
        t0 = time.monotonic()
        cluster = Cluster(os.path.abspath(binary))
        try:
            cluster.start()
            test(cluster)
        except Exception:
            failed += 1
            print(f"FAIL {test.__name__} ({time.monotonic() - t0:.1f}s)")
            traceback.print_exc()
            print(cluster.output())
        else:
            passed += 1
            print(f"ok   {test.__name__} ({time.monotonic() - t0:.1f}s)")
        finally:
            cluster.stop()
    for test in OWN_BROKER_TESTS:
        if run(test, os.path.abspath(binary)):
            passed += 1
        else:
            failed += 1
    print(f"python clients finished in {time.monotonic() - started:.1f}s")
    print(f"python: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
