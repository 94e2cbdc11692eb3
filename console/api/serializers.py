"""Request serializers: input validation only; responses are plain dicts built by selectors and services."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from broker_core.protocol.filter import SubscriptionParseError, parse_subscription
from broker_core.protocol.sql92 import Sql92Error, compile_sql92
from broker_core.protocol.validation import group_error, topic_error
from console.selectors.groups import ResetTarget
from console.selectors.messages import OFFSET_MSG_ID
from console.services.messages import MAX_BODY_BYTES, OutgoingMessage

PERMS = (2, 4, 6)  # write only, read only, read-write (RocketMQ's PermName)


def _topic(value: str) -> str:
    err = topic_error(value)
    if err:
        raise serializers.ValidationError(err)
    return value


class TopicCreateSerializer(serializers.Serializer):
    """``POST /topics/``."""

    name = serializers.CharField(validators=[_topic])
    read_queue_nums = serializers.IntegerField(min_value=1, max_value=1024, default=4)
    write_queue_nums = serializers.IntegerField(min_value=1, max_value=1024, default=4)
    perm = serializers.ChoiceField(choices=PERMS, default=6)
    brokers = serializers.ListField(child=serializers.CharField(), required=False, allow_empty=False)


class TopicUpdateSerializer(serializers.Serializer):
    """``PATCH /topics/{name}/``: any of the fields."""

    read_queue_nums = serializers.IntegerField(min_value=1, max_value=1024, required=False)
    write_queue_nums = serializers.IntegerField(min_value=1, max_value=1024, required=False)
    perm = serializers.ChoiceField(choices=PERMS, required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError("give at least one of read_queue_nums, write_queue_nums, perm")
        return attrs


class BodyField(serializers.CharField):
    """A message body: DRF's CharField without its surrogate validator, which scans every character in a Python
    loop (about 0.15 ms a KiB, 15 ms for a 100-message request); lone surrogates are refused by the UTF-8 encode
    in :meth:`OutgoingMessageSerializer.validate` instead, at C speed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators: list[Any] = [v for v in self.validators
                                      if not isinstance(v, ProhibitSurrogateCharactersValidator)]


class OutgoingMessageSerializer(serializers.Serializer):
    """One message of a produce request; ``validate`` turns it into an :class:`OutgoingMessage`."""

    body = BodyField(trim_whitespace=False, allow_blank=False)
    body_encoding = serializers.ChoiceField(choices=("utf-8", "base64"), default="utf-8")
    tags = serializers.CharField(required=False, allow_blank=True, max_length=255)
    keys = serializers.ListField(child=serializers.CharField(max_length=255), required=False, max_length=64)
    properties = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False)
    delay_level = serializers.IntegerField(min_value=0, max_value=18, default=0)

    @staticmethod
    def _plain(data: Any) -> dict[str, Any] | None:
        """The attributes DRF's fields would produce for the commonest message, ``{"body": "<non-empty text>"}``
        (optionally with ``"body_encoding": "utf-8"``), or None for any other input."""
        if (isinstance(data, dict) and isinstance(data.get("body"), str) and data["body"]
                and data.keys() <= {"body", "body_encoding"} and data.get("body_encoding", "utf-8") == "utf-8"):
            return {"body": data["body"], "body_encoding": "utf-8", "delay_level": 0}
        return None

    def run_validation(self, data: Any = serializers.empty) -> Any:
        """Fast path for a plain message (:meth:`_plain`): straight to ``validate``, without six field
        validations per message (about a third of a 100-message request's time) and without ``run_validators``
        (this serializer has no validators and no read-only fields, so it only deep-copied the six bound fields,
        about a sixth of a one-message produce). Anything else takes DRF's full path, so every other error is
        DRF's own; ``validate``'s errors are wrapped as DRF wraps them."""
        plain = self._plain(data)
        if plain is None or self.validators:
            return super().run_validation(data)
        try:
            return self.validate(plain)
        except (serializers.ValidationError, DjangoValidationError) as exc:
            raise serializers.ValidationError(detail=serializers.as_serializer_error(exc)) from None

    def validate(self, attrs: dict[str, Any]) -> OutgoingMessage:
        return outgoing(attrs)


