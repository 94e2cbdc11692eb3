"""Page forms. They validate like the API serializers (same name rules and limits) and build the same inputs
the services take."""

from __future__ import annotations

import base64
import binascii
import datetime
from typing import Any

from django import forms
from django.utils import timezone

from broker_core.protocol.sql92 import Sql92Error, compile_sql92
from broker_core.protocol.validation import group_error, topic_error
from console.api.serializers import PERMS
from console.selectors.messages import MESSAGE_ID, OFFSET_MSG_ID
from console.selectors.ui_messages import SYSTEM_PROPERTIES
from console.services.messages import MAX_BODY_BYTES, OutgoingMessage

PERM_CHOICES = [(6, "read-write (6)"), (4, "read only (4)"), (2, "write only (2)")]
assert {p for p, _ in PERM_CHOICES} == set(PERMS)


def _topic(value: str) -> str:
    err = topic_error(value)
    if err:
        raise forms.ValidationError(err)
    return value


def _group(value: str) -> str:
    err = group_error(value)
    if err:
        raise forms.ValidationError(err)
    return value


class TopicCreateForm(forms.Form):
    name = forms.CharField(max_length=127, validators=[_topic])
    read_queue_nums = forms.IntegerField(min_value=1, max_value=1024, initial=4, label="Read queues")
    write_queue_nums = forms.IntegerField(min_value=1, max_value=1024, initial=4, label="Write queues")
    perm = forms.TypedChoiceField(choices=PERM_CHOICES, coerce=int, initial=6, label="Permission")


class SendMessageForm(forms.Form):
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), strip=False)
    body_encoding = forms.ChoiceField(choices=[("utf-8", "text (UTF-8)"), ("base64", "base64")], initial="utf-8",
                                      label="Body encoding")
    tags = forms.CharField(required=False, max_length=255)
    keys = forms.CharField(required=False, max_length=2000, help_text="comma or space separated")
    properties = forms.CharField(required=False, max_length=32 * 1024, strip=False,
                                 widget=forms.Textarea(attrs={"rows": 3}), help_text="one name=value per line")
    reproduced_from = forms.CharField(required=False, max_length=32, widget=forms.HiddenInput())

    def message(self) -> OutgoingMessage:
        """The validated message (call after ``is_valid()``)."""
        data = self.cleaned_data
        return OutgoingMessage(body=data["body_bytes"], tags=data.get("tags") or None, keys=data["key_list"],
                               properties=data["property_map"])

    def clean_reproduced_from(self) -> str:
        value = self.cleaned_data.get("reproduced_from", "").strip()
        if value and not OFFSET_MSG_ID.match(value):
            raise forms.ValidationError("not a message id")
        return value.upper()

    def clean_properties(self) -> str:
        props: dict[str, str] = {}
        for number, line in enumerate(self.cleaned_data.get("properties", "").splitlines(), 1):
            if not line.strip():
                continue
            name, sep, value = line.partition("=")
            name = name.strip()
            if not sep or not name:
                raise forms.ValidationError(f"line {number}: write name=value")
            if name in SYSTEM_PROPERTIES:
                raise forms.ValidationError(f"line {number}: {name} is set by the broker or by the fields above")
            if any(c in name + value for c in "\x01\x02"):
                raise forms.ValidationError(f"line {number}: control characters are not allowed")
            props[name] = value
        self.cleaned_data["property_map"] = props
        return self.cleaned_data.get("properties", "")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if "body" in data:
            if data.get("body_encoding") == "base64":
                try:
                    body = base64.b64decode(data["body"], validate=True)
                except (binascii.Error, ValueError):
                    self.add_error("body", "body is not valid base64")
                    return data
            else:
                body = data["body"].encode("utf-8")
            if not body:
                self.add_error("body", "body is empty")
            elif len(body) > MAX_BODY_BYTES:
                self.add_error("body", f"body is {len(body)} bytes, the limit is {MAX_BODY_BYTES}")
            data["body_bytes"] = body
        keys = [k for k in (data.get("keys") or "").replace(",", " ").split() if k]
        if len(keys) > 64 or any(len(k) > 255 for k in keys):
            self.add_error("keys", "at most 64 keys of up to 255 characters")
        data["key_list"] = keys
        return data


class MessageSearchForm(forms.Form):
    """Either ``msg_id`` (an offset id, or a unique id together with ``topic``) or ``topic`` + ``key``."""

    msg_id = forms.CharField(required=False, max_length=34, label="Message id")
    topic = forms.CharField(required=False, max_length=127, validators=[_topic])
    key = forms.CharField(required=False, max_length=255)

    def clean_msg_id(self) -> str:
        value = self.cleaned_data.get("msg_id", "").strip()
        if value and not MESSAGE_ID.match(value):
            raise forms.ValidationError("a message id is 32 hex characters (34 for a RocketMQ 5 id)")
        return value.upper()

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not self.errors and not data.get("msg_id") and not (data.get("topic") and data.get("key")):
            raise forms.ValidationError("give a message id, or a topic and a key")
        return data


