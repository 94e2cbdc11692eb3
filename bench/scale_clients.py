"""Many idle clients for ``bench.scale``'s connections curve, in a process of their own (one asyncio loop).

``python -m bench.scale_clients BROKER_ADDR N TOPIC INTERVAL_S``: N connections, each one client (its own
clientID) sending HEART_BEAT every INTERVAL_S seconds (RocketMQ's heartbeatBrokerInterval is 30 s): even ones
as producers (group ``scale-p``), odd ones as push consumers of TOPIC: the first 100 in ``scale-big``, the others
in 100 groups (``scale-g0`` .. ``scale-g99``). Prints ``READY n=N`` once all have sent a first heartbeat.

Then reads commands from stdin, one per line:

- ``JOIN``: one more consumer joins ``scale-big`` (100 members from 200 connections on) and the line
  ``REBALANCE ms=<t> members=<m> notified=<k>/<n>`` is printed: from the newcomer's HEART_BEAT until every
  earlier member of the group had NOTIFY_CONSUMER_IDS_CHANGED (40) and one GET_CONSUMER_LIST_BY_GROUP (38)
  answered with the new member list, as a client's rebalance starts (the allocation after it is local).
- ``QUIT``: close everything and exit.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from broker_core.protocol import RemotingCommand, RequestCode
from broker_core.remoting.client import RemotingClient

GROUPS = 100


BIG = "scale-big"


def group_of(index: int) -> str:
    """"" for a producer (even index), else the consumer group of connection ``index``."""
    if index % 2 == 0:
        return ""
    k = index // 2
    return BIG if k < GROUPS else f"scale-g{k % GROUPS}"


def heartbeat(client_id: str, group: str, topic: str) -> bytes:
    data: dict[str, Any] = {"clientID": client_id, "producerDataSet": [], "consumerDataSet": []}
    if not group:
        data["producerDataSet"] = [{"groupName": "scale-p"}]
    else:
        data["consumerDataSet"] = [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
            "subscriptionDataSet": [{"topic": topic, "subString": "*", "tagsSet": [], "codeSet": [],
                                     "subVersion": int(time.time() * 1000), "expressionType": "TAG",
                                     "classFilterMode": False}]}]
    return json.dumps(data).encode()


class Client:
    def __init__(self, index: int, addr: str, topic: str, group: str | None = None) -> None:
        self.index, self.addr, self.topic = index, addr, topic
        self.group = group_of(index) if group is None else group
        self.client_id = f"127.0.0.1@scale{index}"
        self.notified = asyncio.Event()
        self.remoting = RemotingClient(on_request=self._on_request)

    def _on_request(self, addr: str, cmd: RemotingCommand) -> None:
        if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            self.notified.set()

    async def beat(self) -> None:
        await self.remoting.invoke(self.addr, RemotingCommand.request(
            RequestCode.HEART_BEAT, {}, heartbeat(self.client_id, self.group, self.topic)), 30)

    async def members(self, group: str) -> list[str]:
        resp = await self.remoting.invoke(self.addr, RemotingCommand.request(
            RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}), 30)
        return list(json.loads(resp.body or b"{}").get("consumerIdList", []))


async def main(addr: str, n: int, topic: str, interval: float) -> None:
    clients = [Client(i, addr, topic) for i in range(n)]
    for start in range(0, n, 200):  # connect in steps: a burst of 5k SYNs overflows the accept backlog
        await asyncio.gather(*(c.beat() for c in clients[start:start + 200]))

    async def beat_forever() -> None:
        while True:
            await asyncio.sleep(interval)
            for start in range(0, len(clients), 200):
                await asyncio.gather(*(c.beat() for c in clients[start:start + 200]), return_exceptions=True)

    beating = asyncio.create_task(beat_forever())
    print(f"READY n={n}", flush=True)
    loop = asyncio.get_running_loop()
    while True:
        line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
        if line == "JOIN":
            group = BIG
            old = [c for c in clients if c.group == BIG]
            for c in old:
                c.notified.clear()
            newcomer = Client(len(clients), addr, topic, BIG)
            newcomer.client_id = f"127.0.0.1@scale-new{time.monotonic_ns()}"
            clients.append(newcomer)
            t0 = time.perf_counter()
            await newcomer.beat()
            waits = [asyncio.wait_for(c.notified.wait(), 30) for c in old]
            done = await asyncio.gather(*waits, return_exceptions=True)
            notified = sum(1 for d in done if not isinstance(d, BaseException))
            ids = await old[0].members(group) if old else []
            ms = (time.perf_counter() - t0) * 1000
            print(f"REBALANCE ms={ms:.1f} members={len(ids)} notified={notified}/{len(old)}", flush=True)
        elif line in ("QUIT", ""):
            break
    beating.cancel()
    for c in clients:
        await c.remoting.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])))
