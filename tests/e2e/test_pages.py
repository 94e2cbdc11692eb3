"""Page behaviour checked without a browser (Django's test client against the same real broker): role checks on
POSTs, CSRF, form errors, and body renderings."""

from __future__ import annotations

import base64
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
