"""The group reset page's exact-offsets mode: per-queue inputs, a dry-run preview of only the named queues,
the confirm step carrying the same offsets, and the audited reset, against the real broker."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from console.models import AuditEvent


def _page(role: str) -> Client:
    user = User.objects.create_user(f"gr-{role}", password="pw")
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


def _committed(api: APIClient, group: str, topic: str) -> dict[int, int]:
    rows = api.get(f"/api/v1/consumer-groups/{group}/", {"topic": topic}).json()["queues"]
    return {q["queue_id"]: q["consumer_offset"] for q in rows}


def test_exact_offsets_preview_confirm_apply(operator: APIClient, topic: str, unique: Callable[[str], str]) -> None:
    resp = operator.post(f"/api/v1/topics/{topic}/messages/",
                         {"messages": [{"body": f"m{i}"} for i in range(3)]}, format="json")
    assert resp.status_code == 201
    resp = operator.post(f"/api/v1/topics/{topic}/messages/",
                         {"messages": [{"body": f"n{i}"} for i in range(3)]}, format="json")
    group = unique("exact")
    url = f"/groups/{group}/reset/"
    page = _page("operator")

    form = page.get(url, {"topic": topic}).content.decode()
    assert 'name="q:broker-a:0"' in form and 'name="q:broker-a:1"' in form and 'value="exact"' in form

    empty = page.post(url, {"step": "preview", "topic": topic, "mode": "exact", "q:broker-a:0": ""})
    assert empty.status_code == 400 and "at least one queue" in empty.content.decode()
    bad = page.post(url, {"step": "preview", "topic": topic, "mode": "exact", "q:broker-a:0": "-3"})
    assert bad.status_code == 400 and "whole number" in bad.content.decode()

    preview = page.post(url, {"step": "preview", "topic": topic, "mode": "exact", "q:broker-a:1": "2",
                              "q:broker-a:0": ""})
    html = preview.content.decode()
    assert preview.status_code == 200 and 'data-testid="preview-queues"' in html
    table = html.split('data-testid="preview-queues"')[1].split("</table>")[0]
    assert table.count("<tr>") == 2  # the header and queue 1 only
    assert "exact offsets (1 queue)" in html
    assert '<input type="hidden" name="q:broker-a:1" value="2">' in html
    assert _committed(operator, group, topic) == {0: -1, 1: -1}  # the preview changed nothing

    unconfirmed = page.post(url, {"step": "apply", "topic": topic, "mode": "exact", "q:broker-a:1": "2"})
    assert unconfirmed.status_code == 400
    applied = page.post(url, {"step": "apply", "topic": topic, "mode": "exact", "q:broker-a:1": "2",
                              "confirm": "yes"})
    assert applied.status_code == 200 and 'data-testid="reset-applied"' in applied.content.decode()
    assert _committed(operator, group, topic) == {0: -1, 1: 2}
    event = AuditEvent.objects.get(action="group.reset_offset", target=f"{group}/{topic}")
    assert event.after == {"offsets": [{"broker": "broker-a", "queue_id": 1, "offset": 2}]}

    unknown = page.post(url, {"step": "preview", "topic": topic, "mode": "exact", "q:broker-a:9": "0"})
    assert unknown.status_code == 400 and "no queue broker-a/9" in unknown.content.decode()


def test_reset_page_needs_operator(topic: str) -> None:
    viewer = _page("viewer")
    assert viewer.get("/groups/g1/reset/", {"topic": topic}).status_code == 403
    assert viewer.post("/groups/g1/reset/", {"step": "apply", "topic": topic, "mode": "exact",
                                              "q:broker-a:0": "0", "confirm": "yes"}).status_code == 403
    assert not AuditEvent.objects.exists()
