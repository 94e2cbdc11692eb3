"""Topic changes: create, update queue counts and permission, delete. Each is audited with before/after."""

from __future__ import annotations

from typing import Any

from console import broker_client
from console.errors import ApiError, bad_request
from console.selectors.broker_cache import invalidate_all
from console.selectors.topics import check_topic_name, find_topic, get_topic, topic_type
from console.services.audit import audited


def create_topic(user: Any, name: str, read_queue_nums: int, write_queue_nums: int, perm: int,
                 brokers: list[str] | None = None) -> dict[str, Any]:
    """Create ``name`` on ``brokers`` (default: every master); 409 when it exists already."""
    if find_topic(check_topic_name(name)) is not None:
        raise ApiError(409, "topic_exists", f"topic {name} exists already; PATCH it to change it")
    if brokers:
        known = set(broker_client.admin().cluster_info().get("brokerAddrTable", {}))
        unknown = sorted(set(brokers) - known)
        if unknown:
            raise bad_request("unknown_broker", f"no broker named {', '.join(unknown)}; the cluster has "
                                                f"{', '.join(sorted(known)) or 'none'}")
    with audited(user, "topic.create", name) as entry:
        try:
            created_on = broker_client.admin().create_topic(name, read_queue_nums, write_queue_nums, perm,
                                                            brokers=brokers or None)
        finally:
            invalidate_all()  # the lists show it at once (a failure may have created it on some brokers)
        entry.after = {"name": name, "type": topic_type(name), "brokers": [
            {"broker_name": b, "read_queue_nums": read_queue_nums, "write_queue_nums": write_queue_nums,
             "perm": perm} for b in created_on]}
    return entry.after


def update_topic(user: Any, name: str, changes: dict[str, int]) -> dict[str, Any]:
    """Apply ``changes`` (any of read_queue_nums, write_queue_nums, perm) on every broker holding ``name``."""
    before = get_topic(name)
    after = {**before, "brokers": [{**b, **changes} for b in before["brokers"]]}
    with audited(user, "topic.update", name, before) as entry:
        admin = broker_client.admin()
        try:
            for b in after["brokers"]:
                admin.update_topic(name, b["read_queue_nums"], b["write_queue_nums"], b["perm"],
                                   brokers=[b["broker_name"]])
        finally:
            invalidate_all()
        entry.after = after
    return after


def delete_topic(user: Any, name: str) -> None:
    """Delete ``name`` from every broker and the name server."""
    before = get_topic(name)
    with audited(user, "topic.delete", name, before):
        try:
            broker_client.admin().delete_topic(name)
        finally:
            invalidate_all()
