"""Webhook SSRF: loopback, private, link-local and other non-public targets are refused on save and at send
time unless allow-listed, and a redirect (here to loopback) is never followed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from console.alerts.models import Alert, AlertRule, Notification
from console.alerts.notifications import send
from console.alerts.webhook_guard import WebhookRefused, check, post_json, validate_webhook_url

REFUSED = ["http://127.0.0.1:8000/hook", "http://localhost/hook", "http://10.1.2.3/hook", "http://172.16.0.1/",
           "http://192.168.1.10/hook", "http://169.254.169.254/latest/meta-data/", "http://[::1]/hook",
           "http://[::ffff:127.0.0.1]/hook", "http://[fd00::1]/hook", "http://[fe80::1]/hook", "http://0.0.0.0/",
           "http://224.0.0.1/", "http://100.64.0.1/", "https://127.1/hook"]


class Server:
    """A local HTTP server that records POSTs and answers ``status`` (with ``location`` for a redirect)."""

    def __init__(self, host: str, status: int = 200, location: str = "") -> None:
        self.posts: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                server.posts.append(self.path)
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def receiver() -> Iterator[Server]:
    s = Server("127.0.0.1")
    yield s
    s.close()


@pytest.mark.parametrize("url", REFUSED)
def test_non_public_targets_are_refused_on_save(url: str) -> None:
    with pytest.raises(ValidationError, match="non-public address"):
        validate_webhook_url(url)


def test_the_api_and_the_page_refuse_a_loopback_webhook(operator: APIClient, settings: Any) -> None:
    rule = {"name": "ssrf", "kind": "group_lag_messages", "target": "g", "threshold": 5,
            "webhook_url": "http://127.0.0.1:6379/"}
    resp = operator.post("/api/v1/alert-rules/", rule, format="json")
    assert resp.status_code == 400 and "non-public" in resp.json()["detail"]
    assert not AlertRule.objects.exists()
    existing = AlertRule.objects.create(name="ok", kind="group_lag_messages", target="g", threshold=5)
    patched = operator.patch(f"/api/v1/alert-rules/{existing.pk}/", {"webhook_url": "http://[::1]/x"}, format="json")
    assert patched.status_code == 400
    settings.CONSOLE_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.0/8"]
    assert operator.post("/api/v1/alert-rules/", rule, format="json").status_code == 201


def test_the_allow_list_takes_names_addresses_and_networks(settings: Any) -> None:
    settings.CONSOLE_WEBHOOK_ALLOWED_HOSTS = ["localhost", "10.0.0.0/8", "192.168.1.10"]
    for url in ("http://localhost/h", "http://10.9.8.7/h", "http://192.168.1.10/h"):
        validate_webhook_url(url)
    with pytest.raises(ValidationError):
        validate_webhook_url("http://192.168.1.11/h")
    with pytest.raises(WebhookRefused):
        check("http://172.16.0.1/h")


def _firing(url: str) -> tuple[AlertRule, Alert]:
    """A rule saved straight to the database (as if its URL was allowed when saved), and a firing alert."""
    rule = AlertRule.objects.create(name="r", kind="group_lag_messages", target="g", threshold=1, webhook_url=url)
    alert = Alert.objects.create(rule=rule, rule_name="r", kind=rule.kind, subject="g/T", state=Alert.FIRING,
                                 value=5, threshold=1, started=timezone.now(), fired_at=timezone.now())
    return rule, alert


def test_send_time_check_refuses_a_loopback_target(receiver: Server) -> None:
    rule, alert = _firing(receiver.url)
    [note] = send(rule, alert, "firing")
    assert not note.ok and note.status_code is None and "WebhookRefused" in note.error
    assert receiver.posts == []


def test_send_time_check_uses_the_allow_list(receiver: Server, settings: Any) -> None:
    settings.CONSOLE_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    rule, alert = _firing(receiver.url)
    [note] = send(rule, alert, "firing")
    assert note.ok and note.status_code == 200 and receiver.posts == ["/hook"]


@pytest.mark.parametrize("status", [302, 307])
def test_a_redirect_to_loopback_is_not_followed(receiver: Server, settings: Any, status: int) -> None:
    """The redirecting server (127.0.0.2, allow-listed on its own) points at the loopback receiver (127.0.0.1,
    not allowed): the POST stops at the redirect."""
    settings.CONSOLE_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.2"]
    redirector = Server("127.0.0.2", status=status, location=receiver.url)
    try:
        rule, alert = _firing(redirector.url)
        [note] = send(rule, alert, "firing")
        assert redirector.posts == ["/hook"]  # reached
        assert not note.ok and note.status_code == status and "redirects are not followed" in note.error
        assert post_json(redirector.url, {"x": 1}, 5, "test")[0] == status
    finally:
        redirector.close()
    assert receiver.posts == []  # never followed
    assert Notification.objects.filter(ok=True).count() == 0


def test_the_alerts_form_refuses_a_private_webhook(operator: APIClient) -> None:
    from django.contrib.auth.models import User

    user = User.objects.get(username="otto")
    page = Client()
    page.force_login(user)
    resp = page.post("/alerts/rules/new/", {
        "name": "p", "kind": "group_lag_messages", "target": "g", "threshold": "5", "for_evaluations": "1",
        "window_minutes": "10", "emails": "", "webhook_url": "http://192.168.0.1/h", "repeat_minutes": "0"})
    assert resp.status_code == 400 and b"non-public address" in resp.content
    assert not AlertRule.objects.exists()
