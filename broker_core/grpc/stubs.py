"""The RocketMQ 5 protobuf and gRPC stubs (``apache.rocketmq.v2``), taken from the pinned official client
package ``rocketmq-python-client`` (module ``rocketmq.grpc_protocol``), never hand copies.

Importing ``rocketmq.grpc_protocol`` normally runs the client's ``rocketmq/__init__.py``, which imports the
whole client: it creates ``~/logs/rocketmq_python`` and sets up the client's logging. A broker wants only the
generated messages, so when ``rocketmq`` is not imported yet this module registers a bare package object for
it (same search path, nothing executed) and imports the stub modules under it. In a process that already
imported the client (none of ours does) the client's own package is used as is.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

_PACKAGE = "rocketmq"


def _bare_package() -> None:
    if _PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the RocketMQ 5 stubs come from rocketmq-python-client (pip install -r requirements.txt)")
    pkg = types.ModuleType(_PACKAGE)
    pkg.__path__ = list(spec.submodule_search_locations)
    pkg.__spec__ = spec
    sys.modules[_PACKAGE] = pkg


_bare_package()
definition_pb2 = importlib.import_module("rocketmq.grpc_protocol.definition_pb2")
service_pb2 = importlib.import_module("rocketmq.grpc_protocol.service_pb2")
service_pb2_grpc = importlib.import_module("rocketmq.grpc_protocol.service_pb2_grpc")

pb = definition_pb2
svc = service_pb2
Code = definition_pb2.Code

__all__ = ["Code", "definition_pb2", "pb", "service_pb2", "service_pb2_grpc", "svc"]
