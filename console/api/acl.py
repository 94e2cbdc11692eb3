"""Broker ACL 1.0 endpoints: the overview (viewers; never secrets) and, for admins, accounts and the global white
list applied to every broker of a cluster with each broker's result."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView, validated
from console.roles import ADMIN, VIEWER
from console.selectors.acl import acl_overview
from console.services.acl import PERMS, AccountInput, delete_account, save_account, set_global_white

CLUSTER = OpenApiParameter("cluster", str, description="the cluster (default: the first the name server lists)")


class AccountSerializer(serializers.Serializer):
    cluster = serializers.CharField(required=False, allow_blank=True, default="")
    access_key = serializers.CharField(min_length=7, max_length=128)
    secret_key = serializers.CharField(required=False, allow_blank=True, default="", max_length=128,
                                       help_text="blank: keep (update) or generate (new); returned once")
    new = serializers.BooleanField(default=False)
    admin = serializers.BooleanField(default=False)
    white_remote_address = serializers.CharField(required=False, allow_blank=True, default="", max_length=512)
    default_topic_perm = serializers.ChoiceField(choices=PERMS, default="DENY")
    default_group_perm = serializers.ChoiceField(choices=PERMS, default="SUB")
    topic_perms = serializers.ListField(child=serializers.CharField(max_length=300), default=list)
    group_perms = serializers.ListField(child=serializers.CharField(max_length=300), default=list)


class WhiteSerializer(serializers.Serializer):
    cluster = serializers.CharField(required=False, allow_blank=True, default="")
    patterns = serializers.ListField(child=serializers.CharField(max_length=100), default=list)


class AclView(RoleAPIView):
    """``GET /acl/?cluster=``: each broker's ACL version and rules digest (``in_step``), accounts without
    secrets, the global white list."""

    required_roles = {"GET": VIEWER}

    @extend_schema(parameters=[CLUSTER])
    def get(self, request: Request) -> Response:
        return Response(acl_overview(request.query_params.get("cluster") or None))


class AclAccountsView(RoleAPIView):
    """``POST /acl/accounts/``: create (``new``) or update an account on every broker of the cluster; the
    per-broker ``results`` and, when this call set one, the ``secret`` (returned this once)."""

    required_roles = {"POST": ADMIN}

    @extend_schema(request=AccountSerializer)
    def post(self, request: Request) -> Response:
        d = validated(AccountSerializer, request.data)
        account = AccountInput(d["access_key"], d["secret_key"], d["admin"], d["white_remote_address"],
                               d["default_topic_perm"], d["default_group_perm"], d["topic_perms"], d["group_perms"])
        return Response(save_account(request.user, d["cluster"] or None, account, new=d["new"]))


class AclAccountView(RoleAPIView):
    """``DELETE /acl/accounts/{access_key}/?cluster=``: on every broker; per-broker results."""

    required_roles = {"DELETE": ADMIN}

    @extend_schema(parameters=[CLUSTER])
    def delete(self, request: Request, access_key: str) -> Response:
        return Response(delete_account(request.user, request.query_params.get("cluster") or None, access_key))


class AclGlobalWhiteView(RoleAPIView):
    """``PUT /acl/global-white/`` ``{cluster, patterns}``: replace the global white list on every broker."""

    required_roles = {"PUT": ADMIN}

    @extend_schema(request=WhiteSerializer)
    def put(self, request: Request) -> Response:
        d = validated(WhiteSerializer, request.data)
        return Response(set_global_white(request.user, d["cluster"] or None, d["patterns"]))
