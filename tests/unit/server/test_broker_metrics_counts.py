"""BrokerMetrics' counting of dispatched batches (the only per-message work metrics add): exact counts, bytes and
size buckets per topic and transaction flag, whatever the batch's order; retry and DLQ topics skipped; tables of
several threads summed at scrape."""

from __future__ import annotations

import bisect
import random
import threading

from broker_core.metrics import Tally
from broker_core.server.metrics import SIZE_BUCKETS, BrokerMetrics


def metrics() -> BrokerMetrics:
    m = object.__new__(BrokerMetrics)  # the counting needs no broker: only its tally
    m.inbound = Tally(2 + len(SIZE_BUCKETS) + 2)
    return m


def record(topic: str, size: int, sys_flag: int = 0) -> tuple[object, ...]:
    return (0, size, topic, 0, 0, 0, 0, "", "", sys_flag)


def expected(batch: list[tuple[object, ...]]) -> dict[tuple[str, int], list[int]]:
    out: dict[tuple[str, int], list[int]] = {}
    for _p, size, topic, *_rest, flag in batch:
        assert isinstance(topic, str) and isinstance(size, int) and isinstance(flag, int)
        if topic.startswith(("%RETRY%", "%DLQ%")):
            continue
        row = out.setdefault((topic, flag & 4), [0] * (2 + len(SIZE_BUCKETS) + 2))
        row[0] += 1
        row[1] += size
        row[2 + bisect.bisect_left(SIZE_BUCKETS, size)] += 1
        row[-1] += size
    return out


def test_one_topic_and_bucket_edges() -> None:
    m = metrics()
    sizes = [1, 1024, 1025, 4096, 4097, 524288, 1048576, 2097152, 4194304, 4194305]
    m.arrived([record("T", s) for s in sizes])
    row = m.inbound.snapshot()[("T", 0)]
    assert row == [10, sum(sizes), 2, 2, 2, 1, 1, 1, 1, sum(sizes)]


def test_mixed_batches_match_a_per_message_count() -> None:
    rng = random.Random(7)
    m = metrics()
    batches = []
    for i in range(40):  # small batches (a send at a time) and large ones take different ways
        batch = [record(rng.choice(["A", "B", "%RETRY%g", "%DLQ%g", "C"]), rng.choice([10, 1024, 5000, 600000]),
                        rng.choice([0, 0, 4, 8])) for _ in range(rng.randint(1, 8) if i % 2 else rng.randint(9, 300))]
        batches.append(batch)
        m.arrived(batch)
    assert m.inbound.snapshot() == expected([r for b in batches for r in b])


def test_tables_of_threads_are_summed() -> None:
    m = metrics()
    batch = [record("T", 100)] * 50

    def work() -> None:
        for _ in range(10):
            m.arrived(batch)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert m.inbound.snapshot()[("T", 0)][:2] == [2000, 200000]
