"""Schemathesis against the console's own OpenAPI schema, with a live name server and broker: every operation,
as an authenticated admin (the role that may call all of them), must never answer with a 5xx.

The schema is loaded from the Django WSGI application (``/api/v1/schema/``, which needs authentication too) and
the requests go through the same application in-process, so they share the test database; the broker calls are
real (the console suite's ``cluster``). A topic with a message, a consumer group with a dead letter and a job
exist first. Most generated names do not exist, which exercises the 400/404 paths; names that happen to be
valid go to the broker for real.

Every operation is run in both generation modes (positive: data that fits the schema; negative: data that
does not). Nothing is excluded.

Why not ``schemathesis.pytest.from_fixture(...).parametrize()``: with the pinned pytest 9.2 it fails before
running anything (it sets ``request.node._nodeid``, which pytest 9 no longer has), so this test drives each
operation's Hypothesis strategy (``APIOperation.as_strategy``) itself, with the same call and check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from console.models import Job
from console.services.tokens import issue
from tests.console.test_groups_dlq import _make_dead_letter
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

MAX_EXAMPLES = 10  # per operation and generation mode


@pytest.fixture(autouse=True)
def _keep_the_test_connection() -> Any:
    """What Django's test client does around each request: the app's ``close_old_connections`` on request
    start/finish would close the test's connection (inside its transaction), which PostgreSQL then refuses to
    use; SQLite's in-memory test database only survived it because closing that one is a no-op."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def admin_token(db: None) -> str:
    user = User.objects.create_user("schemathesis", password="pw", is_superuser=True)
    return issue(user)[1]


def test_api_never_answers_5xx(admin_token: str, cluster: Cluster, topic: str,
                               unique: Callable[[str], str]) -> None:
    _make_dead_letter(cluster, topic, unique("fuzzgroup"))
    Job.objects.create(kind="dlq.resend", target="g", total=1, params={"group": "g"})
    auth = {"Authorization": f"Token {admin_token}"}
    schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", get_wsgi_application(), headers=auth)

    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20, [op.label for op in operations]
    failures: dict[str, str] = {}
    unsatisfiable: list[str] = []
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            @given(case=operation.as_strategy(mode))
            @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            def run(case: Any) -> None:
                response = case.call(headers=auth)
                case.validate_response(response, checks=[not_a_server_error])

            try:
                run()
            except Unsatisfiable:  # negative mode, when every value fits the schema (a free-form path string)
                assert mode == GenerationMode.NEGATIVE, operation.label
                unsatisfiable.append(operation.label)
            except (AssertionError, BaseExceptionGroup) as exc:  # check failures, reported together at the end
                failures[f"{operation.label} ({mode})"] = str(exc)
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())


def test_found_create_topic_on_an_unknown_broker_is_a_400(admin: Any, unique: Callable[[str], str]) -> None:
    """What schemathesis found: ``brokers`` naming no broker was a 503 (the SDK's "no broker matches")."""
    resp = admin.post("/api/v1/topics/", {"name": unique("Nowhere"), "brokers": ["no-such-broker"]}, format="json")
    assert resp.status_code == 400 and resp.json()["error"] == "unknown_broker", resp.json()
    assert "broker-a" in resp.json()["detail"]


def test_found_a_nul_in_an_audit_filter_is_a_400(admin: Any) -> None:
    """What schemathesis found on PostgreSQL: a NUL character in ``?action=`` reached the query and PostgreSQL
    (whose text cannot hold one) raised, a 500. SQLite took it and found nothing."""
    resp = admin.get("/api/v1/audit/", {"action": "login\x00", "user": " bob "})
    assert resp.status_code == 400, resp.content
    assert admin.get("/api/v1/audit/", {"action": "no-such-action", "user": " bob "}).json()["results"] == []
