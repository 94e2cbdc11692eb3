"""Django admin registration (read-only audit trail)."""

from __future__ import annotations

from django.contrib import admin

from console.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """The audit log is append-only: viewable, never editable."""

    list_display = ("timestamp", "username", "action", "target", "ok")
    list_filter = ("action", "ok")
    search_fields = ("username", "target")

    def has_change_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]  # Django admin hook signature
        return False

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]  # Django admin hook signature
        return False
