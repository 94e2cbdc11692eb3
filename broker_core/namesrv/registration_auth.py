"""The name server's registration check (broker_core's addition, beyond RocketMQ 4.x): with a cluster secret
configured, REGISTER_BROKER and UNREGISTER_BROKER must be signed with it (``broker_core.protocol.acl``
``sign_registration``: the ACL signature scheme, access key ``BrokerCoreCluster``, a signing time within five
minutes of this server's clock), so nobody without the secret can register a broker under a real broker's name
or remove one. Every other request, and every request to a name server without a secret (Java brokers'
registrations included), passes unchanged. A refusal answers NO_PERMISSION with the reason."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from broker_core.protocol import RemotingCommand, RequestCode, ResponseCode
from broker_core.protocol.acl import DEFAULT_MAX_SKEW_MS, registration_refusal
from broker_core.remoting.server import Connection

log = logging.getLogger(__name__)

GUARDED_CODES = frozenset({int(RequestCode.REGISTER_BROKER), int(RequestCode.UNREGISTER_BROKER)})
ENV_CLUSTER_SECRET = "BROKER_CORE_CLUSTER_SECRET"


class RegistrationGuard:
    """A ``RemotingServer`` ``rpc_hook``: None lets a request through, else the NO_PERMISSION answer."""

    def __init__(self, cluster_secret: str, max_skew_ms: int = DEFAULT_MAX_SKEW_MS,
                 now_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        if len(cluster_secret) < 7:
            raise ValueError("the cluster secret must be longer than 6 characters")
        self.cluster_secret = cluster_secret
        self.max_skew_ms = max_skew_ms
        self.now_ms = now_ms

    def __call__(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        if cmd.code not in GUARDED_CODES:
            return None
        reason = registration_refusal(cmd, self.cluster_secret, self.now_ms(), self.max_skew_ms)
        if reason is None:
            return None
        log.warning("refused %s of broker %s (%s) from %s: %s",
                    "registration" if cmd.code == RequestCode.REGISTER_BROKER else "unregistration",
                    cmd.header.get("brokerName"), cmd.header.get("brokerAddr"), conn.remote, reason)
        return cmd.response(ResponseCode.NO_PERMISSION, f"broker registration refused: {reason}")
