"""Shared pieces of the HA suites (no tests here): a master and slaves of one broker group as real processes,
their runtime figures, and the CommitLog files to compare."""

from __future__ import annotations

from pathlib import Path

from broker_core.client import AdminClient
from tests.integration.cluster import BrokerProcess, wait_until

GROUP = "broker-ha"
MASTER_CONF = "haListenPort=0\n"
SLAVE_CONF = "haListenPort=0\nbrokerRole=SLAVE\nslaveSynchronizeInterval=500\n"


def broker(tmp: Path, namesrv: str, tag: str, conf: str) -> BrokerProcess:
    """A broker of the HA group under ``tmp/tag`` (its own directory: master and slaves share a name)."""
    (tmp / tag).mkdir(parents=True, exist_ok=True)
    return BrokerProcess(GROUP, tmp / tag / "store", namesrv, tmp / f"{tag}.log", conf)


def master(tmp: Path, namesrv: str, role: str = "ASYNC_MASTER", extra: str = "") -> BrokerProcess:
    return broker(tmp, namesrv, "master", f"{MASTER_CONF}brokerRole={role}\n{extra}")


def slave(tmp: Path, namesrv: str, broker_id: int = 1, extra: str = "") -> BrokerProcess:
    return broker(tmp, namesrv, f"slave{broker_id}", f"{SLAVE_CONF}brokerId={broker_id}\n{extra}")


def runtime(admin: AdminClient, addr: str) -> dict[str, str]:
    return {k: str(v) for k, v in admin.broker_runtime(addr).items()}


def max_offset(admin: AdminClient, addr: str) -> int:
    return int(runtime(admin, addr)["commitLogMaxOffset"])


def wait_caught_up(admin: AdminClient, m: BrokerProcess, s: BrokerProcess, timeout: float = 120) -> int:
    """Wait until the slave's CommitLog ends where the master's does; returns that offset."""
    end = max_offset(admin, m.addr)
    wait_until(lambda: max_offset(admin, s.addr) == end, timeout, f"slave {s.addr} to reach {end}")
    return end


def wait_connected(admin: AdminClient, m: BrokerProcess, slaves: int = 1) -> None:
    wait_until(lambda: int(runtime(admin, m.addr)["haConnections"]) == slaves, 60,
               f"{slaves} slave(s) to connect to {m.addr}")


def commit_log(store_dir: Path) -> dict[str, bytes]:
    """``{segment name: bytes}`` of a (stopped) broker's CommitLog."""
    return {p.name: p.read_bytes() for p in sorted((store_dir / "commitlog").iterdir())}


def read_all(namesrv: str, topic: str, group: str, expected: int, timeout: float = 120) -> list[bytes]:
    """Every message body of ``topic``, pulled from offset 0 of each queue by the SDK as it finds the brokers
    (with the master down: from the slave): at least ``expected`` (waited for up to ``timeout``), then whatever
    else is there."""
    from broker_core.client import ClientError, PullConsumer

    consumer = PullConsumer(group, namesrv).start()
    try:
        queues = consumer.fetch_queues(topic)
        offsets = dict.fromkeys(queues, 0)
        bodies: list[bytes] = []

        def more() -> bool:
            for mq in queues:
                try:
                    res = consumer.pull(mq, offsets[mq], 256)
                except (ClientError, ConnectionError, TimeoutError):
                    continue  # the master refusing connections (the next pull goes to the slave), no topic yet
                bodies.extend(m.body for m in res.messages)
                offsets[mq] = res.next_begin_offset
            return len(bodies) >= expected

        wait_until(more, timeout, f"{expected} messages of {topic}")
        while True:  # drain
            before = len(bodies)
            more()
            if len(bodies) == before:
                return bodies
    finally:
        consumer.shutdown()


def wait_synced(admin: AdminClient, s: BrokerProcess) -> None:
    """Wait until the slave has copied the master's metadata (topics, offsets, groups) from this point on: two
    more rounds of its SlaveSynchronize (the first may have begun before the caller's last change)."""
    start = int(runtime(admin, s.addr).get("haSlaveSyncRounds", "0"))
    wait_until(lambda: int(runtime(admin, s.addr).get("haSlaveSyncRounds", "0")) >= start + 2, 60,
               f"slave {s.addr} to copy its master's metadata")
