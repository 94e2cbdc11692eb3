"""Throttling: DRF's per-user and anonymous API rates (from settings), and the login lockout (django-axes)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

from console.models import AuditEvent

PASSWORD = "right-password-1"


@pytest.fixture
def rates(settings: Any) -> Any:
    settings.CONSOLE_API_THROTTLE_RATES = {"anon": "3/min", "user": "5/min"}
    cache.clear()
    yield settings
    cache.clear()


def test_an_api_user_past_the_rate_gets_429_and_others_do_not(rates: Any, viewer: APIClient,
                                                              operator: APIClient) -> None:
    assert [viewer.get("/api/v1/alert-rules/").status_code for _ in range(5)] == [200] * 5
    refused = viewer.get("/api/v1/alert-rules/")
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) > 0
    assert operator.get("/api/v1/alert-rules/").status_code == 200  # counted per user


def test_anonymous_requests_have_their_own_rate(rates: Any) -> None:
    client = APIClient()
    assert 429 not in [client.get("/healthz").status_code for _ in range(3)]
    assert client.get("/healthz").status_code == 429


def test_no_throttling_when_the_rate_is_off(settings: Any, viewer: APIClient) -> None:
    settings.CONSOLE_API_THROTTLE_RATES = {"anon": None, "user": None}
    assert {viewer.get("/api/v1/alert-rules/").status_code for _ in range(12)} == {200}


def _login(client: Client, username: str, password: str) -> Any:
    return client.post("/login/", {"username": username, "password": password})


def test_login_locks_after_repeated_failures_even_with_the_right_password(settings: Any) -> None:
    settings.AXES_FAILURE_LIMIT = 3
    User.objects.create_user("lockme", password=PASSWORD)
    User.objects.create_user("other", password=PASSWORD)
    client = Client()
    assert [_login(client, "lockme", "wrong").status_code for _ in range(2)] == [200, 200]  # the form again
    assert _login(client, "lockme", "wrong").status_code == 429  # the third failure locks
    locked = _login(client, "lockme", PASSWORD)
    assert locked.status_code == 429 and b"Too many failed logins" in locked.content
    assert "_auth_user_id" not in client.session
    assert Client().get("/").status_code == 302  # still anonymous: the dashboard sends to login
    ok = _login(Client(), "other", PASSWORD)  # another account from the same address is not locked
    assert ok.status_code == 302
    failures = AuditEvent.objects.filter(action="auth.login", target="lockme", ok=False).count()
    assert failures == 4 and AuditEvent.objects.filter(action="auth.lockout", target="lockme").exists()


def test_a_successful_login_resets_the_failure_count(settings: Any) -> None:
    settings.AXES_FAILURE_LIMIT = 3
    User.objects.create_user("forgetful", password=PASSWORD)
    client = Client()
    for _ in range(2):
        _login(client, "forgetful", "wrong")
    assert _login(client, "forgetful", PASSWORD).status_code == 302
    client.post("/logout/")
    for _ in range(2):
        assert _login(client, "forgetful", "wrong").status_code == 200
    assert _login(client, "forgetful", PASSWORD).status_code == 302
