"""Audit events for what does not pass through the console's services: logins and Django-admin changes.

Connected in :meth:`console.apps.ConsoleConfig.ready`:

- ``auth.login`` on every sign-in through a login form (pages and the Django admin; a programmatic login without
  an HTTP POST, like a test client's ``force_login``, is not one): ``ok=True`` with the user, ``ok=False`` with the
  username tried (a locked-out attempt is a failure too; ``auth.lockout`` marks the moment django-axes locks).
  ``after`` holds the client address and the path. Passwords are never recorded.
- ``admin.add`` / ``admin.change`` / ``admin.delete`` for each Django-admin ``LogEntry``: the model, object id,
  representation and change message.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db.models.signals import post_save
from django.http import HttpRequest

from console.services.audit import record

TARGET_MAX = 300
ADMIN_ACTIONS = {ADDITION: "admin.add", CHANGE: "admin.change", DELETION: "admin.delete"}


def _where(request: HttpRequest | None) -> dict[str, Any]:
    if request is None:
        return {}
    return {"ip": request.META.get("REMOTE_ADDR"), "path": getattr(request, "path", "")}


def on_login(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    if request is None or request.method != "POST":
        return  # not a sign-in over HTTP (e.g. a test client's force_login)
    record(user, "auth.login", user.get_username()[:TARGET_MAX], after=_where(request))


def on_login_failed(sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None,
                    **kwargs: Any) -> None:
    username = str(credentials.get("username") or "")[:TARGET_MAX]
    record(None, "auth.login", username, after={**_where(request), "error": "invalid credentials or locked out"},
           ok=False)


def on_locked_out(sender: Any, request: HttpRequest | None = None, username: str | None = None,
                  ip_address: str | None = None, **kwargs: Any) -> None:
    record(None, "auth.lockout", str(username or "")[:TARGET_MAX], after={**_where(request), "ip": ip_address},
           ok=False)


def on_admin_log(sender: Any, instance: LogEntry, created: bool, **kwargs: Any) -> None:
    if not created:
        return
    model = instance.content_type.model_class() if instance.content_type_id else None
    label = model._meta.label if model is not None else "unknown"
    record(instance.user, ADMIN_ACTIONS.get(instance.action_flag, "admin.change"),
           f"{label}:{instance.object_id}"[:TARGET_MAX],
           after={"object": instance.object_repr, "change": instance.get_change_message()})


def connect() -> None:
    from axes.signals import user_locked_out

    user_logged_in.connect(on_login, dispatch_uid="console.audit.login")
    user_login_failed.connect(on_login_failed, dispatch_uid="console.audit.login_failed")
    user_locked_out.connect(on_locked_out, dispatch_uid="console.audit.lockout")
    post_save.connect(on_admin_log, sender=LogEntry, dispatch_uid="console.audit.admin")
