"""The topic table's serialized forms kept incrementally, and the thread that writes ``topics.json``.

At 50k topics, encoding the whole table costs ~0.5 s of Python and the deflate of the registration body ~0.1 s;
done on the event loop at every change they stalled every request. Here:

- each topic's text in each form (``topics.json``'s pretty entry, the compact entry of GET_ALL_TOPIC_CONFIG,
  the compressed registration's framed ``TopicConfig.encode`` line, the plain registration's 4.x entry) is
  rendered once per config object and cached (:class:`Fragments`), so a whole file or body is a join of
  cached strings in the sorted name order the manager keeps incrementally (:class:`TopicSnapshot`);
- :class:`TopicsFileWriter` writes ``topics.json`` on its own thread with coalescing: a change records the
  latest snapshot and wakes the writer; the writer always writes the newest snapshot it finds (several changes
  during one write become the next single write; the last state always wins) and then releases every waiter
  whose change that snapshot holds.

Invariants:

1. Configs are replaced, never mutated in place (the manager swaps the table on every change), so a cached
   fragment is valid while its cache entry holds the very config object the snapshot has (identity check).
2. A snapshot's ``seq`` counts changes; a snapshot holds every change with a smaller or equal ``seq``. A
   waiter for ``seq`` is released only after a snapshot with ``seq`` or more was written and synced.
3. Each write is ``write_config_file`` (``.tmp`` fsynced, old content to ``.bak``, rename, directory fsync):
   a crash leaves the previous or the new file, never a torn one. A failed write releases the waiters it
   covered with the ``OSError``; the table in memory keeps the change (as before this module, when the write
   ran in the caller) and the next change writes again.

Crash behaviour: a change whose waiter was released survives a kill -9 and a power loss; a change made in
memory whose write had not finished when the process died is lost with the process, like any unacknowledged
request (the admin handlers answer only after their waiter is released).
"""

from __future__ import annotations

import asyncio
import errno
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from broker_core.codec.config_file import write_config_file
from broker_core.codec.fastjson import _encode_str, dumps_fastjson

T = TypeVar("T")


@dataclass(frozen=True)
class TopicSnapshot:
    """One consistent state of the table: the dict (never mutated once published), its names sorted, the
    DataVersion it carries and the change count ``seq``."""

    table: dict[str, Any]
    names: list[str]
    counter: int
    timestamp: int
    seq: int


class Fragments(Generic[T]):
    """Per-topic rendered text, cached by topic name and valid for the config object it was rendered from."""

    def __init__(self, render: Callable[[Any], T]) -> None:
        self._render = render
        self._cache: dict[str, tuple[Any, T]] = {}

    def of(self, name: str, cfg: Any) -> T:
        hit = self._cache.get(name)
        if hit is not None and hit[0] is cfg:
            return hit[1]
        text = self._render(cfg)
        self._cache[name] = (cfg, text)
        return text

    def join(self, snap: TopicSnapshot) -> list[T]:
        table, of = snap.table, self.of
        return [of(name, table[name]) for name in snap.names]

    def forget(self, names: list[str]) -> None:
        for name in names:
            self._cache.pop(name, None)


def _plain(cfg: Any) -> bool:
    """The common case whose fast templates below equal fastjson's output: exact scalar types."""
    return (type(cfg.order) is bool and type(cfg.perm) is int and type(cfg.read_queue_nums) is int
            and type(cfg.write_queue_nums) is int and type(cfg.topic_sys_flag) is int
            and type(cfg.topic_filter_type) is str and type(cfg.topic_name) is str)


def _b(v: bool) -> str:
    return "true" if v else "false"


def pretty_entry(cfg: Any, as_json: Callable[[Any], dict[str, Any]]) -> str:
    """``topics.json``'s entry of one topic as ``dumps_fastjson(wrapper, pretty=True)`` writes it inside
    ``topicConfigTable`` (depth 2: two tabs), leading newline and indent included."""
    name = _encode_str(cfg.topic_name)
    if type(cfg).__name__ == "TopicConfig" and _plain(cfg) and type(cfg.auto_created) is bool:
        auto = "\n\t\t\t\"autoCreated\":true," if cfg.auto_created else ""
        return (f"\n\t\t{name}:{{{auto}\n\t\t\t\"order\":{_b(cfg.order)},\n\t\t\t\"perm\":{cfg.perm},"
                f"\n\t\t\t\"readQueueNums\":{cfg.read_queue_nums},"
                f"\n\t\t\t\"topicFilterType\":{_encode_str(cfg.topic_filter_type)},\n\t\t\t\"topicName\":{name},"
                f"\n\t\t\t\"topicSysFlag\":{cfg.topic_sys_flag},\n\t\t\t\"writeQueueNums\":{cfg.write_queue_nums}"
                "\n\t\t}")
    return pretty_entry_of(cfg.topic_name, as_json(cfg))


def pretty_entry_of(name: str, obj: dict[str, Any]) -> str:
    """A table entry ``name: obj`` as ``dumps_fastjson(wrapper, pretty=True)`` writes it at depth 2."""
    return f"\n\t\t{_encode_str(name)}:" + dumps_fastjson(obj, pretty=True).replace("\n", "\n\t\t")


def compact_entry(cfg: Any, as_json: Callable[[Any], dict[str, Any]]) -> str:
    """The same entry in the compact form (GET_ALL_TOPIC_CONFIG's body)."""
    return _encode_str(cfg.topic_name) + ":" + dumps_fastjson(as_json(cfg))


