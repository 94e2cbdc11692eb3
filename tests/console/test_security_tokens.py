"""API tokens: stored as a SHA-256 hash only, shown once, refused once expired, ``last_used`` noted; keys of the
old plaintext authtoken table are migrated to hashes (migration 0006)."""

from __future__ import annotations

import hashlib
import importlib
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from console.models import ApiToken, AuditEvent
from console.services import tokens


@pytest.fixture
def bob_admin_page() -> Client:
    """A signed-in admin's page client, and a user bob without a token."""
    _bob()
    admin_user = User.objects.create_user("page-admin", password="pw")
    admin_user.groups.add(Group.objects.get(name="admin"))
    client = Client()
    client.force_login(admin_user)
    return client


def _client(key: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return c


def _bob() -> User:
    user = User.objects.create_user("bob", password="pw")
    user.groups.add(Group.objects.get(name="viewer"))
    return user


def test_the_key_is_stored_hashed_and_shown_only_in_the_creation_response(admin: APIClient) -> None:
    _bob()
    created = admin.post("/api/v1/users/bob/token/", {"expires_days": 7}, format="json")
    assert created.status_code == 201, created.json()
    key = created.json()["key"]
    row = ApiToken.objects.get(user__username="bob")
    assert row.key_hash == hashlib.sha256(key.encode()).hexdigest() and row.key_prefix == key[:8]
    stored = " ".join(str(v) for v in ApiToken.objects.filter(pk=row.pk).values().first().values())
    assert key not in stored  # no column holds the key
    assert timedelta(days=6, hours=23) < row.expires - timezone.now() <= timedelta(days=7)
    for later in (admin.get("/api/v1/users/bob/"), admin.get("/api/v1/users/")):
        assert key not in later.content.decode() and key[:8] in later.content.decode()
    events = AuditEvent.objects.filter(action="token.create")
    assert events.count() == 1 and key not in str(events[0].after)
    assert _client(key).get("/api/v1/topics/").status_code == 200


def test_the_page_shows_a_new_key_once(bob_admin_page: Client) -> None:
    done = bob_admin_page.post("/users/bob/token/create/", {"confirm": "yes"})
    assert done.status_code == 201
    row = ApiToken.objects.get(user__username="bob")
    listing = bob_admin_page.get("/users/").content.decode()
    assert row.key_prefix in listing and "never" in listing  # last used: never
    html = done.content.decode()
    start = html.index('data-testid="token-key">') + len('data-testid="token-key">')
    key = html[start:html.index("<", start)]
    assert tokens.key_hash(key) == row.key_hash and key not in listing


def test_an_expired_token_is_refused(admin: APIClient) -> None:
    bob = _bob()
    _, key = tokens.issue(bob)
    assert _client(key).get("/api/v1/topics/").status_code == 200
    ApiToken.objects.filter(user=bob).update(expires=timezone.now() - timedelta(seconds=1))
    tokens.clear_cache()  # as another process that wrote the row: seen once the cache entry is gone (see below)
    refused = _client(key).get("/api/v1/topics/")
    assert refused.status_code == 401 and "expired" in refused.json()["detail"]
    assert _client(key[:-1] + ("0" if key[-1] != "0" else "1")).get("/api/v1/topics/").status_code == 401


def test_last_used_is_set_on_use_and_refreshed_at_most_once_a_minute() -> None:
    bob = _bob()
    _, key = tokens.issue(bob)
    assert ApiToken.objects.get(user=bob).last_used is None
    assert _client(key).get("/api/v1/topics/").status_code == 200
    first = ApiToken.objects.get(user=bob).last_used
    assert first is not None and timezone.now() - first < timedelta(minutes=1)
    tokens.verify(key, now=first + timedelta(seconds=30))
    assert ApiToken.objects.get(user=bob).last_used == first
    tokens.verify(key, now=first + timedelta(minutes=2))
    assert ApiToken.objects.get(user=bob).last_used == first + timedelta(minutes=2)
    assert admin_listing_last_used(bob) == (first + timedelta(minutes=2)).isoformat()


def admin_listing_last_used(user: User) -> str:
    from console.selectors.users import user_json

    return str(user_json(User.objects.get(pk=user.pk))["token"]["last_used"])


def test_an_inactive_users_token_is_refused() -> None:
    bob = _bob()
    _, key = tokens.issue(bob)
    bob.is_active = False
    bob.save()
    assert _client(key).get("/api/v1/topics/").status_code == 401


def test_plaintext_authtoken_keys_are_migrated_to_hashes() -> None:
    bob = _bob()
    legacy_key = "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cursor:
        cursor.execute('CREATE TABLE "authtoken_token" ("key" varchar(40) PRIMARY KEY,'
                       ' "created" timestamp with time zone NOT NULL, "user_id" integer NOT NULL)')
        cursor.execute('INSERT INTO "authtoken_token" VALUES (%s, %s, %s)', [legacy_key, timezone.now(), bob.pk])
    try:
        migration = importlib.import_module("console.migrations.0006_security")
        migration.hash_legacy_tokens(apps, SimpleNamespace(connection=connection))  # it uses only the connection
        with connection.cursor() as cursor:
            cursor.execute('SELECT COUNT(*) FROM "authtoken_token"')
            assert cursor.fetchone()[0] == 0  # no plaintext key left
    finally:
        with connection.cursor() as cursor:
            cursor.execute('DROP TABLE "authtoken_token"')
    row = ApiToken.objects.get(user=bob)
    assert row.key_hash == tokens.key_hash(legacy_key) and row.expires is not None
    assert _client(legacy_key).get("/api/v1/topics/").status_code == 200


def test_create_api_token_command_prints_a_working_key(capsys) -> None:  # type: ignore[no-untyped-def]
    from django.core.management import call_command

    _bob()
    call_command("create_api_token", "bob")
    key = capsys.readouterr().out.split()[2]
    assert _client(key).get("/api/v1/topics/").status_code == 200


def test_a_verified_token_is_served_from_the_cache_without_a_query(django_assert_num_queries) -> None:  # type: ignore[no-untyped-def]
    bob = _bob()
    _, key = tokens.issue(bob)
    first = tokens.verify(key)  # looked up, last_used written, cached
    with django_assert_num_queries(0):
        again = tokens.verify(key, now=first.last_used + timedelta(seconds=30))
    assert again.pk == first.pk and again.user.username == "bob"
    assert again is not first and again.user is not first.user  # each use gets its own copies
    again.user.first_name = "changed by one request"
    again._state.fields_cache["extra"] = again.user._state.fields_cache["extra"] = "cached by one request"
    later = tokens.verify(key)
    assert later.user.first_name == ""
    assert "extra" not in later._state.fields_cache and "extra" not in later.user._state.fields_cache
    assert later._state.db == "default" and not later._state.adding and not later.user._state.adding


def test_the_cache_serves_a_revoked_token_only_within_its_seconds(settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    settings.CONSOLE_API_TOKEN_CACHE_SECONDS = 5
    bob = _bob()
    _, key = tokens.issue(bob)
    clock = [1000.0]
    monkeypatch.setattr(tokens.time, "monotonic", lambda: clock[0])
    tokens.verify(key)
    with connection.cursor() as cur:  # another process revokes it: no signal reaches this one
        cur.execute(f"DELETE FROM {ApiToken._meta.db_table} WHERE user_id = %s", [bob.pk])
    clock[0] += 4.9
    assert tokens.verify(key).user.username == "bob"  # the documented window
    clock[0] += 0.2
    with pytest.raises(tokens.TokenRefused, match="Invalid token"):
        tokens.verify(key)


def test_revocation_and_deactivation_in_this_process_take_effect_at_once(admin: APIClient) -> None:
    bob = _bob()
    _, key = tokens.issue(bob)
    assert _client(key).get("/api/v1/topics/").status_code == 200  # cached now
    assert admin.delete("/api/v1/users/bob/token/").status_code in (200, 204)
    assert _client(key).get("/api/v1/topics/").status_code == 401
    _, key = tokens.issue(bob)
    assert _client(key).get("/api/v1/topics/").status_code == 200
    bob.is_active = False
    bob.save()
    assert _client(key).get("/api/v1/topics/").status_code == 401


def test_a_cached_token_is_still_refused_once_it_expires() -> None:
    bob = _bob()
    token, key = tokens.issue(bob, expires_days=1)
    tokens.verify(key)
    with pytest.raises(tokens.TokenRefused, match="expired"):
        tokens.verify(key, now=token.expires + timedelta(seconds=1))


def test_the_cache_can_be_turned_off(settings, django_assert_num_queries) -> None:  # type: ignore[no-untyped-def]
    settings.CONSOLE_API_TOKEN_CACHE_SECONDS = 0
    bob = _bob()
    _, key = tokens.issue(bob)
    first = tokens.verify(key)
    with django_assert_num_queries(1):
        tokens.verify(key, now=first.last_used + timedelta(seconds=30))
