"""Topics and subscription groups exported and imported as RocketMQ's own JSON (``topics.json``'s
``topicConfigTable``, ``subscriptionGroup.json``'s ``subscriptionGroupTable``): export is a read; import creates or
updates every entry on every master of the cluster, audited (``topics.import`` / ``groups.import``) with the names
and each one's result."""

from __future__ import annotations

from typing import Any

from console import broker_client
from console.errors import bad_request
from console.services.audit import audited

MAX_ENTRIES = 10_000


def export_config(kind: str, cluster: str | None, system: bool = False) -> dict[str, Any]:
    admin = broker_client.admin()
    return admin.export_topics(cluster, system) if kind == "topics" else admin.export_groups(cluster, system)


def import_config(user: Any, kind: str, doc: Any, cluster: str | None) -> dict[str, Any]:
    """``kind`` is ``topics`` (a ``topicConfigTable``) or ``groups`` (a ``subscriptionGroupTable``); answers
    ``{"results": [{"name", "ok", "error"}], "ok"}``. 400 for a document without the table."""
    key = "topicConfigTable" if kind == "topics" else "subscriptionGroupTable"
    if not isinstance(doc, dict) or not isinstance(doc.get(key), dict):
        raise bad_request("invalid_document", f"expected RocketMQ's JSON with a {key!r} object")
    if len(doc[key]) > MAX_ENTRIES:
        raise bad_request("too_many", f"at most {MAX_ENTRIES} entries per import")
    admin = broker_client.admin()
    with audited(user, f"{kind}.import", cluster or "", {"names": sorted(doc[key])}) as entry:
        results = (admin.import_topics if kind == "topics" else admin.import_groups)({key: doc[key]}, cluster)
        ok = all(e is None for e in results.values())
        out = {"results": [{"name": n, "ok": e is None, "error": e} for n, e in results.items()], "ok": ok}
        entry.after, entry.ok = out, ok
    return out