def registration_entry(cfg: Any) -> str:
    """The plain REGISTER_BROKER body's entry: RocketMQ 4.x's seven keys, normalised as the name server reads
    them (``order`` and ``topicSysFlag`` included; ``autoCreated`` never)."""
    name = str(cfg.topic_name)
    return _encode_str(name) + ":" + dumps_fastjson({
        "order": bool(cfg.order), "perm": int(cfg.perm), "readQueueNums": int(cfg.read_queue_nums),
        "topicFilterType": str(cfg.topic_filter_type or "SINGLE_TAG"), "topicName": name,
        "topicSysFlag": int(cfg.topic_sys_flag or 0), "writeQueueNums": int(cfg.write_queue_nums)})


def framed_line(cfg: Any) -> bytes:
    """``[i32 n]["topicName readQueueNums writeQueueNums perm topicFilterType"]`` (``TopicConfig.encode``)."""
    line = (f"{cfg.topic_name} {int(cfg.read_queue_nums)} {int(cfg.write_queue_nums)} {int(cfg.perm)} "
            f"{cfg.topic_filter_type or 'SINGLE_TAG'}").encode()
    return struct.pack(">i", len(line)) + line


def file_text(snap: TopicSnapshot, entries: list[str]) -> str:
    """``topics.json``: ``dumps_fastjson(wrapper, pretty=True)`` of the snapshot, joined from its entries."""
    head = (f"{{\n\t\"dataVersion\":{{\n\t\t\"counter\":{int(snap.counter)},\n\t\t\"timestamp\":"
            f"{int(snap.timestamp)}\n\t}},\n\t\"topicConfigTable\":")
    return head + ("{" + ",".join(entries) + "\n\t}" if entries else "{}") + "\n}"


def compact_text(snap: TopicSnapshot, entries: list[str]) -> str:
    return (f"{{\"dataVersion\":{{\"counter\":{int(snap.counter)},\"timestamp\":{int(snap.timestamp)}}},"
            f"\"topicConfigTable\":{{{','.join(entries)}}}}}")


def wrapper_text(key: str, counter: int, timestamp: int, entries: list[str], pretty: bool) -> str:
    """``{"dataVersion":{...}, key:{entries}}`` as ``dumps_fastjson`` writes such a wrapper, compact or pretty,
    from entries rendered by :func:`compact_entry` / :func:`pretty_entry_of` (the subscription-group table's)."""
    if not pretty:
        return (f"{{\"dataVersion\":{{\"counter\":{int(counter)},\"timestamp\":{int(timestamp)}}},"
                f"{_encode_str(key)}:{{{','.join(entries)}}}}}")
    head = (f"{{\n\t\"dataVersion\":{{\n\t\t\"counter\":{int(counter)},\n\t\t\"timestamp\":"
            f"{int(timestamp)}\n\t}},\n\t{_encode_str(key)}:")
    return head + ("{" + ",".join(entries) + "\n\t}" if entries else "{}") + "\n}"


class TopicsFileWriter:
    """Writes the newest snapshot to ``path`` on a thread of its own, started on demand and ended when idle."""

    def __init__(self, path: Path, render: Callable[[TopicSnapshot], str]) -> None:
        self.path = path
        self._render = render
        self._cond = threading.Condition()
        self._latest: TopicSnapshot | None = None  # newest snapshot asked to be written
        self._written = 0  # seq of the newest snapshot written and synced (0: the file read or written at start)
        self._failed: tuple[int, OSError] | None = None  # (seq, error) of the last failed write
        self._waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._thread: threading.Thread | None = None
        self.writes = 0  # files written (tests and figures: a burst of changes costs few writes)

    def submit(self, snap: TopicSnapshot) -> None:
        with self._cond:
            if self._latest is None or snap.seq > self._latest.seq:
                self._latest = snap
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="topics-json", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                snap = self._latest
                if snap is None or snap.seq <= self._written:
                    self._thread = None
                    return
            error: OSError | None = None
            try:
                write_config_file(self.path, self._render(snap))
            except OSError as exc:  # invariant 3: reported to the waiters this write covered
                error = exc
            except (TypeError, ValueError) as exc:  # a config that cannot be encoded: its waiters fail, as above
                error = OSError(errno.EINVAL, f"{self.path} not written: {exc}")
            with self._cond:
                self.writes += 1
                if error is None:
                    self._written = max(self._written, snap.seq)
                else:
                    self._failed = (snap.seq, error)
                    if self._latest is snap:
                        self._latest = None  # not retried until the next change
                self._release(snap.seq, error)
                self._cond.notify_all()

    def _release(self, seq: int, error: OSError | None) -> None:
        keep = []
        for want, loop, fut in self._waiters:
            if want <= seq:
                loop.call_soon_threadsafe(_settle, fut, error)
            else:
                keep.append((want, loop, fut))
        self._waiters = keep

    def _error_for(self, seq: int) -> OSError | None:
        if self._written >= seq:
            return None
        failed = self._failed
        if failed is not None and failed[0] >= seq and (self._latest is None or self._latest.seq <= failed[0]):
            return failed[1]
        return None

    def wait(self, seq: int) -> None:
        """Block until the change ``seq`` is in a synced ``topics.json``; its write's ``OSError`` if it failed."""
        with self._cond:
            while self._written < seq:
                error = self._error_for(seq)
                if error is not None:
                    raise error
                self._cond.wait(1.0)

    async def durable(self, seq: int) -> None:
        """:meth:`wait` for the event loop: a future the writer settles, no thread parked meanwhile."""
        loop = asyncio.get_running_loop()
        with self._cond:
            if self._written >= seq:
                return
            error = self._error_for(seq)
            if error is not None:
                raise error
            fut: asyncio.Future[None] = loop.create_future()
            self._waiters.append((seq, loop, fut))
        await fut


def _settle(fut: asyncio.Future[None], error: OSError | None) -> None:
    if fut.done():
        return
    if error is None:
        fut.set_result(None)
    else:
        fut.set_exception(error)
