"""Health check, broker-down handling, the audit endpoint, roles, schema and settings helpers."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from console.models import AuditEvent
from console.roles import role_of
from console.services.audit import record
from console.settings import database_from_url
from tests.integration.cluster import free_port


def test_healthz_ok_without_auth(cluster, redis_url: str, settings) -> None:  # type: ignore[no-untyped-def]
    settings.CELERY_BROKER_URL = redis_url
    resp = APIClient().get("/healthz")
    assert resp.status_code == 200, resp.json()
    assert resp.json() == {"web": "ok", "database": "ok", "redis": "ok", "brokers": {"broker-a": "ok"}}


def test_healthz_reports_redis_down_without_failing(cluster, settings) -> None:  # type: ignore[no-untyped-def]
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    resp = APIClient().get("/healthz")
    assert resp.status_code == 200, resp.json()
    assert resp.json()["redis"].startswith("error") and resp.json()["brokers"] == {"broker-a": "ok"}


def test_healthz_503_when_the_name_server_is_down(broker_down: str) -> None:
    resp = APIClient().get("/healthz")
    assert resp.status_code == 503
    body = resp.json()
    assert body["database"] == "ok" and body["brokers"]["namesrv"].startswith("error")


@pytest.mark.parametrize("method,path,data", [
    ("get", "/api/v1/topics/", None),
    ("get", "/api/v1/topics/Anything/", None),
    ("get", "/api/v1/topics/Anything/route/", None),
    ("get", "/api/v1/messages/" + "0" * 32 + "/", None),
    ("get", "/api/v1/consumer-groups/g/", None),
    ("post", "/api/v1/topics/", {"name": "NewOne"}),
    ("post", "/api/v1/topics/Anything/messages/", {"messages": [{"body": "x"}]}),
    ("get", "/api/v1/consumer-groups/", None),
    ("get", "/api/v1/dlq/", None),
    ("get", "/api/v1/messages/?topic=Anything&begin=2020-01-01T00:00:00Z", None),
    ("post", "/api/v1/consumer-groups/g/nack/", {"topic": "Anything", "receipt_handles": ["broker-a!h"]}),
    ("post", "/api/v1/consumer-groups/g/reset-offset/", {"topic": "Anything", "timestamp": "latest",
                                                         "dry_run": True}),
    ("post", "/api/v1/consumer-groups/g/reset-offset/", {"topic": "Anything", "timestamp": "earliest"}),
])
def test_broker_down_is_503(broker_down: str, superuser: APIClient, method: str, path: str,
                            data: dict | None) -> None:
    resp = getattr(superuser, method)(path, data, format="json")
    assert resp.status_code == 503, resp.json()
    assert resp.json()["error"] == "broker_unavailable"


def test_unauthenticated_and_roleless(nobody: APIClient) -> None:
    anon = APIClient().get("/api/v1/topics/")
    assert anon.status_code == 401 and anon.json()["error"] == "not_authenticated"
    denied = nobody.get("/api/v1/topics/")
    assert denied.status_code == 403 and denied.json()["error"] == "permission_denied"


def test_operator_cannot_change_topics(operator: APIClient, topic: str, unique: Callable[[str], str]) -> None:
    assert operator.post("/api/v1/topics/", {"name": unique("Nope")}, format="json").status_code == 403
    assert operator.patch(f"/api/v1/topics/{topic}/", {"perm": 4}, format="json").status_code == 403
    assert operator.delete(f"/api/v1/topics/{topic}/").status_code == 403
    assert operator.get("/api/v1/audit/").status_code == 403


def test_superuser_is_admin(superuser: APIClient, unique: Callable[[str], str]) -> None:
    assert superuser.post("/api/v1/topics/", {"name": unique("Su")}, format="json").status_code == 201


def test_audit_filters_and_cursor(admin: APIClient, django_user_model) -> None:  # type: ignore[no-untyped-def]
    ada = django_user_model.objects.get(username="ada")
    for i in range(5):
        record(ada, "topic.create", f"A{i}", after={"i": i})
    record(None, "dlq.resend", "g", ok=False)
    page = admin.get("/api/v1/audit/", {"action": "topic.create", "limit": 3}).json()
    assert [e["target"] for e in page["results"]] == ["A4", "A3", "A2"] and page["next"]
    rest = admin.get("/api/v1/audit/", {"action": "topic.create", "cursor": page["next"]}).json()
    assert [e["target"] for e in rest["results"]] == ["A1", "A0"] and rest["next"] is None
    assert {e["user"] for e in admin.get("/api/v1/audit/", {"user": "ada"}).json()["results"]} == {"ada"}
    system = admin.get("/api/v1/audit/", {"action": "dlq.resend"}).json()["results"]
    assert system[0]["user"] is None and system[0]["ok"] is False
    bad = admin.get("/api/v1/audit/", {"cursor": "abc"})
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_cursor"
    assert AuditEvent.objects.count() == 6


def test_roles_come_from_the_data_migration(django_user_model) -> None:  # type: ignore[no-untyped-def]
    from django.contrib.auth.models import Group

    assert set(Group.objects.values_list("name", flat=True)) >= {"viewer", "operator", "admin"}
    user = django_user_model.objects.create_user("multi")
    user.groups.add(*Group.objects.filter(name__in=["viewer", "operator"]))
    assert role_of(user) == "operator"
    user.is_active = False
    assert role_of(user) is None


def test_schema_and_docs(viewer: APIClient) -> None:
    schema = viewer.get("/api/v1/schema/", {"format": "json"})
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/v1/topics/{name}/messages/" in paths
    assert {"/api/v1/consumer-groups/", "/api/v1/consumer-groups/{group}/nack/", "/api/v1/dlq/",
            "/api/v1/consumer-groups/{group}/reset-offset/", "/api/v1/jobs/{job_id}/"} <= set(paths)
    resend = paths["/api/v1/dlq/{group}/resend/"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert "async" in str(schema.json()["components"]["schemas"]) and resend
    assert viewer.get("/api/v1/docs/").status_code == 200


def test_database_from_url() -> None:
    pg = database_from_url("postgres://u:p%40ss@db.example:5433/console")
    assert pg == {"ENGINE": "django.db.backends.postgresql", "NAME": "console", "USER": "u", "PASSWORD": "p@ss",
                  "HOST": "db.example", "PORT": "5433"}
    assert database_from_url("sqlite:////tmp/x.db")["NAME"] == "/tmp/x.db"
    with pytest.raises(ValueError, match="unsupported"):
        database_from_url("mysql://x/y")
