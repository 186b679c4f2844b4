#!/usr/bin/env python3
"""The cost of TLS, in one run on this machine: the broker's start-up time
with and without an SSL listener, new connections per second (TCP connect,
TLS handshake, ApiVersions answered, close) on PLAINTEXT and SSL, and produce
and consume throughput of 1 KB records through librdkafka (confluent-kafka)
on PLAINTEXT and SSL listeners of one broker, interleaved three times, each
median's ratio printed (TLS / plaintext).

Usage: bench_tls.py PATH_TO_SLUICE   (run by scripts/bench.sh with the
test venv's Python; confluent-kafka comes from compat/python/requirements.txt)
"""

import os
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "compat", "python"))
from test_clients import free_port, make_tls_files  # noqa: E402

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

MESSAGES = int(os.environ.get("BENCH_TLS_MESSAGES", "200000"))
CONNECTIONS = int(os.environ.get("BENCH_TLS_CONNECTIONS", "500"))
API_VERSIONS_V0 = bytes([0, 0, 0, 11, 0, 18, 0, 0, 0, 0, 0, 1, 0, 1]) + b"t"


def spawn(binary, directory, listen, extra):
    data = tempfile.mkdtemp(dir=directory)
    proc = subprocess.Popen(
        [binary, "serve", "--listen", listen, "--data-dir", data, "--log-level", "warn", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc


def wait_port(port, deadline_s=30):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.001)
    raise RuntimeError(f"nothing listens on {port}")


def stop(proc):
    proc.terminate()
    proc.wait(timeout=30)


def start_time_ms(binary, directory, tls_args):
    port = free_port()
    scheme = "SSL" if tls_args else "PLAINTEXT"
    t0 = time.monotonic()
    proc = spawn(binary, directory, f"{scheme}://127.0.0.1:{port}", tls_args)
    wait_port(port)
    elapsed = (time.monotonic() - t0) * 1000
    stop(proc)
    return elapsed


def connections_per_s(port, context):
    t0 = time.monotonic()
    for _ in range(CONNECTIONS):
        raw = socket.create_connection(("127.0.0.1", port))
        conn = context.wrap_socket(raw, server_hostname="localhost") if context else raw
        conn.sendall(API_VERSIONS_V0)
        length = int.from_bytes(conn.recv(4), "big")
        while length > 0:
            length -= len(conn.recv(length))
        conn.close()
    return CONNECTIONS / (time.monotonic() - t0)


def produce_consume(config, topic):
    payload = b"x" * 1024
    producer = confluent_kafka.Producer(dict(config, **{"linger.ms": 5, "acks": "1"}))
    t0 = time.monotonic()
    for _ in range(MESSAGES):
        while True:
            try:
                producer.produce(topic, payload)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(60)
    produced = MESSAGES / (time.monotonic() - t0)
    consumer = confluent_kafka.Consumer(dict(config, **{
        "group.id": f"{topic}-bench", "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    seen = 0
    t0 = time.monotonic()
    while seen < MESSAGES:
        batch = consumer.consume(10000, 1.0)
        seen += sum(1 for m in batch if m.error() is None)
    consumed = MESSAGES / (time.monotonic() - t0)
    consumer.close()
    return produced, consumed


def main():
    binary = sys.argv[1]
    directory = tempfile.mkdtemp(prefix="sluice-bench-tls-")
    try:
        keystore, ca = make_tls_files(directory)
        tls_args = ["--ssl-keystore-location", keystore]
        starts = {"plaintext": [], "TLS": []}
        for _ in range(5):
            starts["plaintext"].append(start_time_ms(binary, directory, []))
            starts["TLS"].append(start_time_ms(binary, directory, tls_args))
        for kind, times in starts.items():
            print(f"start-up to listening, {kind}: median {statistics.median(times):.1f} ms of 5")

        plain_port, tls_port = free_port(), free_port()
        proc = spawn(binary, directory,
                     f"PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{tls_port}", tls_args)
        try:
            wait_port(plain_port)
            context = ssl.create_default_context(cafile=ca)
            plain_rate = connections_per_s(plain_port, None)
            tls_rate = connections_per_s(tls_port, context)
            print(f"new connections/s (connect, handshake, ApiVersions, close): "
                  f"plaintext {plain_rate:.0f}, TLS {tls_rate:.0f}, ratio {tls_rate / plain_rate:.2f}")
            configs = {
                "plaintext": {"bootstrap.servers": f"127.0.0.1:{plain_port}"},
                "TLS": {"bootstrap.servers": f"127.0.0.1:{tls_port}", "security.protocol": "SSL",
                        "ssl.ca.location": ca},
            }
            admin = AdminClient(configs["plaintext"])
            topics = [f"bench-{kind}-{n}" for n in range(3) for kind in ("plain", "tls")]
            for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
                future.result(60)
            figures = {"plaintext": [], "TLS": []}
            for n in range(3):
                figures["plaintext"].append(produce_consume(configs["plaintext"], f"bench-plain-{n}"))
                figures["TLS"].append(produce_consume(configs["TLS"], f"bench-tls-{n}"))
            medians = {kind: (statistics.median(p for p, _ in runs), statistics.median(c for _, c in runs))
                       for kind, runs in figures.items()}
            for index, what in enumerate(("produce", "consume")):
                plain, tls = medians["plaintext"][index], medians["TLS"][index]
                print(f"{what} 1 KB msgs/s (median of 3): plaintext {plain:.0f}, TLS {tls:.0f}, "
                      f"ratio {tls / plain:.2f}")
        finally:
            stop(proc)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
