"""Peer figures for the messaging benchmark: Redis Streams and NATS JetStream, measured from Python.

Run ``PYTHONPATH=. .venv/bin/python -m bench.peers --messages 50000`` (``--help`` for every option). It starts a
throw-away ``redis-server`` and ``nats-server -js`` (see :mod:`bench.servers`) and prints one aligned table. The
functions below are the building blocks so that the broker's own benchmark can run the same workloads in the
same process and print ratios; :func:`run_peers` runs them all and returns ``{function name: figures}``.

Clients: redis-py with the hiredis parser (RESP2, ``transaction=False`` pipelines) and nats-py (asyncio; each
synchronous entry point runs its own event loop with ``asyncio.run``). Everything runs on 127.0.0.1, client and
server on the same machine, one client process. Servers: Redis with AOF ``appendfsync everysec`` and no RDB
snapshots; JetStream with file storage (default ``sync_interval``, i.e. no fsync per message) -- both
acknowledge a write once it is in the server's memory/page cache, not on disk.

What is timed (``time.perf_counter`` around the loop only):

* ``*_produce_*``: from the first send until the last reply/ack has been received, ``n`` messages of ``body``.
  Not timed: connecting, creating the stream, the post-run check that the stream holds ``n`` messages, deleting.
* ``*_consume*``: the stream is pre-filled with ``n`` messages first (not timed); timed from the first read
  request until the ``n``-th message has been handed to Python.
* ``*_latency``: end-to-end latency at a steady rate. The producer sends ``rate`` msg/s for ``warmup + seconds``
  seconds on one connection (one synchronous XADD / ``js.publish`` per message, paced against a fixed schedule
  ``t0 + i / rate``; when behind it sends immediately to catch up). Each body starts with the sequence number
  and ``time.perf_counter_ns()`` taken just before the send (the *actual* send time, as in the OpenMessaging
  benchmark, so producer-side queueing is not included). A consumer on another thread and connection records
  ``perf_counter_ns()`` when the message reaches Python minus the send time. Samples of messages sent during
  the first ``warmup`` seconds are dropped. Quantiles are nearest-rank over all samples: p50, p99, p99.9
  (``p999_ms``) in milliseconds, plus ``count`` (samples kept) and ``sent_per_s``, the rate the producer
  actually achieved: if it is clearly below ``rate`` the producer could not keep up (each send waits for its
  reply) and the figures describe a saturated producer, not the requested rate. Producer and consumer share one
  Python process and therefore the GIL (its 5 ms switch interval can show in the tail), as a broker's Python
  clients would.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import math
import os
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Literal

import nats
import nats.errors
import nats.js
import redis
import redis.utils
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig

Figures = dict[str, float]
AckMode = Literal["all", "none"]

_FIELD = b"b"  # the single field of every Redis stream entry
_STAMP = struct.Struct("<qq")  # (sequence number, send time in perf_counter_ns) at the start of latency bodies
_PREFILL_CHUNK = 1000
_XREAD_COUNT = 1000
_names = itertools.count()


def _name(prefix: str) -> str:
    """A unique stream name within this process (each run uses a fresh stream)."""
    return f"{prefix}{os.getpid()}x{next(_names)}"


def _rate(n: int, elapsed_s: float) -> Figures:
    return {"msg_per_s": n / elapsed_s if elapsed_s > 0 else math.inf}


def _check_n(n: int) -> None:
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")


def quantiles_ms(samples_ns: Sequence[int]) -> Figures:
    """OpenMessaging-style latency figures from samples in nanoseconds: nearest-rank p50, p99, p99.9 (ms)."""
    if not samples_ns:
        return {"p50_ms": math.nan, "p99_ms": math.nan, "p999_ms": math.nan, "count": 0}
    s = sorted(samples_ns)

    def q(p: float) -> float:
        return s[max(0, math.ceil(p * len(s)) - 1)] / 1e6

    return {"p50_ms": q(0.50), "p99_ms": q(0.99), "p999_ms": q(0.999), "count": len(s)}


def _stamped(seq: int, body: bytes) -> bytes:
    """``body`` with (seq, now) in its first 16 bytes; same length as ``body`` (at least 16 bytes)."""
    return _STAMP.pack(seq, time.perf_counter_ns()) + body[_STAMP.size :]


def _pace(t0_ns: int, i: int, rate: float) -> None:
    """Sleep until message ``i``'s slot on the schedule ``t0 + i / rate``; return at once when behind."""
    delay_ns = t0_ns + int(i * 1e9 / rate) - time.perf_counter_ns()
    if delay_ns > 0:
        time.sleep(delay_ns / 1e9)


