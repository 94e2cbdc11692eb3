"""The broker asks a real Apache RocketMQ C++ client (PyPI ``rocketmq`` 0.4.4, its own virtualenv, driven by
``cpp_client.py``) over the client's own connection: GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY
(309), forwarded by our broker, decoded by our SDK. The C++ client answers 307; its ClientRemotingProcessor has
no 309 (``consumeMessageDirectly`` is Java-only), so the broker answers 207 CONSUME_MSG_TIMEOUT after its 10 s, as a
Java broker does for a client that stays silent; 221 (consumer status) likewise goes unanswered and the client is
left out of 223's table."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from broker_core.client import AdminClient, ClientError, Message, Producer
from tests.compat.cpp_driver import CPP_DRIVER, CPP_PYTHON, last_json, one_broker_cluster
from tests.integration.cluster import Cluster, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from one_broker_cluster(tmp_path_factory, "cppcalls", "autoCreateTopicEnable=true\n")


def test_cpp_push_consumer_answers_running_info_and_direct_consumption(cluster: Cluster) -> None:
    with AdminClient(cluster.namesrv) as admin:
        admin.create_topic("CPPCALLS", 2, 2)
        with Producer("cpp-calls-producer", cluster.namesrv) as p:
            first = p.send(Message("CPPCALLS", b"first", tags="TagA"))
        # the C++ consumer takes the first message, then waits for one more (the direct one)
        cmd = {"op": "push", "namesrv": cluster.namesrv, "group": "cpp-calls", "topic": "CPPCALLS",
               "expression": "TagA", "expect": 2, "timeout": 90, "settle": 0}
        proc = subprocess.Popen([str(CPP_PYTHON), str(CPP_DRIVER), json.dumps(cmd)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=cluster.tmp)
        try:
            client_id = ""

            def online() -> bool:
                nonlocal client_id
                conns = admin.consumer_connections("cpp-calls")
                client_id = conns[0]["clientId"] if conns else ""
                return bool(client_id)
            wait_until(online, 60, "the C++ consumer online")
            conn = admin.consumer_connections("cpp-calls")[0]
            assert conn["language"] == "CPP"

            def has_queues() -> bool:
                try:
                    info = admin.client_running_info("cpp-calls", client_id)
                except ClientError:
                    return False
                return any(mq[0] == "CPPCALLS" for mq in info.mq_table)
            wait_until(has_queues, 60, "the C++ consumer's running info lists its queues")
            info = admin.client_running_info("cpp-calls", client_id)
            assert {s["topic"] for s in info.subscriptions} >= {"CPPCALLS"}
            assert sorted(q for t, _, q in info.mq_table if t == "CPPCALLS") == [0, 1]
            assert info.properties  # the C++ client's own keys
            # nor does it serve 221 GET_CONSUMER_STATUS_FROM_CLIENT: after the broker's 5 s it is left out, as Java's
            assert admin.client_consumer_status("CPPCALLS", "cpp-calls") == {}

            with Producer("cpp-calls-producer-2", cluster.namesrv) as p:
                direct = p.send(Message("CPPCALLS", b"direct", tags="TagZ"))  # not subscribed
                with pytest.raises(ClientError) as refused:
                    admin.consume_message_directly("cpp-calls", client_id, direct.offset_msg_id, "CPPCALLS")
                assert refused.value.code == 207  # CONSUME_MSG_TIMEOUT
                assert f"consumer <cpp-calls> <{client_id}> Timeout" in str(refused.value)
                second = p.send(Message("CPPCALLS", b"second", tags="TagA"))
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, err.decode()[-3000:]
        bodies = sorted(m["id"] for m in last_json(out)["messages"])
        assert bodies == sorted([first.msg_id, second.msg_id])  # the direct one never reached the listener
