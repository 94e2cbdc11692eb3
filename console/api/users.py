"""Users, roles and API tokens (admin): ``/api/v1/users/``."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView, validated
from console.api.serializers import SearchSerializer
from console.roles import ADMIN, ROLES
from console.selectors.users import get_user, list_users, user_json
from console.services.users import create_token, revoke_token, set_role


class RoleSerializer(serializers.Serializer):
    """``PATCH /users/{username}/``: ``role`` (viewer, operator, admin, or null for none)."""

    role = serializers.ChoiceField(choices=ROLES, allow_null=True)


class TokenCreateSerializer(serializers.Serializer):
    """``POST /users/{username}/token/``: ``rotate`` replaces an existing token (else that is a 409);
    ``expires_days`` sets its lifetime (default ``CONSOLE_API_TOKEN_TTL_DAYS``)."""

    rotate = serializers.BooleanField(default=False)
    expires_days = serializers.IntegerField(min_value=1, max_value=3650, required=False)


class UserListView(RoleAPIView):
    """``GET /users/?search=``: every user with role, flags and token (``key_prefix``, ``created``,
    ``expires``, ``last_used``; never the key, which is stored only as a hash)."""

    required_roles = {"GET": ADMIN}

    @extend_schema(operation_id="users_list", parameters=[SearchSerializer])
    def get(self, request: Request) -> Response:
        rows = list_users(validated(SearchSerializer, request.query_params)["search"])
        return Response({"results": rows, "count": len(rows)})


class UserDetailView(RoleAPIView):
    """``GET /users/{username}/``; ``PATCH {"role": ...}`` moves the user to that role group (audited)."""

    required_roles = {"GET": ADMIN, "PATCH": ADMIN}

    @extend_schema(operation_id="users_retrieve")
    def get(self, request: Request, username: str) -> Response:
        return Response(user_json(get_user(username)))

    @extend_schema(request=RoleSerializer, operation_id="users_role_update")
    def patch(self, request: Request, username: str) -> Response:
        user = get_user(username)
        set_role(request.user, user, validated(RoleSerializer, request.data)["role"])
        return Response(user_json(get_user(username)))


class UserTokenView(RoleAPIView):
    """``POST /users/{username}/token/`` -> 201 ``{"username", "key", "token"}``: the key is in this response
    only (the console keeps its SHA-256); ``DELETE`` revokes the token -> 204. Both are audited without the key."""

    required_roles = {"POST": ADMIN, "DELETE": ADMIN}

    @extend_schema(request=TokenCreateSerializer, operation_id="users_token_create")
    def post(self, request: Request, username: str) -> Response:
        user = get_user(username)
        data = validated(TokenCreateSerializer, request.data)
        key = create_token(request.user, user, rotate=data["rotate"], expires_days=data.get("expires_days"))
        return Response({"username": user.get_username(), "key": key, "token": user_json(get_user(username))["token"]},
                        status=status.HTTP_201_CREATED)

    @extend_schema(operation_id="users_token_destroy")
    def delete(self, request: Request, username: str) -> Response:
        revoke_token(request.user, get_user(username))
        return Response(status=status.HTTP_204_NO_CONTENT)
