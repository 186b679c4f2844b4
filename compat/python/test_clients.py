#!/usr/bin/env python3
"""Pure-Python Kafka clients (kafka-python and aiokafka) against the real
`sluice` binary: idempotent produce, committed and aborted transactions seen
through both isolation levels, a transactional consume-transform-produce
round whose offsets are committed through the transaction, and kafka-python
pinned to old brokers' protocol versions (`api_version=(1, 0, 0)` and
`(0, 10, 2)`), as applications written for those brokers still run it.

Usage: test_clients.py [PATH_TO_SLUICE]   (or SLUICE_BIN in the environment)

Standard library only, apart from the two clients (installed by
scripts/install-test-deps.sh). Every wait has a deadline so that a broken broker
fails the run instead of hanging it; no assertion is about timing.
"""

import asyncio
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


class Broker:
    """One `sluice serve` process on a free port with its data in a temp dir."""

    def __init__(self, binary):
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="sluice-python-")
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log_path = os.path.join(self.dir, "broker.log")
        self.proc = None

    def start(self):
        env = dict(os.environ, SLUICE_LOG_LEVEL="warn")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [
                self.binary,
                "serve",
                "--listen",
                self.bootstrap,
                "--data-dir",
                os.path.join(self.dir, "data"),
                # A new group rebalances at once instead of waiting 3 s for more members.
                "--profile",
                "dev",
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + DEADLINE_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.output()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"broker did not listen on {self.bootstrap}:\n{self.output()}")
                time.sleep(0.05)

    def output(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

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


def read_to_end(broker, topic, isolation_level):
    """Every record of partition 0 from the start up to the partition's end
    (the high watermark, or the last stable offset under read_committed), as
    (offset, key, value) tuples in the order the consumer returned them."""
    tp = TopicPartition(topic, 0)
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
            t0 = time.monotonic()
            try:
                test(broker)
            except Exception:
                failed += 1
                print(f"FAIL {test.__name__} ({time.monotonic() - t0:.1f}s)")
                traceback.print_exc()
            else:
                passed += 1
                print(f"ok   {test.__name__} ({time.monotonic() - t0:.1f}s)")
        if failed:
            print("--- broker output ---")
            print(broker.output())
    finally:
        broker.stop()
    print(f"python clients finished in {time.monotonic() - started:.1f}s")
    print(f"python: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