def _latency_plan(rate: float, seconds: float, warmup: float) -> tuple[int, int]:
    """(messages to send, messages in the warm-up) for a latency run."""
    if rate <= 0 or seconds <= 0 or warmup < 0:
        raise ValueError("rate and seconds must be > 0, warmup >= 0")
    return int(rate * (warmup + seconds)), int(rate * warmup)


class _LatencyState:
    """Shared between the producer (main thread) and the consumer thread of a latency run."""

    def __init__(self, warm_n: int) -> None:
        self.warm_n = warm_n
        self.samples: list[int] = []
        self.received = 0
        self.sent: int | None = None  # set by the producer when it has finished sending
        self.sent_per_s = math.nan  # rate the producer actually achieved
        self.ready = threading.Event()
        self.errors: list[BaseException] = []

    def record(self, payload: bytes, now_ns: int) -> None:
        seq, sent_ns = _STAMP.unpack_from(payload)
        if seq >= self.warm_n:
            self.samples.append(now_ns - sent_ns)
        self.received += 1

    def finished(self) -> bool:
        return self.sent is not None and self.received >= self.sent


# ---------------------------------------------------------------------------------------------------------------
# Redis Streams
# ---------------------------------------------------------------------------------------------------------------


def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=False, socket_keepalive=True)


def _redis_prefill(client: redis.Redis, key: str, n: int, body: bytes) -> None:
    pipe = client.pipeline(transaction=False)
    for start in range(0, n, _PREFILL_CHUNK):
        for _ in range(min(_PREFILL_CHUNK, n - start)):
            pipe.xadd(key, {_FIELD: body})
        pipe.execute()


def _redis_check_len(client: redis.Redis, key: str, n: int) -> None:
    length = client.xlen(key)
    if length != n:
        raise RuntimeError(f"redis stream {key} holds {length} entries, expected {n}")


def redis_produce_pipelined(url: str, n: int, body: bytes, batch: int = 64) -> Figures:
    """XADD ``n`` entries through a non-transactional pipeline, ``batch`` commands per ``execute()``.

    One round trip per batch; timed from the first XADD until the last batch's replies have been parsed.
    """
    _check_n(n)
    client, key = _redis(url), _name("rpp")
    try:
        pipe = client.pipeline(transaction=False)
        t0 = time.perf_counter()
        for start in range(0, n, batch):
            for _ in range(min(batch, n - start)):
                pipe.xadd(key, {_FIELD: body})
            pipe.execute()
        elapsed = time.perf_counter() - t0
        _redis_check_len(client, key, n)
        return _rate(n, elapsed)
    finally:
        client.delete(key)
        client.close()


def redis_produce_sync(url: str, n: int, body: bytes) -> Figures:
    """One XADD per round trip (wait for each reply before the next send); timed over all ``n``."""
    _check_n(n)
    client, key = _redis(url), _name("rps")
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            client.xadd(key, {_FIELD: body})
        elapsed = time.perf_counter() - t0
        _redis_check_len(client, key, n)
        return _rate(n, elapsed)
    finally:
        client.delete(key)
        client.close()


