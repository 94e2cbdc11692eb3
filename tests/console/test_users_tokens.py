"""Users, roles and API tokens (admin only), over the API and the pages, each change audited without keys."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from console.models import ApiToken, AuditEvent
from console.services.tokens import key_hash


@pytest.fixture
def bob() -> User:
    user = User.objects.create_user("bob", password="pw")
    user.groups.add(Group.objects.get(name="viewer"))
    return user


def _token_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.mark.parametrize("method,path,data", [
    ("get", "/api/v1/users/", None),
    ("get", "/api/v1/users/bob/", None),
    ("patch", "/api/v1/users/bob/", {"role": "admin"}),
    ("post", "/api/v1/users/bob/token/", {}),
    ("delete", "/api/v1/users/bob/token/", None),
])
def test_viewers_and_operators_are_refused(viewer: APIClient, operator: APIClient, bob: User, method: str,
                                           path: str, data: dict | None) -> None:
    for client in (viewer, operator):
        resp = getattr(client, method)(path, data, format="json")
        assert resp.status_code == 403, resp.content
    assert not ApiToken.objects.filter(user=bob).exists()
    assert list(bob.groups.values_list("name", flat=True)) == ["viewer"]
    assert not AuditEvent.objects.filter(action__startswith="token.").exists()


def test_admin_creates_rotates_and_revokes_a_token(admin: APIClient, bob: User) -> None:
    listed = {u["username"]: u for u in admin.get("/api/v1/users/").json()["results"]}
    assert listed["bob"]["token"] is None and listed["bob"]["role"] == "viewer"
    assert listed["ada"]["token"]["key_prefix"]  # the admin's own token (conftest), shown by prefix only

    created = admin.post("/api/v1/users/bob/token/", {}, format="json")
    assert created.status_code == 201, created.json()
    key = created.json()["key"]
    assert created.json()["token"]["key_prefix"] == key[:8]
    assert _token_client(key).get("/api/v1/topics/").status_code == 200
    assert "key" not in str(admin.get("/api/v1/users/bob/").json()["token"]).replace("key_prefix", "")

    again = admin.post("/api/v1/users/bob/token/", {}, format="json")
    assert again.status_code == 409 and again.json()["error"] == "token_exists"

    rotated = admin.post("/api/v1/users/bob/token/", {"rotate": True}, format="json")
    assert rotated.status_code == 201
    new_key = rotated.json()["key"]
    assert new_key != key
    assert _token_client(key).get("/api/v1/topics/").status_code == 401
    assert _token_client(new_key).get("/api/v1/topics/").status_code == 200

    assert admin.delete("/api/v1/users/bob/token/").status_code == 204
    assert _token_client(new_key).get("/api/v1/topics/").status_code == 401
    assert admin.delete("/api/v1/users/bob/token/").status_code == 404

    events = list(AuditEvent.objects.filter(action__startswith="token.").order_by("id"))
    assert [(e.action, e.target, e.username) for e in events] == [
        ("token.create", "bob", "ada"), ("token.rotate", "bob", "ada"), ("token.revoke", "bob", "ada")]
    trail = str([(e.before, e.after) for e in events])
    assert key not in trail and new_key not in trail and key[:8] in trail


def test_admin_assigns_roles(admin: APIClient, superuser: APIClient, bob: User) -> None:
    resp = admin.patch("/api/v1/users/bob/", {"role": "operator"}, format="json")
    assert resp.status_code == 200 and resp.json()["role"] == "operator"
    assert list(bob.groups.values_list("name", flat=True)) == ["operator"]
    assert admin.patch("/api/v1/users/bob/", {"role": None}, format="json").json()["role"] is None
    assert admin.patch("/api/v1/users/bob/", {"role": "king"}, format="json").status_code == 400
    assert admin.patch("/api/v1/users/nobody-here/", {"role": "viewer"}, format="json").status_code == 404
    own = admin.patch("/api/v1/users/ada/", {"role": "viewer"}, format="json")
    assert own.status_code == 409 and own.json()["error"] == "own_role"
    su = admin.patch("/api/v1/users/root/", {"role": "viewer"}, format="json")
    assert su.status_code == 409 and su.json()["error"] == "superuser"
    roles = [(e.before, e.after) for e in AuditEvent.objects.filter(action="user.role").order_by("id")]
    assert roles == [({"role": "viewer"}, {"role": "operator"}), ({"role": "operator"}, {"role": None})]


def test_users_page_token_actions_need_confirmation(bob: User) -> None:
    ada = User.objects.create_user("page-admin", password="pw")
    ada.groups.add(Group.objects.get(name="admin"))
    page = Client()
    page.force_login(ada)
    listing = page.get("/users/")
    assert listing.status_code == 200 and b'data-testid="user-bob"' in listing.content

    confirm = page.get("/users/bob/token/create/")
    assert confirm.status_code == 200 and b"I understand" in confirm.content
    assert page.post("/users/bob/token/create/", {}).status_code == 400  # not confirmed
    assert not ApiToken.objects.filter(user=bob).exists()
    done = page.post("/users/bob/token/create/", {"confirm": "yes"})
    assert done.status_code == 201
    key = re.search(rb'data-testid="token-key">([0-9a-f]+)<', done.content).group(1).decode()
    assert ApiToken.objects.get(user=bob).key_hash == key_hash(key)
    assert key.encode() not in page.get("/users/").content  # shown once, then by prefix only

    assert page.post("/users/bob/token/revoke/", {}).status_code == 400
    assert page.post("/users/bob/token/revoke/", {"confirm": "yes"}).status_code == 302
    assert not ApiToken.objects.filter(user=bob).exists()
    assert page.post("/users/bob/role/", {"role": "operator"}).status_code == 302
    assert list(bob.groups.values_list("name", flat=True)) == ["operator"]
    assert page.get("/users/bob/token/explode/").status_code == 404

    otto = User.objects.create_user("page-operator", password="pw")
    otto.groups.add(Group.objects.get(name="operator"))
    page.force_login(otto)
    assert page.get("/users/").status_code == 403
    assert page.post("/users/bob/token/create/", {"confirm": "yes"}).status_code == 403
    assert page.post("/users/bob/role/", {"role": "admin"}).status_code == 403
    assert not ApiToken.objects.filter(user=bob).exists()
