"""Page behaviour checked without a browser (Django's test client against the same real broker): role checks on
POSTs, CSRF, form errors, and body renderings."""

from __future__ import annotations

import base64
import csv
import datetime as dt
import io
import json
import re
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import Client

from broker_core.client import AdminClient, Message, Producer
from console.models import AuditEvent
from console.selectors.ui_messages import body_views
from tests.integration.test_cluster import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def console(settings, cluster) -> None:  # type: ignore[no-untyped-def]
    settings.BROKER_CORE_NAMESRV = cluster.namesrv


@pytest.fixture
def topic(sdk_admin: AdminClient, unique: Callable[[str], str]) -> str:
    name = unique("Pages")
    sdk_admin.create_topic(name, 1, 1)
    wait_until(lambda: name in sdk_admin.topic_list(), timeout=30, what=f"route of {name}")
    return name


def client_for(user: User, csrf: bool = False) -> Client:
    c = Client(enforce_csrf_checks=csrf)
    c.force_login(user)
    return c


def test_body_views() -> None:
    assert body_views(b'{"a": [1]}')["json"] == '{\n  "a": [\n    1\n  ]\n}'
    assert body_views(b"42")["json"] is None and body_views(b"42")["text"] == "42"
    binary = body_views(b"\xff\x00\x10")
    assert binary["text"] is None and binary["base64"] == "/wAQ" and binary["hex"] == "ff 00 10"


def test_binary_body_is_shown_as_base64_and_hex(console: None, make_user: Callable[[str], User], topic: str,
                                                sdk_producer: Producer) -> None:
    sent = sdk_producer.send(Message(topic, b"\xff\xfe<b>", keys="bin"))
    html = client_for(make_user("operator")).get(f"/messages/{sent.offset_msg_id}/").content.decode()
    assert base64.b64encode(b"\xff\xfe<b>").decode() in html and "ff fe 3c 62 3e" in html


def test_anonymous_is_sent_to_login(console: None, transactional_db: None) -> None:
    resp = Client().get("/topics/")
    assert resp.status_code == 302 and resp["Location"].startswith("/login/?next=/topics/")


def test_posts_need_the_role_and_are_audited(console: None, make_user: Callable[[str], User], topic: str) -> None:
    viewer = client_for(make_user("viewer"))
    assert viewer.post(f"/topics/{topic}/send/", {"body": "x", "body_encoding": "utf-8"}).status_code == 403
    assert viewer.post("/topics/new/", {"name": "Nope", "read_queue_nums": 1, "write_queue_nums": 1,
                                        "perm": 6}).status_code == 403
    assert viewer.post(f"/topics/{topic}/delete/", {"confirm_name": topic}).status_code == 403
    assert viewer.post("/dlq/some-group/", {"offset_msg_id": "0" * 32}).status_code == 403
    assert not AuditEvent.objects.exists()
    operator = client_for(make_user("operator"))
    resp = operator.post(f"/topics/{topic}/send/", {"body": "hello", "body_encoding": "utf-8", "keys": "a, b"})
    assert resp.status_code == 201
    event = AuditEvent.objects.get()
    assert event.action == "message.produce" and event.target == topic and event.username.startswith("operator")


def test_forms_report_bad_input(console: None, make_user: Callable[[str], User], topic: str) -> None:
    admin = client_for(make_user("admin"))
    resp = admin.post("/topics/new/", {"name": topic, "read_queue_nums": 1, "write_queue_nums": 1, "perm": 6})
    assert resp.status_code == 400 and b"exists already" in resp.content
    resp = admin.post("/topics/new/", {"name": "bad name!", "read_queue_nums": 1, "write_queue_nums": 1, "perm": 6})
    assert resp.status_code == 400 and b"may only contain" in resp.content
    resp = admin.post(f"/topics/{topic}/send/", {"body": "***", "body_encoding": "base64"})
    assert resp.status_code == 400 and b"not valid base64" in resp.content
    assert admin.get("/messages/", {"msg_id": "xyz"}).status_code == 400
    assert admin.get("/messages/", {"topic": topic}).status_code == 400  # a key is needed too
    assert admin.get("/topics/NoSuchTopic-xyz/").status_code == 404
    assert admin.get(f"/messages/{'0' * 32}/").status_code == 404
    assert admin.get("/dlq/bad group!/").status_code == 400


