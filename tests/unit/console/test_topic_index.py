"""The cached topic index (console.selectors.topics.TopicIndex through console.selectors.broker_cache) against
the in-memory FakeAdmin: when the name server is asked again, paging and search at 50k topics."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from console.selectors.topics import TopicIndex, list_topics, topic_type_counts, topics_page
from console.services import topics as service
from tests.unit.console.fake_admin import FakeAdmin

pytestmark = pytest.mark.django_db


def _count() -> int:
    return int(topics_page(page_size=1)["count"])


def test_a_fresh_entry_is_served_without_asking(fake_admin: FakeAdmin, settings) -> None:  # type: ignore[no-untyped-def]
    settings.CONSOLE_BROKER_CACHE_S = 3600
    fake_admin.create_topic("A")
    assert _count() == 1 and fake_admin.topic_list_calls == 1
    fake_admin.create_topic("B")  # behind the console's back
    assert _count() == 1 and topics_page(search="a")["count"] == 1 and fake_admin.topic_list_calls == 1


def test_an_expired_entry_is_rebuilt_only_when_the_version_changed(fake_admin: FakeAdmin, settings) -> None:  # type: ignore[no-untyped-def]
    settings.CONSOLE_BROKER_CACHE_S = 0  # every read checks the version
    fake_admin.create_topic("A")
    assert _count() == 1 and fake_admin.topic_list_calls == 1
    assert _count() == 1 and _count() == 1 and fake_admin.topic_list_calls == 1  # same version: same index
    fake_admin.create_topic("B")
    assert _count() == 2 and fake_admin.topic_list_calls == 2
    fake_admin.delete_topic("A")
    assert [t["name"] for t in list_topics()] == ["B"] and fake_admin.topic_list_calls == 3


def test_the_consoles_own_writes_are_seen_at_once(fake_admin: FakeAdmin, settings) -> None:  # type: ignore[no-untyped-def]
    settings.CONSOLE_BROKER_CACHE_S = 3600
    user = User.objects.create_user("ops", password="x")
    assert _count() == 0
    service.create_topic(user, "Orders", 4, 4, 6)
    assert [t["name"] for t in topics_page()["results"]] == ["Orders"]
    service.delete_topic(user, "Orders")
    assert _count() == 0


def test_pages_and_searches_of_50k_topics(fake_admin: FakeAdmin) -> None:
    names = [f"Scale{i:05d}" for i in range(50_000)] + ["%RETRY%g1", "%DLQ%g1", "RMQ_SYS_TRACE_TOPIC"]
    fake_admin.topics = {n: {"broker-a": (8, 8, 6)} for n in names}
    fake_admin.version += 1
    last = topics_page(page=500, page_size=100)
    assert (last["count"], last["pages"], last["page"]) == (50_003, 501, 500)
    assert [r["name"] for r in topics_page(page=501, page_size=100)["results"]] == ["Scale49997", "Scale49998",
                                                                                    "Scale49999"]
    found = topics_page(search="LE0499", page_size=5)
    assert found["count"] == 10 and [r["name"] for r in found["results"]] == [f"Scale0499{d}" for d in range(5)]
    assert topics_page(search="le0499", page=2, page_size=5)["results"][0]["name"] == "Scale04995"
    assert topics_page(search="g1", kind="retry")["results"] == [
        {"name": "%RETRY%g1", "type": "retry", "auto_created": False}]
    assert topic_type_counts() == {"normal": 50_000, "retry": 1, "dlq": 1, "system": 1}


def test_an_index_remembers_recent_searches_only() -> None:
    index = TopicIndex.of(["b", "a", "ab"], frozenset({"ab"}))
    assert index.names == ("a", "ab", "b") and index.matching("A", "") == ("a", "ab")
    for i in range(200):
        index.matching(f"x{i}", "")
    assert len(index.searches) <= 64 and index.matching("b", "normal") == ("ab", "b")


def test_the_list_pages_links_are_djangos_reverse() -> None:
    from django.urls import reverse

    from console.views.topics import _topic_href

    href = _topic_href()
    for name in ("%RETRY%g-1", "%DLQ%a%b", "T_1|x", "é", "a b?#&=+"):
        assert href(name) == reverse("topic-page", args=[name])


def test_a_cache_without_version_is_rebuilt_after_the_consoles_writes(fake_admin: FakeAdmin, settings) -> None:  # type: ignore[no-untyped-def]
    from console.selectors.broker_cache import BrokerCache, invalidate_all

    builds: list[int] = []

    def build(admin: FakeAdmin) -> int:
        builds.append(len(admin.topics))
        return len(builds)

    cache = BrokerCache("test", build)
    settings.CONSOLE_BROKER_CACHE_S = 3600
    assert cache.get() == 1 and cache.get() == 1 and builds == [0]
    fake_admin.create_topic("A")
    assert cache.get() == 1  # fresh: not asked again
    invalidate_all()
    assert cache.get() == 2 and builds == [0, 1]
    settings.CONSOLE_BROKER_CACHE_S = 0  # expired at once and no version to compare: rebuilt in the request
    assert cache.get() == 3 and cache.get() == 4
