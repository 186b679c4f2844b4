#!/usr/bin/env python3
"""A producer for the fault runs (compat/src/bin/faults.rs), written with a
pure-Python Kafka client, aiokafka, so that the run's history holds the writes
of a second client beside librdkafka's: its own batching, retries and
idempotence bookkeeping, checked by the same checker.

It writes `<producer>-<seq>` to partition `seq % partitions` of the topic,
idempotent with acks=all, a bounded number of sends in flight, until told to
stop (the stop file appears, or SIGTERM or SIGINT). Each write is recorded in
the output file as JSON lines, written and flushed as they happen, so that a
killed run still leaves every send it made on record:

  {"event": "invoke", "seq", "partition", "invoked_ms"}
      before the send: a value in the cluster is never one nobody sent;
  {"event": "complete", "seq", "partition", "invoked_ms", "completed_ms",
   "offset" or "error"}
      once its outcome is known, or given up on;
  {"event": "instance", "instance", "at_ms"}, {"event": "retire", "instance",
   "at_ms", "reason"}
      a producer instance started, or given up after an error.

Times are milliseconds since the run's start (`--start-unix-ms`, wall time).

aiokafka retries an idempotent send until it is acknowledged, never expiring
it while the partition has a leader; here a write without an outcome after
`--delivery-timeout-ms` is recorded as failed (it may still be written), as
librdkafka's message.timeout.ms does. A write that fails or times out gives
its producer instance up: its other writes in flight are recorded as failed,
it is closed, and a new instance (a new producer id) goes on with the next
sequence numbers. No sequence number is ever sent twice by this script.

Usage: faults_producer.py --bootstrap B --topic T --partitions N --producer P
       --output FILE --stop-file FILE --start-unix-ms MS --in-flight N
       --request-timeout-ms MS --delivery-timeout-ms MS
"""

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time

import aiokafka

# How often the stop file is looked for, in seconds.
STOP_POLL_S = 0.1
# How long a new producer instance may take to start (bootstrap metadata and
# its producer id), in seconds: aiokafka retries the producer id without end.
START_TIMEOUT_S = 10.0
# The pause after a producer instance failed to start, in seconds.
START_BACKOFF_S = 0.5
# Once told to stop: how long the writes in flight may still take to learn
# their outcome, in seconds; those still open after it are recorded as failed.
STOP_DRAIN_S = 5.0
# How long each of the two steps of closing a producer instance may take, in
# seconds: cancelling its sender (which waits for the requests already on the
# wire), then closing its connections.
CLOSE_TIMEOUT_S = 5.0
# How old the client's metadata may get, in ms: aiokafka refreshes it on
# some errors only (its default age is five minutes), so a partition whose
# leader changed without telling it would wait that long for a new leader.
METADATA_MAX_AGE_MS = 5_000
# How long a batch waits for more records, in ms, as the librdkafka
# producers' linger.ms.
LINGER_MS = 2
# The pause before a send is retried, in ms (librdkafka's default).
RETRY_BACKOFF_MS = 100

log = logging.getLogger("faults_producer")


class GivenUp(Exception):
    """A write's outcome was not learned: its instance was given up, or its
    delivery timeout passed. It may or may not have been written."""


class Instance:
    """One AIOKafkaProducer, and whether it has been given up."""

    def __init__(self, number, producer):
        self.number = number
        self.producer = producer
        # The first error of one of its writes: the instance is given up.
        self.failure = None
        # Set when the instance is given up: its open writes stop waiting.
        self.abandoned = asyncio.Event()
        # Held while a write is put into the client's batches, so they go in
        # in sequence order: `send` may wait (for metadata, for room), and
        # the waiting writes would otherwise resume in any order, which the
        # checker would rightly call reordered. asyncio's lock wakes its
        # waiters first come, first served, and each write asks for it
        # before its first await, in the order the writes were started.
        self.send_order = asyncio.Lock()


