"""Per-user time zone: the preferences API, the settings page, and pages rendering times in the chosen zone."""

from __future__ import annotations

import zoneinfo

from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from console.models import AuditEvent
from console.selectors.preferences import timezones


def _page_client(role: str, username: str) -> Client:
    user = User.objects.create_user(username, password="pw")
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


def test_preferences_api_defaults_to_utc_and_changes_are_audited(viewer: APIClient) -> None:
    assert viewer.get("/api/v1/me/preferences/").json() == {"username": "vera", "timezone": "UTC"}
    resp = viewer.patch("/api/v1/me/preferences/", {"timezone": "Asia/Kolkata"}, format="json")
    assert resp.status_code == 200, resp.json()
    assert resp.json()["timezone"] == "Asia/Kolkata"
    assert viewer.get("/api/v1/me/preferences/").json()["timezone"] == "Asia/Kolkata"
    event = AuditEvent.objects.get(action="user.preferences")
    assert (event.username, event.before, event.after) == ("vera", {"timezone": "UTC"},
                                                           {"timezone": "Asia/Kolkata"})


def test_preferences_api_rejects_unknown_zones_and_roleless_users(viewer: APIClient, nobody: APIClient) -> None:
    for bad in ("Mars/Olympus", "", "../etc/passwd", "utc+1"):
        resp = viewer.patch("/api/v1/me/preferences/", {"timezone": bad}, format="json")
        assert resp.status_code == 400, (bad, resp.json())
        assert resp.json()["error"] == "invalid"
    assert viewer.get("/api/v1/me/preferences/").json()["timezone"] == "UTC"
    assert nobody.get("/api/v1/me/preferences/").status_code == 403
    assert APIClient().get("/api/v1/me/preferences/").status_code == 401


def test_zone_list_is_iana() -> None:
    zones = timezones()
    assert "UTC" in zones and "Europe/Paris" in zones and "America/Argentina/Buenos_Aires" in zones
    assert list(zones) == sorted(zones)


def test_settings_page_sets_the_zone_the_header_and_pages_use(cluster) -> None:  # type: ignore[no-untyped-def]
    client = _page_client("admin", "tzadmin")
    page = client.get("/settings/")
    assert page.status_code == 200
    assert b'data-testid="tz"' in page.content and b">UTC</a>" in page.content
    assert b'<option value="Asia/Kathmandu"' in page.content

    bad = client.post("/settings/", {"timezone": "Nowhere/Land"})
    assert bad.status_code == 400

    resp = client.post("/settings/", {"timezone": "Asia/Kathmandu"})  # UTC+05:45 all year, no DST
    assert resp.status_code == 302
    # an audit event written now shows in the audit page at +05:45
    AuditEvent.objects.all().delete()
    event = AuditEvent.objects.create(username="x", action="test.event", target="t")
    local = event.timestamp.astimezone(zoneinfo.ZoneInfo("Asia/Kathmandu"))
    audit = client.get("/audit/")
    assert audit.status_code == 200
    text = audit.content.decode()
    assert local.strftime("%Y-%m-%d %H:%M:%S") in text and "+0545" in text
    assert ">Asia/Kathmandu</a>" in text  # the header


def test_other_users_keep_their_own_zone(cluster) -> None:  # type: ignore[no-untyped-def]
    a = _page_client("viewer", "tz-a")
    b = _page_client("viewer", "tz-b")
    assert a.post("/settings/", {"timezone": "America/New_York"}).status_code == 302
    assert ">America/New_York</a>" in a.get("/settings/").content.decode()
    assert ">UTC</a>" in b.get("/settings/").content.decode()