def redis_consume(url: str, n: int, body: bytes) -> Figures:
    """Pre-fill a stream with ``n`` entries (not timed), then time reading them all back.

    Plain ``XREAD COUNT 1000 STREAMS key <last id>`` starting from ``0-0`` and advancing to the last id returned
    (no consumer group, hence no acknowledgements).
    """
    _check_n(n)
    client, key = _redis(url), _name("rc")
    try:
        _redis_prefill(client, key, n, body)
        last: bytes | str = "0-0"
        received = 0
        t0 = time.perf_counter()
        for _ in range(n):  # each round returns at least one entry, or we stop
            if received >= n:
                break
            resp = client.xread({key: last}, count=_XREAD_COUNT)
            if not resp:
                raise RuntimeError(f"redis stream {key} ran dry after {received} of {n} entries")
            entries = resp[0][1]
            received += len(entries)
            last = entries[-1][0]
        elapsed = time.perf_counter() - t0
        if received != n:
            raise RuntimeError(f"read {received} entries from redis, expected {n}")
        return _rate(n, elapsed)
    finally:
        client.delete(key)
        client.close()


def redis_latency(url: str, rate: float, seconds: float, body: bytes, warmup: float = 1.0) -> Figures:
    """End-to-end latency at ``rate`` msg/s: paced XADD (one per round trip) -> blocking XREAD on another thread.

    The consumer has its own connection and loops on ``XREAD BLOCK 1000 COUNT 1000`` from ``0-0`` (advancing the
    id); all entries returned by one XREAD share its receive time. Runs ``warmup + seconds`` seconds; see the
    module docstring for the method. Returns ``p50_ms``, ``p99_ms``, ``p999_ms``, ``count`` and ``sent_per_s``.
    """
    total, warm_n = _latency_plan(rate, seconds, warmup)
    producer, consumer, key = _redis(url), _redis(url), _name("rl")
    state = _LatencyState(warm_n)
    deadline = time.monotonic() + warmup + seconds + 30.0

    def consume() -> None:
        last: bytes | str = "0-0"
        state.ready.set()
        try:
            while not state.finished() and time.monotonic() < deadline:
                resp = consumer.xread({key: last}, count=_XREAD_COUNT, block=1000)
                now = time.perf_counter_ns()
                if not resp:
                    continue
                entries = resp[0][1]
                for _entry_id, fields in entries:
                    state.record(fields[_FIELD], now)
                last = entries[-1][0]
        except Exception as exc:  # noqa: BLE001 -- reported to the main thread below
            state.errors.append(exc)

    thread = threading.Thread(target=consume, name="redis-latency-consumer", daemon=True)
    try:
        thread.start()
        state.ready.wait(10)
        t0 = time.perf_counter_ns()
        for i in range(total):
            _pace(t0, i, rate)
            producer.xadd(key, {_FIELD: _stamped(i, body)})
        state.sent_per_s = total / max(1e-9, (time.perf_counter_ns() - t0) / 1e9)
        state.sent = total
        thread.join(max(0.0, deadline - time.monotonic()) + 2.0)
    finally:
        state.sent = state.sent if state.sent is not None else 0  # lets the consumer stop on an error
        thread.join(5.0)
        producer.delete(key)
        producer.close()
        consumer.close()
    if state.errors:
        raise RuntimeError(f"redis latency consumer failed: {state.errors[0]!r}") from state.errors[0]
    if state.received != total:
        raise RuntimeError(f"redis latency consumer got {state.received} of {total} messages")
    return quantiles_ms(state.samples) | {"sent_per_s": state.sent_per_s}


# ---------------------------------------------------------------------------------------------------------------
# NATS JetStream
# ---------------------------------------------------------------------------------------------------------------


async def _nats(url: str) -> nats.NATS:
    return await nats.connect(url, connect_timeout=5, allow_reconnect=False, name="bench-peers")


async def _nats_stream(js: nats.js.JetStreamContext, prefix: str) -> tuple[str, str]:
    """Create a fresh file-storage stream; return (stream name, subject)."""
    stream = _name(prefix)
    subject = f"bench.{stream}"
    await js.add_stream(StreamConfig(name=stream, subjects=[subject], storage=StorageType.FILE))
    return stream, subject


async def _nats_check_len(js: nats.js.JetStreamContext, stream: str, n: int) -> None:
    info = await js.stream_info(stream)
    if info.state.messages != n:
        raise RuntimeError(f"nats stream {stream} holds {info.state.messages} messages, expected {n}")