def test_csrf_is_enforced(console: None, make_user: Callable[[str], User], topic: str) -> None:
    admin = client_for(make_user("admin"), csrf=True)
    assert admin.post(f"/topics/{topic}/send/", {"body": "x", "body_encoding": "utf-8"}).status_code == 403
    page = admin.get(f"/topics/{topic}/")
    assert b"csrfmiddlewaretoken" in page.content


# ------------------------------------------------------------------------------------------------ newer pages
def test_cluster_page_lists_brokers_and_routes(console: None, make_user: Callable[[str], User], topic: str) -> None:
    viewer = client_for(make_user("viewer"))
    resp = viewer.get("/cluster/", {"search": topic})
    html = resp.content.decode()
    assert resp.status_code == 200 and "broker-a" in html and topic in html and "read-write (6)" in html
    assert viewer.get("/cluster/", {"search": "no-such-topic-anywhere"}).content.count(b"No topic matches") == 1


def test_group_pages_and_reset_with_preview_and_confirm(console: None, make_user: Callable[[str], User], topic: str,
                                                        sdk_producer: Producer, sdk_admin: AdminClient,
                                                        unique: Callable[[str], str]) -> None:
    group = unique("pagegroup")
    for i in range(3):
        sdk_producer.send(Message(topic, f"m{i}".encode()))
    viewer, operator = client_for(make_user("viewer")), client_for(make_user("operator"))
    detail = viewer.get(f"/groups/{group}/", {"topic": topic})
    assert detail.status_code == 200 and b"never committed" in detail.content
    assert viewer.get(f"/groups/{group}/reset/", {"topic": topic}).status_code == 403
    assert viewer.post(f"/groups/{group}/reset/", {"topic": topic, "mode": "latest"}).status_code == 403
    assert viewer.get("/groups/bad group!/").status_code == 400
    assert viewer.get("/groups/open/", {"group": group}).status_code == 302

    form = operator.get(f"/groups/{group}/reset/", {"topic": topic})
    assert form.status_code == 200 and b"Preview" in form.content
    assert operator.post(f"/groups/{group}/reset/", {"topic": topic, "mode": "time"}).status_code == 400
    preview = operator.post(f"/groups/{group}/reset/", {"step": "preview", "topic": topic, "mode": "latest"})
    assert preview.status_code == 200 and b"3 skipped" in preview.content and b"Apply reset" in preview.content
    assert not AuditEvent.objects.filter(action="group.reset_offset").exists()  # a preview changes nothing
    unconfirmed = operator.post(f"/groups/{group}/reset/", {"step": "apply", "topic": topic, "mode": "latest"})
    assert unconfirmed.status_code == 400 and b"Tick the box" in unconfirmed.content
    applied = operator.post(f"/groups/{group}/reset/",
                            {"step": "apply", "topic": topic, "mode": "latest", "confirm": "yes"})
    assert applied.status_code == 200 and b"reset-applied" in applied.content
    event = AuditEvent.objects.get(action="group.reset_offset")
    assert event.target == f"{group}/{topic}" and event.ok
    stats = sdk_admin.consume_stats(group, topic)
    assert stats["totalLag"] == 0 and sum(r["consumerOffset"] for r in stats["offsetTable"]) == 3

    back = operator.post(f"/groups/{group}/reset/", {"step": "preview", "topic": topic, "mode": "time",
                                                     "timestamp": "2000-01-01T00:00:00"})
    assert back.status_code == 200 and b"3</strong> messages will be delivered again" in back.content
    listing = viewer.get("/groups/", {"search": group}).content.decode()
    assert group in listing and "console_audit" in listing
    assert b"never committed" not in viewer.get(f"/groups/{group}/", {"topic": topic}).content


def test_group_reset_needs_csrf(console: None, make_user: Callable[[str], User], topic: str) -> None:
    operator = client_for(make_user("operator"), csrf=True)
    assert operator.post("/groups/g1/reset/", {"step": "preview", "topic": topic,
                                                "mode": "latest"}).status_code == 403
    assert b"csrfmiddlewaretoken" in operator.get("/groups/g1/reset/", {"topic": topic}).content


