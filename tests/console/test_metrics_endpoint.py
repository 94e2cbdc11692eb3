"""The console's /metrics (django-prometheus): Prometheus text with the requests the console answered, by view."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_metrics_count_the_requests_answered(client: Client) -> None:
    assert client.get("/healthz").status_code in (200, 503)
    resp = client.get("/metrics")
    assert resp.status_code == 200
    assert resp["Content-Type"].startswith("text/plain")
    text = resp.content.decode()
    lines = [line for line in text.splitlines()
             if line.startswith("django_http_requests_total_by_view_transport_method_total{")
             and 'view="healthz"' in line]
    assert lines and float(lines[0].rsplit(" ", 1)[1]) >= 1, text[:2000]
    assert "django_http_requests_latency_seconds_by_view_method_bucket" in text