async def _nats_publish_window(js: nats.js.JetStreamContext, subject: str, n: int, body: bytes) -> None:
    """Publish ``n`` messages with ``publish_async`` (the context's max pending bounds the window); await acks."""
    futures = [await js.publish_async(subject, body) for _ in range(n)]
    await js.publish_async_completed()
    await asyncio.gather(*futures)  # re-raises the first failed PubAck, if any


def nats_produce_async_batched(url: str, n: int, body: bytes, window: int = 256) -> Figures:
    """JetStream publishes with up to ``window`` un-acknowledged in flight (sliding window).

    Uses nats-py's ``js.publish_async`` with ``publish_async_max_pending=window``: a new publish waits for a free
    slot, so at most ``window`` messages await their PubAck at any time. Timed from the first publish until the
    last PubAck; every PubAck is checked. The file-storage stream is created before timing.
    """
    _check_n(n)

    async def run() -> Figures:
        nc = await _nats(url)
        try:
            js = nc.jetstream(publish_async_max_pending=window)
            stream, subject = await _nats_stream(js, "npa")
            try:
                t0 = time.perf_counter()
                await _nats_publish_window(js, subject, n, body)
                elapsed = time.perf_counter() - t0
                await _nats_check_len(js, stream, n)
                return _rate(n, elapsed)
            finally:
                await js.delete_stream(stream)
        finally:
            await nc.close()

    return asyncio.run(run())


def nats_produce_sync(url: str, n: int, body: bytes) -> Figures:
    """``await js.publish(...)`` one at a time (each waits for its PubAck); timed over all ``n``."""
    _check_n(n)

    async def run() -> Figures:
        nc = await _nats(url)
        try:
            js = nc.jetstream()
            stream, subject = await _nats_stream(js, "nps")
            try:
                t0 = time.perf_counter()
                for _ in range(n):
                    await js.publish(subject, body)
                elapsed = time.perf_counter() - t0
                await _nats_check_len(js, stream, n)
                return _rate(n, elapsed)
            finally:
                await js.delete_stream(stream)
        finally:
            await nc.close()

    return asyncio.run(run())


def nats_consume_pull(url: str, n: int, body: bytes, batch: int = 256, ack: AckMode = "all") -> Figures:
    """Pre-fill a stream with ``n`` messages (not timed), then time a pull consumer fetching them all.

    An ephemeral pull consumer (deliver all) is created before timing; the loop calls ``fetch(batch)`` until ``n``
    messages have arrived. Acknowledgement choice (``ack``):

    * ``"all"`` (default): consumer ``AckPolicy.ALL`` and one ``ack()`` of the *last* message of every fetched
      batch, which acknowledges the whole batch. This keeps the consumer's progress on the server -- like a
      RocketMQ pull consumer committing its offset per pull -- at the cost of one small fire-and-forget publish
      per batch rather than per message.
    * ``"none"``: ``AckPolicy.NONE``, no acks at all -- the closest match to Redis' plain XREAD, which keeps no
      consumer state on the server.
    """
    _check_n(n)
    policy = {"all": AckPolicy.ALL, "none": AckPolicy.NONE}[ack]

    async def run() -> Figures:
        nc = await _nats(url)
        try:
            js = nc.jetstream(publish_async_max_pending=1024)
            stream, subject = await _nats_stream(js, "ncp")
            try:
                await _nats_publish_window(js, subject, n, body)
                await _nats_check_len(js, stream, n)
                # Unlimited max_ack_pending: with the server default (1000) a fetch larger than that would stall
                # until its timeout, since the batch is only acknowledged once it has fully arrived.
                cfg = ConsumerConfig(
                    ack_policy=policy,
                    deliver_policy=DeliverPolicy.ALL,
                    max_ack_pending=-1 if policy is AckPolicy.ALL else None,
                )
                sub = await js.pull_subscribe(subject, stream=stream, config=cfg)
                received = 0
                t0 = time.perf_counter()
                for _ in range(n):  # each fetch returns at least one message or raises a timeout
                    if received >= n:
                        break
                    msgs = await sub.fetch(min(batch, n - received), timeout=5)
                    received += len(msgs)
                    if policy is AckPolicy.ALL:
                        await msgs[-1].ack()
                elapsed = time.perf_counter() - t0
                await sub.unsubscribe()
                if received != n:
                    raise RuntimeError(f"fetched {received} messages from nats, expected {n}")
                return _rate(n, elapsed)
            finally:
                await js.delete_stream(stream)
        finally:
            await nc.close()

    return asyncio.run(run())