def outgoing(attrs: dict[str, Any]) -> OutgoingMessage:
    """The :class:`OutgoingMessage` of one message's validated attributes (the body decoded and checked)."""
    if attrs["body_encoding"] == "base64":
        try:
            body = base64.b64decode(attrs["body"], validate=True)
        except (binascii.Error, ValueError):
            raise serializers.ValidationError({"body": "body is not valid base64"}) from None
    else:
        try:
            body = attrs["body"].encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = ord(attrs["body"][exc.start])
            raise serializers.ValidationError(
                {"body": f"body is not valid text: lone surrogate U+{bad:X} at character {exc.start}"}) from None
    if not body:
        raise serializers.ValidationError({"body": "body is empty"})
    if len(body) > MAX_BODY_BYTES:
        raise serializers.ValidationError({"body": f"body is {len(body)} bytes, the limit is {MAX_BODY_BYTES}"})
    return OutgoingMessage(body=body, tags=attrs.get("tags") or None, keys=attrs.get("keys", []),
                           properties=attrs.get("properties", {}), delay_level=attrs["delay_level"])


MAX_PRODUCE_MESSAGES = 1000


class ProduceSerializer(serializers.Serializer):
    """``POST /topics/{name}/messages/``."""

    messages = OutgoingMessageSerializer(many=True, allow_empty=False, max_length=MAX_PRODUCE_MESSAGES)


def plain_produce(data: Any) -> list[OutgoingMessage] | None:
    """``ProduceSerializer(data=data)``'s validated ``messages`` when every message is a plain one
    (:meth:`OutgoingMessageSerializer._plain`) and each converts without error; None for any other input, which the
    caller validates with :class:`ProduceSerializer` (so every error is DRF's own). Building the serializer, its
    list and its bound fields (deep copies) was about 55 us of a one-message produce; this is a few."""
    messages = data.get("messages") if type(data) is dict else None
    if type(messages) is not list or not 0 < len(messages) <= MAX_PRODUCE_MESSAGES:
        return None
    plain: list[dict[str, Any]] = []
    for m in messages:
        attrs = OutgoingMessageSerializer._plain(m)
        if attrs is None:
            return None
        plain.append(attrs)
    try:
        return [outgoing(attrs) for attrs in plain]
    except serializers.ValidationError:
        return None


def _sql92(value: str) -> str:
    """Raise a ValidationError with the parser's reason unless ``value`` is a SQL92 selector RocketMQ accepts."""
    try:
        compile_sql92(value)
    except Sql92Error as exc:
        raise serializers.ValidationError(str(exc)) from None
    return value


class MessageSearchSerializer(serializers.Serializer):
    """``GET /messages/?topic=&key=`` (by key) or ``?topic=&begin=[&end=][&cursor=]`` (time-range browse)."""

    topic = serializers.CharField(validators=[_topic])
    key = serializers.CharField(max_length=255, required=False)
    begin = serializers.DateTimeField(required=False)
    end = serializers.DateTimeField(required=False)
    cursor = serializers.CharField(required=False, max_length=100_000)
    limit = serializers.IntegerField(min_value=1, max_value=1000, default=64)
    sql = serializers.CharField(required=False, max_length=4096, validators=[_sql92],
                                help_text="time-range browse only: keep messages this SQL92 expression selects "
                                          "(MessageSelector.bySql over properties, e.g. a > 5 AND TAGS = 'x')")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "key" in attrs and "sql" in attrs:
            raise serializers.ValidationError({"sql": "a SQL92 filter applies to a time-range browse, not a key "
                                                      "lookup"})
        if "key" not in attrs and "begin" not in attrs:
            raise serializers.ValidationError("give key (lookup by key) or begin (browse by time range)")
        if "key" in attrs and "cursor" in attrs:
            raise serializers.ValidationError({"cursor": "a cursor pages a time-range browse, not a key lookup"})
        if "begin" in attrs and "end" in attrs and attrs["end"] < attrs["begin"]:
            raise serializers.ValidationError({"end": "end is before begin"})
        return attrs


def validate_group(value: str) -> str:
    """Raise a ValidationError unless ``value`` is a valid consumer group name."""
    err = group_error(value)
    if err:
        raise serializers.ValidationError(err)
    return value


