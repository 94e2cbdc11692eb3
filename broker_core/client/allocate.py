"""Queue allocation strategies for clustering consumers (INVENTORY §17).

Both take the sorted queue list and the sorted consumer id list and return this consumer's share; every
queue goes to exactly one consumer, and extra consumers get nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


class AllocateMessageQueueAveragely:
    """Contiguous blocks: the first ``n_mq % n_cid`` consumers take one queue more."""

    name = "AVG"

    def allocate(self, me: str, mq_all: Sequence[T], cid_all: Sequence[str]) -> list[T]:
        if me not in cid_all or not mq_all:
            return []
        index = cid_all.index(me)
        n_mq, n_cid = len(mq_all), len(cid_all)
        mod = n_mq % n_cid
        if n_mq <= n_cid:
            avg = 1
        elif mod > 0 and index < mod:
            avg = n_mq // n_cid + 1
        else:
            avg = n_mq // n_cid
        start = index * avg if mod > 0 and index < mod else index * avg + mod
        size = min(avg, n_mq - start)
        return [mq_all[(start + i) % n_mq] for i in range(max(size, 0))]


class AllocateMessageQueueByCircle:
    """Round robin: queue ``i`` goes to consumer ``i % n_cid``."""

    name = "AVG_BY_CIRCLE"

    def allocate(self, me: str, mq_all: Sequence[T], cid_all: Sequence[str]) -> list[T]:
        if me not in cid_all:
            return []
        index = cid_all.index(me)
        return [mq for i, mq in enumerate(mq_all) if i % len(cid_all) == index]
