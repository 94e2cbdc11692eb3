"""Message pages: search by id or by topic + key, and a message's detail (body only for operators and admins,
always rendered as escaped text)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from console.roles import OPERATOR, VIEWER, has_role
from console.selectors import messages as selectors
from console.selectors import tracking
from console.selectors.clients import direct_targets
from console.selectors.ui_messages import body_views, reproduce_topic
from console.views.base import page
from console.views.forms import BrowseForm, MessageSearchForm

SEARCH_LIMIT = 64
BROWSE_PAGE = 50


@page(VIEWER)
@require_http_methods(["GET"])
def message_search(request: HttpRequest) -> HttpResponse:
    form = MessageSearchForm(request.GET or None)
    context: dict[str, object] = {"form": form, "results": None}
    if form.is_bound and form.is_valid():
        d = form.cleaned_data
        if d["msg_id"]:
            url = reverse("message-page", kwargs={"msg_id": d["msg_id"]})
            return redirect(f"{url}?{urlencode({'topic': d['topic']})}" if d["topic"] else url)
        found, truncated = selectors.messages_by_key(d["topic"], d["key"], SEARCH_LIMIT)
        context.update(results=[selectors.message_json(m, with_body=False) for m in found], truncated=truncated,
                       limit=SEARCH_LIMIT)
    return render(request, "console/message_search.html", context, status=400 if form.errors else 200)


def detail_context(request: HttpRequest, msg_id: str, topic: str) -> dict[str, Any]:
    """The message page's context; operators also get the online clients they may consume it directly with."""
    msg = selectors.find_message(msg_id, topic)
    can_read = has_role(request.user, OPERATOR)
    data = selectors.message_json(msg, with_body=False)
    consumption = tracking.consumption_status(msg)
    return {"m": data, "body": body_views(msg.body) if can_read else None, "can_read_bodies": can_read,
            "properties": sorted(data["properties"].items()), "reproduce_topic": reproduce_topic(msg),
            "consumption": consumption,
            "direct_targets": direct_targets(consumption) if can_read else []}


@page(VIEWER)
@require_http_methods(["GET"])
def message_detail(request: HttpRequest, msg_id: str) -> HttpResponse:
    return render(request, "console/message_detail.html",
                  detail_context(request, msg_id, request.GET.get("topic", "").strip()))


@page(VIEWER)
@require_http_methods(["GET"])
def message_browse(request: HttpRequest) -> HttpResponse:
    """Every message of a topic stored in [begin, end], oldest first, a page at a time with the API's cursor
    (``selectors.browse``); "truncated" (more in the range) shows with a link to the next page."""
    form = BrowseForm(request.GET or None)
    context: dict[str, object] = {"form": form, "results": None, "page_size": BROWSE_PAGE}
    if form.is_bound and form.is_valid():
        d = form.cleaned_data
        cursor = request.GET.get("cursor", "").strip()
        begin_ms = max(0, int(d["begin"].timestamp() * 1000))
        end_ms = int(d["end"].timestamp() * 1000) if d.get("end") else selectors.MAX_TIMESTAMP_MS
        found, nxt = selectors.browse(d["topic"], begin_ms, end_ms, cursor, BROWSE_PAGE, d.get("sql", ""))
        params = {k: v for k, v in request.GET.items() if k in ("topic", "begin", "end", "sql")}
        context.update(results=[selectors.message_json(m, with_body=False) for m in found], truncated=nxt is not None,
                       next_url=f"?{urlencode({**params, 'cursor': nxt})}" if nxt else None,
                       first_url=f"?{urlencode(params)}", paged=bool(cursor))
    return render(request, "console/message_browse.html", context, status=400 if form.errors else 200)
