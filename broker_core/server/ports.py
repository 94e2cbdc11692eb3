"""What the broker's parts see of the broker: ``typing.Protocol``s, so no part imports the composition root.

``BrokerController`` (server/controller.py) builds every part and hands itself over as the ports below; it is
the only module that knows them all, and nothing in ``broker_core`` but ``__main__`` imports it (an import-linter
contract). The parts depend on this module instead:

- :class:`HaHost`: what replication (``broker_core.ha``) uses: the config, the store, the state tables it
  copies to a slave, and the addresses learnt from the name servers;
- :class:`Broker`: what the request processors (``server/*.py``) and the gRPC service (``broker_core.grpc``)
  use: the above, the connection tables, long polling, counters, and the services the controller builds
  (tracer, transactions, POP, HA role, the send guard), each as the narrow protocol of what is called on it.

This module imports only what sits below the parts (config, store, protocol, remoting, the state and
connection tables), so the import graph has no circle through it. Members are read-only properties, so a plain
attribute of the controller satisfies them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from broker_core.config import BrokerConfig
    from broker_core.protocol import RemotingCommand
    from broker_core.protocol.filter import Subscription
    from broker_core.remoting.client import RemotingClient
    from broker_core.remoting.server import Connection, Response
    from broker_core.server.acl import PlainAccessValidator
    from broker_core.server.clients import ConsumerManager
    from broker_core.server.locks import RebalanceLockManager
    from broker_core.server.long_polling import PullRequestHoldService
    from broker_core.server.pop_state import PopState
    from broker_core.server.state import ConsumerOffsetManager, SubscriptionGroupManager, TopicConfigManager
    from broker_core.server.stats import Stats
    from broker_core.store import DeliveryReport, MessageInner, MessageStore, OffsetClock, PutStatus

SendHandler = Callable[["RemotingCommand", "Connection"], "Response | Awaitable[Response]"]


class Tracing(Protocol):
    """The message-trace recorder (server/trace.py ``Tracer``)."""

    @property
    def enabled(self) -> bool: ...

    def event(self, type_: str, msg_id: str, topic: str, *, group: str = "", keys: list[str] | None = None,
              cost_ms: float = 0, queue_id: int = -1, queue_offset: int = -1, reconsume_times: int = 0,
              status: str = "", timestamp: int | None = None, **extra: Any) -> dict[str, Any]: ...

    def emit(self, events: list[dict[str, Any]]) -> None: ...


class HalfMessages(Protocol):
    """Transaction half messages (server/transactions.py ``TransactionService``)."""

    def prepare(self, msg: MessageInner) -> None: ...

    def end(self, half_offset: int, commit: bool) -> str: ...


class Popped(Protocol):
    """One pop's answer: whole records and, per record, its queue, offset, reconsume count and handle."""

    @property
    def records(self) -> list[bytes]: ...

    @property
    def meta(self) -> list[dict[str, object]]: ...


class PopPort(Protocol):
    """Receive/ack (server/pop_service.py ``PopService``), as the gRPC receive service uses it."""

    @property
    def state(self) -> PopState: ...

    def pop(self, group: str, topic: str, max_nums: int, invisible_ms: int, sub: Subscription,
            max_reconsume: int, fifo: bool = False, queue_id: int = -1, init_mode: int = ...) -> Popped: ...

    def ack(self, group: str, handle: str) -> None: ...

    def change_invisible(self, group: str, handle: str, invisible_ms: int) -> str: ...

    @staticmethod
    def parse_handle(handle: str) -> tuple[str, int, int, int]: ...


class HaRole(Protocol):
    """The replication role (ha/broker.py ``BrokerHA``; ha/autoswitch.py in controller mode)."""

    @property
    def is_slave(self) -> bool: ...

    @property
    def sync_master(self) -> bool: ...

    @property
    def server_addr(self) -> str: ...

    def wait_replicated(self, next_offset: int) -> Awaitable[PutStatus]: ...

    def promote(self, role: str) -> Awaitable[None]: ...

    def put_refusal(self) -> str | None:
        """Controller mode's minInSyncReplicas refusal (None: the put may go on)."""
        ...

    def runtime_info(self) -> dict[str, object]: ...


class SendGuard(Protocol):
    """The fast-failure checks before a send (server/fast_failure.py ``FastFailure``)."""

    def guard(self, send: SendHandler) -> SendHandler: ...


class HaHost(Protocol):
    """What ``broker_core.ha`` uses of its broker."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def store(self) -> MessageStore: ...

    @property
    def topics(self) -> TopicConfigManager: ...

    @property
    def offsets(self) -> ConsumerOffsetManager: ...

    @property
    def groups(self) -> SubscriptionGroupManager: ...

    @property
    def broker_addr(self) -> str: ...

    @property
    def master_addr(self) -> str:
        """A slave's master, as the name server answered registration."""
        ...

    @property
    def master_ha_addr(self) -> str: ...


class Broker(HaHost, Protocol):
    """What the request processors and the gRPC service use of their broker."""

    @property
    def clock(self) -> OffsetClock | None:
        """The store's clock shifted by clockOffsetMs (None for a store given with a clock of its own)."""
        ...

    @property
    def consumers(self) -> ConsumerManager: ...

    @property
    def locks(self) -> RebalanceLockManager: ...

    @property
    def hold(self) -> PullRequestHoldService | None:
        """Long polling, once the broker serves."""
        ...

    @property
    def stats(self) -> Stats: ...

    @property
    def tracer(self) -> Tracing: ...

    @property
    def transactions(self) -> HalfMessages: ...

    @property
    def pop_service(self) -> PopPort: ...

    @property
    def ha(self) -> HaRole: ...

    @property
    def replicas(self) -> object | None:
        """Controller mode's replicas manager (server/replicas.py), None otherwise."""
        ...

    @property
    def fast_failure(self) -> SendGuard: ...

    @property
    def acl(self) -> PlainAccessValidator:
        """The ACL hook (aclEnable), whose file the ACL admin codes edit."""
        ...

    @property
    def namesrv_addrs(self) -> list[str]: ...

    @property
    def namesrv_client(self) -> RemotingClient: ...

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None: ...

    def register_all(self) -> Coroutine[Any, Any, bool]: ...

    def runtime_info(self) -> dict[str, object]: ...

    def trace_delayed_delivery(self, report: DeliveryReport) -> None: ...
