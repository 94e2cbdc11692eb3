"""Browsing a topic by time range with a cursor."""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from typing import Any

from rest_framework.test import APIClient

from console.selectors.messages import encode_cursor


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def _produce(client: APIClient, topic: str, bodies: list[str]) -> list[str]:
    resp = client.post(f"/api/v1/topics/{topic}/messages/", {"messages": [{"body": b} for b in bodies]},
                       format="json")
    assert resp.status_code == 201, resp.json()
    return [r["msg_id"] for r in resp.json()["results"]]


def _pages(client: APIClient, params: dict[str, Any]) -> list[dict[str, Any]]:
    pages = []
    cursor = None
    while True:
        resp = client.get("/api/v1/messages/", {**params, **({"cursor": cursor} if cursor else {})})
        assert resp.status_code == 200, resp.json()
        pages.append(resp.json())
        cursor = resp.json()["next"]
        assert resp.json()["truncated"] is (cursor is not None)
        if cursor is None:
            return pages
        assert len(pages) < 50


def test_cursor_pages_cover_every_message_exactly_once(operator: APIClient, topic: str) -> None:
    begin = _now()
    sent: list[str] = []
    for batch in range(5):
        sent += _produce(operator, topic, [f"b{batch}-{i}" for i in range(5)])
    end = _now()

    pages = _pages(operator, {"topic": topic, "begin": begin, "end": end, "limit": 7})
    assert [len(p["results"]) for p in pages] == [7, 7, 7, 4]
    seen = [m for p in pages for m in p["results"]]
    assert sorted(m["msg_id"] for m in seen) == sorted(sent) and len(seen) == len(sent)
    stamps = [m["store_timestamp"] for m in seen]
    assert stamps == sorted(stamps)  # oldest first across pages
    assert {m["queue_id"] for m in seen} == {0, 1} and all(m["body"]["text"].startswith("b") for m in seen)

    whole = operator.get("/api/v1/messages/", {"topic": topic, "begin": begin, "end": end, "limit": len(sent)}).json()
    assert len(whole["results"]) == len(sent) and whole["truncated"] is False and whole["next"] is None
    open_ended = _pages(operator, {"topic": topic, "begin": begin, "limit": 1000})
    assert len(open_ended) == 1 and len(open_ended[0]["results"]) == len(sent)


def test_time_range_excludes_messages_outside_it(operator: APIClient, viewer: APIClient, topic: str) -> None:
    _produce(operator, topic, ["before-1", "before-2"])
    time.sleep(0.05)
    begin = _now()
    time.sleep(0.05)
    inside = _produce(operator, topic, ["in-1", "in-2", "in-3"])
    time.sleep(0.05)
    end = _now()
    time.sleep(0.05)
    _produce(operator, topic, ["after-1"])

    pages = _pages(viewer, {"topic": topic, "begin": begin, "end": end, "limit": 2})
    seen = [m for p in pages for m in p["results"]]
    assert sorted(m["msg_id"] for m in seen) == sorted(inside)
    assert all("body" not in m for m in seen)  # viewers see metadata only
    assert viewer.get("/api/v1/messages/", {"topic": topic, "begin": end, "end": end}).json() == {
        "results": [], "next": None, "truncated": False}


def test_browse_bad_input(operator: APIClient, topic: str, unique) -> None:  # type: ignore[no-untyped-def]
    begin = _now()
    _produce(operator, topic, ["x", "y", "z"])
    first = operator.get("/api/v1/messages/", {"topic": topic, "begin": begin, "limit": 1}).json()
    assert first["truncated"] is True and first["next"]

    def status(params: dict[str, Any]) -> tuple[int, str]:
        resp = operator.get("/api/v1/messages/", params)
        return resp.status_code, resp.json().get("error", "")

    assert status({"topic": topic, "begin": begin, "cursor": "!!!"}) == (400, "invalid_cursor")
    junk = base64.urlsafe_b64encode(json.dumps({"v": 1, "topic": topic, "q": [["broker-a", -1, 0]]}).encode())
    assert status({"topic": topic, "begin": begin, "cursor": junk.decode()}) == (400, "invalid_cursor")
    assert status({"topic": topic, "begin": begin, "cursor": base64.b64encode(b"[1, 2]").decode()}) == (
        400, "invalid_cursor")
    other = unique("Other")
    assert status({"topic": topic, "begin": begin, "cursor": encode_cursor(other, {})}) == (400, "invalid_cursor")
    assert status({"topic": topic, "key": "k", "cursor": first["next"]})[0] == 400
    assert status({"topic": topic, "begin": "2030-01-01T00:00:00Z", "end": "2020-01-01T00:00:00Z"})[0] == 400
    assert status({"topic": topic, "begin": "soon"})[0] == 400
    assert status({"topic": topic, "begin": begin, "limit": 0})[0] == 400
    assert status({"topic": "NoSuchBrowseTopic", "begin": begin}) == (404, "not_found")
    # a cursor past the end of the queues is simply an empty last page
    beyond = encode_cursor(topic, {("broker-a", 0): 10_000, ("broker-a", 1): 10_000})
    assert operator.get("/api/v1/messages/", {"topic": topic, "begin": begin, "cursor": beyond}).json() == {
        "results": [], "next": None, "truncated": False}


def test_browse_with_a_sql92_filter_pages_only_matching_messages(operator: APIClient, topic: str) -> None:
    begin = _now()
    msgs = [{"body": f"s{i}", "tags": "red" if i % 2 else "blue", "properties": {"n": str(i)}} for i in range(12)]
    msgs.append({"body": "no-n", "tags": "red"})  # a missing property never matches a comparison
    resp = operator.post(f"/api/v1/topics/{topic}/messages/", {"messages": msgs}, format="json")
    assert resp.status_code == 201, resp.json()
    end = _now()
    sql = "n BETWEEN 2 AND 9 AND TAGS = 'red'"
    pages = _pages(operator, {"topic": topic, "begin": begin, "end": end, "limit": 2, "sql": sql})
    seen = sorted(m["body"]["text"] for p in pages for m in p["results"])
    assert seen == ["s3", "s5", "s7", "s9"] and [len(p["results"]) for p in pages] == [2, 2]
    assert _pages(operator, {"topic": topic, "begin": begin, "end": end, "sql": "n IS NULL"})[0]["results"][0][
        "body"]["text"] == "no-n"
    bad = operator.get("/api/v1/messages/", {"topic": topic, "begin": begin, "sql": "n = NULL"})
    assert bad.status_code == 400 and "cannot be compared" in json.dumps(bad.json())
    with_key = operator.get("/api/v1/messages/", {"topic": topic, "key": "k", "sql": "n > 1"})
    assert with_key.status_code == 400 and "sql" in with_key.json()["fields"]
