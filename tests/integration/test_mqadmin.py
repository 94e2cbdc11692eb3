"""mqadmin against a real name server and broker: each command's output compared with its golden file
(tests/golden/mqadmin/, RocketMQ 4.9's layouts; addresses, ids and times replaced by <TOKENS>), usage and error
exits, and a runbook session (create a topic, send, consume, consumer progress, reset by time).

Set MQADMIN_WRITE_GOLDEN=1 to rewrite the golden files from a run (then read the diff before committing)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.client import ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from broker_core.remoting.client import run_sync
from broker_core.tools.mqadmin import main
from tests.conftest import GOLDEN, ROOT
from tests.integration.cluster import ENV, Cluster, wait_until

pytestmark = pytest.mark.integration

GOLDEN_DIR = GOLDEN / "mqadmin"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("mqadmin"))
    try:
        c.add_brokers_registered({"broker-a": ""})
        yield c
    finally:
        c.close()


@pytest.fixture(autouse=True)
def body_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """queryMsgById writes bodies under the temp directory (RocketMQ: /tmp/rocketmq/msgbodys): keep them here."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def run(cluster: Cluster, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main([*args, "-n", cluster.namesrv] if "-n" not in args else list(args), out, err,
              env={} if env is None else env)
    return rc, out.getvalue(), err.getvalue()


def ok(cluster: Cluster, *args: str) -> str:
    rc, out, err = run(cluster, *args)
    assert rc == 0, f"mqadmin {' '.join(args)} exited {rc}: {err}"
    return out


