"""Cluster endpoints: the brokers of every broker group, with role and replication lag."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView
from console.roles import VIEWER
from console.selectors.replication import broker_groups

GROUP_FIELDS = ("name", "cluster", "worst_lag_bytes", "worst_lag_seconds", "connections")


def _rows(group: dict[str, Any]) -> list[dict[str, Any]]:
    master = group["master"]
    rows = [{"broker_name": group["name"], "cluster": group["cluster"], **master, "connected": None,
             "lag_bytes": None, "lag_seconds": None, "lag_source": None}]
    rows += [{"broker_name": group["name"], "cluster": group["cluster"], **s} for s in group["slaves"]]
    for row in rows:
        row["commit_log_max_offset"] = row.pop("offset")
    return rows


class ClusterBrokersView(RoleAPIView):
    """``GET`` one row per broker the name server lists (a master, brokerId 0, and its slaves): ``broker_name``,
    ``cluster``, ``broker_id``, ``role``, ``addr``, ``up``, ``status``, ``commit_log_max_offset`` and, on a
    slave, ``connected``, ``lag_bytes``, ``lag_seconds`` (null: unknown) and ``lag_source``; ``groups`` sums
    each broker group up (its worst slave lag and the master's HA connections)."""

    required_roles = {"GET": VIEWER}

    @extend_schema(operation_id="cluster_brokers_list")
    def get(self, request: Request) -> Response:
        groups = broker_groups()
        rows = [row for g in groups for row in _rows(g)]
        return Response({"results": rows, "count": len(rows),
                         "groups": [{k: g[k] for k in GROUP_FIELDS} for g in groups]})
