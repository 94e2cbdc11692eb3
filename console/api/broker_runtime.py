"""``GET /cluster/brokers/{addr}/runtime/``: a broker's GET_BROKER_RUNTIME_INFO table in full."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView
from console.roles import VIEWER
from console.selectors.broker_runtime import broker_runtime


class BrokerRuntimeView(RoleAPIView):
    """Every key the broker reports (numbers and booleans parsed), for a broker the name server lists (else 404)."""

    required_roles = {"GET": VIEWER}

    def get(self, request: Request, addr: str) -> Response:
        b = broker_runtime(addr)
        return Response({"addr": b["addr"], "broker_name": b["broker_name"], "broker_id": b["broker_id"],
                         "runtime": b["runtime"]})
