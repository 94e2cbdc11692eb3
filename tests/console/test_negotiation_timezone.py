"""The API's content negotiation reads ``Accept`` from ``META`` with DRF's own tokenising, and the time-zone
middleware leaves a request without a session anonymous without loading its user."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory
from django.utils.functional import empty
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request
from rest_framework.test import APIClient

from console.api.negotiation import ConsoleContentNegotiation
from console.middleware import _may_have_user

ACCEPTS = [None, "", "application/json", "text/html", "text/html;q=0.9, application/json", "*/*", "image/png",
           "application/json; indent=4", " , ,application/json", "x" * 300 + ", application/json",
           ",".join(["text/plain"] * 100 + ["application/json"]), "a" * 9000]


@pytest.mark.parametrize("accept", ACCEPTS, ids=range(len(ACCEPTS)))
def test_the_accept_list_is_drf_s(accept: str | None) -> None:
    extra = {} if accept is None else {"HTTP_ACCEPT": accept}
    request = Request(RequestFactory().get("/api/v1/topics/", **extra))
    assert ConsoleContentNegotiation().get_accept_list(request) == DefaultContentNegotiation().get_accept_list(request)


def test_the_api_negotiates_as_before(admin: APIClient) -> None:
    assert admin.get("/api/v1/topics/", HTTP_ACCEPT="application/json")["Content-Type"] == "application/json"
    assert admin.get("/api/v1/topics/")["Content-Type"] == "application/json"
    assert admin.get("/api/v1/topics/", HTTP_ACCEPT="text/html")["Content-Type"].startswith("text/html")
    assert admin.get("/api/v1/topics/", HTTP_ACCEPT="image/png").status_code == 406


def _request(session_key: str | None) -> HttpRequest:
    from django.contrib.auth.middleware import AuthenticationMiddleware

    request = RequestFactory().get("/")
    if session_key:
        request.COOKIES["sessionid"] = session_key
    SessionMiddleware(lambda r: HttpResponse()).process_request(request)
    AuthenticationMiddleware(lambda r: HttpResponse()).process_request(request)
    return request


def test_a_request_without_a_session_is_anonymous_without_loading_its_user(client) -> None:  # type: ignore[no-untyped-def]
    request = _request(None)
    assert not _may_have_user(request)
    assert request.user._wrapped is empty  # still lazy: never loaded
    user = User.objects.create_user("tz", password="pw")
    client.force_login(user)
    signed_in = _request(client.cookies["sessionid"].value)
    assert _may_have_user(signed_in) and signed_in.user == user
    evaluated = _request(None)
    assert isinstance(evaluated.user.is_authenticated, bool)  # evaluated already: used as it is
    assert _may_have_user(evaluated) and isinstance(evaluated.user._wrapped, AnonymousUser)
    bare = RequestFactory().get("/")
    bare.user = user  # set by a caller (a test's RequestFactory request): used as it is
    assert _may_have_user(bare)