class Run:
    def __init__(self, args):
        self.args = args
        self.output = open(args.output, "w", encoding="utf-8", buffering=1)
        self.stopping = asyncio.Event()
        self.slots = asyncio.Semaphore(args.in_flight)
        # The open writes, by sequence number.
        self.open = {}
        self.instances = 0

    def now_ms(self):
        return max(0, time.time_ns() // 1_000_000 - self.args.start_unix_ms)

    def record(self, **fields):
        """One JSON line, flushed with its newline (the file is line-buffered)."""
        self.output.write(json.dumps(fields) + "\n")

    async def new_instance(self):
        """A started producer instance, or None once told to stop."""
        while not self.stopping.is_set():
            self.instances += 1
            producer = aiokafka.AIOKafkaProducer(
                bootstrap_servers=self.args.bootstrap,
                client_id=f"faults-python-{self.args.producer}-{self.instances}",
                enable_idempotence=True,
                acks="all",
                request_timeout_ms=self.args.request_timeout_ms,
                metadata_max_age_ms=METADATA_MAX_AGE_MS,
                linger_ms=LINGER_MS,
                retry_backoff_ms=RETRY_BACKOFF_MS,
            )
            try:
                await asyncio.wait_for(producer.start(), START_TIMEOUT_S)
            except Exception as error:  # noqa: BLE001: any failure to start is retried
                log.warning(
                    "producer instance %d did not start: %s", self.instances, describe(error)
                )
                await close(producer)
                await self.sleep_unless_stopping(START_BACKOFF_S)
                continue
            self.record(event="instance", instance=self.instances, at_ms=self.now_ms())
            log.warning("producer instance %d started", self.instances)
            return Instance(self.instances, producer)
        return None

    async def retire(self, instance, reason):
        """Gives `instance` up: its open writes are recorded as failed, it is closed."""
        instance.abandoned.set()
        self.record(
            event="retire", instance=instance.number, at_ms=self.now_ms(), reason=reason
        )
        log.warning("producer instance %d given up: %s", instance.number, reason)
        await close(instance.producer)

    async def sleep_unless_stopping(self, seconds):
        try:
            await asyncio.wait_for(self.stopping.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def take_slot(self):
        """A slot for one more write in flight; False once told to stop."""
        acquire = asyncio.ensure_future(self.slots.acquire())
        stop = asyncio.ensure_future(self.stopping.wait())
        await asyncio.wait({acquire, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not acquire.done():
            acquire.cancel()
            return False
        if self.stopping.is_set():
            self.slots.release()
            return False
        return True

    async def write(self, instance, seq, partition, invoked_ms):
        """One write, its outcome recorded; gives its instance up when it fails."""
        deadline = time.monotonic() + self.args.delivery_timeout_ms / 1000
        value = f"{self.args.producer}-{seq}".encode()
        try:
            # Cancelling the send coroutine (not yet in a batch) keeps the
            # record from being sent; the delivery future is not cancelled.
            async with instance.send_order:
                queued = asyncio.ensure_future(
                    instance.producer.send(
                        self.args.topic, value=value, key=str(seq).encode(), partition=partition
                    )
                )
                delivery = await self.outcome(queued, instance, deadline, cancel=True)
            metadata = await self.outcome(delivery, instance, deadline, cancel=False)
            if metadata is None or metadata.offset is None or metadata.offset < 0:
                # aiokafka answers a DuplicateSequenceNumber with success and
                # no offset: acknowledged, but where is not known.
                raise GivenUp(f"acknowledged without an offset: {metadata!r}")
            self.record(
                event="complete",
                seq=seq,
                partition=partition,
                invoked_ms=invoked_ms,
                completed_ms=self.now_ms(),
                offset=metadata.offset,
            )
        except Exception as error:  # noqa: BLE001: every error is an outcome
            reason = describe(error)
            self.record(
                event="complete",
                seq=seq,
                partition=partition,
                invoked_ms=invoked_ms,
                completed_ms=self.now_ms(),
                error=reason,
            )
            if instance.failure is None and not instance.abandoned.is_set():
                instance.failure = f"write {seq} to partition {partition}: {reason}"
        finally:
            self.slots.release()

    async def outcome(self, future, instance, deadline, cancel):
        """The result of `future`, or GivenUp when the instance is given up or
        the deadline passes first (the future then cancelled if `cancel`)."""
        abandoned = asyncio.ensure_future(instance.abandoned.wait())
        try:
            await asyncio.wait(
                {future, abandoned},
                timeout=max(0.0, deadline - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            abandoned.cancel()
        if future.cancelled():
            raise GivenUp("the client cancelled it")
        if future.done():
            return future.result()
        if cancel:
            future.cancel()
        else:
            future.add_done_callback(consume_outcome)
        if instance.abandoned.is_set():
            raise GivenUp(f"producer instance {instance.number} given up before an outcome")
        raise GivenUp(f"no outcome within {self.args.delivery_timeout_ms} ms")

    async def produce(self):
        """Writes until told to stop, then waits for the open writes."""
        instance = None
        seq = 0
        while not self.stopping.is_set():
            if instance is None or instance.failure is not None:
                if instance is not None:
                    await self.retire(instance, instance.failure)
                instance = await self.new_instance()
                if instance is None:
                    break
            if not await self.take_slot():
                break
            if instance.failure is not None:
                # Failed while this waited for a slot: the next instance sends.
                self.slots.release()
                continue
            this, seq = seq, seq + 1
            partition = this % self.args.partitions
            invoked_ms = self.now_ms()
            self.record(event="invoke", seq=this, partition=partition, invoked_ms=invoked_ms)
            task = asyncio.ensure_future(self.write(instance, this, partition, invoked_ms))
            self.open[this] = task
            task.add_done_callback(lambda _, this=this: self.open.pop(this, None))
        log.warning("told to stop after %d writes; %d open", seq, len(self.open))
        if self.open:
            await asyncio.wait(list(self.open.values()), timeout=STOP_DRAIN_S)
        if instance is not None:
            # Every write still open is recorded as failed as it stops waiting.
            await self.retire(instance, "the run stopped")
        if self.open:
            await asyncio.wait(list(self.open.values()))
        self.output.close()

    async def watch_stop_file(self):
        while not self.stopping.is_set():
            if os.path.exists(self.args.stop_file):
                self.stopping.set()
                return
            await asyncio.sleep(STOP_POLL_S)


async def close(producer):
    """Closes `producer` at once, dropping its unsent batches: aiokafka's stop
    would first wait for them to be delivered, which an idempotent producer
    retries without end. Its sender is cancelled first (it then waits only for
    the requests already on the wire), after which stop has nothing to wait
    for but closing the connections."""
    sender = producer._sender  # aiokafka 0.14: no public way to drop batches
    try:
        await asyncio.wait_for(sender.close(), CLOSE_TIMEOUT_S)
    except Exception as error:  # noqa: BLE001: a failed close changes no outcome
        log.warning("cancelling a producer's sender: %s", describe(error))
    try:
        await asyncio.wait_for(producer.stop(), CLOSE_TIMEOUT_S)
    except Exception as error:  # noqa: BLE001: as above
        log.warning("closing a producer: %s", describe(error))


def consume_outcome(future):
    """Takes a given-up delivery's late outcome, so that asyncio does not log
    an error nobody retrieved."""
    if not future.cancelled():
        future.exception()


def describe(error):
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


async def main(args):
    run = Run(args)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, run.stopping.set)
    watcher = asyncio.ensure_future(run.watch_stop_file())
    try:
        await run.produce()
    finally:
        watcher.cancel()


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--producer", type=int, required=True, help="the value's prefix")
    parser.add_argument("--output", required=True, help="the JSON lines' file")
    parser.add_argument("--stop-file", required=True, help="stop once this exists")
    parser.add_argument(
        "--start-unix-ms", type=int, required=True, help="the run's start, wall time"
    )
    parser.add_argument("--in-flight", type=int, required=True)
    parser.add_argument("--request-timeout-ms", type=int, required=True)
    parser.add_argument("--delivery-timeout-ms", type=int, required=True)
    return parser.parse_args()


class RunTimeFormatter(logging.Formatter):
    """Log lines stamped with the seconds since the run's start, as the
    harness's own log is, so that the two can be read side by side."""

    def __init__(self, start_unix_ms):
        super().__init__("[%(run_s)9s] %(name)s %(levelname)s %(message)s")
        self.start_unix_ms = start_unix_ms

    def format(self, record):
        ms = max(0, int(record.created * 1000) - self.start_unix_ms)
        record.run_s = f"{ms // 1000}.{ms % 1000:03}s"
        return super().format(record)


if __name__ == "__main__":
    ARGS = arguments()
    HANDLER = logging.StreamHandler(sys.stderr)
    HANDLER.setFormatter(RunTimeFormatter(ARGS.start_unix_ms))
    logging.basicConfig(level=logging.WARNING, handlers=[HANDLER])
    asyncio.run(main(ARGS))
