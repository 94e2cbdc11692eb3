"""Reads for the audit log page's filters."""

from __future__ import annotations

from console.models import AuditEvent


def audit_actions() -> list[str]:
    """Every action name recorded so far, sorted (the page's action filter)."""
    return list(AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct())