def nats_latency(url: str, rate: float, seconds: float, body: bytes, warmup: float = 1.0) -> Figures:
    """End-to-end latency at ``rate`` msg/s: paced ``js.publish`` (awaits each PubAck) -> push consumer.

    The consumer runs in another thread with its own event loop and connection: an ephemeral push consumer
    (``AckPolicy.NONE``, deliver all, like Redis' XREAD without a group) whose message callback records the
    receive time. The producer paces with a blocking ``time.sleep`` inside its coroutine because asyncio timers
    are rounded up to whole milliseconds by epoll; the producer's connection is idle while it sleeps (each
    publish has already been acknowledged). Runs ``warmup + seconds`` seconds; see the module docstring.
    Returns ``p50_ms``, ``p99_ms``, ``p999_ms``, ``count`` and ``sent_per_s``.
    """
    total, warm_n = _latency_plan(rate, seconds, warmup)
    state = _LatencyState(warm_n)
    deadline = time.monotonic() + warmup + seconds + 30.0

    async def setup() -> tuple[str, str]:
        nc = await _nats(url)
        try:
            return await _nats_stream(nc.jetstream(), "nl")
        finally:
            await nc.close()

    async def consume(stream: str, subject: str) -> None:
        nc = await _nats(url)
        try:
            js = nc.jetstream()

            async def on_msg(msg: Msg) -> None:
                state.record(msg.data, time.perf_counter_ns())

            cfg = ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL)
            sub = await js.subscribe(subject, stream=stream, cb=on_msg, config=cfg, manual_ack=True)
            await nc.flush()
            state.ready.set()
            while not state.finished() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await sub.unsubscribe()
        finally:
            await nc.close()

    def consume_thread(stream: str, subject: str) -> None:
        try:
            asyncio.run(consume(stream, subject))
        except Exception as exc:  # noqa: BLE001 -- reported to the main thread below
            state.errors.append(exc)
        finally:
            state.ready.set()

    async def produce(subject: str) -> None:
        nc = await _nats(url)
        try:
            js = nc.jetstream()
            t0 = time.perf_counter_ns()
            for i in range(total):
                _pace(t0, i, rate)
                await js.publish(subject, _stamped(i, body))
            state.sent_per_s = total / max(1e-9, (time.perf_counter_ns() - t0) / 1e9)
        finally:
            await nc.close()

    async def teardown(stream: str) -> None:
        nc = await _nats(url)
        try:
            await nc.jetstream().delete_stream(stream)
        finally:
            await nc.close()

    stream, subject = asyncio.run(setup())
    thread = threading.Thread(target=consume_thread, args=(stream, subject), name="nats-latency-consumer")
    try:
        thread.start()
        state.ready.wait(10)
        if state.errors:
            raise RuntimeError(f"nats latency consumer failed: {state.errors[0]!r}") from state.errors[0]
        asyncio.run(produce(subject))
        state.sent = total
        thread.join(max(0.0, deadline - time.monotonic()) + 2.0)
    finally:
        state.sent = state.sent if state.sent is not None else 0
        thread.join(5.0)
        asyncio.run(teardown(stream))
    if state.errors:
        raise RuntimeError(f"nats latency consumer failed: {state.errors[0]!r}") from state.errors[0]
    if state.received != total:
        raise RuntimeError(f"nats latency consumer got {state.received} of {total} messages")
    return quantiles_ms(state.samples) | {"sent_per_s": state.sent_per_s}