def normalize(text: str, cluster: Cluster) -> str:
    """Addresses, ids and times as <TOKENS>; a token inside a padded column keeps the column's width."""
    rules = [(re.escape(cluster.brokers["broker-a"].addr), "<BROKER>"), (re.escape(cluster.namesrv), "<NAMESRV>"),
             (r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", "<TIME_MS>"), (r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "<TIME>"),
             (r"\b[0-9A-F]{32}\b", "<MSGID>"), (r"\d+\.\d+\.\d+\.\d+@\S+", "<CLIENT_ID>"),
             (r"\d+\.\d+\.\d+\.\d+:\d+", "<HOST>"), (r"(?<=Timestamp=)\d+", "<MS>"), (r"\b\d{13}(?=/)", "<MS>"),
             (r"(?<=Message Body Path:   )\S+", "<PATH>")]
    for pattern, token in rules:
        text = re.sub(pattern + r"(?= )|" + pattern, lambda m, t=token: (
            t.ljust(len(m.group())) if m.end() < len(m.string) and m.string[m.end()] == " " else t), text)
    return text


def golden(name: str, text: str) -> None:
    path = GOLDEN_DIR / f"{name}.txt"
    if os.environ.get("MQADMIN_WRITE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file {path}"
    assert text == path.read_text(), f"mqadmin output differs from {path}:\n{text}"


def check(cluster: Cluster, name: str, *args: str) -> str:
    out = normalize(ok(cluster, *args), cluster)
    golden(name, out)
    return out


@pytest.fixture(scope="module")
def sent(cluster: Cluster) -> list[str]:
    """Topic GoldenT (2 queues) with three messages in queue 0, each with a key (their unique ids), and one without
    in queue 1."""
    ok(cluster, "updateTopic", "-c", "DefaultCluster", "-t", "GoldenT", "-r", "2", "-w", "2")
    ids = []
    for i in range(3):
        out = ok(cluster, "sendMessage", "-t", "GoldenT", "-p", f"body-{i}", "-k", f"key-{i}", "-c", "TagA",
                 "-b", "broker-a", "-i", "0")
        ids.append(out.splitlines()[1].split()[-1])
    check(cluster, "sendMessage", "sendMessage", "-t", "GoldenT", "-p", "extra", "-b", "broker-a", "-i", "1")
    return ids


# ---------------------------------------------------------------------- usage and errors
def test_command_list_and_help_layout(cluster: Cluster) -> None:
    out_io = io.StringIO()
    assert main([], out_io, io.StringIO(), env={}) == 0
    out = out_io.getvalue()
    assert out.startswith("The most commonly used mqadmin commands are:\n"
                          "   updateTopic          Update or create topic\n")
    for name in ("updateTopic", "deleteTopic", "topicList", "topicRoute", "topicStatus", "topicClusterList",
                 "updateSubGroup", "deleteSubGroup", "consumerProgress", "consumerConnection", "producerConnection",
                 "consumerStatus", "queryMsgById", "queryMsgByKey", "queryMsgByUniqueKey", "queryMsgByOffset",
                 "printMsg", "sendMessage", "consumeMessage", "resetOffsetByTime", "skipAccumulatedMessage",
                 "clusterList", "brokerStatus", "getBrokerConfig", "updateBrokerConfig", "wipeWritePerm",
                 "addWritePerm", "cleanExpiredCQ", "deleteExpiredCommitLog", "statsAll", "updateAclConfig",
                 "deleteAclConfig", "clusterAclConfigVersion", "updateGlobalWhiteAddr"):
        assert f"   {name} " in out
        rc, usage, _ = run(cluster, "help", name, "-n", cluster.namesrv)
        assert rc == 0 and usage.startswith(f"usage: mqadmin {name} ")
    golden("help_updateTopic", run(cluster, "help", "updateTopic", "-n", "x")[1])
    golden("help_consumerProgress", run(cluster, "help", "consumerProgress", "-n", "x")[1])


def test_usage_errors_exit_1_and_say_what_was_wrong(cluster: Cluster) -> None:
    rc, _out, err = run(cluster, "topicRoute")
    assert rc == 1 and "Missing required option: -t/--topic" in err and "usage: mqadmin topicRoute" in err
    rc, _out, err = run(cluster, "updateTopic", "-t", "X")
    assert rc == 1 and "give exactly one of -b or -c" in err
    rc, _out, err = run(cluster, "updateTopic", "-t", "X", "-b", "a:1", "-c", "C")
    assert rc == 1 and "(got -b, -c)" in err
    rc, _out, err = run(cluster, "noSuchCommand")
    assert rc == 1 and "The sub command noSuchCommand not exist." in err
    rc, _out, err = run(cluster, "topicList", "--bogus")
    assert rc == 1 and "Unrecognized option: --bogus" in err
    assert main(["topicList"], io.StringIO(), io.StringIO(), env={}) == 1  # no -n, no NAMESRV_ADDR
    rc, _out, err = run(cluster, "updateTopic", "-c", "DefaultCluster", "-t", "X", "-r", "many")
    assert rc == 1 and "-r/--readQueueNums needs a number, not 'many'" in err


def test_refusals_exit_2_and_name_the_cause(cluster: Cluster) -> None:
    rc, _out, err = run(cluster, "topicStatus", "-t", "NoSuchTopic")
    assert rc == 2 and "No topic route info in name server for the topic: NoSuchTopic" in err
    rc, _out, err = run(cluster, "updateTopic", "-c", "NoSuchCluster", "-t", "X")
    assert rc == 2 and "no cluster named NoSuchCluster" in err
    addr = cluster.brokers["broker-a"].addr
    for args, code in ((["updateAclConfig", "-b", addr, "-a", "RocketMQ", "-s", "12345678"], 50),
                       (["deleteAclConfig", "-b", addr, "-a", "RocketMQ"], 51),
                       (["clusterAclConfigVersion", "-c", "DefaultCluster"], 52),
                       (["updateGlobalWhiteAddr", "-b", addr, "-g", "10.10.*"], 53)):
        rc, _out, err = run(cluster, *args)
        assert rc == 2, err  # the broker serves 50-54 only with aclEnable=true (as RocketMQ 5.3.1 answers)
        assert f"mqadmin {args[0]}: [1] The broker does not enable acl." in err, (code, err)


def test_acl_credentials_from_flags_environment_or_tools_yml(tmp_path: Path) -> None:
    from broker_core.tools.mqadmin.cli import UsageError, credentials_from

    assert credentials_from({}, None, None) is None
    c = credentials_from({"ROCKETMQ_ACCESS_KEY": "envAK", "ROCKETMQ_SECRET_KEY": "envSK"}, "flagAK", "flagSK")
    assert c is not None and (c.access_key, c.secret_key) == ("flagAK", "flagSK")
    c = credentials_from({"ROCKETMQ_ACCESS_KEY": "envAK", "ROCKETMQ_SECRET_KEY": "envSK"}, None, None)
    assert c is not None and (c.access_key, c.secret_key) == ("envAK", "envSK")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "tools.yml").write_text("accessKey: ymlAK\nsecretKey: 'ymlSK'\n")
    c = credentials_from({"ROCKETMQ_HOME": str(tmp_path)}, None, None)
    assert c is not None and (c.access_key, c.secret_key) == ("ymlAK", "ymlSK")
    with pytest.raises(UsageError):
        credentials_from({"ROCKETMQ_ACCESS_KEY": "only"}, None, None)


# ---------------------------------------------------------------------- golden output per command
def test_topic_commands(cluster: Cluster, sent: list[str]) -> None:
    check(cluster, "updateTopic_cluster", "updateTopic", "-c", "DefaultCluster", "-t", "GoldenNew", "-r", "4",
          "-w", "4", "-p", "6")
    check(cluster, "updateTopic_broker", "updateTopic", "-b", cluster.brokers["broker-a"].addr, "-t",
          "GoldenNew2", "-r", "2", "-w", "2", "-p", "4")
    assert {"GoldenT", "GoldenNew", "GoldenNew2"} <= set(ok(cluster, "topicList").split())
    check(cluster, "topicList_cluster", "topicList", "-c", "-n", cluster.namesrv)
    check(cluster, "topicRoute", "topicRoute", "-t", "GoldenT")
    check(cluster, "topicRoute_list", "topicRoute", "-t", "GoldenT", "-l")
    check(cluster, "topicStatus", "topicStatus", "-t", "GoldenT")
    check(cluster, "topicClusterList", "topicClusterList", "-t", "GoldenT")
    check(cluster, "deleteTopic", "deleteTopic", "-c", "DefaultCluster", "-t", "GoldenNew2")
    assert "GoldenNew2" not in ok(cluster, "topicList").split()


def test_message_commands(cluster: Cluster, sent: list[str]) -> None:
    check(cluster, "queryMsgByKey", "queryMsgByKey", "-t", "GoldenT", "-k", "key-1")
    check(cluster, "queryMsgByUniqueKey", "queryMsgByUniqueKey", "-t", "GoldenT", "-i", sent[1])
    check(cluster, "queryMsgByOffset", "queryMsgByOffset", "-t", "GoldenT", "-b", "broker-a", "-i", "0", "-o", "2")
    out = check(cluster, "queryMsgById", "queryMsgById", "-i", _offset_id(cluster, 0))
    assert "Keys:                [key-0]" in out
    check(cluster, "printMsg", "printMsg", "-t", "GoldenT")
    check(cluster, "consumeMessage", "consumeMessage", "-t", "GoldenT", "-b", "broker-a", "-i", "0", "-o", "1",
          "-c", "1")


def _offset_id(cluster: Cluster, queue_offset: int) -> str:
    found = re.search(r"OffsetID:\s+(\S+)", ok(cluster, "queryMsgByOffset", "-t", "GoldenT", "-b", "broker-a", "-i",
                                               "0", "-o", str(queue_offset)))
    assert found is not None
    return found.group(1)


@pytest.fixture(scope="module")
def online(cluster: Cluster, sent: list[str]) -> Iterator[tuple[PushConsumer, Producer]]:
    """A push consumer of GoldenG that consumed GoldenT queue 0, and a producer of group GoldenP, both online."""
    seen: list[MessageExt] = []

    def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        seen.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("GoldenG", cluster.namesrv, consume_from="FIRST", rebalance_interval=1.0)
    consumer.subscribe("GoldenT", "TagA")
    consumer.register_message_listener(listener)
    consumer.start()
    ok(cluster, "updateTopic", "-c", "DefaultCluster", "-t", "GoldenPT", "-r", "1", "-w", "1")
    producer = Producer("GoldenP", cluster.namesrv).start()
    producer.send(Message("GoldenPT", b"from-golden-producer"))
    run_sync(producer.instance.heartbeat_all())  # now, not at the next 30 s heartbeat
    try:
        wait_until(lambda: "Diff Total: 0" in ok(cluster, "consumerProgress", "-g", "GoldenG"), timeout=60,
                   what="GoldenG to consume and commit everything")
        yield consumer, producer
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_group_commands(cluster: Cluster, online: tuple[PushConsumer, Producer], tmp_path: Path,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    check(cluster, "updateSubGroup", "updateSubGroup", "-c", "DefaultCluster", "-g", "GoldenSub", "-r", "3")
    check(cluster, "consumerProgress_group", "consumerProgress", "-g", "GoldenG")
    check(cluster, "consumerProgress_client_ip", "consumerProgress", "-g", "GoldenG", "-s", "true")
    out = normalize(ok(cluster, "consumerProgress"), cluster)
    assert re.search(r"^GoldenG +1 +V4_9_\d +PUSH +CLUSTERING +\d+ +0$", out, re.M), out
    check(cluster, "consumerConnection", "consumerConnection", "-g", "GoldenG")
    check(cluster, "producerConnection", "producerConnection", "-g", "GoldenP", "-t", "GoldenPT")
    check(cluster, "queryMsgById_tracks", "queryMsgById", "-i", _offset_id(cluster, 0))
    monkeypatch.chdir(tmp_path)  # consumerStatus writes <nowMs>/<clientId> files, as RocketMQ's does
    out = check(cluster, "consumerStatus", "consumerStatus", "-g", "GoldenG")
    assert len(list(tmp_path.glob("[0-9]*/*@*"))) == 1  # <nowMs>/<clientId>
    info = ok(cluster, "consumerStatus", "-g", "GoldenG", "-i", online[0].instance.client_id)
    for section in ("#Consumer Properties#", "#Consumer Subscription#", "#Consumer Offset#", "#Consumer RT&TPS#"):
        assert section in info, info
    check(cluster, "deleteSubGroup", "deleteSubGroup", "-b", cluster.brokers["broker-a"].addr, "-g", "GoldenSub")


def test_offset_commands(cluster: Cluster, sent: list[str]) -> None:
    check(cluster, "resetOffsetByTime", "resetOffsetByTime", "-g", "GoldenReset", "-t", "GoldenT", "-s", "0")
    check(cluster, "skipAccumulatedMessage", "skipAccumulatedMessage", "-g", "GoldenReset", "-t", "GoldenT")
    check(cluster, "consumerProgress_reset", "consumerProgress", "-g", "GoldenReset")


def test_broker_commands(cluster: Cluster, sent: list[str]) -> None:
    addr = cluster.brokers["broker-a"].addr
    out = normalize(ok(cluster, "clusterList"), cluster)
    lines = out.splitlines()
    golden("clusterList_header", lines[0] + "\n")
    assert re.fullmatch(r"DefaultCluster    broker-a                0     <BROKER> +V4_9_4 +\d+\.\d\d\(null,nullms\) +"
                        r"\d+\.\d\d\(null,nullms\) +null +\d+\.\d\d \d\.\d{4}", lines[1]), lines[1]
    golden("clusterList_more_header", ok(cluster, "clusterList", "-m").splitlines()[0] + "\n")
    status = ok(cluster, "brokerStatus", "-b", addr)
    keys = [line.split(":")[0] for line in status.splitlines()]
    assert keys == sorted(keys) and all(len(k) == 32 for k in keys), status
    assert "brokerVersionDesc               : V4_9_4" in status
    cluster_status = ok(cluster, "brokerStatus", "-c", "DefaultCluster").splitlines()
    assert cluster_status[0].startswith(addr.ljust(24) + " ")
    config = ok(cluster, "getBrokerConfig", "-b", addr).splitlines()
    assert config[0] == f"============{addr}============"
    assert f"{'brokerName':<50}=  broker-a" in config
    master = f"============Master: {addr}============\n"
    assert ok(cluster, "getBrokerConfig", "-c", "DefaultCluster").startswith(master)
    check(cluster, "updateBrokerConfig", "updateBrokerConfig", "-b", addr, "-k", "maxMessageSize", "-v", "2097152")
    assert f"{'maxMessageSize':<50}=  2097152" in ok(cluster, "getBrokerConfig", "-b", addr).splitlines()
    topics = len([t for t in ok(cluster, "topicList").split() if not t.startswith("%")])
    for name in ("wipeWritePerm", "addWritePerm"):  # the count is of the broker's topics the name server changed
        out = normalize(ok(cluster, name, "-b", "broker-a"), cluster)
        assert out.endswith(f"OK, {topics}\n") or int(out.split()[-1]) >= topics, out
        golden(name, re.sub(r"OK, \d+", "OK, <N>", out))
    check(cluster, "cleanExpiredCQ", "cleanExpiredCQ", "-b", addr)
    check(cluster, "deleteExpiredCommitLog", "deleteExpiredCommitLog", "-c", "DefaultCluster")
    ok(cluster, "updateTopic", "-c", "DefaultCluster", "-t", "StatsT", "-r", "1", "-w", "1")
    ok(cluster, "sendMessage", "-t", "StatsT", "-p", "x")
    rc, out, err = run(cluster, "statsAll", "-t", "StatsT")
    assert rc == 0 and "does not support VIEW_BROKER_STATS_DATA (request code 315)" in err
    golden("statsAll", normalize(out, cluster))


# ---------------------------------------------------------------------- a runbook session, as a script would run it
def test_runbook_session_create_send_consume_progress_reset(cluster: Cluster) -> None:
    """RocketMQ's quick-start runbook through the console script: create a topic, send, consume with a group,
    check its progress, then roll the group back by time and see the lag come back."""
    def sh(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "broker_core.tools.mqadmin", *args], cwd=ROOT,
                              env={**ENV, "NAMESRV_ADDR": cluster.namesrv}, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert "create topic to" in sh("updateTopic", "-c", "DefaultCluster", "-t", "RunbookT", "-r", "1", "-w", "1")
    before = int(time.time() * 1000)
    wait_until(lambda: int(time.time() * 1000) > before, what="the clock to pass the reset point")
    for i in range(5):
        assert "SEND_OK" in sh("sendMessage", "-t", "RunbookT", "-p", f"order-{i}", "-k", f"order-{i}")
    seen: list[bytes] = []
    consumer = PushConsumer("RunbookG", cluster.namesrv, consume_from="FIRST", rebalance_interval=1.0)
    consumer.subscribe("RunbookT")
    consumer.register_message_listener(lambda msgs: seen.extend(m.body for m in msgs) or ConsumeStatus.CONSUME_SUCCESS)
    consumer.start()
    try:
        wait_until(lambda: len(seen) >= 5, timeout=60, what="the consumer to receive the five messages")
        wait_until(lambda: "Diff Total: 0" in sh("consumerProgress", "-g", "RunbookG"), timeout=60,
                   what="the group's offsets to be committed")
    finally:
        consumer.shutdown()
    progress = sh("consumerProgress", "-g", "RunbookG").splitlines()
    assert re.match(r"^RunbookT +broker-a +0 +5 +5 +0 +\d{4}-", progress[1]), progress
    out = sh("resetOffsetByTime", "-g", "RunbookG", "-t", "RunbookT", "-s", str(before))
    assert out.splitlines()[0] == (f"rollback consumer offset by specified group[RunbookG], topic[RunbookT], "
                                   f"force[true], timestamp(string)[{before}], timestamp(long)[{before}]")
    assert re.search(r"^broker-a +0 +0 +$", out, re.M), out
    assert "Diff Total: 5" in sh("consumerProgress", "-g", "RunbookG")
