"""One hierarchy for every error broker_core raises on purpose (a stdlib-only leaf: the codec imports it too).

``BrokerCoreError``
  - ``CodecError`` (also a ValueError): bytes that do not decode; names the source file and position.
  - ``ProtocolError`` (ValueError): bytes that break the remoting frame; the connection is closed.
  - ``BadRequest`` (ValueError): a request header field missing or malformed; answered SYSTEM_ERROR (send
    paths: MESSAGE_ILLEGAL) with the reason as remark.
  - ``StoreError`` (RuntimeError): a broken store invariant or an unusable store directory;
    ``StoreLockedError``: another process holds the directory's ``lock``.
  - ``ClientError`` (RuntimeError): a request the broker or name server refused; ``code`` is the ResponseCode.

Expected outcomes (a message not found, a full disk) are result values, not exceptions. Each class is also
importable from where it was first defined (``broker_core.codec``, ``broker_core.protocol``,
``broker_core.store.errors``, ``broker_core.client``).
"""

from __future__ import annotations


class BrokerCoreError(Exception):
    """Base of every error broker_core raises on purpose."""


class CodecError(BrokerCoreError, ValueError):
    """Bytes that do not decode. Names the source (usually a file path) and the byte position."""

    def __init__(self, reason: str, source: str | None = None, position: int | None = None) -> None:
        self.reason = reason
        self.source = source
        self.position = position
        where = []
        if source is not None:
            where.append(f"file {source}")
        if position is not None:
            where.append(f"position {position}")
        super().__init__(f"{reason} ({', '.join(where)})" if where else reason)


class ProtocolError(BrokerCoreError, ValueError):
    """Bytes that break framing; the connection that sent them must be closed."""


class BadRequest(BrokerCoreError, ValueError):
    """A request whose header cannot be parsed (missing or malformed field). The server answers it with
    SYSTEM_ERROR and the message as remark, as RocketMQ does for a header it cannot decode; send paths
    answer MESSAGE_ILLEGAL."""


class StoreError(BrokerCoreError, RuntimeError):
    """A broken store invariant; the message names the file and, where known, the position."""


class StoreLockedError(StoreError):
    """Another process holds the store directory's ``lock`` file."""


class ClientError(BrokerCoreError, RuntimeError):
    """A request the broker or name server refused; ``code`` is the ResponseCode."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        super().__init__(f"[{code}] {message}")
