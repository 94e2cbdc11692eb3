"""REST receive with a SQL92 expression: the broker (enablePropertyFilter=true in the console suite's cluster) hands
out only the matching messages; bad expressions are 400 with the parser's reason."""

from __future__ import annotations

from collections.abc import Callable

from rest_framework.test import APIClient


def test_rest_receive_by_sql92(operator: APIClient, topic: str, unique: Callable[[str], str]) -> None:
    msgs = [{"body": f"r{i}", "tags": "hot" if i % 2 else "cold", "properties": {"score": str(i * 10)}}
            for i in range(10)]
    assert operator.post(f"/api/v1/topics/{topic}/messages/", {"messages": msgs}, format="json").status_code == 201
    group = unique("sqlg")
    got: list[str] = []
    for _ in range(10):
        resp = operator.post(f"/api/v1/consumer-groups/{group}/receive/", {
            "topic": topic, "max_messages": 16, "invisible_seconds": 60, "wait_seconds": 1,
            "expression": "score >= 30 AND TAGS = 'hot'", "expression_type": "SQL92"}, format="json")
        assert resp.status_code == 200, resp.json()
        got += [m["body"]["text"] for m in resp.json()["messages"]]
        if len(got) >= 4:
            break
    assert sorted(got) == ["r3", "r5", "r7", "r9"]
    bad = operator.post(f"/api/v1/consumer-groups/{group}/receive/", {
        "topic": topic, "expression": "score = NULL", "expression_type": "SQL92"}, format="json")
    assert bad.status_code == 400 and "cannot be compared" in str(bad.json())
    bad_tag = operator.post(f"/api/v1/consumer-groups/{group}/receive/", {
        "topic": topic, "expression": "a ||", "expression_type": "TAG"}, format="json")
    assert bad_tag.status_code == 400 and "empty tag" in str(bad_tag.json())
