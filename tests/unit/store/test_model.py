"""Model-based test: random appends across topics and queues, with restarts, checked against a list
per queue and a dict per key."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker_core.store import GetStatus, MessageStore
from broker_core.store.clock import ManualClock
from broker_core.store.message import MessageInner
from tests.conftest import small_config

TOPICS = ["alpha", "beta", "%RETRY%g1"]


class StoreModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.dir = tempfile.mkdtemp(prefix="model-")
        self.clock = ManualClock()
        self.config = small_config(self.dir, mapped_file_size_commit_log_bytes=16 * 1024, max_index_num=64)
        self.store = MessageStore(self.config, self.clock, background=False).start()
        self.queues: dict[tuple[str, int], list[bytes]] = {}
        self.keys: dict[tuple[str, str], list[bytes]] = {}
        self.n = 0

    @rule(topic=st.sampled_from(TOPICS), queue_id=st.integers(0, 3), size=st.integers(0, 3000),
          key=st.sampled_from(["", "k1", "k2", "k3 k1"]))
    def put(self, topic, queue_id, size, key):
        self.n += 1
        body = (b"%d:" % self.n) + b"x" * size
        self.clock.advance(7)
        r = self.store.put_message(MessageInner(topic, body, queue_id, keys=key or None))
        assert r.ok, r
        self.queues.setdefault((topic, queue_id), []).append(body)
        for k in key.split():
            self.keys.setdefault((topic, k), []).append(body)

    @rule(batch=st.lists(st.tuples(st.sampled_from(TOPICS), st.integers(0, 3)), min_size=1, max_size=20))
    def put_batch(self, batch):
        msgs = []
        for topic, qid in batch:
            self.n += 1
            body = b"b%d" % self.n
            msgs.append(MessageInner(topic, body, qid))
            self.queues.setdefault((topic, qid), []).append(body)
        assert all(r.ok for r in self.store.put_messages(msgs))

    @precondition(lambda self: self.n > 0)
    @rule()
    def reopen(self):
        self.store.shutdown()
        self.store = MessageStore(self.config, self.clock, background=False).start()

    @invariant()
    def queues_match(self):
        self.store.dispatch()
        for (topic, qid), expected in self.queues.items():
            got, offset = [], 0
            while True:
                res = self.store.get_message(topic, qid, offset, 16)
                if res.status is not GetStatus.FOUND:
                    break
                got.extend(m.body for m in res.messages)
                offset = res.next_begin_offset
            assert got == expected, (topic, qid)
            assert self.store.get_max_offset_in_queue(topic, qid) == len(expected)

    @invariant()
    def keys_match(self):
        self.store.dispatch()
        for (topic, key), expected in self.keys.items():
            res = self.store.query_message(topic, key, max_num=1000)
            assert [m.body for m in res.messages] == list(reversed(expected)), (topic, key)

    def teardown(self):
        self.store.shutdown()
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


StoreModel.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestStoreModel = StoreModel.TestCase