class GroupForm(forms.Form):
    group = forms.CharField(max_length=255, validators=[_group], label="Consumer group")


UTC_HELP = "UTC"


class LocalTimeLabels:
    """Replaces "(UTC)" in field labels with the zone activated for the request (the user's preference):
    Django's DateTimeField reads a naive ``datetime-local`` value in that zone."""

    fields: dict[str, Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        zone = timezone.get_current_timezone_name()
        for field in self.fields.values():
            if field.label and "(UTC)" in field.label:
                field.label = field.label.replace("(UTC)", f"({zone})")


def _utc(value: Any) -> Any:
    """A naive value read as UTC (DateTimeField already made values aware in the active zone)."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=datetime.UTC)
    return value


class DateTimeLocalInput(forms.DateTimeInput):
    input_type = "datetime-local"

    def __init__(self) -> None:
        super().__init__(format="%Y-%m-%dT%H:%M:%S", attrs={"step": "1"})


QUEUE_INPUT = "q:"  # the reset form's per-queue inputs: q:<broker>:<queue id>


class ResetOffsetForm(LocalTimeLabels, forms.Form):
    """Reset a group's offsets on a topic: to the earliest or latest message, to a point in time, or to exact
    offsets for chosen queues (inputs ``q:<broker>:<queue id>``, see :meth:`queue_offsets`)."""

    topic = forms.CharField(max_length=127, validators=[_topic])
    mode = forms.ChoiceField(choices=[("earliest", "Earliest retained message"),
                                      ("latest", "Latest (skip everything not consumed yet)"),
                                      ("time", "A point in time"),
                                      ("exact", "Exact offsets per queue")], initial="time",
                             widget=forms.RadioSelect, label="Reset to")
    timestamp = forms.DateTimeField(required=False, widget=DateTimeLocalInput(), label="Time (UTC)",
                                    help_text="the first message stored at or after this time is consumed next")

    def clean_timestamp(self) -> Any:
        return _utc(self.cleaned_data.get("timestamp"))

    def queue_offsets(self) -> dict[tuple[str, int], int]:
        """The per-queue inputs ``q:<broker>:<queue id>`` that hold an offset (blank ones leave the queue as it
        is); a ValueError names a bad one."""
        offsets: dict[tuple[str, int], int] = {}
        for name, raw in self.data.items():
            if not name.startswith(QUEUE_INPUT) or not str(raw).strip():
                continue
            broker, _, queue = name[len(QUEUE_INPUT):].rpartition(":")
            value = str(raw).strip()
            if not broker or not queue.isdigit() or not value.isdigit() or len(value) > 19:
                raise ValueError(f"{broker or '?'}/{queue}: an offset is a whole number >= 0")
            offsets[(broker, int(queue))] = int(value)
        return offsets

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("mode") == "time" and not data.get("timestamp"):
            self.add_error("timestamp", "give the time to reset to")
        if data.get("mode") == "exact":
            try:
                data["offsets"] = self.queue_offsets()
            except ValueError as exc:
                self.add_error(None, str(exc))
            else:
                if not data["offsets"]:
                    self.add_error(None, "enter the offset of at least one queue (blank queues are left as they are)")
        return data


class BrowseForm(LocalTimeLabels, forms.Form):
    """Every message of a topic stored in [begin, end] (UTC); ``end`` empty means up to now and beyond."""

    topic = forms.CharField(max_length=127, validators=[_topic])
    begin = forms.DateTimeField(widget=DateTimeLocalInput(), label="From (UTC)")
    end = forms.DateTimeField(required=False, widget=DateTimeLocalInput(), label="To (UTC)",
                              help_text="empty: no upper bound")
    sql = forms.CharField(required=False, max_length=4096, label="SQL92 filter",
                          help_text="optional, over message properties: a BETWEEN 1 AND 5 AND TAGS IN ('x', 'y')")

    def clean_begin(self) -> Any:
        return _utc(self.cleaned_data.get("begin"))

    def clean_end(self) -> Any:
        return _utc(self.cleaned_data.get("end"))

    def clean_sql(self) -> str:
        sql = str(self.cleaned_data.get("sql") or "").strip()
        if sql:
            try:
                compile_sql92(sql)
            except Sql92Error as exc:
                raise forms.ValidationError(str(exc)) from None
        return sql

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("begin") and data.get("end") and data["end"] < data["begin"]:
            self.add_error("end", "end is before begin")
        return data