# ---------------------------------------------------------------------------------------------------------------
# All together
# ---------------------------------------------------------------------------------------------------------------

Report = Callable[[str, Figures], None]


def run_peers(
    redis_url: str | None,
    nats_url: str | None,
    n: int,
    body: bytes,
    *,
    batch: int = 64,
    window: int = 256,
    fetch_batch: int = 256,
    nats_ack: AckMode = "all",
    rate: float = 5000.0,
    seconds: float = 5.0,
    warmup: float = 1.0,
    latency: bool = True,
    report: Report | None = None,
) -> dict[str, Figures]:
    """Run every peer benchmark against the given servers (``None`` skips that peer).

    Returns ``{function name: figures}`` in run order; ``report(name, figures)`` is called after each one.
    """
    jobs: list[tuple[str, Callable[[], Figures]]] = []
    if redis_url is not None:
        jobs += [
            ("redis_produce_pipelined", lambda: redis_produce_pipelined(redis_url, n, body, batch=batch)),
            ("redis_produce_sync", lambda: redis_produce_sync(redis_url, n, body)),
            ("redis_consume", lambda: redis_consume(redis_url, n, body)),
        ]
        if latency:
            jobs.append(("redis_latency", lambda: redis_latency(redis_url, rate, seconds, body, warmup=warmup)))
    if nats_url is not None:
        jobs += [
            ("nats_produce_async_batched", lambda: nats_produce_async_batched(nats_url, n, body, window=window)),
            ("nats_produce_sync", lambda: nats_produce_sync(nats_url, n, body)),
            ("nats_consume_pull", lambda: nats_consume_pull(nats_url, n, body, batch=fetch_batch, ack=nats_ack)),
        ]
        if latency:
            jobs.append(("nats_latency", lambda: nats_latency(nats_url, rate, seconds, body, warmup=warmup)))
    results: dict[str, Figures] = {}
    for name, job in jobs:
        results[name] = job()
        if report is not None:
            report(name, results[name])
    return results


_COLUMNS: list[tuple[str, str, str]] = [  # (figure key, heading, format)
    ("msg_per_s", "msg/s", "{:,.0f}"),
    ("p50_ms", "p50 ms", "{:.3f}"),
    ("p99_ms", "p99 ms", "{:.3f}"),
    ("p999_ms", "p99.9 ms", "{:.3f}"),
    ("count", "samples", "{:,.0f}"),
    ("sent_per_s", "sent/s", "{:,.0f}"),
]
_NAME_WIDTH = 28
_COL_WIDTH = 12


def format_header() -> str:
    cells = "".join(f"{heading:>{_COL_WIDTH}}" for _, heading, _ in _COLUMNS)
    line = f"{'benchmark':<{_NAME_WIDTH}}{cells}"
    return f"{line}\n{'-' * len(line)}"


def format_row(name: str, figures: Figures) -> str:
    cells = "".join(
        f"{(fmt.format(figures[key]) if key in figures else '-'):>{_COL_WIDTH}}" for key, _, fmt in _COLUMNS
    )
    return f"{name:<{_NAME_WIDTH}}{cells}"


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Show defaults and keep the description's and epilog's line breaks."""


_DESCRIPTION = """\
Measure Redis Streams and NATS JetStream from Python, side by side, and print one table.

Starts a throw-away redis-server (AOF, appendfsync everysec, no RDB) and nats-server -js (file storage) on free
ports of 127.0.0.1, each in its own temp dir, and kills/removes them afterwards (bench/servers.py). Clients:
redis-py + hiredis, nats-py (asyncio). Figures are only as good as one Python client process on this machine.
"""

_EPILOG = """\
rows (one function each in bench/peers.py):
  redis_produce_pipelined     XADD via pipeline(transaction=False), --batch per execute(); until last reply
  redis_produce_sync          one XADD per round trip
  redis_consume               pre-fill --messages entries (not timed); time XREAD COUNT 1000 from 0-0 to the end
  redis_latency               paced XADD at --rate -> XREAD BLOCK 1000 on another thread/connection
  nats_produce_async_batched  js.publish_async with at most --window awaiting PubAck; until the last PubAck
  nats_produce_sync           await js.publish() one at a time
  nats_consume_pull           pre-fill (not timed); time fetch(--fetch-batch) until all arrived, --nats-ack
  nats_latency                paced js.publish at --rate -> push consumer (ack none) on another thread/loop

