"""Django admin registration (read-only audit trail: no add, change or delete, for anyone)."""

from __future__ import annotations

from django.contrib import admin

from console.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """The audit log is append-only: viewable, never editable or deletable (also not by superusers, and not by
    the bulk "delete selected" action, which needs the delete permission)."""

    list_display = ("timestamp", "username", "action", "target", "ok")
    list_filter = ("action", "ok")
    search_fields = ("username", "target")

    def has_change_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]  # Django admin hook signature
        return False

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]  # Django admin hook signature
        return False

    def has_delete_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]  # admin hook
        return False
