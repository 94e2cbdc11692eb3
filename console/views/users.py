"""Users & tokens page (admin): each user's role (change it) and API token (create, rotate, revoke, each behind
a confirmation page; a new key is shown once)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from console.roles import ADMIN, ROLES
from console.selectors.users import get_user, list_users, user_json
from console.services.users import create_token, revoke_token, set_role
from console.views.base import error_page, page

TOKEN_ACTIONS = {"create": "Create a token", "rotate": "Rotate the token", "revoke": "Revoke the token"}


@page(ADMIN)
@require_http_methods(["GET"])
def user_list(request: HttpRequest) -> HttpResponse:
    search = request.GET.get("search", "").strip()[:150]
    return render(request, "console/users.html", {"users": list_users(search), "search": search, "roles": ROLES})


@page(ADMIN)
@require_POST
def user_role(request: HttpRequest, username: str) -> HttpResponse:
    role = request.POST.get("role", "") or None
    if role is not None and role not in ROLES:
        return error_page(request, 400, "invalid_role", f"role must be one of {', '.join(ROLES)} or none")
    after = set_role(request.user, get_user(username), role)
    messages.success(request, f"{username} is now {after or 'in no role'}.")
    return redirect("user-list-page")


@page(ADMIN)
@require_http_methods(["GET", "POST"])
def user_token(request: HttpRequest, username: str, action: str) -> HttpResponse:
    """GET: what ``action`` will do and a confirm form; POST with ``confirm=yes``: do it (a new key is shown
    on the result page only)."""
    if action not in TOKEN_ACTIONS:
        return error_page(request, 404, "not_found", f"no token action {action!r}")
    user = get_user(username)
    context = {"target": user_json(user), "action": action, "title": TOKEN_ACTIONS[action]}
    if request.method == "GET":
        return render(request, "console/user_token.html", context)
    if request.POST.get("confirm") != "yes":
        return render(request, "console/user_token.html", {**context, "confirm_error": True}, status=400)
    if action == "revoke":
        revoke_token(request.user, user)
        messages.success(request, f"The token of {username} is revoked.")
        return redirect("user-list-page")
    key = create_token(request.user, user, rotate=action == "rotate")
    return render(request, "console/user_token.html", {**context, "key": key, "target": user_json(get_user(username))},
                  status=201)
