"""Root URLs: the REST API under ``/api/v1/``, the health check and Django's admin."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from console.api.health import HealthView

urlpatterns = [
    path("healthz", HealthView.as_view(), name="healthz"),
    path("api/v1/", include("console.api.urls")),
    path("admin/", admin.site.urls),
]
