"""Permission classes by role (see :mod:`console.roles`).

Views name the role each method needs in ``required_roles`` (``{"GET": "viewer", "POST": "admin"}``); methods
not listed need ``admin``. The fixed classes serve views with one role for every method.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from console.roles import ADMIN, OPERATOR, VIEWER, has_role


class RolePermission(BasePermission):
    """Allows a request when the user holds the role the view requires for the HTTP method."""

    message = "your role does not allow this"

    def has_permission(self, request: Request, view: Any) -> bool:
        roles: dict[str, str] = getattr(view, "required_roles", {})
        method = "GET" if request.method in ("HEAD", "OPTIONS") else str(request.method)
        return has_role(request.user, roles.get(method, ADMIN))


class _FixedRole(BasePermission):
    role = ADMIN
    message = "your role does not allow this"

    def has_permission(self, request: Request, view: Any) -> bool:
        return has_role(request.user, self.role)


class IsViewer(_FixedRole):
    """Viewer or higher."""

    role = VIEWER


class IsOperator(_FixedRole):
    """Operator or higher."""

    role = OPERATOR


class IsAdmin(_FixedRole):
    """Admin (or superuser)."""

    role = ADMIN