throughput rows report msg/s over --messages messages of --body-size bytes (stream created before timing,
checked and deleted after). Latency rows: receive time - send time (perf_counter_ns stamped in the body just
before sending), samples from the first --warmup seconds dropped, nearest-rank p50/p99/p99.9 in ms, the
number of samples kept, and sent/s = the rate the producer achieved (below --rate: it could not keep up, since
each send waits for its reply).
"""


def main(argv: Sequence[str] | None = None) -> int:
    # Imported here so that importing the measurement functions needs no server helpers.
    from bench.servers import REDIS_SERVER_BIN, NatsServer, RedisServer, nats_server_binary, server_version

    parser = argparse.ArgumentParser(
        prog="python -m bench.peers",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--messages", "-n", type=int, default=50_000, help="messages per throughput benchmark")
    parser.add_argument("--body-size", type=int, default=1024, help="message body size in bytes (>= 16)")
    parser.add_argument("--batch", type=int, default=64, help="Redis: XADDs per pipeline execute()")
    parser.add_argument("--window", type=int, default=256, help="NATS: max JetStream publishes awaiting PubAck")
    parser.add_argument("--fetch-batch", type=int, default=256, help="NATS: messages per pull fetch()")
    parser.add_argument(
        "--nats-ack",
        choices=("all", "none"),
        default="all",
        help="NATS pull consumer ack policy: 'all' = AckPolicy.ALL, one ack per fetched batch; 'none' = no acks",
    )
    parser.add_argument("--rate", type=float, default=5000.0, help="latency: producer rate in msg/s")
    parser.add_argument("--seconds", type=float, default=5.0, help="latency: measured seconds (after warm-up)")
    parser.add_argument("--warmup", type=float, default=1.0, help="latency: seconds sent before samples are kept")
    parser.add_argument("--no-latency", action="store_true", help="skip the latency benchmarks")
    parser.add_argument(
        "--peers", nargs="+", choices=("redis", "nats"), default=["redis", "nats"], help="which peers to run"
    )
    args = parser.parse_args(argv)
    if args.messages < 1 or args.body_size < _STAMP.size:
        parser.error(f"--messages must be >= 1 and --body-size >= {_STAMP.size}")

    body = os.urandom(args.body_size)
    nats_bin = nats_server_binary() if "nats" in args.peers else ""
    print(
        f"peers: {args.messages:,} messages of {args.body_size} B; latency {args.rate:,.0f} msg/s for "
        f"{args.warmup:g}+{args.seconds:g} s; python {sys.version.split()[0]}"
    )
    if "redis" in args.peers:
        print(
            f"redis: {server_version(REDIS_SERVER_BIN)}; redis-py {redis.__version__}, "
            f"hiredis {'yes' if redis.utils.HIREDIS_AVAILABLE else 'NO'}"
        )
    if "nats" in args.peers:
        print(f"nats:  {server_version(nats_bin)} ({nats_bin}); nats-py {nats.aio.client.__version__}")
    print()
    print(format_header(), flush=True)

    with contextlib.ExitStack() as stack:
        redis_url = stack.enter_context(RedisServer()).url if "redis" in args.peers else None
        nats_url = stack.enter_context(NatsServer(nats_bin)).url if "nats" in args.peers else None
        run_peers(
            redis_url,
            nats_url,
            args.messages,
            body,
            batch=args.batch,
            window=args.window,
            fetch_batch=args.fetch_batch,
            nats_ack=args.nats_ack,
            rate=args.rate,
            seconds=args.seconds,
            warmup=args.warmup,
            latency=not args.no_latency,
            report=lambda name, figures: print(format_row(name, figures), flush=True),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
