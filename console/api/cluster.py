"""Cluster endpoints: the brokers of every broker group, with role and replication lag; controller mode's view of
each broker-set and the switch-over."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView, validated
from console.roles import OPERATOR, VIEWER
from console.selectors.controller import controller_groups
from console.selectors.replication import broker_groups
from console.services import controller as controller_services

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


class ControllerView(RoleAPIView):
    """``GET`` controller mode (RocketMQ 5 automatic failover, ``BROKER_CORE_CONTROLLER``): ``enabled``, ``error``
    (the controller could not be reached), ``leader`` and ``groups``: per broker-set ``master_broker_id``,
    ``master_address``, ``master_epoch``, ``sync_state_set`` (controller ids) and its epoch, ``replicas`` (id,
    address, alive, in_sync, master, electable) and ``history`` (the recorded elections, newest first)."""

    required_roles = {"GET": VIEWER}

    @extend_schema(operation_id="cluster_controller")
    def get(self, request: Request) -> Response:
        return Response(controller_groups())


class SwitchOverSerializer(serializers.Serializer):
    broker_name = serializers.CharField(max_length=255)
    broker_id = serializers.IntegerField(min_value=1, max_value=2**63 - 1)
    cluster = serializers.CharField(max_length=255, required=False, default="", allow_blank=True)


class SwitchOverView(RoleAPIView):
    """``POST`` make ``broker_id`` (a controller id, an alive SyncStateSet member) the master of ``broker_name``
    (CONTROLLER_ELECT_MASTER with designateElect; audited ``broker.switch_over``). The controller's refusals come
    back as 409 with its code (2011: the master already, 2012: not electable); 409 ``controller_off`` without a
    controller."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=SwitchOverSerializer, operation_id="cluster_controller_switch_over")
    def post(self, request: Request) -> Response:
        data = validated(SwitchOverSerializer, request.data)
        return Response(controller_services.switch_over(request.user, data["cluster"], data["broker_name"],
                                                        data["broker_id"]))