class ReceiveSerializer(serializers.Serializer):
    """``POST /consumer-groups/{group}/receive/``."""

    topic = serializers.CharField(validators=[_topic])
    max_messages = serializers.IntegerField(min_value=1, max_value=32, default=16)
    invisible_seconds = serializers.FloatField(min_value=1, max_value=12 * 3600, default=30)
    wait_seconds = serializers.FloatField(min_value=0, max_value=20, default=0)
    expression = serializers.CharField(max_length=4096, default="*",
                                       help_text="tags (* or TagA || TagB), or a SQL92 expression")
    expression_type = serializers.ChoiceField(choices=["TAG", "SQL92"], default="TAG",
                                              help_text="SQL92 needs the broker's enablePropertyFilter=true")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        try:
            parse_subscription(attrs.get("topic", ""), attrs.get("expression", "*"), attrs.get("expression_type"))
        except SubscriptionParseError as exc:
            raise serializers.ValidationError({"expression": str(exc)}) from None
        return attrs


class AckSerializer(serializers.Serializer):
    """``POST /consumer-groups/{group}/ack/``."""

    topic = serializers.CharField(validators=[_topic])
    receipt_handles = serializers.ListField(child=serializers.CharField(), allow_empty=False, max_length=1000)


def _offset_id(value: str) -> str:
    if not OFFSET_MSG_ID.match(value):
        raise serializers.ValidationError(f"{value!r} is not an offset message id (32 hex characters)")
    return value.upper()


class ResendSerializer(serializers.Serializer):
    """``POST /dlq/{group}/resend/``; ``async`` runs it as a job (202 with the job); ``force`` resends again."""

    offset_msg_ids = serializers.ListField(child=serializers.CharField(validators=[_offset_id]), allow_empty=False,
                                           max_length=1000)
    topic = serializers.CharField(required=False, validators=[_topic])

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["async"] = serializers.BooleanField(default=False, help_text="run as a background job")
        fields["force"] = serializers.BooleanField(
            default=False, help_text="resend even dead letters resent before (otherwise those answer with their "
                                     "earlier copy, already_resent=true)")
        return fields


class NackSerializer(AckSerializer):
    """``POST /consumer-groups/{group}/nack/``."""


class QueueOffsetSerializer(serializers.Serializer):
    """One exact queue offset of a reset."""

    broker = serializers.CharField(max_length=255)
    queue_id = serializers.IntegerField(min_value=0, max_value=1023)
    offset = serializers.IntegerField(min_value=0)


EARLIEST, LATEST = "earliest", "latest"


class ResetOffsetSerializer(serializers.Serializer):
    """``POST /consumer-groups/{group}/reset-offset/``: ``topic`` and exactly one of ``timestamp`` (ISO 8601,
    ``earliest`` or ``latest``) or ``offsets``; validates to ``{"topic", "dry_run", "target": ResetTarget}``."""

    topic = serializers.CharField(validators=[_topic])
    timestamp = serializers.CharField(required=False, max_length=64,
                                      help_text="ISO 8601 date-time, 'earliest' or 'latest'")
    offsets = QueueOffsetSerializer(many=True, required=False, allow_empty=False, max_length=4096)
    dry_run = serializers.BooleanField(default=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("timestamp" in attrs) == ("offsets" in attrs):
            raise serializers.ValidationError("give exactly one of timestamp or offsets")
        if "offsets" in attrs:
            offsets = {(o["broker"], o["queue_id"]): o["offset"] for o in attrs["offsets"]}
            if len(offsets) != len(attrs["offsets"]):
                raise serializers.ValidationError({"offsets": "a queue is named more than once"})
            target = ResetTarget(offsets=offsets)
        elif attrs["timestamp"] == EARLIEST:
            target = ResetTarget(timestamp_ms=0)
        elif attrs["timestamp"] == LATEST:
            target = ResetTarget(timestamp_ms=-1)
        else:
            try:
                when = serializers.DateTimeField().to_internal_value(attrs["timestamp"])
            except serializers.ValidationError:
                raise serializers.ValidationError(
                    {"timestamp": "timestamp must be an ISO 8601 date-time, 'earliest' or 'latest'"}) from None
            target = ResetTarget(timestamp_ms=max(0, int(when.timestamp() * 1000)))  # before 1970 = earliest
        return {"topic": attrs["topic"], "dry_run": attrs["dry_run"], "target": target}


class GroupQuerySerializer(serializers.Serializer):
    """``?topic=`` of a consumer group view."""

    topic = serializers.CharField(required=False, validators=[_topic])


class SearchSerializer(serializers.Serializer):
    """``?search=`` of a listing (case-insensitive substring)."""

    search = serializers.CharField(required=False, allow_blank=True, max_length=255, default="")


class LimitSerializer(serializers.Serializer):
    """``?limit=`` of a listing."""

    limit = serializers.IntegerField(min_value=1, max_value=1000, default=100)

