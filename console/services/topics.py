"""Topic changes: create, update queue counts and permission, delete. Each is audited."""

from __future__ import annotations

from typing import Any

from console import broker_client
from console.errors import ApiError
from console.selectors.topics import topic_detail
from console.services.audit import audited

from broker_core.client import ClientError  # isort: skip
from broker_core.protocol.validation import topic_error  # isort: skip


def _check_name(name: str) -> None:
    err = topic_error(name)
    if err:
        raise ApiError(400, "invalid_topic", err)


def _existing(name: str) -> dict[str, Any] | None:
    try:
        return topic_detail(name)
    except ClientError as exc:
        if "route" in str(exc).lower() or exc.code == 17:
            return None
        raise


def create_topic(user: Any, name: str, read_queue_nums: int, write_queue_nums: int, perm: int,
                 brokers: list[str] | None = None) -> dict[str, Any]:
    """Create ``name`` on ``brokers`` (default: every master). 409 when it exists already."""
    _check_name(name)
    if _existing(name) is not None:
        raise ApiError(409, "topic_exists", f"topic {name} exists already; PATCH it to change it")
    with audited(user, "topic.create", name) as entry:
        created_on = broker_client.admin().create_topic(name, read_queue_nums, write_queue_nums, perm,
                                                        brokers=brokers or None)
        entry.after = {"brokers": created_on, "read_queue_nums": read_queue_nums,
                       "write_queue_nums": write_queue_nums, "perm": perm}
    return topic_detail(name)
