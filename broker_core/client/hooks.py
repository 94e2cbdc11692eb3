"""Send and consume hooks (RocketMQ's ``SendMessageHook`` / ``ConsumeMessageHook``): objects called before and
after each send or listener call, e.g. the consume tracer (:class:`~broker_core.client.consumer.consume_service.
ConsumeTrace` is one). A hook that raises is logged and skipped; it never fails the send or the consumption."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker_core.client.message import Message, MessageExt, MessageQueue, SendResult

log = logging.getLogger(__name__)


@dataclass
class SendContext:
    producer_group: str
    messages: list[Message]
    queue: MessageQueue | None = None  # set after: where it was stored
    result: SendResult | None = None
    exception: BaseException | None = None
    oneway: bool = False
    props: dict[str, Any] = field(default_factory=dict)  # for a hook's own use between before and after


@dataclass
class ConsumeContext:
    consumer_group: str
    messages: list[MessageExt]
    success: bool = False  # set after: the listener returned CONSUME_SUCCESS
    status: str = ""  # CONSUME_SUCCESS, RECONSUME_LATER (also for None or an exception) or EXCEPTION
    props: dict[str, Any] = field(default_factory=dict)


class SendMessageHook(Protocol):
    def send_message_before(self, ctx: SendContext) -> None: ...

    def send_message_after(self, ctx: SendContext) -> None: ...


class ConsumeMessageHook(Protocol):
    def consume_message_before(self, ctx: ConsumeContext) -> None: ...

    def consume_message_after(self, ctx: ConsumeContext) -> None: ...


def call_hooks(hooks: list[Any], method: str, ctx: SendContext | ConsumeContext) -> None:
    for hook in hooks:
        try:
            getattr(hook, method)(ctx)
        except Exception:  # a broken hook must never fail a send or a consumption (RocketMQ catches Throwable)
            log.warning("%s.%s failed", type(hook).__name__, method, exc_info=True)


def run_send(hooks: list[Any], group: str, msgs: list[Message], send: Any, oneway: bool = False) -> Any:
    """``send()`` between the hooks' before and after (the after sees the result or the exception)."""
    if not hooks:
        return send()
    ctx = begin_send(hooks, group, msgs, oneway)
    try:
        result = send()
    except BaseException as exc:
        ctx.exception = exc
        raise
    else:
        _set_result(ctx, result)
        return result
    finally:
        call_hooks(hooks, "send_message_after", ctx)


def begin_send(hooks: list[Any], group: str, msgs: list[Message], oneway: bool = False) -> SendContext:
    ctx = SendContext(group, msgs, oneway=oneway)
    call_hooks(hooks, "send_message_before", ctx)
    return ctx


def end_send(hooks: list[Any], ctx: SendContext, fut: Any) -> None:
    """The after of an asynchronous send, from its finished future."""
    if fut.cancelled() or fut.exception() is not None:
        ctx.exception = fut.exception() if not fut.cancelled() else None
    else:
        _set_result(ctx, fut.result())
    call_hooks(hooks, "send_message_after", ctx)


def _set_result(ctx: SendContext, result: Any) -> None:
    if isinstance(result, SendResult):
        ctx.result, ctx.queue = result, result.message_queue
