"""Alert endpoints: rules (list/create, detail/update/delete, silence) and alerts (list, resolve by hand).

Viewers read (without webhook URLs); operators and admins change. Every change is audited (see
:mod:`console.alerts.rules`).
"""

from __future__ import annotations

from typing import Any

from django.core.validators import URLValidator
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from console.alerts import rules as rule_services
from console.alerts import selectors
from console.alerts.models import Alert, AlertRule
from console.alerts.rules import MAX_THRESHOLD, check_threshold
from console.alerts.webhook_guard import validate_webhook_url
from console.api.base import RoleAPIView, validated
from console.roles import OPERATOR, VIEWER

KINDS = [k for k, _ in AlertRule.KINDS]
STATES = [s for s, _ in Alert.STATES]


class AlertRuleSerializer(serializers.Serializer):
    """``POST /alert-rules/`` (and ``PATCH`` with any of the fields). ``target``: a group (lag, DLQ kinds) or
    broker (disk, broker_missing) name or shell-style glob, ``*`` for all; ``threshold`` is ignored by
    ``broker_missing``; ``for_evaluations``: consecutive evaluations (one a minute) before it fires;
    ``window_minutes``: how far back ``dlq_growth`` compares; ``repeat_minutes``: re-notify while firing
    (0: never)."""

    name = serializers.CharField(max_length=100)
    kind = serializers.ChoiceField(choices=KINDS)
    target = serializers.CharField(max_length=255, default="*")
    threshold = serializers.FloatField(default=1, min_value=0, max_value=MAX_THRESHOLD)
    for_evaluations = serializers.IntegerField(min_value=1, max_value=1440, default=1)
    window_minutes = serializers.IntegerField(min_value=1, max_value=10080, default=10)
    emails = serializers.ListField(child=serializers.EmailField(), default=list, max_length=50)
    webhook_url = serializers.CharField(max_length=1000, default="", allow_blank=True,
                                        validators=[URLValidator(schemes=["http", "https"]), validate_webhook_url])
    repeat_minutes = serializers.IntegerField(min_value=0, max_value=10080, default=0)
    enabled = serializers.BooleanField(default=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        rule: AlertRule | None = self.context.get("rule")
        kind = attrs.get("kind", rule.kind if rule else "")
        if "threshold" in attrs or "kind" in attrs:
            threshold = attrs.get("threshold", rule.threshold if rule else 1)
            if kind == AlertRule.BROKER_MISSING:
                attrs["threshold"] = 1.0
            elif (error := check_threshold(kind, threshold)) is not None:
                raise serializers.ValidationError({"threshold": error})
        if self.partial and not attrs:
            raise serializers.ValidationError("give at least one field to change")
        return attrs


class SilenceSerializer(serializers.Serializer):
    """``POST /alert-rules/{id}/silence/``: silence notifications for ``minutes`` from now (0 ends a silence)."""

    minutes = serializers.IntegerField(min_value=0, max_value=30 * 24 * 60)


class AlertQuerySerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=STATES, required=False)
    rule = serializers.IntegerField(min_value=1, max_value=2**62, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=1000, default=100)


class AlertRuleListView(RoleAPIView):
    """``GET`` every alert rule with its firing count; ``POST`` creates one (operator)."""

    required_roles = {"GET": VIEWER, "POST": OPERATOR}

    @extend_schema(operation_id="alert_rules_list")
    def get(self, request: Request) -> Response:
        rows = selectors.list_rules(selectors.can_see_webhooks(request.user))
        return Response({"results": rows, "count": len(rows)})

    @extend_schema(request=AlertRuleSerializer, operation_id="alert_rules_create")
    def post(self, request: Request) -> Response:
        data = validated(AlertRuleSerializer, request.data)
        return Response(rule_services.create_rule(request.user, data), status=status.HTTP_201_CREATED)


class AlertRuleDetailView(RoleAPIView):
    """One rule: ``GET``, ``PATCH`` any of its fields, ``DELETE`` it (its alert history is kept)."""

    required_roles = {"GET": VIEWER, "PATCH": OPERATOR, "DELETE": OPERATOR}

    def get(self, request: Request, rule_id: int) -> Response:
        return Response(selectors.rule_json(selectors.get_rule(rule_id), selectors.can_see_webhooks(request.user)))

    @extend_schema(request=AlertRuleSerializer)
    def patch(self, request: Request, rule_id: int) -> Response:
        rule = selectors.get_rule(rule_id)
        serializer = AlertRuleSerializer(data=request.data, partial=True, context={"rule": rule})
        serializer.is_valid(raise_exception=True)
        return Response(rule_services.update_rule(request.user, rule.pk, dict(serializer.validated_data)))

    def delete(self, request: Request, rule_id: int) -> Response:
        rule_services.delete_rule(request.user, rule_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AlertRuleSilenceView(RoleAPIView):
    """``POST {"minutes": N}``: the rule keeps evaluating and recording alerts but notifies nobody for N
    minutes (0 ends the silence)."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=SilenceSerializer)
    def post(self, request: Request, rule_id: int) -> Response:
        minutes = validated(SilenceSerializer, request.data)["minutes"]
        return Response(rule_services.silence_rule(request.user, rule_id, minutes))


class AlertListView(RoleAPIView):
    """``GET`` alerts newest first (``?state=pending|firing|resolved``, ``?rule=<id>``, ``?limit=``), each with
    its notifications (channel, outcome, status code, error)."""

    required_roles = {"GET": VIEWER}

    @extend_schema(operation_id="alerts_list", parameters=[
        OpenApiParameter("state", str, enum=STATES), OpenApiParameter("rule", int),
        OpenApiParameter("limit", int)])
    def get(self, request: Request) -> Response:
        q = validated(AlertQuerySerializer, request.query_params)
        rows = selectors.list_alerts(q.get("state", ""), q.get("rule"), q["limit"],
                                     selectors.can_see_webhooks(request.user))
        return Response({"results": rows, "count": len(rows)})


class AlertResolveView(RoleAPIView):
    """``POST``: resolve an open alert by hand (409 when it is resolved already). If its condition still holds,
    no new alert opens for that subject until the condition has cleared once."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=None)
    def post(self, request: Request, alert_id: int) -> Response:
        return Response(rule_services.resolve_alert(request.user, alert_id))