def test_dead_letter_list_exports_and_resend_all_job(console: None, make_user: Callable[[str], User], topic: str,
                                                     cluster, unique: Callable[[str], str], settings,  # type: ignore[no-untyped-def]
                                                     redis_url: str) -> None:
    from console.jobs import resend as jobs
    from tests.console.test_groups_dlq import _make_dead_letter

    # the job is published to a Redis database no worker reads; the test runs the worker's side in-process
    settings.CELERY_BROKER_URL = redis_url.rsplit("/", 1)[0] + "/4"

    group = unique("pagedlq")
    msg_id = _make_dead_letter(cluster, topic, group)
    viewer, operator = client_for(make_user("viewer")), client_for(make_user("operator"))
    index = viewer.get("/dlq/", {"search": group}).content.decode()
    assert f"/dlq/{group}/" in index and ">1<" in index
    assert viewer.get("/dlq/", {"group": "bad group!"}).status_code == 400

    page = viewer.get(f"/dlq/{group}/").content.decode()
    assert "Export all (CSV)" in page and "Resend all" not in page  # a viewer exports metadata, cannot resend
    lines = viewer.get(f"/dlq/{group}/export.jsonl").content.decode().splitlines()
    (row,) = [json.loads(line) for line in lines]
    assert row["msg_id"] == msg_id and row["origin_topic"] == topic and "body" not in row
    full = operator.get(f"/dlq/{group}/export.jsonl")
    assert full["X-Export-Count"] == "1" and full["X-Export-Truncated"] == "false"
    assert json.loads(full.content)["body"] == "poison"
    rows = list(csv.reader(io.StringIO(operator.get(f"/dlq/{group}/export.csv").content.decode())))
    assert rows[0][:3] == ["offset_msg_id", "msg_id", "origin_topic"] and rows[1][1] == msg_id and "poison" in rows[1]
    picked = operator.get(f"/dlq/{group}/export.jsonl", {"scope": "selected", "offset_msg_id": row["offset_msg_id"]})
    assert json.loads(picked.content)["offset_msg_id"] == row["offset_msg_id"]
    assert operator.get(f"/dlq/{group}/export.jsonl", {"scope": "selected"}).status_code == 400
    assert operator.get(f"/dlq/{group}/export.xml").status_code == 404

    assert viewer.post(f"/dlq/{group}/resend-all/", {"offset_msg_id": row["offset_msg_id"]}).status_code == 403
    assert operator.post(f"/dlq/{group}/resend-all/", {}).status_code == 400
    started = operator.post(f"/dlq/{group}/resend-all/", {"offset_msg_id": row["offset_msg_id"]})
    assert started.status_code == 302 and started["Location"].startswith("/jobs/")
    job_id = int(started["Location"].split("/")[2])
    assert "pending" in viewer.get(started["Location"]).content.decode()
    assert jobs.run_resend_job(job_id, "pages-worker@localhost")["status"] == "done"
    job_page = viewer.get(started["Location"]).content.decode()
    assert "done" in job_page and "resent" in job_page and topic in job_page and 'http-equiv="refresh"' not in job_page
    assert viewer.get("/jobs/999999/").status_code == 404 and viewer.get("/jobs/abc/").status_code == 404


def test_time_range_browse_pages_with_a_cursor(console: None, make_user: Callable[[str], User], topic: str,
                                               sdk_producer: Producer, monkeypatch: pytest.MonkeyPatch) -> None:
    from console.views import messages as message_views

    monkeypatch.setattr(message_views, "BROWSE_PAGE", 2)
    sent = [sdk_producer.send(Message(topic, f"b{i}".encode(), keys=f"k{i}")) for i in range(3)]
    viewer = client_for(make_user("viewer"))
    begin = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S")
    first = viewer.get("/messages/browse/", {"topic": topic, "begin": begin})
    html = first.content.decode()
    assert first.status_code == 200 and "Truncated" in html and sent[0].offset_msg_id in html
    next_url = re.search(r'href="(\?[^"]*cursor=[^"]*)"', html).group(1).replace("&amp;", "&")  # type: ignore[union-attr]
    second = viewer.get("/messages/browse/" + next_url).content.decode()
    assert sent[2].offset_msg_id in second and "Truncated" not in second and "every message in the range" in second
    assert sent[0].offset_msg_id not in second
    assert viewer.get("/messages/browse/", {"topic": topic, "begin": begin, "cursor": "garbage"}).status_code == 400
    assert viewer.get("/messages/browse/", {"topic": topic, "begin": "2020-01-02T00:00",
                                            "end": "2020-01-01T00:00"}).status_code == 400
    assert viewer.get("/messages/browse/", {"topic": "bad topic!", "begin": begin}).status_code == 400
    empty = viewer.get("/messages/browse/", {"topic": topic, "begin": "2000-01-01T00:00", "end": "2000-01-02T00:00"})
    assert b"No message was stored in this range" in empty.content
