"""Reading ``extFields`` values: every value arrives as text (Java's ``toString()``; fastjson's conversion of
JSON scalars), so numbers and booleans are parsed here, with a clear error naming the field."""

from __future__ import annotations

from typing import Any

from broker_core.errors import BadRequest


def int_field(header: dict[str, Any], name: str, default: int | None = None) -> int:
    value = header.get(name)
    if value is None or value == "":
        if default is None:
            raise BadRequest(f"header field {name!r} is required")
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise BadRequest(f"header field {name!r} must be an integer, got {value!r}") from None


def str_field(header: dict[str, Any], name: str) -> str:
    value = header.get(name)
    if value is None or value == "":
        raise BadRequest(f"header field {name!r} is required")
    return str(value)


def bool_field(header: dict[str, Any], name: str, default: bool = False) -> bool:
    """Java ``Boolean.parseBoolean``: ``true`` in any case is true, anything else false; absent -> default."""
    value = header.get(name)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    return str(value).lower() == "true"


def opt_str(header: dict[str, Any], name: str, default: str = "") -> str:
    value = header.get(name)
    return default if value is None else str(value)
